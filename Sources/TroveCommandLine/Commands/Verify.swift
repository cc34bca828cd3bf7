import Trove

let verifyCommand = CommandSpec(
  name: "verify",
  abstract: "Check every object's bytes and the index; --repair fixes what it finds.",
  usage: "[--repair] [--json]",
  arguments: [],
  options: [
    OptionSpec(
      names: ["--repair"], valueName: nil,
      help:
        "Move corrupt objects to quarantine/, adopt orphan files, drop rows whose file is gone, fix wrong rows, move what is not an object to quarantine/."
    ),
    jsonOption,
  ],
  discussion: """
    Hashes every object (it reads the whole store) and compares the index with the
    objects folder. Exit 0 when the store is clean or was repaired, 65 when problems
    were found and not repaired.
    """,
  store: .writes(when: { $0.flag("--repair") }),
  run: { invocation in
    try invocation.requirePositionals([])
    let store = try invocation.openStore()
    let progress = ProgressLine.start("verify", unit: .bytes, for: invocation)
    let report = try store.verify(
      repair: invocation.flag("--repair"), onProgress: progress?.handler)
    progress?.finish()
    if invocation.flag("--json") {
      Output.json(report)
    } else {
      let fix = report.repaired
      for digest in report.corrupt {
        Output.line("corrupt: \(digest)\(fix ? " (moved to quarantine/)" : "")")
      }
      for path in report.unexpectedFiles {
        let moved = report.quarantined.contains(path)
        Output.line("unexpected: \(path) (\(moved ? "moved to quarantine/" : "left alone"))")
      }
      func count(_ n: Int, _ what: String, _ fixed: String, plural: String? = nil) -> String {
        Output.count(n, what, plural ?? what) + (fix && n > 0 ? " (\(fixed))" : "")
      }
      Output.line(
        "checked \(Output.count(report.checkedObjects, "object")) (\(Output.size(report.checkedBytes))) in "
          + String(format: "%.3f s", report.seconds) + ": "
          + [
            count(report.corrupt.count, "corrupt", "moved to quarantine/"),
            count(report.orphanFiles, "orphan file", "adopted", plural: "orphan files"),
            count(
              report.danglingRows, "row without a file", "dropped", plural: "rows without a file"),
            count(report.wrongRows, "wrong row", "corrected", plural: "wrong rows"),
            count(report.twins, "stored twice", "compressed copy removed"),
          ].joined(separator: ", ")
          + (report.vanished > 0 ? "; \(report.vanished) removed by others meanwhile" : ""))
    }
    return report.isClean || report.repaired ? ExitStatus.success : ExitStatus.dataError
  })
