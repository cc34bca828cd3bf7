import Foundation
import Testing

@testable import Trove

/// A folder outside the store, owned by root, that no command may touch:
/// its listing, and each file's bytes, inode and modification time, are
/// the same at the end of a test as at the start.
struct Canary {
  let folder: String
  private let before: [String: [Int64]]
  private let bytes: [String: [UInt8]]

  init(in scratch: Scratch) throws {
    let folder = scratch["canary"]
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    try Data("canary: leave me alone\n".utf8).write(to: URL(fileURLWithPath: folder + "/file"))
    _ = FileManager.default.createFile(atPath: folder + "/empty.db", contents: nil)
    try self.init(watching: folder)
  }

  /// Watches `folder` as it is now, subfolders included.
  init(watching folder: String) throws {
    self.folder = folder
    before = try Self.snapshot(folder)
    bytes = try Self.contents(folder)
  }

  var file: String { folder + "/file" }

  private static func snapshot(_ folder: String) throws -> [String: [Int64]] {
    var all: [String: [Int64]] = [:]
    for name in try FileManager.default.subpathsOfDirectory(atPath: folder) {
      let s = try fileStatus(folder + "/" + name)
      all[name] = [Int64(bitPattern: s.inode), s.size, s.modificationTime, Int64(s.mode)]
    }
    return all
  }

  private static func contents(_ folder: String) throws -> [String: [UInt8]] {
    var all: [String: [UInt8]] = [:]
    for name in try FileManager.default.subpathsOfDirectory(atPath: folder)
    where try fileStatus(folder + "/" + name).isRegular {
      all[name] = try readAll(folder + "/" + name)
    }
    return all
  }

  /// Fails the test when anything in the folder changed.
  func expectUntouched(sourceLocation: SourceLocation = #_sourceLocation) throws {
    #expect(try Self.snapshot(folder) == before, sourceLocation: sourceLocation)
    #expect(try Self.contents(folder) == bytes, sourceLocation: sourceLocation)
  }
}

/// Stores someone planted links in, damaged, or pointed `--store` at by
/// mistake: Trove never writes outside its root, never hangs on a FIFO,
/// and repairs what it can.
@Suite("hostile and damaged stores")
struct HostileStoreTests {
  /// A scratch folder on the loop-mounted XFS when there is one (else the
  /// system's temp folder: nothing here needs clones).
  func scratch() throws -> Scratch { try Scratch(under: TestFilesystems.xfs) }

  /// `trove ARGS` on `store`, killed if it runs 30 s: a hang fails the test.
  func trove(_ store: String, _ arguments: [String], stdin: [UInt8] = []) throws -> CLI.Result {
    try CLI.run(["--store", store] + arguments, stdin: stdin, prefix: ["/usr/bin/timeout", "30"])
  }

  @Test("tmp/ replaced by a link: put refuses, nothing is written where it points")
  func temporaryFolderLink() throws {
    let s = try scratch()
    let canary = try Canary(in: s)
    let store = s["store"]
    let file = try s.write("in", Bytes.random(100_000, seed: 1))
    #expect(try trove(store, ["put", file]).status == 0)
    try FileManager.default.removeItem(atPath: store + "/tmp")
    try FileManager.default.createSymbolicLink(
      atPath: store + "/tmp", withDestinationPath: canary.folder)
    let other = try s.write("other", Bytes.random(50_000, seed: 2))
    let put = try trove(store, ["put", other])
    #expect(put.status != 0)
    #expect(
      put.errorLines.count == 1 && put.stderr.contains("/tmp' is not a folder"), "\(put.stderr)")
    try canary.expectUntouched()
  }

  @Test(
    "a fan-out folder replaced by a link: put refuses, reads do not follow it, repair quarantines it"
  )
  func fanoutLink() throws {
    let s = try scratch()
    let canary = try Canary(in: s)
    let store = s["store"]
    let data = Bytes.random(70_000, seed: 3)
    let file = try s.write("in", data)
    let digest = XXH3Hasher.digest(data)
    #expect(try trove(store, ["put", file]).status == 0)
    let fanout = store + "/objects/" + digest.hex.prefix(2)
    // The attacker's copy of the fan-out folder, with the object in it.
    try FileManager.default.moveItem(atPath: fanout, toPath: canary.folder + "/moved")
    try FileManager.default.createSymbolicLink(
      atPath: fanout, withDestinationPath: canary.folder + "/moved")
    let canaryNow = try Canary(watching: canary.folder)  // the moved folder is in it now

    let put = try trove(store, ["put", file])
    #expect(put.status == 65 && put.stderr.contains("is not a folder"), "\(put.stderr)")
    #expect(try trove(store, ["has", digest.description]).status == 1)
    #expect(try trove(store, ["get", digest.description, s["out"]]).status != 0)
    #expect(!FileManager.default.fileExists(atPath: s["out"]))
    let verify = try trove(store, ["verify"])
    #expect(verify.status == 65 && verify.out.contains("unexpected: \(fanout) (left alone)"))
    let repair = try trove(store, ["verify", "--repair"])
    #expect(repair.status == 0 && repair.out.contains("(moved to quarantine/)"), "\(repair.out)")
    #expect(s.list("store/quarantine").count == 1)
    // The store works again, and stored the bytes in a folder of its own.
    #expect(try trove(store, ["put", file]).status == 0)
    #expect(try contents(objectFilePath(store, digest)) == data)
    #expect(try fileStatus(fanout).isDirectory)
    try canaryNow.expectUntouched()
  }

  @Test("an object replaced by a link: no mode hands out the target, put heals it")
  func objectLink() throws {
    let s = try scratch()
    let canary = try Canary(in: s)
    let store = s["store"]
    let data = Bytes.random(90_000, seed: 4)
    let file = try s.write("in", data)
    let digest = XXH3Hasher.digest(data)
    #expect(try trove(store, ["put", file]).status == 0)
    let object = objectFilePath(store, digest)
    try FileManager.default.removeItem(atPath: object)
    try FileManager.default.createSymbolicLink(atPath: object, withDestinationPath: canary.file)
    for mode in ["auto", "clone", "hardlink", "copy"] {
      let out = s["out-\(mode)"]
      let get = try trove(store, ["get", "--mode", mode, digest.description, out])
      #expect(get.status != 0, "\(mode): \(get.stderr)")
      #expect(!FileManager.default.fileExists(atPath: out), "\(mode)")
    }
    let toStdout = try trove(store, ["get", digest.description, "-"])
    #expect(toStdout.status != 0 && toStdout.stdout.isEmpty)
    // A put of the bytes is not a dedup hit on the link: it stores them.
    #expect(try trove(store, ["put", file]).status == 0)
    #expect(try fileStatus(object).isRegular)
    #expect(try contents(object) == data)
    #expect(
      try trove(store, ["get", "--mode", "hardlink", digest.description, s["out"]]).status == 0)
    #expect(try contents(s["out"]) == data)
    try canary.expectUntouched()
  }

  @Test("a FIFO or a folder where an object should be: get and verify end, repair quarantines it")
  func fifoAndFolder() throws {
    let s = try scratch()
    let store = s["store"]
    let data = Bytes.random(10_000, seed: 5)
    let file = try s.write("in", data)
    let digest = XXH3Hasher.digest(data)
    for kind in ["fifo", "folder"] {
      #expect(try trove(store, ["put", file]).status == 0)
      let object = objectFilePath(store, digest)
      try FileManager.default.removeItem(atPath: object)
      if kind == "fifo" {
        #expect(mkfifo(object, 0o644) == 0)
      } else {
        try FileManager.default.createDirectory(atPath: object, withIntermediateDirectories: false)
      }
      let get = try trove(store, ["get", digest.description, s["out"]])
      #expect(get.status == 65 && get.errorLines.count == 1, "\(kind): \(get.status) \(get.stderr)")
      #expect(try trove(store, ["get", digest.description, "-"]).status == 65, "\(kind)")
      #expect(try trove(store, ["verify"]).status == 65, "\(kind)")
      let repair = try trove(store, ["verify", "--repair"])
      #expect(repair.status == 0, "\(kind): \(repair.stderr)")
      #expect(!FileManager.default.fileExists(atPath: object), "\(kind)")
      #expect(try trove(store, ["has", digest.description]).status == 1, "\(kind)")
    }
    #expect(s.list("store/quarantine").count == 2)
  }

  @Test("sweep.lock linked to a file: the sweep takes its own lock, the file is untouched")
  func sweepLockLink() throws {
    let s = try scratch()
    let canary = try Canary(in: s)
    let store = s["store"]
    #expect(try trove(store, ["put", try s.write("in", [1, 2, 3])]).status == 0)
    let lock = store + "/sweep.lock"
    try? FileManager.default.removeItem(atPath: lock)
    try FileManager.default.createSymbolicLink(atPath: lock, withDestinationPath: canary.file)
    let sweep = try trove(store, ["sweep"])
    #expect(sweep.status == 0, "\(sweep.stderr)")
    #expect(try fileStatus(lock).isRegular)
    try canary.expectUntouched()
  }

  @Test("index.sqlite linked to a file: SQLite never writes through it; the index is rebuilt")
  func indexLink() throws {
    let s = try scratch()
    let canary = try Canary(in: s)
    let store = s["store"]
    let data = Bytes.random(5_000, seed: 6)
    #expect(try trove(store, ["put", try s.write("in", data)]).status == 0)
    for suffix in ["", "-wal", "-shm"] {
      try? FileManager.default.removeItem(atPath: store + "/index.sqlite" + suffix)
    }
    try FileManager.default.createSymbolicLink(
      atPath: store + "/index.sqlite", withDestinationPath: canary.folder + "/empty.db")
    let list = try trove(store, ["ls"])
    #expect(
      list.status == 0 && list.out.contains(XXH3Hasher.digest(data).description), "\(list.stderr)")
    #expect(
      list.errorLines.filter { $0.hasPrefix("trove: warning: ") }.count >= 1, "\(list.stderr)")
    #expect(try fileStatus(store + "/index.sqlite").isRegular)
    #expect(s.list("store").contains { $0.hasPrefix("index.sqlite.damaged-") })
    try canary.expectUntouched()
  }

  @Test("--store naming a folder that is not a store is refused; an empty one is adopted")
  func foreignFolder() throws {
    let s = try scratch()
    let foreign = s["foreign"]
    try FileManager.default.createDirectory(atPath: foreign, withIntermediateDirectories: true)
    try s.write("foreign/reserve", Array("my notes\n".utf8))
    try s.write("foreign/sweep.lock", Array("keep\n".utf8))
    let file = try s.write("in", [9, 9, 9])
    for args in [["put", file], ["sweep"], ["ls"]] {
      let run = try trove(foreign, args)
      #expect(run.status == 73, "\(args): \(run.stderr)")
      #expect(run.stderr.contains("is not a Trove store"), "\(run.stderr)")
    }
    #expect(s.list("foreign") == ["reserve", "sweep.lock"])
    #expect(try contents(s["foreign/reserve"]) == Array("my notes\n".utf8))
    try FileManager.default.createDirectory(atPath: s["empty"], withIntermediateDirectories: true)
    #expect(try trove(s["empty"], ["put", file]).status == 0)
  }

  @Test("a garbage index is set aside and rebuilt by the next command, with one warning")
  func garbageIndex() throws {
    let s = try scratch()
    let store = s["store"]
    let data = Bytes.random(5_000, seed: 7)
    let digest = XXH3Hasher.digest(data)
    #expect(try trove(store, ["put", try s.write("in", data)]).status == 0)
    #expect(try trove(store, ["pin", digest.description]).status == 0)
    for suffix in ["-wal", "-shm"] {
      try? FileManager.default.removeItem(atPath: store + "/index.sqlite" + suffix)
    }
    try s.write("store/index.sqlite", Bytes.random(50_000, seed: 8))
    let get = try trove(store, ["get", digest.description, "-"])
    #expect(get.status == 0 && get.stdout == data, "\(get.stderr)")
    let warnings = get.errorLines.filter { $0.hasPrefix("trove: warning: ") }
    #expect(warnings.contains { $0.contains("is damaged") }, "\(get.stderr)")
    let pins = try trove(store, ["pins"])
    #expect(pins.out.contains(digest.description), "the pin survived: \(pins.out)")
    #expect(s.list("store").contains { $0.hasPrefix("index.sqlite.damaged-") })
  }

  @Test("a damaged page: reindex and verify --repair set the index aside and rebuild it")
  func damagedPage() throws {
    let s = try scratch()
    let store = s["store"]
    var files: [String] = []
    for i in 0..<300 { files.append(try s.write("f\(i)", Array("file \(i)\n".utf8))) }
    #expect(try trove(store, ["put"] + files).status == 0)
    let pinned = XXH3Hasher.digest(Array("file 7\n".utf8))
    #expect(try trove(store, ["pin", pinned.description]).status == 0)
    for command in [["reindex"], ["verify", "--repair"]] {
      // Damage pages past the header and the schema, once in the database
      // file (the WAL would otherwise still hold them).
      try checkpointIndex(store)
      let handle = try #require(FileHandle(forUpdatingAtPath: store + "/index.sqlite"))
      try handle.seek(toOffset: 4096 * 3)
      try handle.write(contentsOf: Data(Bytes.random(8192, seed: 9)))
      try handle.close()
      let repair = try trove(store, command)
      #expect(repair.status == 0, "\(command): \(repair.stderr)")
      #expect(repair.stderr.contains("is damaged"), "\(command): \(repair.stderr)")
      let list = try trove(store, ["ls"])
      #expect(list.out.split(separator: "\n").count == 300, "\(command)")
      #expect(try trove(store, ["pins"]).out.contains(pinned.description), "\(command)")
    }
  }

  @Test("pins and keys outlive a deleted index: the next sweep keeps what was pinned")
  func pinsOutliveIndex() throws {
    let s = try scratch()
    let store = s["store"]
    let kept = Bytes.random(20_000, seed: 10)
    let other = Bytes.random(20_000, seed: 11)
    #expect(try trove(store, ["put", try s.write("kept", kept)]).status == 0)
    #expect(try trove(store, ["put", "--key", "urlish", try s.write("other", other)]).status == 0)
    let keptDigest = XXH3Hasher.digest(kept)
    #expect(try trove(store, ["pin", keptDigest.description]).status == 0)
    #expect(try trove(store, ["pin", "--name", "gone", keptDigest.description]).status == 0)
    #expect(try trove(store, ["unpin", "--name", "gone", keptDigest.description]).status == 0)
    for suffix in ["", "-wal", "-shm"] {
      try? FileManager.default.removeItem(atPath: store + "/index.sqlite" + suffix)
    }
    let pins = try trove(store, ["pins"])
    #expect(pins.stderr.contains("1 pin and 1 key restored"), "\(pins.stderr)")
    #expect(pins.out.split(separator: "\n").count == 1 && pins.out.contains(keptDigest.description))
    #expect(try trove(store, ["keys"]).out.contains("urlish"))
    #expect(try trove(store, ["config", "set", "budget", "0"]).status == 0)
    #expect(try trove(store, ["sweep"]).status == 0)
    #expect(try trove(store, ["has", keptDigest.description]).status == 0)
    #expect(try trove(store, ["has", XXH3Hasher.digest(other).description]).status == 1)
  }

  @Test(
    "a rebuild cut short is done again by the next open: pins survive, the next sweep keeps them")
  func interruptedRebuild() throws {
    let s = try scratch()
    let store = s["store"]
    let kept = Bytes.random(30_000, seed: 20)
    let digest = XXH3Hasher.digest(kept)
    #expect(try trove(store, ["put", try s.write("kept", kept)]).status == 0)
    #expect(try trove(store, ["pin", digest.description]).status == 0)
    for suffix in ["", "-wal", "-shm"] {
      try? FileManager.default.removeItem(atPath: store + "/index.sqlite" + suffix)
    }
    // A process killed right after it made the new index's schema: the
    // index exists, empty, its rebuild not done.
    do {
      let opened = try Store(StoreConfiguration(root: store))
      #expect(try opened.objects.openIndex().needsRebuild)
    }
    let pins = try trove(store, ["pins"])
    #expect(pins.out.contains(digest.description), "\(pins.out) \(pins.stderr)")
    #expect(try trove(store, ["config", "set", "budget", "0"]).status == 0)
    #expect(try trove(store, ["sweep"]).status == 0)
    #expect(try trove(store, ["has", digest.description]).status == 0)
  }

  @Test("an rm's pins and keys do not come back with a later copy when the index is rebuilt")
  func removedReferencesStayRemoved() throws {
    let s = try scratch()
    let store = s["store"]
    let file = try s.write("in", Bytes.random(30_000, seed: 21))
    let digest = XXH3Hasher.digest(try contents(file))
    #expect(try trove(store, ["put", "--key", "mykey", file]).status == 0)
    #expect(try trove(store, ["pin", digest.description]).status == 0)
    #expect(try trove(store, ["rm", digest.description]).status == 0)
    #expect(try trove(store, ["put", file]).status == 0)
    for suffix in ["", "-wal", "-shm"] {
      try? FileManager.default.removeItem(atPath: store + "/index.sqlite" + suffix)
    }
    let pins = try trove(store, ["pins"])
    #expect(pins.status == 0 && !pins.out.contains(digest.description), "\(pins.out)")
    #expect(!(try trove(store, ["keys"]).out.contains("mykey")))
  }

  @Test("a FIFO at references.log never blocks a pin or a keyed put")
  func journalFIFO() throws {
    let s = try scratch()
    let store = s["store"]
    let file = try s.write("in", Bytes.random(10_000, seed: 22))
    let digest = XXH3Hasher.digest(try contents(file))
    #expect(try trove(store, ["put", file]).status == 0)
    #expect(mkfifo(store + "/references.log", 0o644) == 0)
    let pin = try trove(store, ["pin", digest.description])
    #expect(pin.status == 0, "\(pin.status) \(pin.stderr)")
    let keyed = try trove(store, ["put", "--key", "k", file])
    #expect(keyed.status == 0, "\(keyed.status) \(keyed.stderr)")
  }

  @Test(
    "a folder holding objects/ and tmp/ of someone else's is not a store: nothing in it is swept")
  func lookalikeFolder() throws {
    let s = try scratch()
    let project = s["project"]
    try FileManager.default.createDirectory(
      atPath: project + "/tmp/important", withIntermediateDirectories: true)
    try FileManager.default.createDirectory(
      atPath: project + "/objects", withIntermediateDirectories: true)
    try s.write("project/tmp/important/notes.txt", Array("mine\n".utf8))
    try s.write("project/objects/README", Array("mine too\n".utf8))
    let old = Date(timeIntervalSinceNow: -10 * 86_400)
    for path in ["tmp/important/notes.txt", "tmp/important", "objects/README"] {
      try FileManager.default.setAttributes(
        [.modificationDate: old], ofItemAtPath: project + "/" + path)
    }
    for arguments in [["sweep"], ["verify", "--repair"], ["ls"]] {
      let run = try trove(project, arguments)
      #expect(run.status == 73 && run.stderr.contains("is not a Trove store"), "\(run.stderr)")
    }
    #expect(try contents(project + "/tmp/important/notes.txt") == Array("mine\n".utf8))
    #expect(s.list("project") == ["objects", "tmp"])
    #expect(s.list("project/objects") == ["README"])
  }
}

/// Reads a whole file (``contents(_:)``, under a name a member called
/// `contents` does not shadow).
private func readAll(_ path: String) throws -> [UInt8] { try contents(path) }
