import Foundation

/// One remote's health and what reading through it did, as this store
/// recorded it (``Store/remoteStatus()``).
public struct RemoteStatus: Sendable {
  /// The remote's name.
  public var name: String
  /// Its URL, with any credential in it removed.
  public var url: String
  /// Whether the store only reads from it.
  public var readOnly: Bool
  /// Failed requests in a row; 0 when its circuit breaker is closed.
  public var consecutiveFailures: Int64
  /// While its breaker is open: when it will be tried again (by one
  /// probe); nil when it is asked as usual.
  public var retryAt: Date?
  /// Objects read through it into the store (a local miss it held).
  public var hits: Int64
  /// Objects asked of it that it did not hold.
  public var misses: Int64
  /// Blobs it sent whose bytes did not match their name: never stored.
  public var corrupt: Int64
  /// Bytes read through it into the store.
  public var bytesPulled: Int64
  /// Requests to it that failed (unreachable, broken off).
  public var errors: Int64
  /// Reads that skipped it because its breaker was open.
  public var skipped: Int64
  /// Records and objects it offered that no key this store trusts for it
  /// signed (`remote add --trust`): taken as misses, never used.
  public var untrusted: Int64 = 0
  /// The keys whose signatures the store accepts from it; empty when it
  /// reads the remote unsigned.
  public var trust: [PublicSigningKey] = []
  /// When objects a put or fetch stores go up to it.
  public var write: RemoteWrite
  /// Objects waiting to go up to it, and their bytes (the upload queue:
  /// stored since it was added, and not known to be there); nil for a
  /// read-only remote.
  public var queued: (objects: Int64, bytes: Int64)?
  /// Objects the store holds that were found longer than its
  /// `max-object-size` when they were to go up, and their bytes: skipped,
  /// never uploaded to it; nil for a read-only remote.
  public var tooLarge: (objects: Int64, bytes: Int64)?

  /// Whether reads skip the remote now (its breaker is open).
  public var isSkipped: Bool { retryAt.map { $0 > Date() } ?? false }
}

extension Store {
  /// Every configured remote's status, in the order they are tried. Two
  /// index reads per remote; counting a queue is O(objects).
  ///
  /// - Throws: `.invalidConfig` when `remotes.json` cannot be used.
  public func remoteStatus() throws(TroveError) -> [RemoteStatus] {
    // This process's own counts first.
    writeAccessCounts()
    let specs = try remotes()
    if let foreign = remotesChosenByAnother() { warn(foreign) }
    let index = try index()
    var statuses: [RemoteStatus] = []
    for spec in specs {
      let holdings = !spec.readOnly
      let (record, tooLarge) = try index.read("read the status of remote '\(spec.name)'") {
        (tx) throws(TroveError) in
        (try tx.remoteRecord(spec.name), holdings ? try tx.tooLargeTotals(spec.name) : nil)
      }
      // The breaker the store's processes share (a read-only store keeps
      // none: each of its processes has its own).
      let retryAt = record.failures > 0 ? record.retryAt : nil
      statuses.append(
        RemoteStatus(
          name: spec.name, url: RemoteSpec.redacted(spec.url), readOnly: spec.readOnly,
          consecutiveFailures: record.failures,
          retryAt: retryAt.map { Date(nanosecondsSince1970: $0) }, hits: record.hits,
          misses: record.misses, corrupt: record.corrupt, bytesPulled: record.bytes,
          errors: record.errors, skipped: record.skipped, untrusted: record.untrusted,
          trust: spec.trust ?? [], write: spec.write ?? .async,
          queued: spec.readOnly || isReadOnly ? nil : try uploadQueueLength(for: spec.name),
          tooLarge: tooLarge))
    }
    return statuses
  }
}
