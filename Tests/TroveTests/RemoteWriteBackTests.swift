import Foundation
import Testing

@testable import Trove

/// Write-back, against real nginx on 127.0.0.1: what a
/// put stores goes up to the writable remotes — in the background by
/// default, before the command returns with `--write sync`, only by
/// `remote push` with `--write off` — from a queue that follows from the
/// index, and a dead remote costs the puts one failed connect in all.
@Suite(
  "write-back to remotes",
  .enabled(if: Nginx.executable != nil, Nginx.missing))
struct RemoteWriteBackTests {
  /// The blob file nginx holds for `digest` under `base`.
  static func blob(_ nginx: Nginx, _ base: String, _ digest: BlobDigest) -> String {
    nginx.files[base + "/" + remoteBlobPath(digest)]
  }

  /// `remote status --json` of `store`, by remote name.
  static func status(_ store: String) throws -> [String: [String: Any]] {
    try RemoteReadThroughTests.status(store)
  }

  @Test("the default (async): a put returns, and its object reaches the remote in the background")
  func asyncWrite() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let store = scratch["store"]
    let added = try CLI.run(["--store", store, "remote", "add", "shared", nginx.url("/wb")])
    #expect(added.status == 0, "\(added.stderr)")
    let bytes = Bytes.random(120_000, seed: 1501)
    let digest = try RemoteTests.put(store, bytes, in: scratch)
    let path = Self.blob(nginx, "wb", digest)
    let deadline = Date().addingTimeInterval(20)
    while !FileManager.default.fileExists(atPath: path) && Date() < deadline {
      usleep(50_000)
    }
    #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(bytes))
    // Once the upload is recorded, the queue is empty and the object remote-backed.
    var queued: Int?
    while Date() < deadline {
      queued = try Self.status(store)["shared"]?["queuedObjects"] as? Int
      if queued == 0 { break }
      usleep(50_000)
    }
    #expect(queued == 0)
    let stats = try CLI.run(["--store", store, "stats", "--json"])
    let json = try JSONSerialization.jsonObject(with: Data(stats.stdout)) as? [String: Any]
    #expect(json?["remoteBackedEntries"] as? Int == 1)
    #expect(json?["remoteBackedBytes"] as? Int == bytes.count)
  }

  @Test("sync uploads before the put returns; off waits for push; --all sends what came before")
  func syncOffAndAll() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let store = scratch["store"]
    let before = try RemoteTests.put(store, Bytes.random(10_000, seed: 1502), in: scratch)
    #expect(
      try RemoteTests.remote(store, ["add", "now", nginx.url("/now"), "--write", "sync"]).status
        == 0)
    #expect(
      try RemoteTests.remote(store, ["add", "later", nginx.url("/later"), "--write", "off"]).status
        == 0)
    let bad = try RemoteTests.remote(store, ["add", "x", nginx.url("/x"), "--write", "never"])
    #expect(bad.status == 64 && bad.stderr.contains("invalid --write 'never'"), "\(bad.stderr)")

    let digest = try RemoteTests.put(store, Bytes.random(30_000, seed: 1503), in: scratch)
    #expect(FileManager.default.fileExists(atPath: Self.blob(nginx, "now", digest)))
    #expect(!FileManager.default.fileExists(atPath: Self.blob(nginx, "now", before)))
    #expect(!FileManager.default.fileExists(atPath: Self.blob(nginx, "later", digest)))
    var status = try Self.status(store)
    #expect(
      status["now"]?["queuedObjects"] as? Int == 0 && status["now"]?["write"] as? String == "sync")
    #expect(status["later"]?["queuedObjects"] as? Int == 1)

    // push without digests sends the queue; then it is empty.
    let push = try RemoteTests.remote(store, ["push", "--remote", "later"])
    #expect(push.status == 0 && push.out == "\(digest)  uploaded to 'later'\n", "\(push.stderr)")
    #expect(FileManager.default.fileExists(atPath: Self.blob(nginx, "later", digest)))
    status = try Self.status(store)
    #expect(status["later"]?["queuedObjects"] as? Int == 0)
    #expect(try RemoteTests.remote(store, ["push", "--remote", "later"]).out == "")
    // --all: what the store held before the remote was added too.
    let all = try RemoteTests.remote(store, ["push", "--all", "--remote", "now", "--json"])
    let records = try JSONSerialization.jsonObject(with: Data(all.stdout)) as? [[String: Any]]
    #expect(records?.count == 1 && records?.first?["digest"] as? String == before.description)
    #expect(records?.first?["outcome"] as? String == "uploaded")
    #expect(FileManager.default.fileExists(atPath: Self.blob(nginx, "now", before)))
    let mixed = try RemoteTests.remote(store, ["push", "--all", before.description])
    #expect(mixed.status == 64, "\(mixed.stderr)")
  }

  @Test("a dead remote with sync writes: 100 puts all succeed, one failed connect in all")
  func deadRemoteCostsOnce() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let url = "http://127.0.0.1:\(deadPort())/x"
    #expect(try RemoteTests.remote(store, ["add", "gone", url, "--write", "sync"]).status == 0)
    var warned = 0
    for i in 0..<100 {
      let file = try scratch.write("in-\(i)", Bytes.random(2000, seed: UInt64(1600 + i)))
      let put = try CLI.run(["--store", store, "put", file])
      #expect(put.status == 0, "\(put.stderr)")
      if put.stderr.contains("remote 'gone'") { warned += 1 }
    }
    #expect(warned == 1)
    let gone = try #require(try Self.status(store)["gone"])
    #expect(gone["errors"] as? Int == 1 && gone["queuedObjects"] as? Int == 100, "\(gone)")
    #expect(gone["state"] as? String == "unavailable")
    // An explicit push asks the remote even while its breaker is open (a
    // probe): still gone, it fails with the real error (exit 69), and a CI
    // step can tell nothing went up.
    let push = try RemoteTests.remote(store, ["push"])
    #expect(push.status == 69 && push.out == "", "\(push.stderr)")
    #expect(!push.stderr.contains("not asked"), "\(push.stderr)")
    #expect(push.stderr.contains("remote 'gone'"), "\(push.stderr)")
    #expect(try Self.status(store)["gone"]?["state"] as? String == "unavailable")
    // A store with no writable remote has nothing to push to: exit 1.
    let none = scratch["none"]
    #expect(try CLI.run(["--store", none, "put", scratch["in-0"]]).status == 0)
    #expect(try RemoteTests.remote(none, ["push"]).status == 1)
  }
}

/// Evicting what a remote holds first.
@Suite(
  "eviction of remote-backed objects",
  .enabled(if: Nginx.executable != nil, Nginx.missing))
struct RemoteEvictionTests {
  @Test("a sweep evicts what the remote holds before older objects it does not; get reads it back")
  func remoteBackedFirst() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try RemoteTests.remote(store, ["add", "shared", nginx.url("/ev")]).status == 0)
    var digests: [BlobDigest] = []
    for i in 0..<3 {
      digests.append(
        try RemoteTests.put(store, Bytes.random(100_000, seed: UInt64(1700 + i)), in: scratch))
      usleep(20_000)  // distinct last accesses: 0 is the least recently used
    }
    #expect(try RemoteTests.remote(store, ["push", digests[1].description]).status == 0)
    let sweep = try CLI.run(["--store", store, "sweep", "--budget", "250K"])
    #expect(sweep.status == 0, "\(sweep.stderr)")
    #expect(try Set(RemoteTests.digests(store)) == [digests[0], digests[2]])
    let got = try CLI.run(["--store", store, "get", digests[1].description, scratch["back"]])
    #expect(got.status == 0, "\(got.stderr)")
    #expect(try Set(RemoteTests.digests(store)) == Set(digests))

    // Turned off: the least recently used goes, whatever the remote holds.
    #expect(
      try CLI.run(["--store", store, "config", "set", "evict-remote-first", "false"]).status == 0)
    #expect(try CLI.run(["--store", store, "sweep", "--budget", "250K"]).status == 0)
    #expect(try Set(RemoteTests.digests(store)) == [digests[1], digests[2]])
    let bad = try CLI.run(["--store", store, "config", "set", "evict-remote-first", "maybe"])
    #expect(bad.status == 64 && bad.stderr.contains("expected true or false"), "\(bad.stderr)")
  }
}

/// What a remote is recorded to hold is checked before it counts.
@Suite(
  "remote copies checked",
  .enabled(if: Nginx.executable != nil, Nginx.missing))
struct RemoteCopyCheckTests {
  @Test("a sweep evicts for a remote's copy only when the remote still holds it; else plain LRU")
  func confirmBeforeEvicting() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try RemoteTests.remote(store, ["add", "shared", nginx.url("/cc")]).status == 0)
    var digests: [BlobDigest] = []
    for i in 0..<3 {
      digests.append(
        try RemoteTests.put(store, Bytes.random(100_000, seed: UInt64(2300 + i)), in: scratch))
      usleep(20_000)
    }
    #expect(try RemoteTests.remote(store, ["push", digests[1].description]).status == 0)
    // As if drains had walked the queue up to now.
    let opened = try Store(StoreConfiguration(root: store))
    try opened.index().write("test") { (tx) throws(TroveError) in
      try tx.setRemote("shared", ["cursor": currentTimeNanoseconds()])
    }
    // The remote loses it (a purge, a Redis restart): the record says held.
    try FileManager.default.removeItem(
      atPath: nginx.files["cc/" + remoteBlobPath(digests[1])])
    #expect(try CLI.run(["--store", store, "sweep", "--budget", "250K"]).status == 0)
    // Plain LRU: the oldest went; the one only this store holds now stayed.
    #expect(try Set(RemoteTests.digests(store)) == [digests[1], digests[2]])
    // And it is queued for the remote again (the queue's cursor moved
    // back to it), with what came after it.
    let status = try RemoteReadThroughTests.status(store)["shared"]
    #expect(status?["queuedObjects"] as? Int == 2, "\(String(describing: status))")
  }

  @Test("WebDAV: a file of another length under a blob's name is replaced by a push, not kept")
  func wrongLengthReplaced() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try RemoteTests.remote(store, ["add", "shared", nginx.url("/wl")]).status == 0)
    let bytes = Bytes.random(80_000, seed: 2310)
    let digest = try RemoteTests.put(store, bytes, in: scratch)
    let blob = nginx.files["wl/" + remoteBlobPath(digest)]
    try FileManager.default.createDirectory(
      atPath: (blob as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try Data("bad".utf8).write(to: URL(fileURLWithPath: blob))
    let push = try RemoteTests.remote(store, ["push", digest.description])
    #expect(push.status == 0 && push.out == "\(digest)  uploaded to 'shared'\n", "\(push.stderr)")
    #expect(try Data(contentsOf: URL(fileURLWithPath: blob)) == Data(bytes))
  }
}

/// A remote that goes away and comes back.
@Suite(
  "a remote that goes down",
  .enabled(if: RedisServer.executable != nil, RedisServer.missing))
struct RemoteOutageTests {
  @Test("Redis stopped: puts go on, the queue keeps what they stored; back, a push sends it")
  func outage() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let url = redis.url(database: 3)
    #expect(try RemoteTests.remote(store, ["add", "shared", url, "--write", "sync"]).status == 0)
    let first = try RemoteTests.put(store, Bytes.random(50_000, seed: 1801), in: scratch)
    #expect(try redis.value("trove:cas:\(first.hex)", database: 3)?.count == 50_000)

    redis.stop()
    let file = try scratch.write("second", Bytes.random(60_000, seed: 1802))
    let put = try CLI.run(["--store", store, "put", file])
    #expect(put.status == 0, "\(put.stderr)")
    #expect(put.stderr.contains("trove: warning: not uploaded: remote 'shared'"), "\(put.stderr)")
    let second = try BlobDigest(parsing: String(put.out.prefix(39)))
    #expect(try CLI.run(["--store", store, "get", second.description, "-"]).status == 0)
    var shared = try #require(try RemoteReadThroughTests.status(store)["shared"])
    #expect(shared["queuedObjects"] as? Int == 1 && shared["state"] as? String == "unavailable")

    // Back (empty, as a restarted cache is), and its breaker's interval over.
    try redis.restart()
    let opened = try Store(StoreConfiguration(root: store))
    try opened.index().write("test") { (tx) throws(TroveError) in
      try tx.setRemote("shared", ["retry-at": currentTimeNanoseconds() - 1])
    }
    let push = try RemoteTests.remote(store, ["push"])
    #expect(push.status == 0 && push.out == "\(second)  uploaded to 'shared'\n", "\(push.stderr)")
    #expect(try redis.value("trove:cas:\(second.hex)", database: 3)?.count == 60_000)
    shared = try #require(try RemoteReadThroughTests.status(store)["shared"])
    #expect(shared["queuedObjects"] as? Int == 0 && shared["state"] as? String == "available")
  }
}

/// kill -9 of a pull: the store never holds part of a
/// blob, or a blob under another's name.
@Suite(
  "a pull killed",
  .enabled(if: Nginx.executable != nil, Nginx.missing))
struct RemotePullKillTests {
  @Test(
    "kill -9 of a get reading through the remote mid-transfer: nothing stored; the next get works")
  func killMidPull() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (a, b) = try RemoteTests.twoStores(scratch, url: nginx.url("/kp"))
    var caught = false
    for round in 0..<4 where !caught {
      let bytes = Bytes.random(48 << 20, seed: 2100 + UInt64(round))
      let digest = try RemoteTests.put(a, bytes, in: scratch)
      #expect(try RemoteTests.remote(a, ["push", digest.description]).status == 0)
      let out = scratch["out-\(round)"]
      let get = try Spawned(
        ["--store", b, "get", digest.description, out], io: scratch["get-\(round)"])
      // The writer's temp file in B's tmp/ is the transfer under way.
      while get.process.isRunning {
        if !RemoteTests.leftovers(b).isEmpty {
          Glibc.kill(get.pid, SIGSTOP)
          caught = get.process.isRunning
          break
        }
        usleep(200)
      }
      if caught {
        #expect(try !RemoteTests.digests(b).contains(digest))
        #expect(!FileManager.default.fileExists(atPath: out))
      }
      get.kill()
      Glibc.kill(get.pid, SIGCONT)
      _ = try get.wait()
      // Whatever the moment: B holds the whole blob or none of it, and
      // verify finds nothing wrong.
      let verify = try CLI.run(["--store", b, "verify"])
      #expect(verify.status == 0, "\(verify.stderr)")
      let again = try CLI.run(["--store", b, "get", "--force", digest.description, out])
      #expect(again.status == 0, "\(again.stderr)")
      #expect(try XXH3Hasher.digest(ofFile: out) == digest)
    }
    #expect(caught, "no get was caught mid-pull in 4 rounds")
  }
}
