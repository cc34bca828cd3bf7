import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// Remotes that misbehave: a hostile Redis (`Tests/Servers/resp_server.py`)
/// whose replies break the protocol or Trove's limits, a temp key that
/// vanishes mid-upload on a real redis-server, names that do not resolve,
/// socket options that cannot be set. Each is one line and a documented
/// exit status, never a crash, a hang or a wrong blob.
@Suite(
  .enabled(if: FaultServer.python != nil, FaultServer.missing),
  .enabled(if: RedisServer.executable != nil, RedisServer.missing))
struct RemoteHostileTests {
  static let absent = try! BlobDigest(parsing: "xxh128:" + String(repeating: "ab", count: 16))

  /// A store with the hostile server added as remote `hostile`.
  static func store(_ scratch: Scratch, url: String) throws -> String {
    let store = scratch["store"]
    let added = try RemoteTests.remote(store, ["add", "hostile", url])
    #expect(added.status == 0, "\(added.stderr)")
    return store
  }

  @Test(
    "a malformed Redis reply (overflowing or huge length, deep or wide arrays, no CRLF) is one line naming the remote, exit 69",
    arguments: ["overflow", "huge", "nested", "wide", "nocrlf"], ["GET", "GETRANGE"])
  func malformedReply(mode: String, command: String) throws {
    let server = try HostileRedis(mode, answering: command)
    let scratch = try Scratch()
    let store = try Self.store(scratch, url: server.url)
    // GET is the layout record `check` reads whole; GETRANGE the blob
    // `pull` streams.
    let result =
      command == "GET"
      ? try RemoteTests.remote(store, ["check", "hostile"])
      : try RemoteTests.remote(store, ["pull", Self.absent.description])
    #expect(result.status == 69, "\(mode) \(command): \(result.status) \(result.stderr)")
    #expect(result.errorLines.count == 1, "\(mode) \(command): \(result.stderr)")
    #expect(
      result.stderr.hasPrefix("Error: remote 'hostile' (\(server.url)): malformed reply ("),
      "\(mode) \(command): \(result.stderr)")
    #expect(RemoteTests.leftovers(store) == [])
  }

  @Test(
    "a Redis error line with control characters, 60,000 long, is shown escaped and cut to 200 characters",
    arguments: ["GET", "GETRANGE"])
  func hostileErrorLine(command: String) throws {
    let server = try HostileRedis("error", answering: command)
    let scratch = try Scratch()
    let store = try Self.store(scratch, url: server.url)
    let result =
      command == "GET"
      ? try RemoteTests.remote(store, ["check", "hostile"])
      : try RemoteTests.remote(store, ["pull", Self.absent.description])
    #expect(result.status == 69, "\(result.stderr)")
    #expect(result.errorLines.count == 1, "\(result.stderr)")
    #expect(!result.stderr.contains("\u{1b}") && !result.stderr.contains("\r"))
    #expect(result.stderr.contains("ERR \\x1b[31mred\\rover"), "\(result.stderr)")
    #expect(result.stderr.contains("AAAA…"), "\(result.stderr)")
    #expect(result.stderr.count < 400, "\(result.stderr.count) characters")
  }

  @Test("a Redis reply trickled at 1 byte/s (never silent for 15 s) stalls: one line, exit 75")
  func trickle() throws {
    let server = try HostileRedis("trickle", answering: "GETRANGE")
    let scratch = try Scratch()
    let store = try Self.store(scratch, url: server.url)
    let result = try RemoteTests.remote(store, ["pull", Self.absent.description])
    #expect(result.status == 75, "\(result.stderr)")
    #expect(result.errorLines.count == 1, "\(result.stderr)")
    #expect(result.stderr.contains("the reply stalled ("), "\(result.stderr)")
    #expect(try RemoteTests.digests(store) == [])
    #expect(RemoteTests.leftovers(store) == [])
  }

  @Test("a Redis host name that does not resolve fails at once with one line, exit 69")
  func unresolvable() throws {
    let scratch = try Scratch()
    let store = try Self.store(scratch, url: "redis://no-such-host.invalid:6379")
    let started = ContinuousClock.now
    let result = try RemoteTests.remote(store, ["check", "hostile"])
    let elapsed = ContinuousClock.now - started
    #expect(result.status == 69)
    #expect(
      result.errorLines.count == 1
        && result.errorLines[0].contains("cannot resolve host 'no-such-host.invalid'"),
      "\(result.stderr)")
    // Resolving waits at most 3 s; the bound leaves room for process start.
    #expect(elapsed < .seconds(8), "\(elapsed)")
  }

  @Test("a socket option that cannot be set is one line naming setsockopt, exit 69")
  func socketOptionFails() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let store = try Self.store(scratch, url: redis.url(database: 10))
    let result = try RemoteTests.remote(
      store, ["check", "hostile"], environment: ["TROVE_INJECT_FAULT": "setsockopt:22"])
    #expect(result.status == 69)
    #expect(result.errorLines.count == 1, "\(result.stderr)")
    #expect(result.stderr.contains("(setsockopt, errno 22)"), "\(result.stderr)")
  }

  @Test(
    "Redis scripts: an append to a vanished temp key fails and creates nothing; a temp key of the wrong length is never published"
  )
  func scriptsRefuseCutShortUploads() throws {
    let redis = try RedisServer()
    let blob = "trove:cas:" + Self.absent.hex
    // APPEND would re-create a vanished temp key holding only the tail.
    let appended = try redis.command(
      ["EVAL", RedisBackend.appendScript, "1", "trove:tmp:gone", "4"], database: 11,
      payload: Array("TAIL".utf8))
    #expect(appended == .integer(-1))
    #expect(try redis.command(["EXISTS", "trove:tmp:gone"], database: 11) == .integer(0))
    // The brief's reproduction: a temp key holding the tail alone.
    try redis.command(["SET", "trove:tmp:short", "TAIL"], database: 11)
    let published = try redis.command(
      ["EVAL", RedisBackend.publishScript, "2", "trove:tmp:short", blob, "8"], database: 11)
    #expect(published == .integer(-1))
    #expect(try redis.keys("*", database: 11) == [])
    // Whole: published, permanent.
    try redis.command(["SET", "trove:tmp:whole", "HEADTAIL", "EX", "60"], database: 11)
    let whole = try redis.command(
      ["EVAL", RedisBackend.publishScript, "2", "trove:tmp:whole", blob, "8"], database: 11)
    #expect(whole == .integer(1))
    #expect(try redis.value(blob, database: 11) == Array("HEADTAIL".utf8))
    #expect(try redis.command(["TTL", blob], database: 11) == .integer(-1))
  }

  @Test(
    "Redis: a cut-short blob left by an older client (wrong length) is replaced by the next push, then pulled"
  )
  func replacesCutShortBlob() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let (a, b) = try RemoteTests.twoStores(scratch, url: redis.url(database: 12))
    let bytes = Bytes.random(5 << 20, seed: 40)
    let digest = try RemoteTests.put(a, bytes, in: scratch)
    let key = "trove:cas:\(digest.hex)"
    try redis.command(["SET", key], database: 12, payload: Array(bytes.suffix(1 << 20)))
    let pushed = try RemoteTests.remote(a, ["push", digest.description])
    #expect(pushed.status == 0, "\(pushed.stderr)")
    #expect(pushed.out == "\(digest)  uploaded to 'shared'\n")
    #expect(try redis.value(key, database: 12) == bytes)
    #expect(try redis.keys("trove:tmp:*", database: 12) == [])
    let pulled = try RemoteTests.remote(b, ["pull", digest.description])
    #expect(pulled.status == 0, "\(pulled.stderr)")
    #expect(try RemoteTests.digests(b) == [digest])
  }

  @Test(
    "Redis: a temp key deleted mid-upload (as an expiry or eviction would) fails the push, exit 75, and publishes nothing"
  )
  func tempKeyVanishes() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let (a, _) = try RemoteTests.twoStores(scratch, url: redis.url(database: 13))
    var caught = false
    for round in 0..<4 where !caught {
      let digest = try RemoteTests.put(
        a, Bytes.random(32 << 20, seed: 50 + UInt64(round)), in: scratch)
      let key = "trove:cas:\(digest.hex)"
      let push = try Spawned(
        ["--store", a, "remote", "push", digest.description], io: scratch["push-\(round)"])
      var temps: [String] = []
      while push.process.isRunning {
        temps = try redis.keys("trove:tmp:*", database: 13)
        if !temps.isEmpty {
          Glibc.kill(push.pid, SIGSTOP)
          caught = push.process.isRunning
          break
        }
        usleep(200)
      }
      if caught {
        for temp in temps { try redis.command(["DEL", temp], database: 13) }
      }
      Glibc.kill(push.pid, SIGCONT)
      let outcome = try push.wait()
      if caught {
        #expect(outcome.status == 75, "\(outcome)")
        #expect(outcome.stderr.contains("temp key trove:tmp:"), "\(outcome.stderr)")
        #expect(outcome.stderr.split(separator: "\n").count == 1, "\(outcome.stderr)")
        #expect(try redis.command(["EXISTS", key], database: 13) == .integer(0))
        #expect(try redis.keys("trove:tmp:*", database: 13) == [])
        let again = try RemoteTests.remote(a, ["push", digest.description])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try redis.value(key, database: 13).map(XXH3Hasher.digest) == digest)
      } else if let value = try redis.value(key, database: 13) {
        #expect(XXH3Hasher.digest(value) == digest)
      }
    }
    #expect(caught, "no push was caught mid-upload in 4 rounds")
  }
}
