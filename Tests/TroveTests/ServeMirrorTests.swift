import Foundation
import Synchronization
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// `trove serve --mirror NAME=UPSTREAM` in front of nginx: `/m/NAME/PATH` is
/// the store's own fetch of UPSTREAM/PATH (hit, revalidation, one transfer
/// for many clients), with the origin's headers, its 404, and the stored
/// copy when the origin is gone.
@Suite(.enabled(if: Nginx.executable != nil, Nginx.missing))
struct ServeMirrorTests {
  /// A store, nginx as its origin and a server mirroring it as `up`.
  final class Setup {
    let scratch: Scratch
    let nginx: Nginx
    let server: TroveServe
    var store: String { scratch["store"] }

    init(_ arguments: [String] = []) throws {
      scratch = try Scratch()
      nginx = try Nginx()
      _ = try scratch.store()
      server = try TroveServe(
        store: scratch["store"], ["--mirror", "up=" + nginx.url("/")] + arguments)
    }

    func url(_ path: String) -> String { server.url("m/up/" + path) }
  }

  @Test(
    "a miss is fetched through the store: the origin's Content-Type, ETag and Last-Modified; then revalidated, or a hit with no request while fresh"
  )
  func missRevalidatedHit() throws {
    let setup = try Setup()
    let bytes = Bytes.random(300_000, seed: 71)
    try setup.nginx.files.write("model.bin", bytes)
    try setup.nginx.files.write("page.html", Array("<a href=\"x\">x</a>\n".utf8))

    let miss = try curl([setup.url("model.bin")])
    #expect(miss.status == 200 && miss.body == bytes)
    #expect(miss.headers["x-trove-cache"] == "miss")
    #expect(miss.headers["content-type"] == "application/octet-stream")
    let etag = try #require(miss.headers["etag"])
    #expect(etag.hasPrefix("\"") && miss.headers["last-modified"] != nil)

    let again = try curl([setup.url("model.bin")])
    #expect(again.status == 200 && again.body == bytes)
    #expect(again.headers["x-trove-cache"] == "revalidated")
    #expect(again.headers["etag"] == etag)
    // The store asked nginx once for the body, once conditionally.
    let asked = setup.nginx.requests("/model.bin")
    #expect(asked.count == 2)
    #expect(asked.last.map { $0.contains(" 304 ") } == true)

    let html = try curl([setup.url("page.html")])
    #expect(html.headers["content-type"] == "text/html")

    let fresh = try curl([setup.url("fresh/model.bin")])
    #expect(fresh.status == 200 && fresh.headers["x-trove-cache"] == "miss")
    let hit = try curl([setup.url("fresh/model.bin")])
    #expect(hit.status == 200 && hit.body == bytes && hit.headers["x-trove-cache"] == "hit")
    #expect(setup.nginx.requests("/fresh/model.bin").count == 1)

    // The client's own conditional request and range are answered here.
    let same = try curl(["-H", "If-None-Match: \(etag)", setup.url("fresh/model.bin")])
    #expect(same.status == 304 && same.body.isEmpty)
    let part = try curl(["-r", "10-19", setup.url("fresh/model.bin")])
    #expect(part.status == 206 && part.body == Array(bytes[10..<20]))
    let head = try curl(["-I", setup.url("fresh/model.bin")])
    #expect(head.status == 200 && head.headers["content-length"] == "\(bytes.count)")
    #expect(setup.nginx.requests("/fresh/model.bin").count == 1)

    // What the server fetched is the store's: the key is the upstream URL.
    let keys = try trove(setup.store, ["keys"])
    #expect(keys.out.contains(setup.nginx.url("/model.bin")))
  }

  @Test(
    "the origin's 404 stays 404; an unknown mirror is 404; a path with '..', an encoded '/', '?' or control character is 400 and never reaches the origin"
  )
  func refusals() throws {
    let setup = try Setup()
    let missing = try curl([setup.url("nothing-here")])
    #expect(missing.status == 404)
    let unknown = try curl([setup.server.url("m/nope/x")])
    #expect(unknown.status == 404)
    for path in ["a/../b", "..", "a%2Fb", "a%3Fb=1", "a%00b", "a//b", "a%2", "./b", "a%5Cb"] {
      let refused = try curl(["--path-as-is", setup.url(path)])
      #expect(refused.status == 400, "\(path)")
    }
    #expect(setup.nginx.accessLog().count == 1)
  }

  @Test(
    "a path's escapes are normalised once: an encoded space or '+' reaches the origin encoded, the query is not forwarded"
  )
  func pathEncoding() throws {
    let setup = try Setup()
    try setup.nginx.files.write("a b+c.txt", Array("spaced".utf8))
    let got = try curl([setup.url("a%20b+c.txt?x=1")])
    #expect(got.status == 200 && got.body == Array("spaced".utf8))
    #expect(setup.nginx.requests("/a%20b+c.txt").count == 1)
  }

  @Test(
    "with the origin down, a stored copy is served stale with a Warning; a URL never fetched is 502; --no-stale-if-error gives 502"
  )
  func staleIfError() throws {
    let setup = try Setup()
    let bytes = Bytes.random(100_000, seed: 72)
    try setup.nginx.files.write("model.bin", bytes)
    #expect(try curl([setup.url("model.bin")]).headers["x-trove-cache"] == "miss")
    setup.nginx.stop()
    let stale = try curl([setup.url("model.bin")])
    #expect(stale.status == 200 && stale.body == bytes)
    #expect(stale.headers["x-trove-cache"] == "stale")
    #expect(stale.headers["warning"]?.hasPrefix("111 ") == true)
    let never = try curl([setup.url("never.bin")])
    #expect(never.status == 502)

    let strict = try TroveServe(
      store: setup.store,
      ["--mirror", "up=" + setup.nginx.url("/"), "--no-stale-if-error"])
    let refused = try curl([strict.url("m/up/model.bin")])
    #expect(refused.status == 502 && refused.body != bytes)
  }

  @Test(
    "32 clients of one missing 64 MiB file: one GET at the origin, every client the right bytes")
  func singleFlight() throws {
    let setup = try Setup()
    let file = try setup.nginx.files.write("big.bin", Bytes.random(64 << 20, seed: 73))
    let expected = try sha256sum(["/usr/bin/sha256sum", file])
    let url = setup.url("big.bin")
    let sums = Mutex<[String]>([])
    try concurrently(
      (0..<32).map { _ in
        {
          let sum = try sha256sum(["/bin/sh", "-c", "curl -sf '\(url)' | /usr/bin/sha256sum"])
          sums.withLock { $0.append(sum) }
        }
      })
    #expect(sums.withLock { $0 } == Array(repeating: expected, count: 32))
    let gets = setup.nginx.requests("/big.bin")
    #expect(gets.count == 1, "\(gets)")
  }

  @Test(
    "/metrics parses with prometheus_client and counts the requests made: by route and status, hits, misses, revalidations, stale answers, bytes, origin errors, the store",
    .enabled(if: TestVenv.hasPip, TestVenv.missing)
  )
  func metrics() throws {
    let setup = try Setup()
    let bytes = Bytes.random(50_000, seed: 74)
    try setup.nginx.files.write("model.bin", bytes)
    for path in ["model.bin", "model.bin", "fresh/model.bin", "fresh/model.bin"] {
      #expect(try curl([setup.url(path)]).status == 200)
    }
    #expect(try curl([setup.url("missing")]).status == 404)
    #expect(try curl([setup.server.url("cas/xyz")]).status == 400)
    #expect(try curl([setup.server.url("healthz")]).status == 200)
    setup.nginx.stop()
    #expect(try curl([setup.url("model.bin")]).headers["x-trove-cache"] == "stale")
    // The last response's end is counted just after the client has it.
    usleep(300_000)
    let scraped = try curl([setup.server.url("metrics")])
    #expect(scraped.status == 200)
    #expect(scraped.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
    let text = try setup.scratch.write("metrics.txt", scraped.body)
    let parser = """
      import sys
      from prometheus_client.parser import text_string_to_metric_families
      for family in text_string_to_metric_families(open(sys.argv[1]).read()):
          for s in family.samples:
              labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
              print(f"{s.name}{{{labels}}} {int(s.value)}")
      """
    let parse = try Spawned(
      executable: TestVenv.python, ["-c", parser, text], io: setup.scratch["parse"]
    ).wait()
    #expect(parse.status == 0, "\(parse.stderr)")
    var samples: [String: Int] = [:]
    for line in String(decoding: parse.stdout, as: UTF8.self).split(separator: "\n") {
      let parts = line.split(separator: " ")
      samples[String(parts[0])] = Int(parts[1])
    }
    #expect(samples["trove_http_requests_total{route=mirror,status=200}"] == 5)
    #expect(samples["trove_http_requests_total{route=mirror,status=404}"] == 1)
    #expect(samples["trove_http_requests_total{route=invalid,status=400}"] == 1)
    #expect(samples["trove_http_requests_total{route=healthz,status=200}"] == 1)
    #expect(samples["trove_mirror_responses_total{cache=miss}"] == 2)
    #expect(samples["trove_mirror_responses_total{cache=hit}"] == 1)
    #expect(samples["trove_mirror_responses_total{cache=revalidated}"] == 1)
    #expect(samples["trove_mirror_responses_total{cache=stale}"] == 1)
    #expect(samples["trove_origin_bytes_total{}"] == 2 * bytes.count)
    #expect(samples["trove_origin_errors_total{}"] == 1)
    #expect(samples["trove_origin_transfers_active{}"] == 0)
    #expect((samples["trove_http_response_bytes_total{}"] ?? 0) >= 5 * bytes.count)
    // One object: both URLs name the same bytes.
    #expect(samples["trove_store_entries{}"] == 1)
    #expect((samples["trove_store_bytes{}"] ?? 0) >= bytes.count)
  }

  @Test("--mirror values are checked: NAME=UPSTREAM, an http(s) URL without a login or query")
  func mirrorFlags() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    for value in [
      "noequals", "Up=http://h", "up=ftp://h/", "up=http://user:pw@h/", "up=http://h/?q",
      "=http://h",
    ] {
      let run = try CLI.run(["--store", scratch["store"], "serve", "--mirror", value])
      #expect(run.status == 64, "\(value): \(run.stderr)")
    }
  }

  @Test(
    "config set mirror.NAME: every server of the store serves it without --mirror; a --mirror of the same name wins for that server; bad values are refused in one line, nothing written; unset removes it"
  )
  func mirrorsFromTheStoresSettings() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    let store = scratch["store"]
    let nginx = try Nginx()
    let bytes = Bytes.random(20_000, seed: 77)
    for folder in ["a", "b"] {
      try FileManager.default.createDirectory(
        atPath: nginx.files[folder], withIntermediateDirectories: false)
    }
    try nginx.files.write("a/tool.bin", bytes)
    try nginx.files.write("b/tool.bin", Bytes.random(20_000, seed: 78))
    func config(_ arguments: [String]) throws -> CLI.Result {
      try CLI.run(["--store", store, "config"] + arguments)
    }
    #expect(try config(["set", "mirror.team", nginx.url("/a/")]).status == 0)
    #expect(try config(["get", "mirror.team"]).out == nginx.url("/a") + "\n")
    #expect(try config(["get", "mirror"]).out == "team=\(nginx.url("/a"))\n")
    #expect(try config([]).out.contains("mirror.team"))
    for (name, value, cause) in [
      ("mirror.Team", "http://127.0.0.1:1/", "invalid mirror name 'Team'"),
      ("mirror.x", "ftp://127.0.0.1/", "expected an http:// or https:// URL"),
      ("mirror.x", "http://127.0.0.1/?q=1", "no space, query or fragment"),
      ("mirror.x", "http://u:s3cret@127.0.0.1/", "holds a login"),
    ] {
      let refused = try config(["set", name, value])
      #expect(refused.status == 64, "\(name) \(value): \(refused.stderr)")
      #expect(refused.errorLines.first?.contains(cause) == true, "\(refused.stderr)")
    }
    let written = try String(contentsOfFile: store + "/config.json", encoding: .utf8)
    #expect(!written.contains("s3cret") && !written.contains("ftp:"), "\(written)")

    let server = try TroveServe(store: store)
    let got = try curl([server.url("m/team/tool.bin")])
    #expect(got.status == 200 && got.body == bytes, "\(got.status)")
    #expect(nginx.requests("/a/tool.bin").count == 1)
    _ = try server.stop()
    let overridden = try TroveServe(store: store, ["--mirror", "team=" + nginx.url("/b")])
    let other = try curl([overridden.url("m/team/tool.bin")])
    #expect(other.status == 200 && other.body != bytes)
    #expect(nginx.requests("/b/tool.bin").count == 1)
    _ = try overridden.stop()

    #expect(try config(["unset", "mirror.team"]).status == 0)
    #expect(try config(["get", "mirror"]).out == "")
    #expect(try config(["unset", "mirror.team"]).status == 1)
    let none = try TroveServe(store: store)
    #expect(try curl([none.url("m/team/tool.bin")]).status == 404)
    _ = try none.stop()

    // In a store others may write, another user may have chosen them.
    #expect(try config(["set", "mirror.team", nginx.url("/a")]).status == 0)
    #expect(chmod(store, 0o770) == 0)
    let shared = try TroveServe(store: store)
    #expect(try curl([shared.url("m/team/tool.bin")]).status == 404)
    let log = try shared.stop().stderr
    #expect(log.contains("(team) are not served: others may write the store"), "\(log)")
    #expect(chmod(store, 0o700) == 0)

    // One that cannot be used (hand-edited) is the server's to report; puts go on.
    let path = store + "/config.json"
    var file = try #require(
      try JSONSerialization.jsonObject(with: Data(contents(path))) as? [String: Any])
    var policy = try #require(file["policy"] as? [String: Any])
    policy["mirror"] = ["team": "ftp://x"]
    file["policy"] = policy
    try JSONSerialization.data(withJSONObject: file).write(to: URL(fileURLWithPath: path))
    let put = try CLI.run(["--store", store, "put", try scratch.write("more", [1, 2, 3])])
    #expect(put.status == 0, "\(put.stderr)")
    let broken = try TroveServe(store: store)
    #expect(try curl([broken.url("m/team/tool.bin")]).status == 404)
    let reported = try broken.stop().stderr
    #expect(reported.contains("invalid mirror"), "\(reported)")
  }
}

/// The first word `command` prints: a `sha256sum` line's checksum.
private func sha256sum(_ command: [String]) throws -> String {
  let io = try Scratch()
  let outcome = try Spawned(executable: command[0], Array(command.dropFirst()), io: io["run"])
    .wait()
  return String(decoding: outcome.stdout, as: UTF8.self).split(separator: " ").first.map(
    String.init) ?? ""
}
