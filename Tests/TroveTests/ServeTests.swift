import Foundation
import Synchronization
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// A store and one `trove serve` of it, shared by the tests of
/// ``ServeTests`` that run together: made by the first, stopped when the
/// last one running ends.
final class ServedStore: @unchecked Sendable {
  let scratch: Scratch
  let server: TroveServe
  /// Incompressible: stored raw.
  let raw: [UInt8]
  /// Text: stored as a zstd frame.
  let text: [UInt8]
  /// Fetched from nginx with SHA-256 and SHA-512 recorded; its key is its URL.
  let fetched: [UInt8]
  let fetchedURL: String

  private static let shared = Mutex<(ServedStore?, Int)>((nil, 0))

  /// The shared one, made when no test holds it.
  static func acquire() throws -> ServedStore {
    try shared.withLock { state in
      if let served = state.0 {
        state.1 += 1
        return served
      }
      let served = try ServedStore()
      state = (served, 1)
      return served
    }
  }

  static func release() {
    shared.withLock { state in
      state.1 -= 1
      if state.1 == 0 { state.0 = nil }
    }
  }

  private init() throws {
    scratch = try Scratch()
    let store = scratch["store"]
    try trove(store, ["config", "set", "compression", "zstd"])
    try trove(store, ["config", "set", "checksums", "sha256,sha512"])
    raw = Bytes.random(300_000, seed: 41)
    text = Bytes.text(2_000_000, seed: 42)
    fetched = Bytes.random(200_000, seed: 43)
    _ = try put(scratch, "raw.bin", raw, key: "named-key")
    _ = try put(scratch, "text.txt", text)
    let nginx = try Nginx()
    try nginx.files.write("model.bin", fetched)
    fetchedURL = nginx.url("/model.bin")
    try trove(store, ["fetch", fetchedURL])
    nginx.stop()
    server = try TroveServe(store: store)
  }

  deinit { _ = try? server.stop() }
}

/// `trove serve` answering curl and another Trove store: objects by
/// digest and checksum with HTTP's caching and range rules, the read side
/// of a WebDAV remote, exposure and tokens, the access log, a graceful stop.
@Suite(.enabled(if: Nginx.executable != nil, Nginx.missing))
final class ServeTests {
  let served: ServedStore

  init() throws { served = try ServedStore.acquire() }
  deinit { ServedStore.release() }

  var server: TroveServe { served.server }

  func casURL(_ bytes: [UInt8]) -> String { server.url("cas/" + XXH3Hasher.digest(bytes).hex) }

  @Test("HEAD gives the length, a strong ETag, immutable caching and Accept-Ranges; GET the bytes")
  func headAndGet() throws {
    let hex = XXH3Hasher.digest(served.raw).hex
    let head = try curl(["-I", casURL(served.raw)])
    #expect(head.status == 200)
    #expect(head.headers["content-length"] == "\(served.raw.count)")
    #expect(head.headers["etag"] == "\"\(hex)\"")
    #expect(head.headers["cache-control"] == "public, max-age=31536000, immutable")
    #expect(head.headers["accept-ranges"] == "bytes")
    let get = try curl([casURL(served.raw)])
    #expect(get.status == 200)
    #expect(get.body == served.raw)
  }

  @Test("one range gets 206 and Content-Range; past the end 416 with bytes */N; several the whole")
  func ranges() throws {
    let part = try curl(["-r", "1000-1999", casURL(served.raw)])
    #expect(part.status == 206)
    #expect(part.headers["content-range"] == "bytes 1000-1999/\(served.raw.count)")
    #expect(part.body == Array(served.raw[1000..<2000]))
    let suffix = try curl(["-H", "Range: bytes=-10", casURL(served.raw)])
    #expect(suffix.status == 206 && suffix.body == Array(served.raw.suffix(10)))
    let past = try curl(["-r", "\(served.raw.count)-", casURL(served.raw)])
    #expect(past.status == 416)
    #expect(past.headers["content-range"] == "bytes */\(served.raw.count)")
    let several = try curl(["-r", "0-9,20-29", casURL(served.raw)])
    #expect(several.status == 200 && several.body == served.raw)
  }

  @Test("If-None-Match with the object's ETag gets 304 and no body; another tag the object")
  func conditional() throws {
    let hex = XXH3Hasher.digest(served.raw).hex
    let same = try curl(["-H", "If-None-Match: \"\(hex)\"", casURL(served.raw)])
    #expect(same.status == 304 && same.body.isEmpty)
    #expect(same.headers["etag"] == "\"\(hex)\"")
    // A 304 may carry only the length a 200 would have.
    #expect(same.headers["content-length"] == "\(served.raw.count)")
    let other = try curl(["-H", "If-None-Match: \"0123\", W/\"4567\"", casURL(served.raw)])
    #expect(other.status == 200 && other.body == served.raw)
  }

  @Test(
    "an absent object is 404; a malformed path 400 naming the cause; an unknown one 404; PUT 405",
    arguments: [
      ("cas/" + String(repeating: "0", count: 32), 404, "no object"),
      ("cas/xyz", 400, "'xyz' is not a digest"),
      ("cas/ab/" + String(repeating: "0", count: 32), 400, "not the first two digits"),
      ("sha256/" + String(repeating: "a", count: 10), 400, "not a sha256 checksum"),
      ("keys/zz.json", 400, "not a key record name"),
      ("cas/../../etc/passwd", 400, "too many or too few segments"),
      ("etc/passwd", 404, "no such path"),
      ("sigs/00/" + String(repeating: "0", count: 32) + ".json", 404, "the store signs nothing"),
      ("tmp/abc", 404, "not read back"),
    ])
  func refusals(path: String, status: Int, cause: String) throws {
    let got = try curl(["--path-as-is", server.url(path)])
    #expect(got.status == status)
    let body = String(decoding: got.body, as: UTF8.self)
    #expect(body.contains(cause) && body.hasSuffix("\n") && body.split(separator: "\n").count == 1)
  }

  @Test("a method other than GET and HEAD is 405 with Allow")
  func otherMethods() throws {
    let got = try curl(["-X", "DELETE", casURL(served.raw)])
    #expect(got.status == 405)
    #expect(got.headers["allow"] == "GET, HEAD")
  }

  @Test("a request head over the memory limit gets 431, and the server serves on")
  func oversizedHeader() throws {
    let big = String(repeating: "a", count: 64 * 1024)
    let got = try curl(["-H", "X-Big: \(big)", casURL(served.raw)])
    #expect(got.status == 431)
    #expect(try curl([server.url("healthz")]).body == Array("ok\n".utf8))
  }

  @Test("a compressed object is sent decompressed, ranges too; as its zstd frame to zstd clients")
  func compressedObject() throws {
    let hex = XXH3Hasher.digest(served.text).hex
    let frame = served.scratch["store/objects/\(hex.prefix(2))/\(hex).zst"]
    #expect(FileManager.default.fileExists(atPath: frame), "stored raw, not compressed")
    let plain = try curl([casURL(served.text)])
    #expect(plain.status == 200 && plain.body == served.text)
    #expect(plain.headers["content-encoding"] == nil)
    #expect(plain.headers["content-length"] == "\(served.text.count)")
    let part = try curl(["-r", "1500000-1500099", casURL(served.text)])
    #expect(part.status == 206 && part.body == Array(served.text[1_500_000..<1_500_100]))
    let encoded = try curl(["-H", "Accept-Encoding: gzip, zstd", casURL(served.text)])
    #expect(encoded.status == 200)
    #expect(encoded.headers["content-encoding"] == "zstd")
    #expect(encoded.headers["vary"] == "Accept-Encoding")
    #expect(encoded.headers["etag"] != plain.headers["etag"])
    #expect(encoded.body == (try contents(frame)))
    // curl decodes what it asked for: the same bytes.
    let decoded = try curl(["--compressed", "-H", "Accept-Encoding: zstd", casURL(served.text)])
    #expect(decoded.body == served.text)
    let refused = try curl(["-H", "Accept-Encoding: zstd;q=0", casURL(served.text)])
    #expect(refused.headers["content-encoding"] == nil && refused.body == served.text)
  }

  @Test("/sha256/ and /sha512/ serve the object whose checksum a fetch recorded; others are 404")
  func checksumRoutes() throws {
    func checksum(_ algorithm: ChecksumAlgorithm) -> String {
      let hasher = SHA2Hasher(algorithm)
      served.fetched.withUnsafeBytes { hasher.update($0) }
      return hasher.finalize().hex
    }
    let (sha256, sha512) = (checksum(.sha256), checksum(.sha512))
    let by256 = try curl([server.url("sha256/" + sha256)])
    #expect(by256.status == 200 && by256.body == served.fetched)
    #expect(by256.headers["etag"] == "\"\(XXH3Hasher.digest(served.fetched).hex)\"")
    let by512 = try curl([server.url("sha512/" + sha512.uppercased())])
    #expect(by512.status == 200 && by512.body == served.fetched)
    let unknown = try curl([server.url("sha256/" + String(repeating: "0", count: 64))])
    #expect(unknown.status == 404)
  }

  @Test("another store with the server as a remote gets by digest and by key, then from its own")
  func peerReadsThrough() throws {
    let peer = try Scratch()
    let store = peer["store"]
    try trove(store, ["remote", "add", "peer", server.url, "--read-only"])
    let digest = XXH3Hasher.digest(served.raw)
    try trove(store, ["get", digest.description, peer["by-digest"]])
    #expect(try contents(peer["by-digest"]) == served.raw)
    try trove(store, ["get", "named-key", peer["by-key"]])
    #expect(try contents(peer["by-key"]) == served.raw)
    try trove(store, ["get", served.fetchedURL, peer["by-url"]])
    #expect(try contents(peer["by-url"]) == served.fetched)
    // The record carries what the fetch recorded: its checksums.
    let keys = try trove(store, ["keys", "--json"]).out
    #expect(keys.contains(served.fetchedURL))
    // Now its own: no request reaches the server for them.
    let fetchedHex = XXH3Hasher.digest(served.fetched).hex
    let paths = [
      "/cas/\(digest.hex.prefix(2))/\(digest.hex) ", "/cas/\(fetchedHex.prefix(2))/\(fetchedHex) ",
      "/keys/\(XXH3Hasher.digest(Array(served.fetchedURL.utf8)).hex).json ",
    ]
    func asked() -> Int {
      server.accessLog().filter { line in paths.contains { line.contains($0) } }.count
    }
    let before = asked()
    #expect(before >= 3)
    try trove(store, ["remote", "rm", "peer"])
    try trove(store, ["get", digest.description, peer["again"]])
    try trove(store, ["get", served.fetchedURL, peer["again-url"]])
    #expect(try contents(peer["again-url"]) == served.fetched)
    #expect(asked() == before)
  }

  @Test(
    "with a signing key, the server signs what it serves as a remote: a store trusting that key reads a key and its object through it, one trusting another key reads nothing; without a key, no signed entries"
  )
  func signedPeer() throws {
    let scratch = try Scratch()
    let store = scratch["server"]
    let (file, publicKey) = try SigningTests.keygen(scratch, "peer")
    let (_, otherKey) = try SigningTests.keygen(scratch, "other")
    let bytes = Bytes.random(300_000, seed: 97)
    #expect(
      try CLI.run(["--store", store, "put", try scratch.write("in", bytes), "--key", "model"])
        .status == 0)
    #expect(try CLI.run(["--store", store, "config", "set", "signing-key", file]).status == 0)
    let digest = XXH3Hasher.digest(bytes)
    let sigs = "sigs/\(digest.hex.prefix(2))/\(digest.hex).json"
    let record = "keys/\(XXH3Hasher.digest(Array("model".utf8)).hex).json"
    let server = try TroveServe(store: store)
    let entry = try curl([server.url(sigs)])
    #expect(entry.status == 200, "\(entry.status)")
    let fields = try JSONSerialization.jsonObject(with: Data(entry.body)) as? [String: Any]
    let signers = (fields?["signatures"] as? [[String: Any]])?.compactMap { $0["key"] as? String }
    #expect(signers == [publicKey], "\(String(decoding: entry.body, as: UTF8.self))")
    let signed = try JSONSerialization.jsonObject(with: Data(try curl([server.url(record)]).body))
    #expect((signed as? [String: Any])?["signed"] != nil)

    for (reader, key, reads) in [("trusting", publicKey, true), ("other", otherKey, false)] {
      let added = try CLI.run([
        "--store", scratch[reader], "remote", "add", "peer", server.url, "--read-only", "--trust",
        key,
      ])
      #expect(added.status == 0, "\(added.stderr)")
      let got = try CLI.run(["--store", scratch[reader], "get", "model", scratch[reader + ".out"]])
      #expect((got.status == 0) == reads, "\(reader): \(got.stderr)")
      #expect(((try? contents(scratch[reader + ".out"])) == bytes) == reads, "\(reader)")
    }
    _ = try server.stop()

    #expect(try CLI.run(["--store", store, "config", "unset", "signing-key"]).status == 0)
    let unsigned = try TroveServe(store: store)
    #expect(try curl([unsigned.url(sigs)]).status == 404)
    let plain = try JSONSerialization.jsonObject(with: Data(try curl([unsigned.url(record)]).body))
    #expect((plain as? [String: Any])?["signed"] == nil)
  }

  @Test("a key record is served as remote push writes it; none for a key whose URL holds a login")
  func keyRecords() throws {
    let name = XXH3Hasher.digest(Array("named-key".utf8)).hex
    let record = try curl([server.url("keys/\(name).json")])
    #expect(record.status == 200)
    let json = try JSONSerialization.jsonObject(with: Data(record.body)) as? [String: Any]
    #expect(json?["key"] as? String == "named-key")
    #expect(json?["digest"] as? String == XXH3Hasher.digest(served.raw).description)
    #expect(json?["signed"] == nil)
    let login = "http://user:secret@example.com/file"
    let store = try Store(StoreConfiguration(root: served.scratch["store"]))
    try store.bind(key: login, to: XXH3Hasher.digest(served.raw))
    let hidden = try curl([server.url("keys/\(XXH3Hasher.digest(Array(login.utf8)).hex).json")])
    #expect(hidden.status == 404)
    #expect(!String(decoding: hidden.body, as: UTF8.self).contains("secret"))
    let missing = try curl([server.url("keys/\(String(repeating: "0", count: 32)).json")])
    #expect(missing.status == 404)
    #expect(try curl([server.url("trove-remote.json")]).status == 200)
  }

  @Test("the access log has one line per request, in the common log format")
  func accessLogLines() throws {
    let marker = "cas/" + String(repeating: "f", count: 32)
    for _ in 0..<3 { _ = try curl([server.url(marker)]) }
    let lines = poll(times: 100) { () -> [String]? in
      let found = server.accessLog().filter { $0.contains("/" + marker + " ") }
      return found.count == 3 ? found : nil
    }
    let line = try #require(lines?.first)
    #expect(line.hasPrefix("127.0.0.1 - - ["))
    #expect(line.contains("\"GET /\(marker) HTTP/1.1\" 404 "))
  }
}

/// Whether a socket binds to ::1 here.
let ipv6LoopbackWorks: Bool = {
  let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
  defer { close(fd) }
  var address = sockaddr_in6()
  address.sin6_family = sa_family_t(AF_INET6)
  address.sin6_addr = in6addr_loopback
  return withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0
    }
  }
}()

/// `ss`, which shows a connection's congestion control, when installed.
let socketStatistics: String? = ["/usr/bin/ss", "/bin/ss", "/usr/sbin/ss", "/sbin/ss"]
  .first { FileManager.default.isExecutableFile(atPath: $0) }

/// Servers of their own: exposure, tokens, the JSON log, a graceful stop.
@Suite
struct ServeLifecycleTests {
  @Test("a non-loopback address without a token or --public-read is refused (64), never bound")
  func exposureRefused() throws {
    let scratch = try Scratch()
    try trove(scratch["store"], ["config", "set", "budget", "1G"])
    // A port this test listens on: binding it would fail with 69, not 64.
    let (socket, port) = loopbackSocket()
    defer { close(socket) }
    listen(socket, 1)
    let run = try CLI.run(["--store", scratch["store"], "serve", "--listen", "0.0.0.0:\(port)"])
    #expect(run.status == 64, "\(run.stderr)")
    #expect(run.stderr.contains("refusing to listen on 0.0.0.0:\(port)"))
    #expect(run.stderr.contains("--token-file"))
  }

  @Test("a GET counts as a hit, as any read does; a HEAD and a 404 do not")
  func hitsCounted() throws {
    let scratch = try Scratch()
    let digest = try put(scratch, "a", Bytes.random(3000, seed: 16))
    let server = try TroveServe(store: scratch["store"])
    _ = try curl([server.url("cas/" + digest.hex)])
    _ = try curl([server.url("cas/" + digest.hex)])
    _ = try curl(["-I", server.url("cas/" + digest.hex)])
    _ = try curl([server.url("cas/" + String(repeating: "0", count: 32))])
    // Counts are written a second after the first, or when the server stops.
    #expect(try server.stop().status == 0)
    let stats = try trove(scratch["store"], ["stats", "--json"])
    let json = try JSONSerialization.jsonObject(with: Data(stats.stdout)) as? [String: Any]
    #expect((json?["hits"] as? [String: Any])?["local"] as? Int == 2)
  }

  @Test(
    "one daemon per --listen address: IPv4 and IPv6 loopback both serve",
    .enabled(if: ipv6LoopbackWorks, "::1 is not configured here"))
  func ipv4AndIPv6() throws {
    let scratch = try Scratch()
    let body = Bytes.random(10_000, seed: 15)
    let digest = try put(scratch, "a", body)
    let server = try TroveServe(store: scratch["store"], listen: ["[::1]:0", "127.0.0.1:0"])
    let urls = try String(contentsOfFile: server.state["serve.err"], encoding: .utf8)
      .split(separator: "\n").compactMap { line in
        line.range(of: "on http://").map { line[$0.upperBound...] }
      }
    #expect(urls.count == 2 && urls[0].hasPrefix("[::1]:") && urls[1].hasPrefix("127.0.0.1:"))
    for url in urls {
      let got = try curl(["-g", "http://\(url)cas/\(digest.hex)"])
      #expect(got.status == 200 && got.body == body)
    }
  }

  @Test(
    "a loopback listener's connections use Reno, whatever the host's congestion control",
    .enabled(if: socketStatistics != nil, "ss (iproute2) is not installed"))
  func loopbackReno() throws {
    let scratch = try Scratch()
    try trove(scratch["store"], ["config", "set", "budget", "1G"])
    let server = try TroveServe(store: scratch["store"])
    let port = try #require(server.url.split(separator: ":").last.flatMap { Int($0.dropLast()) })
    let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(client) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    #expect(connected == 0)
    // The server's end of the connection, as the kernel reports it.
    let io = try Scratch()
    let shown = try Spawned(
      executable: try #require(socketStatistics),
      ["-tniH", "state", "established", "( sport = :\(port) )"], io: io["ss"]
    ).wait()
    let text = String(decoding: shown.stdout, as: UTF8.self)
    #expect(text.contains(" reno "), "\(text)")
  }

  @Test("an address another process listens on exits 69 naming it")
  func addressInUse() throws {
    let scratch = try Scratch()
    try trove(scratch["store"], ["config", "set", "budget", "1G"])
    let (socket, port) = loopbackSocket()
    defer { close(socket) }
    listen(socket, 1)
    let run = try CLI.run(["--store", scratch["store"], "serve", "--listen", "127.0.0.1:\(port)"])
    #expect(run.status == 69, "\(run.stderr)")
    #expect(run.stderr.contains("cannot listen on 127.0.0.1:\(port)"))
  }

  @Test("a token file others can read, or with no token, exits 78 and prints no token")
  func badTokenFile() throws {
    let scratch = try Scratch()
    try trove(scratch["store"], ["config", "set", "budget", "1G"])
    let secret = "s3cret-token-0123456789"
    let file = try scratch.write("tokens", Array("\(secret)\n".utf8))
    chmod(file, 0o644)
    let run = try CLI.run(["--store", scratch["store"], "serve", "--token-file", file])
    #expect(run.status == 78, "\(run.stderr)")
    #expect(run.stderr.contains("can be read by others") && !run.stderr.contains(secret))
    let empty = try scratch.write("empty", Array("# none\n\n".utf8))
    chmod(empty, 0o600)
    let none = try CLI.run(["--store", scratch["store"], "serve", "--token-file", empty])
    #expect(none.status == 78 && none.stderr.contains("holds no token"))
  }

  @Test("with --token-file a request needs a valid bearer token; the token is never logged")
  func tokens() throws {
    let scratch = try Scratch()
    let digest = try put(scratch, "a", Bytes.random(5000, seed: 7))
    let secret = "s3cret-token-0123456789"
    let file = try scratch.write("tokens", Array("# readers\n\(secret)\n".utf8))
    chmod(file, 0o600)
    // Any address, with a token: it starts.
    let server = try TroveServe(
      store: scratch["store"], ["--token-file", file], listen: ["0.0.0.0:0"])
    let url =
      server.url.replacingOccurrences(of: "0.0.0.0", with: "127.0.0.1") + "cas/" + digest.hex
    let without = try curl([url])
    #expect(without.status == 401)
    #expect(without.headers["www-authenticate"]?.hasPrefix("Bearer") == true)
    #expect(try curl(["-H", "Authorization: Bearer wrong-token-0123456789", url]).status == 401)
    let with = try curl(["-H", "Authorization: Bearer \(secret)", url])
    #expect(with.status == 200 && with.body.count == 5000)
    let outcome = try server.stop()
    #expect(outcome.status == 0)
    let log = server.accessLog()
    #expect(log.count == 3)
    #expect(!log.joined().contains(secret) && !outcome.stderr.contains(secret))
  }

  @Test("--access-log-format json writes one JSON object per request")
  func jsonAccessLog() throws {
    let scratch = try Scratch()
    let digest = try put(scratch, "a", Bytes.random(1234, seed: 8))
    let server = try TroveServe(store: scratch["store"], ["--access-log-format", "json"])
    _ = try curl([server.url("cas/" + digest.hex)])
    _ = try curl(["-I", server.url("healthz")])
    #expect(try server.stop().status == 0)
    let lines = server.accessLog()
    #expect(lines.count == 2)
    let first = try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any]
    #expect(first?["method"] as? String == "GET")
    #expect(first?["path"] as? String == "/cas/" + digest.hex)
    #expect(first?["status"] as? Int == 200)
    #expect(first?["bytes"] as? Int == 1234)
    #expect(first?["completed"] as? Bool == true)
  }

  @Test("SIGTERM during a slow download: the response completes, no new connection, exit 0")
  func gracefulStop() throws {
    let scratch = try Scratch()
    let body = Bytes.random(24 << 20, seed: 9)
    let digest = try put(scratch, "big", body)
    let server = try TroveServe(store: scratch["store"], ["--grace-period", "20s"])
    let io = try Scratch()
    // About 3 s at 8 MiB/s.
    let download = try Spawned(
      executable: "/usr/bin/curl",
      ["-s", "--limit-rate", "8M", "-o", io["body"], server.url("cas/" + digest.hex)],
      io: io["curl"])
    usleep(500_000)
    let started = ContinuousClock.now
    kill(server.process.pid, SIGTERM)
    usleep(300_000)
    #expect(try curl(["--max-time", "2", server.url("healthz")]).status == 0)
    let outcome = try server.stop()
    #expect(outcome.status == 0, "\(outcome)")
    #expect(ContinuousClock.now - started < .seconds(20))
    #expect(try download.wait().status == 0)
    #expect(try contents(io["body"]) == body)
  }

  /// A store served with `--writable` and a token file, and the token.
  static func writableServer(_ scratch: Scratch) throws -> (TroveServe, String) {
    try trove(scratch["store"], ["config", "set", "budget", "1G"])
    let token = "push-token-0123456789"
    let file = try scratch.write("tokens", Array("\(token)\n".utf8))
    chmod(file, 0o600)
    return (try TroveServe(store: scratch["store"], ["--writable", "--token-file", file]), token)
  }

  @Test("with --writable and a token, another store pushes to it: blobs rehashed, keys bound")
  func pushToWritable() throws {
    let scratch = try Scratch()
    let (server, token) = try Self.writableServer(scratch)
    let pusher = try Scratch()
    let environment = ["TROVE_PEER_TOKEN": token]
    try trove(
      pusher["store"],
      ["remote", "add", "peer", server.url, "--auth-env", "TROVE_PEER_TOKEN", "--write", "off"],
      environment: environment)
    let body = Bytes.random(3 << 20, seed: 11)
    let digest = try put(pusher, "blob", body, key: "pushed-key")
    try trove(
      pusher["store"], ["remote", "push", "--remote", "peer", digest.description],
      environment: environment)
    #expect(try trove(scratch["store"], ["get", "pushed-key", scratch["got"]]).status == 0)
    #expect(try contents(scratch["got"]) == body)
    // Pushed again: present, nothing sent.
    let again = try trove(
      pusher["store"], ["remote", "push", "--remote", "peer", digest.description],
      environment: environment)
    #expect(again.out.contains("present") || again.out.contains("already"), "\(again.out)")
    #expect(scratch.temporaries("store").isEmpty)
    #expect(try server.stop().status == 0)
  }

  @Test("a blob moved onto a digest its bytes are not is not stored (409); nothing is left")
  func mismatchedBlob() throws {
    let scratch = try Scratch()
    let (server, token) = try Self.writableServer(scratch)
    let auth = ["-H", "Authorization: Bearer \(token)"]
    let file = try scratch.write("body", Bytes.random(100_000, seed: 12))
    let put = try curl(auth + ["-X", "PUT", "--data-binary", "@" + file, server.url("tmp/a1b2")])
    #expect(put.status == 201)
    let other = XXH3Hasher.digest(Array("other".utf8)).hex
    let move = try curl(
      auth + [
        "-X", "MOVE", "-H", "Destination: \(server.url)cas/\(other.prefix(2))/\(other)",
        "-H", "Overwrite: F", server.url("tmp/a1b2"),
      ])
    #expect(move.status == 409)
    #expect(try trove(scratch["store"], ["ls"]).out.isEmpty)
    #expect(try server.stop().status == 0)
    #expect(scratch.temporaries("store").isEmpty)
  }

  @Test(
    "a pushed key record whose key holds a login is refused (400); a PUT cut off leaves nothing")
  func hostileWrites() throws {
    let scratch = try Scratch()
    let (server, token) = try Self.writableServer(scratch)
    let auth = ["-H", "Authorization: Bearer \(token)"]
    let digest = try put(scratch, "blob", Bytes.random(1000, seed: 13))
    let key = "http://user:secret@example.com/file"
    let record = "{\"checksums\":[],\"digest\":\"\(digest)\",\"key\":\"\(key)\"}"
    let name = XXH3Hasher.digest(Array(key.utf8)).hex
    let refused = try curl(
      auth + ["-X", "PUT", "--data-binary", record, server.url("keys/\(name).json")])
    #expect(refused.status == 400)
    #expect(!String(decoding: refused.body, as: UTF8.self).contains("secret"))
    #expect(try trove(scratch["store"], ["keys"]).out.isEmpty)
    // A body sent at 64 KiB/s, given up after a second.
    let file = try scratch.write("big", Bytes.random(4 << 20, seed: 14))
    let cut = try curl(
      auth + [
        "-X", "PUT", "--limit-rate", "64K", "--max-time", "1", "--data-binary", "@" + file,
        server.url("tmp/cut"),
      ])
    #expect(cut.exitStatus == 28)
    let left = poll(times: 100) { scratch.temporaries("store").isEmpty ? true : nil }
    #expect(left == true, "\(scratch.temporaries("store"))")
    #expect(try server.stop().status == 0)
  }

  @Test("writes need --writable and a token: 405 without it, 401 without a token, 403 a wrong one")
  func writesRefused() throws {
    let scratch = try Scratch()
    let (server, _) = try Self.writableServer(scratch)
    let url = server.url("tmp/abc")
    #expect(try curl(["-X", "PUT", "--data-binary", "x", url]).status == 401)
    let wrong = ["-H", "Authorization: Bearer wrong-token-0123456789"]
    #expect(try curl(wrong + ["-X", "PUT", "--data-binary", "x", url]).status == 403)
    let readOnly = try TroveServe(store: scratch["store"])
    let refused = try curl(["-X", "PUT", "--data-binary", "x", readOnly.url("tmp/abc")])
    #expect(refused.status == 405 && refused.headers["allow"] == "GET, HEAD")
    let run = try CLI.run(["--store", scratch["store"], "serve", "--writable"])
    #expect(run.status == 64 && run.stderr.contains("--writable needs --token-file"))
  }

  @Test("an index made before keys had record names gets them, and serves the records")
  func indexWithoutRecordNames() throws {
    let scratch = try Scratch()
    let digest = try scratch.store().put(bytes: Bytes.random(500, seed: 10), key: "old-key").digest
    try SQLiteConnection(path: scratch["store/index.sqlite"], busyTimeoutMilliseconds: 1000)
      .execute("DROP INDEX keys_by_name; ALTER TABLE keys DROP COLUMN name")
    let server = try TroveServe(store: scratch["store"])
    let name = XXH3Hasher.digest(Array("old-key".utf8)).hex
    let record = try curl([server.url("keys/\(name).json")])
    #expect(record.status == 200)
    #expect(String(decoding: record.body, as: UTF8.self).contains(digest.description))
  }
}

@Suite
struct ServeSweepTests {
  @Test(
    "a running server sweeps on its schedule: what went unused past max-age goes without any put, and /metrics counts it"
  )
  func scheduledSweep() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let digest = try RemoteTests.put(store, Bytes.random(50_000, seed: 2901), in: scratch)
    #expect(try CLI.run(["--store", store, "config", "set", "max-age", "1s"]).status == 0)
    let server = try TroveServe(store: store, ["--sweep-interval", "1s"])
    let gone = poll(times: 400) { () -> Bool? in
      (try? RemoteTests.digests(store))?.contains(digest) == false ? true : nil
    }
    #expect(gone == true, "the object was not expired by the server's sweeps")
    // The sweep removes the object before the server adds its report to the counters.
    var text = ""
    let counted = poll(times: 100) { () -> Bool? in
      guard let metrics = try? curl([server.url("metrics")]) else { return nil }
      text = String(decoding: metrics.body, as: UTF8.self)
      let swept = text.split(separator: "\n").first { $0.hasPrefix("trove_swept_entries_total ") }
      return swept.flatMap { Int($0.split(separator: " ")[1]) }.map { $0 >= 1 } == true ? true : nil
    }
    #expect(counted == true, "\(text)")
    #expect(try server.stop().exitedCleanly)
    let off = try CLI.run(["--store", store, "serve", "--sweep-interval", "0s"])
    #expect(off.status == 64 && off.stderr.contains("--sweep-interval"), "\(off.stderr)")
  }
}
