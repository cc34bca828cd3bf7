import Foundation
import Synchronization
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// `trove fetch` against a real nginx on 127.0.0.1, its access log read
/// to see what went over the wire.
@Suite(.enabled(if: Nginx.executable != nil, Nginx.missing))
struct FetchTests {
  /// `trove --store STORE fetch ARGS` as a process.
  static func fetch(_ store: String, _ arguments: [String]) throws -> CLI.Result {
    try CLI.run(["--store", store, "fetch"] + arguments)
  }

  /// The one `--json` record of a fetch.
  static func record(_ result: CLI.Result) throws -> [String: Any] {
    let records = try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [[String: Any]]
    guard let first = records?.first, records?.count == 1 else {
      throw TestFailure("no fetch record: exit \(result.status), \(result.stderr)")
    }
    return first
  }

  @Test(
    "a first fetch downloads; a stale one is revalidated (304, no body); a fresh one asks nothing")
  func downloadRevalidateFresh() throws {
    let nginx = try Nginx()
    let body = Bytes.random(3 << 20, seed: 1)
    let file = try nginx.files.write("model.bin", body)
    let scratch = try Scratch()
    let store = scratch["store"]

    let first = try Self.fetch(store, [nginx.url("/model.bin")])
    #expect(first.status == 0, "\(first.stderr)")
    let digest = try XXH3Hasher.digest(ofFile: file)
    #expect(first.out == "\(digest)  \(nginx.url("/model.bin"))\n")
    if let xxhsum = TestFilesystems.xxhsum {
      let line = try Spawned(executable: xxhsum, ["-H2", file], io: scratch["xxhsum"]).wait()
      #expect(String(decoding: line.stdout, as: UTF8.self).hasPrefix(digest.hex))
    }
    #expect(nginx.requests("/model.bin").count == 1)
    #expect(nginx.requests("/model.bin")[0].contains(" 200 \(body.count) "))

    // nginx sends no Cache-Control: the copy is stale at once and revalidated.
    let again = try Self.fetch(store, ["--json", nginx.url("/model.bin")])
    let record = try Self.record(again)
    #expect(record["source"] as? String == "revalidated")
    #expect(record["bytesTransferred"] as? Int == 0)
    #expect(record["digest"] as? String == digest.description)
    let second = nginx.requests("/model.bin")[1]
    #expect(second.contains(" 304 0 "), "\(second)")
    #expect(Nginx.quoted(second)[2] != "-", "no If-None-Match: \(second)")

    // /fresh/ says max-age=3600: the second fetch makes no request at all.
    #expect(try Self.fetch(store, [nginx.url("/fresh/model.bin")]).status == 0)
    let cached = try Self.record(try Self.fetch(store, ["--json", nginx.url("/fresh/model.bin")]))
    #expect(cached["source"] as? String == "cache")
    #expect(nginx.requests("/fresh/model.bin").count == 1)
    // --refresh asks even so.
    let refreshed = try Self.record(
      try Self.fetch(store, ["--json", "--refresh", nginx.url("/fresh/model.bin")]))
    #expect(refreshed["source"] as? String == "revalidated")
    #expect(nginx.requests("/fresh/model.bin").count == 2)

    // Stored once, whatever the URL: one object, two keys.
    let s = try scratch.store()
    #expect(try s.entries().count == 1)
    let keys = try s.keys()
    #expect(keys.map(\.key) == [nginx.url("/fresh/model.bin"), nginx.url("/model.bin")])
    #expect(keys.allSatisfy { $0.origin?.etag != nil && $0.origin?.size == Int64(body.count) })
    #expect(keys[0].origin?.expires != nil && keys[1].origin?.expires == nil)
  }

  @Test("--offline serves what is cached with nginx stopped; a miss is exit 1 and asks nothing")
  func offline() throws {
    let nginx = try Nginx()
    try nginx.files.write("a.txt", Array("alpha\n".utf8))
    let scratch = try Scratch()
    let store = scratch["store"]
    let url = nginx.url("/a.txt")
    #expect(try Self.fetch(store, [url]).status == 0)
    nginx.stop()
    let served = try Self.fetch(store, ["--offline", url, "-o", scratch["out.txt"]])
    #expect(served.status == 0, "\(served.stderr)")
    #expect(try contents(scratch["out.txt"]) == Array("alpha\n".utf8))
    let miss = try Self.fetch(store, ["--offline", nginx.url("/b.txt")])
    #expect(miss.status == 1)
    #expect(
      miss.errorLines == [
        "Error: '\(nginx.url("/b.txt"))' is not in store '\(store)' and --offline forbids fetching it"
      ])
    // Without --offline, a stale copy needs the server: it is down.
    let down = try Self.fetch(store, [url])
    #expect(down.status == 69)
    #expect(down.errorLines.count == 1 && down.stderr.contains("curl error 7"), "\(down.stderr)")
  }

  @Test("a file changed on the server gives a new digest; a redirect is followed")
  func changedAndRedirected() throws {
    let nginx = try Nginx()
    let path = try nginx.files.write("data.json", Array("{\"v\":1}".utf8))
    let scratch = try Scratch()
    let store = scratch["store"]
    let first = try Self.record(try Self.fetch(store, ["--json", nginx.url("/data.json")]))
    // A new body and a new modification time: a new ETag.
    try Data("{\"v\":2, \"more\": true}".utf8).write(to: URL(fileURLWithPath: path))
    var times = [
      timespec(tv_sec: 1_900_000_000, tv_nsec: 0), timespec(tv_sec: 1_900_000_000, tv_nsec: 0),
    ]
    _ = utimensat(AT_FDCWD, path, &times, 0)
    let second = try Self.record(try Self.fetch(store, ["--json", nginx.url("/data.json")]))
    #expect(second["source"] as? String == "network")
    #expect(second["digest"] as? String != first["digest"] as? String)
    #expect(
      second["digest"] as? String
        == XXH3Hasher.digest(Array("{\"v\":2, \"more\": true}".utf8)).description)
    #expect(
      try Self.fetch(store, ["--offline", nginx.url("/data.json")]).out.hasPrefix(
        second["digest"] as! String))

    let moved = try Self.record(try Self.fetch(store, ["--json", nginx.url("/moved/data.json")]))
    #expect(moved["digest"] as? String == second["digest"] as? String)
    #expect(moved["httpStatus"] as? Int == 200)
    #expect(nginx.requests("/moved/data.json").first?.contains(" 302 ") == true)
    let binding = try scratch.store().binding(forKey: nginx.url("/moved/data.json"))
    #expect(binding?.origin?.finalURL == nginx.url("/data.json"))
  }

  @Test("404 is exit 1 with one line naming the URL and status; nothing is stored or bound")
  func notFound() throws {
    let nginx = try Nginx()
    let scratch = try Scratch()
    let store = scratch["store"]
    let url = nginx.url("/missing.tar")
    let result = try Self.fetch(store, [url, "-o", scratch["out.tar"]])
    #expect(result.status == 1)
    #expect(result.errorLines == ["Error: cannot fetch '\(url)': HTTP 404 Not Found"])
    #expect(result.out.isEmpty)
    #expect(!FileManager.default.fileExists(atPath: scratch["out.tar"]))
    let s = try scratch.store()
    #expect(try s.entries().isEmpty && s.keys().isEmpty)
    #expect(scratch.temporaries("store").isEmpty)
    #expect(scratch.list("store/partial").isEmpty)
    // Not an http(s) URL: a usage-class error before any request.
    let bad = try Self.fetch(store, ["ftp://127.0.0.1/x"])
    #expect(bad.status == 64)
    #expect(
      bad.errorLines == [
        "Error: cannot fetch 'ftp://127.0.0.1/x': only http:// and https:// URLs are fetched"
      ])
  }

  @Test(
    "--expect sha256: right is stored and serves 'get sha256:HEX' offline; wrong is exit 65, nothing kept"
  )
  func expectedChecksums() throws {
    let nginx = try Nginx()
    let body = Bytes.random(1 << 20, seed: 7)
    try nginx.files.write("pkg.tar", body)
    let sha256 = SHA2Hasher(.sha256)
    body.withUnsafeBytes { sha256.update($0) }
    let right = sha256.finalize()
    let wrong = "sha256:" + String(repeating: "ab", count: 32)
    let scratch = try Scratch()
    let store = scratch["store"]
    let url = nginx.url("/pkg.tar")

    let refused = try Self.fetch(store, ["--expect", wrong, url, "-o", scratch["pkg.tar"]])
    #expect(refused.status == 65)
    #expect(
      refused.errorLines == ["Error: '\(url)' has \(right), expected \(wrong)"], "\(refused.stderr)"
    )
    #expect(!FileManager.default.fileExists(atPath: scratch["pkg.tar"]))
    #expect(try scratch.store().entries().isEmpty)
    #expect(try scratch.store().keys().isEmpty)
    #expect(scratch.list("store/partial").isEmpty)

    let verified = try Self.record(
      try Self.fetch(store, ["--json", "--expect", right.description, url]))
    #expect(verified["verified"] as? [String] == [right.description])
    let requests = nginx.requests("/pkg.tar").count
    // Known by its checksum: no request, any URL.
    let byHash = try Self.record(
      try Self.fetch(
        store, ["--json", "--expect", right.description, nginx.url("/mirror/pkg.tar")]))
    #expect(byHash["source"] as? String == "cache")
    #expect(nginx.accessLog().count == requests)
    #expect(nginx.requests("/mirror/pkg.tar").isEmpty)
    let get = try CLI.run(["--store", store, "get", right.description, scratch["by-sha.tar"]])
    #expect(get.status == 0, "\(get.stderr)")
    #expect(try contents(scratch["by-sha.tar"]) == body)
    // The cached object of a URL that does not match: revalidated (304),
    // still not matching: 65, and the cached object stays.
    let stale = try Self.fetch(store, ["--expect", wrong, url])
    #expect(stale.status == 65)
    #expect(nginx.requests("/pkg.tar").last?.contains(" 304 ") == true)
    #expect(try scratch.store().entries().count == 1)
  }

  @Test("config set checksums sha256: every fetch records its SHA-256, found by 'get sha256:HEX'")
  func alwaysChecksum() throws {
    let nginx = try Nginx()
    let body = Bytes.random(300_000, seed: 11)
    try nginx.files.write("lib.so", body)
    let sha = SHA2Hasher(.sha256)
    body.withUnsafeBytes { sha.update($0) }
    let checksum = sha.finalize()
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "config", "set", "checksums", "sha256"]).status == 0)
    #expect(try CLI.run(["--store", store, "config", "get", "checksums"]).out == "sha256\n")
    let bad = try CLI.run(["--store", store, "config", "set", "checksums", "md5"])
    #expect(bad.status == 64)
    #expect(try Self.fetch(store, [nginx.url("/lib.so")]).status == 0)
    let get = try CLI.run(["--store", store, "get", checksum.description, scratch["lib.so"]])
    #expect(get.status == 0, "\(get.stderr)")
    #expect(try contents(scratch["lib.so"]) == body)
    let miss = try CLI.run([
      "--store", store, "has", "sha512:" + String(repeating: "0", count: 128),
    ])
    #expect(miss.status == 1)
  }

  @Test("N processes fetching one large file make one full-body GET; all print its digest")
  func singleFlight() throws {
    let nginx = try Nginx()
    let body = Bytes.random(48 << 20, seed: 3)
    try nginx.files.write("big.bin", body)
    let digest = XXH3Hasher.digest(body)
    let scratch = try Scratch()
    let store = scratch["store"]
    let processes = try (0..<4).map { i in
      try Spawned(
        ["--store", store, "fetch", nginx.url("/fresh/big.bin")], io: scratch["fetch-\(i)"])
    }
    for process in processes {
      let outcome = try process.wait()
      #expect(outcome.status == 0, "\(outcome)")
      #expect(String(decoding: outcome.stdout, as: UTF8.self).hasPrefix(digest.description))
    }
    let bodies = nginx.requests("/fresh/big.bin").filter { $0.contains(" 200 ") }
    #expect(bodies.count == 1, "\(nginx.accessLog())")
    #expect(try scratch.store().entries().count == 1)
  }

  @Test(
    "-i FILE with --jobs fetches many URLs in parallel, each with its checksum; one failing does not stop the rest"
  )
  func many() throws {
    let nginx = try Nginx()
    let scratch = try Scratch()
    var lines: [String] = []
    var expected: [String: BlobDigest] = [:]
    for i in 0..<40 {
      let body = Bytes.random(4096 + i * 1000, seed: UInt64(100 + i))
      try nginx.files.write("f\(i).dat", body)
      let sha = SHA2Hasher(.sha256)
      body.withUnsafeBytes { sha.update($0) }
      lines.append("\(nginx.url("/f\(i).dat")) \(sha.finalize())")
      expected[nginx.url("/f\(i).dat")] = XXH3Hasher.digest(body)
    }
    lines.append("# a comment, and a URL that is not there")
    lines.append(nginx.url("/absent.dat"))
    let list = try scratch.write("urls.txt", Array(lines.joined(separator: "\n").utf8))
    let result = try Self.fetch(scratch["store"], ["-i", list, "--jobs", "8"])
    #expect(result.status == 1)
    #expect(
      result.errorLines == ["Error: cannot fetch '\(nginx.url("/absent.dat"))': HTTP 404 Not Found"]
    )
    let printed = result.out.split(separator: "\n").map { $0.split(separator: " ", maxSplits: 2) }
    #expect(printed.count == 40)
    for line in printed {
      #expect(expected[String(line[1])]?.description == String(line[0]), "\(line)")
    }
    #expect(try scratch.store().keys().count == 40)
    // Connections were kept alive: far fewer than one per URL is not
    // visible in the log, but every URL was asked once.
    #expect(nginx.accessLog().count == 41)
  }

  @Test(
    "-i FILE listing one URL three times among others: one body transferred and published, every line answered"
  )
  func manyWithRepeats() throws {
    let nginx = try Nginx()
    let scratch = try Scratch()
    let body = Bytes.random(20_000, seed: 77)
    try nginx.files.write("same.dat", body)
    var lines: [String] = []
    for i in 0..<30 {
      try nginx.files.write("o\(i).dat", Bytes.random(5000 + i, seed: UInt64(700 + i)))
      lines.append(nginx.url("/o\(i).dat"))
      if i % 10 == 0 { lines.append(nginx.url("/same.dat")) }
    }
    let list = try scratch.write("urls.txt", Array(lines.joined(separator: "\n").utf8))
    let result = try Self.fetch(scratch["store"], ["-i", list, "--jobs", "8"])
    #expect(result.status == 0, "\(result.stderr)")
    let printed = result.out.split(separator: "\n")
    #expect(printed.count == 33)
    let digest = XXH3Hasher.digest(body).description
    let same = printed.filter { $0.hasSuffix(" \(nginx.url("/same.dat"))") }
    #expect(same.count == 3 && same.allSatisfy { $0.hasPrefix(digest) })
    // One body; a request made once it was stored revalidates (no max-age).
    let asked = nginx.requests("/same.dat")
    #expect(asked.filter { $0.contains(" 200 ") }.count == 1, "\(asked)")
    #expect(asked.allSatisfy { $0.contains(" 200 ") || $0.contains(" 304 ") }, "\(asked)")
    #expect(try scratch.store().entries().count == 31)
  }

  @Test(
    "-i FILE whose URLs leave the plain path (a dropped transfer, a part file to resume, a large body, a redirect, a 404, wrong bytes, a failure retried): each ends as a fetch of it alone would, asked no more often but for the large body's head; a second run revalidates each"
  )
  func manyAlongEveryPath() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let target = server.url("/ok/target?size=30000")
    let wrongBody = try server.body("wrongly", size: 10000)
    let sha = SHA2Hasher(.sha256)
    wrongBody.withUnsafeBytes { sha.update($0) }
    let urls = [
      "plain": server.url("/ok/plain?size=20000"),
      // Half a body, then the connection closed: small, fetched whole again.
      "dropped": server.url("/drop/dropped?size=200000"),
      // The same past 4 MiB, fetched alone first: its part file is resumed.
      "resumed": server.url("/drop/resumed?size=6000000"),
      // Past 4 MiB: refused at its head by the first pass, fetched by the second.
      "large": server.url("/ok/large?size=5000000"),
      "moved": server.url(
        "/redirect/moved?to=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
      ),
      "absent": server.url("/status/404"),
      "wrong": server.url("/wrong/wrongly?size=10000"),
      // Every answer half its length: a failure that may pass, retried once.
      "short": server.url("/short/shorty?size=20000"),
      // A redirect the rules refuse: an error, the Location not asked.
      "refused": server.url("/redirect/refused?to=ftp%3A%2F%2F127.0.0.1%2Fx"),
    ]
    let store = scratch["store"]
    let alone = try Self.fetch(store, ["--retries", "0", urls["resumed"]!])
    #expect(alone.status != 0, "\(alone.stderr)")
    let lines =
      ["plain", "dropped", "resumed", "large", "moved", "absent", "short", "refused"].map {
        urls[$0]!
      } + [
        "\(urls["wrong"]!) \(sha.finalize())"
      ]
    let list = try scratch.write("urls.txt", Array(lines.joined(separator: "\n").utf8))
    let first = try Self.fetch(store, ["-i", list, "--jobs", "4", "--retries", "1"])
    #expect(first.status != 0)
    #expect(first.errorLines.count == 4, "\(first.stderr)")
    #expect(first.errorLines.contains { $0.contains("HTTP 404") }, "\(first.stderr)")
    #expect(first.errorLines.contains { $0.contains("expected sha256:") }, "\(first.stderr)")
    #expect(first.errorLines.contains { $0.contains("/short/shorty") }, "\(first.stderr)")
    #expect(
      first.errorLines.contains { $0.contains("not an http:// or https:// URL") }, "\(first.stderr)"
    )
    var printed: [String: String] = [:]
    for line in first.out.split(separator: "\n") {
      let fields = line.split(separator: " ")
      printed[String(fields.last!)] = String(fields[0])
    }
    #expect(printed.count == 5, "\(first.stdout)")
    let bodies = [
      "plain": ("plain", 20000), "dropped": ("dropped", 200_000),
      "resumed": ("resumed", 6_000_000), "large": ("large", 5_000_000),
      "moved": ("target", 30000),
    ]
    for (key, (name, size)) in bodies {
      let body = try server.body(name, size: size)
      #expect(printed[urls[key]!] == XXH3Hasher.digest(body).description, "\(key)")
    }
    func asked(_ path: String) -> [String] {
      server.requests().filter { $0.hasPrefix("GET \(path) ") }
    }
    #expect(asked("/ok/plain").count == 1)
    #expect(asked("/drop/dropped").count == 2, "\(asked("/drop/dropped"))")
    let resumed = asked("/drop/resumed")
    #expect(resumed.count == 2, "\(resumed)")
    // The log's fields: "Range" "If-Range" "If-None-Match".
    #expect(resumed.last?.contains(" \"bytes=") == true, "\(resumed)")
    #expect(resumed.last?.contains(" \"bytes=0-\"") == false, "\(resumed)")
    #expect(asked("/ok/large").count == 2, "\(asked("/ok/large"))")
    #expect(asked("/redirect/moved").count == 1 && asked("/ok/target").count == 1)
    #expect(asked("/status/404").count == 1)
    #expect(asked("/wrong/wrongly").count == 1)
    // Once, and once more for --retries 1, as a fetch of it alone asks.
    #expect(asked("/short/shorty").count == 2, "\(asked("/short/shorty"))")
    #expect(asked("/redirect/refused").count == 1, "\(asked("/redirect/refused"))")
    #expect(try scratch.store().keys().count == 5)
    #expect(scratch.temporaries("store").isEmpty, "\(scratch.temporaries("store"))")
    // Nothing says the bodies stay fresh: each stored URL is asked again,
    // with its validator, and the cached object served.
    let second = try Self.fetch(store, ["-i", list, "--jobs", "4", "--retries", "0"])
    #expect(second.errorLines.count == 4, "\(second.stderr)")
    #expect(second.out == first.out)
    for path in ["/ok/plain", "/drop/dropped", "/drop/resumed", "/ok/large", "/ok/target"] {
      #expect(asked(path).last?.hasSuffix(" \"\"v1\"\"") == true, "\(path): \(asked(path))")
    }
  }

  @Test(
    "three fetch -i processes of one list at once: each URL's body sent once, every line answered with the same digest, every object whole"
  )
  func manyFromSeveralProcesses() throws {
    let nginx = try Nginx()
    let scratch = try Scratch()
    var lines: [String] = []
    var expected: [String: String] = [:]
    for i in 0..<60 {
      let body = Bytes.random(3000 + i * 997, seed: UInt64(1300 + i))
      try nginx.files.write("c\(i).dat", body)
      lines.append(nginx.url("/c\(i).dat"))
      expected[nginx.url("/c\(i).dat")] = XXH3Hasher.digest(body).description
    }
    let list = try scratch.write("urls.txt", Array(lines.joined(separator: "\n").utf8))
    let store = scratch["store"]
    _ = try scratch.store()
    let outputs = Mutex<[CLI.Result]>([])
    try concurrently(
      (0..<3).map { _ in
        {
          let result = try Self.fetch(store, ["-i", list, "--jobs", "8"])
          outputs.withLock { $0.append(result) }
        }
      })
    for result in outputs.withLock({ $0 }) {
      #expect(result.status == 0, "\(result.stderr)")
      let printed = result.out.split(separator: "\n").map { $0.split(separator: " ") }
      #expect(printed.count == 60)
      for line in printed {
        #expect(expected[String(line.last!)] == String(line[0]), "\(line)")
      }
    }
    // One body a URL: the others waited for it, or asked whether it changed.
    for i in 0..<60 {
      let asked = nginx.requests("/c\(i).dat")
      #expect(asked.filter { $0.contains(" 200 ") }.count == 1, "/c\(i).dat: \(asked)")
    }
    #expect(try CLI.run(["--store", store, "verify"]).status == 0)
  }

  @Test(
    "-i FILE whose body fails to be published (a rename fails): that URL is an error, not printed or bound; the rest are stored"
  )
  func manyWithFailedPublish() throws {
    let nginx = try Nginx()
    let scratch = try Scratch()
    var lines: [String] = []
    var bodies: [String: [UInt8]] = [:]
    for i in 0..<12 {
      let body = Bytes.random(6000 + i, seed: UInt64(900 + i))
      try nginx.files.write("p\(i).dat", body)
      lines.append(nginx.url("/p\(i).dat"))
      bodies[nginx.url("/p\(i).dat")] = body
    }
    let store = scratch["store"]
    _ = try scratch.store()  // made first: the fault hits an object's rename
    let list = try scratch.write("urls.txt", Array(lines.joined(separator: "\n").utf8))
    let result = try CLI.run(
      ["--store", store, "fetch", "-i", list, "--jobs", "4"],
      environment: ["TROVE_INJECT_FAULT": "renameat2:5:4:1"])
    #expect(result.status == 74, "\(result.stderr)")
    #expect(result.errorLines.count == 1, "\(result.stderr)")
    let printed = result.out.split(separator: "\n").map {
      $0.split(separator: " ").map(String.init)
    }
    #expect(printed.count == 11, "\(result.stdout)")
    let reopened = try Store(StoreConfiguration(root: store))
    for (url, body) in bodies {
      let digest = XXH3Hasher.digest(body)
      if printed.contains(where: { $0.last == url }) {
        #expect(try reopened.digest(forKey: url) == digest)
        #expect(try reopened.bytes(for: digest) == body)
      } else {
        #expect(try reopened.digest(forKey: url) == nil, "\(url) bound, its line an error")
        #expect(try !reopened.contains(digest), "\(url) stored, its line an error")
      }
    }
    #expect(scratch.temporaries("store").isEmpty, "\(scratch.temporaries("store"))")
  }

  @Test(
    "--jobs N: at most N transfers at once, though there are more threads than transfers"
  )
  func jobsBoundTransfers() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    var urls: [String] = []
    for i in 0..<12 {
      // Each answer waits 0.5 s: the transfers overlap as far as the bound lets them.
      let name = "f\(i).bin"
      try FileManager.default.createDirectory(
        atPath: server.tree, withIntermediateDirectories: true)
      _ = FileManager.default.createFile(
        atPath: server.tree + "/" + name, contents: Data(Bytes.random(8192, seed: UInt64(i))))
      _ = FileManager.default.createFile(atPath: server.tree + "/" + name + ".soon", contents: nil)
      urls.append(server.url("/tree/" + name))
    }
    let result = try Self.fetch(scratch["store"], ["--jobs", "3"] + urls)
    #expect(result.status == 0, "\(result.stderr)")
    #expect(result.out.split(separator: "\n").count == 12)
    #expect((2...3).contains(server.busiest()), "\(server.busiest()) transfers at once")
  }

  @Test(
    "--jobs with large bodies: each transfer paused and resumed as its job catches up, every digest right"
  )
  func manyLarge() throws {
    let nginx = try Nginx()
    let scratch = try Scratch()
    var urls: [String] = []
    var expected: [String: BlobDigest] = [:]
    for i in 0..<4 {
      let body = Bytes.random((20 << 20) + i * 4099, seed: UInt64(500 + i))
      try nginx.files.write("large\(i).bin", body)
      urls.append(nginx.url("/large\(i).bin"))
      expected[urls[i]] = XXH3Hasher.digest(body)
    }
    #expect(
      try CLI.run(["--store", scratch["store"], "config", "set", "checksums", "sha256"]).status == 0
    )
    let result = try Self.fetch(scratch["store"], ["--jobs", "4"] + urls)
    #expect(result.status == 0, "\(result.stderr)")
    for line in result.out.split(separator: "\n") {
      let fields = line.split(separator: " ", maxSplits: 2)
      #expect(expected[String(fields[1])]?.description == String(fields[0]), "\(line)")
    }
    #expect(result.out.split(separator: "\n").count == 4)
    #expect(try CLI.run(["--store", scratch["store"], "verify"]).status == 0)
  }

  @Test(
    "-o on the reflink XFS is a clone (FIEMAP shared extents)",
    .enabled(if: TestFilesystems.xfs != nil, TestFilesystems.xfsMissing))
  func outputIsClone() throws {
    let nginx = try Nginx()
    let body = Bytes.random(2 << 20, seed: 9)
    try nginx.files.write("w.bin", body)
    let scratch = try Scratch(under: TestFilesystems.xfs!)
    let out = scratch["w.bin"]
    let result = try Self.fetch(scratch["store"], [nginx.url("/w.bin"), "-o", out])
    #expect(result.status == 0, "\(result.stderr)")
    #expect(try contents(out) == body)
    let summary = try extents(out)
    #expect(summary.sharedBytes >= UInt64(body.count), "\(summary)")
  }
}

/// The per-URL lock and the checksums computed from stored objects, through the library.
struct FetchLockTests {
  /// Whether another open file description can take the byte of the
  /// lock `name` in `store`'s `fetch.lock` (taken, then let go).
  static func byteIsFree(_ store: String, _ name: String) throws -> Bool {
    let fd = try FileDescriptor.open(store + "/" + FetchLocks.path, [.readWrite])
    defer { fd.close() }
    let offset = FetchLocks.offset(of: name)
    guard try fd.lockByte(at: offset, wait: false) else { return false }
    fd.unlockByte(at: offset)
    return true
  }

  @Test(
    "the lock file removed while a thread waited for a lock is made again and the lock taken on it, where other processes find it"
  )
  func retakenAfterUnlink() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    var first: FetchLock? = FetchLock(store: store, name: "k")
    #expect(first?.isHonoured == !store.objects.filesystem.isShared)
    #expect(try !Self.byteIsFree(scratch["store"], "k"))
    #expect(try Self.byteIsFree(scratch["store"], "other"))
    let acquired = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let outcome = Mutex<Bool?>(nil)
    Thread {
      let second = FetchLock(store: store, name: "k")
      outcome.withLock { $0 = second != nil }
      acquired.signal()
      release.wait()
      _ = second
    }.start()
    usleep(200_000)  // the second waits for the first
    #expect(outcome.withLock { $0 } == nil)
    #expect(unlink(scratch["store/fetch.lock"]) == 0)
    first = nil
    #expect(acquired.wait(timeout: .now() + 10) == .success)
    #expect(outcome.withLock { $0 } == true)
    // The second holds its byte of the file now under the name.
    #expect(try !Self.byteIsFree(scratch["store"], "k"))
    release.signal()
  }

  @Test(
    "a URL's lock held by another open file description keeps a fetch of it from asking the server until it is let go; every URL locks one file",
    .enabled(if: FaultServer.python != nil, FaultServer.missing))
  func lockKeepsFetchWaiting() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = try scratch.store()
    let url = server.url("/ok/locked?size=1000")
    // Another process's holder, as far as the kernel is concerned.
    _ = FetchLock(store: store, name: "made")
    let holder = try FileDescriptor.open(scratch["store/" + FetchLocks.path], [.readWrite])
    defer { holder.close() }
    let offset = FetchLocks.offset(of: Store.downloadName(url))
    #expect(try holder.lockByte(at: offset, wait: false))
    let done = DispatchSemaphore(value: 0)
    let result = Mutex<Result<FetchResult, TroveError>?>(nil)
    Thread {
      let fetched = Result { () throws(TroveError) in try store.fetch(FetchRequest(url: url)) }
      result.withLock { $0 = fetched }
      done.signal()
    }.start()
    usleep(500_000)
    #expect(server.requests().isEmpty, "\(server.requests())")
    #expect(result.withLock { $0 } == nil)
    holder.unlockByte(at: offset)
    #expect(done.wait(timeout: .now() + 30) == .success)
    #expect(try result.withLock { $0 }?.get().source == .network)
    #expect(server.requests().count == 1)
    for i in 0..<20 {
      _ = try store.fetch(FetchRequest(url: server.url("/ok/many-\(i)?size=100")))
    }
    #expect(scratch.list("store/locks").isEmpty)
  }

  @Test(
    "a fetch.lock that cannot be opened (a folder in its place): fetches still store their bodies, one warning says why",
    .enabled(if: FaultServer.python != nil, FaultServer.missing))
  func unusableLockFile() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    _ = try scratch.store()
    #expect(mkdir(scratch["store/" + FetchLocks.path], 0o700) == 0)
    let urls = (0..<3).map { server.url("/ok/unlocked-\($0)?size=5000") }
    let fetched = try CLI.run(["--store", scratch["store"], "fetch"] + urls)
    #expect(fetched.status == 0, "\(fetched.stderr)")
    #expect(fetched.out.split(separator: "\n").count == 3, "\(fetched.out)")
    let warnings = fetched.stderr.split(separator: "\n").filter { $0.contains("cannot lock") }
    #expect(warnings.count == 1, "\(fetched.stderr)")
    #expect(warnings.first?.contains(scratch["store/fetch.lock"]) == true)
    #expect(try CLI.run(["--store", scratch["store"], "verify"]).status == 0)
  }

  @Test(
    "a checksum not recorded is computed from the stored object, checked against its digest, and recorded"
  )
  func computedChecksum() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let body = Bytes.random(3 << 20, seed: 21)
    let digest = try store.put(bytes: body).digest
    let sha = SHA2Hasher(.sha512)
    body.withUnsafeBytes { sha.update($0) }
    let expected = sha.finalize()
    #expect(try store.digest(for: expected) == nil)
    let computed = try store.checksums(of: digest, [.sha512, .xxh128])
    #expect(computed[.sha512] == expected && computed[.xxh128] == Checksum(digest))
    #expect(try store.digest(for: expected) == digest)
  }
}
