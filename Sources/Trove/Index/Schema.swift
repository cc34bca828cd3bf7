import Foundation

/// The index's schema (`PRAGMA user_version`): one version, made whole
/// when the index is new; an index of a newer version is refused.
/// Migrations are kept only from one released version to the next (see
/// CHANGELOG.md): there is none before the first release.
enum Schema {
  static let version: Int64 = 1

  /// Creates the schema of `db` when it has none (version 0, or any
  /// version below 1); returns the version it found and whether it
  /// created the schema (a new or lost index, to be rebuilt from the
  /// objects). Any other version is left alone, for the caller to refuse.
  static func create(_ db: SQLiteConnection) throws(SQLiteConnection.Failure)
    -> (found: Int64, created: Bool)
  {
    var version: Int64 = 0
    var created = false
    try db.query("PRAGMA user_version") { row in version = row.integer(0) }
    if version < Self.version {
      try db.transaction { () throws(SQLiteConnection.Failure) in
        // Another process may have made it meanwhile.
        try db.query("PRAGMA user_version") { row in version = row.integer(0) }
        guard version < Self.version else { return }
        created = true
        try db.execute(tables)
        try db.execute(triggers)
        // Cleared once the objects and references.log are in: until
        // then, every open rebuilds (a kill mid-rebuild loses nothing).
        try db.execute(
          "INSERT OR REPLACE INTO counters(name, value) VALUES ('rebuild_pending', 1)")
        try db.execute("PRAGMA user_version = \(Self.version)")
      }
    } else if version == Self.version {
      try addColumnsMadeInPlace(db)
      try addTablesMadeInPlace(db)
    }
    return (version, created)
  }

  /// Columns this unreleased version gained in place, added to an index
  /// an earlier build of it made: every statement names them. One look at
  /// the table's columns when nothing is missing.
  private static func addColumnsMadeInPlace(_ db: SQLiteConnection)
    throws(SQLiteConnection.Failure)
  {
    var columns: Set<String> = []
    try db.query("PRAGMA table_info(keys)") { row in columns.insert(row.text(1)) }
    guard !columns.isSuperset(of: ["pulled", "served_by", "name", "content_type"]) else { return }
    do throws(SQLiteConnection.Failure) {
      try db.transaction { () throws(SQLiteConnection.Failure) in
        var again: Set<String> = []
        try db.query("PRAGMA table_info(keys)") { row in again.insert(row.text(1)) }
        // Another process may have added them meanwhile.
        if !again.contains("pulled") {
          // Keys bound before the column existed may have come from a
          // remote's record: none is taken for this store's own.
          try db.execute("ALTER TABLE keys ADD COLUMN pulled INTEGER DEFAULT 1")
        }
        if !again.contains("served_by") {
          // Bound before mirrors: served by the key's own URL (null).
          try db.execute("ALTER TABLE keys ADD COLUMN served_by TEXT")
        }
        if !again.contains("name") { try addRecordNames(db) }
        if !again.contains("content_type") {
          try db.execute("ALTER TABLE keys ADD COLUMN content_type TEXT")
        }
      }
    } catch  where error.isReadOnly {
      // A store this process may not write: its key statements fail,
      // each with its own error, until a writer opens it.
    }
  }

  /// Tables this unreleased version gained in place, added to an index an
  /// earlier build of it made. One look at the schema when none is missing.
  private static func addTablesMadeInPlace(_ db: SQLiteConnection)
    throws(SQLiteConnection.Failure)
  {
    var found = false
    try db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'manifests'") { _ in
      found = true
    }
    guard !found else { return }
    do throws(SQLiteConnection.Failure) {
      try db.transaction { () throws(SQLiteConnection.Failure) in try db.execute(manifestTables) }
    } catch  where error.isReadOnly {
      // A store this process may not write: it has no manifests until a
      // writer opens it.
    }
  }

  /// Adds the keys' record names (the XXH3-128 hex of each key, which
  /// SQLite cannot compute) and their index, naming every key there is:
  /// once, O(keys).
  private static func addRecordNames(_ db: SQLiteConnection) throws(SQLiteConnection.Failure) {
    try db.execute("ALTER TABLE keys ADD COLUMN name TEXT")
    var keys: [String] = []
    try db.query("SELECT key FROM keys") { row in keys.append(row.text(0)) }
    for key in keys {
      try db.query(
        "UPDATE keys SET name = ? WHERE key = ?",
        [.text(IndexSession.recordName(of: key)), .text(key)])
    }
    try db.execute("CREATE INDEX IF NOT EXISTS keys_by_name ON keys(name)")
  }

  /// Every table and index.
  private static let tables = """
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
    CREATE INDEX IF NOT EXISTS objects_by_created ON objects(created, digest);
    CREATE TABLE IF NOT EXISTS keys(
      key TEXT PRIMARY KEY NOT NULL,
      digest TEXT NOT NULL,
      updated INTEGER NOT NULL,
      size INTEGER,
      etag TEXT,
      last_modified TEXT,
      expires INTEGER,
      immutable INTEGER,
      final_url TEXT,
      fetched INTEGER,
      pulled INTEGER,
      served_by TEXT,
      name TEXT,
      content_type TEXT
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS keys_by_digest ON keys(digest);
    CREATE INDEX IF NOT EXISTS keys_by_name ON keys(name);
    CREATE TABLE IF NOT EXISTS checksums(
      algorithm TEXT NOT NULL,
      value TEXT NOT NULL,
      digest TEXT NOT NULL,
      PRIMARY KEY(algorithm, value)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS checksums_by_digest ON checksums(digest);
    CREATE TABLE IF NOT EXISTS remote_objects(
      remote TEXT NOT NULL,
      digest TEXT NOT NULL,
      state TEXT NOT NULL,
      confirmed INTEGER NOT NULL,
      PRIMARY KEY(remote, digest)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS remote_objects_by_digest ON remote_objects(digest);
    CREATE TABLE IF NOT EXISTS pins(
      digest TEXT NOT NULL,
      name TEXT NOT NULL,
      expires INTEGER,
      created INTEGER NOT NULL,
      PRIMARY KEY(digest, name)
    ) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS removals(
      id INTEGER PRIMARY KEY AUTOINCREMENT,
      since INTEGER NOT NULL,
      explicit INTEGER NOT NULL,
      first TEXT NOT NULL,
      last TEXT NOT NULL,
      records BLOB NOT NULL
    );
    CREATE TABLE IF NOT EXISTS sweeps(
      id INTEGER PRIMARY KEY,
      time INTEGER NOT NULL,
      reason TEXT NOT NULL,
      removed INTEGER NOT NULL,
      bytes INTEGER NOT NULL,
      freed INTEGER,
      nanoseconds INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS counters(
      name TEXT PRIMARY KEY NOT NULL,
      value INTEGER NOT NULL
    ) WITHOUT ROWID;
    \(manifestTables)
    INSERT OR IGNORE INTO counters(name, value) VALUES
      ('entries', 0), ('logical_bytes', 0), ('allocated_bytes', 0), ('stored_bytes', 0),
      ('compressed_entries', 0), ('dedup_hits', 0), ('dedup_bytes', 0),
      ('skipped_incompressible', 0), ('skipped_small', 0), ('reconcile_cursor', 0);
    """

  /// Each large object's chunks (``ChunkManifest``, encoded; `examined`
  /// once its blocks were shared with the versions it has chunks in
  /// common with, or found to have none), and a sample of their digests
  /// (``IndexSession/isHook(_:)``) pointing back at the objects that hold
  /// them: how a new object finds those versions. A chunk digest is kept
  /// as its high 64 bits: a hint, checked against the manifest (and the
  /// bytes) before use. `shared_blocks`: bytes of `digest`'s file that
  /// share their blocks with `source`'s, counted once in the store's
  /// allocated total (the `shared_bytes` counter is taken off it).
  private static let manifestTables = """
    CREATE TABLE IF NOT EXISTS manifests(
      digest TEXT PRIMARY KEY NOT NULL,
      encoded BLOB NOT NULL,
      examined INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS manifests_to_examine ON manifests(examined, digest);
    CREATE TABLE IF NOT EXISTS shared_blocks(
      digest TEXT NOT NULL,
      source TEXT NOT NULL,
      bytes INTEGER NOT NULL,
      PRIMARY KEY(digest, source)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS shared_blocks_by_source ON shared_blocks(source);
    INSERT OR IGNORE INTO counters(name, value) VALUES ('shared_bytes', 0);
    CREATE TRIGGER IF NOT EXISTS shared_blocks_added AFTER INSERT ON shared_blocks BEGIN
      UPDATE counters SET value = value + NEW.bytes WHERE name = 'shared_bytes';
    END;
    CREATE TRIGGER IF NOT EXISTS shared_blocks_removed AFTER DELETE ON shared_blocks BEGIN
      UPDATE counters SET value = value - OLD.bytes WHERE name = 'shared_bytes';
    END;
    CREATE TABLE IF NOT EXISTS chunk_hooks(
      chunk INTEGER NOT NULL,
      digest TEXT NOT NULL,
      PRIMARY KEY(chunk, digest)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS chunk_hooks_by_digest ON chunk_hooks(digest);
    """

  /// The triggers that keep the totals. A removal of many rows turns
  /// them off for its own connection and takes its totals off at once
  /// (``SQLiteConnection/withoutTriggers(_:)``).
  private static let triggers = """
    CREATE TRIGGER IF NOT EXISTS objects_added AFTER INSERT ON objects BEGIN
      UPDATE counters SET value = value + CASE name WHEN 'entries' THEN 1
        WHEN 'logical_bytes' THEN NEW.size WHEN 'allocated_bytes' THEN NEW.allocated
        WHEN 'stored_bytes' THEN COALESCE(NEW.stored, NEW.size) ELSE NEW.compressed END
      WHERE name IN
        ('entries', 'logical_bytes', 'allocated_bytes', 'stored_bytes', 'compressed_entries');
    END;
    CREATE TRIGGER IF NOT EXISTS objects_removed AFTER DELETE ON objects BEGIN
      UPDATE counters SET value = value - CASE name WHEN 'entries' THEN 1
        WHEN 'logical_bytes' THEN OLD.size WHEN 'allocated_bytes' THEN OLD.allocated
        WHEN 'stored_bytes' THEN COALESCE(OLD.stored, OLD.size) ELSE OLD.compressed END
      WHERE name IN
        ('entries', 'logical_bytes', 'allocated_bytes', 'stored_bytes', 'compressed_entries');
    END;
    CREATE TRIGGER IF NOT EXISTS objects_restored
      AFTER UPDATE OF size, allocated, compressed, stored ON objects
    BEGIN
      UPDATE counters SET value = value + CASE name
        WHEN 'logical_bytes' THEN NEW.size - OLD.size
        WHEN 'allocated_bytes' THEN NEW.allocated - OLD.allocated
        WHEN 'stored_bytes' THEN COALESCE(NEW.stored, NEW.size) - COALESCE(OLD.stored, OLD.size)
        ELSE NEW.compressed - OLD.compressed END
      WHERE name IN ('logical_bytes', 'allocated_bytes', 'stored_bytes', 'compressed_entries');
    END;
    """
}
