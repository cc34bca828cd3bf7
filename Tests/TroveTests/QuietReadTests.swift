import Foundation
import Testing

@testable import Trove

/// A read that has nothing to record writes nothing: no file of the store
/// (index, WAL, shared memory, lock files, settings, objects) changes its
/// size, inode, or modification or change time. A read that has something
/// to record still records it.
@Suite("reads that record nothing write nothing")
struct QuietReadTests {
  /// Every file and folder under `root`, with what a write would change.
  func look(_ root: String) throws -> [String: [Int]] {
    var seen: [String: [Int]] = [:]
    let names = try #require(FileManager.default.enumerator(atPath: root)).compactMap {
      $0 as? String
    }
    for name in names + ["."] {
      var status = stat()
      guard lstat(root + "/" + name, &status) == 0 else { continue }
      seen[name] = [
        Int(status.st_ino), Int(status.st_size), status.st_mtim.tv_sec, status.st_mtim.tv_nsec,
        status.st_ctim.tv_sec, status.st_ctim.tv_nsec,
      ]
    }
    return seen
  }

  /// The names whose look differs between `before` and `after`.
  func changed(_ before: [String: [Int]], _ after: [String: [Int]]) -> [String] {
    Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }.sorted()
  }

  @Test(
    "has of a stored object, read within the access resolution, leaves every file of the store as it was"
  )
  func hasWritesNothing() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let digest = try put(scratch, "input", Bytes.random(4096, seed: 31))
    // A first has after the put: whatever one process leaves behind (a
    // lock file made once) is there before the look.
    try trove(store, ["has", digest.description])
    let before = try look(store)
    // File times tick at the kernel's clock: a write after this shows.
    Thread.sleep(forTimeInterval: 0.05)
    for _ in 0..<2 { try trove(store, ["has", digest.description]) }
    let after = try look(store)
    #expect(
      changed(before, after).isEmpty,
      "\(changed(before, after).map { "\($0): \(before[$0] ?? []) → \(after[$0] ?? [])" })")
  }

  @Test("has of an object whose recorded access is older than the resolution records the read")
  func hasRecordsADueAccess() throws {
    let scratch = try Scratch()
    let digest: BlobDigest
    let aged: Int64
    do {
      let store = try scratch.store()
      digest = try store.put(bytes: Bytes.random(4096, seed: 32)).digest
      try age(digest, by: 3600, in: store)
      aged = try #require(try store.entry(for: digest)).lastAccessNanoseconds
    }
    try trove(scratch["store"], ["has", digest.description])
    let store = try scratch.store()
    #expect(try #require(try store.entry(for: digest)).lastAccessNanoseconds > aged)
  }
}
