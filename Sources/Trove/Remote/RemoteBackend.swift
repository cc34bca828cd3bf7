/// A shared remote tier's storage: blobs named by their digest, and the
/// layout file that fixes how they are stored. Implemented over WebDAV
/// (``WebDAVBackend``) and Redis (``RedisBackend``).
///
/// A remote is a trust boundary: ``download(_:from:into:)`` hands bytes
/// only to a store's ``BlobWriter``, which hashes them, and the caller
/// commits expecting the digest (see `Store.pull(_:from:)`): bytes that
/// do not match their name are never stored.
protocol RemoteBackend: AnyObject {
  /// Whether the remote holds `digest`.
  func exists(_ digest: BlobDigest) throws(TroveError) -> Bool
  /// The length of `digest`'s blob, or nil when the remote does not hold it.
  func size(_ digest: BlobDigest) throws(TroveError) -> Int64?
  /// Streams `digest`'s blob from byte `offset` on into `writer`, without
  /// holding it whole in memory. Returns the blob's length, or nil when
  /// the remote does not hold it (nothing was written).
  func download(_ digest: BlobDigest, from offset: Int64, into writer: BlobWriter)
    throws(TroveError) -> Int64?
  /// Uploads `size` bytes of `file` (from offset 0) as `digest`'s blob,
  /// unless the remote already holds it. No reader ever sees a partial
  /// blob, and an intact blob is never replaced.
  func upload(_ digest: BlobDigest, from file: FileDescriptor, size: Int64)
    throws(TroveError) -> RemoteUpload
  /// Removes `digest`'s blob; false when it was not there.
  func delete(_ digest: BlobDigest) throws(TroveError) -> Bool
  /// The remote's layout record, or nil when none is written yet.
  func readLayout() throws(TroveError) -> RemoteLayout?
  /// Writes the layout record (unless one is there already).
  func writeLayout(_ layout: RemoteLayout) throws(TroveError)
  /// `key`'s record, or nil when the remote has none (or one that is not
  /// a record of `key`).
  func readKeyRecord(_ key: String) throws(TroveError) -> RemoteKeyRecord?
  /// Writes `record`, replacing the key's earlier one (whole: a reader
  /// sees the old record or the new).
  func writeKeyRecord(_ record: RemoteKeyRecord) throws(TroveError)
}

/// What an upload did.
public enum RemoteUpload: String, Sendable, Codable {
  /// The blob was uploaded.
  case uploaded
  /// The remote held it already; nothing was sent (or what was sent was
  /// dropped, when another writer got there first).
  case present
  /// It is longer than the remote's `max-object-size`: skipped.
  case tooLarge = "too-large"
}

/// The limits every remote request runs under: a short connect timeout (a
/// dead remote costs milliseconds), a bounded name resolution, and a stall
/// limit instead of a limit on a whole transfer.
struct RemoteLimits: Sendable {
  /// Seconds to wait for a connection.
  var connectTimeout = 0.25
  /// Seconds to wait for a host name to resolve (Redis; libcurl counts
  /// resolving in ``connectTimeout``).
  var resolveTimeout = 3.0
  /// A transfer slower than ``stallSpeed`` bytes a second for this many
  /// seconds has stalled and fails.
  var stallTimeout = 15.0
  /// See ``stallTimeout``.
  var stallSpeed = 1024

  static let standard = RemoteLimits()
}
