import Foundation
import Testing

@testable import Trove

/// Who may read a store: two unprivileged users of
/// one group share a store, a third is refused. Run as root, which starts
/// `trove` as those users with setpriv (numeric ids: no accounts needed).
@Suite(
  "private and group stores", .serialized,
  .enabled(
    if: TestFilesystems.isRoot && TestFilesystems.setprivAvailable,
    "needs root and setpriv to run trove as other users"))
struct AccessTests {
  static let team: UInt32 = 60100
  static let alice = ["/usr/bin/setpriv", "--reuid=60001", "--regid=60001", "--groups=60100"]
  static let bob = ["/usr/bin/setpriv", "--reuid=60002", "--regid=60002", "--groups=60100"]
  static let mallory = ["/usr/bin/setpriv", "--reuid=60003", "--regid=60003", "--groups=60200"]

  /// `trove` as `user`, with a umask that would take group write away.
  func trove(_ user: [String], _ store: String, _ arguments: [String], stdin: [UInt8] = [])
    throws -> CLI.Result
  {
    try CLI.run(["--store", store] + arguments, stdin: stdin, prefix: user)
  }

  /// A scratch folder everyone can enter (its files are world-readable inputs).
  func scratch() throws -> Scratch {
    let scratch = try Scratch()
    #expect(chmod(scratch.path, 0o755) == 0)
    return scratch
  }

  /// Alice and Bob each store, read the other's objects, dedup against
  /// them, and evict them; neither can change an object's bytes; Mallory is
  /// refused in one line.
  func expectShared(_ store: String, _ scratch: Scratch) throws {
    let a = Bytes.random(150_000, seed: 500)
    let b = Bytes.random(150_000, seed: 501)
    let putA = try trove(Self.alice, store, ["put", "-"], stdin: a)
    #expect(putA.status == 0, "\(putA.stderr)")
    let putB = try trove(Self.bob, store, ["put", "-"], stdin: b)
    #expect(putB.status == 0, "\(putB.stderr)")
    let da = XXH3Hasher.digest(a)
    let db = XXH3Hasher.digest(b)
    let readB = try trove(Self.alice, store, ["get", db.description, "-"])
    let readA = try trove(Self.bob, store, ["get", da.description, "-"])
    #expect(readB.status == 0 && readB.stdout == b, "\(readB.stderr)")
    #expect(readA.status == 0 && readA.stdout == a, "\(readA.stderr)")
    #expect(try trove(Self.bob, store, ["put", "-"], stdin: a).status == 0)  // a dedup hit
    #expect(try trove(Self.bob, store, ["pin", da.description]).status == 0)
    #expect(try trove(Self.alice, store, ["pins"]).out.contains(da.description))
    // Bob cannot change Alice's object, through the file or the store.
    let object = objectFilePath(store, da)
    let write = try CLI.run(
      [], prefix: Self.bob + ["/bin/sh", "-c", "printf x >> '\(object)'"])
    #expect(write.status != 0)
    #expect(try contents(object) == a)
    // Mallory, outside the group, is refused cleanly.
    let refused = try trove(Self.mallory, store, ["get", da.description, "-"])
    #expect(refused.status == 77 && refused.errorLines.count == 1, "\(refused.stderr)")
    #expect(refused.stderr.contains("Permission denied") && refused.stdout.isEmpty)
    let sneak = try trove(Self.mallory, store, ["put", "-"], stdin: [1, 2, 3])
    #expect(sneak.status == 77, "\(sneak.stderr)")
    // Either member evicts any object (a shared budget needs it): Bob sweeps Alice's.
    #expect(try trove(Self.bob, store, ["unpin", da.description]).status == 0)
    let sweep = try trove(Self.bob, store, ["sweep", "--budget", "0"])
    #expect(sweep.status == 0, "\(sweep.stderr)")
    #expect(try trove(Self.alice, store, ["has", da.description]).status == 1)
    #expect(try trove(Self.alice, store, ["verify"]).status == 0)
  }

  @Test("a store made in a 2770 folder of a group is shared by its members, whatever their umask")
  func groupFolder() throws {
    let scratch = try scratch()
    let store = scratch["store"]
    try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: false)
    #expect(chown(store, 0, Self.team) == 0 && chmod(store, 0o2770) == 0)
    // A member whose umask keeps everything private changes a setting;
    // the others still read it.
    let strict = try CLI.run(
      ["--store", store, "config", "set", "max-age", "30d"],
      prefix: Self.bob + ["/bin/sh", "-c", "umask 077; exec \"$0\" \"$@\""])
    #expect(strict.status == 0, "\(strict.stderr)")
    try expectShared(store, scratch)
    // What members made is the group's, with the group's modes: the
    // folder members stage files in is also sticky.
    for (name, mode) in [("objects", 0o2770), ("tmp", 0o3770)] {
      let status = try fileStatus(store + "/" + name)
      #expect(status.mode & 0o7777 == mode, "\(name): \(String(status.mode, radix: 8))")
      #expect(status.group == Self.team, "\(name)")
    }
    for name in ["index.sqlite", "sweep.lock", "references.log"] {
      let status = try fileStatus(store + "/" + name)
      #expect(status.mode & 0o777 == 0o660, "\(name): \(String(status.mode, radix: 8))")
    }
  }

  @Test(
    "config set access group shares an existing private store; setAccess(.private) takes it back")
  func convert() throws {
    let scratch = try scratch()
    let store = scratch["store"]
    let made = try Store(StoreConfiguration(root: store))
    #expect(made.access == .private)
    _ = try made.put(bytes: Bytes.random(10_000, seed: 502))
    try made.pin(XXH3Hasher.digest(Bytes.random(10_000, seed: 502)))
    #expect(chown(store, 0, Self.team) == 0)
    let set = try CLI.run(["--store", store, "config", "set", "access", "group"])
    #expect(set.status == 0, "\(set.stderr)")
    #expect(try CLI.run(["--store", store, "config", "get", "access"]).out == "group\n")
    #expect(try Store(StoreConfiguration(root: store)).access == .group)
    try expectShared(store, scratch)
    let back = try Store(StoreConfiguration(root: store)).setAccess(.private)
    #expect(back.access == .private)
    #expect(try fileStatus(store).mode & 0o7777 == 0o700)
    let refused = try trove(Self.alice, store, ["ls"])
    #expect(refused.status == 77, "\(refused.stderr)")
  }

  @Test(
    "a store open during config set access private writes to the index's new file: its later put and key are in the index every new open reads"
  )
  func openStoreFollowsTheMovedIndex() throws {
    let scratch = try scratch()
    let store = scratch["store"]
    let early = try Store(StoreConfiguration(root: store))
    let first = Bytes.random(10_000, seed: 503)
    _ = try early.put(bytes: first, key: "first")
    #expect(chown(store, 0, Self.team) == 0)
    let shared = try CLI.run(["--store", store, "config", "set", "access", "group"])
    #expect(shared.status == 0, "\(shared.stderr)")
    let before = try fileStatus(store + "/index.sqlite").inode
    let set = try CLI.run(["--store", store, "config", "set", "access", "private"])
    #expect(set.status == 0, "\(set.stderr)")
    #expect(try fileStatus(store + "/index.sqlite").inode != before)

    let later = Bytes.random(10_000, seed: 504)
    let put = try early.put(bytes: later, key: "later")
    let fresh = try Store(StoreConfiguration(root: store))
    #expect(try fresh.entry(for: put.digest) != nil)
    #expect(try fresh.binding(forKey: "later")?.digest == put.digest)
    #expect(try fresh.binding(forKey: "first")?.digest == XXH3Hasher.digest(first))
    let listed = try CLI.run(["--store", store, "keys"])
    #expect(listed.out.contains("later"), "\(listed.out)")
  }

  @Test(
    "a put that waits on the index while config set access private copies it lands in the new file, not the old one"
  )
  func putDuringTheIndexMove() throws {
    let scratch = try scratch()
    let store = scratch["store"]
    _ = try Store(StoreConfiguration(root: store)).put(bytes: Bytes.random(1000, seed: 505))
    #expect(chown(store, 0, Self.team) == 0)
    #expect(try CLI.run(["--store", store, "config", "set", "access", "group"]).status == 0)
    let pause = scratch["pause"]
    try FileManager.default.createDirectory(atPath: pause, withIntermediateDirectories: false)
    _ = FileManager.default.createFile(atPath: pause + "/index-renamed.go", contents: nil)
    let mover = try Spawned(
      executable: "/usr/bin/env",
      [
        "TROVE_TEST_PAUSE=" + pause, CLI.executable, "--store", store, "config", "set", "access",
        "private",
      ], io: scratch["io"])
    let note = pause + "/index-move"
    while !FileManager.default.fileExists(atPath: note), mover.process.isRunning {
      usleep(10_000)
    }
    #expect(FileManager.default.fileExists(atPath: note), "the move never held the index")
    // It holds the old file's write lock: this put's commit waits for it.
    let file = try scratch.write("during", Bytes.random(3000, seed: 506))
    let put = try Spawned(
      executable: CLI.executable, ["--store", store, "put", file, "--key", "during"],
      io: scratch["io-put"])
    usleep(300_000)
    _ = FileManager.default.createFile(atPath: note + ".go", contents: nil)
    #expect(try mover.wait().exitedCleanly)
    let outcome = try put.wait()
    #expect(outcome.exitedCleanly, "\(outcome.stderr)")
    let fresh = try Store(StoreConfiguration(root: store))
    #expect(
      try fresh.binding(forKey: "during")?.digest
        == XXH3Hasher.digest(Bytes.random(3000, seed: 506)))
  }

  @Test(
    "a process that opens the index between config set access private's rename and its removal of the old WAL waits, and its put lands in the index every new open reads"
  )
  func openBetweenRenameAndOldWALRemoval() throws {
    let scratch = try scratch()
    let store = scratch["store"]
    _ = try Store(StoreConfiguration(root: store)).put(bytes: Bytes.random(1000, seed: 507))
    #expect(chown(store, 0, Self.team) == 0)
    #expect(try CLI.run(["--store", store, "config", "set", "access", "group"]).status == 0)
    let pause = scratch["pause"]
    try FileManager.default.createDirectory(atPath: pause, withIntermediateDirectories: false)
    _ = FileManager.default.createFile(atPath: pause + "/index-move.go", contents: nil)
    let mover = try Spawned(
      executable: "/usr/bin/env",
      [
        "TROVE_TEST_PAUSE=" + pause, CLI.executable, "--store", store, "config", "set", "access",
        "private",
      ], io: scratch["io"])
    let note = pause + "/index-renamed"
    while !FileManager.default.fileExists(atPath: note), mover.process.isRunning {
      usleep(10_000)
    }
    #expect(FileManager.default.fileExists(atPath: note), "the move never renamed the index")
    let bytes = Bytes.random(3000, seed: 508)
    let file = try scratch.write("between", bytes)
    let put = try Spawned(
      executable: CLI.executable, ["--store", store, "put", file, "--key", "between"],
      io: scratch["io-put"])
    usleep(300_000)
    _ = FileManager.default.createFile(atPath: note + ".go", contents: nil)
    #expect(try mover.wait().exitedCleanly)
    let outcome = try put.wait()
    #expect(outcome.exitedCleanly, "\(outcome.stderr)")
    let fresh = try Store(StoreConfiguration(root: store))
    #expect(try fresh.binding(forKey: "between")?.digest == XXH3Hasher.digest(bytes))
    let verified = try CLI.run(["--store", store, "verify"])
    #expect(verified.status == 0, "\(verified.out) \(verified.stderr)")
  }

  @Test("a store on a locked encrypted directory says so (ENOKEY injected at the first open)")
  func lockedEncryptedDirectory() throws {
    let scratch = try Scratch()
    let result = try CLI.run(
      ["--store", scratch["store"], "ls"], environment: ["TROVE_INJECT_FAULT": "open:126"])
    #expect(result.status != 0)
    #expect(result.errorLines.count == 1, "\(result.stderr)")
    #expect(result.stderr.contains("locked encrypted directory"), "\(result.stderr)")
  }
}
