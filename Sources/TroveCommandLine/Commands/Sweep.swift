import Foundation
import Trove

let sweepCommand = CommandSpec(
  name: "sweep",
  abstract: "Trim the store to its budget and maximum age.",
  usage:
    "[--budget <size>] [--max-age <duration>] [--keep-record <record>]... [--dry-run] [--no-wait] [--json]",
  arguments: [],
  options: [
    OptionSpec(
      names: ["--budget"], valueName: "size",
      help: "Use this budget instead of the store's (500M, 10G, 1.5GiB, 0)."),
    OptionSpec(
      names: ["--max-age"], valueName: "duration",
      help: "Remove entries unused this long (30d, 12h) instead of the store's max-age."),
    OptionSpec(
      names: ["--keep-record"], valueName: "record",
      help: "Never remove what this record noted ('trove record'); repeatable."),
    OptionSpec(names: ["--dry-run"], valueName: nil, help: "Say what would go; remove nothing."),
    OptionSpec(
      names: ["--no-wait"], valueName: nil,
      help: "Fail (exit 75) instead of waiting when another sweep runs."),
    jsonOption,
  ],
  discussion: """
    Removes leftovers of dead writers in tmp/ (files, links, FIFOs, folders; one
    that cannot be removed is named on stderr and left, and the sweep goes on),
    then entries not used within the maximum age, then least recently used entries
    while the store is over its budget, down to the low-water mark (low-water ×
    budget). Pinned entries are never removed. Set the store's own budget with 'trove config set budget 10G'.
    With --keep-record, what the records noted is kept as if pinned: '--budget 0
    --keep-record NAME' leaves exactly the record's objects.
    """,
  store: .creates,
  run: { invocation in
    try invocation.requirePositionals([])
    var options = SweepOptions(
      budget: try invocation.size("--budget"),
      maxAge: try invocation.duration("--max-age").map { .seconds($0) },
      dryRun: invocation.flag("--dry-run"), wait: !invocation.flag("--no-wait"))
    let kept = invocation.allValues("--keep-record")
    for name in kept where !Store.isValidRecordName(name) {
      throw invocation.usageError(
        "invalid --keep-record '\(name)': expected 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'"
      )
    }
    let store = try invocation.openStore()
    options.protected = Set(try store.recordedDigests(kept))
    let progress = ProgressLine.start("sweep", unit: .bytes, for: invocation)
    let report = try store.sweep(options, onProgress: progress?.handler)
    progress?.finish()
    // Leftovers it could not remove: named, and the sweep still did its work.
    for error in report.temporaryErrors { Output.warning("\(error); left in place") }
    let unnamed = report.temporaryFailures - report.temporaryErrors.count
    if unnamed > 0 {
      Output.warning("\(unnamed) more leftovers could not be removed; left in place")
    }
    // Housekeeping that failed: named, and the sweep still did its work.
    for error in report.housekeepingErrors {
      Output.warning("\(error); the next sweep tries again")
    }
    if invocation.flag("--json") {
      Output.json(report)
      return ExitStatus.success
    }
    Output.line(sweepSummary(report))
    return ExitStatus.success
  })

/// One line saying what a sweep did, for `sweep` and `put -v`.
func sweepSummary(_ report: SweepReport) -> String {
  let verb = report.dryRun ? "would remove" : "removed"
  var line =
    "\(verb) \(Output.count(report.removedEntries, "entry", "entries")) (\(Output.size(report.removedBytes)))"
  if report.expiredEntries > 0 { line += ": \(report.expiredEntries) expired" }
  if report.evictedEntries > 0 {
    line += report.expiredEntries > 0 ? "," : ":"
    line += " \(report.evictedEntries) least recently used"
  }
  if let freed = report.freedBytes { line += "; freed \(Output.size(freed)) on the volume" }
  if report.reason != .diskFull {
    line += "; \(Output.count(report.temporaryFiles, "leftover temporary file"))"
    if report.temporaryFailures > 0 {
      line += " (\(report.temporaryFailures) could not be removed)"
    }
  }
  let r = report.reconciled
  if r.added + r.dropped + r.corrected + r.twins > 0 {
    line +=
      "; index: \(Output.count(r.added, "orphan")) adopted, \(r.dropped) missing dropped, \(r.corrected) corrected"
  }
  line += "; \(Output.size(report.bytesAfter)) in use"
  if let budget = report.budget {
    line += " of a \(CachePolicy.Quantities.formatSizeSetting(budget)) budget"
  }
  if report.isOverBudget {
    line += " (over budget: \(Output.size(report.pinnedBytes)) pinned)"
  }
  line += String(format: "; took %.3f s", report.seconds)
  return line
}

/// Why a sweep ran, for people.
func describe(_ reason: SweepReason) -> String {
  switch reason {
  case .requested: return "sweep"
  case .overBudget: return "over budget after a put"
  case .lowSpace: return "volume below min-free before a put"
  case .diskFull: return "volume full during a put"
  }
}
