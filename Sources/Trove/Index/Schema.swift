import Foundation

/// The index's schema and its migrations (`PRAGMA user_version`).
///
/// - 1: objects, keys, counters.
/// - 2: pins, and the last sweep's counters.
/// - 3: the compression columns (`compressed`, `stored`) and counters.
/// - 4: keys indexed by digest and removed with their object; a log of
///   sweeps with their reason (`sweeps`); removals in progress
///   (`removing`); the reconcile cursor; the update trigger also follows a
///   corrected `size`.
/// - 5: what a fetch learnt about a key (size, validators, freshness, final
///   URL, fetch time: columns of `keys`, NULL for `put --key`), and
///   publishers' checksums verified against objects (`checksums`).
/// - 6: what each remote is known to hold (`remote_objects`), from which
///   the upload queue follows.
/// - 7: the `objects_removed` trigger stands aside while a `bulk_removal`
///   counter exists (inside a batch eviction's own transaction, which
///   takes the batch's totals off at once).
/// - 8: removals between their two steps a row per run of up to 1,024
///   objects (`removals`, the records packed in a blob), not a row per
///   object (`removing`, whose rows are recorded again so and which is
///   dropped: a release that still writes it fails on this index rather
///   than miss a removal).
///
/// Opening an older index upgrades it in one transaction; another process
/// may do it first. A newer one is refused.
enum Schema {
  static let version: Int64 = 8
  /// The version that keeps removals a row per run of objects.
  static let packedRemovals: Int64 = 8
  /// The oldest version a read-only store's index is read at, as it is:
  /// 5 lacks only what remotes hold (`remote_objects`), which reads of a
  /// store that cannot be written do without.
  static let oldestReadable: Int64 = 5

  /// Creates or upgrades the schema of `db`; returns the version it found
  /// and whether it created the schema (a new or lost index, to be rebuilt
  /// from the objects). A version newer than ``version`` is left alone.
  static func migrate(_ db: SQLiteConnection) throws(SQLiteConnection.Failure)
    -> (found: Int64, created: Bool)
  {
    var version: Int64 = 0
    var created = false
    try db.query("PRAGMA user_version") { row in version = row.integer(0) }
    if version < Self.version {
      try db.transaction { () throws(SQLiteConnection.Failure) in
        try db.query("PRAGMA user_version") { row in version = row.integer(0) }
        guard version < Self.version else { return }
        created = version == 0
        if (1...2).contains(version) {
          try db.execute(
            "ALTER TABLE objects ADD COLUMN compressed INTEGER NOT NULL DEFAULT 0; ALTER TABLE objects ADD COLUMN stored INTEGER;"
          )
        }
        if (1...4).contains(version) { try db.execute(toVersion5) }
        try db.execute(tables)
        try db.execute(triggers)
        if created {
          // Cleared once the objects and references.log are in: until
          // then, every open rebuilds (a kill mid-rebuild loses nothing).
          try db.execute(
            "INSERT OR REPLACE INTO counters(name, value) VALUES ('rebuild_pending', 1)")
        }
        if (1...3).contains(version) { try db.execute(toVersion4) }
        if (4...7).contains(version) { try toVersion8(db) }
        try db.execute("PRAGMA user_version = \(Self.version)")
      }
    }
    return (version, created)
  }

  /// Every table and index, created if missing.
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
      \(originColumns)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS keys_by_digest ON keys(digest);
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
    INSERT OR IGNORE INTO counters(name, value) VALUES
      ('entries', 0), ('logical_bytes', 0), ('allocated_bytes', 0),
      ('dedup_hits', 0), ('dedup_bytes', 0), ('reconcile_cursor', 0);
    INSERT OR IGNORE INTO counters(name, value) VALUES
      ('stored_bytes', (SELECT COALESCE(SUM(COALESCE(stored, size)), 0) FROM objects)),
      ('compressed_entries', (SELECT COUNT(*) FROM objects WHERE compressed = 1)),
      ('skipped_incompressible', 0), ('skipped_small', 0);
    """

  /// From version 7 (4 or newer): the removals in progress, a row per
  /// object in `removing`, recorded again in `removals` — in rows of
  /// their own for each time and kind, so that the stale ones still
  /// finish when they are due — and `removing` dropped.
  private static func toVersion8(_ db: SQLiteConnection) throws(SQLiteConnection.Failure) {
    var exists = false
    try db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'removing'") { _ in
      exists = true
    }
    guard exists else { return }
    var groups: [[Int64]: [Removal]] = [:]
    try db.query("SELECT digest, since, explicit, raw_file, zst_file FROM removing") { row in
      guard let digest = BlobDigest(hex: Substring(row.text(0))) else { return }
      let explicit = row.integer(2) != 0
      groups[[row.integer(1), explicit ? 1 : 0], default: []].append(
        Removal(
          digest: digest, isExplicit: explicit,
          raw: row.optionalText(3).flatMap { FileIdentity(text: $0) },
          compressed: row.optionalText(4).flatMap { FileIdentity(text: $0) }))
    }
    for (key, removals) in groups {
      _ = try RemovalRow.insert(removals, since: key[0], db)
    }
    try db.execute("DROP TABLE removing")
  }

  /// The columns a fetch fills in `keys` (all NULL for `put --key`).
  private static let originColumns = """
    size INTEGER, etag TEXT, last_modified TEXT, expires INTEGER, immutable INTEGER,
      final_url TEXT, fetched INTEGER
    """

  /// From version 4 (or older): the fetch columns of `keys`, added before
  /// `tables` creates anything that is missing.
  private static let toVersion5 = originColumns.split(separator: ",").map {
    "ALTER TABLE keys ADD COLUMN \($0.trimmingCharacters(in: .whitespacesAndNewlines));"
  }.joined(separator: "\n")

  /// The triggers that keep the totals, replaced whole on every upgrade.
  private static let triggers = """
    DROP TRIGGER IF EXISTS objects_added;
    DROP TRIGGER IF EXISTS objects_removed;
    DROP TRIGGER IF EXISTS objects_resized;
    DROP TRIGGER IF EXISTS objects_restored;
    CREATE TRIGGER objects_added AFTER INSERT ON objects BEGIN
      UPDATE counters SET value = value + CASE name WHEN 'entries' THEN 1
        WHEN 'logical_bytes' THEN NEW.size WHEN 'allocated_bytes' THEN NEW.allocated
        WHEN 'stored_bytes' THEN COALESCE(NEW.stored, NEW.size) ELSE NEW.compressed END
      WHERE name IN
        ('entries', 'logical_bytes', 'allocated_bytes', 'stored_bytes', 'compressed_entries');
    END;
    CREATE TRIGGER objects_removed AFTER DELETE ON objects
      WHEN NOT EXISTS (SELECT 1 FROM counters WHERE name = 'bulk_removal')
    BEGIN
      UPDATE counters SET value = value - CASE name WHEN 'entries' THEN 1
        WHEN 'logical_bytes' THEN OLD.size WHEN 'allocated_bytes' THEN OLD.allocated
        WHEN 'stored_bytes' THEN COALESCE(OLD.stored, OLD.size) ELSE OLD.compressed END
      WHERE name IN
        ('entries', 'logical_bytes', 'allocated_bytes', 'stored_bytes', 'compressed_entries');
    END;
    CREATE TRIGGER objects_restored AFTER UPDATE OF size, allocated, compressed, stored ON objects
    BEGIN
      UPDATE counters SET value = value + CASE name
        WHEN 'logical_bytes' THEN NEW.size - OLD.size
        WHEN 'allocated_bytes' THEN NEW.allocated - OLD.allocated
        WHEN 'stored_bytes' THEN COALESCE(NEW.stored, NEW.size) - COALESCE(OLD.stored, OLD.size)
        ELSE NEW.compressed - OLD.compressed END
      WHERE name IN ('logical_bytes', 'allocated_bytes', 'stored_bytes', 'compressed_entries');
    END;
    """

  /// From version 3 (or older, after the steps above): keys of objects that
  /// are gone are dropped, the last sweep moves into the log.
  private static let toVersion4 = """
    DELETE FROM keys WHERE digest NOT IN (SELECT digest FROM objects);
    INSERT INTO sweeps(time, reason, removed, bytes, freed, nanoseconds)
      SELECT t.value, 'sweep', r.value, b.value, NULL, n.value
      FROM counters t, counters r, counters b, counters n
      WHERE t.name = 'last_sweep_time' AND t.value > 0 AND r.name = 'last_sweep_removed'
        AND b.name = 'last_sweep_bytes' AND n.name = 'last_sweep_nanoseconds';
    DELETE FROM counters WHERE name IN
      ('last_sweep_time', 'last_sweep_removed', 'last_sweep_bytes', 'last_sweep_nanoseconds');
    """
}
