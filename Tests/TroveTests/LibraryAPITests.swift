import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// What an embedder calls: a key bound in the put's
/// own transaction, a writer that refuses bytes it was not promised, and
/// `async` calls that leave the cooperative pool and honour cancellation.
@Suite("library API")
struct LibraryAPITests {
  @Test(
    "put(file:key:), put(bytes:key:) and makeWriter(key:) bind the key with the object, new or known"
  )
  func putBindsKey() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let data = Bytes.random(300_000, seed: 71)
    let file = try scratch.write("a.bin", data)
    let stored = try store.put(file: file, key: "first")
    #expect(try store.binding(forKey: "first")?.digest == stored.digest)
    // Known bytes (each path that finds them stored) bind too.
    #expect(try store.put(file: try scratch.write("b.bin", data), key: "second").isDuplicate)
    #expect(try store.put(bytes: data, key: "third").isDuplicate)
    let writer = try store.makeWriter(key: "fourth")
    try writer.write(data)
    #expect(try writer.commit().isDuplicate)
    for key in ["second", "third", "fourth"] {
      #expect(try store.binding(forKey: key)?.digest == stored.digest, "\(key)")
    }
    // New bytes through a writer: the key is there as the object is.
    let other = Bytes.random(5000, seed: 72)
    let fresh = try store.makeWriter(key: "fifth")
    try fresh.write(other)
    let put = try fresh.commit()
    #expect(!put.isDuplicate && put.digest == XXH3Hasher.digest(other))
    #expect(try store.binding(forKey: "fifth")?.digest == put.digest)
    // The keys survive the loss of the index: they were journalled.
    let journal = try String(contentsOfFile: scratch["store/references.log"], encoding: .utf8)
    for key in ["first", "second", "third", "fourth", "fifth"] {
      #expect(journal.contains("\"\(key)\""), "\(key) not in references.log")
    }
  }

  @Test("commit(expecting:size:) refuses other bytes and leaves nothing")
  func commitExpecting() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let data = Bytes.random(200_000, seed: 73)
    let right = XXH3Hasher.digest(data)
    let wrong = XXH3Hasher.digest(Bytes.random(10, seed: 74))
    let writer = try store.makeWriter(key: "k")
    try writer.write(data)
    #expect {
      try writer.commit(expecting: wrong)
    } throws: { error in
      let e = error as! TroveError
      return e.code == .checksumMismatch && e.message.contains(right.description)
        && e.message.contains(wrong.description)
    }
    #expect(try !store.contains(right))
    #expect(try store.binding(forKey: "k") == nil)
    #expect(scratch.temporaries("store").isEmpty)
    // A later commit says why the writer is gone.
    #expect(throws: TroveError.self) { try writer.commit() }

    let short = try store.makeWriter()
    try short.write(data)
    #expect {
      try short.commit(expecting: right, size: Int64(data.count) + 1)
    } throws: { ($0 as! TroveError).code == .checksumMismatch }
    #expect(try !store.contains(right))
    #expect(scratch.temporaries("store").isEmpty)

    let good = try store.makeWriter()
    try good.write(data)
    #expect(try good.commit(expecting: right, size: Int64(data.count)).digest == right)
    #expect(try store.contains(right))
  }

  @Test("async put, get, verify and sweep do the blocking calls' work")
  func asyncCalls() async throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let data = Bytes.random(100_000, seed: 75)
    let file = try scratch.write("in.bin", data)
    let put: PutResult = try await store.put(file: file, key: "k")
    #expect(try store.binding(forKey: "k")?.digest == put.digest)
    let again: PutResult = try await store.put(bytes: data)
    #expect(again.isDuplicate)
    // The async form takes what the blocking one takes: Data, a slice.
    let fromData: PutResult = try await store.put(bytes: Data(data), key: "d")
    #expect(fromData.isDuplicate && fromData.digest == put.digest)
    #expect(try store.binding(forKey: "d")?.digest == put.digest)
    let slice: PutResult = try await store.put(bytes: data[1000..<2000])
    #expect(slice.digest == XXH3Hasher.digest(Array(data[1000..<2000])))
    #expect(try store.bytes(for: slice.digest) == Array(data[1000..<2000]))
    let got: Materialization = try await store.materialize(put.digest, at: scratch["out.bin"])
    #expect(got.size == Int64(data.count))
    #expect(try contents(scratch["out.bin"]) == data)
    let verify: VerifyReport = try await store.verify()
    #expect(verify.isClean && verify.checkedObjects == 2)
    let sweep: SweepReport = try await store.sweep(SweepOptions(budget: 0))
    #expect(sweep.evictedEntries == 2)
    // Many at once do not wait on each other through the cooperative pool.
    let digests = try await withThrowingTaskGroup(of: BlobDigest.self) { group in
      for i in 0..<16 {
        group.addTask {
          let result: PutResult = try await store.put(
            bytes: Bytes.random(4096, seed: UInt64(100 + i)))
          return result.digest
        }
      }
      var all: Set<BlobDigest> = []
      for try await d in group { all.insert(d) }
      return all
    }
    #expect(digests.count == 16)
  }

  @Test("a cancelled task's call does nothing; a cancelled fetch stops its transfer")
  func cancellation() async throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let file = try scratch.write("in.bin", Bytes.random(1000, seed: 76))
    let early = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      let result: PutResult = try await store.put(file: file)
      return result
    }
    await #expect {
      try await early.value
    } throws: { ($0 as! TroveError).code == .cancelled }
    #expect(try store.entries().isEmpty)

    guard FaultServer.python != nil else { return }
    let server = try FaultServer()
    // 64 KiB, then nothing for 60 s, and no stall limit before that: a fetch
    // that ends .cancelled was stopped by the cancellation, not by the server.
    let url = server.url("/stall/c?size=1048576")
    var options = FetchOptions()
    options.retries = 0
    options.stallTimeout = 300
    let fetch = Task { [options] in
      let result: FetchResult = try await store.fetch(FetchRequest(url: url), options: options)
      return result
    }
    // Until the server has the request, then a moment for its first bytes.
    for _ in 0..<500 where server.requests().isEmpty {
      try await Task.sleep(for: .milliseconds(10))
    }
    try await Task.sleep(for: .milliseconds(300))
    let cancelled = ContinuousClock.now
    fetch.cancel()
    await #expect {
      try await fetch.value
    } throws: { ($0 as! TroveError).code == .cancelled }
    // Well before the server's 60 s, even on a loaded machine.
    #expect(ContinuousClock.now - cancelled < .seconds(45))
    #expect(try store.entries().isEmpty)
    #expect(try store.binding(forKey: url) == nil)
  }
}

/// `remove` of many objects in batches.
@Suite("batched removal")
struct BatchedRemovalTests {
  @Test(
    "remove of 2,500 digests (some twice, some absent): each answered in order, all gone, verify clean"
  )
  func removeMany() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    var digests: [BlobDigest] = []
    for i in 0..<2500 {
      digests.append(
        try store.put(bytes: Bytes.random(64 + i % 500, seed: UInt64(3000 + i))).digest)
    }
    let absent = XXH3Hasher.digest(Bytes.random(10, seed: 2999))
    try store.pin(digests[7], name: "keep")
    let asked = [absent] + digests + [digests[0], digests[2499]]
    let results = try store.remove(asked)
    #expect(results.count == asked.count)
    #expect(results.first == false && results.last == false)
    #expect(results[asked.count - 2] == false)
    #expect(results[1...2500].allSatisfy { $0 })
    #expect(try store.entries().isEmpty)
    #expect(try store.statistics().entries == 0)
    #expect(try store.verify().corrupt.isEmpty)
    // Nothing is left in objects/ either.
    let left = try FileManager.default.subpathsOfDirectory(atPath: scratch["store"] + "/objects")
      .filter { !$0.contains("/") ? false : true }
    #expect(left.isEmpty, "\(left.prefix(5))")
    // The CLI removes many in one process, and says which were not there.
    let again = try store.put(bytes: Bytes.random(100, seed: 2998)).digest
    let rm = try CLI.run([
      "--store", scratch["store"], "rm", again.description, digests[1].description,
    ])
    #expect(
      rm.status == 1
        && rm.errorLines == ["Error: no object \(digests[1]) in store '\(scratch["store"])'"])
    #expect(try !store.contains(again))
  }
}
