import Foundation

@testable import Trove

/// The path of `digest`'s object file in the store at `store`, as
/// Docs/OnDiskFormat.md lays it out: built here, not by the code under test.
func objectFilePath(_ store: String, _ digest: BlobDigest, compressed: Bool = false) -> String {
  store + "/objects/\(digest.hex.prefix(2))/\(digest.hex)" + (compressed ? ".zst" : "")
}

/// The digests whose object files are in `store` (either form), from the folder.
func digestsOnDisk(_ store: Store) throws -> Set<BlobDigest> {
  var found = Set<BlobDigest>()
  for folder in 0..<256 {
    for file in try store.objects.objectFiles(inFolder: folder) { found.insert(file.digest) }
  }
  return found
}

/// A store with every read recorded (access resolution 0) and `count`
/// entries of distinct bytes, put in order.
func populated(_ scratch: Scratch, count: Int, size: Int = 10_000) throws -> (Store, [BlobDigest]) {
  let store = try scratch.store()
  try store.updatePolicy { $0.accessResolution = 0 }
  var digests: [BlobDigest] = []
  for i in 0..<count {
    digests.append(try store.put(bytes: Bytes.random(size, seed: UInt64(100 + i))).digest)
  }
  return (store, digests)
}

/// Sets `digest`'s recorded last access `seconds` into the past, behind
/// the store's back.
func age(_ digest: BlobDigest, by seconds: Int64, in store: Store) throws {
  try store.index().write("test: age") { (tx) throws(TroveError) in
    guard var entry = try tx.entry(for: digest) else { return }
    entry.lastAccessNanoseconds -= seconds * 1_000_000_000
    try tx.run { db throws(SQLiteConnection.Failure) in
      try db.query(
        "UPDATE objects SET last_access = ? WHERE digest = ?",
        [.integer(entry.lastAccessNanoseconds), .text(digest.hex)])
    }
  }
}

/// The path of `digest`'s blob under a remote's base, as
/// Docs/OnDiskFormat.md lays it out: `cas/ab/<hex>`.
func remoteBlobPath(_ digest: BlobDigest) -> String {
  "cas/\(digest.hex.prefix(2))/\(digest.hex)"
}

/// Moves every frame of the WAL of the index of the store at `store` into
/// its database file and empties the WAL (`wal_checkpoint(TRUNCATE)`), as
/// the close of a large WAL does: for tests that damage, copy or read the
/// database file alone.
func checkpointIndex(_ store: String) throws {
  let db = try SQLiteConnection(path: store + "/index.sqlite", busyTimeoutMilliseconds: 10_000)
  db.persistWAL()  // as Trove's connections leave them: the files stay
  try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
}
