import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// A small ext4 image loop-mounted in a scratch folder, which a test fills
/// while it is writable and then remounts read-only. Unmounted (lazily, so a
/// failed test never leaves it busy) and removed when dropped.
final class ReadOnlyVolume {
  let scratch: Scratch
  /// Where the image is mounted.
  let mountPoint: String
  var image: String { scratch["image"] }

  /// Makes a 16 MiB ext4 with `blockSize`-byte blocks (4096: the index runs
  /// in WAL mode; 1024: a persistent rollback journal) and mounts it.
  init(blockSize: Int) throws {
    scratch = try Scratch()
    mountPoint = scratch["mount"]
    try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: false)
    try Self.shell(
      "truncate -s 16M '\(scratch["image"])' && mkfs.ext4 -q -F -m 0 -b \(blockSize) '\(scratch["image"])' && mount -o loop '\(scratch["image"])' '\(mountPoint)'"
    )
  }

  deinit { try? Self.shell("umount -l '\(mountPoint)'") }

  /// Remounts the volume read-only (`mount -o remount,ro`): the kernel
  /// then refuses every write to it with EROFS.
  func makeReadOnly() throws {
    try Self.shell("sync && mount -o remount,ro '\(mountPoint)'")
  }

  /// Remounts the volume read-write again.
  func makeWritable() throws {
    try Self.shell("mount -o remount,rw '\(mountPoint)'")
  }

  /// Runs `script` in /bin/sh; throws its stderr if it fails.
  static func shell(_ script: String) throws {
    let run = try CLI.run([], prefix: ["/bin/sh", "-c", script])
    if run.status != 0 {
      throw TroveError(.ioError, "'\(script)' failed (\(run.status)): \(run.stderr)")
    }
  }

  /// Every file and folder under `path` with its size and modification
  /// time, and the image's bytes: what a command that changed anything
  /// would change.
  func snapshot() throws -> [String] {
    try Self.listing(mountPoint) + ["image \(XXH3Hasher.digest(try contents(image)))"]
  }

  /// Every file and folder under `path` with its size and modification
  /// time, sorted.
  static func listing(_ path: String) throws -> [String] {
    var lines: [String] = []
    let root = URL(fileURLWithPath: path)
    let walker = FileManager.default.enumerator(atPath: path)
    while let name = walker?.nextObject() as? String {
      let status = try fileStatus(root.appendingPathComponent(name).path)
      lines.append(
        "\(name) \(status.size) \(status.modificationTime).\(status.modificationTimeNanoseconds)")
    }
    return lines.sorted()
  }
}

/// Stores on a read-only mount: every read works
/// through the real CLI, every command that must write is refused early
/// (exit 77, one line naming the store and why), and nothing changes.
@Suite(
  "read-only stores", .serialized,
  .enabled(if: TestFilesystems.isRoot, "not root: loop-mounting an ext4 image read-only needs root")
)
struct ReadOnlyStoreTests {
  /// A store on `volume` with one object (pinned, with a key), then the
  /// volume made read-only. Returns the store's path, the digest and its bytes.
  func filledStore(on volume: ReadOnlyVolume, before: (String) throws -> Void = { _ in })
    throws -> (store: String, digest: BlobDigest, bytes: [UInt8])
  {
    let store = volume.mountPoint + "/store"
    let bytes = Bytes.random(100_000, seed: 1200)
    let input = try volume.scratch.write("input", bytes)
    let digest = XXH3Hasher.digest(bytes)
    #expect(try CLI.run(["--store", store, "put", input, "--key", "the-key"]).status == 0)
    #expect(try CLI.run(["--store", store, "pin", digest.description]).status == 0)
    #expect(try CLI.run(["--store", store, "ls"]).status == 0)
    try before(store)
    try volume.makeReadOnly()
    return (store, digest, bytes)
  }

  @Test(
    "every read works and every write is refused with exit 77, changing nothing",
    arguments: [4096, 1024])
  func readsAndWrites(blockSize: Int) throws {
    let volume = try ReadOnlyVolume(blockSize: blockSize)
    let (store, digest, bytes) = try filledStore(on: volume)
    let d = digest.description
    let before = try volume.snapshot()
    let out = volume.scratch["out"]

    let get = try CLI.run(["--store", store, "get", d, out])
    #expect(get.status == 0, "\(get.stderr)")
    #expect(try contents(out) == bytes)
    let piped = try CLI.run(["--store", store, "get", d, "-"])
    #expect(piped.status == 0 && piped.stdout == bytes, "\(piped.stderr)")
    #expect(try CLI.run(["--store", store, "has", d]).status == 0)
    #expect(try CLI.run(["--store", store, "has", XXH3Hasher.digest([1]).description]).status == 1)
    let path = try CLI.run(["--store", store, "path", d])
    #expect(path.status == 0 && path.out.hasPrefix(store + "/objects/"), "\(path.stderr)")
    let reads: [([String], String)] = [
      (["ls"], d), (["pins"], d), (["keys"], "the-key"), (["stats"], store),
      (["verify"], "0 corrupt"), (["config"], "budget"), (["config", "get", "budget"], "none"),
      (["ls", "--json"], d), (["keys", "--json"], "the-key"),
    ]
    for (arguments, expected) in reads {
      let run = try CLI.run(["--store", store] + arguments)
      #expect(run.status == 0, "\(arguments): \(run.status) \(run.stderr)")
      #expect(run.out.contains(expected), "\(arguments): \(run.out)")
      #expect(run.stderr.isEmpty, "\(arguments): \(run.stderr)")
    }

    let refusal = "Error: read-only store '\(store)': its volume is mounted read-only"
    let input = volume.scratch["input"]
    let writes: [[String]] = [
      ["put", input], ["put", "-"], ["fetch", "http://127.0.0.1:9/x"], ["rm", d], ["pin", d],
      ["unpin", d], ["sweep"], ["clean", "--yes"], ["recompress"], ["reindex"],
      ["verify", "--repair"], ["config", "set", "budget", "1G"], ["config", "reset"],
      ["keys", "rm", "the-key"],
    ]
    for arguments in writes {
      let run = try CLI.run(["--store", store] + arguments, stdin: [1, 2, 3])
      #expect(run.status == 77, "\(arguments): \(run.status) \(run.stderr)")
      #expect(run.errorLines == [refusal], "\(arguments): \(run.stderr)")
      #expect(run.stdout.isEmpty, "\(arguments): \(run.out)")
    }
    // doctor runs, and says the store is read-only, writing nothing.
    let doctor = try CLI.run(["--store", store, "doctor", volume.scratch.path])
    #expect(doctor.status == 0, "\(doctor.stderr)")
    #expect(
      doctor.out.contains("warn  writable") && doctor.out.contains("read-only store"),
      "\(doctor.out)")
    #expect(try volume.snapshot() == before)
  }

  @Test(
    "a store its user may not write (chmod a-w) is read-only too: reads work, writes exit 77 naming why",
    .enabled(if: TestFilesystems.setprivAvailable, "needs setpriv to run trove as another user"))
  func notWritableByThisUser() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let bytes = Bytes.pattern(5000)
    let digest = XXH3Hasher.digest(bytes)
    #expect(try CLI.run(["--store", store, "put", "-"], stdin: bytes).status == 0)
    try ReadOnlyVolume.shell("chown -R 60003:60003 '\(store)' && chmod -R a-w '\(store)'")
    defer { try? ReadOnlyVolume.shell("chmod -R u+w '\(store)'") }
    let carol = ["/usr/bin/setpriv", "--reuid=60003", "--regid=60003", "--clear-groups"]
    let before = try ReadOnlyVolume.listing(store)
    let get = try CLI.run(["--store", store, "get", digest.description, "-"], prefix: carol)
    #expect(get.status == 0 && get.stdout == bytes, "\(get.stderr)")
    let ls = try CLI.run(["--store", store, "ls"], prefix: carol)
    #expect(ls.status == 0 && ls.out.contains(digest.description), "\(ls.stderr)")
    let stats = try CLI.run(["--store", store, "stats"], prefix: carol)
    #expect(stats.status == 0, "\(stats.stderr)")
    for arguments in [["put", "-"], ["rm", digest.description], ["sweep"]] {
      let run = try CLI.run(["--store", store] + arguments, stdin: [9], prefix: carol)
      #expect(run.status == 77, "\(arguments): \(run.stderr)")
      #expect(
        run.errorLines == [
          "Error: read-only store '\(store)': '\(store)' is not writable by this user (uid 60003): Permission denied"
        ], "\(arguments): \(run.stderr)")
    }
    #expect(try ReadOnlyVolume.listing(store) == before)
  }

  @Test("the library says a store on a read-only mount is read-only, and why")
  func libraryFlag() throws {
    let volume = try ReadOnlyVolume(blockSize: 4096)
    let writable = try Store(StoreConfiguration(root: volume.mountPoint + "/store"))
    #expect(!writable.isReadOnly && writable.readOnlyReason == nil)
    let (store, digest, _) = try filledStore(on: volume)
    let opened = try Store(StoreConfiguration(root: store, createIfMissing: false))
    #expect(opened.isReadOnly)
    #expect(opened.readOnlyReason == "its volume is mounted read-only")
    #expect(try opened.contains(digest))
    #expect(try opened.entry(for: digest)?.size == 100_000)
    #expect(throws: TroveError.self) { try opened.remove(digest) }
    #expect(throws: TroveError.self) { try opened.requireWritable() }
  }

  @Test("a WAL index whose shared-memory file is missing is read immutable")
  func walWithoutSharedMemory() throws {
    let volume = try ReadOnlyVolume(blockSize: 4096)
    let (store, digest, _) = try filledStore(on: volume) { store in
      // An empty WAL, as the close of a large one leaves it.
      try checkpointIndex(store)
      #expect(FileManager.default.fileExists(atPath: store + "/index.sqlite-wal"))
      try FileManager.default.removeItem(atPath: store + "/index.sqlite-shm")
    }
    let before = try volume.snapshot()
    let ls = try CLI.run(["--store", store, "ls"])
    #expect(ls.status == 0 && ls.out.contains(digest.description), "\(ls.stderr)")
    let pins = try CLI.run(["--store", store, "pins"])
    #expect(pins.status == 0 && pins.out.contains(digest.description), "\(pins.stderr)")
    let opened = try Store(StoreConfiguration(root: store, createIfMissing: false))
    #expect(try opened.index().isImmutable)
    #expect(try volume.snapshot() == before)
  }

  @Test("a WAL holding frames without its shared-memory file is not read as if it were empty")
  func walNeedingRecovery() throws {
    let volume = try ReadOnlyVolume(blockSize: 4096)
    let (store, digest, _) = try filledStore(on: volume) { store in
      // A writer that died after a commit, before any checkpoint: its
      // frames are in the WAL only. Then the shared memory is lost.
      let script = """
        import os, sqlite3
        c = sqlite3.connect(os.sys.argv[1])
        c.execute("PRAGMA wal_autocheckpoint=0")
        c.execute("INSERT INTO counters(name, value) VALUES ('test_marker', 1)")
        c.commit()
        os._exit(0)
        """
      let python = try #require(FaultServer.python, FaultServer.missing)
      let run = try CLI.run([], prefix: [python, "-c", script, store + "/index.sqlite"])
      #expect(run.status == 0, "\(run.stderr)")
      try FileManager.default.removeItem(atPath: store + "/index.sqlite-shm")
      let wal = try fileStatus(store + "/index.sqlite-wal")
      #expect(wal.size > 0)
    }
    let before = try volume.snapshot()
    for command in [["ls"], ["stats"], ["pins"]] {
      let run = try CLI.run(["--store", store] + command)
      #expect(run.status == 77, "\(command): \(run.stderr)")
      #expect(run.errorLines.count == 1, "\(run.stderr)")
      #expect(
        run.stderr.contains("write-ahead log '\(store)/index.sqlite-wal' holds")
          && run.stderr.contains("open the store once with write access"), "\(run.stderr)")
    }
    // The objects folder is the truth: a read that needs no index works.
    #expect(try CLI.run(["--store", store, "has", digest.description]).status == 0)
    #expect(try volume.snapshot() == before)
  }

  @Test(
    "a WAL a clean close left with frames, its shared memory lost: reads say so (77) until the store is opened once with write access"
  )
  func walLeftByCloseWithoutSharedMemory() throws {
    let volume = try ReadOnlyVolume(blockSize: 4096)
    let (store, digest, _) = try filledStore(on: volume) { store in
      #expect(try fileStatus(store + "/index.sqlite-wal").size > 0, "the commands left frames")
      try FileManager.default.removeItem(atPath: store + "/index.sqlite-shm")
    }
    let refused = try CLI.run(["--store", store, "ls"])
    #expect(refused.status == 77 && refused.errorLines.count == 1, "\(refused.stderr)")
    #expect(refused.stderr.contains("open the store once with write access"), "\(refused.stderr)")
    try volume.makeWritable()
    #expect(try CLI.run(["--store", store, "stats"]).status == 0)
    try volume.makeReadOnly()
    let ls = try CLI.run(["--store", store, "ls"])
    #expect(ls.status == 0 && ls.out.contains(digest.description), "\(ls.stderr)")
  }

  @Test("an index read without locks that someone changes fails the read, never returns its rows")
  func immutableIndexChanged() throws {
    let volume = try ReadOnlyVolume(blockSize: 4096)
    let (store, digest, _) = try filledStore(on: volume) { store in
      try checkpointIndex(store)
      try FileManager.default.removeItem(atPath: store + "/index.sqlite-shm")
    }
    let opened = try Store(StoreConfiguration(root: store, createIfMissing: false))
    #expect(try opened.index().isImmutable)
    #expect(try opened.entry(for: digest)?.size == 100_000)
    // Someone with write access writes the store meanwhile.
    try volume.makeWritable()
    let other = try volume.scratch.write("other", Bytes.random(5000, seed: 1201))
    #expect(try CLI.run(["--store", store, "put", other]).status == 0)
    let error = #expect(throws: TroveError.self) { try opened.entry(for: digest) }
    #expect(error?.code == .busy)
    #expect(error?.description.contains("changed while this process read it without locks") == true)
    // The next read opens the index afresh: a long-lived process goes on
    // with the store as it is now.
    #expect(try opened.entry(for: digest)?.size == 100_000)
    #expect(try opened.entry(for: XXH3Hasher.digest(Bytes.random(5000, seed: 1201)))?.size == 5000)
  }

  @Test("a journal that starts with its header is hot; a zeroed one is not")
  func hotJournal() throws {
    let scratch = try Scratch()
    let database = try scratch.write("index.sqlite", [UInt8](repeating: 0, count: 4096))
    #expect(try UnlockedIndexLook.take(database, shown: database).recoveryNeeded(database) == nil)
    _ = try scratch.write(
      "index.sqlite-journal", [UInt8](repeating: 0, count: 8) + [UInt8](repeating: 1, count: 504))
    #expect(try UnlockedIndexLook.take(database, shown: database).recoveryNeeded(database) == nil)
    _ = try scratch.write(
      "index.sqlite-journal", UnlockedIndexLook.journalMagic + [UInt8](repeating: 1, count: 504))
    let reason = try UnlockedIndexLook.take(database, shown: database).recoveryNeeded(database)
    #expect(reason?.contains("holds a transaction that never finished") == true)
  }

  @Test(
    "a read-only store whose index has another schema version is refused in one line naming both",
    arguments: [0, 2])
  func otherSchemaVersion(version: Int) throws {
    let volume = try ReadOnlyVolume(blockSize: 4096)
    let (store, digest, _) = try filledStore(on: volume) { store in
      let script = """
        import sys, sqlite3
        c = sqlite3.connect(sys.argv[1])
        c.execute("PRAGMA user_version = %d" % int(sys.argv[2]))
        c.commit()
        c.close()
        """
      let python = try #require(FaultServer.python, FaultServer.missing)
      let run = try CLI.run(
        [], prefix: [python, "-c", script, store + "/index.sqlite", "\(version)"])
      #expect(run.status == 0, "\(run.stderr)")
    }
    let before = try volume.snapshot()
    let ls = try CLI.run(["--store", store, "ls"])
    // Older: it takes writing (exit 77); newer: a format this trove does not know.
    #expect(ls.status == (version == 0 ? 77 : 65), "\(ls.stderr)")
    #expect(ls.errorLines.count == 1, "\(ls.stderr)")
    #expect(
      ls.stderr.contains("index '\(store)/index.sqlite' has schema version \(version)")
        && ls.stderr.contains("\(Schema.version)"), "\(ls.stderr)")
    // The objects folder is the truth: a read that needs no index works.
    #expect(try CLI.run(["--store", store, "has", digest.description]).status == 0)
    #expect(try volume.snapshot() == before)
  }

  @Test("a damaged index on a read-only store fails in one line, and nothing is set aside")
  func damagedIndex() throws {
    let volume = try ReadOnlyVolume(blockSize: 1024)
    let (store, digest, _) = try filledStore(on: volume) { store in
      let garbage = [UInt8](repeating: 0x5A, count: 8192)
      try Data(garbage).write(to: URL(fileURLWithPath: store + "/index.sqlite"))
    }
    let before = try volume.snapshot()
    let ls = try CLI.run(["--store", store, "ls"])
    #expect(ls.status == 65, "\(ls.stderr)")
    #expect(ls.errorLines.count == 1, "\(ls.stderr)")
    #expect(
      ls.stderr.contains("index '\(store)/index.sqlite' is damaged")
        && ls.stderr.contains("the store is read-only"), "\(ls.stderr)")
    // The objects folder is the truth: a read that needs no index works.
    #expect(try CLI.run(["--store", store, "has", digest.description]).status == 0)
    #expect(try volume.snapshot() == before)
  }
}
