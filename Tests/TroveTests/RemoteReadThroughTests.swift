import Foundation
import Testing

@testable import Trove

/// Reading through the remotes, against real nginx
/// (WebDAV) and redis-server on 127.0.0.1: a local miss is pulled from the
/// first remote that holds it, rehashed; a corrupt blob is counted and
/// never stored; a dead remote costs one connect attempt, then its circuit
/// breaker (kept in the index, shared by every process) skips it.
@Suite(
  "read-through remotes",
  .enabled(if: Nginx.executable != nil, Nginx.missing),
  .enabled(if: RedisServer.executable != nil, RedisServer.missing))
struct RemoteReadThroughTests {
  /// `remote status --json` of `store`, by remote name.
  static func status(_ store: String) throws -> [String: [String: Any]] {
    let run = try RemoteTests.remote(store, ["status", "--json"])
    #expect(run.status == 0, "\(run.stderr)")
    let records = try #require(
      try JSONSerialization.jsonObject(with: Data(run.stdout)) as? [[String: Any]])
    return Dictionary(uniqueKeysWithValues: records.map { ($0["name"] as! String, $0) })
  }

  /// `stats --json`'s hits and misses.
  static func counts(_ store: String) throws -> (local: Int?, remote: Int?, misses: Int?) {
    let run = try CLI.run(["--store", store, "stats", "--json"])
    let stats = try #require(
      try JSONSerialization.jsonObject(with: Data(run.stdout)) as? [String: Any])
    let hits = stats["hits"] as? [String: Any]
    return (hits?["local"] as? Int, hits?["remote"] as? Int, stats["misses"] as? Int)
  }

  @Test("get, path and has --remote of an object only the remote holds: pulled once, then local")
  func getReadsThrough() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (a, b) = try RemoteTests.twoStores(scratch, url: nginx.url("/rt"))
    let bytes = Bytes.random(250_000, seed: 1401)
    let other = Bytes.random(90_000, seed: 1402)
    let digest = try RemoteTests.put(a, bytes, in: scratch)
    let second = try RemoteTests.put(a, other, in: scratch)
    #expect(
      try RemoteTests.remote(a, ["push", digest.description, second.description]).status == 0)

    // has: absent locally; --remote asks (and downloads nothing).
    #expect(try CLI.run(["--store", b, "has", digest.description]).status == 1)
    let has = try CLI.run(["--store", b, "has", "-v", "--remote", digest.description])
    #expect(has.status == 0 && has.stderr.contains("present on remote 'shared'"), "\(has.stderr)")
    #expect(try RemoteTests.digests(b) == [])

    let got = try CLI.run(["--store", b, "get", digest.description, scratch["out"]])
    #expect(got.status == 0, "\(got.stderr)")
    #expect(try Data(contentsOf: URL(fileURLWithPath: scratch["out"])) == Data(bytes))
    #expect(try Set(RemoteTests.digests(b)) == [digest])
    let path = try CLI.run(["--store", b, "path", second.description])
    #expect(path.status == 0, "\(path.stderr)")
    #expect(
      try Data(contentsOf: URL(fileURLWithPath: path.out.trimmingCharacters(in: .newlines)))
        == Data(other))
    // The second get is local.
    #expect(try CLI.run(["--store", b, "get", digest.description, "-"]).stdout == bytes)
    let counts = try Self.counts(b)
    #expect(counts.local == 1 && counts.remote == 1 && counts.misses == 0, "\(counts)")
    let shared = try #require(try Self.status(b)["shared"])
    #expect(shared["hits"] as? Int == 2 && shared["misses"] as? Int == 0)
    #expect(shared["bytesPulled"] as? Int == bytes.count + other.count)
    #expect(shared["state"] as? String == "available" && shared["retryAt"] is NSNull)
    #expect(
      shared.keys.sorted() == [
        "bytesPulled", "consecutiveFailures", "corrupt", "errors", "hits", "misses", "name",
        "queuedBytes", "queuedObjects", "readOnly", "retryAt", "skipped", "state", "tooLargeBytes",
        "tooLargeObjects", "trust", "untrusted", "url", "write",
      ])
    #expect(RemoteTests.leftovers(b) == [])
    let human = try CLI.run(["--store", b, "stats"])
    #expect(human.out.contains("hits        1 local, 1 remote, 0 misses"), "\(human.out)")
  }

  @Test(
    "get of many objects only the remote holds reads them through together, each rehashed; one corrupt on the server is refused alone, and the get writes nothing until every object is held"
  )
  func getManyReadsThrough() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (a, b) = try RemoteTests.twoStores(scratch, url: nginx.url("/many"))
    let blobs = (0..<24).map { Bytes.random(20_000 + $0 * 997, seed: 1420 + UInt64($0)) }
    var digests: [BlobDigest] = []
    for bytes in blobs { digests.append(try RemoteTests.put(a, bytes, in: scratch)) }
    #expect(try RemoteTests.remote(a, ["push"] + digests.map(\.description)).status == 0)
    // A destination that cannot be made is found before anything is read.
    let noFolder = try CLI.run(
      ["--store", b, "get", "-C", scratch["out"]] + digests.map(\.description))
    #expect(noFolder.status == 73, "\(noFolder.stderr)")
    #expect(try RemoteTests.digests(b).isEmpty)
    try FileManager.default.createDirectory(
      atPath: scratch["out"], withIntermediateDirectories: false)

    // One blob replaced on the server: the get refuses it, stores the rest.
    let bad = digests[5]
    try nginx.files.write(
      "many/cas/\(bad.hex.prefix(2))/\(bad.hex)", Bytes.random(blobs[5].count, seed: 1419))
    let refused = try CLI.run(
      ["--store", b, "get", "-C", scratch["out"]] + digests.map(\.description))
    #expect(refused.status == 1, "\(refused.stderr)")
    #expect(
      refused.stderr.contains("remote 'shared' sent bytes that are not \(bad)"), "\(refused.stderr)"
    )
    #expect(scratch.list("out").isEmpty)
    #expect(Set(try RemoteTests.digests(b)) == Set(digests).subtracting([bad]))
    let shared = try #require(try Self.status(b)["shared"])
    #expect(shared["corrupt"] as? Int == 1 && shared["hits"] as? Int == 23, "\(shared)")

    try nginx.files.write("many/cas/\(bad.hex.prefix(2))/\(bad.hex)", blobs[5])
    let got = try CLI.run(
      ["--store", b, "get", "-C", scratch["out"]] + digests.map(\.description))
    #expect(got.status == 0, "\(got.stderr)")
    for (digest, bytes) in zip(digests, blobs) {
      #expect(try contents(scratch["out/" + digest.hex]) == bytes)
    }
    #expect(Set(try RemoteTests.digests(b)) == Set(digests))
    #expect(RemoteTests.leftovers(b) == [])
    // The 23 the store held after the first get were not asked for again.
    let first = digests[0]
    let asked = nginx.requests("/many/cas/\(first.hex.prefix(2))/\(first.hex)")
    #expect(asked.filter { $0.hasPrefix("GET") }.count == 1, "\(asked)")
  }

  @Test(
    "a remote that fails while many pulls are in flight stays skipped though a slower pull then completes"
  )
  func lateSuccessKeepsTheBreakerOpen() throws {
    let nginx = try Nginx(webDAV: true)
    let server = try FaultServer()
    let scratch = try Scratch()
    let a = scratch["a"]
    #expect(try RemoteTests.remote(a, ["add", "shared", nginx.url("/late")]).status == 0)
    let blobs = (0..<3).map { Bytes.random(30_000 + $0, seed: 1470 + UInt64($0)) }
    var digests: [BlobDigest] = []
    for bytes in blobs { digests.append(try RemoteTests.put(a, bytes, in: scratch)) }
    #expect(try RemoteTests.remote(a, ["push"] + digests.map(\.description)).status == 0)
    // The same layout served by the fault server: the first blob answers
    // 1.5 s late, the second 0.5 s late with 503 (the remote failing
    // whole), the third at once — before the failure, whatever the order
    // the pulls go out in.
    try FileManager.default.copyItem(atPath: nginx.files["late"], toPath: server.tree)
    let blob = { (d: BlobDigest) in server.tree + "/cas/\(d.hex.prefix(2))/\(d.hex)" }
    FileManager.default.createFile(atPath: blob(digests[0]) + ".late", contents: nil)
    FileManager.default.createFile(atPath: blob(digests[1]) + ".fail", contents: nil)
    FileManager.default.createFile(atPath: blob(digests[1]) + ".soon", contents: nil)

    for (name, command) in [
      ("b", ["get", "-C", scratch["out"]]), ("c", ["remote", "pull"]),
    ] {
      let store = scratch[name]
      #expect(try RemoteTests.remote(store, ["add", "shared", server.url("/tree")]).status == 0)
      try FileManager.default.createDirectory(
        atPath: scratch["out"], withIntermediateDirectories: true)
      let run = try CLI.run(["--store", store] + command + digests.map(\.description))
      #expect(run.status != 0, "\(name): \(run.stderr)")
      let held = try RemoteTests.digests(store)
      #expect(Set(held) == [digests[0], digests[2]], "\(name): \(held) \(run.stderr)")
      let shared = try #require(try Self.status(store)["shared"])
      #expect(shared["state"] as? String == "unavailable", "\(name): \(shared)")
      #expect((shared["consecutiveFailures"] as? Int ?? 0) >= 1, "\(name): \(shared)")
    }
  }

  @Test("a corrupt blob on the remote is counted, never stored; the get is a miss with a warning")
  func corruptIsAMiss() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let (a, b) = try RemoteTests.twoStores(scratch, url: redis.url(database: 6))
    let digest = try RemoteTests.put(a, Bytes.random(70_000, seed: 1403), in: scratch)
    #expect(try RemoteTests.remote(a, ["push", digest.description]).status == 0)
    try redis.command(
      ["SET", "trove:cas:\(digest.hex)"], database: 6, payload: Bytes.random(70_000, seed: 1404))

    let got = try CLI.run(["--store", b, "get", digest.description, scratch["out"]])
    #expect(got.status == 1, "\(got.stderr)")
    #expect(
      got.stderr.contains("trove: warning: remote 'shared' sent bytes that are not \(digest)"),
      "\(got.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["out"]))
    #expect(try RemoteTests.digests(b) == [])
    #expect(RemoteTests.leftovers(b) == [])
    let shared = try #require(try Self.status(b)["shared"])
    #expect(shared["corrupt"] as? Int == 1 && shared["hits"] as? Int == 0)
    #expect(shared["state"] as? String == "available")
    let counts = try Self.counts(b)
    #expect(counts.local == 0 && counts.remote == 0 && counts.misses == 1)
  }

  @Test("a dead remote: one failed connect opens its breaker; 20 later processes skip it")
  func deadRemoteBreaker() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(
      try RemoteTests.remote(store, ["add", "gone", "http://127.0.0.1:\(deadPort())/x"]).status
        == 0)
    let local = try RemoteTests.put(store, Bytes.random(1000, seed: 1405), in: scratch)
    let absent = XXH3Hasher.digest(Bytes.random(10, seed: 1406))
    let first = try CLI.run(["--store", store, "get", absent.description, scratch["o"]])
    #expect(first.status == 1)
    #expect(first.stderr.contains("trove: warning: remote 'gone': "), "\(first.stderr)")
    #expect(first.stderr.contains("; skipped for 60 s\n"), "\(first.stderr)")
    for _ in 0..<20 {
      let run = try CLI.run(["--store", store, "get", absent.description, scratch["o"]])
      #expect(run.status == 1 && !run.stderr.contains("remote 'gone'"), "\(run.stderr)")
    }
    // Local work is untouched by it.
    #expect(try CLI.run(["--store", store, "get", local.description, "-"]).status == 0)
    var gone = try #require(try Self.status(store)["gone"])
    #expect(gone["errors"] as? Int == 1 && gone["skipped"] as? Int == 20, "\(gone)")
    #expect(gone["state"] as? String == "unavailable" && gone["retryAt"] is String)
    #expect(gone["consecutiveFailures"] as? Int == 1)
    let human = try RemoteTests.remote(store, ["status"])
    #expect(human.out.contains("gone  http://127.0.0.1:"), "\(human.out)")
    #expect(human.out.contains("unavailable (1 failure in a row), skipped until "))

    // The interval over, one probe; its failure doubles the interval.
    let opened = try Store(StoreConfiguration(root: store))
    try opened.index().write("test") { (tx) throws(TroveError) in
      try tx.setRemote("gone", ["retry-at": currentTimeNanoseconds() - 1])
    }
    let probe = try CLI.run(["--store", store, "get", absent.description, scratch["o"]])
    #expect(probe.stderr.contains("; skipped for 120 s\n"), "\(probe.stderr)")
    gone = try #require(try Self.status(store)["gone"])
    #expect(gone["errors"] as? Int == 2 && gone["consecutiveFailures"] as? Int == 2)

    // Removing the remote forgets its breaker and counts.
    #expect(try RemoteTests.remote(store, ["rm", "gone"]).status == 0)
    let record = try opened.index().read("test") { (tx) throws(TroveError) in
      try tx.remoteRecord("gone")
    }
    #expect(record == RemoteRecord())
  }

  @Test("a probe that reaches the remote closes its breaker, and the object is read through")
  func probeCloses() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (a, b) = try RemoteTests.twoStores(scratch, url: nginx.url("/probe"))
    let digest = try RemoteTests.put(a, Bytes.random(40_000, seed: 1407), in: scratch)
    #expect(try RemoteTests.remote(a, ["push", digest.description]).status == 0)
    let opened = try Store(StoreConfiguration(root: b))
    // Open, not yet due: skipped.
    try opened.index().write("test") { (tx) throws(TroveError) in
      try tx.setRemote(
        "shared", ["failures": 3, "retry-at": currentTimeNanoseconds() + 600_000_000_000])
    }
    #expect(try CLI.run(["--store", b, "get", digest.description, scratch["x"]]).status == 1)
    #expect(try Self.status(b)["shared"]?["skipped"] as? Int == 1)
    // Due: probed, and it answers.
    try opened.index().write("test") { (tx) throws(TroveError) in
      try tx.setRemote("shared", ["retry-at": currentTimeNanoseconds() - 1])
    }
    let got = try CLI.run(["--store", b, "get", digest.description, scratch["y"]])
    #expect(got.status == 0, "\(got.stderr)")
    let shared = try #require(try Self.status(b)["shared"])
    #expect(shared["state"] as? String == "available" && shared["consecutiveFailures"] as? Int == 0)
    #expect(shared["hits"] as? Int == 1)
  }
}

/// A fetch read through the remotes' key records: the
/// URL a fetch stored on one machine is served on another from the remote,
/// revalidated with the origin first (a 304, no body): the record's
/// validators are used, its freshness is not.
@Suite(
  "fetch through remotes",
  .enabled(if: Nginx.executable != nil, Nginx.missing))
struct RemoteFetchTests {
  @Test("a URL fetched on A is served on B from the remote after a 304, fresh or stale")
  func fetchReadsThrough() throws {
    let origin = try Nginx()
    let dav = try Nginx(webDAV: true)
    let fresh = Bytes.random(200_000, seed: 1901)
    let stale = Bytes.random(150_000, seed: 1902)
    _ = try origin.files.write("fresh.bin", fresh)
    _ = try origin.files.write("stale.bin", stale)
    let scratch = try Scratch()
    let (a, b) = (scratch["a"], scratch["b"])
    #expect(
      try RemoteTests.remote(a, ["add", "shared", dav.url("/f"), "--write", "sync"]).status == 0)
    #expect(try RemoteTests.remote(b, ["add", "shared", dav.url("/f"), "--read-only"]).status == 0)
    let freshURL = origin.url("/fresh/fresh.bin")
    let staleURL = origin.url("/stale.bin")
    for url in [freshURL, staleURL] {
      let fetched = try CLI.run(["--store", a, "fetch", url])
      #expect(fetched.status == 0, "\(fetched.stderr)")
    }
    #expect(origin.requests("/fresh/fresh.bin").count == 1)
    #expect(origin.requests("/stale.bin").count == 1)

    // B: fresh per the record, which is not the origin's word: a 304, then
    // fresh per the origin's own answer, no request.
    let one = try CLI.run(["--store", b, "fetch", "--json", freshURL, "-o", scratch["one"]])
    #expect(one.status == 0, "\(one.stderr)")
    let records = try JSONSerialization.jsonObject(with: Data(one.stdout)) as? [[String: Any]]
    #expect(records?.first?["source"] as? String == "revalidated", "\(one.out)")
    #expect(try Data(contentsOf: URL(fileURLWithPath: scratch["one"])) == Data(fresh))
    let freshAsked = origin.requests("/fresh/fresh.bin")
    #expect(freshAsked.count == 2 && freshAsked[1].contains(" 304 0 "), "\(freshAsked)")
    let cached = try CLI.run(["--store", b, "fetch", "--json", freshURL])
    let again = try JSONSerialization.jsonObject(with: Data(cached.stdout)) as? [[String: Any]]
    #expect(again?.first?["source"] as? String == "cache", "\(cached.out)")
    #expect(origin.requests("/fresh/fresh.bin").count == 2)
    // Stale: revalidated with the record's validators, no body sent.
    let two = try CLI.run(["--store", b, "fetch", "--json", staleURL])
    #expect(two.status == 0, "\(two.stderr)")
    let second = try JSONSerialization.jsonObject(with: Data(two.stdout)) as? [[String: Any]]
    #expect(second?.first?["source"] as? String == "revalidated", "\(two.out)")
    let asked = origin.requests("/stale.bin")
    #expect(asked.count == 2 && asked[1].contains(" 304 0 "), "\(asked)")
    let counts = try RemoteReadThroughTests.counts(b)
    #expect(counts.remote == 2 && counts.misses == 0, "\(counts)")
    #expect(try RemoteTests.digests(b).count == 2)
  }
}

/// `get KEY` of a key only a remote's record names.
@Suite(
  "get by key through remotes",
  .enabled(if: Nginx.executable != nil, Nginx.missing))
struct RemoteKeyGetTests {
  @Test("a key bound on A is found on B through the remote's record; an unknown key is a miss")
  func getByKey() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (a, b) = (scratch["a"], scratch["b"])
    #expect(
      try RemoteTests.remote(a, ["add", "shared", dav.url("/k"), "--write", "sync"]).status == 0)
    #expect(try RemoteTests.remote(b, ["add", "shared", dav.url("/k"), "--read-only"]).status == 0)
    let bytes = Bytes.random(70_000, seed: 2201)
    let file = try scratch.write("in", bytes)
    #expect(try CLI.run(["--store", a, "put", "--key", "models/base", file]).status == 0)
    let got = try CLI.run(["--store", b, "get", "models/base", scratch["out"]])
    #expect(got.status == 0, "\(got.stderr)")
    #expect(try Data(contentsOf: URL(fileURLWithPath: scratch["out"])) == Data(bytes))
    let keys = try CLI.run(["--store", b, "keys"])
    #expect(keys.out.contains("models/base"), "\(keys.out)")
    let none = try CLI.run(["--store", b, "get", "models/none", scratch["none"]])
    #expect(none.status == 1 && none.stderr.contains("no key 'models/none'"), "\(none.stderr)")
    // A record found under another key's name is ignored.
    let record = dav.files["k/keys/\(XXH3Hasher.digest(Array("models/base".utf8)).hex).json"]
    let forged = dav.files["k/keys/\(XXH3Hasher.digest(Array("models/forged".utf8)).hex).json"]
    try FileManager.default.copyItem(atPath: record, toPath: forged)
    let misled = try CLI.run(["--store", b, "get", "models/forged", scratch["forged"]])
    #expect(misled.status == 1, "\(misled.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["forged"]))

    // A record claiming a checksum its blob does not have binds nothing,
    // and the claim is never recorded as the object's.
    let digest = XXH3Hasher.digest(bytes)
    let lie = "sha256:" + String(repeating: "ab", count: 32)
    let json =
      #"{"checksums":["\#(lie)"],"digest":"\#(digest)","key":"models/lying","origin":null}"#
    try Data(json.utf8).write(
      to: URL(
        fileURLWithPath: dav.files[
          "k/keys/\(XXH3Hasher.digest(Array("models/lying".utf8)).hex).json"]))
    let lying = try CLI.run(["--store", b, "get", "models/lying", scratch["lying"]])
    #expect(lying.status == 1, "\(lying.stderr)")
    #expect(lying.stderr.contains("says \(digest) has \(lie), which its bytes do not"))
    #expect(try CLI.run(["--store", b, "has", lie]).status == 1)
    let real = try CLI.run(["--store", b, "show", "--json", digest.description])
    #expect(!real.out.contains(lie))
  }
}

/// The breaker's count of failures in a row.
@Suite("circuit breaker")
struct CircuitBreakerTests {
  @Test(
    "failures of requests let through together open the breaker once; a failed probe doubles it")
  func concurrentFailuresCountOnce() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    func record() throws -> RemoteRecord {
      try store.index().read("test") { (tx) throws(TroveError) in try tx.remoteRecord("r") }
    }
    for _ in 0..<12 { store.remoteFailed("r") }
    var now = try record()
    #expect(now.failures == 1 && now.errors == 12)
    #expect(now.retryAt > currentTimeNanoseconds() + 50_000_000_000)
    // The interval over: a probe's failure is the second in a row.
    try store.index().write("test") { (tx) throws(TroveError) in
      try tx.setRemote("r", ["retry-at": currentTimeNanoseconds() - 1])
    }
    #expect(store.remoteFailed("r") == 120_000_000_000)
    now = try record()
    #expect(now.failures == 2)
    store.remoteAnswered("r")
    #expect(try record().failures == 0)
  }
}
