import Foundation
import Testing

@_spi(Measuring) @testable import Trove

/// Removals in parts whose steps share transactions (part k's unlinks
/// beside part k + 1's lookups, then part k + 1's first step), run with
/// parts of 7 so that a few dozen objects cross many of them.
@Suite("Removal in pipelined parts: evictions and rm across many parts")
struct RemovalPartsTests {
  /// A store with `count` objects of distinct sizes (raw and zstd), a key
  /// on every third and a pin on every tenth.
  func populated(_ scratch: Scratch, count: Int) throws -> (Store, [BlobDigest]) {
    let store = try scratch.store()
    try store.updatePolicy { (policy) throws(TroveError) in
      policy.accessResolution = 0
      try CachePolicy.Key.compression.set("zstd", in: &policy)
      policy.compressionMinimumSize = 4096
    }
    var digests: [BlobDigest] = []
    for i in 0..<count {
      let bytes =
        i % 2 == 0
        ? Bytes.random(900 + 53 * i, seed: UInt64(7100 + i))
        : Bytes.text(4500 + 71 * i, seed: UInt64(7100 + i))
      let digest = try store.put(bytes: bytes).digest
      digests.append(digest)
      if i % 3 == 0 { try store.bind(key: "key-\(i)", to: digest) }
      if i % 10 == 0 { try store.pin(digest, name: "keep") }
    }
    return (store, digests)
  }

  /// The index's totals equal the sums of its rows; no removal is
  /// recorded as under way.
  func expectConsistent(_ store: Store, _ when: String) throws {
    let rows = try store.entries()
    let stats = try store.statistics()
    #expect(stats.entries == Int64(rows.count), "entries \(when)")
    #expect(stats.logicalBytes == rows.map(\.size).reduce(0, +), "logical bytes \(when)")
    #expect(stats.allocatedBytes == rows.map(\.allocatedBytes).reduce(0, +), "allocated \(when)")
    #expect(stats.storedBytes == rows.map(\.storedBytes).reduce(0, +), "stored \(when)")
    #expect(
      stats.compressedEntries == Int64(rows.filter(\.isCompressed).count), "compressed \(when)")
    let underWay = try store.index().read("removals") { (tx) throws(TroveError) in
      try tx.removals(withPrefix: "")
    }
    #expect(underWay.isEmpty, "removals left under way \(when): \(underWay.count)")
  }

  /// The `drop` lines of the store's references.log, by digest; each
  /// line decodes as a record and is exactly what the encoder writes.
  func dropLines(_ store: Store) throws -> Set<BlobDigest> {
    let text = try String(contentsOfFile: store.root + "/references.log", encoding: .utf8)
    var drops = Set<BlobDigest>()
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    for line in text.split(separator: "\n") {
      let record = try JSONDecoder().decode(JournalRecord.self, from: Data(line.utf8))
      #expect(String(decoding: try encoder.encode(record), as: UTF8.self) == String(line))
      if record.op == .drop, let digest = record.digest { drops.insert(digest) }
    }
    return drops
  }

  @Test(
    "an eviction takes off the totals of exactly the rows it deleted, at once; other removals count again after"
  )
  func bulkTotals() throws {
    let scratch = try Scratch()
    let (store, digests) = try populated(scratch, count: 60)
    let pinned = Set(digests.indices.filter { $0 % 10 == 0 }.map { digests[$0] })
    #expect(try store.entries().contains { $0.isCompressed })
    let total = try store.statistics().allocatedBytes
    let report = try store.sweep(SweepOptions(budget: total / 3))
    #expect(report.removedEntries > 10 && report.removedEntries < 54)
    try expectConsistent(store, "after the sweep")
    // The trigger counts again outside the eviction's transaction: an rm
    // and a put after it keep the totals right.
    let survivor = try #require(
      try store.entries().first { !$0.isCompressed && !pinned.contains($0.digest) }?.digest)
    try store.remove(survivor)
    _ = try store.put(bytes: Bytes.random(3333, seed: 9))
    try expectConsistent(store, "after an rm and a put")
    // Everything unpinned, to nothing.
    _ = try store.sweep(SweepOptions(budget: 0))
    #expect(Set(try store.entries().map(\.digest)) == pinned)
    try expectConsistent(store, "after a sweep to a budget of 0")
  }

  @Test("an eviction across many parts removes exactly the unpinned objects, their keys and totals")
  func evictAcrossParts() throws {
    let scratch = try Scratch()
    let (store, digests) = try populated(scratch, count: 60)
    let entries = try store.entries()
    let (evicted, failures) = try store.objects.evict(
      entries, now: currentTimeNanoseconds(), part: 7)
    #expect(failures.isEmpty)
    let pinned = Set(digests.indices.filter { $0 % 10 == 0 }.map { digests[$0] })
    for (entry, gone) in zip(entries, evicted) {
      #expect(gone == !pinned.contains(entry.digest), "\(entry.digest)")
      let path = store.objects.path(entry.digest, compressed: entry.isCompressed)
      #expect(FileManager.default.fileExists(atPath: path) == !gone, "\(path)")
    }
    #expect(Set(try store.entries().map(\.digest)) == pinned)
    for i in stride(from: 0, to: digests.count, by: 3) {
      #expect(
        (try store.binding(forKey: "key-\(i)") != nil) == pinned.contains(digests[i]), "key-\(i)")
    }
    try expectConsistent(store, "after the eviction")
    // A drop line for every evicted object, keys or not; none for the kept.
    #expect(try dropLines(store) == Set(digests).subtracting(pinned))
    #expect(try store.verify().isClean)
  }

  @Test("an rm across many parts removes every object named, pinned or not, and says which it held")
  func removeAcrossParts() throws {
    let scratch = try Scratch()
    let (store, digests) = try populated(scratch, count: 45)
    let missing = XXH3Hasher.digest(Array("never stored".utf8))
    let named = Array(digests[5...]) + [missing]
    let (present, failures) = try store.objects.drop(named, part: 7)
    #expect(failures.isEmpty)
    #expect(present == named.map { $0 != missing })
    #expect(Set(try store.entries().map(\.digest)) == Set(digests[..<5]))
    for digest in digests[5...] {
      #expect(
        !FileManager.default.fileExists(atPath: store.objects.path(digest, compressed: false)))
      #expect(!FileManager.default.fileExists(atPath: store.objects.path(digest, compressed: true)))
    }
    try expectConsistent(store, "after the rm")
    #expect(try dropLines(store).isSuperset(of: digests[5...]))
    // Their pins and keys went with them; those of the five kept stayed.
    #expect(Set(try store.pins().map(\.digest)) == [digests[0]])
    #expect(try store.digest(forKey: "key-6") == nil)
    #expect(try store.digest(forKey: "key-3") == digests[3])
    #expect(try store.verify().isClean)
  }

  @Test(
    "an rm and an eviction of more than 64 rows turn the totals trigger off and on again: the totals stay exact"
  )
  func bulkRemovalTotals() throws {
    let scratch = try Scratch()
    let (store, _) = try populated(scratch, count: 10)
    let many = (0..<(RemovalTuning.tuned.bulkRemovalMinimum + 6)).map { i in
      i % 2 == 0
        ? Bytes.random(700 + 31 * i, seed: UInt64(7300 + i))
        : Bytes.text(4200 + 67 * i, seed: UInt64(7300 + i))
    }
    let removed = try many.map { try store.put(bytes: $0).digest }
    #expect(try store.remove(removed).allSatisfy { $0 })
    try expectConsistent(store, "after an rm of \(removed.count)")
    // Triggers are on again: a put and a single removal keep the totals.
    let one = try store.put(bytes: Bytes.random(5000, seed: 7399)).digest
    try expectConsistent(store, "after a put that followed the rm")
    #expect(try store.remove(one))
    try expectConsistent(store, "after a remove that followed the rm")
    // The same for an eviction of them all, in one part.
    for bytes in many { _ = try store.put(bytes: bytes) }
    let pinned = Set(try store.pins().map(\.digest))
    let entries = try store.entries().filter { !pinned.contains($0.digest) }
    #expect(entries.count >= RemovalTuning.tuned.bulkRemovalMinimum)
    let (evicted, failures) = try store.objects.evict(entries, now: currentTimeNanoseconds())
    #expect(failures.isEmpty && evicted.allSatisfy { $0 })
    try expectConsistent(store, "after an eviction of \(entries.count)")
    _ = try store.put(bytes: Bytes.random(6000, seed: 7400))
    try expectConsistent(store, "after a put that followed the eviction")
  }

  @Test(
    "a removal of 64 objects or more journals a drop only where the log names the digest; a lost index brings none of their pins or keys back"
  )
  func dropsWhereNamed() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let count = RemovalEngine.journalScanMinimum + 16
    let blobs = (0..<count).map { Bytes.random(600 + 13 * $0, seed: UInt64(7500 + $0)) }
    let digests = try blobs.map { try store.put(bytes: $0).digest }
    // Named by the log: a pin, a key, and a pin taken off again.
    try store.pin(digests[0], name: "keep")
    try store.bind(key: "k", to: digests[1])
    try store.pin(digests[2], name: "gone")
    #expect(try store.unpin(digests[2], name: "gone"))
    #expect(try store.remove(digests).allSatisfy { $0 })
    #expect(try dropLines(store) == Set(digests.prefix(3)))
    // The same bytes again, then the index lost: replaying the log onto
    // the new copies brings back no pin and no key.
    for bytes in blobs.prefix(3) { _ = try store.put(bytes: bytes) }
    for suffix in ["", "-wal", "-shm"] {
      try FileManager.default.removeItem(atPath: store.root + "/index.sqlite" + suffix)
    }
    let reopened = try Store(StoreConfiguration(root: store.root))
    #expect(Set(try reopened.entries().map(\.digest)) == Set(digests.prefix(3)))
    #expect(try reopened.pins().isEmpty)
    #expect(try reopened.binding(forKey: "k") == nil)
  }

  @Test("a log larger than the scan limit gets a drop line for every digest removed")
  func dropsForEveryDigestPastTheLimit() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let digests = try (0..<(RemovalEngine.journalScanMinimum + 4)).map {
      try store.put(bytes: Bytes.random(500 + 11 * $0, seed: UInt64(7600 + $0))).digest
    }
    // A key of half the limit on another object (so that the log, four
    // times what it describes at most, is not compacted), then a line that
    // names none of them: the log is too large to read.
    let keeper = try store.put(bytes: Bytes.random(4000, seed: 7699)).digest
    try store.bind(
      key: String(repeating: "k", count: RemovalEngine.journalScanLimit / 2), to: keeper)
    let key = String(repeating: "u", count: RemovalEngine.journalScanLimit)
    let log = try FileHandle(forWritingTo: URL(fileURLWithPath: store.root + "/references.log"))
    try log.seekToEnd()
    try log.write(contentsOf: Data("{\"key\":\"\(key)\",\"op\":\"unbind\"}\n".utf8))
    try log.close()
    #expect(try store.remove(digests).allSatisfy { $0 })
    #expect(try dropLines(store) == Set(digests))
  }

  @Test("the digests a log names: those of every line but drops, a line cut short included")
  func digestsNamedByLog() {
    let (a, b, c, d, e) = (
      XXH3Hasher.digest([1]), XXH3Hasher.digest([2]), XXH3Hasher.digest([3]),
      XXH3Hasher.digest([4]), XXH3Hasher.digest([5])
    )
    let log = """
      {"digest":"\(a)","name":"keep","op":"pin"}
      {"digest":"\(e)","op":"drop"}
      {"digest":"\(b)","op":"drop"}
      {"digest":"\(c)","key":"https://example.com/\(d)","op":"bind"}
      {"digest":"\(b)","na
      {"digest":"xxh128:0123","op":"unpin"}

      """
    #expect(RemovalEngine.digestsNamed(in: Array(log.utf8)) == [a, b, c, d])
  }

  @Test(
    "a file that cannot be unlinked in a middle part keeps its object; the parts around it go",
    .enabled(
      if: LeftoverTests.immutableBase != nil,
      "chattr +i does not work here (needs root, /usr/bin/chattr and ext4 or XFS)"))
  func stuckFileInMiddlePart() throws {
    let scratch = try Scratch(under: LeftoverTests.immutableBase)
    let (store, _) = try populated(scratch, count: 30)
    let pinned = Set(try store.pins().map(\.digest))
    let entries = try store.entries().filter { !pinned.contains($0.digest) }
    let stuck = entries[entries.count / 2]
    let path = store.objects.path(stuck.digest, compressed: stuck.isCompressed)
    #expect(LeftoverTests.chattr(["+i", path]))
    defer {
      LeftoverTests.chattr(["-i", path])
      withExtendedLifetime(scratch) {}
    }
    let (evicted, failures) = try store.objects.evict(
      entries, now: currentTimeNanoseconds(), part: 7)
    #expect(failures.count == 1 && failures.first?.path == path, "\(failures)")
    for (entry, gone) in zip(entries, evicted) {
      #expect(gone == (entry.digest != stuck.digest), "\(entry.digest)")
    }
    #expect(try store.contains(stuck.digest))
    #expect(FileManager.default.fileExists(atPath: path))
    try expectConsistent(store, "after an eviction with a stuck file")
  }
}

/// The lookups of a removal's files: one listing of a fan-out folder for
/// many of its objects, a lookup per name for a few; both find the same.
@Suite("Removal lookups by listing a folder")
struct RemovalLookupTests {
  @Test("40 objects of one folder: listed, each form found as looking each up finds it")
  func listingAgreesWithLookups() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let digests = (0..<40).map { BlobDigest(high: 0xAB00_0000_0000_0000 | UInt64($0), low: 9) }
    let folder = store.objects.path(digests[0]).split(separator: "/").dropLast().joined(
      separator: "/")
    try FileManager.default.createDirectory(
      atPath: "/" + folder, withIntermediateDirectories: true)
    // Raw, compressed, both (a conversion cut short), or neither; one a
    // folder, which is no object file.
    for (i, digest) in digests.enumerated() {
      if i % 8 != 7 && i % 8 != 6 {
        try Data([1]).write(to: URL(fileURLWithPath: store.objects.path(digest)))
      }
      if i % 4 == 1 || i % 8 == 6 {
        try Data([2]).write(
          to: URL(fileURLWithPath: store.objects.path(digest, compressed: true)))
      }
    }
    try FileManager.default.createDirectory(
      atPath: store.objects.path(digests[39], compressed: true), withIntermediateDirectories: false)
    let open = try FileDescriptor.open("/" + folder, [.directory])
    defer { open.close() }
    // 30 raw files, 15 compressed ones and the folder.
    #expect(RemovalEngine.names(in: open, lookingUpMany: 40)?.count == 46)
    #expect(RemovalEngine.names(in: open, lookingUpMany: 31) == nil, "too few to list for")

    let listed = try store.objects.removals.lookUp(digests, explicit: false)
    for (i, digest) in digests.enumerated() {
      let one = try store.objects.removals.lookUp(digest, explicit: false)
      #expect(listed[i].raw == one.raw && listed[i].compressed == one.compressed, "\(i)")
      #expect((one.raw != nil) == (i % 8 != 7 && i % 8 != 6), "\(i) raw")
      #expect((one.compressed != nil) == ((i % 4 == 1 || i % 8 == 6) && i != 39), "\(i) zst")
    }
  }

  @Test("a folder much larger than the objects looked up in it is not listed")
  func largeFolderNotListed() throws {
    let scratch = try Scratch()
    let folder = scratch["many"]
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    for i in 0..<2000 {
      FileManager.default.createFile(
        atPath: folder + "/" + String(repeating: "a", count: 24)
          + String(i, radix: 16).leftPadded(to: 8), contents: nil)
    }
    let open = try FileDescriptor.open(folder, [.directory])
    defer { open.close() }
    #expect(RemovalEngine.names(in: open, lookingUpMany: 32) == nil)
    #expect(RemovalEngine.names(in: open, lookingUpMany: 2000)?.count == 2000)
  }
}
