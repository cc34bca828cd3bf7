import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// `trove fetch` against `Tests/Servers/fault_server.py` on 127.0.0.1: the
/// faults nginx will not make. Each ends with the right exit status, one
/// line on stderr, nothing published that is not the URL's whole body, and
/// a store `trove verify` finds clean.
@Suite(.enabled(if: FaultServer.python != nil, FaultServer.missing))
struct FetchFaultTests {
  static let size = 6 << 20  // above Download.smallBody: kept for resuming

  static func fetch(_ store: String, _ arguments: [String]) throws -> CLI.Result {
    try CLI.run(["--store", store, "fetch"] + arguments)
  }

  /// The store holds exactly `digests`, and verify finds it clean.
  static func expectStore(
    _ scratch: Scratch, holds digests: Set<BlobDigest>,
    sourceLocation: SourceLocation = #_sourceLocation
  ) throws {
    let store = try scratch.store()
    #expect(
      Set(try store.entries().map(\.digest)) == digests, sourceLocation: sourceLocation)
    let verify = try CLI.run(["--store", scratch["store"], "verify"])
    #expect(verify.status == 0, "\(verify.stderr)", sourceLocation: sourceLocation)
    #expect(scratch.temporaries("store").isEmpty, sourceLocation: sourceLocation)
  }

  @Test(
    "a dropped connection is exit 75 keeping the part; the next fetch resumes it with Range + If-Range"
  )
  func dropThenResume() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let url = server.url("/drop/a?size=\(Self.size)")
    let first = try Self.fetch(scratch["store"], ["--retries", "0", url])
    #expect(first.status == 75)
    #expect(first.errorLines.count == 1)
    #expect(
      first.stderr.contains("cannot fetch '\(url)'") && first.stderr.contains("curl error 18"),
      "\(first.stderr)")
    try Self.expectStore(scratch, holds: [])
    let parts = scratch.list("store/partial")
    #expect(parts.count == 2 && parts.contains { $0.hasSuffix(".part") }, "\(parts)")

    let second = try Self.fetch(scratch["store"], ["--json", url])
    #expect(second.status == 0, "\(second.stderr)")
    let record = try FetchTests.record(second)
    let body = try server.body("a", size: Self.size)
    #expect(record["digest"] as? String == XXH3Hasher.digest(body).description)
    #expect(record["source"] as? String == "resumed")
    #expect(record["bytesTransferred"] as? Int == Self.size - Self.size / 2)
    let requests = server.requests()
    #expect(requests.count == 2)
    #expect(requests[1].contains("\"bytes=\(Self.size / 2)-\" \"\"v1\"\""), "\(requests)")
    try Self.expectStore(scratch, holds: [XXH3Hasher.digest(body)])
    #expect(scratch.list("store/partial").isEmpty)
  }

  @Test(
    "sweep removes parts older than tmp-max-age, not those of a running fetch (a dry run asks without taking), and an earlier version's lock files unless flocked"
  )
  func staleParts() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let url = server.url("/drop/p?size=\(Self.size)")
    #expect(try Self.fetch(store, ["--retries", "0", url]).status == 75)
    #expect(scratch.list("store/partial").count == 2)
    #expect(scratch.list("store/locks").isEmpty, "a fetch makes no lock file")
    // Lock files of an earlier version: one flocked by its fetch, one not.
    try FileManager.default.createDirectory(
      atPath: scratch["store/locks"], withIntermediateDirectories: true)
    try scratch.write("store/locks/0123.lock", [])
    try scratch.write("store/locks/4567.lock", [])
    #expect(try CLI.run(["--store", store, "config", "set", "tmp-max-age", "1h"]).status == 0)
    #expect(try CLI.run(["--store", store, "sweep"]).status == 0)
    #expect(scratch.list("store/partial").count == 2, "young parts stay")
    var old = [
      timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0),
    ]
    for folder in ["partial", "locks"] {
      for name in scratch.list("store/" + folder) {
        #expect(utimensat(AT_FDCWD, scratch["store/\(folder)/\(name)"], &old, 0) == 0)
      }
    }
    // A fetch of that URL holds its lock: its part stays.
    let holder = try FileDescriptor.open(scratch["store/" + FetchLocks.path], [.readWrite])
    defer { holder.close() }
    let offset = FetchLocks.offset(of: Store.downloadName(url))
    #expect(try holder.lockByte(at: offset, wait: false))
    let flocked = open(scratch["store/locks/0123.lock"], O_RDWR)
    defer { close(flocked) }
    #expect(flock(flocked, LOCK_EX) == 0)
    #expect(try CLI.run(["--store", store, "sweep"]).status == 0)
    #expect(scratch.list("store/partial").count == 2)
    #expect(scratch.list("store/locks") == ["0123.lock"])
    #expect(try Self.leftovers(store, dryRun: true) == 0)
    holder.unlockByte(at: offset)
    flock(flocked, LOCK_UN)
    #expect(try Self.leftovers(store, dryRun: true) == 3)
    #expect(scratch.list("store/partial").count == 2 && scratch.list("store/locks").count == 1)
    #expect(try Self.leftovers(store, dryRun: false) == 3)
    #expect(scratch.list("store/partial").isEmpty)
    #expect(scratch.list("store/locks").isEmpty)
  }

  /// The leftovers a sweep of `store` removed (or, in a dry run, would).
  static func leftovers(_ store: String, dryRun: Bool) throws -> Int? {
    let sweep = try CLI.run(["--store", store, "sweep", "--json"] + (dryRun ? ["--dry-run"] : []))
    #expect(sweep.status == 0, "\(sweep.stderr)")
    let report = try JSONSerialization.jsonObject(with: Data(sweep.stdout)) as? [String: Any]
    return report?["temporaryFiles"] as? Int
  }

  @Test(
    "a write that fails mid-body keeps only whole writes in the part; the next fetch resumes it right"
  )
  func writeFault() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let url = server.url("/ok/w?size=\(Self.size)")
    // The store exists: the fetch's writes are the sidecar's, then the body's.
    #expect(try CLI.run(["--store", scratch["store"], "sweep"]).status == 0)
    let failed = try CLI.run(
      ["--store", scratch["store"], "fetch", "--retries", "0", url],
      environment: ["TROVE_INJECT_FAULT": "write:5:3"])
    #expect(failed.status == 74)
    #expect(failed.errorLines.count == 1 && failed.stderr.contains("partial/"), "\(failed.stderr)")
    let part = scratch.list("store/partial").first { $0.hasSuffix(".part") }
    let kept = try part.map { try fileStatus(scratch["store/partial/" + $0]).size } ?? -1
    #expect(kept > 0 && kept < Self.size && kept % (1 << 20) == 0, "kept \(kept)")
    try Self.expectStore(scratch, holds: [])
    let record = try FetchTests.record(try Self.fetch(scratch["store"], ["--json", url]))
    #expect(record["source"] as? String == "resumed")
    let body = try server.body("w", size: Self.size)
    #expect(record["digest"] as? String == XXH3Hasher.digest(body).description)
    try Self.expectStore(scratch, holds: [XXH3Hasher.digest(body)])
  }

  @Test("with retries, a dropped connection is resumed within the same fetch")
  func retryResumes() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let result = try Self.fetch(
      scratch["store"], ["--json", server.url("/drop/b?size=\(Self.size)")])
    #expect(result.status == 0, "\(result.stderr)")
    #expect(try FetchTests.record(result)["source"] as? String == "resumed")
    #expect(server.requests().count == 2)
  }

  @Test(
    "a short body, a cut chunked body and a stall are exit 75 after their retries, nothing published",
    arguments: [
      ("/short/c?size=1048576", ["--retries", "1"], "curl error 18", 2),
      // The retry asks for the rest; this server answers 200 (no ranges
      // on chunked bodies), so it starts again from zero: three requests.
      ("/chunkcut/d?size=1048576", ["--retries", "1"], "curl error 18", 3),
      ("/stall/e?size=1048576", ["--retries", "0", "--stall-timeout", "1"], "curl error 28", 1),
    ])
  func transient(path: String, options: [String], cause: String, requests: Int) throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let result = try Self.fetch(
      scratch["store"], options + ["-o", scratch["out"], server.url(path)])
    #expect(result.status == 75)
    #expect(result.errorLines.count == 1 && result.stderr.contains(cause), "\(result.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["out"]))
    #expect(server.requests().count == requests)
    try Self.expectStore(scratch, holds: [])
    #expect(try scratch.store().keys().isEmpty)
  }

  @Test("a complete chunked body (no Content-Length) is stored")
  func chunked() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let result = try Self.fetch(scratch["store"], [server.url("/chunked/f?size=300000")])
    #expect(result.status == 0, "\(result.stderr)")
    let body = try server.body("f", size: 300_000)
    #expect(result.out.hasPrefix(XXH3Hasher.digest(body).description))
  }

  @Test(
    "a resume answered 200, 416, with a wrong Content-Range or with another ETag (If-Range honoured or not) restarts from zero, never appends",
    arguments: [
      ("norange", 1), ("badrange", 1), ("etagchange", 2), ("ignoreifrange", 2), ("range416", 1),
    ])
  func resumeRefused(mode: String, version: Int) throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let url = server.url("/\(mode)/g?size=\(Self.size)")
    #expect(try Self.fetch(scratch["store"], ["--retries", "0", url]).status == 75)
    let result = try Self.fetch(scratch["store"], ["--json", url])
    #expect(result.status == 0, "\(result.stderr)")
    let body = try server.body("g", size: Self.size, version: version)
    let record = try FetchTests.record(result)
    #expect(record["digest"] as? String == XXH3Hasher.digest(body).description)
    #expect(record["source"] as? String == "network")
    let requests = server.requests()
    #expect(requests.count == 3, "\(requests)")
    #expect(requests[1].contains("bytes=\(Self.size / 2)-"), "\(requests)")
    #expect(requests[2].contains("\"-\" \"-\" \"-\""), "\(requests)")
    try Self.expectStore(scratch, holds: [XXH3Hasher.digest(body)])
  }

  @Test("a 304 without a validator is not trusted: the body is fetched again")
  func untrusted304() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let url = server.url("/novalidator/h?size=5000")
    #expect(try Self.fetch(scratch["store"], [url]).status == 0)
    let again = try FetchTests.record(try Self.fetch(scratch["store"], ["--json", url]))
    #expect(again["source"] as? String == "network")
    let requests = server.requests()
    #expect(requests.count == 3, "\(requests)")
    #expect(requests[1].hasSuffix("\"\"v1\"\""), "conditional: \(requests)")
    #expect(requests[2].hasSuffix("\"-\""), "unconditional: \(requests)")
  }

  @Test("wrong bytes under a correct --expect: exit 65 naming both, nothing stored, bound or kept")
  func wrongBytes() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let body = try server.body("i", size: 70000)
    let sha = SHA2Hasher(.sha512)
    body.withUnsafeBytes { sha.update($0) }
    let expected = sha.finalize()
    let url = server.url("/wrong/i?size=70000")
    let result = try Self.fetch(
      scratch["store"], ["--expect", expected.description, url, "-o", scratch["out"]])
    #expect(result.status == 65)
    #expect(result.errorLines.count == 1)
    #expect(result.stderr.contains("has sha512:") && result.stderr.contains("expected \(expected)"))
    #expect(!FileManager.default.fileExists(atPath: scratch["out"]))
    try Self.expectStore(scratch, holds: [])
    #expect(try scratch.store().keys().isEmpty)
    #expect(scratch.list("store/partial").isEmpty)
    // The same bytes from a good URL pass.
    let good = try Self.fetch(
      scratch["store"], ["--expect", expected.description, server.url("/ok/i?size=70000")])
    #expect(good.status == 0, "\(good.stderr)")
  }

  @Test(
    "HTTP failures and a dead port: one line, the right exit status, nothing stored",
    arguments: [
      ("/status/500", 75, "HTTP 500 Internal Server Error", 2),
      ("/status/503", 75, "HTTP 503 Service Unavailable", 2),
      ("/status/403", 69, "HTTP 403 Forbidden", 1),
      ("/status/410", 1, "HTTP 410 Gone", 1),
    ])
  func failures(path: String, status: Int32, message: String, requests: Int) throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let url = server.url(path)
    let result = try Self.fetch(scratch["store"], ["--retries", "1", url])
    #expect(result.status == status)
    #expect(result.errorLines == ["Error: cannot fetch '\(url)': \(message)"])
    #expect(server.requests().count == requests)
    try Self.expectStore(scratch, holds: [])
  }

  @Test("a dead port is exit 69 at once, not retried")
  func deadPortRefused() throws {
    let scratch = try Scratch()
    let url = "http://127.0.0.1:\(deadPort())/x"
    let result = try Self.fetch(scratch["store"], [url])
    #expect(result.status == 69)
    #expect(
      result.errorLines.count == 1 && result.stderr.contains("curl error 7"), "\(result.stderr)")
  }

  @Test("SIGKILL mid-download leaves a consistent store; the next fetch resumes the part")
  func killedMidTransfer() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let size = 8 << 20
    let url = server.url("/slow/k?size=\(size)")
    let process = try Spawned(["--store", scratch["store"], "fetch", url], io: scratch["io"])
    var partBytes: Int64 = 0
    for _ in 0..<500 where partBytes < 1 << 20 {
      usleep(10_000)
      let parts = scratch.list("store/partial").filter { $0.hasSuffix(".part") }
      partBytes = parts.first.flatMap { try? fileStatus(scratch["store/partial/" + $0]).size } ?? 0
    }
    #expect(partBytes >= 1 << 20)
    process.kill()
    #expect(try process.wait().killed)
    try Self.expectStore(scratch, holds: [])
    let result = try FetchTests.record(try Self.fetch(scratch["store"], ["--json", url]))
    #expect(result["source"] as? String == "resumed")
    let body = try server.body("k", size: size)
    #expect(result["digest"] as? String == XXH3Hasher.digest(body).description)
    try Self.expectStore(scratch, holds: [XXH3Hasher.digest(body)])
  }
}
