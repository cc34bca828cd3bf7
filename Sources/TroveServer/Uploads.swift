import Foundation
import Synchronization
@_spi(Serving) import Trove

/// A request body being received (`--writable`): a blob going into the
/// store's writer under a temp name (`PUT tmp/<name>`), or a key record
/// (`PUT keys/<h>.json`), read whole up to its size limit.
final class UploadBody: @unchecked Sendable {
  enum Kind {
    case blob(name: String, writer: BlobWriter)
    case record(name: String)
  }
  let kind: Kind
  var bytes: [UInt8] = []
  var received: Int64 = 0
  /// What stopped the body going in; the answer reports it.
  var failure: TroveError?
  /// Whether the blob's writer went to ``PendingUploads`` (or was
  /// dropped there): the request no longer owns it.
  var handedOver = false

  init(_ kind: Kind) { self.kind = kind }

  /// Drops the blob's bytes unless they were handed over: a request that
  /// ends before its answer (the client left mid-body) leaves nothing.
  func abandon() {
    guard !handedOver, case .blob(_, let writer) = kind else { return }
    handedOver = true
    writer.cancel()
  }

  /// Takes the next piece of the body.
  func receive(_ piece: UnsafeRawBufferPointer) {
    guard failure == nil else { return }
    received += Int64(piece.count)
    switch kind {
    case .blob(_, let writer):
      do throws(TroveError) { try writer.write(piece) } catch { failure = error }
    case .record:
      guard bytes.count + piece.count <= RemoteKeyRecordLimit.bytes else {
        failure = TroveError(.tooLarge, "a key record is at most 64 KiB")
        return
      }
      bytes += piece
    }
  }
}

/// The most bytes of a key record read (as a remote reader reads).
enum RemoteKeyRecordLimit {
  static let bytes = 64 * 1024
}

/// Blobs received under temp names and not yet moved onto their digest's
/// name: each waits, uncommitted (invisible in the store), for the `MOVE`
/// that says which digest it must have. One not moved within an hour is
/// dropped, as is every one when the server stops.
final class PendingUploads: Sendable {
  private struct Pending: @unchecked Sendable {
    var writer: BlobWriter
    var size: Int64
    var since: ContinuousClock.Instant
  }
  private let pending = Mutex<[String: Pending]>([:])
  static let lifetime = Duration.seconds(3600)
  /// The most blobs waiting at once: a client that PUTs and never moves
  /// holds no more than this many temp files.
  static let maximum = 256

  /// Keeps `writer` under `name`, replacing (and dropping) one of that
  /// name; false when too many wait already.
  func keep(_ writer: BlobWriter, size: Int64, as name: String) -> Bool {
    let now = ContinuousClock.now
    let entry = Pending(writer: writer, size: size, since: now)
    let (dropped, kept) = pending.withLock { table -> ([Pending], Bool) in
      var dropped: [Pending] = []
      for (key, old) in table where now - old.since > Self.lifetime {
        dropped.append(old)
        table[key] = nil
      }
      if let old = table[name] {
        dropped.append(old)
        table[name] = nil
      }
      guard table.count < Self.maximum else { return (dropped + [entry], false) }
      table[name] = entry
      return (dropped, true)
    }
    for old in dropped { old.writer.cancel() }
    return kept
  }

  /// Takes the blob kept under `name`, and its length.
  func take(_ name: String) -> (BlobWriter, Int64)? {
    let entry = pending.withLock { table -> Pending? in
      defer { table[name] = nil }
      return table[name]
    }
    return entry.map { ($0.writer, $0.size) }
  }

  /// Drops every blob waiting.
  func dropAll() {
    let all = pending.withLock { table -> [Pending] in
      defer { table.removeAll() }
      return Array(table.values)
    }
    for entry in all { entry.writer.cancel() }
  }
}
