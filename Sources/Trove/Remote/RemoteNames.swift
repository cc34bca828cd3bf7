/// The names blobs and records have on a remote; see Docs/OnDiskFormat.md.
///
/// ```
/// WebDAV {base}/                       Redis (one database)
///   trove-remote.json  layout record     trove:remote
///   cas/<aa>/<hex>     one blob          trove:cas:<hex>
///   tmp/<random>       an upload in flight  trove:tmp:<random> (expires)
///   keys/<h>.json      a key's record     trove:key:<h>
///   sigs/<aa>/<hex>.json  an object's signatures  trove:sig:<hex>
/// ```
enum RemoteNames {
  static let layoutFile = "trove-remote.json"

  /// `cas/<aa>/<hex>`: fanned out by the first two hex digits, as the
  /// store's `objects/` is.
  static func blobPath(_ digest: BlobDigest) -> String {
    "cas/" + String(digest.hex.prefix(2)) + "/" + digest.hex
  }

  /// 64 random bits in hex: a temp name no other writer picks.
  static func randomName() -> String {
    String(UInt64.random(in: .min ... .max), radix: 16)
  }

  /// `tmp/<random>`: where an upload goes before it is moved into place.
  static func temporaryPath() -> String { "tmp/" + randomName() }

  /// `keys/<h>.json`: `key`'s record (``RemoteKeyRecord``).
  static func keyRecordPath(_ key: String) -> String {
    "keys/" + RemoteKeyRecord.name(of: key) + ".json"
  }
  static func redisKeyRecordKey(_ key: String) -> String {
    "trove:key:" + RemoteKeyRecord.name(of: key)
  }

  /// `chunks/<aa>/<hex>`: the chunk manifest of `digest`'s blob
  /// (``ChunkManifest``, encoded), beside `cas/`.
  static func manifestPath(_ digest: BlobDigest) -> String {
    "chunks/" + String(digest.hex.prefix(2)) + "/" + digest.hex
  }

  /// `sigs/<aa>/<hex>.json`: the signed entry of `digest`'s blob
  /// (``SignedObjectEntry``), beside `cas/` so that nothing that lists
  /// blobs meets it.
  static func signedEntryPath(_ digest: BlobDigest) -> String {
    "sigs/" + String(digest.hex.prefix(2)) + "/" + digest.hex + ".json"
  }
  static func redisSignedEntryKey(_ digest: BlobDigest) -> String { "trove:sig:" + digest.hex }

  static let redisLayoutKey = "trove:remote"
  static func redisBlobKey(_ digest: BlobDigest) -> String { "trove:cas:" + digest.hex }
  static func redisTemporaryKey() -> String { "trove:tmp:" + randomName() }
  /// Seconds a Redis temp key lives: an upload killed half-way leaves
  /// nothing behind for longer.
  static let redisTemporaryLifetime = 3600
}
