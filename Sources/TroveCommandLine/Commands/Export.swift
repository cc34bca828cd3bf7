import Foundation
import Trove

let exportCommand = CommandSpec(
  name: "export",
  abstract: "Write a small store holding only what a record noted.",
  usage: "--record <record> [--json] (<directory> | <file>.tar | -)",
  arguments: [
    ("directory", "A new or empty folder: the new store."),
    ("file.tar", "A new file: the set as a tar archive ('-': standard output)."),
  ],
  options: [
    OptionSpec(
      names: ["--record"], valueName: "record",
      help: "The record ('trove record') whose objects and keys to export."),
    jsonOption,
  ],
  discussion: """
    Creates a Trove store at DIRECTORY (which must not exist, or be empty) and
    copies into it every object the record noted that this store still holds,
    with the keys it was used by: a CI cache to upload, or a benchmark's exact
    inputs. Objects are copied through a writer, hashed once on the way in, with
    their keys bound as each is stored. One the store no longer holds is named in a
    warning and skipped. On a failure, what was made at DIRECTORY is removed.
    'trove import DIRECTORY' reads it back into a store.

    A destination ending in .tar (or '-', standard output) gets a plain ustar
    archive instead: trove-export.json (the objects, their sizes and keys) first,
    then objects/xx/HEX per object. 'tar -tf' lists it, 'tar -xf' extracts it,
    'trove import FILE.tar' (or '-') reads it back, checking every member.
    """,
  run: { invocation in
    try invocation.requirePositionals(["directory"])
    if invocation.flag("--json") && invocation.positionals[0] == "-" {
      throw invocation.usageError("--json and '-' both print on standard output: choose one")
    }
    guard let record = invocation.value("--record") else {
      throw invocation.usageError("Missing expected option '--record <record>'")
    }
    guard Store.isValidRecordName(record) else {
      throw invocation.usageError(
        "invalid --record '\(record)': expected 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'"
      )
    }
    let named = invocation.positionals[0]
    if named == "-" && isatty(1) == 1 {
      throw invocation.usageError(
        "refusing to write an archive to a terminal: redirect standard output, or name a file")
    }
    let destination = named == "-" ? "<output>" : absolutePath(named)
    let store = try invocation.openStore()
    let objects = try store.record(named: record).objects
    let report: ExchangeReport
    if named == "-" {
      report = try store.exportArchive(objects, to: FileHandle.standardOutput)
    } else if named.hasSuffix(".tar") {
      report = try store.exportArchive(objects, toFile: destination)
    } else {
      report = try store.export(objects, to: destination)
    }
    for digest in report.missing {
      Output.warning(
        "\(digest) of record '\(record)' is no longer in store '\(store.root)': not exported")
    }
    if named != "-" {
      printExchange(report, "exported", "to", destination, json: invocation.flag("--json"))
    }
    return ExitStatus.success
  })

/// `path` made absolute, for messages.
func absolutePath(_ path: String) -> String {
  path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
}

/// Prints what an export or import did: one line, or `--json`.
func printExchange(
  _ report: ExchangeReport, _ verb: String, _ preposition: String, _ place: String, json: Bool
) {
  if json {
    Output.json(ExchangeRecord(report, place: place))
    return
  }
  // The numbers of `--json`: `objects` new here, `duplicates` already
  // there, `bytes` of both, `keys`.
  var line = "\(verb) \(Output.count(report.objects, "object"))"
  if report.duplicates > 0 { line += ", \(report.duplicates) already there" }
  line += " (\(Output.size(report.bytes)))"
  line += ", \(Output.count(report.keys, "key")) \(preposition) '\(place)'"
  Output.line(line)
}

/// `export --json` and `import --json`.
struct ExchangeRecord: Encodable {
  var place: String
  var objects: Int
  var duplicates: Int
  var bytes: Int64
  var keys: Int
  var missing: [String]
  var keptKeys: [String]

  init(_ report: ExchangeReport, place: String) {
    self.place = place
    objects = report.objects
    duplicates = report.duplicates
    bytes = report.bytes
    keys = report.keys
    missing = report.missing.map(\.description)
    keptKeys = report.keptKeys
  }
}
