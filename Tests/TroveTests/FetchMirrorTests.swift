import Foundation
import Testing

@testable import Trove

/// Mirrors (`fetch --mirror`, `-i` lines with several URLs) and rewrite
/// rules (`config set rewrite.NAME`), against real nginx servers, a fault
/// server and closed ports on 127.0.0.1.
@Suite(.enabled(if: Nginx.executable != nil, Nginx.missing))
struct FetchMirrorTests {
  /// `trove --store STORE fetch ARGS` as a process.
  static func fetch(_ store: String, _ arguments: [String]) throws -> CLI.Result {
    try CLI.run(["--store", store, "fetch"] + arguments)
  }

  /// The store's keys as `keys --json` gives them, by key.
  static func keys(_ store: String) throws -> [String: [String: Any]] {
    let listed = try CLI.run(["--store", store, "keys", "--json"])
    let records = try JSONSerialization.jsonObject(with: Data(listed.stdout)) as? [[String: Any]]
    var byKey: [String: [String: Any]] = [:]
    for record in records ?? [] {
      if let key = record["key"] as? String { byKey[key] = record }
    }
    return byKey
  }

  /// The digests of the store's objects (`ls --json`).
  static func objects(_ store: String) throws -> [String] {
    let listed = try CLI.run(["--store", store, "ls", "--json"])
    let records = try JSONSerialization.jsonObject(with: Data(listed.stdout)) as? [[String: Any]]
    return (records ?? []).compactMap { $0["digest"] as? String }
  }

  static func sha256(_ bytes: [UInt8]) -> Checksum {
    let hasher = SHA2Hasher(.sha256)
    bytes.withUnsafeBytes { hasher.update($0) }
    return hasher.finalize()
  }

  /// Writes `bytes` at `path` under nginx's folder, making its folders.
  static func serve(_ nginx: Nginx, _ path: String, _ bytes: [UInt8]) throws -> String {
    let file = nginx.files[path]
    try FileManager.default.createDirectory(
      atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try Data(bytes).write(to: URL(fileURLWithPath: file))
    return file
  }

  /// A URL on 127.0.0.1 whose port nothing listens on.
  static func dead(_ path: String) -> String { "http://127.0.0.1:\(deadPort())\(path)" }

  @Test(
    "a first fetch from a dead origin succeeds from a listed mirror: the key is the URL asked for, keys --json names the mirror"
  )
  func deadOriginServedByMirror() throws {
    let nginx = try Nginx()
    let body = Bytes.random(200_000, seed: 61)
    let file = try nginx.files.write("model.bin", body)
    let scratch = try Scratch()
    let store = scratch["store"]
    let origin = Self.dead("/model.bin")
    let mirror = nginx.url("/model.bin")

    let fetched = try Self.fetch(store, ["--json", origin, "--mirror", mirror])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    let records = try JSONSerialization.jsonObject(with: Data(fetched.stdout)) as? [[String: Any]]
    let record = try #require(records?.first)
    let digest = try XXH3Hasher.digest(ofFile: file)
    #expect(record["url"] as? String == origin)
    #expect(record["servedBy"] as? String == mirror)
    #expect(record["digest"] as? String == digest.description)
    #expect(nginx.requests("/model.bin").count == 1)

    let key = try #require(try Self.keys(store)[origin], "the key is the URL asked for")
    #expect(key["servedBy"] as? String == mirror)
    #expect(key["digest"] as? String == digest.description)
    #expect(try Self.keys(store)[mirror] == nil, "the mirror's URL is no key of its own")

    // Offline, the key serves what the mirror brought.
    let offline = try Self.fetch(store, ["--offline", origin])
    #expect(offline.out == "\(digest)  \(origin)\n", "\(offline.stderr)")
  }

  @Test(
    "a mirror sending wrong bytes under --expect sha256 is skipped for the next; nothing of it is stored; all wrong is exit 65"
  )
  func wrongBytesSkipped() throws {
    let nginx = try Nginx()
    let body = Bytes.random(300_000, seed: 62)
    var wrong = body
    wrong[1000] ^= 0xFF
    _ = try Self.serve(nginx, "bad/lib.tar", wrong)
    let good = try Self.serve(nginx, "good/lib.tar", body)
    let scratch = try Scratch()
    let store = scratch["store"]
    let origin = Self.dead("/lib.tar")
    let expected = Self.sha256(body)

    let fetched = try Self.fetch(
      store,
      [
        "--json", "--expect", expected.description, origin, "--mirror", nginx.url("/bad/lib.tar"),
        "--mirror", nginx.url("/good/lib.tar"),
      ])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    let records = try JSONSerialization.jsonObject(with: Data(fetched.stdout)) as? [[String: Any]]
    #expect(records?.first?["servedBy"] as? String == nginx.url("/good/lib.tar"))
    #expect(nginx.requests("/bad/lib.tar").count == 1)
    let digest = try XXH3Hasher.digest(ofFile: good)
    #expect(try Self.objects(store) == [digest.description], "only the right bytes are stored")
    let partial = (try? FileManager.default.contentsOfDirectory(atPath: store + "/partial")) ?? []
    #expect(partial.filter { $0.hasSuffix(".part") }.isEmpty, "\(partial)")

    // Every URL wrong: exit 65, one line naming each, nothing stored.
    let other = scratch["other"]
    let failed = try Self.fetch(
      other,
      [
        "--expect", expected.description, nginx.url("/bad/lib.tar"), "--mirror",
        Self.dead("/lib.tar"),
      ])
    #expect(failed.status == 65, "\(failed.stderr)")
    #expect(failed.errorLines.count == 1, "\(failed.stderr)")
    #expect(failed.stderr.contains(nginx.url("/bad/lib.tar")), "\(failed.stderr)")
    #expect(failed.stderr.contains("from any of its 2 URLs"), "\(failed.stderr)")
    #expect(try Self.objects(other).isEmpty)
    #expect(try Self.keys(other).isEmpty)
  }

  @Test("404 on the first URL moves on to the next; 404 on every URL is exit 1")
  func notFoundMovesOn() throws {
    let nginx = try Nginx()
    _ = try nginx.files.write("here.bin", Bytes.random(5000, seed: 63))
    let scratch = try Scratch()
    let store = scratch["store"]
    let fetched = try Self.fetch(
      store, ["--json", nginx.url("/gone.bin"), "--mirror", nginx.url("/here.bin")])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    #expect(nginx.requests("/gone.bin").first?.contains(" 404 ") == true)
    #expect(
      try Self.keys(store)[nginx.url("/gone.bin")]?["servedBy"] as? String
        == nginx.url("/here.bin"))

    let missing = try Self.fetch(
      store, [nginx.url("/none1.bin"), "--mirror", nginx.url("/none2.bin")])
    #expect(missing.status == 1, "\(missing.stderr)")
    #expect(missing.stderr.contains("none1.bin") && missing.stderr.contains("none2.bin"))
  }

  @Test(
    "a 503 from a URL with a mirror after it moves on at once, without the retries the last URL gets",
    .enabled(if: FaultServer.python != nil, FaultServer.missing))
  func unavailableMovesOnAtOnce() throws {
    let nginx = try Nginx()
    _ = try nginx.files.write("x.bin", Bytes.random(5000, seed: 64))
    let faults = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let fetched = try Self.fetch(
      store, ["--retries", "3", faults.url("/status/503"), "--mirror", nginx.url("/x.bin")])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    #expect(faults.requests().count == 1, "\(faults.requests())")
    #expect(nginx.requests("/x.bin").count == 1)

    // The last URL is retried as a single URL is: 1 + 2 retries, then exit 75.
    let failed = try Self.fetch(
      scratch["other"],
      ["--retries", "2", nginx.url("/none.bin"), "--mirror", faults.url("/status/502")])
    #expect(failed.status == 75, "\(failed.stderr)")
    #expect(faults.requests().filter { $0.contains("/status/502") }.count == 3)
  }

  @Test(
    "revalidation sends the validators only to the URL that served the copy: the mirror answers 304; the origin back is asked afresh"
  )
  func revalidationFollowsServedURL() throws {
    let origin = try Nginx()
    let mirror = try Nginx()
    let body = Bytes.random(100_000, seed: 65)
    _ = try origin.files.write("pkg.whl", body)
    _ = try mirror.files.write("pkg.whl", body)
    origin.stop()
    let scratch = try Scratch()
    let store = scratch["store"]
    let arguments = [origin.url("/pkg.whl"), "--mirror", mirror.url("/pkg.whl")]

    #expect(try Self.fetch(store, arguments).status == 0)
    // nginx sends no Cache-Control: the next fetch revalidates, at the mirror.
    let again = try Self.fetch(store, ["--json"] + arguments)
    #expect(again.status == 0, "\(again.stderr)")
    let record = try #require(
      (try JSONSerialization.jsonObject(with: Data(again.stdout)) as? [[String: Any]])?.first)
    #expect(record["source"] as? String == "revalidated")
    let asked = mirror.requests("/pkg.whl")
    #expect(asked.count == 2)
    #expect(asked.last?.contains(" 304 ") == true, "\(asked)")
    #expect(Nginx.quoted(asked.last ?? "")[2] != "-", "no If-None-Match: \(asked)")

    // The origin back: asked first, without the mirror's validators.
    try origin.start()
    let third = try Self.fetch(store, ["--json"] + arguments)
    #expect(third.status == 0, "\(third.stderr)")
    let fromOrigin = origin.requests("/pkg.whl")
    #expect(fromOrigin.count == 1)
    #expect(fromOrigin.first.map { Nginx.quoted($0)[2] } == "-", "\(fromOrigin)")
    #expect(fromOrigin.first?.contains(" 200 ") == true)
    #expect(mirror.requests("/pkg.whl").count == 2, "the mirror is not asked again")
    #expect(
      try Self.keys(store)[origin.url("/pkg.whl")]?["servedBy"] as? String
        == origin.url("/pkg.whl"))
    #expect(try Self.objects(store).count == 1, "the same bytes are one object")
  }

  @Test(
    "a rewrite rule sends a fetch of a dead host to the nginx mirror (its access log); the key is the URL asked for; unset, the dead host is asked again"
  )
  func rewriteRule() throws {
    let nginx = try Nginx()
    let body = Bytes.random(50_000, seed: 66)
    _ = try Self.serve(nginx, "mirror/dist/tool.tgz", body)
    let scratch = try Scratch()
    let store = scratch["store"]
    let port = deadPort()
    let asked = "http://127.0.0.1:\(port)/dist/tool.tgz"
    let rule = "http://127.0.0.1:\(port)/=\(nginx.url("/mirror/"))"
    try trove(store, ["config", "set", "rewrite.team", rule])
    #expect(try trove(store, ["config", "get", "rewrite"]).out == "team=\(rule)\n")
    #expect(try trove(store, ["config", "get", "rewrite.team"]).out == "\(rule)\n")
    #expect(try trove(store, ["config"]).out.contains("rewrite.team"))

    let fetched = try Self.fetch(store, ["--json", asked])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    #expect(nginx.requests("/mirror/dist/tool.tgz").count == 1, "\(nginx.accessLog())")
    let key = try #require(try Self.keys(store)[asked])
    #expect(key["servedBy"] as? String == nginx.url("/mirror/dist/tool.tgz"))

    // Rules are config.json's: kept with the other settings.
    try trove(store, ["config", "set", "budget", "1G"])
    #expect(try trove(store, ["config", "get", "rewrite.team"]).out == "\(rule)\n")

    try trove(store, ["config", "unset", "rewrite.team"])
    #expect(try trove(store, ["config", "get", "rewrite"]).out == "")
    let unset = try Self.fetch(store, ["--refresh", asked])
    #expect(unset.status == 69, "the dead host itself is asked: \(unset.stderr)")
    #expect(nginx.requests("/mirror/dist/tool.tgz").count == 1)
    let again = try CLI.run(["--store", store, "config", "unset", "rewrite.team"])
    #expect(again.status == 1, "\(again.stderr)")
  }

  @Test(
    "rewrite rules apply to mirrors too; each matching rule gives a URL, in name order; a rule onto its own prefix keeps the original as a fallback"
  )
  func rewriteOrderAndFallback() throws {
    let nginx = try Nginx()
    let body = Bytes.random(20_000, seed: 71)
    _ = try nginx.files.write("x.bin", body)
    let scratch = try Scratch()
    let store = scratch["store"]
    // a-lan: to a folder that lacks the file (404); b-self: the URL itself.
    try trove(store, ["config", "set", "rewrite.a-lan", "\(nginx.url("/"))=\(nginx.url("/lan/"))"])
    try trove(store, ["config", "set", "rewrite.b-self", "\(nginx.url("/"))=\(nginx.url("/"))"])
    let fetched = try Self.fetch(store, ["--json", nginx.url("/x.bin")])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    let log = nginx.accessLog().map { $0.split(separator: " ").prefix(3).joined(separator: " ") }
    #expect(log == ["GET /lan/x.bin 404", "GET /x.bin 200"], "\(log)")
    #expect(
      try Self.keys(store)[nginx.url("/x.bin")]?["servedBy"] as? String
        == nginx.url("/x.bin"))

    // A mirror is rewritten as the URL is: the dead one goes to nginx.
    let port = deadPort()
    try trove(
      store, ["config", "set", "rewrite.c-dead", "http://127.0.0.1:\(port)/=\(nginx.url("/"))"])
    let origin = Self.dead("/x.bin")
    let mirrored = try Self.fetch(store, [origin, "--mirror", "http://127.0.0.1:\(port)/x.bin"])
    #expect(mirrored.status == 0, "\(mirrored.stderr)")
    #expect(try Self.keys(store)[origin]?["servedBy"] as? String == nginx.url("/x.bin"))
  }

  @Test(
    "config refuses a rewrite rule without '=', with an empty prefix or with a login, naming it")
  func rewriteValidation() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    for (rule, why) in [
      ("http://a.example/", "with an '='"),
      ("=http://b.example/", "prefix (before the '=') is empty"),
      ("https://a.example/=http://u:secret@b.example/", "login"),
      ("ftp://a.example/=http://b.example/", "http:// or https://"),
    ] {
      let set = try CLI.run(["--store", store, "config", "set", "rewrite.bad", rule])
      #expect(set.status == 64, "\(rule): \(set.stderr)")
      #expect(set.stderr.contains("rewrite.bad"), "\(set.stderr)")
      #expect(set.stderr.contains(why), "\(set.stderr)")
      #expect(!set.stderr.contains("secret"), "\(set.stderr)")
    }
    let badName = try CLI.run([
      "--store", store, "config", "set", "rewrite.a/b", "http://a/=http://b/",
    ])
    #expect(badName.status == 64, "\(badName.stderr)")

    // A rule hand-edited into config.json that cannot be used stops fetches (78).
    try trove(store, ["config", "set", "rewrite.ok", "http://a.example/=http://b.example/"])
    let path = store + "/config.json"
    var file = try #require(
      try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
        as? [String: Any])
    var policy = try #require(file["policy"] as? [String: Any])
    policy["rewrite"] = ["ok": "nope"]
    file["policy"] = policy
    try JSONSerialization.data(withJSONObject: file).write(to: URL(fileURLWithPath: path))
    let fetched = try Self.fetch(store, ["http://127.0.0.1:1/x"])
    #expect(fetched.status == 78, "\(fetched.stderr)")
    #expect(fetched.stderr.contains("rewrite"), "\(fetched.stderr)")
  }

  @Test(
    "fetch -i: a line's further URLs are its mirrors, before or among its checksums; old lines still work"
  )
  func inputListWithMirrors() throws {
    let nginx = try Nginx()
    let a = Bytes.random(10_000, seed: 67)
    let b = Bytes.random(11_000, seed: 68)
    _ = try nginx.files.write("a.bin", a)
    _ = try nginx.files.write("b.bin", b)
    let scratch = try Scratch()
    let store = scratch["store"]
    let deadA = Self.dead("/a.bin")
    let list = """
      # a dead origin with a mirror, then a checksum
      \(deadA) \(nginx.url("/a.bin")) \(Self.sha256(a))
      \(nginx.url("/b.bin")) \(Self.sha256(b))

      """
    let listPath = try scratch.write("list.txt", Array(list.utf8))
    let fetched = try Self.fetch(store, ["-i", listPath])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    let keys = try Self.keys(store)
    #expect(keys[deadA]?["servedBy"] as? String == nginx.url("/a.bin"))
    #expect(keys[nginx.url("/b.bin")]?["servedBy"] as? String == nginx.url("/b.bin"))
    #expect(keys.count == 2)

    // --mirror names other URLs of one object: not with several.
    let two = try Self.fetch(
      store, [nginx.url("/a.bin"), nginx.url("/b.bin"), "--mirror", nginx.url("/a.bin")])
    #expect(two.status == 64, "\(two.stderr)")
  }

  @Test(
    "two processes fetching one key with different mirror lists download it once")
  func singleFlightAcrossMirrorLists() throws {
    let nginx = try Nginx(webDAV: true)
    // /slow/ sends 1 MiB a second: the second process arrives mid-transfer.
    _ = try nginx.files.write("big.bin", Bytes.random(2 << 20, seed: 69))
    let scratch = try Scratch()
    let store = scratch["store"]
    let origin = Self.dead("/big.bin")
    let lists = [
      [origin, "--mirror", nginx.url("/slow/big.bin")],
      [
        origin, "--mirror", nginx.url("/slow/big.bin?from=second"), "--mirror",
        nginx.url("/big.bin"),
      ],
    ]
    try concurrently(
      lists.map { arguments in
        { @Sendable in
          let result = try Self.fetch(store, arguments)
          #expect(result.status == 0, "\(result.stderr)")
        }
      })
    let served = nginx.accessLog().filter { $0.contains("/big.bin") }
    #expect(served.count == 1, "\(served)")
  }

  @Test(
    "a mirror's login goes to that mirror and is never recorded; -H lines stay with the URL's origin"
  )
  func mirrorLoginStaysOut() throws {
    guard FaultServer.python != nil else { return }
    let faults = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let origin = Self.dead("/x")
    let mirror = "http://mirroruser:MirrorPw7@127.0.0.1:\(faults.port)/headers/m"
    let fetched = try Self.fetch(
      store, ["--json", "-H", "X-Team-Token: OriginOnly9", origin, "--mirror", mirror])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    let sent = faults.headerLog().joined(separator: "\n")
    #expect(sent.lowercased().contains("authorization: basic"), "\(sent)")
    #expect(!sent.contains("OriginOnly9"), "\(sent)")
    #expect(!fetched.out.contains("MirrorPw7"))
    let key = try #require(try Self.keys(store)[origin])
    #expect(key["servedBy"] as? String == faults.url("/headers/m"))
    for name in ["index.sqlite", "index.sqlite-wal", "references.log"] {
      let bytes = (try? Data(contentsOf: URL(fileURLWithPath: store + "/" + name))) ?? Data()
      #expect(bytes.range(of: Data("MirrorPw7".utf8)) == nil, "\(name)")
    }
  }

  @Test(
    "the library API: FetchRequest.mirrors and the store's rewrite rules, as the command has them")
  func libraryHonoursRewrites() throws {
    let nginx = try Nginx()
    let body = Bytes.random(40_000, seed: 70)
    _ = try Self.serve(nginx, "lib/data.bin", body)
    let scratch = try Scratch()
    let store = try Store(StoreConfiguration(root: scratch["store"]))
    let port = deadPort()
    let asked = "http://127.0.0.1:\(port)/data.bin"

    #expect(throws: TroveError.self) { try store.setRewrite("bad", to: "no-equals-sign") }
    try store.setRewrite("lan", to: "http://127.0.0.1:\(port)/=\(nginx.url("/lib/"))")
    #expect(try store.policy().rewrites.map(\.name) == ["lan"])
    let result = try store.fetch(FetchRequest(url: asked, expected: [Self.sha256(body)]))
    #expect(result.url == asked)
    #expect(result.servedBy == nginx.url("/lib/data.bin"))
    #expect(nginx.requests("/lib/data.bin").count == 1)
    #expect(try store.binding(forKey: asked)?.origin?.servedBy == nginx.url("/lib/data.bin"))

    try store.removeRewrite("lan")
    let other = "http://127.0.0.1:\(port)/lib/data.bin"
    let mirrored = try store.fetch(
      FetchRequest(url: other, mode: .refresh, mirrors: [nginx.url("/lib/data.bin")]))
    #expect(mirrored.servedBy == nginx.url("/lib/data.bin"))
    #expect(mirrored.digest == result.digest)
    #expect(throws: TroveError.self) {
      try store.fetch(FetchRequest(url: asked, mode: .refresh, mirrors: ["ftp://x/y"]))
    }
  }
}
