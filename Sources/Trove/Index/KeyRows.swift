/// A name (a URL, a package id) bound to a digest.
public struct KeyBinding: Sendable, Hashable, Codable {
  /// The name.
  public var key: String
  /// The object it names.
  public var digest: Digest
  /// When it was bound, nanoseconds since 1970.
  public var updated: Int64
}

/// The `keys` table: names (a URL, a package id) bound to digests. A key
/// is bound only by ``ObjectTable/bind(key:to:)``, in the transaction that
/// confirms its object is present, and goes with its object: removed in
/// the transaction that unlinks its file (or, for `rm`, that deletes its
/// row), or by a reconcile that finds the object gone.
extension IndexSession {
  /// Points `key` at `digest`, replacing what it pointed at.
  func insertKey(_ key: String, digest: Digest, at time: Int64) throws(TroveError) {
    try run { db throws(SQLiteConnection.Failure) in
      try db.query(
        "INSERT INTO keys(key, digest, updated) VALUES (?,?,?) ON CONFLICT(key) DO UPDATE SET digest = excluded.digest, updated = excluded.updated",
        [.text(key), .text(digest.hex), .integer(time)])
    }
  }

  /// The digest `key` points at, if any.
  func digest(forKey key: String) throws(TroveError) -> Digest? {
    try run { db throws(SQLiteConnection.Failure) in
      var found: Digest?
      try db.query("SELECT digest FROM keys WHERE key = ?", [.text(key)]) { row in
        found = Digest(hex: Substring(row.text(0)))
      }
      return found
    }
  }

  /// Removes `key`; whether it existed.
  func deleteKey(_ key: String) throws(TroveError) -> Bool {
    try run { db throws(SQLiteConnection.Failure) in
      try db.query("DELETE FROM keys WHERE key = ?", [.text(key)])
      return db.changes > 0
    }
  }

  /// Every key with its digest and when it was bound, ordered by key. O(n).
  func keys() throws(TroveError) -> [KeyBinding] {
    try run { db throws(SQLiteConnection.Failure) in
      var all: [KeyBinding] = []
      try db.query("SELECT key, digest, updated FROM keys ORDER BY key") { row in
        guard let digest = Digest(hex: Substring(row.text(1))) else { return }
        all.append(KeyBinding(key: row.text(0), digest: digest, updated: row.integer(2)))
      }
      return all
    }
  }

  /// How many keys there are. O(n).
  func keyCount() throws(TroveError) -> Int64 {
    try run { db throws(SQLiteConnection.Failure) in
      var count: Int64 = 0
      try db.query("SELECT COUNT(*) FROM keys") { row in count = row.integer(0) }
      return count
    }
  }
}
