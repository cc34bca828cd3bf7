import Foundation

/// One object as the index records it.
public struct StoreEntry: Sendable, Hashable, Codable {
  /// The object's digest.
  public var digest: BlobDigest
  /// Logical size in bytes.
  public var size: Int64
  /// Bytes allocated on disk when it was stored (`st_blocks * 512`).
  public var allocatedBytes: Int64
  /// When it was first stored.
  public var created: Date { Date(nanosecondsSince1970: createdNanoseconds) }
  /// When it was last stored again or read, to within the policy's access
  /// resolution.
  public var lastAccess: Date { Date(nanosecondsSince1970: lastAccessNanoseconds) }
  /// Whether the object is stored as a zstd frame.
  public var isCompressed: Bool = false
  /// The object file's length: `size` when raw, the frame's when compressed.
  public var storedBytes: Int64
  /// ``created`` as the index keeps it: nanoseconds since 1970.
  var createdNanoseconds: Int64
  /// ``lastAccess`` as the index keeps it: nanoseconds since 1970.
  var lastAccessNanoseconds: Int64

  /// Makes an entry; a raw one unless said otherwise.
  public init(
    digest: BlobDigest, size: Int64, allocatedBytes: Int64, created: Date, lastAccess: Date,
    isCompressed: Bool = false, storedBytes: Int64? = nil
  ) {
    self.init(
      digest: digest, size: size, allocatedBytes: allocatedBytes,
      created: created.nanosecondsSince1970, lastAccess: lastAccess.nanosecondsSince1970,
      isCompressed: isCompressed, storedBytes: storedBytes)
  }

  /// Makes an entry from the index's times (nanoseconds since 1970).
  init(
    digest: BlobDigest, size: Int64, allocatedBytes: Int64, created: Int64, lastAccess: Int64,
    isCompressed: Bool = false, storedBytes: Int64? = nil
  ) {
    self.digest = digest
    self.size = size
    self.allocatedBytes = allocatedBytes
    self.createdNanoseconds = created
    self.lastAccessNanoseconds = lastAccess
    self.isCompressed = isCompressed
    self.storedBytes = storedBytes ?? size
  }
}

/// Why an object was stored raw although compression was on.
enum CompressionSkip: String {
  /// Its leading sample did not shrink by the margin (already compressed).
  case incompressible = "skipped_incompressible"
  /// It was below `compression-min-size`.
  case small = "skipped_small"
}

/// What a read's access record did.
enum AccessRecord {
  /// The recorded access, at this time, is within the resolution:
  /// nothing written.
  case recent(at: Int64)
  /// The access was written.
  case recorded
  /// The index has no row for the digest.
  case noRow
}

/// The `objects` table. Rows change only through ``ObjectTable``, inside
/// the write transaction that makes the matching change to `objects/`;
/// the one exception is a read's access time (``recordAccess(_:now:resolution:)``).
extension IndexSession {
  /// The columns ``entry(_:)`` reads, in order, from a statement whose
  /// only table is `objects` (aliased or not).
  static let entryColumns =
    "digest, size, allocated, created, last_access, compressed, COALESCE(stored, size)"

  /// The entry a row of ``columns`` describes; nil for a digest that is
  /// not one.
  static func entry(_ row: SQLiteConnection.Row) -> StoreEntry? {
    guard let digest = BlobDigest(hex: Substring(row.text(0))) else { return nil }
    return StoreEntry(
      digest: digest, size: row.integer(1), allocatedBytes: row.integer(2),
      created: row.integer(3), lastAccess: row.integer(4), isCompressed: row.integer(5) != 0,
      storedBytes: row.integer(6))
  }

  private static func values(_ entry: StoreEntry) -> [SQLiteValue] {
    [
      .text(entry.digest.hex), .integer(entry.size), .integer(entry.allocatedBytes),
      .integer(entry.createdNanoseconds), .integer(entry.lastAccessNanoseconds),
      .integer(entry.isCompressed ? 1 : 0),
      entry.isCompressed ? .integer(entry.storedBytes) : .null,
    ]
  }

  // MARK: Reading

  /// The row for `digest`, if any.
  func entry(for digest: BlobDigest) throws(TroveError) -> StoreEntry? {
    try run { db throws(SQLiteConnection.Failure) in
      var found: StoreEntry?
      try db.query(
        "SELECT \(Self.entryColumns) FROM objects WHERE digest = ?", [.text(digest.hex)]
      ) { row in found = Self.entry(row) }
      return found
    }
  }

  /// Whether some object has exactly `size` bytes: a hint that a put of a
  /// file that size may be a duplicate. O(log n).
  func hasObject(ofSize size: Int64) throws(TroveError) -> Bool {
    try run { db throws(SQLiteConnection.Failure) in
      var found = false
      try db.query("SELECT 1 FROM objects WHERE size = ? LIMIT 1", [.integer(size)]) { _ in
        found = true
      }
      return found
    }
  }

  /// Every row, ordered by digest; only those whose hex starts with
  /// `prefix` (a fan-out folder's name) when given. O(rows returned · log n).
  func entries(withPrefix prefix: String? = nil) throws(TroveError) -> [StoreEntry] {
    try run { db throws(SQLiteConnection.Failure) in
      var all: [StoreEntry] = []
      let (clause, values): (String, [SQLiteValue]) =
        prefix.map { (" WHERE digest >= ? AND digest < ?", [.text($0), .text($0 + "~")]) }
        ?? ("", [])
      try db.query("SELECT \(Self.entryColumns) FROM objects\(clause) ORDER BY digest", values) {
        row in if let e = Self.entry(row) { all.append(e) }
      }
      return all
    }
  }

  /// Up to `limit` unpinned entries in least-recently-used order, after
  /// `cursor` (last access, digest) and, if given, last accessed before
  /// `cutoff` and taking at most `largest` bytes; with `remoteBacked`
  /// true, only those a remote is known to hold with the right bytes,
  /// false only the others.
  /// A walk that filters on it passes over the rows it leaves out: O(n) at
  /// worst. O(limit · log n) through the
  /// access index (more when many entries are larger than `largest`, or
  /// are not remote-backed).
  func leastRecentlyUsed(
    after cursor: (Int64, String), before cutoff: Int64?, largest: Int64? = nil, now: Int64,
    remoteBacked: Bool? = nil, limit: Int
  ) throws(TroveError) -> [StoreEntry] {
    try run { db throws(SQLiteConnection.Failure) in
      var found: [StoreEntry] = []
      try db.query(
        """
        SELECT \(Self.entryColumns) FROM objects o
        WHERE (last_access, digest) > (?, ?) AND last_access < ? AND allocated <= ?
          AND NOT \(Self.pinned)\(remoteBacked.map { $0 ? " AND " + Self.remoteBacked : " AND NOT " + Self.remoteBacked } ?? "")
        ORDER BY last_access, digest LIMIT ?
        """,
        [
          .integer(cursor.0), .text(cursor.1), .integer(cutoff ?? .max),
          .integer(largest ?? .max), .integer(now), .integer(Int64(limit)),
        ]
      ) { row in if let e = Self.entry(row) { found.append(e) } }
      return found
    }
  }

  /// SQL true for rows of `objects` (aliased `o`) a remote is known to
  /// hold with the right bytes (``RemoteHolding/verified``).
  static let remoteBacked =
    "EXISTS (SELECT 1 FROM remote_objects r WHERE r.digest = o.digest AND r.state = 'verified')"

  /// SQL true for rows of `objects` (aliased `o`) that an unexpired pin holds.
  static let pinned =
    "EXISTS (SELECT 1 FROM pins p WHERE p.digest = o.digest AND (p.expires IS NULL OR p.expires > ?))"

  // MARK: Access times

  /// Records a read of `digest` at `now` unless the recorded access is
  /// less than `resolution` nanoseconds old. The check is a read; only a
  /// stale record writes.
  func recordAccess(_ digest: BlobDigest, now: Int64, resolution: Int64) throws(TroveError)
    -> AccessRecord
  {
    try run { db throws(SQLiteConnection.Failure) in
      var recorded: Int64?
      try db.query("SELECT last_access FROM objects WHERE digest = ?", [.text(digest.hex)]) {
        row in recorded = row.integer(0)
      }
      guard let recorded else { return .noRow }
      guard now.subtractingSaturated(recorded) >= resolution, now > recorded else {
        return .recent(at: recorded)
      }
      try db.query(
        "UPDATE objects SET last_access = ? WHERE digest = ? AND last_access < ?",
        [.integer(now), .text(digest.hex), .integer(now)])
      return .recorded
    }
  }

  // MARK: Changing (ObjectTable only)

  /// Adds `entry`'s row, or corrects an existing row's form and sizes to
  /// `entry`'s, keeping its creation time and the later last access. A
  /// removal of the object in progress is called off: a row means the
  /// object is wanted, and a removal unlinks only while its record stands.
  func upsert(_ entry: StoreEntry) throws(TroveError) {
    _ = try takeRemovals([entry.digest])
    try run { db throws(SQLiteConnection.Failure) in
      try db.query(
        """
        INSERT INTO objects(digest, size, allocated, created, last_access, compressed, stored)
        VALUES (?,?,?,?,?,?,?)
        ON CONFLICT(digest) DO UPDATE SET size = excluded.size, allocated = excluded.allocated,
          compressed = excluded.compressed, stored = excluded.stored,
          last_access = max(last_access, excluded.last_access)
        """, Self.values(entry))
    }
  }

  /// Refreshes `digest`'s last access to at least `time`; whether it has a row.
  func refreshAccess(_ digest: BlobDigest, to time: Int64) throws(TroveError) -> Bool {
    try run { db throws(SQLiteConnection.Failure) in
      try db.query(
        "UPDATE objects SET last_access = max(last_access, ?) WHERE digest = ?",
        [.integer(time), .text(digest.hex)])
      return db.changes > 0
    }
  }

  /// Deletes the rows of `digests`, whatever their state, with their
  /// pins, keys and checksums; returns which had a row. A statement per
  /// 500 digests; for many, the totals taken off once (see
  /// ``inBulkRemoval(_:rows:from:_:)``).
  func deleteObjects(
    _ digests: [BlobDigest], bulkFrom minimum: Int = RemovalTuning.tuned.bulkRemovalMinimum
  ) throws(TroveError) -> [Bool] {
    var had = Set<BlobDigest>()
    try run { db throws(SQLiteConnection.Failure) in
      let delete: (inout RemovedTotals) throws(SQLiteConnection.Failure) -> Void = {
        (totals) throws(SQLiteConnection.Failure) in
        try Self.inChunks(digests) { (marks, values) throws(SQLiteConnection.Failure) in
          try db.query(
            "DELETE FROM objects WHERE digest IN (\(marks)) RETURNING \(RemovedTotals.columns), digest",
            values
          ) { row in
            totals.add(row)
            if let digest = BlobDigest(hex: Substring(row.text(4))) { had.insert(digest) }
          }
        }
      }
      try Self.inBulkRemoval(db, rows: digests.count, from: minimum, delete)
    }
    try deleteReferences(to: digests)
    return digests.map { had.contains($0) }
  }

  /// Deletes each entry's row if it is still evictable as it was chosen:
  /// its last access unchanged (no recorded read or dedup hit since) and
  /// no unexpired pin. Returns which rows were deleted; their pins and keys
  /// are the caller's to delete (``deleteReferences(to:)``) once their
  /// files are gone. One statement, prepared once, for all of them, in
  /// the order of their digests (the order of the table's keys: a run of
  /// deletes then works through its pages in turn); the totals taken off
  /// once.
  func deleteIfEvictable(
    _ entries: [StoreEntry], now: Int64,
    bulkFrom minimum: Int = RemovalTuning.tuned.bulkRemovalMinimum
  ) throws(TroveError) -> [Bool] {
    try run { db throws(SQLiteConnection.Failure) in
      try Self.inBulkRemoval(db, rows: entries.count, from: minimum) {
        (totals) throws(SQLiteConnection.Failure) in
        var deleted = [Bool](repeating: false, count: entries.count)
        try db.prepared(
          """
          DELETE FROM objects AS o WHERE digest = ? AND last_access = ? AND NOT \(Self.pinned)
            RETURNING \(RemovedTotals.columns)
          """
        ) { (statement) throws(SQLiteConnection.Failure) in
          for i in entries.indices.sorted(by: { entries[$0].digest < entries[$1].digest }) {
            let entry = entries[i]
            try statement.run(
              [.text(entry.digest.hex), .integer(entry.lastAccessNanoseconds), .integer(now)]
            ) { row in
              deleted[i] = true
              totals.add(row)
            }
          }
        }
        return deleted
      }
    }
  }

  /// What the rows deleted in bulk held, to take off the totals at once.
  struct RemovedTotals {
    /// The columns a bulk delete returns first, in the order ``add(_:)``
    /// reads them.
    static let columns = "size, allocated, COALESCE(stored, size), compressed"
    var count: Int64 = 0
    var size: Int64 = 0
    var allocated: Int64 = 0
    var stored: Int64 = 0
    var compressed: Int64 = 0

    /// Adds a deleted row, returned with ``columns`` first.
    mutating func add(_ row: SQLiteConnection.Row) {
      count += 1
      size += row.integer(0)
      allocated += row.integer(1)
      stored += row.integer(2)
      compressed += row.integer(3)
    }
  }

  /// Runs `deletes` — which delete up to `rows` rows of `objects`, adding
  /// each to the totals it is given — with this connection's triggers
  /// off, then takes the totals off the counters at once: the
  /// `objects_removed` trigger's five counter updates per row are much of
  /// a removal's index work. Other connections fire it as ever. For fewer
  /// than `minimum` rows (``RemovalTuning/bulkRemovalMinimum``) the trigger keeps the totals: turning
  /// it off and on costs more (every prepared statement is prepared again
  /// after; a repair forgets objects one at a time).
  private static func inBulkRemoval<T>(
    _ db: SQLiteConnection, rows: Int, from minimum: Int,
    _ deletes: (inout RemovedTotals) throws(SQLiteConnection.Failure) -> T
  ) throws(SQLiteConnection.Failure) -> T {
    var totals = RemovedTotals()
    guard rows >= minimum else { return try deletes(&totals) }
    let result = try db.withoutTriggers { () throws(SQLiteConnection.Failure) in
      try deletes(&totals)
    }
    try db.query(
      """
      UPDATE counters SET value = value - CASE name WHEN 'entries' THEN ?
        WHEN 'logical_bytes' THEN ? WHEN 'allocated_bytes' THEN ?
        WHEN 'stored_bytes' THEN ? ELSE ? END
      WHERE name IN
        ('entries', 'logical_bytes', 'allocated_bytes', 'stored_bytes', 'compressed_entries')
      """,
      [
        .integer(totals.count), .integer(totals.size), .integer(totals.allocated),
        .integer(totals.stored), .integer(totals.compressed),
      ]
    )
    return result
  }

  /// Deletes the pins, keys and checksums that name `digests` (objects
  /// that are gone).
  func deleteReferences(to digests: [BlobDigest]) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      for table in ["pins", "keys", "checksums", "manifests", "chunk_hooks", "shared_blocks"] {
        // Many stores have no pins or checksums: a look costs less than
        // the digests' lookups in an empty table.
        var empty = true
        try db.query("SELECT 1 FROM \(table) LIMIT 1") { _ in empty = false }
        if empty { continue }
        try Self.inChunks(digests) { (marks, values) throws(SQLiteConnection.Failure) in
          try db.query("DELETE FROM \(table) WHERE digest IN (\(marks))", values)
          // Blocks another object shared from one removed count as its
          // own now (more than the disk holds, if they are still shared
          // with an older one: never less).
          if table == "shared_blocks" {
            try db.query("DELETE FROM shared_blocks WHERE source IN (\(marks))", values)
          }
        }
      }
    }
  }

  /// Runs `body` for `digests` in chunks of up to 500: the chunk's `?`
  /// marks (for an `IN (…)` list) and its values. A statement per chunk
  /// rather than per digest; the digests sorted first, so that a chunk's
  /// keys sit together in the tables' B-trees (deleting 8,192 of 10,000
  /// rows: a third faster). A chunk is padded (its last digest repeated)
  /// to 1, 16, 128 or 500 marks, so that a statement's texts stay few in
  /// the connection's cache of prepared statements.
  static func inChunks(
    _ digests: [BlobDigest],
    _ body: (_ marks: String, _ values: [SQLiteValue]) throws(SQLiteConnection.Failure) -> Void
  ) throws(SQLiteConnection.Failure) {
    let digests = digests.sorted()
    var start = 0
    while start < digests.count {
      let chunk = digests[start..<min(start + 500, digests.count)]
      start += chunk.count
      let width = [1, 16, 128, 500].first { $0 >= chunk.count } ?? 500
      var values = chunk.map { SQLiteValue.text($0.hex) }
      values += Array(repeating: values[values.count - 1], count: width - values.count)
      try body(Array(repeating: "?", count: width).joined(separator: ","), values)
    }
  }
}
