import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// Sweeps clear whatever dead writers (or anyone) left in `tmp/`,
/// `partial/` and `locks/` — folders, FIFOs, links — without following a
/// link, report what they cannot remove, and go on enforcing the budget.
@Suite("sweeps and odd leftovers")
struct LeftoverTests {
  /// Sets `path`'s times (not its link target's) to two hours ago: stale
  /// for the default `tmp-max-age` of 1 h.
  static func backdate(_ path: String) {
    var old = [
      timespec(tv_sec: time(nil) - 7200, tv_nsec: 0),
      timespec(tv_sec: time(nil) - 7200, tv_nsec: 0),
    ]
    #expect(utimensat(AT_FDCWD, path, &old, AT_SYMLINK_NOFOLLOW) == 0, "\(path)")
  }

  /// Puts `count` objects of 20 kB through the command line.
  static func fill(_ scratch: Scratch, _ store: String, count: Int) throws {
    for i in 0..<count {
      let file = try scratch.write("in\(i)", Bytes.random(20_000, seed: UInt64(900 + i)))
      #expect(try CLI.run(["--store", store, "put", file]).status == 0)
    }
  }

  /// Runs `chattr ARGS`; whether it succeeded.
  @discardableResult
  static func chattr(_ arguments: [String]) -> Bool {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
    process.arguments = arguments
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return false }
    process.waitUntilExit()
    return process.terminationStatus == 0
  }

  /// Where the immutable-folder test runs: the reflink XFS when there is
  /// one, else the temp folder; nil when `chattr +i` does not work there
  /// (not root, no chattr, a filesystem without the flag).
  static let immutableBase: String? = {
    let base = TestFilesystems.xfs ?? NSTemporaryDirectory()
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chattr"),
      let probe = try? Scratch(under: base)
    else { return nil }
    guard chattr(["+i", probe.path]) else { return nil }
    chattr(["-i", probe.path])
    return base
  }()

  @Test("a sweep keeps this process's own temp files, however old, and removes another's")
  func ownTemporariesKept() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let own = StoreLayout.temporaryName("put")
    let other = "put-1-abc-0.tmp"
    for name in [own, other] {
      let path = try scratch.write("store/tmp/" + name, [1, 2, 3])
      Self.backdate(path)
    }
    #expect(StoreLayout.isThisProcessTemporary(own) && !StoreLayout.isThisProcessTemporary(other))
    let removed = store.removeStaleTemporaries(olderThan: 1, dryRun: false)
    #expect(removed.count == 1)
    #expect(scratch.temporaries("store") == [own])
  }

  @Test(
    "a stale folder with files, a FIFO and links in tmp/ are removed: exit 0, the link targets untouched"
  )
  func oddEntries() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    try Self.fill(scratch, store, count: 3)
    // Root-owned canaries outside the store: a file and a folder with a file.
    let canary = try scratch.write("canary", Array("do not touch".utf8))
    chmod(canary, 0o444)
    try FileManager.default.createDirectory(
      atPath: scratch["outside"], withIntermediateDirectories: true)
    let inside = try scratch.write("outside/kept", [1, 2, 3])
    let canaryBefore = try fileStatus(canary)

    let tmp = scratch["store/tmp"]
    try FileManager.default.createDirectory(
      atPath: tmp + "/dead/deeper", withIntermediateDirectories: true)
    try scratch.write("store/tmp/dead/a.tmp", Bytes.random(5000, seed: 1))
    try scratch.write("store/tmp/dead/deeper/b.tmp", Bytes.random(5000, seed: 2))
    #expect(mkfifo(tmp + "/fifo", 0o600) == 0)
    #expect(symlink(canary, tmp + "/to-canary") == 0)
    #expect(symlink(scratch["outside"], tmp + "/to-folder") == 0)
    // A folder inside the stale folder that is a link to the outside one.
    #expect(symlink(scratch["outside"], tmp + "/dead/to-folder") == 0)
    // partial/ and locks/ are cleared the same way.
    try FileManager.default.createDirectory(
      atPath: scratch["store/partial/0123.part"], withIntermediateDirectories: true)
    try scratch.write("store/partial/0123.part/x", [9])
    for path in [
      tmp + "/dead/deeper/b.tmp", tmp + "/dead/deeper", tmp + "/dead/a.tmp",
      tmp + "/dead/to-folder", tmp + "/dead", tmp + "/fifo", tmp + "/to-canary",
      tmp + "/to-folder", scratch["store/partial/0123.part/x"], scratch["store/partial/0123.part"],
    ] {
      Self.backdate(path)
    }
    try scratch.write("store/tmp/put-1-alive.tmp", [2])

    let sweep = try CLI.run(["--store", store, "sweep", "--budget", "0", "--json"])
    #expect(sweep.status == 0, "\(sweep.stderr)")
    #expect(sweep.stderr.isEmpty)
    let report = try #require(
      try JSONSerialization.jsonObject(with: Data(sweep.stdout)) as? [String: Any])
    #expect(report["temporaryFiles"] as? Int == 5)
    #expect(report["temporaryFailures"] as? Int == 0)
    #expect((report["temporaryBytes"] as? Int ?? 0) >= 10_000)
    #expect(report["evictedEntries"] as? Int == 3)
    #expect(scratch.temporaries("store") == ["put-1-alive.tmp"])
    #expect(scratch.list("store/partial").isEmpty)
    // Nothing outside the store was followed into or changed.
    #expect(try contents(canary) == Array("do not touch".utf8))
    let canaryAfter = try fileStatus(canary)
    #expect(canaryAfter.inode == canaryBefore.inode && canaryAfter.mode == canaryBefore.mode)
    #expect(canaryAfter.changeTime == canaryBefore.changeTime)
    #expect(try contents(inside) == [1, 2, 3])
    #expect(scratch.list("outside") == ["kept"])
  }

  @Test(
    "a leftover that cannot be removed is named and left; the sweep still evicts and exits 0",
    .enabled(
      if: immutableBase != nil,
      "chattr +i does not work here (needs root, /usr/bin/chattr and ext4 or XFS)"))
  func immutableFolder() throws {
    let scratch = try Scratch(under: Self.immutableBase)
    let store = scratch["store"]
    try Self.fill(scratch, store, count: 4)
    let stuck = scratch["store/tmp/stuck"]
    try FileManager.default.createDirectory(
      atPath: stuck + "/frozen", withIntermediateDirectories: true)
    try scratch.write("store/tmp/stuck/frozen/held.tmp", [1])
    try scratch.write("store/tmp/stuck/loose.tmp", [2])
    try scratch.write("store/tmp/dead.tmp", [3])
    for path in [
      stuck + "/frozen/held.tmp", stuck + "/frozen", stuck + "/loose.tmp", stuck,
      scratch["store/tmp/dead.tmp"],
    ] {
      Self.backdate(path)
    }
    #expect(Self.chattr(["+i", stuck + "/frozen"]))
    defer {
      Self.chattr(["-i", stuck + "/frozen"])
      withExtendedLifetime(scratch) {}  // removed only once the flag is off
    }

    let sweep = try CLI.run(["--store", store, "sweep", "--budget", "0", "--json"])
    #expect(sweep.status == 0, "\(sweep.stderr)")
    let report = try #require(
      try JSONSerialization.jsonObject(with: Data(sweep.stdout)) as? [String: Any])
    #expect(report["evictedEntries"] as? Int == 4)
    #expect(report["bytesAfter"] as? Int == 0)
    #expect(report["temporaryFiles"] as? Int == 1)
    #expect(report["temporaryFailures"] as? Int == 1)
    let reason =
      "cannot remove '\(stuck)/frozen/held.tmp': Operation not permitted (unlinkat, errno 1)"
    #expect(report["temporaryErrors"] as? [String] == [reason])
    #expect(sweep.errorLines == ["trove: warning: \(reason); left in place"])
    // What could go went: the dead file, and the loose file beside the frozen folder.
    #expect(scratch.temporaries("store") == ["stuck"])
    #expect(scratch.list("store/tmp/stuck") == ["frozen"])
    #expect(scratch.list("store/tmp/stuck/frozen") == ["held.tmp"])
    #expect(try CLI.run(["--store", store, "ls"]).out.isEmpty)

    // The plain summary counts it too.
    Self.backdate(stuck)
    let plain = try CLI.run(["--store", store, "sweep"])
    #expect(plain.status == 0)
    #expect(plain.out.contains("0 leftover temporary files (1 could not be removed)"))
    #expect(plain.errorLines.count == 1)
  }

  @Test("a folder nested deeper than a sweep descends is reported, not a crash")
  func deepFolder() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    try Self.fill(scratch, store, count: 1)
    var path = scratch["store/tmp/deep"]
    var made = [path]
    for _ in 0..<80 {
      path += "/d"
      made.append(path)
    }
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    for folder in made.reversed() { Self.backdate(folder) }
    let sweep = try CLI.run(["--store", store, "sweep", "--budget", "0", "--json"])
    #expect(sweep.status == 0, "\(sweep.stderr)")
    let report = try #require(
      try JSONSerialization.jsonObject(with: Data(sweep.stdout)) as? [String: Any])
    #expect(report["evictedEntries"] as? Int == 1)
    #expect(report["temporaryFailures"] as? Int == 1)
    #expect(
      (report["temporaryErrors"] as? [String])?.first?.hasSuffix(
        ": Directory not empty (unlinkat(AT_REMOVEDIR), errno 39)") == true)
    #expect(sweep.errorLines.count == 1)
  }

  @Test("a removal its remover left half done a minute ago is finished by the next sweep")
  func staleRemovalFinished() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let stale = try store.put(bytes: Bytes.random(30_000, seed: 951)).digest
    let fresh = try store.put(bytes: Bytes.random(30_000, seed: 952)).digest
    let now = currentTimeNanoseconds()
    // What a remover killed between its two steps leaves: the row gone,
    // the removal recorded, the file still there.
    for (digest, since) in [(stale, now - 120_000_000_000), (fresh, now)] {
      let removal = try store.objects.removals.lookUp(digest, explicit: true)
      try store.index().write("remove halfway") { (tx) throws(TroveError) in
        _ = try tx.deleteObjects([digest])
        try tx.insertRemovals([removal], now: since)
      }
    }
    let stalePath = store.objects.path(stale, compressed: false)
    #expect(FileManager.default.fileExists(atPath: stalePath))
    #expect(try store.statistics().entries == 0)
    let report = try store.sweep()
    #expect(!FileManager.default.fileExists(atPath: stalePath))
    #expect(report.reconciled.removalsFinished >= 1)
    #expect(
      try store.index().read("look") { (tx) throws(TroveError) in try tx.removal(of: stale) } == nil
    )
    // One a remover may still be making is left to it (unless this sweep's
    // one folder to reconcile happened to be its folder: then 2 finished).
    if report.reconciled.removalsFinished == 1 {
      #expect(FileManager.default.fileExists(atPath: store.objects.path(fresh, compressed: false)))
    }
  }

  @Test(
    "a stale removal whose file cannot be unlinked is reported; the sweep goes on and exits 0",
    .enabled(
      if: immutableBase != nil,
      "chattr +i does not work here (needs root, /usr/bin/chattr and ext4 or XFS)"))
  func staleRemovalFailureDoesNotStopSweep() throws {
    let scratch = try Scratch(under: Self.immutableBase)
    let root = scratch["store"]
    let (stuck, gone) = try {
      let store = try scratch.store()
      let stuck = try store.put(bytes: Bytes.random(30_000, seed: 961)).digest
      let gone = try store.put(bytes: Bytes.random(30_000, seed: 962)).digest
      _ = try store.put(bytes: Bytes.random(30_000, seed: 963))
      // Two removals a killed remover left two minutes ago, one of them
      // with a file nobody can unlink.
      for digest in [stuck, gone] {
        let removal = try store.objects.removals.lookUp(digest, explicit: true)
        try store.index().write("remove halfway") { (tx) throws(TroveError) in
          _ = try tx.deleteObjects([digest])
          try tx.insertRemovals([removal], now: currentTimeNanoseconds() - 120_000_000_000)
        }
      }
      return (
        store.objects.path(stuck, compressed: false), store.objects.path(gone, compressed: false)
      )
    }()
    #expect(Self.chattr(["+i", stuck]))
    defer {
      Self.chattr(["-i", stuck])
      withExtendedLifetime(scratch) {}  // removed only once the flag is off
    }

    let sweep = try CLI.run(["--store", root, "sweep", "--json"])
    #expect(sweep.status == 0, "\(sweep.stderr)")
    let report = try #require(
      try JSONSerialization.jsonObject(with: Data(sweep.stdout)) as? [String: Any])
    let reason = "cannot remove '\(stuck)': Operation not permitted (unlinkat, errno 1)"
    #expect(report["housekeepingErrors"] as? [String] == [reason])
    #expect(sweep.errorLines == ["trove: warning: \(reason); the next sweep tries again"])
    // The other removal was finished and counted once; the sweep ran to
    // its end (and logged itself).
    #expect(!FileManager.default.fileExists(atPath: gone))
    let reconciled = try #require(report["reconciled"] as? [String: Any])
    #expect((reconciled["removalsFinished"] as? Int ?? 0) >= 1)
    #expect(FileManager.default.fileExists(atPath: stuck))
  }

  @Test(
    "an entry chosen for eviction whose file cannot be unlinked is kept and named; the sweep evicts others to the budget",
    .enabled(
      if: immutableBase != nil,
      "chattr +i does not work here (needs root, /usr/bin/chattr and ext4 or XFS)"))
  func evictionFailureDoesNotStopSweep() throws {
    let scratch = try Scratch(under: Self.immutableBase)
    let root = scratch["store"]
    // Five objects put in order: the first is the least recently used.
    let (digests, paths) = try {
      let store = try scratch.store()
      var digests: [BlobDigest] = []
      for i in 0..<5 {
        digests.append(try store.put(bytes: Bytes.random(30_000, seed: UInt64(970 + i))).digest)
      }
      return (digests, digests.map { store.objects.path($0, compressed: false) })
    }()
    let stuck = paths[0]
    #expect(Self.chattr(["+i", stuck]))
    defer {
      Self.chattr(["-i", stuck])
      withExtendedLifetime(scratch) {}  // removed only once the flag is off
    }

    let budget = 80_000
    let sweep = try CLI.run(["--store", root, "sweep", "--budget", "\(budget)", "--json"])
    #expect(sweep.status == 0, "\(sweep.stderr)")
    let report = try #require(
      try JSONSerialization.jsonObject(with: Data(sweep.stdout)) as? [String: Any])
    let reason = "cannot remove '\(stuck)': Operation not permitted (unlinkat, errno 1)"
    let errors = try #require(report["housekeepingErrors"] as? [String])
    #expect(!errors.isEmpty && errors.allSatisfy { $0 == reason }, "\(errors)")
    #expect(
      sweep.errorLines == errors.map { "trove: warning: \($0); the next sweep tries again" },
      "\(sweep.stderr)")
    // The budget was met with the others: the stuck object is still stored
    // and readable, the next ones in LRU order are gone.
    #expect((report["bytesAfter"] as? Int ?? .max) <= budget, "\(report)")
    #expect((report["evictedEntries"] as? Int ?? 0) >= 3, "\(report)")
    #expect((report["skippedEntries"] as? Int ?? 0) >= 1, "\(report)")
    #expect(FileManager.default.fileExists(atPath: stuck))
    #expect(try CLI.run(["--store", root, "has", digests[0].description]).status == 0)
    #expect(!FileManager.default.fileExists(atPath: paths[1]))
    #expect(try CLI.run(["--store", root, "has", digests[1].description]).status == 1)
    let verify = try CLI.run(["--store", root, "verify"])
    #expect(verify.status == 0, "\(verify.stderr)")
  }
}
