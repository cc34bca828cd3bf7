/// Listing and describing objects: what `trove ls` and `trove show` print,
/// and the digests a short prefix names. Read only.
extension Store {
  /// The objects `query` selects — by default all of them, by digest — each
  /// with its keys and pins. The filters, order and limit are applied in
  /// the index, in three statements whatever the number of objects.
  /// O(objects returned · log n), plus a scan of the index for a key
  /// pattern or a size filter.
  public func list(_ query: EntryQuery = EntryQuery()) throws(TroveError) -> [EntryDetails] {
    let now = currentTimeNanoseconds()
    return try index().read("list entries") { (tx) throws(TroveError) in
      try tx.details(matching: query, now: now)
    }
  }

  /// The objects `query` selects, as ``list(_:)`` gives them, handed to
  /// `body` one by one and read `pageSize` at a time, each page by its own
  /// statements starting after the last object of the page before in the
  /// query's order: memory, and the time the index is read at once, stay
  /// bounded whatever the number of objects. A put or removal made while
  /// the listing runs shows in the pages read after it.
  public func list(
    _ query: EntryQuery = EntryQuery(), pageSize: Int = 1000,
    each body: (EntryDetails) throws(TroveError) -> Void
  ) throws(TroveError) {
    let now = currentTimeNanoseconds()
    var left = query.limit
    var after: StoreEntry?
    while left.map({ $0 > 0 }) ?? true {
      var page = query
      page.limit = min(max(1, pageSize), left ?? .max)
      let wanted = page.limit ?? 0
      let found = try index().read("list entries") { (tx) throws(TroveError) in
        try tx.details(matching: page, now: now, after: after)
      }
      for details in found { try body(details) }
      guard found.count == wanted, let last = found.last else { return }
      after = last.entry
      left = left.map { $0 - found.count }
    }
  }

  /// `digest`'s row, keys and pins, or nil if the store does not hold it.
  public func details(for digest: BlobDigest) throws(TroveError) -> EntryDetails? {
    guard try objects.find(digest, confirmingMiss: true) != nil else { return nil }
    var query = EntryQuery()
    query.digest = digest
    let now = currentTimeNanoseconds()
    return try index().read("look up \(digest)") { (tx) throws(TroveError) in
      try tx.details(matching: query, now: now).first
    }
  }

  /// The publishers' checksums (`sha256`, `sha512`) a fetch verified
  /// against `digest`'s bytes, by algorithm.
  public func checksums(of digest: BlobDigest) throws(TroveError) -> [Checksum] {
    try index().read("look up the checksums of \(digest)") { (tx) throws(TroveError) in
      try tx.checksums(of: digest)
    }
  }

  /// How `digest`'s object file lies on disk: its extents and those it
  /// shares with other files (clones made by `get`), from one FIEMAP.
  /// Nil when the object is not there or the filesystem cannot say
  /// (tmpfs has no FIEMAP).
  public func extents(of digest: BlobDigest) -> ExtentSummary? {
    guard let (fd, _) = try? objects.open(digest) else { return nil }
    defer { fd.close() }
    return try? fd.extentSummary()
  }

  /// The digests whose hex starts with `hex` (hex digits, either case),
  /// in digest order, at most `limit`: what a short digest names. Several
  /// means the prefix is ambiguous. O(matches · log n).
  /// - Throws: `.invalidDigest` when `hex` is not 1 to 32 hex digits.
  public func digests(withPrefix hex: String, limit: Int = 100) throws(TroveError) -> [BlobDigest] {
    let lowered = hex.lowercased()
    guard (1...32).contains(lowered.utf8.count),
      lowered.utf8.allSatisfy({
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
          || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
      })
    else {
      throw TroveError(
        .invalidDigest, "invalid digest prefix '\(hex)': expected 1 to 32 hex digits",
        value: hex)
    }
    return try index().read("look up digests starting with \(lowered)") {
      (tx) throws(TroveError) in
      try tx.digests(withPrefix: lowered, limit: limit)
    }
  }
}
