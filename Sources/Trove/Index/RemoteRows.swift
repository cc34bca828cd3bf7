/// What the index keeps about one remote: its circuit breaker and what
/// reading through it did. Rows of `counters` named `remote:NAME:FIELD`,
/// created by their first count (an upsert), so indexes of every schema
/// version take them without a migration.
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

  static let fields = [
    "failures", "retry-at", "hits", "misses", "corrupt", "bytes", "errors", "skipped",
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
