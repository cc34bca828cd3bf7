import Foundation
import Synchronization
import Testing

@testable import Trove

/// Single puts made concurrently in one process, coalesced into group
/// commits (``CommitQueue``): each caller gets its own result, only once its
/// object is durable and indexed; a lone put is published alone, at once;
/// keys still bind; failing syncs in a coalesced group fail or fall back
/// per object, as in a put of many files.
@Suite("Group commit: concurrent single puts", .serialized)
struct CommitQueueTests {
  static let childVariable = "TROVE_TEST_COMMIT_QUEUE_CHILD"

  /// Distinct bytes for put `i` of thread `t` (1–9 KiB).
  static func distinct(_ t: Int, _ i: Int, seed: UInt64 = 0) -> [UInt8] {
    Bytes.random(1024 + (t * 131 + i * 977) % 8192, seed: seed &* 100_000 &+ UInt64(t * 1000 + i))
  }

  /// The bytes every thread puts as its `k`-th shared buffer.
  static func shared(_ k: Int) -> [UInt8] { Bytes.random(3000 + k, seed: 77_000 + UInt64(k)) }

  /// Runs `body(t)` on `count` threads at once and waits for all.
  static func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for t in 0..<count {
      group.enter()
      Thread.detachNewThread {
        body(t)
        group.leave()
      }
    }
    group.wait()
  }

  @Test(
    "threads × puts of distinct and identical bytes on one store: each result right, each object stored, counters exact, groups formed"
  )
  func concurrentPuts() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let threads = 8
    let perThread = 40
    let sharedCount = 5
    // Each thread: 40 distinct buffers, every fourth put from a file, and
    // the 5 shared buffers twice each, interleaved.
    let outcomes = Mutex<[(bytes: [UInt8], result: Result<PutResult, TroveError>)]>([])
    let folder = scratch.path
    Self.onThreads(threads) { t in
      var mine: [(bytes: [UInt8], result: Result<PutResult, TroveError>)] = []
      for i in 0..<perThread {
        let bytes = Self.distinct(t, i)
        if i % 4 == 3 {
          let path = folder + "/t\(t)-\(i)"
          _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
          mine.append((bytes, Result { () throws(TroveError) in try store.put(file: path) }))
        } else {
          mine.append((bytes, Result { () throws(TroveError) in try store.put(bytes: bytes) }))
        }
        if i % 4 == 0 {
          let same = Self.shared((i / 4) % sharedCount)
          mine.append((same, Result { () throws(TroveError) in try store.put(bytes: same) }))
        }
      }
      let taken = mine
      outcomes.withLock { $0 += taken }
    }
    let all = outcomes.withLock { $0 }
    #expect(all.count == threads * (perThread + perThread / 4))
    var distinctDigests = Set<BlobDigest>()
    var stored = 0
    for (bytes, result) in all {
      let put = try result.get()
      let digest = XXH3Hasher.digest(bytes)
      #expect(put.digest == digest && put.size == Int64(bytes.count))
      if !put.isDuplicate { stored += 1 }
      distinctDigests.insert(digest)
      #expect(try store.bytes(for: digest) == bytes, "\(digest) is not its bytes")
    }
    #expect(distinctDigests.count == threads * perThread + sharedCount)
    #expect(stored == distinctDigests.count, "each distinct object stored once: \(stored)")
    let statistics = try store.statistics()
    #expect(statistics.entries == Int64(distinctDigests.count))
    #expect(statistics.dedupHits == Int64(all.count - distinctDigests.count))
    let queue = store.objects.commits.statistics
    #expect(queue.groups > 0, "no puts were coalesced: \(queue)")
    #expect(queue.objectsInGroups > queue.groups, "\(queue)")
    #expect(scratch.temporaries("store").isEmpty, "tmp/ holds \(scratch.temporaries("store"))")
    let audit = try StoreAudit(store: scratch["store"], context: "concurrent", io: scratch["io"])
    audit.expectIntact(try audit.walk())
    #expect(try audit.indexRows() == distinctDigests)
    try audit.expectVerifyClean(allowingRepair: false)
  }

  @Test("a lone put is published at once, alone: no group, one commit each")
  func lonePut() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    for i in 0..<20 {
      let bytes = Self.distinct(0, i, seed: 3)
      #expect(try store.put(bytes: bytes).digest == XXH3Hasher.digest(bytes))
    }
    let queue = store.objects.commits.statistics
    #expect(queue == CommitQueue.Statistics(commits: 20, groups: 0, objectsInGroups: 0))
  }

  @Test("concurrent puts with keys: each key bound to its object, the others coalesced")
  func concurrentKeys() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let failures = Mutex<[String]>([])
    Self.onThreads(6) { t in
      for i in 0..<20 {
        let bytes = Self.distinct(t, i, seed: 4)
        do throws(TroveError) {
          if i % 2 == 0 {
            _ = try store.put(bytes: bytes, key: "key-\(t)-\(i)")
          } else {
            _ = try store.put(bytes: bytes)
          }
        } catch {
          failures.withLock { $0.append("\(error)") }
        }
      }
    }
    #expect(failures.withLock { $0 }.isEmpty)
    for t in 0..<6 {
      for i in stride(from: 0, to: 20, by: 2) {
        let digest = XXH3Hasher.digest(Self.distinct(t, i, seed: 4))
        #expect(try store.digest(forKey: "key-\(t)-\(i)") == digest)
      }
    }
    #expect(try store.statistics().entries == 120)
    #expect(try store.keys().count == 60)
  }

  @Test(
    "a fetch of many URLs: each body published with its key bound in the same commit, the bodies published in groups",
    .enabled(if: Nginx.executable != nil, Nginx.missing))
  func fetchManyJoinsGroupCommits() throws {
    let nginx = try Nginx()
    let scratch = try Scratch()
    let events = Mutex<[TraceEvent]>([])
    let store = try Store(
      StoreConfiguration(
        root: scratch["store"], trace: { event in events.withLock { $0.append(event) } }))
    var requests: [FetchRequest] = []
    var expected: [String: BlobDigest] = [:]
    // More than a group (256 at most) of bodies.
    let count = 300
    for i in 0..<count {
      let body = Bytes.random(4096 + i * 131, seed: UInt64(3100 + i))
      try nginx.files.write("s\(i).bin", body)
      requests.append(FetchRequest(url: nginx.url("/s\(i).bin")))
      expected[nginx.url("/s\(i).bin")] = XXH3Hasher.digest(body)
    }
    let results = store.fetch(requests, jobs: 8)
    for (request, result) in zip(requests, results) {
      #expect(try result.get().digest == expected[request.url])
      // The result made once the body was published, not the job's own.
      #expect(try result.get().seconds > 0)
      #expect(try store.digest(forKey: request.url) == expected[request.url])
    }
    // One publish per body, the key bound in it: no transaction of its own.
    let published = events.withLock { $0 }.filter { $0.seam == .publish }
    #expect(published.count == count)
    for event in published {
      #expect(event.what.hasPrefix("stored "), "\(event)")
      #expect(
        event.why.contains(", key '\(nginx.url("/s"))") && event.why.hasSuffix(".bin' bound"),
        "\(event)")
    }
    // The bodies wait for each other: groups, not a commit each. Each
    // member of a group of N says N.
    let sizes = published.compactMap { event in
      event.why.split(separator: ",").first { $0.contains("published in a group of") }
        .flatMap { Int($0.split(separator: " ").last ?? "") }
    }
    #expect(sizes.count == count, "\(published.map(\.why))")
    let groups = sizes.reduce(0.0) { $0 + 1 / Double($1) }
    #expect(groups >= 1 && groups <= Double(count) / 4, "\(groups) groups")
    #expect(try store.keys().count == count)
    // Each key is journalled once (a group's lines in one append), and comes
    // back from the journal when the index is lost.
    let journal = try String(contentsOfFile: scratch["store/references.log"], encoding: .utf8)
    let binds = journal.split(separator: "\n").filter { $0.contains("\"op\":\"bind\"") }
    #expect(binds.count == count)
    for suffix in ["", "-wal", "-shm"] {
      try? FileManager.default.removeItem(atPath: scratch["store/index.sqlite" + suffix])
    }
    let reopened = try Store(StoreConfiguration(root: scratch["store"]))
    for request in requests {
      #expect(try reopened.digest(forKey: request.url) == expected[request.url], "\(request.url)")
    }
  }

  // MARK: Faults, in a child process (they are injected through its environment)

  /// How many threads and puts each the child makes.
  static let childThreads = 8
  static let childPuts = 25

  /// The child: with `TROVE_TEST_COMMIT_QUEUE_CHILD` set to a folder, puts
  /// distinct bytes on several threads into its store and writes one line
  /// per put (`t i digest` or `t i error: …`) and the queue's statistics
  /// to `results.txt` there. Skipped otherwise.
  @Test(
    "(child process of the fault tests)",
    .enabled(if: ProcessInfo.processInfo.environment[childVariable] != nil))
  func child() throws {
    let folder = try #require(ProcessInfo.processInfo.environment[Self.childVariable])
    let store = try Store(StoreConfiguration(root: folder + "/store"))
    let lines = Mutex<[String]>([])
    Self.onThreads(Self.childThreads) { t in
      for i in 0..<Self.childPuts {
        let line: String
        do throws(TroveError) {
          line = "\(t) \(i) \(try store.put(bytes: Self.distinct(t, i, seed: 9)).digest)"
        } catch {
          line = "\(t) \(i) error: \(error)"
        }
        lines.withLock { $0.append(line) }
      }
    }
    let queue = store.objects.commits.statistics
    let text =
      lines.withLock { $0 }.joined(separator: "\n") + "\ngroups \(queue.groups)\n"
    try text.write(toFile: folder + "/results.txt", atomically: true, encoding: .utf8)
  }

  /// The test executable (this process's), for the child.
  static let testExecutable: String = {
    let own = CommandLine.arguments[0]
    if own.hasSuffix(".xctest") { return own }
    return FileManager.default.currentDirectoryPath + "/.build/debug/TrovePackageTests.xctest"
  }()

  /// Runs the child with `fault` injected and checks each put: its digest
  /// and its object in place (bytes right, indexed), or an error naming
  /// the object and nothing of it stored. Returns the counts.
  func expectEachPublishedOrAbsent(fault: String) throws -> (stored: Int, failed: Int, groups: Int)
  {
    let scratch = try Scratch()
    _ = try scratch.store()  // made first, so the fault hits the puts
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Self.testExecutable)
    process.arguments = [
      "--testing-library", "swift-testing", "--filter", "CommitQueueTests/child",
    ]
    var environment = ProcessInfo.processInfo.environment
    environment["TROVE_INJECT_FAULT"] = fault
    environment[Self.childVariable] = scratch.path
    process.environment = environment
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0, "\(fault): the child failed")
    let text = try String(contentsOfFile: scratch["results.txt"], encoding: .utf8)
    var groups = -1
    var said = [String: String]()
    for line in text.split(separator: "\n") {
      let parts = line.split(separator: " ", maxSplits: 2)
      if parts.first == "groups" {
        groups = Int(parts[1]) ?? -1
      } else if parts.count == 3 {
        said["\(parts[0]) \(parts[1])"] = String(parts[2])
      }
    }
    let audit = try StoreAudit(
      store: scratch["store"], context: "fault \(fault)", io: scratch["io"])
    let rows = try audit.indexRows()
    let reader = try Store(StoreConfiguration(root: scratch["store"]))
    var stored = 0
    var failed = 0
    for t in 0..<Self.childThreads {
      for i in 0..<Self.childPuts {
        let bytes = Self.distinct(t, i, seed: 9)
        let digest = XXH3Hasher.digest(bytes)
        let answer = try #require(said["\(t) \(i)"], "\(fault): no result for put \(t) \(i)")
        if answer.hasPrefix("error: ") {
          failed += 1
          // The object, or its fan-out folder when that could not be made.
          let folder = "objects/" + StoreLayout.fanout(digest) + "'"
          #expect(
            answer.contains(digest.hex) || answer.contains(folder),
            "\(fault): the error names the object: \(answer)")
          #expect(
            !audit.isStored(digest) && !rows.contains(digest), "\(fault): \(digest) half stored")
        } else {
          stored += 1
          #expect(answer == digest.description, "\(fault): put \(t) \(i) said \(answer)")
          #expect(
            audit.isStored(digest) && rows.contains(digest),
            "\(fault): \(digest) acknowledged, not stored")
          #expect(try reader.bytes(for: digest) == bytes)
        }
      }
    }
    #expect(
      scratch.temporaries("store").isEmpty, "\(fault): tmp/ holds \(scratch.temporaries("store"))")
    audit.expectIntact(try audit.walk())
    return (stored, failed, groups)
  }

  @Test(
    "syncfs fails in coalesced groups: each file is synced alone, and all are stored",
    .enabled(if: Sys.syncfsReportsErrors, GroupCommitTests.syncfsSilent))
  func syncfsFails() throws {
    let outcome = try expectEachPublishedOrAbsent(fault: "syncfs:5")
    #expect(outcome.groups > 0, "no group formed: the fault hit nothing")
    #expect(outcome.stored == 200 && outcome.failed == 0, "\(outcome)")
  }

  @Test(
    "syncfs and one fsync fail in coalesced groups: the objects it touched are absent and named, the others stored",
    .enabled(if: Sys.syncfsReportsErrors, GroupCommitTests.syncfsSilent))
  func syncfsAndOneFsyncFail() throws {
    for skip in [0, 40, 150] {
      let fault = "syncfs:5,fsync:5:\(skip):1"
      let outcome = try expectEachPublishedOrAbsent(fault: fault)
      #expect(outcome.groups > 0, "\(fault): no group formed")
      #expect(outcome.failed >= 1 && outcome.stored >= 190, "\(fault): \(outcome)")
    }
  }
}
