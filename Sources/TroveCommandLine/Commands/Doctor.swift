import Foundation
import Trove

let doctorCommand = CommandSpec(
  name: "doctor",
  abstract: "Check the store and a work folder: filesystems, clones, links, locks, space.",
  usage: "[--json] [<dir>]",
  arguments: [("dir", "The folder you get files into (default: the current folder).")],
  options: [jsonOption],
  discussion: """
    Says, one line per check with 'ok' or 'warn', what the store and DIR are on and
    what works between them, with a line of advice under each warning: the
    filesystems of both, whether the store is writable, whether objects clone into
    DIR (probed with a real temp file, removed afterwards), whether they hard-link
    into it, whether file locks work in the store, its free space against min-free,
    and the index's journal mode. Exit 0 whenever it ran, warnings or not; 66 when
    there is no store, 73 when DIR is not a folder.
    """,
  closedPipeIsSuccess: true,
  run: { invocation in try doctor(invocation) })

/// `trove doctor`.
private func doctor(_ invocation: Invocation) throws -> Int32 {
  guard invocation.positionals.count <= 1 else {
    throw invocation.usageError("Unexpected argument '\(invocation.positionals[1])'")
  }
  let here = FileManager.default.currentDirectoryPath
  let given = invocation.positionals.first ?? "."
  let directory = given == "." ? here : given.hasPrefix("/") ? given : here + "/" + given
  let store = try invocation.openStore()
  let diagnosis = Hints.worded(try store.diagnose(destination: directory))
  if invocation.flag("--json") {
    Output.json(diagnosis)
    return ExitStatus.success
  }
  let width = diagnosis.checks.map(\.name.count).max() ?? 0
  for check in diagnosis.checks {
    let padded = check.name + String(repeating: " ", count: width - check.name.count)
    Output.line("\(check.status == .ok ? "ok  " : "warn")  \(padded)  \(check.detail)")
    if let advice = check.advice {
      Output.line(String(repeating: " ", count: width + 8) + "advice: " + advice)
    }
  }
  return ExitStatus.success
}
