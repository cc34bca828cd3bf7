import Synchronization

/// One object as the index records it.
public struct Entry: Sendable, Hashable, Codable {
  /// The object's digest.
  public var digest: Digest
  /// Logical size in bytes.
  public var size: Int64
  /// Bytes allocated on disk when it was stored (`st_blocks * 512`).
  public var allocatedBytes: Int64
  /// When it was first stored, nanoseconds since 1970.
  public var created: Int64
  /// When it was last stored again or read, nanoseconds since 1970.
  public var lastAccess: Int64
  /// Whether the object is stored as a zstd frame.
  public var isCompressed: Bool = false
  /// The object file's length: `size` when raw, the frame's when compressed.
  public var storedBytes: Int64

  /// Makes an entry; a raw one unless said otherwise.
  public init(
    digest: Digest, size: Int64, allocatedBytes: Int64, created: Int64, lastAccess: Int64,
    isCompressed: Bool = false, storedBytes: Int64? = nil
  ) {
    self.digest = digest
    self.size = size
    self.allocatedBytes = allocatedBytes
    self.created = created
    self.lastAccess = lastAccess
    self.isCompressed = isCompressed
    self.storedBytes = storedBytes ?? size
  }
}

/// Running totals kept by the index, read in O(1).
struct IndexTotals: Sendable {
  var entries: Int64 = 0
  var logicalBytes: Int64 = 0
  var allocatedBytes: Int64 = 0
  var dedupHits: Int64 = 0
  var dedupBytes: Int64 = 0
  var lastSweepTime: Int64 = 0
  var lastSweepRemoved: Int64 = 0
  var lastSweepBytes: Int64 = 0
  var lastSweepNanoseconds: Int64 = 0
  var storedBytes: Int64 = 0
  var compressedEntries: Int64 = 0
  var skippedIncompressible: Int64 = 0
  var skippedSmall: Int64 = 0
}

/// Why an object was stored raw although compression was on.
enum CompressionSkip: String {
  /// Its leading sample did not shrink by the margin (already compressed).
  case incompressible = "skipped_incompressible"
  /// It was below `compression-min-size`.
  case small = "skipped_small"
}

/// A pin: `name` keeps `digest` from being swept, until `expires` if set.
public struct Pin: Sendable, Hashable, Codable {
  /// The pinned object.
  public var digest: Digest
  /// Who holds the pin (a tool, a CI job); pins with other names are theirs.
  public var name: String
  /// When the pin lapses, nanoseconds since 1970; nil for never.
  public var expires: Int64?
  /// When it was made, nanoseconds since 1970.
  public var created: Int64

  /// Whether the pin still holds at `now` (nanoseconds since 1970).
  public func isActive(at now: Int64) -> Bool { expires.map { $0 > now } ?? true }
}

/// The SQLite index beside the objects: one row per object, named keys,
/// and running totals maintained by triggers (so totals are O(1), never a
/// walk).
///
/// The objects directory is the truth for content; this index may lag it
/// (an orphan file) and is rebuilt from it by ``Store/rebuildIndex()``.
/// WAL mode lets readers proceed while one process writes; every write
/// takes the write lock up front (`BEGIN IMMEDIATE`).
final class Index: Sendable {
  /// Format version of the schema (`PRAGMA user_version`). Version 2 added
  /// pins and the last sweep's record; version 3 the compression columns
  /// and counters. Opening an older index upgrades it in one transaction.
  static let schemaVersion: Int64 = 3

  private let connection: Mutex<SQLiteConnection>
  let path: String
  /// Whether the schema was created by this open (a new or lost index).
  let isFresh: Bool

  private static let schema = """
    CREATE TABLE IF NOT EXISTS objects(
      digest TEXT PRIMARY KEY NOT NULL,
      size INTEGER NOT NULL,
      allocated INTEGER NOT NULL,
      created INTEGER NOT NULL,
      last_access INTEGER NOT NULL,
      compressed INTEGER NOT NULL DEFAULT 0,
      stored INTEGER
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS objects_by_access ON objects(last_access);
    CREATE INDEX IF NOT EXISTS objects_by_size ON objects(size);
    CREATE TABLE IF NOT EXISTS keys(
      key TEXT PRIMARY KEY NOT NULL,
      digest TEXT NOT NULL,
      updated INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS counters(
      name TEXT PRIMARY KEY NOT NULL,
      value INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO counters(name, value) VALUES
      ('entries', 0), ('logical_bytes', 0), ('allocated_bytes', 0),
      ('dedup_hits', 0), ('dedup_bytes', 0);
    CREATE TABLE IF NOT EXISTS pins(
      digest TEXT NOT NULL,
      name TEXT NOT NULL,
      expires INTEGER,
      created INTEGER NOT NULL,
      PRIMARY KEY(digest, name)
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO counters(name, value) VALUES
      ('last_sweep_time', 0), ('last_sweep_removed', 0), ('last_sweep_bytes', 0),
      ('last_sweep_nanoseconds', 0);
    INSERT OR IGNORE INTO counters(name, value) VALUES
      ('stored_bytes', (SELECT COALESCE(SUM(COALESCE(stored, size)), 0) FROM objects)),
      ('compressed_entries', (SELECT COUNT(*) FROM objects WHERE compressed = 1)),
      ('skipped_incompressible', 0), ('skipped_small', 0);
    DROP TRIGGER IF EXISTS objects_added;
    DROP TRIGGER IF EXISTS objects_removed;
    DROP TRIGGER IF EXISTS objects_resized;
    CREATE TRIGGER objects_added AFTER INSERT ON objects BEGIN
      UPDATE counters SET value = value + CASE name WHEN 'entries' THEN 1
        WHEN 'logical_bytes' THEN NEW.size WHEN 'allocated_bytes' THEN NEW.allocated
        WHEN 'stored_bytes' THEN COALESCE(NEW.stored, NEW.size) ELSE NEW.compressed END
      WHERE name IN
        ('entries', 'logical_bytes', 'allocated_bytes', 'stored_bytes', 'compressed_entries');
    END;
    CREATE TRIGGER objects_removed AFTER DELETE ON objects BEGIN
      UPDATE counters SET value = value - CASE name WHEN 'entries' THEN 1
        WHEN 'logical_bytes' THEN OLD.size WHEN 'allocated_bytes' THEN OLD.allocated
        WHEN 'stored_bytes' THEN COALESCE(OLD.stored, OLD.size) ELSE OLD.compressed END
      WHERE name IN
        ('entries', 'logical_bytes', 'allocated_bytes', 'stored_bytes', 'compressed_entries');
    END;
    CREATE TRIGGER objects_restored AFTER UPDATE OF allocated, compressed, stored ON objects BEGIN
      UPDATE counters SET value = value + CASE name
        WHEN 'allocated_bytes' THEN NEW.allocated - OLD.allocated
        WHEN 'stored_bytes' THEN COALESCE(NEW.stored, NEW.size) - COALESCE(OLD.stored, OLD.size)
        ELSE NEW.compressed - OLD.compressed END
      WHERE name IN ('allocated_bytes', 'stored_bytes', 'compressed_entries');
    END;
    """

  /// Opens or creates the index at `path`.
  init(path: String) throws(TroveError) {
    self.path = path
    do {
      let db = try SQLiteConnection(path: path, busyTimeoutMilliseconds: 30_000)
      try db.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
      var version: Int64 = 0
      try db.query("PRAGMA user_version") { row in version = row.integer(0) }
      var created = false
      if version < Self.schemaVersion {
        // Create or upgrade the schema under the write lock; another
        // process may do it first.
        try db.transaction { () throws(SQLiteConnection.Failure) in
          try db.query("PRAGMA user_version") { row in version = row.integer(0) }
          if version < Self.schemaVersion {
            created = version == 0
            if (1...2).contains(version) {
              try db.execute(
                "ALTER TABLE objects ADD COLUMN compressed INTEGER NOT NULL DEFAULT 0; ALTER TABLE objects ADD COLUMN stored INTEGER;"
              )
            }
            try db.execute(Self.schema)
            try db.execute("PRAGMA user_version = \(Self.schemaVersion)")
          }
        }
      }
      guard version <= Self.schemaVersion else {
        throw TroveError(
          .unsupportedFormat,
          "index '\(path)' has schema version \(version); this trove understands up to \(Self.schemaVersion)",
          path: path)
      }
      isFresh = created
      connection = Mutex(db)
    } catch let error as SQLiteConnection.Failure {
      throw Self.error(error, "open index", path)
    } catch let error as TroveError {
      throw error
    } catch {
      throw TroveError(.indexFailure, "cannot open index '\(path)': \(error)", path: path)
    }
  }

  private static func error(_ failure: SQLiteConnection.Failure, _ action: String, _ path: String)
    -> TroveError
  {
    TroveError(.indexFailure, "cannot \(action) '\(path)': \(failure)", path: path)
  }

  /// Runs `body` with the connection, turning SQLite failures into
  /// ``TroveError``s that name the index and the action.
  private func run<T>(
    _ action: String, _ body: (SQLiteConnection) throws(SQLiteConnection.Failure) -> T
  )
    throws(TroveError) -> T
  {
    let result: Result<T, SQLiteConnection.Failure> = connection.withLock { db in
      do throws(SQLiteConnection.Failure) { return .success(try body(db)) } catch {
        return .failure(error)
      }
    }
    switch result {
    case .success(let value): return value
    case .failure(let failure): throw Self.error(failure, action, path)
    }
  }

  /// The columns `entry(_:)` reads, in order.
  private static let columns =
    "digest, size, allocated, created, last_access, compressed, COALESCE(stored, size)"

  private static func entry(_ row: SQLiteConnection.Row) -> Entry? {
    guard let digest = Digest(hex: Substring(row.text(0))) else { return nil }
    return Entry(
      digest: digest, size: row.integer(1), allocatedBytes: row.integer(2),
      created: row.integer(3), lastAccess: row.integer(4), isCompressed: row.integer(5) != 0,
      storedBytes: row.integer(6))
  }

  private static func values(_ entry: Entry) -> [SQLiteValue] {
    [
      .text(entry.digest.hex), .integer(entry.size), .integer(entry.allocatedBytes),
      .integer(entry.created), .integer(entry.lastAccess), .integer(entry.isCompressed ? 1 : 0),
      entry.isCompressed ? .integer(entry.storedBytes) : .null,
    ]
  }

  private static let insert =
    "INSERT OR IGNORE INTO objects(digest, size, allocated, created, last_access, compressed, stored) VALUES (?,?,?,?,?,?,?)"

  /// Records a newly published object (or one the index had lost), and
  /// counts why it was stored raw if compression was on but skipped.
  func recordNew(_ entry: Entry, skipped: CompressionSkip? = nil) throws(TroveError) {
    try run("record \(entry.digest)") { db throws(SQLiteConnection.Failure) in
      try db.transaction { () throws(SQLiteConnection.Failure) in
        try db.query(Self.insert, Self.values(entry))
        if let skipped {
          try db.query(
            "UPDATE counters SET value = value + 1 WHERE name = ?", [.text(skipped.rawValue)])
        }
      }
    }
  }

  /// Records that `entry`'s object is now stored as `entry` says
  /// (compressed or raw, its file's length and allocation).
  func recordStorage(_ entry: Entry) throws(TroveError) {
    try run("record storage of \(entry.digest)") { db throws(SQLiteConnection.Failure) in
      try db.query(
        "UPDATE objects SET compressed = ?, stored = ?, allocated = ? WHERE digest = ?",
        [
          .integer(entry.isCompressed ? 1 : 0),
          entry.isCompressed ? .integer(entry.storedBytes) : .null,
          .integer(entry.allocatedBytes), .text(entry.digest.hex),
        ])
    }
  }

  /// Records a put whose content was already stored: counts the dedup hit
  /// and the bytes it saved, refreshes the last access, and adds the row if
  /// the index had lost it.
  func recordDuplicate(_ entry: Entry) throws(TroveError) {
    try run("record duplicate \(entry.digest)") { db throws(SQLiteConnection.Failure) in
      try db.transaction { () throws(SQLiteConnection.Failure) in
        try db.query(
          "UPDATE counters SET value = value + (CASE name WHEN 'dedup_hits' THEN 1 ELSE ? END) WHERE name IN ('dedup_hits', 'dedup_bytes')",
          [.integer(entry.size)])
        try db.query(
          "UPDATE objects SET last_access = max(last_access, ?) WHERE digest = ?",
          [.integer(entry.lastAccess), .text(entry.digest.hex)])
        if db.changes == 0 { try db.query(Self.insert, Self.values(entry)) }
      }
    }
  }

  /// Removes the row for `digest` and its pins; whether there was a row.
  @discardableResult
  func remove(_ digest: Digest) throws(TroveError) -> Bool {
    try run("remove \(digest)") { db throws(SQLiteConnection.Failure) in
      try db.transaction { () throws(SQLiteConnection.Failure) in
        try db.query("DELETE FROM objects WHERE digest = ?", [.text(digest.hex)])
        let removed = db.changes > 0
        try db.query("DELETE FROM pins WHERE digest = ?", [.text(digest.hex)])
        return removed
      }
    }
  }

  // MARK: Access and eviction

  /// Records a read of `digest` at `now` unless the recorded access is
  /// less than `resolution` nanoseconds old. The check is a read; only a
  /// stale record takes the write lock. Returns whether it wrote.
  @discardableResult
  func touch(_ digest: Digest, now: Int64, resolution: Int64) throws(TroveError) -> Bool {
    try run("record access to \(digest)") { db throws(SQLiteConnection.Failure) in
      var recorded: Int64?
      try db.query("SELECT last_access FROM objects WHERE digest = ?", [.text(digest.hex)]) {
        row in recorded = row.integer(0)
      }
      guard let recorded, now - recorded >= resolution, now > recorded else { return false }
      try db.query(
        "UPDATE objects SET last_access = ? WHERE digest = ? AND last_access < ?",
        [.integer(now), .text(digest.hex), .integer(now)])
      return db.changes > 0
    }
  }

  /// SQL true for rows of `objects` (aliased `o`) that an unexpired pin holds.
  private static let pinned =
    "EXISTS (SELECT 1 FROM pins p WHERE p.digest = o.digest AND (p.expires IS NULL OR p.expires > ?))"

  /// Up to `limit` unpinned entries in least-recently-used order, after
  /// `cursor` (last access, digest) and, if given, last accessed before
  /// `cutoff`. O(limit · log n) through the access index.
  func leastRecentlyUsed(
    after cursor: (Int64, String), before cutoff: Int64?, now: Int64, limit: Int
  ) throws(TroveError) -> [Entry] {
    try run("list eviction candidates") { db throws(SQLiteConnection.Failure) in
      var found: [Entry] = []
      try db.query(
        """
        SELECT \(Self.columns) FROM objects o
        WHERE (last_access, digest) > (?, ?) AND last_access < ? AND NOT \(Self.pinned)
        ORDER BY last_access, digest LIMIT ?
        """,
        [
          .integer(cursor.0), .text(cursor.1), .integer(cutoff ?? .max), .integer(now),
          .integer(Int64(limit)),
        ]
      ) { row in if let e = Self.entry(row) { found.append(e) } }
      return found
    }
  }

  /// Deletes each entry's row if it is still as it was chosen — not read
  /// or stored again since (same last access) and not pinned — in one
  /// transaction, and returns which it deleted. The caller removes those
  /// files only then, after the commit.
  func evict(_ entries: [Entry], now: Int64) throws(TroveError) -> [Bool] {
    guard !entries.isEmpty else { return [] }
    return try run("evict \(entries.count) entries") { db throws(SQLiteConnection.Failure) in
      try db.transaction { () throws(SQLiteConnection.Failure) in
        try db.repeated(
          "DELETE FROM objects AS o WHERE digest = ? AND last_access = ? AND NOT \(Self.pinned)",
          entries.map { [.text($0.digest.hex), .integer($0.lastAccess), .integer(now)] }
        ).map { $0 > 0 }
      }
    }
  }

  // MARK: Pins

  /// Pins `digest` under `name` until `expires` (nanoseconds since 1970;
  /// nil for no expiry), replacing that name's earlier pin of it.
  func pin(_ digest: Digest, name: String, expires: Int64?, now: Int64) throws(TroveError) {
    try run("pin \(digest)") { db throws(SQLiteConnection.Failure) in
      try db.query(
        "INSERT OR REPLACE INTO pins(digest, name, expires, created) VALUES (?,?,?,?)",
        [.text(digest.hex), .text(name), expires.map { .integer($0) } ?? .null, .integer(now)])
    }
  }

  /// Removes `name`'s pin of `digest`; whether there was one.
  func unpin(_ digest: Digest, name: String) throws(TroveError) -> Bool {
    try run("unpin \(digest)") { db throws(SQLiteConnection.Failure) in
      try db.query(
        "DELETE FROM pins WHERE digest = ? AND name = ?", [.text(digest.hex), .text(name)])
      return db.changes > 0
    }
  }

  /// Every pin, expired ones included, ordered by digest and name.
  func pins() throws(TroveError) -> [Pin] {
    try run("list pins") { db throws(SQLiteConnection.Failure) in
      var all: [Pin] = []
      try db.query("SELECT digest, name, expires, created FROM pins ORDER BY digest, name") {
        row in
        guard let digest = Digest(hex: Substring(row.text(0))) else { return }
        all.append(
          Pin(
            digest: digest, name: row.text(1), expires: row.isNull(2) ? nil : row.integer(2),
            created: row.integer(3)))
      }
      return all
    }
  }

  /// Removes pins whose lease ran out; returns how many.
  func removeExpiredPins(now: Int64) throws(TroveError) -> Int {
    try run("remove expired pins") { db throws(SQLiteConnection.Failure) in
      // Look first: a DELETE takes the write lock even when nothing matches.
      var any = false
      try db.query(
        "SELECT 1 FROM pins WHERE expires IS NOT NULL AND expires <= ? LIMIT 1", [.integer(now)]
      ) { _ in any = true }
      guard any else { return 0 }
      try db.query(
        "DELETE FROM pins WHERE expires IS NOT NULL AND expires <= ?", [.integer(now)])
      return db.changes
    }
  }

  /// Entries held by an unexpired pin and the bytes they take.
  func pinnedTotals(now: Int64) throws(TroveError) -> (entries: Int64, bytes: Int64) {
    try run("count pinned entries") { db throws(SQLiteConnection.Failure) in
      var totals: (Int64, Int64) = (0, 0)
      try db.query(
        "SELECT COUNT(*), COALESCE(SUM(allocated), 0) FROM objects o WHERE \(Self.pinned)",
        [.integer(now)]
      ) { row in totals = (row.integer(0), row.integer(1)) }
      return totals
    }
  }

  // MARK: Sweeps

  /// Records what the last sweep did.
  func recordSweep(at time: Int64, removed: Int64, bytes: Int64, nanoseconds: Int64)
    throws(TroveError)
  {
    try run("record sweep") { db throws(SQLiteConnection.Failure) in
      try db.transaction { () throws(SQLiteConnection.Failure) in
        for (name, value) in [
          ("last_sweep_time", time), ("last_sweep_removed", removed),
          ("last_sweep_bytes", bytes), ("last_sweep_nanoseconds", nanoseconds),
        ] {
          try db.query(
            "UPDATE counters SET value = ? WHERE name = ?", [.integer(value), .text(name)])
        }
      }
    }
  }

  /// The row for `digest`, if any.
  func entry(for digest: Digest) throws(TroveError) -> Entry? {
    try run("look up \(digest)") { db throws(SQLiteConnection.Failure) in
      var found: Entry?
      try db.query(
        "SELECT \(Self.columns) FROM objects WHERE digest = ?",
        [.text(digest.hex)]
      ) { row in found = Self.entry(row) }
      return found
    }
  }

  /// Whether some object has exactly `size` bytes: a hint that a put of a
  /// file that size may be a duplicate. O(log n).
  func hasObject(ofSize size: Int64) throws(TroveError) -> Bool {
    try run("look up size \(size)") { db throws(SQLiteConnection.Failure) in
      var found = false
      try db.query("SELECT 1 FROM objects WHERE size = ? LIMIT 1", [.integer(size)]) { _ in
        found = true
      }
      return found
    }
  }

  /// Every row, ordered by digest. O(n).
  func entries() throws(TroveError) -> [Entry] {
    try run("list entries") { db throws(SQLiteConnection.Failure) in
      var all: [Entry] = []
      try db.query(
        "SELECT \(Self.columns) FROM objects ORDER BY digest"
      ) { row in if let e = Self.entry(row) { all.append(e) } }
      return all
    }
  }

  /// The running totals. O(1).
  func totals() throws(TroveError) -> IndexTotals {
    try run("read totals") { db throws(SQLiteConnection.Failure) in
      var totals = IndexTotals()
      try db.query("SELECT name, value FROM counters") { row in
        let value = row.integer(1)
        switch row.text(0) {
        case "entries": totals.entries = value
        case "logical_bytes": totals.logicalBytes = value
        case "allocated_bytes": totals.allocatedBytes = value
        case "dedup_hits": totals.dedupHits = value
        case "dedup_bytes": totals.dedupBytes = value
        case "last_sweep_time": totals.lastSweepTime = value
        case "last_sweep_removed": totals.lastSweepRemoved = value
        case "last_sweep_bytes": totals.lastSweepBytes = value
        case "last_sweep_nanoseconds": totals.lastSweepNanoseconds = value
        case "stored_bytes": totals.storedBytes = value
        case "compressed_entries": totals.compressedEntries = value
        case "skipped_incompressible": totals.skippedIncompressible = value
        case "skipped_small": totals.skippedSmall = value
        default: break
        }
      }
      return totals
    }
  }

  /// Makes the rows exactly `found` (the objects on disk): adds missing
  /// rows, drops rows without a file, keeps access times of rows that stay.
  /// Returns (added, dropped). O(n log n).
  func reconcile(with found: [Entry]) throws(TroveError) -> (added: Int, dropped: Int) {
    try run("rebuild") { db throws(SQLiteConnection.Failure) in
      try db.transaction { () throws(SQLiteConnection.Failure) in
        try db.execute(
          "CREATE TEMP TABLE IF NOT EXISTS present(digest TEXT PRIMARY KEY) WITHOUT ROWID; DELETE FROM present;"
        )
        var added = 0
        for entry in found {
          try db.query(
            "INSERT OR IGNORE INTO present(digest) VALUES (?)", [.text(entry.digest.hex)])
          try db.query(Self.insert, Self.values(entry))
          added += db.changes
        }
        try db.execute("DELETE FROM objects WHERE digest NOT IN (SELECT digest FROM present)")
        let dropped = db.changes
        try db.execute("DROP TABLE present")
        return (added, dropped)
      }
    }
  }

  // MARK: Named keys

  /// Points `key` at `digest`, replacing what it pointed at.
  func bind(key: String, to digest: Digest, at time: Int64) throws(TroveError) {
    try run("bind key '\(key)'") { db throws(SQLiteConnection.Failure) in
      try db.query(
        "INSERT INTO keys(key, digest, updated) VALUES (?,?,?) ON CONFLICT(key) DO UPDATE SET digest = excluded.digest, updated = excluded.updated",
        [.text(key), .text(digest.hex), .integer(time)])
    }
  }

  /// The digest `key` points at, if any.
  func digest(forKey key: String) throws(TroveError) -> Digest? {
    try run("look up key '\(key)'") { db throws(SQLiteConnection.Failure) in
      var found: Digest?
      try db.query("SELECT digest FROM keys WHERE key = ?", [.text(key)]) { row in
        found = Digest(hex: Substring(row.text(0)))
      }
      return found
    }
  }

  /// Removes `key`; whether it existed.
  @discardableResult
  func unbind(key: String) throws(TroveError) -> Bool {
    try run("remove key '\(key)'") { db throws(SQLiteConnection.Failure) in
      try db.query("DELETE FROM keys WHERE key = ?", [.text(key)])
      return db.changes > 0
    }
  }
}
