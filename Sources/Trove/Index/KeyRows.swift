import Foundation

/// A name (a URL, a package id) bound to a digest.
public struct KeyBinding: Sendable, Hashable, Codable {
  /// The name.
  public var key: String
  /// The object it names.
  public var digest: BlobDigest
  /// When it was bound.
  public var updated: Date { Date(nanosecondsSince1970: updatedNanoseconds) }
  /// What the fetch that bound it learnt from the server; nil for a key
  /// bound by `put --key` or ``Store/bind(key:to:)``.
  public var origin: KeyOrigin?
  /// ``updated`` as the index keeps it: nanoseconds since 1970.
  var updatedNanoseconds: Int64
  /// Bound from a remote's key record, and not replaced since by a body
  /// from the origin or by a binding of this store's own: any writer of
  /// that remote may have chosen it (a `304` proves only the validator),
  /// so this store never signs or pushes it.
  var isPulled = false

  init(
    key: String, digest: BlobDigest, updated: Int64, origin: KeyOrigin? = nil,
    isPulled: Bool = false
  ) {
    self.key = key
    self.digest = digest
    updatedNanoseconds = updated
    self.origin = origin
    self.isPulled = isPulled
  }

  enum CodingKeys: String, CodingKey {
    case key, digest, origin
    case updatedNanoseconds = "updated"
  }
}

/// What a fetch learnt about a URL's object: how big it is, how to
/// revalidate it, and until when it is fresh.
public struct KeyOrigin: Sendable, Hashable, Codable {
  /// The body's length.
  public var size: Int64
  /// The response's `ETag`, as sent (quotes and `W/` included).
  public var etag: String?
  /// The response's `Last-Modified`, as sent.
  public var lastModified: String?
  /// ``lastModified`` as a date, when it is an HTTP date (one of the three
  /// forms RFC 9110 §5.6.7 allows); nil when there is none or it is not.
  public var lastModifiedDate: Date? {
    lastModified.flatMap(Freshness.httpDate).map { Date(nanosecondsSince1970: $0) }
  }
  /// Until when it may be served without asking the server (from
  /// `Cache-Control: max-age` or `Expires`); nil: stale once fetched,
  /// revalidated on every fetch.
  public var expires: Date? { expiresNanoseconds.map { Date(nanosecondsSince1970: $0) } }
  /// `Cache-Control: immutable`, as the server sent it (with a freshness
  /// lifetime). Recorded and shown; ``FetchRequest/Mode/refresh`` asks the
  /// server all the same.
  public var isImmutable: Bool
  /// The URL the body came from, after redirects.
  public var finalURL: String?
  /// The URL of the fetch's list that was asked for the body, before any
  /// redirect: the key's own URL, one of its mirrors
  /// (``FetchRequest/mirrors``), or what a rewrite rule (``URLRewrite``)
  /// made of either; never with a login. A revalidation sends the
  /// validators to this URL only: an ETag is one server's name for its
  /// bytes. Nil in a record written before mirrors existed: the key's URL.
  public var servedBy: String?
  /// The response's `Content-Type`, as sent (printable ASCII, at most 255
  /// bytes; nil otherwise): what a server mirroring the URL answers with.
  public var contentType: String?
  /// When it was fetched or last revalidated.
  public var fetched: Date { Date(nanosecondsSince1970: fetchedNanoseconds) }
  /// ``expires`` as the index keeps it: nanoseconds since 1970.
  var expiresNanoseconds: Int64?
  /// ``fetched`` as the index keeps it: nanoseconds since 1970.
  var fetchedNanoseconds: Int64

  init(
    size: Int64, etag: String?, lastModified: String?, expires: Int64?, isImmutable: Bool,
    finalURL: String?, fetched: Int64, servedBy: String? = nil, contentType: String? = nil
  ) {
    self.size = size
    self.etag = etag
    self.lastModified = lastModified
    expiresNanoseconds = expires
    self.isImmutable = isImmutable
    self.finalURL = finalURL
    fetchedNanoseconds = fetched
    self.servedBy = servedBy
    self.contentType = contentType
  }

  // The names references.log has always used.
  enum CodingKeys: String, CodingKey {
    case size, etag, lastModified, isImmutable, finalURL, servedBy, contentType
    case expiresNanoseconds = "expires"
    case fetchedNanoseconds = "fetched"
  }

  /// Whether it may be served at `date` (default: now) without asking the
  /// server.
  public func isFresh(at date: Date = Date()) -> Bool { isFresh(at: date.nanosecondsSince1970) }

  /// Whether it may be served at `now` (nanoseconds since 1970).
  func isFresh(at now: Int64) -> Bool {
    expiresNanoseconds.map { now < $0 } ?? false
  }
}

/// The `keys` table: names (a URL, a package id) bound to digests. A key
/// is bound only by ``ObjectTable/bind(key:to:origin:checksums:)``, in the
/// transaction that confirms its object is present, and goes with its
/// object: removed in the transaction that unlinks its file (or, for `rm`,
/// that deletes its row), or by a reconcile that finds the object gone.
extension IndexSession {
  private static let columns =
    "key, digest, updated, size, etag, last_modified, expires, immutable, final_url, fetched, pulled, served_by, content_type"

  /// Points `key` at `digest`, replacing what it pointed at and what a
  /// fetch had recorded about it (`origin`, nil for a plain binding);
  /// `pulled` when a remote's record chose it (``KeyBinding/isPulled``).
  func insertKey(
    _ key: String, digest: BlobDigest, origin: KeyOrigin?, pulled: Bool = false,
    at time: Int64
  ) throws(TroveError) {
    let o = origin
    let values: [SQLiteValue] = [
      .text(key), .text(digest.hex), .integer(time), o.map { .integer($0.size) } ?? .null,
      o?.etag.map { .text($0) } ?? .null, o?.lastModified.map { .text($0) } ?? .null,
      o?.expiresNanoseconds.map { .integer($0) } ?? .null,
      o.map { .integer($0.isImmutable ? 1 : 0) } ?? .null,
      o?.finalURL.map { .text($0) } ?? .null, o.map { .integer($0.fetchedNanoseconds) } ?? .null,
      pulled ? .integer(1) : .null, o?.servedBy.map { .text($0) } ?? .null,
      o?.contentType.map { .text($0) } ?? .null, .text(Self.recordName(of: key)),
    ]
    try run { db throws(SQLiteConnection.Failure) in
      try db.query(
        "INSERT OR REPLACE INTO keys(\(Self.columns), name) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        values)
    }
  }

  /// The name of `key`'s record on a remote (the XXH3-128 hex of its
  /// UTF-8), kept in the row so a server finds the key a record name asks
  /// for without hashing every key.
  static func recordName(of key: String) -> String {
    XXH3Hasher.digest(Array(key.utf8)).hex
  }

  /// The binding whose record name (``recordName(of:)``) is `name`, if a
  /// key has it. O(log n) through the keys' name index.
  func binding(forRecordName name: String) throws(TroveError) -> KeyBinding? {
    try run { db throws(SQLiteConnection.Failure) in
      var found: KeyBinding?
      try db.query("SELECT \(Self.columns) FROM keys WHERE name = ?", [.text(name)]) { row in
        // Two keys with one name would take 2^64 keys to find: the key is
        // checked all the same.
        if let binding = Self.binding(row), Self.recordName(of: binding.key) == name {
          found = binding
        }
      }
      return found
    }
  }

  /// The digest `key` points at, if any.
  func digest(forKey key: String) throws(TroveError) -> BlobDigest? {
    try binding(forKey: key)?.digest
  }

  /// `key`'s binding with what a fetch recorded, if it is bound.
  func binding(forKey key: String) throws(TroveError) -> KeyBinding? {
    try run { db throws(SQLiteConnection.Failure) in
      var found: KeyBinding?
      try db.query("SELECT \(Self.columns) FROM keys WHERE key = ?", [.text(key)]) { row in
        found = Self.binding(row)
      }
      return found
    }
  }

  private static func binding(_ row: SQLiteConnection.Row) -> KeyBinding? {
    guard let digest = BlobDigest(hex: Substring(row.text(1))) else { return nil }
    var binding = KeyBinding(
      key: row.text(0), digest: digest, updated: row.integer(2), isPulled: !row.isNull(10))
    if !row.isNull(9) {
      binding.origin = KeyOrigin(
        size: row.integer(3), etag: row.optionalText(4), lastModified: row.optionalText(5),
        expires: row.isNull(6) ? nil : row.integer(6), isImmutable: row.integer(7) != 0,
        finalURL: row.optionalText(8), fetched: row.integer(9), servedBy: row.optionalText(11),
        contentType: row.optionalText(12))
    }
    return binding
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
      try db.query("SELECT \(Self.columns) FROM keys ORDER BY key") { row in
        if let binding = Self.binding(row) { all.append(binding) }
      }
      return all
    }
  }

  /// Marks every binding not already so as a remote's choice
  /// (``KeyBinding/isPulled``); returns those it marked. O(keys).
  func markKeysPulled() throws(TroveError) -> [KeyBinding] {
    let marked = try keys().filter { !$0.isPulled }
    try run { db throws(SQLiteConnection.Failure) in
      try db.execute("UPDATE keys SET pulled = 1 WHERE pulled IS NULL")
    }
    return marked.map {
      var binding = $0
      binding.isPulled = true
      return binding
    }
  }

  /// The keys bound to `digest`, ordered by key. O(log n + keys) through
  /// the keys' digest index.
  func keys(of digest: BlobDigest) throws(TroveError) -> [KeyBinding] {
    try run { db throws(SQLiteConnection.Failure) in
      var all: [KeyBinding] = []
      try db.query(
        "SELECT \(Self.columns) FROM keys WHERE digest = ? ORDER BY key", [.text(digest.hex)]
      ) { row in if let binding = Self.binding(row) { all.append(binding) } }
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

  // MARK: Checksums

  /// Records that `digest`'s bytes have each of `checksums` (verified by
  /// hashing them). A checksum names one object: the last verified wins.
  func insertChecksums(_ checksums: [Checksum], for digest: BlobDigest) throws(TroveError) {
    let rows = checksums.filter { $0.algorithm != .xxh128 }.map {
      [SQLiteValue.text($0.algorithm.rawValue), .text($0.hex), .text(digest.hex)]
    }
    guard !rows.isEmpty else { return }
    try run { db throws(SQLiteConnection.Failure) in
      _ = try db.repeated(
        "INSERT OR REPLACE INTO checksums(algorithm, value, digest) VALUES (?,?,?)", rows)
    }
  }

  /// The object a publisher's checksum was verified against, if any.
  func digest(for checksum: Checksum) throws(TroveError) -> BlobDigest? {
    if let digest = checksum.digest { return digest }
    return try run { db throws(SQLiteConnection.Failure) in
      var found: BlobDigest?
      try db.query(
        "SELECT digest FROM checksums WHERE algorithm = ? AND value = ?",
        [.text(checksum.algorithm.rawValue), .text(checksum.hex)]
      ) { row in found = BlobDigest(hex: Substring(row.text(0))) }
      return found
    }
  }

  /// The checksums verified against `digest`'s bytes.
  func checksums(of digest: BlobDigest) throws(TroveError) -> [Checksum] {
    try run { db throws(SQLiteConnection.Failure) in
      var found: [Checksum] = []
      try db.query(
        "SELECT algorithm, value FROM checksums WHERE digest = ? ORDER BY algorithm",
        [.text(digest.hex)]
      ) { row in
        if let algorithm = ChecksumAlgorithm(rawValue: row.text(0)) {
          found.append(Checksum(algorithm, hex: row.text(1)))
        }
      }
      return found
    }
  }
}
