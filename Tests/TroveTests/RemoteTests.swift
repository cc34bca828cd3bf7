import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// `trove remote` against real servers on 127.0.0.1: nginx's WebDAV
/// module and redis-server, each test with its own base path or database.
/// Two stores stand for two machines sharing one remote.
@Suite(
  .enabled(if: Nginx.executable != nil, Nginx.missing),
  .enabled(if: RedisServer.executable != nil, RedisServer.missing))
struct RemoteTests {
  /// `trove --store STORE remote ARGS` as a process. A remote added with
  /// no `--write` has write-back off here: these tests send objects with
  /// `remote push` and must not race a background upload (write-back has
  /// its own tests, which say `--write`).
  static func remote(_ store: String, _ arguments: [String], environment: [String: String] = [:])
    throws -> CLI.Result
  {
    let write =
      arguments.first == "add" && !arguments.contains("--write") ? ["--write", "off"] : []
    return try CLI.run(
      ["--store", store, "remote"] + arguments + write, environment: environment)
  }

  /// Puts `bytes` into the store at `store` through the CLI; its digest.
  static func put(_ store: String, _ bytes: [UInt8], in scratch: Scratch) throws -> BlobDigest {
    let file = try scratch.write("input-\(UUID().uuidString)", bytes)
    let result = try CLI.run(["--store", store, "put", file])
    guard result.status == 0, let text = result.out.split(separator: " ").first else {
      throw TestFailure("put failed: \(result.stderr)")
    }
    return try BlobDigest(parsing: String(text))
  }

  /// The digests the store at `root` holds.
  static func digests(_ root: String) throws -> [BlobDigest] {
    try Store(StoreConfiguration(root: root, createIfMissing: false)).entries().map(\.digest)
  }

  /// The names in a store's `tmp/` (what a failed write would leave).
  static func leftovers(_ root: String) -> [String] {
    storeTemporaries(root)
  }

  /// Two stores with `url` added as remote `shared`.
  static func twoStores(_ scratch: Scratch, url: String, extra: [String] = []) throws
    -> (String, String)
  {
    let (a, b) = (scratch["a"], scratch["b"])
    for store in [a, b] {
      let added = try remote(store, ["add", "shared", url] + extra)
      #expect(added.status == 0, "\(added.stderr)")
      #expect(added.out == "added remote 'shared' (\(url))\n")
    }
    return (a, b)
  }

  /// Push from A, pull into B: B's object has A's bytes and is served by
  /// `get`; a second push and pull change nothing.
  /// With `clone`, B is on a filesystem that clones and `get` must clone.
  static func shareBetweenStores(
    url: String, bytes: [UInt8], scratch: Scratch, clone: Bool = false
  ) throws -> BlobDigest {
    let (a, b) = try twoStores(scratch, url: url)
    let digest = try put(a, bytes, in: scratch)
    let pushed = try remote(a, ["push", digest.description])
    #expect(pushed.status == 0, "\(pushed.stderr)")
    #expect(pushed.out == "\(digest)  uploaded to 'shared'\n")
    let again = try remote(a, ["push", "--json", digest.description])
    let records = try JSONSerialization.jsonObject(with: Data(again.stdout)) as? [[String: Any]]
    #expect(records?.first?["outcome"] as? String == "present")
    #expect(records?.first?.keys.sorted() == ["digest", "error", "outcome", "remote"])

    let pulled = try remote(b, ["pull", digest.description])
    #expect(pulled.status == 0, "\(pulled.stderr)")
    #expect(pulled.out == "\(digest)  pulled from 'shared'\n")
    #expect(try digests(b) == [digest])
    let out = scratch["out.bin"]
    let got = try CLI.run(
      ["--store", b, "get", "--mode", clone ? "clone" : "auto", digest.description, out])
    #expect(got.status == 0, "\(got.stderr)")
    #expect(try contents(out) == bytes)
    #expect(try XXH3Hasher.digest(ofFile: out) == digest)
    let local = try remote(b, ["pull", digest.description])
    #expect(local.out == "\(digest)  already in the store\n")
    return digest
  }

  @Test(
    "WebDAV: a blob pushed from store A is pulled into store B, byte for byte, under cas/aa/hex; B clones it out (XFS)"
  )
  func webDAVSharing() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch(under: TestFilesystems.xfs)
    let bytes = Bytes.random(3 << 20 + 17, seed: 14)
    let digest = try Self.shareBetweenStores(
      url: nginx.url("/team"), bytes: bytes, scratch: scratch,
      clone: TestFilesystems.xfs != nil)
    let blob = nginx.files["team/" + remoteBlobPath(digest)]
    #expect(try contents(blob) == bytes)
    let layout =
      try JSONSerialization.jsonObject(
        with: Data(contents(nginx.files["team/trove-remote.json"]))) as? [String: Any]
    #expect(layout?["format"] as? Int == 1 && layout?["hash"] as? String == "xxh128")
    // The upload went to tmp/ and was moved into place: nothing is left there.
    #expect(try FileManager.default.contentsOfDirectory(atPath: nginx.files["team/tmp"]) == [])
    #expect(nginx.accessLog().contains { $0.hasPrefix("MOVE /team/tmp/") && $0.contains(" 20") })
  }

  @Test("an object stored compressed is pushed as its raw bytes, through a temp file that goes")
  func pushCompressed() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (a, b) = try Self.twoStores(scratch, url: nginx.url("/z"))
    #expect(try CLI.run(["--store", a, "config", "set", "compression", "zstd"]).status == 0)
    let bytes = Array(String(repeating: "a compressible line\n", count: 60_000).utf8)
    let digest = try Self.put(a, bytes, in: scratch)
    #expect(
      FileManager.default.fileExists(
        atPath: objectFilePath(a, digest, compressed: true)))
    let pushed = try Self.remote(a, ["push", digest.description])
    #expect(pushed.status == 0, "\(pushed.stderr)")
    #expect(try contents(nginx.files["z/" + remoteBlobPath(digest)]) == bytes)
    #expect(Self.leftovers(a) == [])
    #expect(try Self.remote(b, ["pull", digest.description]).status == 0)
    #expect(try Self.digests(b) == [digest])
  }

  @Test("Redis: a multi-MiB blob goes up in chunks and comes back in ranges, into another store")
  func redisSharing() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let bytes = Bytes.random(9 << 20 + 5, seed: 15)  // 3 APPENDs of 4 MiB, 10 GETRANGEs of 1 MiB
    let digest = try Self.shareBetweenStores(
      url: redis.url(database: 3), bytes: bytes, scratch: scratch)
    #expect(try redis.value("trove:cas:\(digest.hex)", database: 3) == bytes)
    #expect(try redis.keys("trove:*", database: 3) == ["trove:cas:\(digest.hex)", "trove:remote"])
    // Not an expiring key: the temp key's expiry was dropped when it was renamed.
    #expect(try redis.command(["TTL", "trove:cas:\(digest.hex)"], database: 3) == .integer(-1))
    #expect(try redis.keys("*", database: 0) == [])
  }

  @Test("a read-only remote refuses push (exit 77, one line, nothing sent) and is still read")
  func readOnly() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let writer = scratch["writer"]
    let reader = scratch["reader"]
    #expect(try Self.remote(writer, ["add", "shared", nginx.url("/ro")]).status == 0)
    #expect(
      try Self.remote(reader, ["add", "shared", nginx.url("/ro"), "--read-only"]).status == 0)
    let digest = try Self.put(writer, Bytes.pattern(5000), in: scratch)
    #expect(try Self.remote(writer, ["push", digest.description]).status == 0)

    let mine = try Self.put(reader, Bytes.pattern(6000), in: scratch)
    let refused = try Self.remote(reader, ["push", "--remote", "shared", mine.description])
    #expect(refused.status == 77)
    #expect(
      refused.errorLines == [
        "Error: remote 'shared' is read-only: this store does not upload to it"
      ])
    let none = try Self.remote(reader, ["push", mine.description])
    #expect(none.status == 1)
    #expect(
      none.errorLines == [
        "Error: store '\(reader)' has no writable remote to push to (see 'trove remote add')"
      ])
    #expect(
      !FileManager.default.fileExists(
        atPath: nginx.files["ro/" + remoteBlobPath(mine)]))
    #expect(!nginx.accessLog().contains { $0.hasPrefix("PUT") && $0.contains(mine.hex) })

    let pulled = try Self.remote(reader, ["pull", digest.description])
    #expect(pulled.status == 0, "\(pulled.stderr)")
    #expect(try Self.digests(reader).contains(digest))
    let check = try Self.remote(reader, ["check", "shared"])
    #expect(check.status == 0, "\(check.stderr)")
    #expect(check.out.contains("read-only (not written)"), "\(check.out)")
  }

  @Test("a blob corrupted on the WebDAV server is refused on pull (exit 65) and nothing is stored")
  func corruptWebDAV() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (a, b) = try Self.twoStores(scratch, url: nginx.url("/c"))
    let bytes = Bytes.random(300_000, seed: 16)
    let digest = try Self.put(a, bytes, in: scratch)
    #expect(try Self.remote(a, ["push", digest.description]).status == 0)
    var damaged = bytes
    damaged[1000] ^= 0xFF  // same length, other bytes
    try Data(damaged).write(
      to: URL(fileURLWithPath: nginx.files["c/" + remoteBlobPath(digest)]))

    let pulled = try Self.remote(b, ["pull", digest.description])
    #expect(pulled.status == 65)
    #expect(pulled.errorLines.count == 1)
    #expect(
      pulled.stderr.hasPrefix("Error: remote 'shared' sent bytes that are not \(digest) ("),
      "\(pulled.stderr)")
    #expect(pulled.stderr.hasSuffix("; nothing stored\n"))
    #expect(try Self.digests(b) == [])
    #expect(Self.leftovers(b) == [])
  }

  @Test("pull tries the remotes in order: past a miss and a corrupt blob to one that has it intact")
  func pullFallsThrough() throws {
    let nginx = try Nginx(webDAV: true)
    let redis = try RedisServer()
    let scratch = try Scratch()
    let (a, b) = (scratch["a"], scratch["b"])
    let bytes = Bytes.random(200_000, seed: 21)
    let digest = try Self.put(a, bytes, in: scratch)
    for (name, url) in [
      ("empty", nginx.url("/empty")), ("bad", nginx.url("/bad")), ("good", redis.url(database: 9)),
    ] {
      #expect(try Self.remote(b, ["add", name, url]).status == 0)
      if name != "empty" {
        #expect(try Self.remote(a, ["add", name, url]).status == 0)
        #expect(try Self.remote(a, ["push", "--remote", name, digest.description]).status == 0)
      }
    }
    try Data(Bytes.random(200_000, seed: 22)).write(
      to: URL(fileURLWithPath: nginx.files["bad/" + remoteBlobPath(digest)]))
    let pulled = try Self.remote(b, ["pull", digest.description])
    #expect(pulled.status == 0, "\(pulled.stderr)")
    #expect(pulled.out == "\(digest)  pulled from 'good'\n")
    #expect(try Self.digests(b) == [digest])
    #expect(Self.leftovers(b) == [])
  }

  @Test("a wrong value SET in Redis is refused on pull (exit 65) and nothing is stored")
  func corruptRedis() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let (a, b) = try Self.twoStores(scratch, url: redis.url(database: 4))
    let digest = try Self.put(a, Bytes.random(2 << 20, seed: 17), in: scratch)
    #expect(try Self.remote(a, ["push", digest.description]).status == 0)
    try redis.command(
      ["SET", "trove:cas:\(digest.hex)"], database: 4, payload: Array("not the blob".utf8))

    let pulled = try Self.remote(b, ["pull", "--json", digest.description])
    #expect(pulled.status == 65)
    #expect(pulled.errorLines.count == 1)
    #expect(pulled.stderr.contains("remote 'shared' sent bytes that are not \(digest)"))
    let records = try JSONSerialization.jsonObject(with: Data(pulled.stdout)) as? [[String: Any]]
    #expect(records?.first?["outcome"] as? String == "failed")
    #expect(records?.first?["remote"] is NSNull && records?.first?["size"] is NSNull)
    #expect(
      records?.first?.keys.sorted() == [
        "clonedBytes", "digest", "error", "key", "outcome", "remote", "size", "transferredBytes",
      ])
    #expect(try Self.digests(b) == [])
    #expect(Self.leftovers(b) == [])
  }

  @Test("remote check on a dead port fails at once with one line (exit 69); a live one round-trips")
  func check() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let dead = "http://127.0.0.1:\(deadPort())/x"
    #expect(try Self.remote(store, ["add", "gone", dead]).status == 0)
    #expect(
      try Self.remote(store, ["add", "gone-redis", "redis://127.0.0.1:\(deadPort())"]).status == 0)
    for name in ["gone", "gone-redis"] {
      let started = ContinuousClock.now
      let result = try Self.remote(store, ["check", name])
      let elapsed = ContinuousClock.now - started
      #expect(result.status == 69)
      #expect(result.errorLines.count == 1, "\(result.stderr)")
      #expect(result.stderr.hasPrefix("Error: remote '\(name)"), "\(result.stderr)")
      // A refused connection is not waited for (and a silent one at most
      // 250 ms); the bound leaves room for a loaded machine's process start.
      #expect(elapsed < .seconds(5), "\(elapsed)")
    }
    let json = try Self.remote(store, ["check", "--json", "gone"])
    let record = try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [String: Any]
    #expect(record?["reachable"] as? Bool == false)
    #expect(record?["writable"] is NSNull && record?["layout"] is NSNull)
    #expect(
      record?.keys.sorted() == [
        "abortedUploads", "clockSkewSeconds", "error", "kind", "latencySeconds", "layout",
        "layoutWritten", "name", "pendingUploads", "reachable", "readOnly", "url", "writable",
      ])

    let redis = try RedisServer()
    #expect(try Self.remote(store, ["add", "live", redis.url(database: 5)]).status == 0)
    let live = try Self.remote(store, ["check", "live"])
    #expect(live.status == 0, "\(live.stderr)")
    #expect(live.out.contains("writable, layout format 1 (xxh128, written now)"), "\(live.out)")
    // The probe blob was deleted; the layout record stays.
    #expect(try redis.keys("*", database: 5) == ["trove:remote"])
    let again = try Self.remote(store, ["check", "live"])
    #expect(again.out.hasSuffix("writable, layout format 1 (xxh128)\n"), "\(again.out)")
  }

  @Test("Redis: an object over the remote's max-object-size is skipped, not uploaded, exit 0")
  func redisMaxObjectSize() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let added = try Self.remote(
      store, ["add", "small", redis.url(database: 6), "--max-object-size", "1MiB"])
    #expect(added.status == 0, "\(added.stderr)")
    let big = try Self.put(store, Bytes.random((1 << 20) + 1, seed: 18), in: scratch)
    let fits = try Self.put(store, Bytes.random(1 << 20, seed: 19), in: scratch)
    let pushed = try Self.remote(store, ["push", big.description, fits.description])
    #expect(pushed.status == 0, "\(pushed.stderr)")
    #expect(
      pushed.out == """
        \(big)  skipped: larger than the max-object-size of 'small' (1.0 MiB)
        \(fits)  uploaded to 'small'

        """)
    #expect(try redis.keys("trove:cas:*", database: 6) == ["trove:cas:\(fits.hex)"])
    let json = try Self.remote(store, ["push", "--json", big.description])
    let records = try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [[String: Any]]
    #expect(records?.first?["outcome"] as? String == "too-large")
    // remote status counts what is over the limit, never queued again.
    let status = try Self.remote(store, ["status"])
    #expect(
      status.out.contains("  1 object (1.0 MiB) over its max-object-size: not uploaded\n"),
      "\(status.out)")
    let small =
      try JSONSerialization.jsonObject(
        with: Data(try Self.remote(store, ["status", "--json"]).stdout)) as? [[String: Any]]
    #expect(small?.first?["tooLargeObjects"] as? Int == 1)
    #expect(small?.first?["tooLargeBytes"] as? Int == (1 << 20) + 1)
    // An object that is not there is one line; the others still go.
    let mixed = try Self.remote(store, ["push", "no-such-key", fits.description])
    #expect(mixed.status == 1)
    #expect(mixed.errorLines == ["Error: no key 'no-such-key' in store '\(store)'"])
    #expect(mixed.out == "\(fits)  already on 'small'\n")
    // Redis holds values up to 512 MiB: a larger limit is refused.
    let huge = try Self.remote(
      store, ["add", "huge", redis.url(database: 6), "--max-object-size", "1G"])
    #expect(huge.status == 64)
    #expect(huge.errorLines.first?.contains("at most 512 MiB") == true, "\(huge.stderr)")
  }

  @Test(
    "Redis AUTH: the password comes from the variable --auth-env names, which the store's file does not name"
  )
  func redisAuthentication() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let url = redis.url(database: 8)
    let added = try Self.remote(store, ["add", "locked", url, "--auth-env", "TROVE_TEST_REDIS_PW"])
    #expect(added.status == 0, "\(added.stderr)")
    try redis.command(["CONFIG", "SET", "requirepass", "s3cret-pw"], database: 0)
    let digest = try Self.put(store, Bytes.pattern(70_000), in: scratch)

    let right = ["TROVE_TEST_REDIS_PW": "s3cret-pw"]
    let pushed = try Self.remote(store, ["push", digest.description], environment: right)
    #expect(pushed.status == 0, "\(pushed.stderr)")
    #expect(try Self.remote(store, ["check", "locked"], environment: right).status == 0)
    let wrong = try Self.remote(
      store, ["check", "locked"], environment: ["TROVE_TEST_REDIS_PW": "guess"])
    #expect(wrong.status == 69)
    #expect(wrong.errorLines.count == 1)
    #expect(wrong.stderr.contains("AUTH failed"), "\(wrong.stderr)")
    #expect(!wrong.stderr.contains("guess"))
    let text = String(decoding: try contents(store + "/remotes.json"), as: UTF8.self)
    #expect(!text.contains("TROVE_TEST_REDIS_PW") && !text.contains("s3cret"), "\(text)")
  }

  @Test("add, ls, rm: remotes.json in the store root; bad input is one line and changes nothing")
  func configuration() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try Self.remote(store, ["add", "one", "http://127.0.0.1:9/base/"]).status == 0)
    #expect(
      try Self.remote(
        store,
        [
          "add", "two", "redis://cache.example:6380/2", "--read-only", "--auth-env",
          "TROVE_REDIS_PW",
        ]
      ).status == 0)
    let ls = try Self.remote(store, ["ls"])
    #expect(
      ls.out == """
        one  http://127.0.0.1:9/base/  read-write  no max-object-size
        two  redis://cache.example:6380/2  read-only  max-object-size 64.0 MiB  auth-env TROVE_REDIS_PW

        """)
    let json = try Self.remote(store, ["ls", "--json"])
    let records = try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [[String: Any]]
    #expect(records?.count == 2)
    #expect(records?[0]["authEnv"] is NSNull && records?[0]["maxObjectSize"] is NSNull)
    #expect(records?[1]["authEnv"] as? String == "TROVE_REDIS_PW")
    #expect(records?[1]["readOnly"] as? Bool == true)
    #expect(
      records?[0].keys.sorted() == [
        "authEnv", "credentialsLent", "maxObjectSize", "name", "readOnly", "trust", "url",
        "write",
      ])
    #expect(records?[0]["write"] as? String == "off")
    let file = try contents(store + "/remotes.json")
    let before = file

    let cases: [([String], Int32, String)] = [
      (["add", "one", "http://h/x"], 64, "remote 'one' already exists"),
      (["add", "pw", "redis://u:secret@h:6379"], 64, "it holds a password"),
      (["add", "ftp", "ftp://h/x"], 64, "the scheme 'ftp' is not http, https, redis or s3"),
      (["add", "bad name", "http://h/x"], 64, "invalid remote name 'bad name'"),
      (["add", "db", "redis://h/x"], 64, "the database 'x' is not a number"),
      (["add", "port", "redis://127.0.0.1:99999"], 64, "the port 99999 is not from 1 to 65535"),
      (["add", "space", "http://127.0.0.1:1/a b"], 64, "it holds a space"),
      (["add", "negative", "redis://h/-1"], 64, "the database -1 is not from 0 to 65535"),
      (["add", "env", "http://h/x", "--auth-env", "1X"], 64, "invalid --auth-env '1X'"),
      (["ls", "--read-only"], 64, "'remote ls' takes no option --read-only"),
      (["frobnicate"], 64, "unknown action 'frobnicate'"),
      (["rm", "nope"], 1, "no remote 'nope'"),
      (
        ["pull", "--remote", "nope", "xxh128:" + String(repeating: "0", count: 32)], 1,
        "no remote 'nope'"
      ),
    ]
    for (arguments, status, message) in cases {
      let result = try Self.remote(store, arguments)
      #expect(result.status == status, "\(arguments): \(result.stderr)")
      #expect(result.errorLines.first?.contains(message) == true, "\(arguments): \(result.stderr)")
      #expect(!result.stderr.contains("secret"))
    }
    #expect(try contents(store + "/remotes.json") == before)

    // A credential named but not set: one line naming the variable.
    let unset = try Self.remote(store, ["check", "two"], environment: ["TROVE_REDIS_PW": ""])
    #expect(unset.status == 69)
    #expect(
      unset.errorLines == [
        "Error: remote 'two' takes its credential from the environment variable TROVE_REDIS_PW, which is not set"
      ])

    #expect(try Self.remote(store, ["rm", "one"]).status == 0)
    #expect(try Self.remote(store, ["ls"]).out.hasPrefix("two  "))
    #expect(Self.leftovers(store) == [])
  }

  /// Starts `trove remote push` of a `size`-byte object to `url` and stops
  /// it (SIGSTOP) once `midway` says its upload is under way, then checks
  /// with `notVisible` that the blob is not visible, and SIGKILLs it.
  /// Returns whether it was caught mid-upload (false: it finished first).
  static func killMidPush(
    store: String, digest: BlobDigest, scratch: Scratch, midway: () throws -> Bool,
    notVisible: () throws -> Bool
  ) throws -> Bool {
    let push = try Spawned(
      ["--store", store, "remote", "push", digest.description], io: scratch["push-\(UUID())"])
    var caught = false
    while push.process.isRunning {
      if try midway() {
        Glibc.kill(push.pid, SIGSTOP)
        caught = push.process.isRunning
        break
      }
      usleep(200)
    }
    if caught { #expect(try notVisible(), "a partial blob is visible while the push is stopped") }
    push.kill()
    Glibc.kill(push.pid, SIGCONT)
    let outcome = try push.wait()
    return caught && outcome.killed
  }

  @Test(
    "kill -9 of a push mid-upload leaves no visible partial blob (WebDAV), and a push later completes"
  )
  func killMidUploadWebDAV() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (a, b) = try Self.twoStores(scratch, url: nginx.url("/k"))
    var caught = false
    for round in 0..<4 where !caught {
      let bytes = Bytes.random(48 << 20, seed: 20 + UInt64(round))
      let digest = try Self.put(a, bytes, in: scratch)
      let blob = nginx.files["k/" + remoteBlobPath(digest)]
      // nginx spools a request body in client-body/ until it has all of it.
      caught = try Self.killMidPush(
        store: a, digest: digest, scratch: scratch,
        midway: {
          !((try? FileManager.default.contentsOfDirectory(atPath: nginx.state["client-body"])) ?? [])
            .isEmpty
        },
        notVisible: { !FileManager.default.fileExists(atPath: blob) })
      // Whatever the moment: no blob, or the whole one.
      if FileManager.default.fileExists(atPath: blob) {
        #expect(try XXH3Hasher.digest(ofFile: blob) == digest)
      }
      if caught {
        #expect(!FileManager.default.fileExists(atPath: blob))
        let again = try Self.remote(a, ["push", digest.description])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try XXH3Hasher.digest(ofFile: blob) == digest)
        #expect(try Self.remote(b, ["pull", digest.description]).status == 0)
        #expect(try Self.digests(b).contains(digest))
      }
    }
    #expect(caught, "no push was caught mid-upload in 4 rounds")
  }

  @Test("kill -9 of a push mid-upload leaves no visible partial blob (Redis): its temp key expires")
  func killMidUploadRedis() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let (a, b) = try Self.twoStores(scratch, url: redis.url(database: 7))
    var caught = false
    for round in 0..<4 where !caught {
      let bytes = Bytes.random(32 << 20, seed: 30 + UInt64(round))
      let digest = try Self.put(a, bytes, in: scratch)
      let key = "trove:cas:\(digest.hex)"
      caught = try Self.killMidPush(
        store: a, digest: digest, scratch: scratch,
        midway: { try !redis.keys("trove:tmp:*", database: 7).isEmpty },
        notVisible: { try redis.command(["EXISTS", key], database: 7) == .integer(0) })
      if let value = try redis.value(key, database: 7) {
        #expect(XXH3Hasher.digest(value) == digest)
      }
      if caught {
        #expect(try redis.command(["EXISTS", key], database: 7) == .integer(0))
        for temp in try redis.keys("trove:tmp:*", database: 7) {
          guard case .integer(let ttl) = try redis.command(["TTL", temp], database: 7) else {
            throw TestFailure("no TTL for \(temp)")
          }
          #expect(ttl > 0 && ttl <= 3600, "\(temp) does not expire: \(ttl)")
        }
        let again = try Self.remote(a, ["push", digest.description])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try Self.remote(b, ["pull", digest.description]).status == 0)
        #expect(try Self.digests(b).contains(digest))
      }
    }
    #expect(caught, "no push was caught mid-upload in 4 rounds")
  }

  /// Checks that every blob (string) in Redis database `database` holds
  /// the bytes its name says; their names.
  static func intactBlobs(_ redis: RedisServer, database: Int) throws -> Set<String> {
    var intact: Set<String> = []
    for key in try redis.keys("trove:cas:*", database: database)
    where try redis.command(["TYPE", key], database: database) == .simple("string") {
      let value = try redis.value(key, database: database) ?? []
      #expect(
        "trove:cas:" + XXH3Hasher.digest(value).hex == key, "\(key) holds other bytes")
      intact.insert(key)
    }
    return intact
  }

  @Test(
    "Redis: a pipelined push of the queue — one object's failure is its own: the others are confirmed, it stays queued"
  )
  func redisPipelinedPush() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let added = try Self.remote(
      store, ["add", "r", redis.url(database: 8), "--max-object-size", "6MiB"])
    #expect(added.status == 0, "\(added.stderr)")
    var digests: [BlobDigest] = []
    var contents: [[UInt8]] = []
    for i in 0..<40 {
      contents.append(Bytes.random(1 + i * 1637, seed: 100 + UInt64(i)))
      digests.append(try Self.put(store, contents[i], in: scratch))
    }
    let pieces = try Self.put(store, Bytes.random(5 << 20, seed: 99), in: scratch)  // two pieces
    let tooLarge = try Self.put(store, Bytes.random(7 << 20, seed: 98), in: scratch)
    // One object is corrupt here; the remote holds another already.
    let library = try Store(StoreConfiguration(root: store, createIfMissing: false))
    let (corrupt, present) = (digests[17], digests[3])
    let path = library.objectFilePath(corrupt)
    var changed = contents[17]
    changed[changed.count / 2] ^= 1
    try? FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
    try Data(changed).write(to: URL(fileURLWithPath: path))
    try redis.command(["SET", "trove:cas:\(present.hex)"], database: 8, payload: contents[3])

    let pushed = try Self.remote(store, ["push"])
    #expect(pushed.status == 65, "\(pushed.stderr)")
    #expect(pushed.errorLines.count == 1)
    #expect(pushed.stderr.contains("object \(corrupt) in store"), "\(pushed.stderr)")
    #expect(pushed.out.contains("\(present)  already on 'r'"), "\(pushed.out)")
    #expect(pushed.out.contains("\(pieces)  uploaded to 'r'"), "\(pushed.out)")
    let intact = try Self.intactBlobs(redis, database: 8)
    let expected = Set(
      (digests + [pieces]).filter { $0 != corrupt }.map { "trove:cas:\($0.hex)" })
    #expect(intact == expected)
    #expect(try redis.keys("trove:tmp:*", database: 8) == [])
    #expect(
      try redis.command(["TYPE", "trove:cas:\(tooLarge.hex)"], database: 8) == .simple("none"))
    // Recorded: only the corrupt object is still queued (too-large is done too).
    #expect(try library.uploadQueueLength(for: "r").objects == 1)

    try Data(contents[17]).write(to: URL(fileURLWithPath: path))
    let again = try Self.remote(store, ["push"])
    #expect(again.status == 0, "\(again.stderr)")
    #expect(again.out == "\(corrupt)  uploaded to 'r'\n")
    #expect(try library.uploadQueueLength(for: "r").objects == 0)
    #expect(try Self.intactBlobs(redis, database: 8).count == digests.count + 1)
  }

  @Test(
    "Redis: a server error about one key in a pipelined batch: the rest of the batch is confirmed, that object stays queued"
  )
  func redisPipelinedServerError() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try Self.remote(store, ["add", "r", redis.url(database: 12)]).status == 0)
    var digests: [BlobDigest] = []
    for i in 0..<30 {
      digests.append(
        try Self.put(store, Bytes.random(100 + i * 997, seed: 300 + UInt64(i)), in: scratch))
    }
    // Every command on a key that holds a hash fails (WRONGTYPE).
    let blocked = digests[11]
    try redis.command(["HSET", "trove:cas:\(blocked.hex)", "f", "v"], database: 12)
    let pushed = try Self.remote(store, ["push"])
    #expect(pushed.status == 69, "\(pushed.stderr)")
    #expect(pushed.errorLines.count == 1)
    #expect(pushed.stderr.contains("WRONGTYPE"), "\(pushed.stderr)")
    let expected = Set(digests.filter { $0 != blocked }.map { "trove:cas:\($0.hex)" })
    #expect(try Self.intactBlobs(redis, database: 12) == expected)
    #expect(
      try redis.command(["TYPE", "trove:cas:\(blocked.hex)"], database: 12) == .simple("hash"))
    let library = try Store(StoreConfiguration(root: store, createIfMissing: false))
    #expect(try library.uploadQueueLength(for: "r").objects == 1)
  }

  @Test(
    "a large pull (hashed on a thread beside the transfer) is stored intact; a corrupt one is not")
  func threadedPull() throws {
    let redis = try RedisServer()
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let bytes = Bytes.random(Int(Store.threadedPullSize) + (3 << 20) + 7, seed: 41)
    // WebDAV, intact, through the thread; then Redis with one byte changed.
    _ = try Self.shareBetweenStores(url: nginx.url("/t"), bytes: bytes, scratch: scratch)
    let (a, c) = (scratch["a2"], scratch["c2"])
    for store in [a, c] {
      #expect(try Self.remote(store, ["add", "shared", redis.url(database: 9)]).status == 0)
    }
    let digest = try Self.put(a, bytes, in: scratch)
    #expect(try Self.remote(a, ["push", digest.description]).status == 0)
    var changed = bytes
    changed[changed.count - 5] ^= 1
    try redis.command(["SET", "trove:cas:\(digest.hex)"], database: 9, payload: changed)
    let pulled = try Self.remote(c, ["pull", digest.description])
    #expect(pulled.status == 65, "\(pulled.stderr)")
    #expect(pulled.stderr.contains("remote 'shared' sent bytes that are not \(digest)"))
    #expect(try Self.digests(c) == [])
    #expect(Self.leftovers(c) == [])
  }

  @Test(
    "a large raw object corrupt on disk is hashed as it is sent and never published (WebDAV, Redis)"
  )
  func corruptLocalCopyNotPublished() throws {
    let redis = try RedisServer()
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let store = scratch["store"]
    let bytes = Bytes.random(Int(Store.batchedObjectSize) * 2 + 11, seed: 51)
    for (name, url) in [("dav", nginx.url("/c")), ("redis", redis.url(database: 11))] {
      #expect(try Self.remote(store, ["add", name, url]).status == 0)
    }
    let digest = try Self.put(store, bytes, in: scratch)
    let library = try Store(StoreConfiguration(root: store, createIfMissing: false))
    let path = library.objectFilePath(digest)
    var changed = bytes
    changed[changed.count / 2] ^= 0x40
    try? FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
    try Data(changed).write(to: URL(fileURLWithPath: path))
    for name in ["dav", "redis"] {
      let pushed = try Self.remote(store, ["push", "--remote", name, digest.description])
      #expect(pushed.status != 0)
      #expect(
        pushed.stderr.contains("object \(digest) in store '\(store)' is corrupt"),
        "\(pushed.stderr)")
    }
    #expect(
      !FileManager.default.fileExists(
        atPath: nginx.files["c/" + remoteBlobPath(digest)]))
    #expect(
      ((try? FileManager.default.contentsOfDirectory(atPath: nginx.files["c/tmp"])) ?? []) == [])
    #expect(try redis.keys("trove:*", database: 11) == ["trove:remote"])
    #expect(Self.leftovers(store) == [])
  }

  @Test(
    "kill -9 of a pipelined push of many objects (Redis) leaves every blob intact; a push later completes"
  )
  func killMidPipelinedPush() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try Self.remote(store, ["add", "r", redis.url(database: 10)]).status == 0)
    var digests: [BlobDigest] = []
    for i in 0..<300 {
      digests.append(
        try Self.put(store, Bytes.random(64 << 10 + i, seed: 200 + UInt64(i)), in: scratch))
    }
    let push = try Spawned(["--store", store, "remote", "push"], io: scratch["push"])
    while push.process.isRunning,
      (try? redis.keys("trove:cas:*", database: 10).count) ?? 0 < 20
    {
      usleep(200)
    }
    push.kill()
    _ = try push.wait()
    _ = try Self.intactBlobs(redis, database: 10)
    let again = try Self.remote(store, ["push"])
    #expect(again.status == 0, "\(again.stderr)")
    #expect(try Self.intactBlobs(redis, database: 10).count == digests.count)
    let library = try Store(StoreConfiguration(root: store, createIfMissing: false))
    #expect(try library.uploadQueueLength(for: "r").objects == 0)
  }
}
