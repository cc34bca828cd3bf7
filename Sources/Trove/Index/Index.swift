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
}

/// Running totals kept by the index, read in O(1).
struct IndexTotals: Sendable {
  var entries: Int64 = 0
  var logicalBytes: Int64 = 0
  var allocatedBytes: Int64 = 0
  var dedupHits: Int64 = 0
  var dedupBytes: Int64 = 0
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
  /// Format version of the schema (`PRAGMA user_version`).
  static let schemaVersion: Int64 = 1

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
      last_access INTEGER NOT NULL
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
    CREATE TRIGGER IF NOT EXISTS objects_added AFTER INSERT ON objects BEGIN
      UPDATE counters SET value = value + 1 WHERE name = 'entries';
      UPDATE counters SET value = value + NEW.size WHERE name = 'logical_bytes';
      UPDATE counters SET value = value + NEW.allocated WHERE name = 'allocated_bytes';
    END;
    CREATE TRIGGER IF NOT EXISTS objects_removed AFTER DELETE ON objects BEGIN
      UPDATE counters SET value = value - 1 WHERE name = 'entries';
      UPDATE counters SET value = value - OLD.size WHERE name = 'logical_bytes';
      UPDATE counters SET value = value - OLD.allocated WHERE name = 'allocated_bytes';
    END;
    CREATE TRIGGER IF NOT EXISTS objects_resized AFTER UPDATE OF size, allocated ON objects BEGIN
      UPDATE counters SET value = value + NEW.size - OLD.size WHERE name = 'logical_bytes';
      UPDATE counters SET value = value + NEW.allocated - OLD.allocated
        WHERE name = 'allocated_bytes';
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
      if version == 0 {
        // Create the schema under the write lock; another process may win.
        try db.transaction { () throws(SQLiteConnection.Failure) in
          try db.query("PRAGMA user_version") { row in version = row.integer(0) }
          if version == 0 {
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
      isFresh = version == 0
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

  private static func entry(_ row: SQLiteConnection.Row) -> Entry? {
    guard let digest = Digest(hex: Substring(row.text(0))) else { return nil }
    return Entry(
      digest: digest, size: row.integer(1), allocatedBytes: row.integer(2),
      created: row.integer(3), lastAccess: row.integer(4))
  }

  /// Records a newly published object (or one the index had lost).
  func recordNew(_ entry: Entry) throws(TroveError) {
    try run("record \(entry.digest)") { db throws(SQLiteConnection.Failure) in
      try db.query(
        "INSERT OR IGNORE INTO objects(digest, size, allocated, created, last_access) VALUES (?,?,?,?,?)",
        [
          .text(entry.digest.hex), .integer(entry.size), .integer(entry.allocatedBytes),
          .integer(entry.created), .integer(entry.lastAccess),
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
        if db.changes == 0 {
          try db.query(
            "INSERT OR IGNORE INTO objects(digest, size, allocated, created, last_access) VALUES (?,?,?,?,?)",
            [
              .text(entry.digest.hex), .integer(entry.size), .integer(entry.allocatedBytes),
              .integer(entry.created), .integer(entry.lastAccess),
            ])
        }
      }
    }
  }

  /// Removes the row for `digest`; whether there was one.
  @discardableResult
  func remove(_ digest: Digest) throws(TroveError) -> Bool {
    try run("remove \(digest)") { db throws(SQLiteConnection.Failure) in
      try db.query("DELETE FROM objects WHERE digest = ?", [.text(digest.hex)])
      return db.changes > 0
    }
  }

  /// The row for `digest`, if any.
  func entry(for digest: Digest) throws(TroveError) -> Entry? {
    try run("look up \(digest)") { db throws(SQLiteConnection.Failure) in
      var found: Entry?
      try db.query(
        "SELECT digest, size, allocated, created, last_access FROM objects WHERE digest = ?",
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
        "SELECT digest, size, allocated, created, last_access FROM objects ORDER BY digest"
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
          try db.query(
            "INSERT OR IGNORE INTO objects(digest, size, allocated, created, last_access) VALUES (?,?,?,?,?)",
            [
              .text(entry.digest.hex), .integer(entry.size), .integer(entry.allocatedBytes),
              .integer(entry.created), .integer(entry.lastAccess),
            ])
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
