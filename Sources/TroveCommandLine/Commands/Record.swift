import Foundation
import Trove

let recordCommand = CommandSpec(
  name: "record",
  abstract: "Record what runs use: every digest and key they get, fetch, put or ask the path of.",
  usage: "start|stop|rm <name> | show <name> [--json] | ls [--json]",
  arguments: [
    ("name", "The record's name: 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'.")
  ],
  options: [jsonOption],
  discussion: """
    'start NAME' turns a record on: from then on every trove process (and every
    program using the library) that opens the store notes in it each object it
    gets, fetches, puts or gives the path of, and each key it used for one.
    TROVE_RECORD=NAME in a process's environment records that process only (the
    record is made if missing). 'stop NAME' turns it off for processes started
    afterwards; what it noted stays, for:

      trove record show NAME [--json]       what it noted: digest, size, keys
      trove pin --record NAME --for 6h      pin exactly that set
      trove sweep --keep-record NAME        evict everything else

    'ls' lists the records; 'rm NAME' removes one (the objects stay).
    'show' lists each object once, in the order first used: digest, size (or
    'missing' when the store no longer holds it) and its keys.
    """,
  closedPipeIsSuccess: true,
  run: { invocation in try record(invocation) })

/// `trove record`.
private func record(_ invocation: Invocation) throws -> Int32 {
  let actions = ["start", "stop", "show", "ls", "rm"]
  guard let action = invocation.positionals.first else {
    throw invocation.usageError(
      "Missing expected argument '<action>': one of \(actions.joined(separator: ", "))")
  }
  guard actions.contains(action) else {
    throw invocation.usageError(
      "unknown action '\(action)': expected one of \(actions.joined(separator: ", "))")
  }
  if action == "ls" {
    try invocation.requirePositionals(["action"])
  } else {
    try invocation.requirePositionals(["action", "name"])
  }
  if invocation.flag("--json") && !["show", "ls"].contains(action) {
    throw invocation.usageError("--json is for 'record show' and 'record ls'")
  }
  let name = invocation.positionals.count > 1 ? invocation.positionals[1] : ""
  if action != "ls" && !Store.isValidRecordName(name) {
    throw invocation.usageError(
      "invalid record name '\(name)': expected 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'"
    )
  }
  let store = try Store(
    StoreConfiguration(
      root: try invocation.storeRoot, createIfMissing: action == "start",
      onWarning: { Output.warning($0) }, recordName: nil, remedyWording: Hints.suffix))
  switch action {
  case "start":
    try store.startRecord(name)
  case "stop":
    if try !store.stopRecord(name) {
      Output.warning("record '\(name)' was not on")
    }
  case "rm":
    guard try store.removeRecord(name) else {
      throw TroveError(.notFound, "no record '\(name)' in store '\(store.root)'", value: name)
    }
  case "ls":
    let rows = try store.recordNames().map { row in
      RecordSummary(
        name: row.name, active: row.isActive,
        objects: (try? store.record(named: row.name).objects.count) ?? 0)
    }
    if invocation.flag("--json") {
      Output.json(rows)
    } else {
      for row in rows {
        Output.line(
          "\(row.name)  \(row.active ? "on" : "off")  \(row.objects) \(row.objects == 1 ? "object" : "objects")"
        )
      }
    }
  default:
    let record = try store.record(named: name)
    if record.damagedLines > 0 {
      Output.warning(
        "record '\(name)' has \(record.damagedLines) unreadable lines in store '\(store.root)'; skipped"
      )
    }
    let rows = try record.objects.map { object in
      RecordedObjectRow(object, entry: try store.entry(for: object.digest))
    }
    if invocation.flag("--json") {
      Output.json(rows)
    } else {
      for row in rows {
        let size = row.size.map(Output.size) ?? "missing"
        Output.line(([row.digest, size] + row.keys).joined(separator: "  "))
      }
    }
  }
  return ExitStatus.success
}

/// One record in `record ls --json`.
struct RecordSummary: Encodable {
  var name: String
  var active: Bool
  var objects: Int
}

/// One object in `record show --json`.
struct RecordedObjectRow: Encodable {
  var digest: String
  var keys: [String]
  @Nullable var size: Int64?
  var stored: Bool
  var firstUsed: String
  var lastUsed: String

  init(_ object: RecordedObject, entry: StoreEntry?) {
    digest = object.digest.description
    keys = object.shownKeys
    size = entry?.size
    stored = entry != nil
    firstUsed = Output.time(object.firstUsed)
    lastUsed = Output.time(object.lastUsed)
  }
}
