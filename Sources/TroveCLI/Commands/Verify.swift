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
      func count(_ n: Int, _ what: String, _ fixed: String) -> String {
        "\(n) \(what)\(fix && n > 0 ? " (\(fixed))" : "")"
      }
      Output.line(
        "checked \(report.checkedObjects) objects (\(Output.size(report.checkedBytes))) in "
          + String(format: "%.3f s", report.seconds) + ": "
          + [
            count(report.corrupt.count, "corrupt", "moved to quarantine/"),
            count(report.orphanFiles, "orphan files", "adopted"),
            count(report.danglingRows, "rows without a file", "dropped"),
            count(report.wrongRows, "wrong rows", "corrected"),
            count(report.twins, "stored twice", "compressed copy removed"),
          ].joined(separator: ", ")
          + (report.vanished > 0 ? "; \(report.vanished) removed by others meanwhile" : ""))
    }
    return report.isClean || report.repaired ? ExitStatus.success : ExitStatus.dataError
  })
