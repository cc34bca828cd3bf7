import Foundation
import Synchronization
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// What a remover killed after its first step leaves: no row (nor pins and
/// keys, for an `rm`), a removal record naming the file, the file itself.
func cutRemoval(_ digest: BlobDigest, explicit: Bool, in store: Store) throws {
  try store.index().write("test: a removal's first step") { (tx) throws(TroveError) in
    _ = try tx.deleteObjects([digest])
    try tx.insertRemovals(
      [try store.objects.removals.lookUp(digest, explicit: explicit)], now: currentTimeNanoseconds()
    )
  }
}

/// The life of an object — publish, dedup hit, adopt, evict, convert, drop,
/// reconcile — raced against itself: each test is a defect the single owner
/// (``ObjectTable``) removed, and fails on a store without it.
@Suite("Object lifecycle: one owner, no lost objects, no rows without files")
struct LifecycleTests {
  /// The index's rows and the objects folder hold the same digests, and
  /// the totals count exactly them.
  func expectConsistent(_ store: Store, _ comment: Comment? = nil) throws {
    let rows = Set(try store.entries().map(\.digest))
    let files = try digestsOnDisk(store)
    #expect(rows.subtracting(files).isEmpty, "rows without a file \(comment?.rawValue ?? "")")
    #expect(files.subtracting(rows).isEmpty, "files without a row \(comment?.rawValue ?? "")")
    #expect(try store.statistics().entries == Int64(files.count))
  }

  @Test("a put that finds its bytes stored while a sweep evicts them never leaves a row behind")
  func dedupHitRacingEviction() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let pool = (0..<150).map { Bytes.random(2048, seed: UInt64(3000 + $0)) }
    for bytes in pool { _ = try store.put(bytes: bytes) }
    for round in 0..<6 {
      try concurrently([
        { for bytes in pool { _ = try store.put(bytes: bytes) } },
        { for _ in 0..<4 { try store.sweep(SweepOptions(budget: 0)) } },
      ])
      try expectConsistent(store, "round \(round)")
      // Whatever is still indexed is whole.
      for entry in try store.entries() {
        #expect(try store.bytes(for: entry.digest).count == 2048)
      }
    }
  }

  @Test("a get that misses while the same bytes are put never drops the new object's row")
  func missRacingPut() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let bytes = Bytes.random(64 << 10, seed: 4100)
    let digest = try store.put(bytes: bytes).digest
    for round in 0..<150 {
      try store.remove(digest)
      let out = scratch["out-\(round)"]
      try concurrently([
        { _ = try store.put(bytes: bytes) },
        { _ = try? store.bytes(for: digest) },
        { _ = try? store.materialize(digest, at: out) },
      ])
      #expect(try store.entry(for: digest) != nil, "round \(round): the object lost its row")
    }
    try expectConsistent(store)
  }

  @Test("reindex while puts publish never drops their rows")
  func reindexRacingPuts() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let done = Atomic(false)
    try concurrently([
      {
        for i in 0..<300 { _ = try store.put(bytes: Bytes.random(1024, seed: UInt64(6000 + i))) }
        done.store(true, ordering: .releasing)
      },
      {
        while !done.load(ordering: .acquiring) { try store.rebuildIndex() }
      },
    ])
    #expect(try store.entries().count == 300)
    try expectConsistent(store)
    #expect(try store.verify().isClean)
  }

  @Test("listings of one folder from several threads each see every name")
  func concurrentListings() throws {
    let scratch = try Scratch()
    for i in 0..<400 { try scratch.write("f\(i)", [1]) }
    let folder = try FileDescriptor.open(scratch.path, .directory)
    defer { folder.close() }
    let counts = Mutex<[Int]>([])
    try concurrently(
      (0..<4).map { _ in
        {
          for _ in 0..<20 {
            let n = try folder.entries().count
            counts.withLock { $0.append(n) }
          }
        }
      })
    #expect(counts.withLock { $0 }.allSatisfy { $0 == 400 })
  }

  @Test("verify while a sweep evicts: evicted objects are not failures")
  func verifyRacingSweep() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    for i in 0..<300 { _ = try store.put(bytes: Bytes.random(8192, seed: UInt64(7000 + i))) }
    let report = Mutex<VerifyReport?>(nil)
    try concurrently([
      {
        let found = try store.verify()
        report.withLock { $0 = found }
      },
      { try store.sweep(SweepOptions(budget: 0)) },
    ])
    let found = try #require(report.withLock { $0 })
    #expect(found.corrupt.isEmpty && found.orphanFiles == 0 && found.danglingRows == 0)
    #expect(found.checkedObjects + found.vanished <= 300)
    #expect(try store.verify().isClean)
    try expectConsistent(store)
  }

  @Test("an orphan file is adopted by the next read, and by sweeps folder by folder")
  func orphansAreAdopted() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    var digests: [BlobDigest] = []
    for i in 0..<40 {
      digests.append(try store.put(bytes: Bytes.random(1000, seed: UInt64(7500 + i))).digest)
    }
    // A read adopts.
    try dropRow(digests[0], in: store)
    #expect(try store.entry(for: digests[0]) == nil)
    #expect(try store.contains(digests[0]))
    #expect(try store.entry(for: digests[0]) != nil)
    // Sweeps adopt the rest within 256 of them, one folder each; and drop
    // rows whose file went behind the store's back.
    for digest in digests[1..<30] { try dropRow(digest, in: store) }
    for digest in digests[30...] {
      try FileManager.default.removeItem(atPath: store.objectFilePath(digest))
    }
    var adopted = 0
    var dropped = 0
    for _ in 0..<256 {
      let report = try store.sweep()
      #expect(report.reconciled.added + report.reconciled.dropped <= 12)
      adopted += report.reconciled.added
      dropped += report.reconciled.dropped
    }
    #expect(adopted == 29 && dropped == 10)
    try expectConsistent(store)
  }

  @Test("a fan-out folder gone whole: verify counts its rows, a rebuild drops them alone")
  func missingFolderRowsAreDropped() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    var digests: [BlobDigest] = []
    for i in 0..<40 {
      digests.append(try store.put(bytes: Bytes.random(1000, seed: UInt64(7600 + i))).digest)
    }
    let folder = { (digest: BlobDigest) in
      (store.objectFilePath(digest) as NSString).deletingLastPathComponent
    }
    let lost = Set(digests.filter { folder($0) == folder(digests[0]) })
    try FileManager.default.removeItem(atPath: folder(digests[0]))
    #expect(try store.verify().danglingRows == lost.count)
    #expect(try store.rebuildIndex().dropped == lost.count)
    for digest in digests {
      #expect((try store.entry(for: digest) == nil) == lost.contains(digest))
    }
    try expectConsistent(store)
  }

  @Test("a removal cut between its steps: a read keeps the object, a reconcile finishes it")
  func interruptedRemovals() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let kept = try store.put(bytes: Bytes.random(1000, seed: 7550)).digest
    let dropped = try store.put(bytes: Bytes.random(1000, seed: 7551)).digest
    try cutRemoval(kept, explicit: false, in: store)
    try cutRemoval(dropped, explicit: false, in: store)
    // A read wants the object: the removal is called off.
    #expect(try store.bytes(for: kept).count == 1000)
    #expect(try store.entry(for: kept) != nil)
    // A dry run sees nothing wrong; a repairing reconcile of the folder
    // finishes the removal its remover began.
    let folder = Int(UInt8(dropped.hex.prefix(2), radix: 16)!)
    #expect(try store.objects.reconcile(folder: folder, repair: false).isClean)
    #expect(try store.objects.find(dropped) != nil)
    let report = try store.objects.reconcile(folder: folder, repair: true)
    #expect(report.isClean && report.removalsFinished == 1)
    #expect(try store.objects.find(dropped) == nil)
    #expect(try store.verify().isClean)
  }

  @Test(
    "an rm cut between its steps is finished by a read, not undone; a put brings the bytes back")
  func explicitRemovalsStay() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let bytes = Bytes.random(1000, seed: 7560)
    let digest = try store.put(bytes: bytes).digest
    try store.bind(key: "k", to: digest)
    try cutRemoval(digest, explicit: true, in: store)
    // A read that finds the file finishes the removal, and says it is gone.
    #expect(try store.contains(digest) == false)
    #expect(try store.objects.find(digest) == nil)
    #expect(throws: TroveError.self) { try store.pin(digest) }
    #expect(try store.digest(forKey: "k") == nil)
    // Storing the bytes again stores them.
    #expect(try store.put(bytes: bytes).isDuplicate == false)
    #expect(try store.bytes(for: digest) == bytes)
    #expect(try store.verify().isClean)
  }

  @Test("a removal record left by a power loss never takes a file published after it")
  func staleRemovalsTakeOnlyTheirFile() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let bytes = Bytes.random(5000, seed: 7580)
    let digest = try store.put(bytes: bytes).digest
    // An eviction's first step; its second step's unlink reached the disk,
    // its commit did not: the record is back, the file is gone.
    try cutRemoval(digest, explicit: false, in: store)
    try FileManager.default.removeItem(atPath: store.objectFilePath(digest))
    // The same bytes are put again: a new file under the same name.
    #expect(try store.put(bytes: bytes).isDuplicate == false)
    let folder = Int(UInt8(digest.hex.prefix(2), radix: 16)!)
    _ = try store.objects.reconcile(folder: folder, repair: true)
    #expect(try store.bytes(for: digest) == bytes)
    #expect(try store.verify().isClean)
  }

  @Test("a hard link made of an object between a removal's steps does not stop the removal")
  func removalsSurviveHardLinks() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let bytes = Bytes.random(3000, seed: 7585)
    let digest = try store.put(bytes: bytes).digest
    try cutRemoval(digest, explicit: true, in: store)
    // A hardlink get, meanwhile: links the object out (and changes its ctime).
    try FileManager.default.linkItem(
      atPath: store.objectFilePath(digest), toPath: scratch["linked"])
    #expect(try store.contains(digest) == false)
    #expect(try store.objects.find(digest) == nil)
    #expect(try contents(scratch["linked"]) == bytes)
    #expect(try store.verify().isClean)
  }

  @Test("reads racing conversions both ways never miss the object")
  func readsDuringConversions() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let bytes = Array(String(repeating: "a line of text that compresses\n", count: 2200).utf8)
    let digest = try store.put(bytes: bytes).digest
    let done = Atomic(false)
    let misses = Atomic(0)
    let reader: @Sendable () throws -> Void = {
      while !done.load(ordering: .acquiring) {
        if try !store.contains(digest) { misses.add(1, ordering: .relaxed) }
      }
    }
    try concurrently([
      {
        for i in 0..<600 { try store.convert(digest, compressed: i % 2 == 0) }
        done.store(true, ordering: .releasing)
      },
      reader, reader,
    ])
    #expect(misses.load(ordering: .relaxed) == 0)
    #expect(try store.bytes(for: digest) == bytes)
  }

  @Test("a pin of an object whose file went behind the store's back fails and drops its row")
  func pinOfAVanishedFile() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let digest = try store.put(bytes: Bytes.random(1000, seed: 7590)).digest
    try FileManager.default.removeItem(atPath: store.objectFilePath(digest))
    #expect(throws: TroveError.self) { try store.pin(digest, name: "other") }
    #expect(try store.entries().isEmpty)
  }

  @Test("keys and pins a crash left without their object go when it is found gone")
  func referencesOfAVanishedObject() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let digest = try store.put(bytes: Bytes.random(1000, seed: 7570)).digest
    try store.bind(key: "url", to: digest)
    try store.pin(digest, name: "job")
    // A removal killed after it unlinked the file, before its commit.
    try store.index().write("test: half a removal") { (tx) throws(TroveError) in
      try tx.run { db throws(SQLiteConnection.Failure) in
        try db.query("DELETE FROM objects WHERE digest = ?", [.text(digest.hex)])
      }
      try tx.insertRemovals(
        [try store.objects.removals.lookUp(digest, explicit: false)], now: currentTimeNanoseconds())
    }
    try FileManager.default.removeItem(atPath: store.objectFilePath(digest))
    #expect(try store.statistics().keys == 1)
    #expect(try store.digest(forKey: "url") == nil)
    #expect(try store.statistics().keys == 0)
    #expect(try store.pins().isEmpty)
  }

  @Test("an object published before a failing step is indexed: never an orphan")
  func failuresAfterPublishLeaveNoOrphan() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "put", "-"], stdin: [1, 2, 3]).status == 0)
    for skip in 0..<4 {
      let file = try scratch.write("f\(skip)", Bytes.random(5000, seed: UInt64(7600 + skip)))
      let put = try CLI.run(
        ["--store", store, "put", file], environment: ["TROVE_INJECT_FAULT": "fsync:5:\(skip)"])
      if put.status != 0 {
        #expect(put.status == 74 && put.errorLines.count == 1, "\(put.stderr)")
      }
      let verify = try CLI.run(["--store", store, "verify"])
      #expect(verify.status == 0, "fsync \(skip + 1) failed: \(verify.out)")
    }
    let sweep = try CLI.run(["--store", store, "sweep", "--budget", "0"])
    #expect(sweep.status == 0)
    #expect(try CLI.run(["--store", store, "ls"]).out.isEmpty)
    let left = try FileManager.default.subpathsOfDirectory(atPath: scratch["store/objects"])
    #expect(left.allSatisfy { !$0.contains("/") }, "objects left after evicting all: \(left)")
  }

  @Test(
    "settings and leases too large to hold are refused with the range, set or read from config.json"
  )
  func hugeDurations() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let digest = String(
      try CLI.run(["--store", store, "put", "-"], stdin: Bytes.random(100, seed: 7700)).out
        .prefix(39))
    for key in ["access-resolution", "max-age", "tmp-max-age"] {
      let set = try CLI.run(["--store", store, "config", "set", key, "200000000000s"])
      #expect(set.status == 64 && set.stderr.contains("36500d"), "\(key): \(set.stderr)")
    }
    for (key, value) in [("low-water", "1e17"), ("low-water", "0"), ("min-free", "500%")] {
      let set = try CLI.run(["--store", store, "config", "set", key, value])
      #expect(set.status == 64, "\(key) \(value): \(set.stderr)")
    }
    let pin = try CLI.run(["--store", store, "pin", "--for", "200000000000s", digest])
    #expect(pin.status == 64 && pin.stderr.contains("up to 36500d"))
    // Written by hand: refused as config set refuses them, naming the first;
    // reads and pins go on, nothing the policy decides does.
    try scratch.write(
      "store/config.json",
      Array(
        """
        {"format": 1, "policy": {"access-resolution": 9000000000000000000,
         "max-age": 9000000000000000000, "tmp-max-age": -9000000000000000000,
         "budget": 9000000000000000000, "low-water": 1e17, "min-free": "500%",
         "compression-workers": 100000}}
        """.utf8))
    for command in [
      ["has", digest], ["get", digest, "-"], ["pin", "--for", "36500d", digest], ["stats"],
    ] {
      let run = try CLI.run(["--store", store] + command, stdin: [9])
      #expect(run.status == 0, "\(command): \(run.status) \(run.stderr)")
    }
    for command in [["sweep"], ["put", "-"], ["config"], ["sweep", "--budget", "1"]] {
      let run = try CLI.run(["--store", store] + command, stdin: [9])
      #expect(run.status == 78, "\(command): \(run.status) \(run.stderr)")
      #expect(
        run.stderr.hasPrefix("Error: invalid max-age 9000000000000000000 in ")
          && run.stderr.contains(
            "(also invalid: low-water, access-resolution, min-free, tmp-max-age, compression-workers)"
          ), "\(command): \(run.stderr)")
    }
  }

  @Test("a second hardlink get over the same destination leaves no temporary link")
  func hardlinkReplaceLeavesNothing() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let digest = String(
      try CLI.run(["--store", store, "put", "-"], stdin: Bytes.random(100, seed: 7800)).out
        .prefix(39))
    try FileManager.default.createDirectory(
      atPath: scratch["out"], withIntermediateDirectories: false)
    for _ in 0..<3 {
      let get = try CLI.run(
        ["--store", store, "get", "--mode", "hardlink", "--force", digest, scratch["out/x"]])
      #expect(get.status == 0, "\(get.stderr)")
    }
    #expect(scratch.list("out") == ["x"])
  }

  @Test("keys go with their object: evicted or removed, no key is left pointing at nothing")
  func keysGoWithTheirObject() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    for i in 0..<3 {
      let file = try scratch.write("f\(i)", Bytes.random(1000, seed: UInt64(7900 + i)))
      #expect(
        try CLI.run(["--store", store, "put", "--key", "https://e.org/\(i)", file]).status == 0)
    }
    func keys() throws -> Int? {
      let stats =
        try JSONSerialization.jsonObject(
          with: Data(try CLI.run(["--store", store, "stats", "--json"]).stdout)) as? [String: Any]
      return stats?["keys"] as? Int
    }
    #expect(try keys() == 3)
    let digest = try CLI.run(["--store", store, "ls"]).out.split(separator: " ")[0]
    #expect(try CLI.run(["--store", store, "rm", String(digest)]).status == 0)
    #expect(try keys() == 2)
    #expect(try CLI.run(["--store", store, "sweep", "--budget", "0"]).status == 0)
    #expect(try keys() == 0)
    let pin = try CLI.run(["--store", store, "pin", "https://e.org/1"])
    #expect(
      pin.status == 1 && pin.errorLines == ["Error: no key 'https://e.org/1' in store '\(store)'"])
  }

  @Test("a twin left by a crashed conversion, and a wrong row, are found by verify and fixed")
  func twinsAndWrongRows() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    _ = try CLI.run(["--store", store, "config", "set", "compression", "zstd:3"])
    let bytes = Array(String(repeating: "compressible text, ", count: 60_000).utf8)
    let digest = String(
      try CLI.run(["--store", store, "put", "-"], stdin: bytes).out.prefix(39))
    let raw = objectFilePath(scratch["store"], try BlobDigest(parsing: digest))
    try #require(FileManager.default.fileExists(atPath: raw + ".zst"))
    // A crash between publishing the raw form and removing the frame.
    try Data(bytes).write(to: URL(fileURLWithPath: raw))
    chmod(raw, 0o444)
    let found = try CLI.run(["--store", store, "verify", "--json"])
    #expect(found.status == 65)
    let report = try JSONSerialization.jsonObject(with: Data(found.stdout)) as? [String: Any]
    #expect(report?["twins"] as? Int == 1)
    _ = try CLI.run(["--store", store, "config", "set", "compression", "none"])
    #expect(try CLI.run(["--store", store, "recompress"]).status == 0)
    #expect(!FileManager.default.fileExists(atPath: raw + ".zst"))
    let stats =
      try JSONSerialization.jsonObject(
        with: Data(try CLI.run(["--store", store, "stats", "--json"]).stdout)) as? [String: Any]
    #expect(stats?["compressedEntries"] as? Int == 0)
    #expect(stats?["storedBytes"] as? Int == bytes.count)
    #expect(try CLI.run(["--store", store, "verify"]).status == 0)

    // A row that says compressed for a raw file is corrected by a repair.
    let opened = try Store(StoreConfiguration(root: store))
    let parsed = try BlobDigest(parsing: digest)
    try opened.index().write("test: wrong row") { (tx) throws(TroveError) in
      guard var entry = try tx.entry(for: parsed) else { return }
      entry.isCompressed = true
      entry.storedBytes = 10
      try tx.upsert(entry)
    }
    #expect(try opened.verify().wrongRows == 1)
    #expect(try opened.verify(repair: true).wrongRows == 1)
    #expect(try opened.statistics().compressedEntries == 0)
    #expect(try opened.verify().isClean)
  }

  @Test("a recorded read after an entry was chosen saves it, under the default resolution")
  func recheckUnderDefaultResolution() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    #expect(try store.policy().accessResolution == 60)
    let digest = try store.put(bytes: Bytes.random(1000, seed: 8000)).digest
    // Its recorded access is older than the resolution: the read is recorded.
    try age(digest, by: 120, in: store)
    let chosen = try #require(try store.entry(for: digest))
    #expect(try store.contains(digest))
    #expect(try store.objects.evict([chosen], now: currentTimeNanoseconds()).evicted == [false])
    #expect(try store.contains(digest))
  }

  @Test("a lease keeps an object read in place; a hard link out survives its eviction")
  func inUseObjects() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let bytes = Bytes.random(50_000, seed: 8100)
    let leased = try store.put(bytes: bytes).digest
    let linked = try store.put(bytes: Bytes.random(50_000, seed: 8101)).digest
    let path = try store.path(for: leased)
    try store.pin(leased, name: "reader", for: .seconds(600))
    try store.materialize(linked, at: scratch["linked"], mode: .hardlink)
    let report = try store.sweep(SweepOptions(budget: 0))
    #expect(report.evictedEntries == 1)
    #expect(try contents(path) == bytes)
    #expect(try store.contains(linked) == false)
    #expect(try contents(scratch["linked"]) == Bytes.random(50_000, seed: 8101))
  }

  @Test(
    "the index uses WAL locally and a persistent rollback journal on network and FUSE filesystems and small blocks"
  )
  func journalModes() throws {
    for kind in [FilesystemKind.nfs, .cifs, .smb2, .fuse, .plan9, .ceph] {
      #expect(Index.journalMode(on: kind) == "PERSIST", "\(kind)")
    }
    for magic in [0xEF53, 0x5846_5342, 0x0102_1994, 0x9123_683E] {
      #expect(Index.journalMode(on: FilesystemKind(rawValue: magic)) == "WAL")
      // Blocks under 4 KiB: SQLite's mapped shared memory could fault on a full volume.
      #expect(Index.journalMode(on: FilesystemKind(rawValue: magic), blockSize: 1024) == "PERSIST")
    }
    let scratch = try Scratch()
    #expect(try scratch.store().index().journalMode == "wal")
  }

  @Test("a writer used after it failed, was cancelled or committed throws; it never traps")
  func writerMisuseThrows() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let cancelled = try store.makeWriter()
    try cancelled.write([1, 2, 3])
    cancelled.cancel()
    #expect(throws: TroveError.self) { try cancelled.write([4]) }
    #expect(throws: TroveError.self) { try cancelled.commit() }
    let committed = try store.makeWriter()
    try committed.write([5])
    _ = try committed.commit()
    #expect(throws: TroveError.self) { try committed.commit() }
    #expect(scratch.temporaries("store").isEmpty)
  }
}
