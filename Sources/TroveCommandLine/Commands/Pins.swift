import Foundation
import Trove

let pinNameOption = OptionSpec(
  names: ["--name"], valueName: "name",
  help: "Whose pin this is (default: 'default'); other names' pins are untouched.")

let pinCommand = CommandSpec(
  name: "pin",
  abstract: "Keep objects from being swept, for good or for a while.",
  usage: "[--name <name>] [--for <duration>] [--local] (<digest-or-key>... | --record <record>)",
  arguments: [
    ("digest-or-key", "A digest (or its first 8+ hex digits), or a key bound with 'put --key'.")
  ],
  options: [
    pinNameOption,
    OptionSpec(
      names: ["--for"], valueName: "duration",
      help: "A lease: the pin lapses after this long (2h, 1d), even if its holder crashed."),
    OptionSpec(
      names: ["--record"], valueName: "record",
      help: "Pin every object the record noted ('trove record'), instead of naming them."),
    OptionSpec(
      names: ["--local"], valueName: nil,
      help:
        "Bring back from the remotes what the store no longer holds (and a key it lacks), then pin it."
    ),
  ],
  discussion: """
    A pinned object survives any budget and any maximum age. Pins carry a name, so
    several tools sharing a store keep their own; pinning again under the same
    name replaces that pin (and its lease). A pin keeps the store's own copy: sweeps
    never evict a pinned object, not even one a remote holds.

    Without --local, an object the store does not hold is an error (exit 1): a pin
    never downloads. With --local, such an object (one a sweep evicted because a
    remote holds it, say) is read through the store's remotes first, rehashed on
    its way in, and a key the store lacks is read from the remotes' key records;
    when this returns, the copy is local and stays so.

    With --record, the objects the record noted that the store still holds are
    pinned; each one it no longer holds is named on stderr, and the command
    exits 1 (the others are pinned all the same). With --record and --local, each
    one it no longer holds is brought back first; one that cannot be is named on
    stderr with the reason, and the command exits with the first one's status.
    """,
  store: .writes,
  keyLookup: { $0.flag("--local") ? .readThrough : [] },
  run: { invocation in
    if let record = invocation.value("--record") {
      return try pinRecord(record, invocation)
    }
    guard !invocation.positionals.isEmpty else {
      throw invocation.usageError("Missing expected argument '<digest-or-key>'")
    }
    let duration = try invocation.leaseDuration()
    let name = invocation.value("--name") ?? "default"
    let store = try invocation.openStore()
    let lease = duration.map { Duration.seconds($0) }
    for text in invocation.positionals {
      let digest = try invocation.digestOrKey(text, in: store)
      if invocation.flag("--local") {
        try store.pinLocal(digest, name: name, for: lease)
      } else {
        try store.pin(digest, name: name, for: lease)
      }
    }
    return ExitStatus.success
  })

/// `trove pin --record NAME`: pins what the record noted; exit 1 when
/// some of it is no longer stored.
private func pinRecord(_ record: String, _ invocation: Invocation) throws -> Int32 {
  try invocation.requirePositionals([])
  guard Store.isValidRecordName(record) else {
    throw invocation.usageError(
      "invalid --record '\(record)': expected 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'"
    )
  }
  let duration = try invocation.leaseDuration()
  let name = invocation.value("--name") ?? "default"
  let store = try invocation.openStore()
  var status = ExitStatus.success
  let lease = duration.map { Duration.seconds($0) }
  for digest in try store.recordedDigests([record]) {
    if invocation.flag("--local") {
      if let error = pinLocal(digest, name: name, for: lease, in: store) {
        Output.error("Error: \(error.withHint) (of record '\(record)')")
        if status == ExitStatus.success { status = ExitStatus.of(error) }
      }
      continue
    }
    guard try store.entry(for: digest) != nil else {
      Output.error(
        "Error: \(digest) of record '\(record)' is no longer in store '\(store.root)': not pinned")
      status = ExitStatus.failure
      continue
    }
    try store.pin(digest, name: name, for: lease)
  }
  return status
}

/// Pins `digest` locally (``Store/pinLocal(_:name:for:)``); the error
/// that kept it from being pinned, if any.
private func pinLocal(_ digest: BlobDigest, name: String, for lease: Duration?, in store: Store)
  -> TroveError?
{
  do throws(TroveError) {
    try store.pinLocal(digest, name: name, for: lease)
    return nil
  } catch {
    return error
  }
}

let unpinCommand = CommandSpec(
  name: "unpin",
  abstract: "Remove your pins of objects.",
  usage: "[--name <name>] <digest-or-key>...",
  arguments: [
    ("digest-or-key", "A digest (or its first 8+ hex digits), or a key bound with 'put --key'.")
  ],
  options: [pinNameOption],
  discussion: "Exit 1 if one had no pin under that name; pins under other names stay.",
  store: .writes,
  run: { invocation in
    guard !invocation.positionals.isEmpty else {
      throw invocation.usageError("Missing expected argument '<digest-or-key>'")
    }
    let name = invocation.value("--name") ?? "default"
    let store = try invocation.openStore()
    var status = ExitStatus.success
    for text in invocation.positionals {
      let digest = try invocation.digestOrKey(text, in: store)
      if try !store.unpin(digest, name: name) {
        Output.error("Error: \(digest) has no pin named '\(name)' in store '\(store.root)'")
        status = ExitStatus.failure
      }
    }
    return status
  })

let pinsCommand = CommandSpec(
  name: "pins",
  abstract: "List the pins.",
  usage: "[--json]",
  arguments: [],
  options: [jsonOption],
  discussion: """
    One line per pin: digest, name, and when its lease lapses (or 'never'); a lease
    that has lapsed is marked '(expired)': it no longer holds its object, and the
    next sweep removes it.
    """,
  closedPipeIsSuccess: true,
  run: { invocation in
    try invocation.requirePositionals([])
    // No store yet: no pins.
    let pins = try invocation.openStoreIfPresent()?.pins() ?? []
    let now = RelativeTime.now
    if invocation.flag("--json") {
      Output.json(pins.map { PinRecord($0, now: now) })
    } else {
      for pin in pins {
        let lease =
          pin.expires.map {
            Output.time($0)
              + (pin.isActive(at: Date(timeIntervalSince1970: Double(now) / 1e9))
                ? "" : " (expired)")
          }
          ?? "never"
        Output.line("\(pin.digest)  \(pin.name)  \(lease)")
      }
    }
    return ExitStatus.success
  })

/// One pin in `pins --json`, `ls --json` and `show --json`.
struct PinRecord: Encodable {
  var digest: String
  var name: String
  @Nullable var expires: String?
  var expired: Bool
  var created: String

  init(_ pin: Pin, now: Int64) {
    digest = pin.digest.description
    name = pin.name
    expires = pin.expires.map(Output.time)
    expired = !pin.isActive(at: Date(timeIntervalSince1970: Double(now) / 1e9))
    created = Output.time(pin.created)
  }
}

extension Invocation {
  /// `pin --for D`: a lease of D seconds, nil without `--for`. A lease of
  /// 0 would lapse as it is made: refused, as a negative one is.
  func leaseDuration() throws(UsageError) -> Int64? {
    guard let seconds = try duration("--for") else { return nil }
    guard seconds > 0 else {
      throw usageError(
        "invalid --for '\(value("--for") ?? "")': duration must be positive (without --for a pin has no lease)"
      )
    }
    return seconds
  }
}
