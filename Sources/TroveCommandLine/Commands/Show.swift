import Foundation
import Trove

let showCommand = CommandSpec(
  name: "show",
  abstract: "Show everything the store records about one object.",
  usage: "[--json] <digest-or-key>",
  arguments: [("digest-or-key", "A digest (or 8 or more of its first hex digits), or a key.")],
  options: [jsonOption],
  discussion: """
    Labelled lines: digest, size, stored form and bytes, allocated bytes, created
    and last use (UTC, and how long ago), each key, each pin (with its lease, and
    '(expired)' for one that lapsed), each publisher's checksum a fetch verified,
    and how much of the object file shares extents with other files (clones made
    by 'get'; 'unknown' where the filesystem cannot say). Reading the record does
    not count as a use. '--json': one object with every field ('null' for what is
    absent).
    """,
  closedPipeIsSuccess: true,
  run: { invocation in
    try invocation.requirePositionals(["digest-or-key"])
    let reference = try invocation.reference(invocation.positionals[0])
    guard let store = try invocation.openStoreIfPresent() else {
      throw try invocation.missWithoutStore(invocation.positionals[0])
    }
    let digest = try invocation.resolve(reference, in: store)
    guard let details = try store.details(for: digest) else {
      throw TroveError(
        .notFound, "no object \(digest) in store '\(store.root)'", value: digest.description)
    }
    let record = ObjectRecord(
      details, checksums: try store.checksums(of: digest), extents: store.extents(of: digest),
      now: RelativeTime.now)
    if invocation.flag("--json") {
      Output.json(record)
    } else {
      for (label, value) in record.lines(details) {
        Output.line(label + String(repeating: " ", count: max(1, 13 - label.count)) + value)
      }
    }
    return ExitStatus.success
  })

/// One object in `show --json`: the fields of `ls --json` and the
/// checksums and shared extents.
struct ObjectRecord: Encodable {
  var entry: EntryRecord
  var checksums: [String]
  var extents: UInt64?
  var sharedBytes: UInt64?
  let now: Int64

  init(_ details: EntryDetails, checksums: [Checksum], extents: ExtentSummary?, now: Int64) {
    entry = EntryRecord(details, now: now)
    self.checksums = checksums.map(\.description)
    self.extents = extents?.extents
    sharedBytes = extents?.sharedBytes
    self.now = now
  }

  func encode(to encoder: any Encoder) throws {
    try entry.encode(to: encoder)
    var c = encoder.container(keyedBy: CodingKeys.self)
    try c.encode(checksums, forKey: .checksums)
    try c.encode(extents, forKey: .extents)
    try c.encode(sharedBytes, forKey: .sharedBytes)
  }

  private enum CodingKeys: String, CodingKey { case checksums, extents, sharedBytes }

  /// The human form: (label, value) lines.
  func lines(_ details: EntryDetails) -> [(String, String)] {
    let e = details.entry
    func bytes(_ n: Int64) -> String { "\(Output.size(n)) (\(n) bytes)" }
    func when(_ t: Int64) -> String { "\(Output.time(t)) (\(RelativeTime.describe(t, now: now)))" }
    func when(_ d: Date) -> String { "\(Output.time(d)) (\(RelativeTime.describe(d, now: now)))" }
    var lines: [(String, String)] = [
      ("digest", e.digest.description),
      ("size", bytes(e.size)),
      ("stored", (e.isCompressed ? "zstd, " : "raw, ") + bytes(e.storedBytes)),
      ("allocated", bytes(e.allocatedBytes)),
      ("created", when(e.created)),
      ("last access", when(e.lastAccess)),
    ]
    lines += details.keys.isEmpty ? [("keys", "none")] : details.keys.map { ("key", $0) }
    lines +=
      details.pins.isEmpty
      ? [("pins", "none")]
      : details.pins.map { pin in
        let lease = pin.expires.map { end in
          pin.isActive(at: Date(timeIntervalSince1970: Double(now) / 1e9))
            ? "lease until \(when(end))" : "expired: lease lapsed \(when(end))"
        }
        return ("pin", pin.name + ", " + (lease ?? "no lease"))
      }
    lines += checksums.map { ("checksum", $0) }
    let shared: String
    if let sharedBytes, let extents {
      shared =
        "\(Output.size(Int64(sharedBytes))) of the file shares extents with other files (\(extents) extent\(extents == 1 ? "" : "s"))"
    } else {
      shared = "unknown (the filesystem cannot say)"
    }
    lines.append(("shared", shared))
    return lines
  }
}
