/// Which objects a listing wants and in what order: ``Store/list(_:)``.
///
/// Every filter and the order are evaluated in the index (SQL), so a
/// listing of a few objects out of many reads only those.
public struct EntryQuery: Sendable, Hashable {
  /// The order of a listing; ties are broken by digest, so it is stable.
  public enum Order: String, Sendable, Hashable, CaseIterable {
    /// By digest (hex order): the same on every run, as ``Store/entries()``.
    case digest
    /// Largest first.
    case size
    /// Most recently used (stored again or read) first.
    case access
    /// Most recently stored first.
    case created
  }

  /// The order; ``Order/digest`` by default.
  public var order: Order
  /// At most this many objects (the first in ``order``); nil for all.
  public var limit: Int?
  /// Only objects not used for more than this many seconds.
  public var unusedFor: Int64?
  /// Only objects larger than this many bytes (their logical size).
  public var largerThan: Int64?
  /// Only objects an unexpired pin holds.
  public var pinnedOnly: Bool
  /// Only objects with a key that matches this shell glob (`*`, `?`,
  /// `[...]`; case-sensitive, as SQLite's `GLOB`).
  public var keyPattern: String?
  /// Only this object: ``Store/details(for:)``.
  var digest: BlobDigest?

  /// A query; with no arguments, every object by digest.
  public init(
    order: Order = .digest, limit: Int? = nil, unusedFor: Int64? = nil, largerThan: Int64? = nil,
    pinnedOnly: Bool = false, keyPattern: String? = nil
  ) {
    self.order = order
    self.limit = limit
    self.unusedFor = unusedFor
    self.largerThan = largerThan
    self.pinnedOnly = pinnedOnly
    self.keyPattern = keyPattern
  }
}

/// One object with what names it and what holds it: its index row, the
/// keys bound to it and its pins.
public struct EntryDetails: Sendable, Hashable {
  /// The object's row: digest, sizes, stored form, times.
  public var entry: StoreEntry
  /// The keys bound to it, in key order.
  public var keys: [String]
  /// Its pins in name order, lapsed leases included (a sweep removes those).
  public var pins: [Pin]

  /// Makes the details of `entry`.
  public init(entry: StoreEntry, keys: [String] = [], pins: [Pin] = []) {
    self.entry = entry
    self.keys = keys
    self.pins = pins
  }

  /// The pins that still hold at `now` (nanoseconds since 1970).
  public func activePins(at now: Int64) -> [Pin] { pins.filter { $0.isActive(at: now) } }
}

/// Listing queries over `objects`, `keys` and `pins`: read only.
extension IndexSession {
  /// The objects `query` selects, with their keys and pins, at `now`
  /// (nanoseconds since 1970: the reference for `unusedFor` and for
  /// which pins hold). Three statements, whatever the number of objects:
  /// the rows (filtered, ordered and limited in SQL), then the keys and
  /// the pins of those rows. O(rows returned · log n), plus a scan when a
  /// filter has no index (a key pattern, a size without `order: .size`).
  ///
  /// With `after`, only the objects that come after that one in the
  /// query's order (keyset paging: ``Store/list(_:pageSize:each:)``).
  func details(matching query: EntryQuery, now: Int64, after: StoreEntry? = nil)
    throws(TroveError) -> [EntryDetails]
  {
    var conditions: [String] = []
    var values: [SQLiteValue] = []
    if let after {
      // The order's column, then the digest that breaks its ties.
      let column: String?
      let value: Int64
      switch query.order {
      case .digest: (column, value) = (nil, 0)
      case .size: (column, value) = ("o.size", after.size)
      case .access: (column, value) = ("o.last_access", after.lastAccessNanoseconds)
      case .created: (column, value) = ("o.created", after.createdNanoseconds)
      }
      if let column {
        conditions.append("\(column) <= ? AND (\(column) < ? OR o.digest > ?)")
        values += [.integer(value), .integer(value), .text(after.digest.hex)]
      } else {
        conditions.append("o.digest > ?")
        values.append(.text(after.digest.hex))
      }
    }
    if let digest = query.digest {
      conditions.append("o.digest = ?")
      values.append(.text(digest.hex))
    }
    if let unused = query.unusedFor {
      conditions.append("o.last_access < ?")
      values.append(.integer(now.subtractingSaturated(.nanoseconds(fromSeconds: unused))))
    }
    if let larger = query.largerThan {
      conditions.append("o.size > ?")
      values.append(.integer(larger))
    }
    if query.pinnedOnly {
      conditions.append(Self.pinned)
      values.append(.integer(now))
    }
    if let pattern = query.keyPattern {
      conditions.append(
        "EXISTS (SELECT 1 FROM keys k WHERE k.digest = o.digest AND k.key GLOB ?)")
      values.append(.text(pattern))
    }
    let order: String
    switch query.order {
    case .digest: order = "o.digest"
    case .size: order = "o.size DESC, o.digest"
    case .access: order = "o.last_access DESC, o.digest"
    case .created: order = "o.created DESC, o.digest"
    }
    var selection =
      "FROM objects o"
      + (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND "))
      + " ORDER BY \(order)"
    if let limit = query.limit {
      selection += " LIMIT ?"
      values.append(.integer(Int64(limit)))
    }
    return try run { db throws(SQLiteConnection.Failure) in
      var found: [EntryDetails] = []
      var position: [String: Int] = [:]
      try db.query("SELECT \(Self.entryColumns) \(selection)", values) { row in
        guard let entry = Self.entry(row) else { return }
        position[row.text(0)] = found.count
        found.append(EntryDetails(entry: entry))
      }
      guard !found.isEmpty else { return found }
      // Rows that changed between the statements (a put, a removal) are
      // skipped: each object gets the keys and pins it has in the index.
      let chosen = "(SELECT o.digest \(selection))"
      try db.query(
        "SELECT digest, key FROM keys WHERE digest IN \(chosen) ORDER BY key", values
      ) { row in
        if let i = position[row.text(0)] { found[i].keys.append(row.text(1)) }
      }
      try db.query(
        "SELECT digest, name, expires, created FROM pins WHERE digest IN \(chosen) ORDER BY name",
        values
      ) { row in
        guard let i = position[row.text(0)] else { return }
        found[i].pins.append(
          Pin(
            digest: found[i].entry.digest, name: row.text(1),
            expires: row.isNull(2) ? nil : row.integer(2), created: row.integer(3)))
      }
      return found
    }
  }

  /// The digests whose hex starts with `hex` (lowercase hex digits), in
  /// digest order, at most `limit`. O(matches · log n) through the primary key.
  func digests(withPrefix hex: String, limit: Int) throws(TroveError) -> [BlobDigest] {
    try run { db throws(SQLiteConnection.Failure) in
      var found: [BlobDigest] = []
      try db.query(
        "SELECT digest FROM objects WHERE digest >= ? AND digest < ? ORDER BY digest LIMIT ?",
        [.text(hex), .text(hex + "~"), .integer(Int64(limit))]
      ) { row in
        if let digest = BlobDigest(hex: Substring(row.text(0))) { found.append(digest) }
      }
      return found
    }
  }
}
