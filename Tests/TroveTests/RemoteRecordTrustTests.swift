import Foundation
import Testing

@testable import Trove

/// Key records and blobs on a remote are any writer's: what a record says
/// goes into requests to origins, lengths and freshness only as far as the
/// store can check them. Against real nginx (WebDAV and origin),
/// redis-server and the fault server on 127.0.0.1, through the CLI.
@Suite(
  "remote key records as untrusted input",
  .enabled(if: Nginx.executable != nil, Nginx.missing),
  .enabled(if: FaultServer.python != nil, FaultServer.missing))
struct RemoteRecordTrustTests {
  /// Stores `a` (writing to the WebDAV remote under `base` as it fetches)
  /// and `b` (reading it); `a` fetches each of `urls`, so the remote holds
  /// their blobs and key records.
  static func publish(_ urls: [String], dav: Nginx, base: String, scratch: Scratch) throws
    -> (a: String, b: String)
  {
    let (a, b) = (scratch["a"], scratch["b"])
    let url = dav.url("/" + base)
    #expect(try RemoteTests.remote(a, ["add", "shared", url, "--write", "sync"]).status == 0)
    #expect(try RemoteTests.remote(b, ["add", "shared", url, "--read-only"]).status == 0)
    for url in urls {
      let fetched = try CLI.run(["--store", a, "fetch", url])
      #expect(fetched.status == 0, "\(fetched.stderr)")
      #expect(FileManager.default.fileExists(atPath: Self.record(dav, base, url)))
    }
    return (a, b)
  }

  /// The record file of `key` under nginx's `base`.
  static func record(_ dav: Nginx, _ base: String, _ key: String) -> String {
    RemoteKeyPullTests.recordPath(dav, base, key)
  }

  /// Rewrites the `origin` of `key`'s record under `base`, as a writer
  /// with access to the remote could.
  static func tamper(
    _ dav: Nginx, _ base: String, _ key: String, _ change: (inout [String: Any]) -> Void
  ) throws {
    let url = URL(fileURLWithPath: record(dav, base, key))
    var json = try #require(
      try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
    var origin = try #require(json["origin"] as? [String: Any])
    change(&origin)
    json["origin"] = origin
    try JSONSerialization.data(withJSONObject: json).write(to: url)
  }

  /// `fetch --json URL` in `store`: its status and its one record.
  static func fetch(_ store: String, _ arguments: [String]) throws -> (
    Int32, [String: Any]?, String
  ) {
    let run = try CLI.run(["--store", store, "fetch", "--json"] + arguments)
    let records = try? JSONSerialization.jsonObject(with: Data(run.stdout)) as? [[String: Any]]
    return (run.status, records?.first, run.stderr)
  }

  @Test(
    "validators holding CR LF make a record unusable: counted corrupt, never sent to the origin")
  func injectedValidators() throws {
    let server = try FaultServer()
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let etagURL = server.url("/ok/etag?size=5000")
    let dateURL = server.url("/ok/date?size=6000")
    let (_, b) = try Self.publish([etagURL, dateURL], dav: dav, base: "inj", scratch: scratch)
    try Self.tamper(dav, "inj", etagURL) { $0["etag"] = "\"v1\"\r\nX-Injected: 1" }
    try Self.tamper(dav, "inj", dateURL) {
      $0["etag"] = nil
      $0["lastModified"] = "Mon, 02 Nov 2026 10:00:00 GMT\r\nX-Injected: 2"
    }
    for (url, name, size) in [(etagURL, "etag", 5000), (dateURL, "date", 6000)] {
      let fetched = try CLI.run(["--store", b, "fetch", url])
      #expect(fetched.status == 0, "\(fetched.stderr)")
      #expect(fetched.stderr.contains("is not usable"), "\(fetched.stderr)")
      let digest = XXH3Hasher.digest(try server.body(name, size: size))
      #expect(fetched.out == "\(digest)  \(url)\n", "\(fetched.out)")
    }
    let headers = server.headerLog().joined(separator: "\n")
    #expect(!headers.contains("X-Injected"), "\(headers)")
    let shared = try #require(try RemoteReadThroughTests.status(b)["shared"])
    #expect(shared["corrupt"] as? Int == 2, "\(shared)")
  }

  @Test("a part whose sidecar's validator holds CR LF is not resumed with it")
  func injectedResumeValidator() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let url = server.url("/ok/part?size=100000")
    let body = try server.body("part", size: 100_000)
    _ = try scratch.store()
    let partial = scratch["store/partial"]
    try FileManager.default.createDirectory(atPath: partial, withIntermediateDirectories: true)
    let name = PartialDownload.name(of: url, access: .private)
    try Data(body[..<40_000]).write(to: URL(fileURLWithPath: partial + "/" + name + ".part"))
    let sidecar: [String: Any] = [
      "url": url, "validator": "\"v1\"\r\nX-Injected: 1", "total": 100_000,
      "boot": PartialDownload.bootID,
    ]
    try JSONSerialization.data(withJSONObject: sidecar).write(
      to: URL(fileURLWithPath: partial + "/" + name + ".json"))
    let fetched = try CLI.run(["--store", scratch["store"], "fetch", url])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    #expect(fetched.out == "\(XXH3Hasher.digest(body))  \(url)\n", "\(fetched.out)")
    let headers = server.headerLog().joined(separator: "\n")
    #expect(!headers.contains("X-Injected"), "\(headers)")
  }

  @Test("a record whose size is not its blob's binds nothing; --expect-size checks the body's own")
  func recordSizeChecked() throws {
    let server = try FaultServer()
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let url = server.url("/ok/sized?size=100000")
    let (_, b) = try Self.publish([url], dav: dav, base: "sz", scratch: scratch)
    try Self.tamper(dav, "sz", url) { $0["size"] = 5 }
    let (status, record, stderr) = try Self.fetch(b, ["--expect-size", "5", url])
    #expect(status == 65, "\(stderr)")
    #expect(record?["error"] as? String != nil, "\(String(describing: record))")
    #expect(stderr.contains("says") && stderr.contains("is 5 bytes, and it is 100000"), "\(stderr)")
    let shared = try #require(try RemoteReadThroughTests.status(b)["shared"])
    #expect(shared["corrupt"] as? Int == 1, "\(shared)")
    // Unbound, the URL is fetched from the origin, and its own length told.
    let (again, served, _) = try Self.fetch(b, [url])
    #expect(again == 0 && served?["size"] as? Int == 100_000, "\(String(describing: served))")
    #expect(
      served?["source"] as? String == "revalidated" || served?["source"] as? String == "network")
  }

  @Test("a record pulled from a remote is revalidated before it is served; --refresh always asks")
  func pulledRecordsAreRevalidated() throws {
    let origin = try Nginx()
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let bytes = Bytes.random(60_000, seed: 2801)
    _ = try origin.files.write("imm.bin", bytes)
    let url = origin.url("/immutable/imm.bin")
    let (a, b) = try Self.publish([url], dav: dav, base: "fr", scratch: scratch)
    #expect(origin.requests("/immutable/imm.bin").count == 1)

    // Fresh and immutable in A's own store: --refresh asks all the same.
    let (refreshed, one, _) = try Self.fetch(a, ["--refresh", url])
    #expect(
      refreshed == 0 && one?["source"] as? String == "revalidated", "\(String(describing: one))")
    var asked = origin.requests("/immutable/imm.bin")
    #expect(asked.count == 2 && asked.last?.contains(" 304 ") == true, "\(asked)")

    // The record says immutable and fresh for a year: bound in B without either.
    try Self.tamper(dav, "fr", url) { $0["expires"] = Int64.max / 2 }
    let pulled = try RemoteTests.remote(b, ["pull", url])
    #expect(pulled.status == 0, "\(pulled.stderr)")
    let keys = try CLI.run(["--store", b, "keys", "--json"])
    let bound = try #require(
      try JSONSerialization.jsonObject(with: Data(keys.stdout)) as? [[String: Any]]
    ).first
    #expect(bound?["immutable"] as? Bool == false, "\(String(describing: bound))")
    #expect(bound?["freshUntil"] is NSNull, "\(String(describing: bound))")
    #expect(bound?["etag"] as? String != nil, "\(String(describing: bound))")

    // So B's first fetch asks the origin (a 304: the remote saved the body).
    let (first, two, _) = try Self.fetch(b, [url])
    #expect(first == 0 && two?["source"] as? String == "revalidated", "\(String(describing: two))")
    asked = origin.requests("/immutable/imm.bin")
    #expect(asked.count == 3 && asked.last?.contains(" 304 0 ") == true, "\(asked)")
    // Then the origin's own answer made it fresh: served with no request.
    let (second, three, _) = try Self.fetch(b, [url])
    #expect(second == 0 && three?["source"] as? String == "cache", "\(String(describing: three))")
    #expect(origin.requests("/immutable/imm.bin").count == 3)
    // And --refresh asks again.
    let (third, four, _) = try Self.fetch(b, ["--refresh", url])
    #expect(
      third == 0 && four?["source"] as? String == "revalidated", "\(String(describing: four))")
    #expect(origin.requests("/immutable/imm.bin").count == 4)
  }

  @Test(
    "an endless key record on WebDAV is read up to 64 KiB: a failure for the breaker, the fetch goes on"
  )
  func endlessRecord() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let added = try RemoteTests.remote(
      store, ["add", "endless", server.url("/endlessrecord"), "--read-only"])
    #expect(added.status == 0, "\(added.stderr)")
    let url = server.url("/ok/e?size=3000")
    let fetched = try CLI.run(["--store", store, "fetch", url])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    #expect(fetched.stderr.contains("longer than 64 KiB"), "\(fetched.stderr)")
    let status = try #require(try RemoteReadThroughTests.status(store)["endless"])
    #expect(
      status["errors"] as? Int == 1 && status["consecutiveFailures"] as? Int == 1, "\(status)")
    let ended = poll(times: 250) {
      server.requests().first { $0.hasPrefix("CUT ") || $0.hasPrefix("SENT ") }
    }
    #expect(ended?.hasPrefix("CUT /endlessrecord/keys/") == true, "\(server.requests())")
  }

  @Test(
    "an error answer with an endless body is read a few KiB: the remote fails, the fetch goes on")
  func endlessErrorBody() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let added = try RemoteTests.remote(
      store, ["add", "flood", server.url("/errorflood"), "--read-only"])
    #expect(added.status == 0, "\(added.stderr)")
    let url = server.url("/ok/f?size=3000")
    let fetched = try CLI.run(["--store", store, "fetch", url])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    #expect(fetched.stderr.contains("HTTP 500"), "\(fetched.stderr)")
    let status = try #require(try RemoteReadThroughTests.status(store)["flood"])
    #expect(status["errors"] as? Int == 1, "\(status)")
    let ended = poll(times: 250) {
      server.requests().first { $0.hasPrefix("CUT ") || $0.hasPrefix("SENT ") }
    }
    #expect(ended == "CUT /errorflood/trove-remote.json", "\(server.requests())")
  }
}

/// A Redis value past the key record limit.
@Suite(
  "oversized key records on Redis",
  .enabled(if: RedisServer.executable != nil, RedisServer.missing),
  .enabled(if: FaultServer.python != nil, FaultServer.missing))
struct RedisRecordLimitTests {
  @Test("a Redis key record over 64 KiB is not read past it: a failure for the breaker")
  func oversizedRecord() throws {
    let redis = try RedisServer()
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let added = try RemoteTests.remote(
      store, ["add", "shared", redis.url(database: 5), "--read-only"])
    #expect(added.status == 0, "\(added.stderr)")
    let url = server.url("/ok/r?size=3000")
    try redis.command(
      ["SET", RemoteNames.redisKeyRecordKey(url)], database: 5,
      payload: [UInt8](repeating: 0x20, count: 200_000))
    let fetched = try CLI.run(["--store", store, "fetch", url])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    #expect(fetched.stderr.contains("longer than 64 KiB"), "\(fetched.stderr)")
    let status = try #require(try RemoteReadThroughTests.status(store)["shared"])
    #expect(status["errors"] as? Int == 1, "\(status)")
  }
}

/// Evicting an object first because a remote holds it.
@Suite(
  "remote copies trusted for eviction",
  .enabled(if: Nginx.executable != nil, Nginx.missing))
struct RemoteCopyTrustTests {
  @Test(
    "a blob of the right length this store neither uploaded nor checked lets no sweep evict first")
  func garbageOfTheRightLength() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try RemoteTests.remote(store, ["add", "shared", nginx.url("/gl")]).status == 0)
    var digests: [BlobDigest] = []
    var contents: [[UInt8]] = []
    for i in 0..<3 {
      contents.append(Bytes.random(100_000, seed: UInt64(2810 + i)))
      digests.append(try RemoteTests.put(store, contents[i], in: scratch))
      usleep(20_000)  // distinct last accesses: 0 is the least recently used
    }
    // Another writer put garbage of the same length under digests[1]'s name.
    let blob = nginx.files["gl/" + remoteBlobPath(digests[1])]
    try FileManager.default.createDirectory(
      atPath: (blob as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try Data(Bytes.random(100_000, seed: 2819)).write(to: URL(fileURLWithPath: blob))
    let push = try RemoteTests.remote(store, ["push", digests[1].description])
    #expect(push.status == 0 && push.out == "\(digests[1])  already on 'shared'\n", "\(push.out)")

    #expect(try CLI.run(["--store", store, "sweep", "--budget", "250K"]).status == 0)
    // Plain LRU: the oldest went; the only good copy of digests[1] stayed.
    #expect(try Set(RemoteTests.digests(store)) == [digests[1], digests[2]])
    let got = try CLI.run(["--store", store, "get", digests[1].description, "-"])
    #expect(got.status == 0 && got.stdout == contents[1], "\(got.stderr)")
  }
}

/// The one place a conditional header is made from a kept validator.
@Suite("conditional request headers")
struct ConditionalRequestTests {
  @Test(
    "a validator is sent only as 1 to 1024 bytes of visible ASCII; Last-Modified only as a date")
  func onlyPlainValidators() {
    let date = "Mon, 02 Nov 2026 10:00:00 GMT"
    for safe in ["\"v1\"", "W/\"a b\"", date, String(repeating: "a", count: 1024)] {
      #expect(ConditionalRequest.isSafe(safe), "\(safe)")
    }
    for unsafe in [
      "", "\"v1\"\r\nX-Injected: 1", "a\nb", "a\rb", "a\u{0}b", "a\tb", "\u{7f}", "caf\u{e9}",
      "a\u{202e}b", " v1", "v1 ", String(repeating: "a", count: 1025),
    ] {
      #expect(!ConditionalRequest.isSafe(unsafe), "\(unsafe.debugDescription)")
    }
    #expect(ConditionalRequest.isDate(date) && !ConditionalRequest.isDate("yesterday"))

    var origin = KeyOrigin(
      size: 1, etag: "\"v1\"\r\nX-Injected: 1", lastModified: date, expires: nil,
      isImmutable: false, finalURL: nil, fetched: 0)
    #expect(ConditionalRequest.revalidation(origin) == ["If-Modified-Since: \(date)"])
    origin.lastModified = "x\r\ny"
    #expect(ConditionalRequest.revalidation(origin).isEmpty)
    #expect(!ConditionalRequest.canRevalidate(origin))
    #expect(ConditionalRequest.resumption("\"v1\"") == "If-Range: \"v1\"")
    #expect(ConditionalRequest.resumption("\"v1\"\r\nX: 1") == nil)
  }
}
