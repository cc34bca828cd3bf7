import Foundation

/// The `manifests` and `chunk_hooks` tables: the chunks of large objects,
/// and where a chunk was seen before. Written only by ``ObjectTable``, in
/// the transaction that publishes the object (or later, when a missing
/// manifest is rebuilt from the bytes); deleted with the object's row.
extension IndexSession {
  /// Whether a chunk's digest is one of the sample kept in `chunk_hooks`:
  /// one in eight, chosen by the digest itself, so two versions of a file
  /// sample the chunks they share alike.
  static func isHook(_ chunk: BlobDigest) -> Bool { chunk.low & 7 == 0 }

  /// Records `manifest` as `digest`'s in place of any recorded (one cut
  /// again from the bytes replaces a damaged one), with its hooks.
  func replaceManifest(_ manifest: ChunkManifest, of digest: BlobDigest) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      for table in ["manifests", "chunk_hooks"] {
        try db.query("DELETE FROM \(table) WHERE digest = ?", [.text(digest.hex)])
      }
    }
    try insertManifest(manifest, of: digest)
  }

  /// Records `manifest` as `digest`'s, with its hooks; a manifest already
  /// recorded is kept.
  func insertManifest(_ manifest: ChunkManifest, of digest: BlobDigest) throws(TroveError) {
    let inserted = try run { db throws(SQLiteConnection.Failure) in
      try db.query(
        "INSERT OR IGNORE INTO manifests(digest, encoded) VALUES (?, ?)",
        [.text(digest.hex), .blob(manifest.encoded)])
      return db.changes > 0
    }
    if inserted { try insertHooks(manifest, of: digest) }
  }

  /// Points `manifest`'s hooks at `digest`.
  func insertHooks(_ manifest: ChunkManifest, of digest: BlobDigest) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      try db.prepared("INSERT OR IGNORE INTO chunk_hooks(chunk, digest) VALUES (?, ?)") {
        (statement) throws(SQLiteConnection.Failure) in
        var seen = Set<UInt64>()
        for chunk in manifest.chunks where Self.isHook(chunk.digest) {
          guard seen.insert(chunk.digest.high).inserted else { continue }
          try statement.run([.integer(Int64(bitPattern: chunk.digest.high)), .text(digest.hex)])
        }
      }
    }
  }

  /// `digest`'s manifest as recorded, nil if there is none. One that does
  /// not decode (a damaged index) is taken for none.
  func manifest(of digest: BlobDigest, size: Int64) throws(TroveError) -> ChunkManifest? {
    let encoded: [UInt8]? = try run { db throws(SQLiteConnection.Failure) in
      var found: [UInt8]?
      try db.query("SELECT encoded FROM manifests WHERE digest = ?", [.text(digest.hex)]) { row in
        found = row.blob(0)
      }
      return found
    }
    guard let encoded else { return nil }
    return try? ChunkManifest(
      decoding: encoded, expectedSize: size, source: "the manifest of \(digest)")
  }

  /// The objects that hold the most of `chunks`' hooks, most first, with
  /// how many each holds: the likely earlier versions of what `chunks`
  /// cut. Given `before`, only objects stored before it (created earlier;
  /// the same instant, a lower digest), so that of two versions only the
  /// later shares the other's blocks and each shared block counts once.
  func objectsSharing(_ chunks: [Chunk], before digest: BlobDigest? = nil, limit: Int)
    throws(TroveError) -> [(digest: BlobDigest, hooks: Int)]
  {
    let hooks = Set(chunks.lazy.filter { Self.isHook($0.digest) }.map(\.digest.high))
    guard !hooks.isEmpty else { return [] }
    var bound: (Int64, String)?
    if let digest {
      guard let created = try entry(for: digest)?.createdNanoseconds else { return [] }
      bound = (created, digest.hex)
    }
    // One statement, the hooks as a JSON array: a statement per hook
    // would be a read transaction each.
    let list = "[" + hooks.map { String(Int64(bitPattern: $0)) }.joined(separator: ",") + "]"
    var counts: [BlobDigest: Int] = [:]
    try run { db throws(SQLiteConnection.Failure) in
      try db.query(
        """
        SELECT h.digest, count(*) FROM chunk_hooks h JOIN objects o ON o.digest = h.digest
        WHERE h.chunk IN (SELECT value FROM json_each(?)) AND o.compressed = 0
          AND (o.created, o.digest) < (?, ?)
        GROUP BY h.digest
        """, [.text(list), .integer(bound?.0 ?? .max), .text(bound?.1 ?? "")]
      ) { row in
        if let other = BlobDigest(hex: Substring(row.text(0))) {
          counts[other] = Int(row.integer(1))
        }
      }
    }
    return counts.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.prefix(limit).map {
      (digest: $0.key, hooks: $0.value)
    }
  }

  /// The digests of raw objects of at least `minimumSize` bytes, in digest
  /// order after `cursor`, at most `limit`.
  func rawDigests(after cursor: String, minimumSize: Int64, limit: Int) throws(TroveError)
    -> [BlobDigest]
  {
    try run { db throws(SQLiteConnection.Failure) in
      var found: [BlobDigest] = []
      try db.query(
        """
        SELECT digest FROM objects WHERE digest > ? AND size >= ? AND compressed = 0
        ORDER BY digest LIMIT ?
        """, [.text(cursor), .integer(minimumSize), .integer(Int64(limit))]
      ) { row in if let d = BlobDigest(hex: Substring(row.text(0))) { found.append(d) } }
      return found
    }
  }

  /// The digests of objects with a manifest (`unexaminedOnly`: not yet
  /// examined), in digest order after `cursor`, at most `limit`.
  func manifestDigests(after cursor: String, limit: Int, unexaminedOnly: Bool = false)
    throws(TroveError) -> [BlobDigest]
  {
    try run { db throws(SQLiteConnection.Failure) in
      var found: [BlobDigest] = []
      try db.query(
        "SELECT digest FROM manifests WHERE digest > ?\(unexaminedOnly ? " AND examined = 0" : "") ORDER BY digest LIMIT ?",
        [.text(cursor), .integer(Int64(limit))]
      ) { row in if let d = BlobDigest(hex: Substring(row.text(0))) { found.append(d) } }
      return found
    }
  }
}

/// The `shared_blocks` table and the `examined` mark of manifests.
extension IndexSession {
  /// Marks `digest`'s manifest examined.
  func markExamined(_ digest: BlobDigest) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      try db.query("UPDATE manifests SET examined = 1 WHERE digest = ?", [.text(digest.hex)])
    }
  }

  /// Records that `bytes` of `digest`'s file share their blocks with
  /// `source`'s, replacing what was recorded for the pair; none for 0.
  func setSharing(_ digest: BlobDigest, source: BlobDigest, bytes: Int64) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      // A delete and an insert, not a REPLACE, whose implicit delete
      // would not fire the trigger that keeps the total.
      try db.query(
        "DELETE FROM shared_blocks WHERE digest = ? AND source = ?",
        [.text(digest.hex), .text(source.hex)])
      guard bytes > 0 else { return }
      try db.query(
        "INSERT INTO shared_blocks(digest, source, bytes) VALUES (?, ?, ?)",
        [.text(digest.hex), .text(source.hex), .integer(bytes)])
    }
  }

  /// Forgets the blocks `digest`'s file shared, either way, when the file
  /// was replaced (converted); and its manifest unless `keepingManifest`
  /// (then it is to be examined again).
  func forgetChunks(of digest: BlobDigest, keepingManifest: Bool) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      let value = [SQLiteValue.text(digest.hex)]
      try db.query("DELETE FROM shared_blocks WHERE digest = ? OR source = ?", value + value)
      if keepingManifest {
        try db.query("UPDATE manifests SET examined = 0 WHERE digest = ?", value)
      } else {
        try db.query("DELETE FROM manifests WHERE digest = ?", value)
        try db.query("DELETE FROM chunk_hooks WHERE digest = ?", value)
      }
    }
  }

  /// Marks every manifest examined: on a filesystem that cannot share
  /// blocks there is nothing to try for any of them.
  func markAllExamined() throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      try db.execute("UPDATE manifests SET examined = 1 WHERE examined = 0")
    }
  }

  /// Forgets what `digest`'s file was recorded to share.
  func clearSharing(of digest: BlobDigest) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      try db.query("DELETE FROM shared_blocks WHERE digest = ?", [.text(digest.hex)])
    }
  }

  /// Bytes of `digest`'s file recorded as shared with other objects'.
  func sharedBytes(of digest: BlobDigest) throws(TroveError) -> Int64 {
    try run { db throws(SQLiteConnection.Failure) in
      var total: Int64 = 0
      try db.query(
        "SELECT COALESCE(SUM(bytes), 0) FROM shared_blocks WHERE digest = ?", [.text(digest.hex)]
      ) { row in total = row.integer(0) }
      return total
    }
  }
}
