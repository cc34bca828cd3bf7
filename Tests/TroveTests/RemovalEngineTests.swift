import Foundation
import Testing

@_spi(Measuring) @testable import Trove

/// The removal engine driven directly: its two steps, what calls a
/// removal off between them, the stale pass that finishes what a killed
/// remover left, and its packed records looked up at the rows' edges.
@Suite("Removal engine: two steps, call-offs, stale removals, packed records")
struct RemovalEngineTests {
  /// A store holding `count` raw objects, their bytes and digests.
  func stored(_ scratch: Scratch, _ count: Int) throws -> (Store, [[UInt8]], [BlobDigest]) {
    let store = try scratch.store()
    let contents = (0..<count).map { Bytes.random(3000 + $0, seed: UInt64(700 + $0)) }
    let digests = try contents.map { try store.put(bytes: $0).digest }
    return (store, contents, digests)
  }

  /// The first step of removing `digests`, as a remover makes it, at `now`.
  func firstStep(
    _ digests: [BlobDigest], explicit: Bool, now: Int64 = currentTimeNanoseconds(),
    _ store: Store
  ) throws {
    try store.index().write("test: first step", durable: true) { (tx) throws(TroveError) in
      _ = try tx.deleteObjects(digests)
      try store.objects.removals.record(digests, explicit: explicit, now: now, tx)
    }
  }

  func underway(_ digest: BlobDigest, _ store: Store) throws -> Removal? {
    try store.index().read("test: look") { (tx) throws(TroveError) in
      try store.objects.removals.underway(digest, tx)
    }
  }

  func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

  @Test("the first step deletes the rows and records the files; the second unlinks exactly those")
  func twoSteps() throws {
    let scratch = try Scratch()
    let (store, _, digests) = try stored(scratch, 3)
    let paths = digests.map { store.objects.path($0) }
    try firstStep(digests, explicit: false, store)
    #expect(try store.entries().isEmpty)
    for (digest, path) in zip(digests, paths) {
      #expect(exists(path), "between the steps the file stays")
      let file = try FileDescriptor.open(path, [])
      defer { file.close() }
      let record = try #require(try underway(digest, store))
      #expect(record.raw == FileIdentity(try file.status()) && record.compressed == nil)
    }
    let (removed, failures) = try store.objects.removals.finish(digests)
    #expect(removed == [true, true, true] && failures.isEmpty, "\(failures)")
    for (digest, path) in zip(digests, paths) {
      #expect(!exists(path))
      #expect(try underway(digest, store) == nil)
    }
    #expect(try store.statistics().entries == 0)
    // A second step finds nothing left to do.
    #expect(try store.objects.removals.finish(digests).removed == [false, false, false])
  }

  @Test("a put of the same bytes between the steps calls an rm off: the object stays")
  func dedupHitCallsOff() throws {
    let scratch = try Scratch()
    let (store, contents, digests) = try stored(scratch, 2)
    try firstStep(digests, explicit: true, store)
    #expect(try store.put(bytes: contents[0]).digest == digests[0])
    #expect(try underway(digests[0], store) == nil, "the put took the record")
    let (removed, _) = try store.objects.removals.finish(digests)
    #expect(removed == [false, true])
    #expect(try store.bytes(for: digests[0]) == contents[0])
    #expect(!exists(store.objects.path(digests[1])))
    #expect(try store.entries().map(\.digest) == [digests[0]])
  }

  @Test("a read between the steps calls an eviction off, and finishes an rm")
  func readBetweenSteps() throws {
    let scratch = try Scratch()
    let (store, contents, digests) = try stored(scratch, 2)
    try firstStep([digests[0]], explicit: false, store)
    try firstStep([digests[1]], explicit: true, store)
    #expect(try store.bytes(for: digests[0]) == contents[0], "an evicted object read is kept")
    #expect(try store.contains(digests[1]) == false, "an rm'd object read is finished")
    #expect(try underway(digests[0], store) == nil && underway(digests[1], store) == nil)
    #expect(try store.objects.removals.finish(digests).removed == [false, false])
    #expect(exists(store.objects.path(digests[0])))
    #expect(!exists(store.objects.path(digests[1])))
    #expect(try store.entries().map(\.digest) == [digests[0]])
  }

  @Test("the stale pass finishes what a killed remover left, not a removal still young")
  func stalePassFinishesLeftovers() throws {
    let scratch = try Scratch()
    let (store, _, digests) = try stored(scratch, 3)
    let now = currentTimeNanoseconds()
    // Two removers killed after their first step two minutes ago (an rm,
    // an eviction); one at work now.
    try firstStep([digests[0]], explicit: true, now: now - 120_000_000_000, store)
    try firstStep([digests[1]], explicit: false, now: now - 120_000_000_000, store)
    try firstStep([digests[2]], explicit: false, now: now, store)
    let stale = try store.objects.removals.finishStale(olderThan: 60_000_000_000)
    #expect(stale.finished == 2 && stale.failure == nil)
    #expect(!exists(store.objects.path(digests[0])) && !exists(store.objects.path(digests[1])))
    #expect(exists(store.objects.path(digests[2])))
    #expect(try underway(digests[2], store) != nil, "still its remover's")
    #expect(try store.objects.removals.finishStale(olderThan: 60_000_000_000).finished == 0)
  }

  @Test("records packed in rows are found and called off at each row's edges")
  func packedRecordsAtRowEdges() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let engine = store.objects.removals
    let perRow = RemovalRow.capacity
    var generator = SeededGenerator(seed: 77)
    let digests = (0..<(2 * perRow + 452)).map { _ in
      BlobDigest(high: generator.next(), low: generator.next())
    }.sorted()
    let rows = try store.index().write("test: record") { (tx) throws(TroveError) in
      try engine.record(digests, explicit: false, now: 5, tx)
    }
    #expect(rows.count == 3)
    // The first and last record of each row, and their neighbours.
    let edges = [
      0, 1, perRow - 1, perRow, perRow + 1, 2 * perRow - 1, 2 * perRow, digests.count - 1,
    ]
    let calledOff = [perRow - 1, perRow, digests.count - 1]
    try store.index().write("test: call off") { (tx) throws(TroveError) in
      for i in edges { #expect(try engine.underway(digests[i], tx)?.digest == digests[i], "\(i)") }
      let taken = try engine.callOff(
        calledOff.map { digests[$0] } + [BlobDigest(high: 1, low: 1)], tx)
      #expect(taken.map { $0?.digest } == calledOff.map { digests[$0] } + [nil])
      for i in edges {
        #expect((try engine.underway(digests[i], tx) == nil) == calledOff.contains(i), "\(i)")
      }
    }
    let (removed, failures) = try engine.finish(digests)
    #expect(failures.isEmpty)
    #expect(removed.indices.filter { !removed[$0] } == calledOff)
  }

  @Test(
    "with every optimisation on or off, an eviction and an rm in many parts remove the same",
    arguments: [true, false])
  func sameWithOrWithoutOptimisations(tuned: Bool) throws {
    let scratch = try Scratch()
    let parts = RemovalPartsTests()
    let (store, digests) = try parts.populated(scratch, count: 60)
    let engine = RemovalEngine(
      objects: store.objects, tuning: tuned ? .tuned : .untuned)
    let pinned = Set(try store.pins().map(\.digest))
    let entries = try store.entries().filter { $0.digest.hex < "8" }
    let (evicted, failures) = try engine.evict(entries, now: currentTimeNanoseconds(), part: 4)
    #expect(failures.isEmpty, "\(failures)")
    #expect(evicted == entries.map { !pinned.contains($0.digest) })
    let named = Array(digests.filter { $0.hex >= "8" }.prefix(20))
    let (present, rmFailures) = try engine.remove(named, part: 3)
    #expect(rmFailures.isEmpty && present.allSatisfy { $0 })
    let gone = Set(named).union(entries.filter { !pinned.contains($0.digest) }.map(\.digest))
    #expect(Set(try store.entries().map(\.digest)) == Set(digests).subtracting(gone))
    for digest in gone { #expect(try store.objects.find(digest) == nil, "\(digest)") }
    try parts.expectConsistent(store, tuned ? "tuned" : "untuned")
    // Records go a row each without packing.
    let rows = try store.index().write("test: record") { (tx) throws(TroveError) in
      try engine.record(Array(digests.prefix(5)), explicit: true, now: 1, tx)
    }
    #expect(rows.count == (tuned ? 1 : 5))
  }
}
