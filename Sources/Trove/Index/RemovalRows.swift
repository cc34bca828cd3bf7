import Foundation

/// Removals between their two steps (`removals`): the records of a
/// removal's part — each object's digest and the files it is to unlink —
/// packed into blobs, a row for each run of up to ``RemovalRow/capacity``
/// in the order of their digests.
///
/// The records ``RemovalEngine`` keeps; a row's upsert also calls a
/// removal off. A removal of many objects records each part in a few rows
/// and takes them back by id, not a row per object. Looking up one digest
/// reads the rows whose digest range holds it (there are none unless a
/// removal is under way) and searches each by halves. Calling one removal
/// off writes its row again without it: rare (a put of bytes being
/// removed), and a row is at most 50 KiB.
extension IndexSession {
  /// Records the first step of removing each of `removals` (their rows are
  /// gone), at `now`: which files are to go, named by their identity so
  /// that no later step can unlink another file under the same name. A
  /// record of the same digest already there is replaced: there is one
  /// per digest (an `rm` of an object whose eviction is under way is an
  /// `rm`, which a read does not call off). Returns the ids of the rows
  /// recorded (never reused, so only their remover takes them by id).
  /// Rows hold up to `perRow` records.
  @discardableResult
  func insertRemovals(_ removals: [Removal], now: Int64, perRow: Int = RemovalRow.capacity)
    throws(TroveError) -> [Int64]
  {
    _ = try takeRemovals(removals.map(\.digest))
    return try run { db throws(SQLiteConnection.Failure) in
      try RemovalRow.insert(removals, since: now, perRow: perRow, db)
    }
  }

  /// The removal in progress of `digest`, if any.
  func removal(of digest: BlobDigest) throws(TroveError) -> Removal? {
    return try rows(holding: digest, digest).lazy.compactMap { row in
      row.index(of: digest).map { row.removal(at: $0) }
    }.first
  }

  /// Takes the removal records of the rows `ids`, as their remover does
  /// in its second step: what is left of them (a put, a read, a pin or a
  /// reconcile may have called some off, or taken them all).
  func takeRemovals(rows ids: [Int64]) throws(TroveError) -> [Removal] {
    try run { db throws(SQLiteConnection.Failure) in
      var found: [Removal] = []
      for id in ids {
        try db.query(
          "DELETE FROM removals WHERE id = ? RETURNING id, explicit, records", [.integer(id)]
        ) { row in
          let taken = RemovalRow(row)
          found += (0..<taken.count).map { taken.removal(at: $0) }
        }
      }
      return found
    }
  }

  /// Takes the removal records of `digests`, whichever rows hold them:
  /// each one's, or nil when there was none (a dedup hit, a read or a pin
  /// kept the object meanwhile). Each row touched is written again
  /// without them, or deleted when none is left.
  func takeRemovals(_ digests: [BlobDigest]) throws(TroveError) -> [Removal?] {
    guard let low = digests.min(), let high = digests.max() else { return [] }
    let holding = try rows(holding: low, high)
    // Most often there is no removal under way: nothing to sort for.
    guard !holding.isEmpty else { return digests.map { _ in nil } }
    let sorted = digests.sorted()
    var found: [BlobDigest: Removal] = [:]
    for row in holding where row.count > 0 {
      // Only the digests within the row's range are looked for in it.
      let first = row.digest(at: 0)
      let last = row.digest(at: row.count - 1)
      var start = 0
      var end = sorted.count
      while start < end {
        let middle = (start + end) / 2
        if sorted[middle] < first { start = middle + 1 } else { end = middle }
      }
      var taken: [Int] = []
      while start < sorted.count && sorted[start] <= last {
        if let position = row.index(of: sorted[start]) { taken.append(position) }
        start += 1
      }
      guard !taken.isEmpty else { continue }
      for position in taken {
        let removal = row.removal(at: position)
        found[removal.digest] = removal
      }
      try run { db throws(SQLiteConnection.Failure) in try row.write(removing: Set(taken), db) }
    }
    return digests.map { found[$0] }
  }

  /// Up to `limit` digests whose removal was recorded before `time`
  /// (nanoseconds): left by removers that stopped between the two steps.
  func removals(recordedBefore time: Int64, limit: Int) throws(TroveError) -> [BlobDigest] {
    return try run { db throws(SQLiteConnection.Failure) in
      var found: [BlobDigest] = []
      try db.query("SELECT id, explicit, records FROM removals WHERE since < ?", [.integer(time)]) {
        row in
        let stale = RemovalRow(row)
        for position in 0..<min(stale.count, limit - found.count) {
          found.append(stale.digest(at: position))
        }
      }
      return found
    }
  }

  /// The removals in progress whose digest's hex starts with `prefix`.
  func removals(withPrefix prefix: String) throws(TroveError) -> [BlobDigest: Removal] {
    let low = prefix.padding(toLength: 32, withPad: "0", startingAt: 0)
    let high = prefix.padding(toLength: 32, withPad: "f", startingAt: 0)
    guard let first = BlobDigest(hex: Substring(low)), let last = BlobDigest(hex: Substring(high))
    else { return [:] }
    var found: [BlobDigest: Removal] = [:]
    for row in try rows(holding: first, last) {
      for position in row.positions(from: first, through: last) {
        let removal = row.removal(at: position)
        found[removal.digest] = removal
      }
    }
    return found
  }

  /// The rows whose digest range meets `low...high`.
  private func rows(holding low: BlobDigest, _ high: BlobDigest) throws(TroveError)
    -> [RemovalRow]
  {
    try run { db throws(SQLiteConnection.Failure) in
      var rows: [RemovalRow] = []
      try db.query(
        "SELECT id, explicit, records FROM removals WHERE first <= ? AND last >= ?",
        [.text(high.hex), .text(low.hex)]
      ) { row in rows.append(RemovalRow(row)) }
      return rows
    }
  }
}

/// A row of `removals`: a run of one removal's part, whether it is `rm`'s,
/// and its records packed in the order of their
/// digests, ``width`` bytes each — the digest's 16 bytes (high half first,
/// big-endian, so that bytes sort as digests do), a byte of flags (1: a
/// raw file, 2: a compressed one), then each file's inode and write time
/// (nanoseconds), 8 bytes each, little-endian, zero where there is no file.
struct RemovalRow {
  var id: Int64
  var isExplicit: Bool
  var records: [UInt8]

  /// The bytes of one record.
  static let width = 49

  /// How many records the row holds.
  var count: Int { records.count / Self.width }

  /// Reads a row selected as `id, explicit, records`.
  init(_ row: SQLiteConnection.Row) {
    id = row.integer(0)
    isExplicit = row.integer(1) != 0
    records = row.blob(2)
  }

  /// The most records a row holds: a removal's part of up to 32,768
  /// objects is recorded as rows of 1,024 (50 KiB of records), so that a
  /// lookup of one digest — a put's, while a removal is under way or left
  /// by a remover that was killed — reads one row's records, not a part's.
  static let capacity = 1024

  /// Records `removals` at `since`, `rm`'s apart from the others, in rows
  /// of up to `perRow` (at most ``capacity``); returns the rows' ids.
  static func insert(
    _ removals: [Removal], since: Int64, perRow: Int = capacity, _ db: SQLiteConnection
  ) throws(SQLiteConnection.Failure) -> [Int64] {
    let perRow = min(max(1, perRow), capacity)
    var ids: [Int64] = []
    for explicit in [false, true] {
      let kind = removals.filter { $0.isExplicit == explicit }.sorted { $0.digest < $1.digest }
      for start in stride(from: 0, to: kind.count, by: perRow) {
        let run = kind[start..<min(start + perRow, kind.count)]
        guard let first = run.first, let last = run.last else { continue }
        try db.query(
          """
          INSERT INTO removals(since, explicit, first, last, records) VALUES (?,?,?,?,?)
            RETURNING id
          """,
          [
            .integer(since), .integer(explicit ? 1 : 0), .text(first.digest.hex),
            .text(last.digest.hex), .blob(encode(run)),
          ]
        ) { row in ids.append(row.integer(0)) }
      }
    }
    return ids
  }

  /// `removals` (in the order of their digests) packed as records.
  static func encode(_ removals: ArraySlice<Removal>) -> [UInt8] {
    var bytes = [UInt8]()
    bytes.reserveCapacity(removals.count * width)
    func append(_ value: UInt64, bigEndian: Bool = false) {
      withUnsafeBytes(of: bigEndian ? value.bigEndian : value.littleEndian) {
        bytes.append(contentsOf: $0)
      }
    }
    for removal in removals {
      append(removal.digest.high, bigEndian: true)
      append(removal.digest.low, bigEndian: true)
      bytes.append((removal.raw == nil ? 0 : 1) | (removal.compressed == nil ? 0 : 2))
      for file in [removal.raw, removal.compressed] {
        append(file?.inode ?? 0)
        append(UInt64(bitPattern: file?.writeTime ?? 0))
      }
    }
    return bytes
  }

  private func word(_ offset: Int) -> UInt64 {
    records.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt64.self) }
  }

  /// The digest of the record at `position`.
  func digest(at position: Int) -> BlobDigest {
    let offset = position * Self.width
    return BlobDigest(
      high: UInt64(bigEndian: word(offset)), low: UInt64(bigEndian: word(offset + 8)))
  }

  /// The record at `position`.
  func removal(at position: Int) -> Removal {
    let offset = position * Self.width
    let flags = records[offset + 16]
    func file(_ flag: UInt8, _ at: Int) -> FileIdentity? {
      guard flags & flag != 0 else { return nil }
      return FileIdentity(
        inode: UInt64(littleEndian: word(at)),
        writeTime: Int64(bitPattern: UInt64(littleEndian: word(at + 8))))
    }
    return Removal(
      digest: digest(at: position), isExplicit: isExplicit, raw: file(1, offset + 17),
      compressed: file(2, offset + 33))
  }

  /// The position of the first record whose digest is not below `digest`.
  private func lowerBound(_ digest: BlobDigest) -> Int {
    var low = 0
    var high = count
    while low < high {
      let middle = (low + high) / 2
      if self.digest(at: middle) < digest { low = middle + 1 } else { high = middle }
    }
    return low
  }

  /// The position of `digest`'s record, if the row holds one.
  func index(of digest: BlobDigest) -> Int? {
    let position = lowerBound(digest)
    return position < count && self.digest(at: position) == digest ? position : nil
  }

  /// The positions of the records from `first` through `last`.
  func positions(from first: BlobDigest, through last: BlobDigest) -> Range<Int> {
    let start = lowerBound(first)
    var end = start
    while end < count && digest(at: end) <= last { end += 1 }
    return start..<end
  }

  /// Writes the row again without the records at `positions`, or
  /// deletes it when none is left.
  func write(removing positions: Set<Int>, _ db: SQLiteConnection) throws(SQLiteConnection.Failure)
  {
    let kept = (0..<count).filter { !positions.contains($0) }
    guard let first = kept.first, let last = kept.last else {
      try db.query("DELETE FROM removals WHERE id = ?", [.integer(id)])
      return
    }
    var bytes = [UInt8]()
    bytes.reserveCapacity(kept.count * Self.width)
    for position in kept {
      bytes += records[position * Self.width..<(position + 1) * Self.width]
    }
    try db.query(
      "UPDATE removals SET first = ?, last = ?, records = ? WHERE id = ?",
      [.text(digest(at: first).hex), .text(digest(at: last).hex), .blob(bytes), .integer(id)])
  }
}

/// One file as a removal names it: its inode and the time its content was
/// written (nanoseconds). An object file is never written after it is
/// staged, so neither changes while it is stored — not when it is hard
/// linked out, renamed or unlinked from elsewhere — and a file published
/// later under a reused inode number was written later.
struct FileIdentity: Hashable, Sendable {
  var inode: UInt64
  var writeTime: Int64

  init(inode: UInt64, writeTime: Int64) {
    self.inode = inode
    self.writeTime = writeTime
  }

  init(_ status: FileStatus) {
    inode = status.inode
    writeTime = status.modificationTimeNanoseconds
  }
}

/// A removal between its two steps: the files it is to unlink.
struct Removal: Sendable {
  var digest: BlobDigest
  /// `rm`'s: finished, not called off, by a read or a pin.
  var isExplicit: Bool
  /// The raw file to unlink, if there was one.
  var raw: FileIdentity?
  /// The compressed file to unlink, if there was one.
  var compressed: FileIdentity?
}
