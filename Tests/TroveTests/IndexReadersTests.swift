import Foundation
import Synchronization
import Testing

@testable import Trove

/// Lookups through the index while a thread of the same process holds a
/// write transaction (a group commit through its renames and syncs): in WAL
/// mode they run on reader connections of their own instead of waiting.
@Suite("index lookups beside a write transaction")
struct IndexReadersTests {
  @Test("lookups are answered while another thread holds a write transaction")
  func lookupDuringWrite() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let stored = try store.put(bytes: Bytes.random(20_000, seed: 7301)).digest
    let index = try store.index()
    #expect(index.journalMode == "wal")
    let one = Self.whileWriting(index, stored) {
      [try? index.read("test: look up") { (tx) throws(TroveError) in try tx.entry(for: stored) }]
    }
    #expect(one.waited == false, "the lookup waited for the write transaction")
    #expect(one.entries.map { $0?.size } == [20_000])
    // Many threads at once: each on a reader connection of its own.
    let many = Self.whileWriting(index, stored) {
      let found = Mutex<[StoreEntry?]>([])
      DispatchQueue.concurrentPerform(iterations: 16) { _ in
        let entry = try? index.read("test: look up") { (tx) throws(TroveError) in
          try tx.entry(for: stored)
        }
        found.withLock { $0.append(entry) }
      }
      return found.withLock { $0 }
    }
    #expect(many.waited == false, "a lookup waited for the write transaction")
    #expect(many.entries.count == 16 && many.entries.allSatisfy { $0?.digest == stored })
  }

  /// Runs `lookups` while another thread holds a write transaction, and
  /// ends that transaction after them: what they found, and whether they
  /// waited for it (then the writer gave up waiting for them after 30 s).
  private static func whileWriting(
    _ index: Index, _ digest: BlobDigest, _ lookups: () -> [StoreEntry?]
  ) -> (entries: [StoreEntry?], waited: Bool) {
    let inside = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let done = DispatchSemaphore(value: 0)
    let released = Mutex(false)
    Thread.detachNewThread {
      _ = try? index.write("test: hold the write lock") { (tx) throws(TroveError) in
        _ = try tx.entry(for: digest)
        inside.signal()
        let inTime = release.wait(timeout: .now() + 30) == .success
        released.withLock { $0 = inTime }
      }
      done.signal()
    }
    guard inside.wait(timeout: .now() + 30) == .success else {
      Issue.record("the write transaction did not begin within 30 s")
      release.signal()
      return ([], true)
    }
    let entries = lookups()
    release.signal()
    done.wait()
    return (entries, !released.withLock { $0 })
  }
}
