/// What the index keeps about one remote: its circuit breaker and what
/// reading through it did. Rows of `counters` named `remote:NAME:FIELD`,
/// created by their first count (an upsert), so a remote needs no table of
/// its own.
struct RemoteRecord: Sendable, Hashable {
  /// Failures in a row; 0 when the breaker is closed.
  var failures: Int64 = 0
  /// While the breaker is open: when the remote may be tried again
  /// (nanoseconds since 1970).
  var retryAt: Int64 = 0
  /// Objects read through it into the store.
  var hits: Int64 = 0
  /// Objects asked of it that it did not hold.
  var misses: Int64 = 0
  /// Blobs it sent whose bytes did not match their name (never stored).
  var corrupt: Int64 = 0
  /// Bytes read through it into the store.
  var bytes: Int64 = 0
  /// Requests that failed (unreachable, broken transfer).
  var errors: Int64 = 0
  /// Reads that skipped it while its breaker was open.
  var skipped: Int64 = 0
  /// Records and objects it offered that no key trusted for it signed
  /// (taken as misses).
  var untrusted: Int64 = 0
  /// Objects created before this (nanoseconds since 1970) are all known
  /// to be on it, or too large for it: its queue is looked for after.
  var cursor: Int64 = 0
  /// When it was added (nanoseconds since 1970): its upload queue holds
  /// the objects stored since. 0 when unknown.
  var since: Int64 = 0

  static let fields = [
    "failures", "retry-at", "hits", "misses", "corrupt", "bytes", "errors", "skipped", "since",
    "cursor", "untrusted",
  ]

  subscript(field: String) -> Int64 {
    get {
      switch field {
      case "failures": failures
      case "retry-at": retryAt
      case "hits": hits
      case "misses": misses
      case "corrupt": corrupt
      case "bytes": bytes
      case "errors": errors
      case "since": since
      case "cursor": cursor
      case "untrusted": untrusted
      default: skipped
      }
    }
    set {
      switch field {
      case "failures": failures = newValue
      case "retry-at": retryAt = newValue
      case "hits": hits = newValue
      case "misses": misses = newValue
      case "corrupt": corrupt = newValue
      case "bytes": bytes = newValue
      case "errors": errors = newValue
      case "since": since = newValue
      case "cursor": cursor = newValue
      case "untrusted": untrusted = newValue
      default: skipped = newValue
      }
    }
  }
}

extension IndexSession {
  private static func prefix(_ remote: String) -> String { "remote:" + remote + ":" }

  /// The record of the remote named `remote` (all zero when none).
  func remoteRecord(_ remote: String) throws(TroveError) -> RemoteRecord {
    try run { db throws(SQLiteConnection.Failure) in
      var record = RemoteRecord()
      let prefix = Self.prefix(remote)
      try db.query(
        "SELECT name, value FROM counters WHERE name >= ? AND name < ?",
        [.text(prefix), .text(prefix + "\u{7f}")]
      ) { row in
        let field = String(row.text(0).dropFirst(prefix.count))
        if RemoteRecord.fields.contains(field) { record[field] = row.integer(1) }
      }
      return record
    }
  }

  /// Adds `amounts` to fields of `remote`'s record.
  func addToRemote(_ remote: String, _ amounts: [String: Int64]) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      for (field, amount) in amounts where amount != 0 {
        try db.query(
          "INSERT INTO counters(name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
          [.text(Self.prefix(remote) + field), .integer(amount)])
      }
    }
  }

  /// Sets fields of `remote`'s record.
  func setRemote(_ remote: String, _ values: [String: Int64]) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      for (field, value) in values {
        try db.query(
          "INSERT OR REPLACE INTO counters(name, value) VALUES (?, ?)",
          [.text(Self.prefix(remote) + field), .integer(value)])
      }
    }
  }

  /// Forgets everything about `remote` (it was removed).
  func dropRemote(_ remote: String) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      let prefix = Self.prefix(remote)
      try db.query(
        "DELETE FROM counters WHERE name >= ? AND name < ?",
        [.text(prefix), .text(prefix + "\u{7f}")])
    }
  }
}

/// What a remote holds, as far as this store knows (`remote_objects`): a
/// row once the remote confirmed an object (uploaded, found there, pulled
/// from it) or it was found too large for it. The upload queue of a
/// writable remote is every object with no row for it.
enum RemoteHolding: String, Sendable {
  /// The remote has a blob of its name and length, which this store did
  /// not check (found there by an upload that sent nothing): any writer
  /// may have put it there.
  case held
  /// The remote holds it, and this store knows the bytes are right: its
  /// own upload of them succeeded, or it pulled them and they hashed to
  /// the digest. Only these copies let a sweep evict the local one first.
  case verified
  /// Longer than the remote's `max-object-size`: never uploaded.
  case tooLarge = "too-large"

  /// What an upload's outcome says the remote holds.
  init(_ upload: RemoteUpload) {
    switch upload {
    case .uploaded: self = .verified
    case .present: self = .held
    case .tooLarge: self = .tooLarge
    }
  }

  /// SQL: the states of a remote that holds a blob of the digest's name.
  static let holdingStates = "('held', 'verified')"
}

extension IndexSession {
  /// Up to `limit` objects (digest, size, created) queued for `remote`:
  /// objects the store holds with no row for it, created at or after
  /// `since` (nanoseconds; 0 for all), oldest first, after `after` (the
  /// created time and digest of the last one of the previous page).
  /// O(limit + objects passed over · log n) through `objects_by_created`.
  func queuedUploads(
    _ remote: String, since: Int64, after: (Int64, String) = (.min, ""), limit: Int
  ) throws(TroveError) -> [(BlobDigest, Int64, Int64)] {
    try run { db throws(SQLiteConnection.Failure) in
      var found: [(BlobDigest, Int64, Int64)] = []
      try db.query(
        "SELECT o.digest, o.size, o.created FROM objects o WHERE o.created >= ? AND (o.created, o.digest) > (?, ?) AND NOT EXISTS (SELECT 1 FROM remote_objects r WHERE r.remote = ? AND r.digest = o.digest) ORDER BY o.created, o.digest LIMIT ?",
        [
          .integer(since), .integer(after.0), .text(after.1), .text(remote),
          .integer(Int64(limit)),
        ]
      ) { row in
        if let digest = BlobDigest(hex: Substring(row.text(0))) {
          found.append((digest, row.integer(1), row.integer(2)))
        }
      }
      return found
    }
  }

  /// How many objects (and bytes) are queued for `remote` (see
  /// ``queuedUploads(_:since:limit:)``). O(objects).
  func uploadQueueLength(_ remote: String, since: Int64) throws(TroveError) -> (Int64, Int64) {
    try run { db throws(SQLiteConnection.Failure) in
      var result: (Int64, Int64) = (0, 0)
      try db.query(
        "SELECT COUNT(*), COALESCE(SUM(o.size), 0) FROM objects o WHERE o.created >= ? AND NOT EXISTS (SELECT 1 FROM remote_objects r WHERE r.remote = ? AND r.digest = o.digest)",
        [.integer(since), .text(remote)]
      ) { row in result = (row.integer(0), row.integer(1)) }
      return result
    }
  }

  /// Records that `remote` holds `digest` (or that it is too large for it).
  func noteHolding(_ remote: String, _ digest: BlobDigest, _ state: RemoteHolding, now: Int64)
    throws(TroveError)
  {
    try run { db throws(SQLiteConnection.Failure) in
      try db.query(
        "INSERT OR REPLACE INTO remote_objects(remote, digest, state, confirmed) VALUES (?, ?, ?, ?)",
        [.text(remote), .text(digest.hex), .text(state.rawValue), .integer(now)])
    }
  }

  /// The objects the store holds that are recorded too large for
  /// `remote` (longer than its `max-object-size` when a push tried), and
  /// their bytes: never uploaded to it.
  func tooLargeTotals(_ remote: String) throws(TroveError) -> (Int64, Int64) {
    try run { db throws(SQLiteConnection.Failure) in
      var result: (Int64, Int64) = (0, 0)
      try db.query(
        "SELECT COUNT(*), COALESCE(SUM(o.size), 0) FROM remote_objects r JOIN objects o ON o.digest = r.digest WHERE r.remote = ? AND r.state = ?",
        [.text(remote), .text(RemoteHolding.tooLarge.rawValue)]
      ) { row in result = (row.integer(0), row.integer(1)) }
      return result
    }
  }

  /// The objects the store holds that some remote holds too, and their
  /// bytes: what the store could evict and fetch back.
  func remoteBackedTotals() throws(TroveError) -> (Int64, Int64) {
    try run { db throws(SQLiteConnection.Failure) in
      var result: (Int64, Int64) = (0, 0)
      try db.query(
        "SELECT COUNT(*), COALESCE(SUM(o.size), 0) FROM objects o WHERE EXISTS (SELECT 1 FROM remote_objects r WHERE r.digest = o.digest AND r.state IN \(RemoteHolding.holdingStates))"
      ) { row in result = (row.integer(0), row.integer(1)) }
      return result
    }
  }

  /// The remotes recorded as holding `digest` with bytes this store
  /// knows are right (``RemoteHolding/verified``).
  func remotesVerified(_ digest: BlobDigest) throws(TroveError) -> [String] {
    try run { db throws(SQLiteConnection.Failure) in
      var names: [String] = []
      try db.query(
        "SELECT remote FROM remote_objects WHERE digest = ? AND state = 'verified' ORDER BY remote",
        [.text(digest.hex)]
      ) { row in names.append(row.text(0)) }
      return names
    }
  }

  /// Forgets that `remote` holds `digest` (it was found not to), and
  /// moves the remote's queue cursor back to the object, so its queue
  /// holds it again.
  func forgetHolding(_ remote: String, _ digest: BlobDigest) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      try db.query(
        "DELETE FROM remote_objects WHERE remote = ? AND digest = ?",
        [.text(remote), .text(digest.hex)])
      try db.query(
        "UPDATE counters SET value = MIN(value, COALESCE((SELECT created FROM objects WHERE digest = ?), value)) WHERE name = ?",
        [.text(digest.hex), .text(Self.prefix(remote) + "cursor")])
    }
  }

  /// Forgets what `remote` holds (it was removed).
  func dropHoldings(_ remote: String) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      try db.query("DELETE FROM remote_objects WHERE remote = ?", [.text(remote)])
    }
  }
}
