import Foundation
import Trove

/// `trove remote status [--json]`: each remote's breaker and what reading
/// through it did.
func remoteStatus(_ invocation: Invocation) throws -> Int32 {
  let statuses = try invocation.openStore().remoteStatus()
  if invocation.flag("--json") {
    Output.json(statuses.map(RemoteStatusRecord.init))
    return ExitStatus.success
  }
  for s in statuses {
    let state: String
    if let retryAt = s.retryAt, s.isSkipped {
      state =
        "unavailable (\(Output.count(Int64(s.consecutiveFailures), "failure")) in a row), skipped until \(Output.time(retryAt))"
    } else if s.consecutiveFailures > 0 {
      state =
        "unavailable (\(Output.count(s.consecutiveFailures, "failure")) in a row), to be probed"
    } else {
      state = "available"
    }
    Output.line("\(s.name)  \(s.url)  \(s.readOnly ? "read-only" : "read-write")  \(state)")
    if let queued = s.queued {
      Output.line(
        "  \(Output.count(queued.objects, "object")) (\(Output.size(queued.bytes))) queued for upload, write \(s.write.rawValue)"
      )
    }
    if let tooLarge = s.tooLarge, tooLarge.objects > 0 {
      Output.line(
        "  \(Output.count(tooLarge.objects, "object")) (\(Output.size(tooLarge.bytes))) over its max-object-size: not uploaded"
      )
    }
    Output.line(
      "  \(Output.count(s.hits, "hit")) (\(Output.size(s.bytesPulled)) pulled), \(Output.count(s.misses, "miss", "misses")), \(s.corrupt) corrupt, \(Output.count(s.errors, "error")), \(s.skipped) skipped"
        + (s.trust.isEmpty && s.untrusted == 0 ? "" : ", untrusted \(s.untrusted)")
    )
    if !s.trust.isEmpty {
      Output.line(
        "  signed: only what \(Output.count(Int64(s.trust.count), "trusted key")) signed is read")
    }
  }
  return ExitStatus.success
}

/// One remote in `remote status --json`.
struct RemoteStatusRecord: Encodable {
  var name: String
  var url: String
  var readOnly: Bool
  /// `available`, `unavailable` (skipped until `retryAt`) or `probing`
  /// (its interval is over: the next read probes it).
  var state: String
  var consecutiveFailures: Int64
  @Nullable var retryAt: String?
  var hits: Int64
  var misses: Int64
  var corrupt: Int64
  var bytesPulled: Int64
  var errors: Int64
  var skipped: Int64
  /// Records and objects no trusted key signed: taken as misses.
  var untrusted: Int64
  /// The keys it must be signed by (`ed25519:…`); empty: read unsigned.
  var trust: [String]
  /// `async`, `sync` or `off`.
  var write: String
  /// The upload queue; null for a read-only remote.
  @Nullable var queuedObjects: Int64?
  @Nullable var queuedBytes: Int64?
  /// Objects held here that are over its max-object-size; null for a
  /// read-only remote.
  @Nullable var tooLargeObjects: Int64?
  @Nullable var tooLargeBytes: Int64?

  init(_ s: RemoteStatus) {
    name = s.name
    url = s.url
    readOnly = s.readOnly
    state = s.consecutiveFailures == 0 ? "available" : s.isSkipped ? "unavailable" : "probing"
    consecutiveFailures = s.consecutiveFailures
    retryAt = s.retryAt.map(Output.time)
    hits = s.hits
    misses = s.misses
    corrupt = s.corrupt
    bytesPulled = s.bytesPulled
    errors = s.errors
    skipped = s.skipped
    untrusted = s.untrusted
    trust = s.trust.map(\.description)
    write = s.write.rawValue
    queuedObjects = s.queued?.objects
    queuedBytes = s.queued?.bytes
    tooLargeObjects = s.tooLarge?.objects
    tooLargeBytes = s.tooLarge?.bytes
  }
}
