import Foundation
import Testing

@testable import Trove

/// Hits and misses: every read served counts
/// exactly once, the store's own reads count nothing, and counts made in
/// memory reach the index when the store is closed.
@Suite("hit and miss counts")
struct AccessCountTests {
  @Test("every read served in a loop is one hit; a miss is one miss; stats sees them at once")
  func exactCounts() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let data = Bytes.random(5000, seed: 501)
    let digest = try store.put(bytes: data).digest
    for i in 0..<40 {
      #expect(try store.bytes(for: digest) == data)
      try store.materialize(digest, at: scratch["out-\(i)"])
    }
    let absent = XXH3Hasher.digest(Bytes.random(10, seed: 502))
    #expect(throws: TroveError.self) { try store.bytes(for: absent) }
    #expect(throws: TroveError.self) { try store.materialize(absent, at: scratch["none"]) }
    #expect(try store.contains(digest))
    #expect(try !store.contains(absent))
    let stats = try store.statistics()
    #expect(stats.hits == 80 && stats.misses == 2)
  }

  @Test("the store's own reads — verify, export, a get refused before it starts — count nothing")
  func internalReads() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let digest = try store.put(bytes: Bytes.random(7000, seed: 503)).digest
    _ = try store.verify()
    let object = RecordedObject(digest: digest, keys: [], firstUsed: 0, lastUsed: 0)
    _ = try store.export([object], to: scratch["exported"])
    _ = try store.exportArchive([object], toFile: scratch["exported.tar"])
    try Data([1]).write(to: URL(fileURLWithPath: scratch["taken"]))
    #expect(throws: TroveError.self) { try store.materialize(digest, at: scratch["taken"]) }
    let stats = try store.statistics()
    #expect(stats.hits == 0 && stats.misses == 0)
  }

  @Test("counts kept in memory are written when the store is closed, and a reset drops them")
  func writtenAtClose() throws {
    let scratch = try Scratch()
    let root = scratch["store"]
    let digest: BlobDigest
    do {
      let store = try Store(StoreConfiguration(root: root))
      digest = try store.put(bytes: Bytes.random(100, seed: 504)).digest
      for _ in 0..<3 { _ = try store.bytes(for: digest) }
    }
    do {
      let store = try Store(StoreConfiguration(root: root))
      #expect(try store.statistics().hits == 3)
      _ = try store.bytes(for: digest)
      try store.resetAccessCounts()
      _ = try store.bytes(for: digest)
      let stats = try store.statistics()
      #expect(stats.hits == 1 && stats.misses == 0 && stats.countedSince != nil)
    }
    // Through the CLI: one process, two objects, two hits.
    let other = try scratch.write("other", Bytes.random(200, seed: 505))
    let put = try CLI.run(["--store", root, "put", other])
    try FileManager.default.createDirectory(
      atPath: scratch["many"], withIntermediateDirectories: false)
    let get = try CLI.run([
      "--store", root, "get", "-C", scratch["many"], digest.description,
      String(put.out.prefix(39)),
    ])
    #expect(get.status == 0, "\(get.stderr)")
    #expect(try Store(StoreConfiguration(root: root)).statistics().hits == 3)
  }
}
