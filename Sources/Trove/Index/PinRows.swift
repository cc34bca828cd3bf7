import Foundation

/// A pin: `name` keeps `digest` from being swept, until `expires` if set.
public struct Pin: Sendable, Hashable, Codable {
  /// The pinned object.
  public var digest: BlobDigest
  /// Who holds the pin (a tool, a CI job); pins with other names are theirs.
  public var name: String
  /// When the pin lapses; nil for never.
  public var expires: Date? { expiresNanoseconds.map { Date(nanosecondsSince1970: $0) } }
  /// When it was made.
  public var created: Date { Date(nanosecondsSince1970: createdNanoseconds) }
  /// ``expires`` as the index keeps it: nanoseconds since 1970.
  var expiresNanoseconds: Int64?
  /// ``created`` as the index keeps it: nanoseconds since 1970.
  var createdNanoseconds: Int64

  init(digest: BlobDigest, name: String, expires: Int64?, created: Int64) {
    self.digest = digest
    self.name = name
    expiresNanoseconds = expires
    createdNanoseconds = created
  }

  /// Whether the pin still holds at `date` (default: now).
  public func isActive(at date: Date = Date()) -> Bool { isActive(at: date.nanosecondsSince1970) }

  /// Whether the pin still holds at `now` (nanoseconds since 1970).
  func isActive(at now: Int64) -> Bool { expiresNanoseconds.map { $0 > now } ?? true }
}

/// The `pins` table. A pin is added only by ``ObjectTable/pin(_:name:expires:)``,
/// in the transaction that confirms its object is present.
extension IndexSession {
  /// Pins `digest` under `name` until `expires` (nanoseconds since 1970;
  /// nil for no expiry), replacing that name's earlier pin of it.
  func insertPin(_ digest: BlobDigest, name: String, expires: Int64?, now: Int64) throws(TroveError)
  {
    try run { db throws(SQLiteConnection.Failure) in
      try db.query(
        "INSERT OR REPLACE INTO pins(digest, name, expires, created) VALUES (?,?,?,?)",
        [.text(digest.hex), .text(name), expires.map { .integer($0) } ?? .null, .integer(now)])
    }
  }

  /// Removes `name`'s pin of `digest`; whether there was one.
  func deletePin(_ digest: BlobDigest, name: String) throws(TroveError) -> Bool {
    try run { db throws(SQLiteConnection.Failure) in
      try db.query(
        "DELETE FROM pins WHERE digest = ? AND name = ?", [.text(digest.hex), .text(name)])
      return db.changes > 0
    }
  }

  /// Every pin, expired ones included, ordered by digest and name.
  func pins() throws(TroveError) -> [Pin] {
    try run { db throws(SQLiteConnection.Failure) in
      var all: [Pin] = []
      try db.query("SELECT digest, name, expires, created FROM pins ORDER BY digest, name") {
        row in
        guard let digest = BlobDigest(hex: Substring(row.text(0))) else { return }
        all.append(
          Pin(
            digest: digest, name: row.text(1), expires: row.isNull(2) ? nil : row.integer(2),
            created: row.integer(3)))
      }
      return all
    }
  }

  /// Removes pins whose lease ran out; returns how many.
  func deleteExpiredPins(now: Int64) throws(TroveError) -> Int {
    try run { db throws(SQLiteConnection.Failure) in
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
    try run { db throws(SQLiteConnection.Failure) in
      var totals: (Int64, Int64) = (0, 0)
      // Through the pins, not a scan of the objects: O(pins · log n).
      try db.query(
        """
        SELECT COUNT(*), COALESCE(SUM(allocated), 0) FROM objects WHERE digest IN
          (SELECT digest FROM pins WHERE expires IS NULL OR expires > ?)
        """,
        [.integer(now)]
      ) { row in totals = (row.integer(0), row.integer(1)) }
      return totals
    }
  }
}
