/// A shared remote tier's storage: blobs named by their digest, and the
/// layout file that fixes how they are stored. Implemented over WebDAV
/// (``WebDAVBackend``) and Redis (``RedisBackend``).
///
/// A remote is a trust boundary: ``download(_:from:into:)`` hands bytes
/// only to a store's ``BlobWriter`` (directly or through a
/// ``WriterThread``), which hashes them, and the caller
/// commits expecting the digest (see `Store.pull(_:from:)`): bytes that
/// do not match their name are never stored.
protocol RemoteBackend: AnyObject {
  /// The remote it talks to.
  var spec: RemoteSpec { get }
  /// Whether the remote holds `digest`.
  func exists(_ digest: BlobDigest) throws(TroveError) -> Bool
  /// The length of `digest`'s blob, or nil when the remote does not hold it.
  func size(_ digest: BlobDigest) throws(TroveError) -> Int64?
  /// Streams `digest`'s blob from byte `offset` on into `writer` (a
  /// store's writer, or a thread writing into one), without
  /// holding it whole in memory. Returns the blob's length, or nil when
  /// the remote does not hold it (nothing was written).
  func download(_ digest: BlobDigest, from offset: Int64, into writer: any RemoteSink)
    throws(TroveError) -> Int64?
  /// Uploads `item.size` bytes of `item.file` (from offset 0) as
  /// `item.digest`'s blob, unless the remote already holds it. No reader
  /// ever sees a partial blob, and an intact blob is never replaced. With
  /// `item.verify`, the bytes are hashed as they are sent and published
  /// only when they are the digest's (else `.corruptObject`, nothing
  /// published).
  func upload(_ item: RemoteUploadItem) throws(TroveError) -> RemoteUpload
  /// Uploads the items `next` hands out (until it gives nil), as
  /// ``upload(_:)`` does each, handing each item's outcome to `done` with
  /// its place among them (0 for the first): nil for one not tried (the
  /// remote failed on an earlier one). Every item handed out gets one
  /// `done`; once the remote fails, `next` is not called again. One
  /// object's failure is never another's. A backend may send items before
  /// it knows earlier ones' outcomes (pipelined), so `done` may come
  /// several items late, and must not use this backend.
  func uploadSequence(
    _ next: () -> RemoteUploadItem?, done: (Int, Result<RemoteUpload, TroveError>?) -> Void)
  /// Another backend on the same remote, for another thread's requests,
  /// its transfers run by `multi` (which reuses their connections); nil
  /// when this backend has no such sessions (then one thread asks it).
  func session(through multi: HTTPMulti) throws(TroveError) -> (any RemoteBackend)?
  /// Whether it may have such sessions: for one that has none (Redis,
  /// which pipelines instead), no multi handle is made (which would load
  /// libcurl for nothing).
  var hasSessions: Bool { get }
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
  /// The signed entry of `digest`'s blob, or nil when the remote has none
  /// (or one that is not an entry of `digest`). An entry longer than
  /// ``SignedObjectEntry/sizeLimit`` is a failure of the remote
  /// (``SignedObjectEntry/tooLong(remote:source:)``), not read to its end.
  func readSignedEntry(_ digest: BlobDigest) throws(TroveError) -> SignedObjectEntry?
  /// Writes `entry`, replacing the blob's earlier one (whole).
  func writeSignedEntry(_ entry: SignedObjectEntry, of digest: BlobDigest) throws(TroveError)
  /// Whether the remote keeps chunk manifests beside its blobs (WebDAV,
  /// S3; not Redis).
  var keepsManifests: Bool { get }
  /// The chunk manifest of `digest`'s blob of `size` bytes, or nil when the
  /// remote has none. Read no further than such a manifest can be long,
  /// and decoded as anything from the network is (``ChunkManifest/init(decoding:expectedSize:source:)``);
  /// still only a hint: what it leads to is checked whole.
  func readManifest(_ digest: BlobDigest, size: Int64) throws(TroveError) -> ChunkManifest?
  /// Writes `manifest` as `digest`'s blob's, replacing an earlier one.
  func writeManifest(_ manifest: ChunkManifest, of digest: BlobDigest) throws(TroveError)
  /// Streams the bytes `range` of `digest`'s blob into `writer`: exactly
  /// those, or it throws (`.transferFailed`; `.unsupportedFormat` from a
  /// remote that cannot send a range).
  func download(_ digest: BlobDigest, range: Range<Int64>, into writer: any RemoteSink)
    throws(TroveError)
  /// The signatures of whole blocks `blocks` (block numbers, ascending) of
  /// `digest`'s blob, in order; nil when the remote cannot compute them
  /// (only a `trove serve` peer can). Exactly as many as asked, or it throws.
  func readBlockSums(_ digest: BlobDigest, blocks: [Range<Int64>]) throws(TroveError)
    -> [BlockSums.Entry]?
  /// The bytes of `ranges` (ascending, disjoint) of `digest`'s blob, one
  /// after the other, in a few requests; nil when the remote cannot send
  /// many at once. Exactly those bytes' count, or it throws.
  func readRanges(_ digest: BlobDigest, _ ranges: [Range<Int64>]) throws(TroveError) -> [UInt8]?
}

/// A blob to upload: `size` bytes of `file` from offset 0; with `verify`,
/// bytes not checked against `digest` yet (see
/// ``RemoteBackend/upload(_:)``).
struct RemoteUploadItem {
  var digest: BlobDigest
  var file: FileDescriptor
  var size: Int64
  var verify = false

  /// The error for bytes that turned out not to be `digest`'s as they
  /// were sent.
  var mismatch: TroveError {
    TroveError(
      .corruptObject, "the bytes sent as \(digest) do not hash to it; not published",
      value: digest.description)
  }
}

extension RemoteBackend {
  func session(through multi: HTTPMulti) throws(TroveError) -> (any RemoteBackend)? { nil }

  var hasSessions: Bool { true }

  /// Whether the remote keeps chunk manifests beside its blobs.
  var keepsManifests: Bool { false }

  func readBlockSums(_ digest: BlobDigest, blocks: [Range<Int64>]) throws(TroveError)
    -> [BlockSums.Entry]?
  { nil }
  func readRanges(_ digest: BlobDigest, _ ranges: [Range<Int64>]) throws(TroveError) -> [UInt8]? {
    nil
  }

  /// A remote that keeps no manifests (Redis) has none to give.
  func readManifest(_ digest: BlobDigest, size: Int64) throws(TroveError) -> ChunkManifest? { nil }
  func writeManifest(_ manifest: ChunkManifest, of digest: BlobDigest) throws(TroveError) {}
  func download(_ digest: BlobDigest, range: Range<Int64>, into writer: any RemoteSink)
    throws(TroveError)
  {
    throw TroveError(
      .unsupportedFormat, "remote '\(spec.name)' cannot send part of a blob", value: spec.name)
  }

  /// The most bytes the manifest of a blob of `size` bytes can take.
  static func manifestLimit(size: Int64) -> Int {
    let chunks = size / Int64(ChunkCutter.minimumSize) + 1
    return Int(min(Int64(Int32.max), 20 + chunks * Int64(ChunkManifest.entrySize)))
  }

  /// Uploads `size` bytes of `file`, checked already, as `digest`'s blob.
  func upload(_ digest: BlobDigest, from file: FileDescriptor, size: Int64)
    throws(TroveError) -> RemoteUpload
  {
    try upload(RemoteUploadItem(digest: digest, file: file, size: size))
  }

  /// One upload after another, stopping at the first that finds the
  /// remote failing (unreachable, broken off): the rest are not asked for.
  func uploadSequence(
    _ next: () -> RemoteUploadItem?, done: (Int, Result<RemoteUpload, TroveError>?) -> Void
  ) {
    var place = 0
    while let item = next() {
      defer { place += 1 }
      do throws(TroveError) {
        done(place, .success(try upload(item)))
      } catch {
        done(place, .failure(error))
        if error.code == .unavailable || error.code == .transferFailed { return }
      }
    }
  }
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
