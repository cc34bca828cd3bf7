import Foundation
import Testing

@testable import Trove

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
        : CompressionTests.text(4500 + 71 * i, seed: UInt64(7100 + i))
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
    #expect(try store.verify().isClean)
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
