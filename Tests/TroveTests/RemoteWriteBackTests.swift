import Foundation
import Testing

@testable import Trove

/// Write-back (issue 14, in part), against real nginx on 127.0.0.1: what a
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
    nginx.files["\(base)/cas/\(digest.hex.prefix(2))/\(digest.hex)"]
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

  @Test("a dead remote with sync writes: 30 puts all succeed, one failed connect in all")
  func deadRemoteCostsOnce() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let url = "http://127.0.0.1:\(deadPort())/x"
    #expect(try RemoteTests.remote(store, ["add", "gone", url, "--write", "sync"]).status == 0)
    var warned = 0
    for i in 0..<30 {
      let file = try scratch.write("in-\(i)", Bytes.random(2000, seed: UInt64(1600 + i)))
      let put = try CLI.run(["--store", store, "put", file])
      #expect(put.status == 0, "\(put.stderr)")
      if put.stderr.contains("remote 'gone'") { warned += 1 }
    }
    #expect(warned == 1)
    let gone = try #require(try Self.status(store)["gone"])
    #expect(gone["errors"] as? Int == 1 && gone["queuedObjects"] as? Int == 30, "\(gone)")
    #expect(gone["state"] as? String == "unavailable")
    // An explicit push while the breaker is open sends nothing, fails nothing.
    let push = try RemoteTests.remote(store, ["push"])
    #expect(push.status == 0 && push.out == "", "\(push.stderr)")
  }
}
