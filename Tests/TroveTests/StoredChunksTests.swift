import Foundation
import Testing

@testable import Trove

/// Chunk manifests kept with large objects, and the blocks versions share
/// through them: recorded in the put's pass, cut again from the bytes when
/// missing, never believed over the bytes, and shared by the kernel only
/// where the bytes are equal.
@Suite("stored chunk manifests and blocks shared between versions")
struct StoredChunksTests {
  static let old = Bytes.random(12 << 20, seed: 3501)
  /// `old` with three tensors' worth rewritten in place.
  static let new = BlockSharingTests.edited(
    old, at: [1_000_000, 5_000_000, 10_000_000], count: 300, seed: 3502)

  static func recorded(_ digest: BlobDigest, size: Int, in store: Store) throws -> ChunkManifest? {
    try store.index().read("test: the recorded manifest") { (tx) throws(TroveError) in
      try tx.manifest(of: digest, size: Int64(size))
    }
  }

  static func manifest(_ bytes: [UInt8]) -> ChunkManifest {
    ChunkManifest(size: Int64(bytes.count), chunks: ChunkingTests.chunks(bytes))
  }

  @Test("a large put records the chunks of its bytes with the object; a small one records none")
  func putRecordsTheManifest() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let big = try store.put(bytes: Self.old)
    #expect(
      try Self.recorded(big.digest, size: Self.old.count, in: store) == Self.manifest(Self.old))
    #expect(try store.chunkManifest(of: big.digest) == Self.manifest(Self.old))
    let smallBytes = Bytes.random(3 << 20, seed: 3503)
    let small = try store.put(bytes: smallBytes)
    #expect(try Self.recorded(small.digest, size: smallBytes.count, in: store) == nil)
    #expect(try store.chunkManifest(of: small.digest) == nil)

    // The CLI's stream and copy paths record the same manifest.
    let file = try scratch.write("new.bin", Self.new)
    let cli = scratch["cli"]
    let piped = try CLI.run(["--store", cli, "put", "-"], stdin: Self.new)
    #expect(piped.status == 0, "\(piped.stderr)")
    try trove(scratch["copied"], ["put", file])
    let digest = XXH3Hasher.digest(Self.new)
    for root in [cli, scratch["copied"]] {
      let opened = try Store(StoreConfiguration(root: root))
      #expect(
        try Self.recorded(digest, size: Self.new.count, in: opened) == Self.manifest(Self.new),
        "\(root)")
    }
  }

  @Test("chunking off, or a threshold above the object, records no manifest and gives none")
  func settingsTurnChunkingOff() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    _ = try store.setPolicy(.chunking, to: "off")
    let off = try store.put(bytes: Self.old)
    #expect(try Self.recorded(off.digest, size: Self.old.count, in: store) == nil)
    #expect(try store.chunkManifest(of: off.digest) == nil)
    _ = try store.setPolicy(.chunking, to: "on")
    _ = try store.setPolicy(.chunkMinimumSize, to: "16M")
    let above = try store.put(bytes: Self.new)
    #expect(try Self.recorded(above.digest, size: Self.new.count, in: store) == nil)
    #expect(throws: TroveError.self) { try store.setPolicy(.chunkMinimumSize, to: "64K") }
    #expect(throws: TroveError.self) { try store.setPolicy(.chunking, to: "maybe") }
  }

  @Test("a manifest missing or damaged in the index is cut again from the object's bytes")
  func missingOrDamagedManifestsAreCutAgain() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let put = try store.put(bytes: Self.old)
    for damage in ["DELETE FROM manifests", "UPDATE manifests SET encoded = x'00'"] {
      try store.index().write("test: damage") { (tx) throws(TroveError) in
        try tx.run { db throws(SQLiteConnection.Failure) in try db.execute(damage) }
      }
      #expect(try store.chunkManifest(of: put.digest) == Self.manifest(Self.old), "\(damage)")
      #expect(
        try Self.recorded(put.digest, size: Self.old.count, in: store) == Self.manifest(Self.old),
        "\(damage)")
    }
  }

  @Test(
    "on XFS a new version shares the blocks of its unchanged chunks with the old: FIEMAP shows them, no byte changes, totals count them once",
    .enabled(if: TestFilesystems.xfs != nil, TestFilesystems.xfsMissing)
  )
  func versionsShareBlocksOnXFS() throws {
    let scratch = try Scratch(under: TestFilesystems.xfs)
    let store = try scratch.store()
    let old = try store.put(bytes: Self.old)
    let new = try store.put(bytes: Self.new)
    let before = try store.statistics()
    #expect(before.sharedBytes == 0)

    let plan = try store.shareBlocks(dryRun: true)
    #expect(plan.examined == 2 && plan.objects == 1, "\(plan)")
    #expect(plan.sharedBytes >= Int64(Self.old.count) - (1 << 20), "\(plan)")
    #expect(try store.extents(of: new.digest)?.sharedBytes == 0)

    let report = try store.shareBlocks()
    #expect(report.sharedBytes == plan.sharedBytes, "\(report) vs \(plan)")
    let newPath = objectFilePath(scratch["store"], new.digest)
    let oldPath = objectFilePath(scratch["store"], old.digest)
    #expect(try Int64(extents(newPath).sharedBytes) >= report.sharedBytes)
    #expect(try contents(newPath) == Self.new)
    #expect(try contents(oldPath) == Self.old)
    let after = try store.statistics()
    #expect(after.sharedBytes == report.sharedBytes)
    #expect(after.allocatedBytes == before.allocatedBytes - report.sharedBytes)

    // Examined: a second run has nothing new to share; asked again by
    // name, it finds the blocks shared already.
    #expect(try store.shareBlocks().sharedBytes == 0)
    let again = try store.shareBlocks(of: [new.digest])
    #expect(again.sharedBytes == 0 && again.alreadySharedBytes >= report.sharedBytes, "\(again)")
    #expect(try store.statistics().sharedBytes == report.sharedBytes)

    // The old version gone, the new one's blocks are its own, whole.
    _ = try store.remove(old.digest)
    #expect(try store.statistics().sharedBytes == 0)
    #expect(try contents(newPath) == Self.new)
    #expect(try store.verify().isClean)
  }

  @Test(
    "an object removed before the sharing is never shared with; a lying manifest shares nothing",
    .enabled(if: TestFilesystems.xfs != nil, TestFilesystems.xfsMissing)
  )
  func removedOrLyingSourcesShareNothing() throws {
    let scratch = try Scratch(under: TestFilesystems.xfs)
    let store = try scratch.store()
    let old = try store.put(bytes: Self.old)
    let new = try store.put(bytes: Self.new)
    _ = try store.remove(old.digest)
    let report = try store.shareBlocks()
    #expect(report.sharedBytes == 0 && report.objects == 0, "\(report)")

    // A third object whose recorded manifest claims the new one's chunks
    // (an index someone edited): the kernel finds the bytes differ.
    let other = Bytes.random(Self.new.count, seed: 3504)
    let liar = try store.put(bytes: other)
    try store.index().write("test: a lying manifest") { (tx) throws(TroveError) in
      try tx.run { db throws(SQLiteConnection.Failure) in
        try db.query(
          "UPDATE manifests SET encoded = ?, examined = 0 WHERE digest = ?",
          [.blob(Self.manifest(Self.new).encoded), .text(liar.digest.hex)])
        try db.execute("DELETE FROM chunk_hooks WHERE digest = '\(liar.digest.hex)'")
      }
      try tx.insertHooks(Self.manifest(Self.new), of: liar.digest)
    }
    let lied = try store.shareBlocks(of: [liar.digest])
    #expect(lied.sharedBytes == 0, "\(lied)")
    #expect(try contents(objectFilePath(scratch["store"], liar.digest)) == other)
    #expect(try contents(objectFilePath(scratch["store"], new.digest)) == Self.new)
    #expect(try store.extents(of: liar.digest)?.sharedBytes == 0)
  }

  @Test(
    "a sweep to the budget counts what evicting a version frees: its shared blocks stay, so it evicts on",
    .enabled(if: TestFilesystems.xfs != nil, TestFilesystems.xfsMissing)
  )
  func sweepsCountSharedBlocksOnce() throws {
    let scratch = try Scratch(under: TestFilesystems.xfs)
    let store = try scratch.store()
    _ = try store.put(bytes: Self.old)
    _ = try store.put(bytes: Self.new)
    for i in 0..<3 { _ = try store.put(bytes: Bytes.random(4 << 20, seed: 3510 + UInt64(i))) }
    #expect(try store.shareBlocks().sharedBytes >= Int64(Self.old.count) - (1 << 20))
    // Evicting the old version alone looks like enough, and frees almost
    // nothing: the new one keeps its blocks.
    let budget = try store.statistics().allocatedBytes - (6 << 20)
    try store.updatePolicy {
      $0.budget = budget
      $0.lowWater = 1
    }
    let report = try store.sweep()
    #expect(report.evictedEntries >= 2, "\(report)")
    #expect(!report.isOverBudget, "\(report)")
    #expect(try store.statistics().allocatedBytes <= budget)
    #expect(try store.verify().isClean)
  }

  @Test(
    "trove dedupe --dry-run changes nothing; a sweep shares the blocks of new versions",
    .enabled(if: TestFilesystems.xfs != nil, TestFilesystems.xfsMissing))
  func dedupeAndSweepThroughTheCLI() throws {
    let scratch = try Scratch(under: TestFilesystems.xfs)
    let store = scratch["store"]
    for bytes in [Self.old, Self.new] {
      let run = try CLI.run(["--store", store, "put", "-"], stdin: bytes)
      #expect(run.status == 0, "\(run.stderr)")
    }
    let newPath = objectFilePath(store, XXH3Hasher.digest(Self.new))
    let dry = try trove(store, ["dedupe", "--dry-run", "--json"])
    let plan = try #require(JSONSerialization.jsonObject(with: Data(dry.stdout)) as? [String: Any])
    #expect((plan["sharedBytes"] as? Int ?? 0) >= Self.old.count - (1 << 20), "\(dry.out)")
    #expect(try extents(newPath).sharedBytes == 0)

    let sweep = try trove(store, ["sweep", "--json"])
    let swept = try #require(
      JSONSerialization.jsonObject(with: Data(sweep.stdout)) as? [String: Any])
    #expect(swept["sharedBytes"] as? Int == plan["sharedBytes"] as? Int, "\(sweep.out)")
    #expect(try Int(extents(newPath).sharedBytes) >= Self.old.count - (1 << 20))
    let stats = try trove(store, ["stats"])
    #expect(stats.out.contains("of versions' blocks shared within the store"), "\(stats.out)")
    let done = try trove(store, ["dedupe"])
    #expect(done.out.contains("examined 0 objects"), "\(done.out)")
    #expect(try contents(newPath) == Self.new)
  }

  @Test("ext4 and tmpfs cannot share blocks: dedupe says so and changes nothing, doctor warns")
  func filesystemsWithoutSharingSaySo() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    for bytes in [Self.old, Self.new] {
      let run = try CLI.run(["--store", store, "put", "-"], stdin: bytes)
      #expect(run.status == 0, "\(run.stderr)")
    }
    let dedupe = try trove(store, ["dedupe"])
    #expect(dedupe.out.hasPrefix("shared nothing: the filesystem of "), "\(dedupe.out)")
    #expect(dedupe.out.contains("cannot share blocks between files"), "\(dedupe.out)")
    let doctor = try CLI.run(["--store", store, "doctor"])
    #expect(doctor.out.contains("warn  shared-blocks "), "\(doctor.out)")
    #expect(
      try contents(objectFilePath(store, XXH3Hasher.digest(Self.new))) == Self.new)
  }

  @Test(
    "SIGKILL among puts of versions and dedupes: every object whole, every recorded manifest the chunks of its bytes, shared totals within what FIEMAP shows",
    .timeLimit(.minutes(2)),
    .enabled(if: TestFilesystems.xfs != nil, TestFilesystems.xfsMissing))
  func killsAmongPutsAndDedupes() throws {
    let seed = StressSeed.value(default: 0xC4C5)
    let context = "seed \(seed): replay with TROVE_STRESS_SEED=\(seed)"
    var rng = SeededGenerator(seed: seed)
    let scratch = try Scratch(under: TestFilesystems.xfs)
    let store = scratch["store"]
    let base = Bytes.random(9 << 20, seed: rng.next())
    var files: [String] = []
    for v in 0..<6 {
      let offsets = (0..<3).map { _ in Int.random(in: 0..<(base.count - 4096), using: &rng) }
      files.append(
        try scratch.write(
          "v\(v).bin", BlockSharingTests.edited(base, at: offsets, count: 200, seed: rng.next())))
    }
    var killed: Set<Int32> = []
    let deadline = ContinuousClock.now + .seconds(20)
    var round = 0
    while round < 10 && ContinuousClock.now < deadline {
      round += 1
      var started: [Spawned] = []
      for p in 0..<2 {
        // Through a pipe: the stream path, which cuts chunks as it writes.
        started.append(
          try Spawned(
            ["--store", store, "put", "-"], streaming: files.randomElement(using: &rng)!,
            io: scratch["io-\(round)-\(p)"]))
      }
      if round > 1 {
        started.append(try Spawned(["--store", store, "dedupe"], io: scratch["io-\(round)-d"]))
      }
      usleep(UInt32.random(in: 0...400_000, using: &rng))
      for process in started where Bool.random(using: &rng) { process.kill() }
      for process in started {
        let outcome = try process.wait()
        if outcome.killed {
          killed.insert(outcome.pid)
        } else {
          #expect(outcome.exitedCleanly, "round \(round): \(outcome) [\(context)]")
        }
      }
    }
    #expect(!killed.isEmpty, "nothing was killed [\(context)]")
    let audit = try StoreAudit(store: store, context: context, io: scratch["audit"])
    let walked = try audit.walk()
    audit.expectIntact(walked)
    try audit.expectVerifyClean(allowingRepair: true)
    let opened = try Store(StoreConfiguration(root: store))
    _ = try opened.shareBlocks()
    var recorded = 0
    var sharedTotal: Int64 = 0
    for digest in walked.intact.keys.sorted() {
      let bytes = try contents(objectFilePath(store, digest))
      // What the totals count as shared for an object, its file shares.
      let fiemap = Int64(try extents(objectFilePath(store, digest)).sharedBytes)
      let counted = try opened.index().read("test") { (tx) throws(TroveError) in
        try tx.sharedBytes(of: digest)
      }
      #expect(counted <= fiemap, "\(digest): \(counted) counted, \(fiemap) shared [\(context)]")
      sharedTotal += counted
      guard let manifest = try Self.recorded(digest, size: bytes.count, in: opened) else {
        continue
      }
      recorded += 1
      #expect(manifest == Self.manifest(bytes), "\(digest) [\(context)]")
    }
    #expect(recorded > 0, "no manifest was recorded [\(context)]")
    let shared = try opened.statistics().sharedBytes
    #expect(shared > 0 && shared == sharedTotal, "\(shared) vs \(sharedTotal) [\(context)]")
  }
}
