/// Running totals kept by the index, read in O(1).
struct IndexTotals: Sendable {
  var entries: Int64 = 0
  var logicalBytes: Int64 = 0
  /// Bytes on disk: every object's allocated bytes, less those it shares
  /// with another object (``sharedBytes``), which count once.
  var allocatedBytes: Int64 = 0
  /// Bytes of objects' files whose blocks another object's file holds too.
  var sharedBytes: Int64 = 0
  var dedupHits: Int64 = 0
  var dedupBytes: Int64 = 0
  var storedBytes: Int64 = 0
  var compressedEntries: Int64 = 0
  var skippedIncompressible: Int64 = 0
  var skippedSmall: Int64 = 0
  /// Reads by digest served from the store (see ``AccessCount``).
  var hits: Int64 = 0
  /// Reads served by objects read through a remote.
  var remoteHits: Int64 = 0
  /// Reads by digest the store could not serve.
  var misses: Int64 = 0
  /// When ``hits`` and ``misses`` were last reset, if ever.
  var countedSince: Int64?
}

/// The rows of `counters` that count reads by digest (`get`, `fetch`),
/// for the hit rate. Rows are created by their first count (an upsert),
/// so indexes of every schema version take them without a migration.
///
/// Counted by the ``Store`` in memory (``PendingAccessCounts``) and added
/// here in batches.
enum AccessCount {
  static let hits = "hits"
  static let remoteHits = "remote_hits"
  static let misses = "misses"
  static let since = "counted_since"
}

/// One line of the sweep log: what one sweep or pressure eviction did.
struct SweepRecord: Sendable, Hashable {
  var time: Int64
  var reason: SweepReason
  var removedEntries: Int64
  var removedBytes: Int64
  /// Free space the volume gained, measured with `statvfs`, when measured.
  var freedBytes: Int64?
  var nanoseconds: Int64
}

/// The `counters` table (totals kept by triggers on `objects`, and counts
/// kept by puts) and the `sweeps` log.
extension IndexSession {
  /// The running totals. O(1).
  func totals() throws(TroveError) -> IndexTotals {
    try run { db throws(SQLiteConnection.Failure) in
      var totals = IndexTotals()
      try db.query("SELECT name, value FROM counters") { row in
        let value = row.integer(1)
        switch row.text(0) {
        case "entries": totals.entries = value
        case "logical_bytes": totals.logicalBytes = value
        case "allocated_bytes": totals.allocatedBytes = value
        case "shared_bytes": totals.sharedBytes = value
        case "dedup_hits": totals.dedupHits = value
        case "dedup_bytes": totals.dedupBytes = value
        case "stored_bytes": totals.storedBytes = value
        case "compressed_entries": totals.compressedEntries = value
        case "skipped_incompressible": totals.skippedIncompressible = value
        case "skipped_small": totals.skippedSmall = value
        case AccessCount.hits: totals.hits = value
        case AccessCount.remoteHits: totals.remoteHits = value
        case AccessCount.misses: totals.misses = value
        case AccessCount.since: totals.countedSince = value
        default: break
        }
      }
      totals.allocatedBytes -= totals.sharedBytes
      return totals
    }
  }

  /// Counts a put of `size` bytes the store already held.
  func countDuplicate(size: Int64) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      try db.query(
        "UPDATE counters SET value = value + (CASE name WHEN 'dedup_hits' THEN 1 ELSE ? END) WHERE name IN ('dedup_hits', 'dedup_bytes')",
        [.integer(size)])
    }
  }

  /// Adds `hits` and `misses` to the counts of reads by digest.
  func addAccessCounts(hits: Int64, remoteHits: Int64, misses: Int64) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      let counts = [
        (AccessCount.hits, hits), (AccessCount.remoteHits, remoteHits),
        (AccessCount.misses, misses),
      ]
      for (name, value) in counts where value > 0 {
        try db.query(
          "INSERT INTO counters(name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
          [.text(name), .integer(value)])
      }
    }
  }

  /// Sets the hit and miss counts to zero, from `now` on.
  func resetAccessCounts(now: Int64) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      try db.query(
        "DELETE FROM counters WHERE name IN (?, ?, ?)",
        [.text(AccessCount.hits), .text(AccessCount.remoteHits), .text(AccessCount.misses)])
      try db.query(
        "INSERT OR REPLACE INTO counters(name, value) VALUES (?, ?)",
        [.text(AccessCount.since), .integer(now)])
    }
  }

  /// Counts an object stored raw although compression was on.
  func countSkip(_ skip: CompressionSkip) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      try db.query(
        "UPDATE counters SET value = value + 1 WHERE name = ?", [.text(skip.rawValue)])
    }
  }

  /// Marks a new index as filled from the objects and `references.log`.
  func clearRebuildPending() throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      try db.query("DELETE FROM counters WHERE name = 'rebuild_pending'")
    }
  }

  /// Takes the next fan-out folder (0–255) for a sweep to reconcile, in
  /// turn, so that every folder is reconciled once in 256 sweeps.
  func nextReconcileFolder() throws(TroveError) -> Int {
    try run { db throws(SQLiteConnection.Failure) in
      var value: Int64 = 0
      try db.query(
        "UPDATE counters SET value = (value + 1) % 256 WHERE name = 'reconcile_cursor' RETURNING value"
      ) { row in value = row.integer(0) }
      return Int((value + 255) % 256)
    }
  }

  /// Appends `record` to the sweep log, which keeps the last 100.
  func appendSweep(_ record: SweepRecord) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      try db.query(
        "INSERT INTO sweeps(time, reason, removed, bytes, freed, nanoseconds) VALUES (?,?,?,?,?,?)",
        [
          .integer(record.time), .text(record.reason.rawValue), .integer(record.removedEntries),
          .integer(record.removedBytes), record.freedBytes.map { .integer($0) } ?? .null,
          .integer(record.nanoseconds),
        ])
      try db.query("DELETE FROM sweeps WHERE id <= (SELECT MAX(id) FROM sweeps) - 100")
    }
  }

  /// The latest record of the sweep log, of one of `reasons` when given.
  func lastSweep(reasons: [SweepReason]? = nil) throws(TroveError) -> SweepRecord? {
    try run { db throws(SQLiteConnection.Failure) in
      var found: SweepRecord?
      let filter = reasons.map { list in
        " WHERE reason IN (" + list.map { "'\($0.rawValue)'" }.joined(separator: ",") + ")"
      }
      try db.query(
        "SELECT time, reason, removed, bytes, freed, nanoseconds FROM sweeps\(filter ?? "") ORDER BY id DESC LIMIT 1"
      ) { row in
        found = SweepRecord(
          time: row.integer(0), reason: SweepReason(rawValue: row.text(1)) ?? .requested,
          removedEntries: row.integer(2), removedBytes: row.integer(3),
          freedBytes: row.isNull(4) ? nil : row.integer(4), nanoseconds: row.integer(5))
      }
      return found
    }
  }
}
