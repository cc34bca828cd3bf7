import Foundation
import Synchronization
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// Budgets, expiry, pins and sweeps on the root filesystem, through the library.
@Suite("Eviction: LRU budget, max age, pins, sweeps")
struct EvictionTests {
  func allocated(_ store: Store) throws -> [BlobDigest: Int64] {
    Dictionary(uniqueKeysWithValues: try store.entries().map { ($0.digest, $0.allocatedBytes) })
  }

  @Test("the survivors of a budget sweep are exactly the most recently used that fit")
  func lruOrder() throws {
    let scratch = try Scratch()
    let (store, digests) = try populated(scratch, count: 10)
    // Read in a scrambled order: the last five read are the most recent.
    let order = [3, 7, 0, 9, 5, 1, 8, 2, 6, 4]
    for i in order { _ = try store.contains(digests[i]) }
    let sizes = try allocated(store)
    let keep = order.suffix(4).map { digests[$0] }
    let budget = keep.map { sizes[$0]! }.reduce(0, +)
    try store.updatePolicy { $0.lowWater = 1 }
    let report = try store.sweep(SweepOptions(budget: budget))
    #expect(report.evictedEntries == 6)
    #expect(Set(try store.entries().map(\.digest)) == Set(keep))
    for d in digests { #expect((try store.objects.find(d)?.status != nil) == keep.contains(d)) }
    #expect(report.bytesAfter == budget)
    #expect(try store.statistics().allocatedBytes == budget)
  }

  @Test("a large eviction, unlinked from several threads, removes exactly its entries' files")
  func parallelUnlinks() throws {
    let scratch = try Scratch()
    let (store, digests) = try populated(scratch, count: 300, size: 100)
    for d in digests.suffix(100) { _ = try store.contains(d) }  // the most recent
    let sizes = try allocated(store)
    let budget = digests.suffix(100).map { sizes[$0]! }.reduce(0, +)
    try store.updatePolicy { $0.lowWater = 1 }
    let report = try store.sweep(SweepOptions(budget: budget))
    #expect(report.evictedEntries == 200)
    let kept = Set(digests.suffix(100))
    #expect(Set(try store.entries().map(\.digest)) == kept)
    let onDisk = Set(
      scratch.list("store/objects").flatMap { fanout in
        scratch.list("store/objects/" + fanout).map { Substring($0) }
      }.compactMap { BlobDigest(hex: $0) })
    #expect(onDisk == kept)
  }

  @Test(
    "evicting every entry, folder by folder from several threads, leaves the index and the folders agreeing (root fs and XFS)"
  )
  func evictAll() throws {
    var roots = [try Scratch()]
    if let xfs = TestFilesystems.xfs { roots.append(try Scratch(under: xfs)) }
    for scratch in roots {
      let store = try scratch.store()
      try FileManager.default.createDirectory(
        atPath: scratch["in"], withIntermediateDirectories: true)
      // Enough for several objects in most of the 256 fan-out folders (the
      // parts of a large removal: RemovalPartsTests).
      let results = try store.put(
        files: try (0..<1_500).map {
          try scratch.write("in/\($0)", Bytes.random(64, seed: UInt64($0)))
        })
      let digests = try results.map { try $0.get().digest }
      _ = try store.pin(digests[7], name: "keep")
      let report = try store.sweep(SweepOptions(budget: 0))
      #expect(report.evictedEntries == 1_499, "\(scratch.path)")
      #expect(try store.entries().map(\.digest) == [digests[7]], "\(scratch.path)")
      let onDisk = scratch.list("store/objects").flatMap { fanout in
        scratch.list("store/objects/" + fanout)
      }
      #expect(onDisk == [digests[7].hex], "\(scratch.path)")
      #expect(try store.verify().isClean, "\(scratch.path)")
    }
  }

  @Test(
    "on XFS, puts spread a store's objects over allocation groups, and a removal unlinks each group's files from one thread",
    .enabled(if: TestFilesystems.xfs != nil, TestFilesystems.xfsMissing))
  func allocationGroups() throws {
    let xfs = try #require(TestFilesystems.xfs)
    let scratch = try Scratch(under: xfs)
    let store = try scratch.store()
    // What the kernel says of the filesystem, against what xfs_db reads
    // from its superblock (the image the test setup mounted).
    let geometry = try #require(store.objects.allocationGroups)
    let db = Process()
    db.executableURL = URL(fileURLWithPath: "/usr/sbin/xfs_db")
    db.arguments = ["-r", "-c", "sb 0", "-c", "p agblklog inopblog agcount", xfs + ".img"]
    let pipe = Pipe()
    db.standardOutput = pipe
    try db.run()
    let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    db.waitUntilExit()
    var superblock: [String: Int] = [:]
    for line in text.split(separator: "\n") {
      let parts = line.split(separator: "=").map { $0.trimmingCharacters(in: .whitespaces) }
      if parts.count == 2, let value = Int(parts[1]) { superblock[parts[0]] = value }
    }
    #expect(geometry.inodeBits == (superblock["agblklog"] ?? -1) + (superblock["inopblog"] ?? -1))
    #expect(geometry.count == superblock["agcount"])

    try FileManager.default.createDirectory(
      atPath: scratch["in"], withIntermediateDirectories: true)
    let digests = try store.put(
      files: try (0..<200).map {
        try scratch.write("in/\($0)", Bytes.random(100, seed: UInt64($0)))
      }
    ).map { try $0.get().digest }
    let records = try store.objects.removals.lookUp(digests, explicit: true)
    let groupOf = records.map { $0.raw!.inode >> UInt64(geometry.inodeBits) }
    let groups = Set(groupOf)
    // Eight staging folders, each in the group XFS chose for it in turn.
    if geometry.count >= 2 { #expect(groups.count >= 2, "objects' groups: \(groups)") }
    let cores = ProcessInfo.processInfo.activeProcessorCount
    let lanes = store.objects.removals.unlinkLanes(records, Array(digests.indices))
    if min(groups.count, cores) < 2 {
      #expect(lanes == nil)
    } else {
      let lanes = try #require(lanes)
      #expect(lanes.count == min(groups.count, cores, 8))
      #expect(lanes.joined().sorted() == Array(digests.indices))
      // A group's files all go from one thread.
      for group in groups {
        let holding = lanes.filter { $0.contains { groupOf[$0] == group } }
        #expect(holding.count == 1, "group \(group) is in \(holding.count) lanes")
      }
    }
    let (present, failures) = try store.objects.drop(digests)
    #expect(present.allSatisfy { $0 } && failures.isEmpty)
    #expect(scratch.list("store/objects").flatMap { scratch.list("store/objects/" + $0) } == [])
    #expect(try store.verify().isClean)
  }

  @Test("parallel work visits every index once and reports the first failure")
  func parallelForEach() throws {
    struct Odd: Error { let index: Int }
    let seen = Mutex<[Int]>([])
    #expect {
      try Parallel.forEach(1000, width: 8) { (i) throws(Odd) in
        seen.withLock { $0.append(i) }
        if i % 2 == 1 { throw Odd(index: i) }
      }
    } throws: { $0 is Odd }
    #expect(seen.withLock { $0.sorted() } == Array(0..<1000))
  }

  @Test("a sweep stops at the low-water mark, not at the budget")
  func lowWater() throws {
    let scratch = try Scratch()
    let (store, _) = try populated(scratch, count: 20)
    let total = try store.statistics().allocatedBytes
    let budget = total * 3 / 4
    try store.updatePolicy {
      $0.budget = budget
      $0.lowWater = 0.5
    }
    let report = try store.sweep()
    let after = try store.statistics().allocatedBytes
    #expect(after <= budget / 2)
    #expect(after > budget / 2 - 12_288)  // it stopped as soon as it got there
    #expect(report.bytesAfter == after)
    // Under the budget now: the next sweep has nothing to do.
    #expect(try store.sweep().removedEntries == 0)
  }

  @Test("pinned entries survive any budget; names are independent; leases lapse")
  func pins() throws {
    let scratch = try Scratch()
    let (store, digests) = try populated(scratch, count: 6)
    try store.pin(digests[0])
    try store.pin(digests[1], name: "ci-job", for: .seconds(3600))
    try store.pin(digests[2], name: "bench", for: .seconds(0))  // lapsed already
    try store.pin(digests[3], name: "a")
    try store.pin(digests[3], name: "b")
    #expect(try store.unpin(digests[3], name: "a"))
    #expect(try store.unpin(digests[3], name: "a") == false)
    let stats = try store.statistics()
    #expect(stats.pinnedEntries == 3)
    try store.sweep(SweepOptions(budget: 0))
    #expect(Set(try store.entries().map(\.digest)) == Set([digests[0], digests[1], digests[3]]))
    // The lapsed lease was cleared by the sweep.
    #expect(try store.pins().map(\.name).sorted() == ["b", "ci-job", "default"])
    #expect(throws: TroveError.self) { try store.pin(XXH3Hasher.digest([1, 2])) }
  }

  @Test("entries unused for longer than the maximum age are removed; recently read ones stay")
  func maxAge() throws {
    let scratch = try Scratch()
    let (store, digests) = try populated(scratch, count: 4)
    Thread.sleep(forTimeInterval: 1.2)
    _ = try store.contains(digests[1])
    try store.materialize(digests[2], at: scratch["out"])
    let report = try store.sweep(SweepOptions(maxAge: .seconds(1)))
    #expect(report.expiredEntries == 2)
    #expect(Set(try store.entries().map(\.digest)) == Set([digests[1], digests[2]]))
  }

  @Test("reads are recorded coarsely: within the resolution they write nothing")
  func accessResolution() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let digest = try store.put(bytes: Bytes.random(1000, seed: 1)).digest
    let first = try #require(try store.entry(for: digest)).lastAccess
    _ = try store.contains(digest)  // default resolution 60 s: not recorded
    #expect(try store.entry(for: digest)?.lastAccess == first)
    try store.updatePolicy { $0.accessResolution = 0 }
    _ = try store.contains(digest)
    #expect(try #require(try store.entry(for: digest)).lastAccess > first)
  }

  @Test("a dry run reports the plan of a real sweep and removes nothing")
  func dryRun() throws {
    let scratch = try Scratch()
    let (store, _) = try populated(scratch, count: 12)
    let before = try store.entries()
    let budget = try store.statistics().allocatedBytes / 2
    let plan = try store.sweep(SweepOptions(budget: budget, dryRun: true))
    #expect(plan.dryRun && plan.evictedEntries > 0)
    #expect(try store.entries() == before)
    #expect(try store.statistics().lastSweep == nil)
    let real = try store.sweep(SweepOptions(budget: budget))
    #expect(real.evictedEntries == plan.evictedEntries)
    #expect(real.removedBytes == plan.removedBytes)
    #expect(try store.statistics().lastSweep?.removedEntries == Int64(real.removedEntries))
  }

  @Test("a put that takes the store over budget sweeps, and keeps what it just stored")
  func autoSweep() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    try store.updatePolicy {
      $0.budget = 50_000
      $0.lowWater = 0.8
    }
    var last: BlobDigest?
    for i in 0..<12 {
      last = try store.put(bytes: Bytes.random(10_000, seed: UInt64(i))).digest
      #expect(try store.statistics().allocatedBytes <= 50_000)
    }
    #expect(try store.contains(last!))
    #expect(try store.statistics().lastSweep != nil)
  }

  @Test("an entry read after it was chosen is not evicted")
  func recheck() throws {
    let scratch = try Scratch()
    let (store, digests) = try populated(scratch, count: 2)
    let chosen = try #require(try store.entry(for: digests[0]))
    _ = try store.contains(digests[0])  // read after being chosen
    #expect(try store.objects.evict([chosen], now: currentTimeNanoseconds()).evicted == [false])
    #expect(try store.contains(digests[0]))
    try store.pin(digests[1])
    let pinned = try #require(try store.entry(for: digests[1]))
    #expect(try store.objects.evict([pinned], now: currentTimeNanoseconds()).evicted == [false])
  }

  @Test("a reader that opened an object before it was evicted reads correct bytes")
  func readerDuringEviction() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let data = Bytes.random(3_000_000, seed: 9)
    let digest = try store.put(bytes: data).digest
    let handle = try #require(FileHandle(forReadingAtPath: try store.path(for: digest)))
    let head = try handle.read(upToCount: 1000) ?? Data()
    try store.sweep(SweepOptions(budget: 0))
    #expect(try store.contains(digest) == false)
    let rest = try handle.readToEnd() ?? Data()
    try handle.close()
    #expect(Array(head + rest) == data)
  }

  @Test("one sweep at a time: a second fails with .busy naming the holder, or waits")
  func sweepLock() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let fd = open(scratch["store/sweep.lock"], O_RDWR | O_CREAT, 0o644)
    defer { close(fd) }
    #expect(flock(fd, LOCK_EX) == 0)
    _ = "4242\n".withCString { write(fd, $0, 5) }
    #expect {
      try store.sweep(SweepOptions(wait: false))
    } throws: { error in
      (error as? TroveError)?.code == .busy && "\(error)".contains("already running (process 4242)")
    }
    flock(fd, LOCK_UN)
    #expect(try store.sweep(SweepOptions(wait: false)).removedEntries == 0)
  }

  @Test(
    "a sweep removes dead writers' leftovers in tmp/ and its staging folders, keeps fresh ones and the folders"
  )
  func leftovers() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    // A put makes the staging folder it writes in, and leaves it empty.
    try store.put(bytes: [1, 2, 3])
    let folder = try #require(
      StoreLayout.stagingFolders.first {
        FileManager.default.fileExists(atPath: scratch["store/tmp/" + $0])
      })
    #expect(scratch.temporaries("store").isEmpty)
    try scratch.write("store/tmp/put-1-dead.tmp", [UInt8](repeating: 1, count: 5000))
    try scratch.write("store/tmp/put-2-alive.tmp", [2])
    try scratch.write("store/tmp/\(folder)/put-3-dead.tmp", [UInt8](repeating: 3, count: 5000))
    try scratch.write("store/tmp/\(folder)/put-4-alive.tmp", [4])
    // The folder itself is old too: only what is in it is aged.
    for name in ["put-1-dead.tmp", "\(folder)/put-3-dead.tmp", folder] {
      var old = [
        timespec(tv_sec: time(nil) - 7200, tv_nsec: 0),
        timespec(tv_sec: time(nil) - 7200, tv_nsec: 0),
      ]
      #expect(utimensat(AT_FDCWD, scratch["store/tmp/" + name], &old, 0) == 0)
    }
    let plan = try store.sweep(SweepOptions(dryRun: true))
    #expect(plan.temporaryFiles == 2)
    #expect(scratch.temporaries("store").count == 4)
    let report = try store.sweep()
    #expect(report.temporaryFiles == 2 && report.temporaryBytes >= 10000)
    #expect(scratch.temporaries("store") == ["\(folder)/put-4-alive.tmp", "put-2-alive.tmp"])
    #expect(scratch.list("store/tmp").contains(folder))
  }

  @Test(
    "a file or a link under a staging folder's name is passed over: puts write in tmp/ itself, and the sweep removes it once old"
  )
  func stagingNameTaken() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    try FileManager.default.createDirectory(
      atPath: scratch["store/tmp"], withIntermediateDirectories: true)
    try FileManager.default.createDirectory(
      atPath: scratch["elsewhere"], withIntermediateDirectories: true)
    for (i, name) in StoreLayout.stagingFolders.enumerated() {
      let path = scratch["store/tmp/" + name]
      if i % 2 == 0 {
        try scratch.write("store/tmp/" + name, [UInt8(i)])
      } else {
        #expect(symlink(scratch["elsewhere"], path) == 0)
      }
      var old = [
        timespec(tv_sec: time(nil) - 7200, tv_nsec: 0),
        timespec(tv_sec: time(nil) - 7200, tv_nsec: 0),
      ]
      #expect(utimensat(AT_FDCWD, path, &old, AT_SYMLINK_NOFOLLOW) == 0)
    }
    var digests: [BlobDigest] = []
    for i in 0..<16 {
      digests.append(try store.put(bytes: Bytes.random(700, seed: UInt64(i))).digest)
    }
    for digest in digests { #expect(try store.contains(digest)) }
    // Nothing went through the links, and nothing was left.
    #expect(scratch.list("elsewhere").isEmpty)
    #expect(scratch.temporaries("store") == StoreLayout.stagingFolders.sorted())
    let report = try store.sweep()
    #expect(report.temporaryFiles == StoreLayout.stagingFolders.count)
    #expect(scratch.temporaries("store").isEmpty)
    #expect(try store.verify().isClean)
  }

  @Test("settings persist in config.json for every process; bad values are refused")
  func policyPersists() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    try store.updatePolicy {
      $0.budget = 10_000_000_000
      $0.maxAge = 30 * 86400
    }
    let other = try scratch.store()
    #expect(try other.policy().budget == 10_000_000_000)
    #expect(try other.policy().maxAge == 30 * 86400)
    var policy = CachePolicy.default
    for (key, text) in [
      (CachePolicy.Key.budget, "12X"), (.maxAge, "30"), (.lowWater, "1.5"), (.minimumFree, "120%"),
    ] {
      #expect {
        try key.set(text, in: &policy)
      } throws: { error in
        (error as? TroveError)?.code == .invalidArgument && "\(error)".contains("'\(text)'")
          && "\(error)".contains("expected")
      }
    }
    #expect(CachePolicy.Quantities.parseSize("1.5GiB") == 1_610_612_736)
    #expect(CachePolicy.Quantities.parseSize("500M") == 500_000_000)
    #expect(CachePolicy.Quantities.parseSize("0") == 0)
    #expect(CachePolicy.Quantities.parseDuration("12h") == 43200)
  }
}
