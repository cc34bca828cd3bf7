import Foundation
import Synchronization
import Testing

@testable import Trove

/// Puts of many files in one group commit (`Store.put(files:)`, `trove put
/// A B C …`): per-object results, dedup inside the batch and against the
/// store, limits, and failing syncs that leave each object published and
/// indexed or absent, never in between.
@Suite("Group commit: puts of many files", .serialized)
struct GroupCommitTests {
  /// Why the syncfs fault tests are skipped: before Linux 5.8 syncfs(2)
  /// returns 0 whatever write-back lost, so there is no failure to inject
  /// that the store would see.
  static let syncfsSilent = Comment(
    "syncfs(2) reports no write-back errors before Linux 5.8; the store fsyncs each file instead")

  /// `count` distinct files of 4–20 KiB in `scratch`, with their bytes.
  func files(_ scratch: Scratch, _ count: Int, seed: UInt64 = 1) throws -> [(String, [UInt8])] {
    try (0..<count).map { i in
      let bytes = Bytes.random(4096 + (i * 997) % 16_384, seed: seed &* 1000 &+ UInt64(i))
      return (try scratch.write("in-\(seed)-\(i)", bytes), bytes)
    }
  }

  @Test("put(files:): one result per input, duplicates inside and already stored, errors alone")
  func libraryBatch() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let inputs = try files(scratch, 30)
    // One already stored before the batch.
    let before = try store.put(file: inputs[3].0)
    #expect(!before.isDuplicate)
    let copy = try scratch.write("copy-of-7", inputs[7].1)
    try FileManager.default.createDirectory(
      atPath: scratch["a-folder"], withIntermediateDirectories: false)
    let paths =
      inputs.map(\.0) + [copy, scratch["missing"], scratch["a-folder"], inputs[12].0]
    var heard: [Int] = []
    let read = Mutex<[Int: Int64]>([:])
    let results = try store.put(
      files: paths,
      onProgress: { index, report in read.withLock { $0[index] = report.completed } },
      onResult: { index, _ in heard.append(index) })
    // Each input read is heard of, to its last byte (the missing one and
    // the folder are not read).
    let lengths = read.withLock { $0 }
    for (i, (_, bytes)) in inputs.enumerated() {
      #expect(lengths[i] == Int64(bytes.count), "input \(i): \(String(describing: lengths[i]))")
    }
    #expect(results.count == paths.count)
    #expect(heard == Array(paths.indices), "results are heard once each, in input order")
    for (i, (path, bytes)) in inputs.enumerated() {
      let result = try results[i].get()
      #expect(result.digest == XXH3Hasher.digest(bytes), "\(path)")
      #expect(result.size == Int64(bytes.count))
      #expect(result.isDuplicate == (i == 3), "input \(i) duplicate: \(result.isDuplicate)")
      #expect(try store.bytes(for: result.digest) == bytes)
    }
    // The same bytes twice in the batch: stored once, then a dedup hit.
    #expect(
      try results[30].get().isDuplicate && results[30].get().digest == results[7].get().digest)
    #expect(
      try results[33].get().isDuplicate && results[33].get().digest == results[12].get().digest)
    #expect(throws: TroveError.self) { try results[31].get() }
    if case .failure(let error) = results[31] { #expect(error.code == .sourceMissing) }
    if case .failure(let error) = results[32] { #expect(error.code == .sourceNotFile) }
    #expect(try store.entries().count == 30)
    #expect(scratch.temporaries("store").isEmpty)
    let audit = try StoreAudit(store: scratch["store"], context: "libraryBatch", io: scratch["io"])
    audit.expectIntact(try audit.walk())
    try audit.expectVerifyClean(allowingRepair: false)
    #expect(try audit.indexRows() == Set(inputs.map { XXH3Hasher.digest($0.1) }))
  }

  @Test("a batch larger than a group: every group committed, all stored")
  func severalGroups() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let count = Store.groupCommitObjects + 40
    let paths = try (0..<count).map { i in
      try scratch.write("f\(i)", Bytes.random(64 + i, seed: UInt64(5000 + i)))
    }
    let results = try store.put(files: paths)
    #expect(results.allSatisfy { (try? $0.get().isDuplicate) == false })
    #expect(try store.entries().count == count)
    #expect(scratch.temporaries("store").isEmpty)
  }

  @Test("max-object-size in a batch: the inputs over it fail alone, the others are stored")
  func batchOverMaximumSize() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    try store.updatePolicy { $0.maximumObjectSize = 10_000 }
    let inputs = try files(scratch, 12, seed: 2)
    let results = try store.put(files: inputs.map(\.0))
    for (i, (path, bytes)) in inputs.enumerated() {
      if bytes.count > 10_000 {
        #expect(throws: TroveError.self) { try results[i].get() }
        if case .failure(let error) = results[i] {
          #expect(error.code == .tooLarge && "\(error)".contains(path))
        }
      } else {
        #expect(try results[i].get().digest == XXH3Hasher.digest(bytes))
      }
    }
    let small = inputs.filter { $0.1.count <= 10_000 }
    #expect(!small.isEmpty && small.count < inputs.count)
    #expect(try store.entries().count == small.count)
    #expect(scratch.temporaries("store").isEmpty)
  }

  @Test("a batch over the budget: one sweep after the group, which keeps the batch's objects")
  func batchOverBudget() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let old = try files(scratch, 10, seed: 3)
    for (path, _) in old { _ = try store.put(file: path) }
    let oldBytes = try store.statistics().allocatedBytes
    try store.updatePolicy {
      $0.budget = oldBytes + 40_000
      $0.lowWater = 0.5
    }
    let inputs = try files(scratch, 6, seed: 4)
    let results = try store.put(files: inputs.map(\.0)).map { try $0.get() }
    let sweeps = results.flatMap(\.sweeps)
    #expect(sweeps.count == 1, "one sweep for the group: \(sweeps)")
    #expect(results.last?.sweeps.count == 1)
    for (path, bytes) in inputs {
      #expect(try store.bytes(for: XXH3Hasher.digest(bytes)) == bytes, "\(path) was evicted")
    }
    #expect(try store.statistics().allocatedBytes <= oldBytes + 40_000)
  }

  /// Runs `trove put` of `inputs` with `fault` injected, and checks each
  /// input: a digest line and its object in place (bytes right, indexed),
  /// or an error line naming it and nothing of it stored.
  func expectEachPublishedOrAbsent(
    _ scratch: Scratch, _ inputs: [(String, [UInt8])], fault: String
  ) throws -> (stored: Int, failed: Int) {
    let store = scratch["store"]
    // The store made first, so the fault hits the put.
    _ = try scratch.store()
    let put = try CLI.run(
      ["--store", store, "put"] + inputs.map(\.0), environment: ["TROVE_INJECT_FAULT": fault])
    let printed = Dictionary(
      put.out.split(separator: "\n").map { line in
        let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
        return (String(parts.last ?? ""), String(parts.first ?? ""))
      }, uniquingKeysWith: { a, _ in a })
    let audit = try StoreAudit(store: store, context: "fault \(fault)", io: scratch["io"])
    let rows = try audit.indexRows()
    var stored = 0
    var failed = 0
    for (path, bytes) in inputs {
      let digest = XXH3Hasher.digest(bytes)
      if let said = printed[path] {
        stored += 1
        #expect(said == digest.description, "\(fault): \(path) printed \(said)")
        #expect(
          audit.isStored(digest) && rows.contains(digest),
          "\(fault): \(path) acknowledged, not stored")
        #expect(try Store(StoreConfiguration(root: store)).bytes(for: digest) == bytes)
      } else {
        failed += 1
        #expect(
          put.errorLines.contains { $0.hasPrefix("Error: ") && $0.contains("'\(path)'") },
          "\(fault): no line for \(path): \(put.stderr)")
        #expect(!audit.isStored(digest) && !rows.contains(digest), "\(fault): \(path) half stored")
      }
    }
    #expect(put.status == (failed == 0 ? 0 : 74), "\(fault): exit \(put.status): \(put.stderr)")
    #expect(put.errorLines.count == failed, "\(fault): \(put.stderr)")
    #expect(
      scratch.temporaries("store").isEmpty, "\(fault): tmp/ holds \(scratch.temporaries("store"))")
    audit.expectIntact(try audit.walk())
    return (stored, failed)
  }

  @Test(
    "syncfs fails in a batch: each file is synced alone, and all are stored",
    .enabled(if: Sys.syncfsReportsErrors, Self.syncfsSilent))
  func syncfsFails() throws {
    let scratch = try Scratch()
    let inputs = try files(scratch, 20, seed: 6)
    let outcome = try expectEachPublishedOrAbsent(scratch, inputs, fault: "syncfs:5")
    #expect(outcome.stored == 20 && outcome.failed == 0)
  }

  @Test(
    "a syncfs that lost a write vouches for no later group: they sync each file and folder, whose failures are their own",
    .enabled(if: Sys.syncfsReportsErrors, Self.syncfsSilent))
  func syncfsFailureIsNotForgotten() throws {
    let scratch = try Scratch()
    // Three groups. The first group's data syncfs fails (a lost write is
    // reported once per open file description: it may have been another
    // group's), so its files are fsynced alone (512), then objects/ and
    // each folder its renames touched. The 701st fsync fails: a folder of
    // the first group, whose objects fail. Were the later syncfs calls
    // believed, no 701st fsync would ever happen and nothing would fail.
    let inputs = try files(scratch, 1_100, seed: 8)
    let outcome = try expectEachPublishedOrAbsent(
      scratch, inputs, fault: "syncfs:5:0:1,fsync:5:700:1")
    #expect(outcome.failed >= 1 && outcome.failed <= 20, "\(outcome)")
    #expect(outcome.stored + outcome.failed == 1_100)
  }

  @Test("a rename in a group finds no room (ENOSPC): that object is tried alone after, and stored")
  func renameFindsNoRoom() throws {
    let scratch = try Scratch()
    let inputs = try files(scratch, 20, seed: 11)
    // The fourth rename (inside the group's transaction) fails; the same
    // object's rename alone, after the group, finds room.
    let outcome = try expectEachPublishedOrAbsent(scratch, inputs, fault: "renameat2:28:3:1")
    #expect(outcome.stored == 20 && outcome.failed == 0, "\(outcome)")
  }

  @Test(
    "syncfs and one file's fsync fail: that object is absent and named, the others stored",
    .enabled(if: Sys.syncfsReportsErrors, Self.syncfsSilent))
  func syncfsAndOneFsyncFail() throws {
    for skip in [0, 7, 19] {
      let scratch = try Scratch()
      let inputs = try files(scratch, 20, seed: 7 + UInt64(skip))
      let outcome = try expectEachPublishedOrAbsent(
        scratch, inputs, fault: "syncfs:5,fsync:5:\(skip):1")
      #expect(outcome.failed == 1 && outcome.stored == 19, "skip \(skip): \(outcome)")
    }
  }

  @Test(
    "an fsync of a folder fails (objects/ for the new fan-out folders, or a fan-out folder after the renames): its objects published and indexed, or absent",
    .enabled(if: Sys.syncfsReportsErrors, Self.syncfsSilent))
  func folderSyncFails() throws {
    // With syncfs failing, the 40 files are synced one by one, then
    // `objects/` once for the new folders, then each fan-out folder the
    // renames touched.
    let objectsSync = "syncfs:5,fsync:5:40:1"
    for fault in [
      objectsSync, "syncfs:5,fsync:5:41:1", "syncfs:5,fsync:5:50:1", "syncfs:5,fsync:5:45",
    ] {
      let scratch = try Scratch()
      let inputs = try files(scratch, 40, seed: 40 + UInt64(fault.count))
      let outcome = try expectEachPublishedOrAbsent(scratch, inputs, fault: fault)
      #expect(outcome.failed >= 1, "\(fault): the fault hit nothing: \(outcome)")
      if fault == objectsSync {
        // Every folder is new in a new store: none is known durable.
        #expect(outcome.stored == 0, "\(fault): \(outcome)")
      } else if fault.hasSuffix(":1") {
        #expect(outcome.stored >= 30, "\(fault): one failed sync took \(outcome)")
      }
    }
  }

  @Test(
    "new fan-out folders are made durable by the group's data syncfs: no fsync at all",
    .enabled(if: Sys.syncfsReportsErrors, Self.syncfsSilent))
  func newFoldersDurableBySyncfs() throws {
    let scratch = try Scratch()
    let inputs = try files(scratch, 40, seed: 60)
    // Every fsync would fail: a put that made one would lose an object.
    let outcome = try expectEachPublishedOrAbsent(scratch, inputs, fault: "fsync:5")
    #expect(outcome.stored == 40 && outcome.failed == 0, "\(outcome)")
  }

  @Test(
    "a settings change by another process during a long put: every group begun after it follows it"
  )
  func settingsChangeBetweenGroups() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let group = Store.groupCommitObjects
    let count = 2 * group + 20
    let paths = try (0..<count).map { i in
      try scratch.write("g\(i)", Bytes.random(5000, seed: UInt64(7000 + i)))
    }
    // Another store object on the same root stands for another process:
    // it lowers max-object-size under the 5,000-byte inputs as soon as the
    // first group is acknowledged. The second group may be staged by then
    // (it is, when commits overlap staging); the third begins after.
    let other = try Store(StoreConfiguration(root: scratch["store"]))
    var changed = false
    let results = try store.put(
      files: paths,
      onResult: { index, _ in
        guard index == group - 1 else { return }
        _ = try? other.updatePolicy { $0.maximumObjectSize = 4096 }
        changed = true
      })
    #expect(changed)
    var second = 0
    for (i, result) in results.enumerated() {
      if i < group {
        #expect((try? result.get().isDuplicate) == false, "input \(i) of the first group")
      } else if i >= 2 * group {
        if case .failure(let error) = result {
          #expect(error.code == .tooLarge, "input \(i): \(error)")
        } else {
          Issue.record("input \(i) of the third group was stored over the new max-object-size")
        }
      } else if (try? result.get()) != nil {
        second += 1
      }
    }
    #expect(try store.entries().count == group + second)
    #expect(scratch.temporaries("store").isEmpty)
  }

  @Test(
    "an object's name taken by a folder in a group: that object is settled alone, the odd thing set aside"
  )
  func nameTakenInGroup() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let inputs = try files(scratch, 6, seed: 70)
    let digest = XXH3Hasher.digest(inputs[2].1)
    let folder = scratch["store/objects/" + StoreLayout.fanout(digest)]
    try FileManager.default.createDirectory(
      atPath: folder + "/" + StoreLayout.objectName(digest), withIntermediateDirectories: true)
    let results = try store.put(files: inputs.map(\.0))
    for (i, (_, bytes)) in inputs.enumerated() {
      #expect(try results[i].get().digest == XXH3Hasher.digest(bytes), "input \(i)")
      #expect(try store.bytes(for: XXH3Hasher.digest(bytes)) == bytes)
    }
    #expect(try store.entries().count == 6)
    #expect(scratch.list("store/quarantine").count == 1)
    #expect(scratch.temporaries("store").isEmpty)
  }

  @Test("temp names: one prefix per process, a count after it, never the same name twice")
  func temporaryNames() {
    let names = (0..<2000).map { _ in StoreLayout.temporaryName("put") }
    #expect(Set(names).count == names.count)
    let prefixes = Set(names.map { $0.split(separator: "-").prefix(3).joined(separator: "-") })
    #expect(prefixes.count == 1 && prefixes.first?.hasPrefix("put-\(getpid())-") == true)
    #expect(names.allSatisfy { $0.hasSuffix(".tmp") })
  }

  @Test("a fan-out folder's sync after the renames fails: its new objects are taken back and named")
  func fanoutSyncFails() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let first = try files(scratch, 30, seed: 50)
    _ = try store.put(files: first.map(\.0))
    // New bytes whose fan-out folders exist: the only fsyncs of the next
    // put are those of the folders, once each, after the renames (when the
    // syncfs that would stand for them fails).
    let folders = Set(first.map { StoreLayout.fanout(XXH3Hasher.digest($0.1)) })
    var inputs: [(String, [UInt8])] = []
    var seed: UInt64 = 9000
    while inputs.count < 12 {
      seed += 1
      let bytes = Bytes.random(4096, seed: seed)
      guard folders.contains(StoreLayout.fanout(XXH3Hasher.digest(bytes))) else { continue }
      inputs.append((try scratch.write("later-\(seed)", bytes), bytes))
    }
    let touched = Set(inputs.map { StoreLayout.fanout(XXH3Hasher.digest($0.1)) })
    // The second syncfs (the names') fails, so each folder is synced
    // alone, and the first of those fails.
    let outcome = try expectEachPublishedOrAbsent(
      scratch, inputs, fault: "syncfs:5:1:1,fsync:5:0:1")
    #expect(outcome.failed >= 1 && outcome.stored >= 1, "\(outcome)")
    #expect(touched.count > 1)
  }

  @Test("a rename inside the group's transaction fails: that input fails alone, named")
  func renameFails() throws {
    let scratch = try Scratch()
    let inputs = try files(scratch, 10, seed: 9)
    let outcome = try expectEachPublishedOrAbsent(scratch, inputs, fault: "renameat2:5:4:1")
    #expect(outcome.failed == 1 && outcome.stored == 9, "\(outcome)")
    // From the fifth rename on, every one fails: the first four are stored.
    let again = try Scratch()
    let more = try files(again, 10, seed: 19)
    let failing = try expectEachPublishedOrAbsent(again, more, fault: "renameat2:5:4")
    #expect(failing.failed == 6 && failing.stored == 4, "\(failing)")
  }

  @Test("trove put of many files: a line per input, duplicates and stored bytes as for single puts")
  func cliBatch() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let inputs = try files(scratch, 25, seed: 10)
    let first = try CLI.run(["--store", store, "put", inputs[0].0])
    #expect(first.status == 0)
    let copy = try scratch.write("copy", inputs[5].1)
    let paths = inputs.map(\.0) + [copy, scratch["nope"]]
    let put = try CLI.run(["--store", store, "put", "--json"] + paths)
    #expect(put.status == 66, "the first failure's status: \(put.stderr)")
    let records = try #require(
      try JSONSerialization.jsonObject(with: Data(put.stdout)) as? [[String: Any]])
    #expect(records.map { $0["name"] as? String } == paths)
    for (i, (_, bytes)) in inputs.enumerated() {
      #expect(records[i]["digest"] as? String == XXH3Hasher.digest(bytes).description)
      #expect(records[i]["duplicate"] as? Bool == (i == 0))
    }
    #expect(records[25]["duplicate"] as? Bool == true)
    #expect((records[26]["error"] as? String)?.contains("nope") == true)
    let ls = try CLI.run(["--store", store, "ls"])
    #expect(ls.out.split(separator: "\n").count == 25)
  }
}
