import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// Two unprivileged users of one group share a store (run as root, which
/// starts `trove` as them with setpriv): what one member does in the
/// store's folders never changes the bytes another stores. The swap of a
/// staged file is timed exactly by the test seam `TROVE_TEST_PAUSE`: the
/// victim's put stops between staging and publishing while the other user
/// acts.
@Suite(
  "a group member cannot change another's bytes", .serialized,
  .enabled(
    if: TestFilesystems.isRoot && TestFilesystems.setprivAvailable,
    "needs root and setpriv to run trove as other users"))
struct GroupMemberTests {
  static let alice = AccessTests.alice
  static let bob = AccessTests.bob

  /// `trove --store STORE ARGS` as `user`.
  func trove(_ user: [String], _ store: String, _ arguments: [String]) throws -> CLI.Result {
    try CLI.run(["--store", store] + arguments, prefix: user)
  }

  /// `sh -c SCRIPT sh ARGS` as `user`.
  func shell(_ user: [String], _ script: String, _ arguments: [String] = []) throws -> CLI.Result {
    try CLI.run([], prefix: user + ["/bin/sh", "-c", script, "sh"] + arguments)
  }

  /// A scratch folder everyone can enter and write (inputs, pause notes),
  /// and in it an empty `2770` folder of the team for the store.
  func groupStore() throws -> (Scratch, String) {
    let scratch = try Scratch()
    #expect(chmod(scratch.path, 0o777) == 0)
    let store = scratch["store"]
    try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: false)
    #expect(chown(store, 0, AccessTests.team) == 0 && chmod(store, 0o2770) == 0)
    return (scratch, store)
  }

  /// `user` makes every staging folder of `tmp/` that is missing, as a
  /// shell would (mode 2770: not sticky), so that it owns them.
  func makeStagingFolders(_ user: [String], _ store: String) throws {
    let made = try shell(
      user, "cd \"$1/tmp\" && for f in 0 1 2 3 4 5 6 7; do [ -d $f ] || mkdir -m 2770 $f; done",
      [store])
    #expect(made.status == 0, "\(made.stderr)")
  }

  /// Runs `put FILE` as `user` paused between staging and publishing — at
  /// `point`: `publish`, before the temp name is checked, or `rename`,
  /// between that check and the rename; at the pause, `act` gets the
  /// staged file's path; then the put goes on.
  func pausedPut(
    _ user: [String], _ store: String, _ file: String, in scratch: Scratch,
    at point: String = "publish", act: (String) throws -> Void
  ) throws -> Outcome {
    let pause = scratch["pause"]
    try FileManager.default.createDirectory(atPath: pause, withIntermediateDirectories: false)
    #expect(chmod(pause, 0o777) == 0)
    for other in ["publish", "rename"] where other != point {
      _ = FileManager.default.createFile(atPath: pause + "/" + other + ".go", contents: nil)
    }
    let put = try Spawned(
      executable: user[0],
      Array(user.dropFirst())
        + [
          "/usr/bin/env", "TROVE_TEST_PAUSE=" + pause, CLI.executable, "--store", store, "put",
          file,
        ],
      io: scratch["io"])
    let note = pause + "/" + point
    while !FileManager.default.fileExists(atPath: note), put.process.isRunning {
      usleep(10_000)
    }
    let staged = try? String(contentsOfFile: note, encoding: .utf8)
    #expect(staged != nil, "the put never reached its publishing rename")
    if let staged { try act(store + "/tmp/" + staged) }
    _ = FileManager.default.createFile(atPath: note + ".go", contents: nil)
    return try put.wait()
  }

  /// Bob writes his bytes beside `staged` and renames them over it.
  func swap(_ staged: String, with bytes: [UInt8]) throws -> CLI.Result {
    let folder = (staged as NSString).deletingLastPathComponent
    return try shell(
      Self.bob, "printf %s \"$3\" > \"$1/bob.tmp\" && mv -f \"$1/bob.tmp\" \"$2\"",
      [folder, staged, String(decoding: bytes, as: UTF8.self)])
  }

  @Test(
    "a member cannot rename a file over another's staged put: the staging folders are sticky, and the put stores its own bytes"
  )
  func stickyStagingFolders() throws {
    let (scratch, store) = try groupStore()
    let first = try scratch.write("first", Array("alice was here first\n".utf8))
    #expect(chmod(first, 0o644) == 0)
    #expect(try trove(Self.alice, store, ["put", first]).status == 0)
    try makeStagingFolders(Self.alice, store)
    let mine = Array("alice's bytes, 40 of them, all her own\n".utf8)
    let file = try scratch.write("mine", mine)
    #expect(chmod(file, 0o644) == 0)
    var swapped: CLI.Result?
    let put = try pausedPut(Self.alice, store, file, in: scratch) { staged in
      swapped = try swap(staged, with: Array("bob's bytes\n".utf8))
    }
    #expect(swapped.map { $0.status != 0 } == true, "bob replaced alice's temp file")
    #expect(put.exitedCleanly, "\(put.stderr)")
    let digest = XXH3Hasher.digest(mine)
    let got = try trove(Self.alice, store, ["get", digest.description, "-"])
    #expect(got.status == 0 && got.stdout == mine, "\(got.stderr)")
    for name in ["tmp"] + StoreLayout.stagingFolders.map({ "tmp/" + $0 }) {
      let mode = try fileStatus(store + "/" + name).mode & 0o7777
      #expect(mode == 0o3770, "\(name): \(String(mode, radix: 8))")
    }
    #expect(try trove(Self.alice, store, ["verify"]).status == 0)
  }

  @Test(
    "the owner of a staging folder swaps a file in under another's put: that put fails naming its temp file and stores nothing"
  )
  func swapByFolderOwner() throws {
    let (scratch, store) = try groupStore()
    // Bob makes the store, so he owns tmp/ and every staging folder.
    let first = try scratch.write("first", Array("bob was here first\n".utf8))
    #expect(chmod(first, 0o644) == 0)
    #expect(try trove(Self.bob, store, ["put", first]).status == 0)
    try makeStagingFolders(Self.bob, store)
    let mine = Array("alice's bytes, 40 of them, all her own\n".utf8)
    let evil = Array("bob's bytes\n".utf8)
    let file = try scratch.write("mine", mine)
    #expect(chmod(file, 0o644) == 0)
    var swapped: CLI.Result?
    let put = try pausedPut(Self.alice, store, file, in: scratch) { staged in
      swapped = try swap(staged, with: evil)
    }
    #expect(swapped?.status == 0, "\(swapped?.stderr ?? "")")
    #expect(put.status == 74, "\(put.stderr)")
    #expect(put.errorLines.count == 1, "\(put.stderr)")
    #expect(
      put.stderr.contains("was replaced by another file before it was published"), "\(put.stderr)")
    let digest = XXH3Hasher.digest(mine)
    #expect(try trove(Self.alice, store, ["has", digest.description]).status == 1)
    #expect(!FileManager.default.fileExists(atPath: objectFilePath(store, digest)))
    #expect(try trove(Self.alice, store, ["verify"]).status == 0)
    // Stored again with nobody in the way, the bytes are hers.
    #expect(try trove(Self.alice, store, ["put", file]).status == 0)
    let got = try trove(Self.bob, store, ["get", digest.description, "-"])
    #expect(got.status == 0 && got.stdout == mine, "\(got.stderr)")
  }

  @Test(
    "a swap between the check of the temp name and the rename: the object's name is checked after it, the file taken back out, and the put stores nothing"
  )
  func swapAfterCheck() throws {
    let (scratch, store) = try groupStore()
    let first = try scratch.write("first", Array("bob was here first\n".utf8))
    #expect(chmod(first, 0o644) == 0)
    #expect(try trove(Self.bob, store, ["put", first]).status == 0)
    try makeStagingFolders(Self.bob, store)
    let mine = Array("alice's bytes, 40 of them, all her own\n".utf8)
    let file = try scratch.write("mine", mine)
    #expect(chmod(file, 0o644) == 0)
    var swapped: CLI.Result?
    let put = try pausedPut(Self.alice, store, file, in: scratch, at: "rename") { staged in
      swapped = try swap(staged, with: Array("bob's bytes\n".utf8))
    }
    #expect(swapped?.status == 0, "\(swapped?.stderr ?? "")")
    #expect(put.status == 74 && put.errorLines.count == 1, "\(put.stderr)")
    #expect(
      put.stderr.contains("was replaced by another file before it was published"), "\(put.stderr)")
    let digest = XXH3Hasher.digest(mine)
    #expect(try trove(Self.alice, store, ["has", digest.description]).status == 1)
    #expect(!FileManager.default.fileExists(atPath: objectFilePath(store, digest)))
    #expect(try trove(Self.alice, store, ["verify"]).status == 0)
  }

  @Test(
    "a store made before the staging folders were sticky: each owner's open makes theirs sticky, verify --repair the rest"
  )
  func existingStoreMadeSticky() throws {
    let (scratch, store) = try groupStore()
    let first = try scratch.write("first", Array("alice\n".utf8))
    #expect(chmod(first, 0o644) == 0)
    #expect(try trove(Self.alice, store, ["put", first]).status == 0)
    try makeStagingFolders(Self.bob, store)
    #expect(try shell(Self.alice, "mkdir \"$1/partial\"", [store]).status == 0)
    let bobs = StoreLayout.stagingFolders.map { "tmp/" + $0 }.filter {
      (try? fileStatus(store + "/" + $0).owner) == 60002
    }
    #expect(bobs.count >= 2, "\(bobs)")
    guard bobs.count >= 2 else { return }
    // As an older Trove left them: group-writable, not sticky.
    for name in ["tmp", "partial"] + bobs { #expect(chmod(store + "/" + name, 0o2770) == 0) }
    func mode(_ name: String) throws -> UInt32 { try fileStatus(store + "/" + name).mode & 0o7777 }
    #expect(try trove(Self.bob, store, ["ls"]).status == 0)
    for name in bobs { #expect(try mode(name) == 0o3770, "\(name)") }
    #expect(try mode("tmp") == 0o2770 && mode("partial") == 0o2770, "alice's: not bob's to change")
    #expect(try trove(Self.alice, store, ["ls"]).status == 0)
    #expect(try mode("tmp") == 0o3770 && mode("partial") == 0o3770)
    #expect(chmod(store + "/" + bobs[1], 0o2770) == 0)
    #expect(try CLI.run(["--store", store, "verify", "--repair"]).status == 0)
    #expect(try mode(bobs[1]) == 0o3770)
  }

  @Test(
    "a download's part file is its owner's alone: another member cannot open it to write, and fetches the URL without touching it"
  )
  func privatePartFiles() throws {
    guard FaultServer.python != nil else { return }
    let server = try FaultServer()
    let (scratch, store) = try groupStore()
    defer { withExtendedLifetime(scratch) {} }
    let size = FetchFaultTests.size
    let url = server.url("/drop/shared?size=\(size)")
    let dropped = try trove(Self.alice, store, ["fetch", "--retries", "0", url])
    #expect(dropped.status == 75, "\(dropped.stderr)")
    let part = store + "/partial/" + Store.downloadName(url) + ".60001.ofd.part"
    let status = try fileStatus(part)
    #expect(
      status.owner == 60001 && status.mode & 0o777 == 0o600, "\(String(status.mode, radix: 8))")
    #expect(status.size > 0 && status.size < size)
    // Bob cannot hold it open to write into the object it would become.
    #expect(try shell(Self.bob, "exec 3>>\"$1\"", [part]).status != 0)
    let fetched = try trove(Self.bob, store, ["fetch", "--json", url])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    let body = try server.body("shared", size: size)
    #expect(
      try FetchTests.record(fetched)["digest"] as? String == XXH3Hasher.digest(body).description)
    let after = try fileStatus(part)
    #expect(after.inode == status.inode && after.size == status.size && after.owner == 60001)
    #expect(try trove(Self.alice, store, ["verify"]).status == 0)
  }
}

/// A FIFO planted under the name of a file the store opens by name — a
/// part of a download, its sidecar, a record's log — never stops a
/// command: each ends by itself (`timeout` would kill a hung one: exit 137).
@Suite("FIFOs planted in a store never hang a command")
struct PlantedFIFOTests {
  static let timeout = ["/usr/bin/timeout", "-s", "KILL", "60"]

  func run(_ store: String, _ arguments: [String], environment: [String: String] = [:]) throws
    -> CLI.Result
  {
    try CLI.run(["--store", store] + arguments, environment: environment, prefix: Self.timeout)
  }

  @Test(
    "a FIFO as a partial download's sidecar or part: fetch ends and stores the whole body",
    .enabled(if: FaultServer.python != nil, FaultServer.missing),
    arguments: ["json", "part"])
  func partialFIFO(_ which: String) throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let size = FetchFaultTests.size
    let url = server.url("/ok/fifo-\(which)?size=\(size)")
    #expect(try run(store, ["sweep"]).status == 0)
    try FileManager.default.createDirectory(
      atPath: store + "/partial", withIntermediateDirectories: true)
    let name = store + "/partial/" + PartialDownload.name(of: url, access: .private)
    if which == "json" {
      try scratch.write(
        "store/partial/\(PartialDownload.name(of: url, access: .private)).part", [1, 2])
    }
    #expect(mkfifo(name + "." + which, 0o600) == 0)
    let fetched = try run(store, ["fetch", "--json", url])
    #expect(fetched.status == 0, "\(fetched.status) \(fetched.stderr)")
    let body = try server.body("fifo-\(which)", size: size)
    #expect(
      try FetchTests.record(fetched)["digest"] as? String == XXH3Hasher.digest(body).description)
    #expect(try run(store, ["verify"]).status == 0)
  }

  @Test("a FIFO as a record's log: put, get and record start end, each saying so in one line")
  func recordLogFIFO() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let bytes = Bytes.random(20_000, seed: 2801)
    let file = try scratch.write("in", bytes)
    #expect(try run(store, ["record", "start", "r"]).status == 0)
    try FileManager.default.removeItem(atPath: store + "/records/r.log")
    #expect(mkfifo(store + "/records/r.log", 0o600) == 0)
    let put = try run(store, ["put", file])
    #expect(put.status == 0, "\(put.status) \(put.stderr)")
    #expect(put.errorLines.count == 1 && put.stderr.contains("not a regular file"), "\(put.stderr)")
    let digest = XXH3Hasher.digest(bytes)
    let got = try run(store, ["get", digest.description, "-"])
    #expect(got.status == 0 && got.stdout == bytes, "\(got.status) \(got.stderr)")
    let tagged = try run(store, ["put", file], environment: ["TROVE_RECORD": "r"])
    #expect(tagged.status == 0, "\(tagged.status) \(tagged.stderr)")
    let again = try run(store, ["record", "start", "r"])
    #expect(again.status != 0 && again.status != 137, "\(again.status) \(again.stderr)")
    #expect(again.errorLines.count == 1 && again.stderr.contains("not a regular file"))
  }
}
