import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// Where a credential or a writer's word could still slip out: `~/.netrc`
/// for hosts another user or the network chose, logins shown in messages
/// and listings, a pulled record's fetch time and final URL. Against the
/// real CLI, nginx (origin and WebDAV) and the fault server on 127.0.0.1;
/// a host that is not this machine is reached through the fault server as
/// an HTTP proxy (`http_proxy`), so no request leaves the machine.
@Suite(
  "credentials and a writer's word stay where they belong",
  .enabled(if: FaultServer.python != nil, FaultServer.missing))
struct CredentialLeakTests {
  static let password = "Pw4NetrcOnly"

  /// A HOME holding a `.netrc` with a login for each of `hosts`.
  static func home(_ scratch: Scratch, hosts: [String]) throws -> String {
    let home = scratch["home"]
    try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
    let lines = hosts.map { "machine \($0) login carol password \(password)\n" }.joined()
    _ = try scratch.write("home/.netrc", Array(lines.utf8))
    #expect(chmod(home + "/.netrc", 0o600) == 0)
    return home
  }

  /// The header lines the fault server logged that carry the netrc login.
  static func netrcSent(_ server: FaultServer) -> [String] {
    let basic = Data("carol:\(password)".utf8).base64EncodedString()
    return server.headerLog().filter { $0.contains(basic) }
  }

  @Test(
    "loopback is localhost or an IP literal in 127.0.0.0/8 or ::1, not a name that looks like one")
  func loopbackHosts() {
    for host in ["localhost", "LOCALHOST", "127.0.0.1", "127.8.9.10", "::1", "[::1]"] {
      #expect(HTTPOrigin.isLoopback(host: host), "\(host)")
    }
    for host in [
      "127.evil.example", "127.0.0.1.evil.example", "evil.localhost", "128.0.0.1", "::2",
      "cache.example", "", "127.1",
    ] {
      #expect(!HTTPOrigin.isLoopback(host: host), "\(host)")
    }
  }

  @Test("~/.netrc goes over https:// and to loopback, never over plain http:// to another host")
  func netrcRule() {
    #expect(HTTPOrigin.mayUseNetrc("https://cache.example/x"))
    #expect(HTTPOrigin.mayUseNetrc("http://127.0.0.1:8080/x"))
    #expect(HTTPOrigin.mayUseNetrc("http://localhost/x"))
    #expect(HTTPOrigin.mayUseNetrc("http://[::1]:8/x"))
    #expect(!HTTPOrigin.mayUseNetrc("http://cache.example/x"))
    #expect(!HTTPOrigin.mayUseNetrc("http://127.evil.example/x"))
    #expect(!HTTPOrigin.mayUseNetrc("ftp://127.0.0.1/x"))
  }

  @Test(
    "a fetch sends ~/.netrc's login to a loopback origin, but not over plain http:// to another host, nor to a redirect's"
  )
  func netrcNotInClear() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let home = try Self.home(scratch, hosts: ["127.0.0.1", "cache.example"])
    // Loopback: sent (the netrc is read at all).
    let local = try CLI.run(
      ["--store", store, "fetch", server.url("/ok/local?size=100")], environment: ["HOME": home])
    #expect(local.status == 0, "\(local.stderr)")
    #expect(Self.netrcSent(server).count == 1, "\(server.headerLog())")
    // Another host over plain http, reached through a proxy here.
    let proxy = ["HOME": home, "http_proxy": server.url(""), "no_proxy": "127.0.0.1"]
    _ = try CLI.run(
      ["--store", store, "fetch", "--retries", "0", "http://cache.example/ok/far?size=100"],
      environment: proxy)
    #expect(
      server.headerLog().contains { $0.contains("http://cache.example/ok/far") },
      "\(server.headerLog())")
    // And a hop there a loopback origin redirects to.
    let to = "http%3A%2F%2Fcache.example%2Fok%2Fhop%3Fsize%3D100"
    _ = try CLI.run(
      ["--store", store, "fetch", "--retries", "0", server.url("/redirect/r?to=\(to)")],
      environment: proxy)
    #expect(
      server.headerLog().contains { $0.contains("http://cache.example/ok/hop") },
      "\(server.headerLog())")
    let sent = Self.netrcSent(server)
    #expect(
      sent.count == 2 && sent.allSatisfy { !$0.hasPrefix("GET http://cache.example") }, "\(sent)")
  }

  @Test(
    "a remote sends ~/.netrc's login only while this user lends it their credentials, whoever wrote remotes.json, and not over plain http:// to another host"
  )
  func netrcForRemotes() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let home = try Self.home(scratch, hosts: ["127.0.0.1", "cache.example"])
    let added = try RemoteTests.remote(
      store, ["add", "team", server.url("/headers/team"), "--write", "off"])
    #expect(added.status == 0, "\(added.stderr)")
    func check(_ name: String = "team", in store: String) throws {
      _ = try CLI.run(["--store", store, "remote", "check", name], environment: ["HOME": home])
    }
    try check(in: store)
    let own = Self.netrcSent(server).count
    #expect(own > 0, "\(server.headerLog())")
    // Another store's file naming another URL on the same host.
    let other = scratch["other"]
    try trove(other, ["put", try scratch.write("in", [1, 2, 3])])
    let planted = """
      {"format": 1, "remotes": [{"name": "team", "url": "\(server.url("/headers/other"))", "read-only": true}]}
      """
    try scratch.write("other/remotes.json", Array(planted.utf8))
    try check(in: other)
    #expect(Self.netrcSent(server).count == own, "\(server.headerLog())")
    #expect(try RemoteTests.remote(store, ["logout", "team"]).status == 0)
    try check(in: store)
    #expect(Self.netrcSent(server).count == own, "\(server.headerLog())")
    #expect(try RemoteTests.remote(store, ["login", "team"]).status == 0)
    try check(in: store)
    #expect(Self.netrcSent(server).count > own, "\(server.headerLog())")
    let lent = Self.netrcSent(server).count
    // Plain http to a host that is not this machine.
    #expect(try RemoteTests.remote(store, ["rm", "team"]).status == 0)
    let far = try RemoteTests.remote(
      store, ["add", "far", "http://cache.example/team", "--write", "off"])
    #expect(far.status == 0, "\(far.stderr)")
    let before = server.headerLog().count
    _ = try CLI.run(
      ["--store", store, "remote", "check", "far"],
      environment: ["HOME": home, "http_proxy": server.url(""), "no_proxy": "127.0.0.1"])
    #expect(server.headerLog().count > before, "\(server.headerLog())")
    #expect(Self.netrcSent(server).count == lent, "\(server.headerLog())")
  }

  @Test(
    "~/.netrc goes to the origin of the URL the user gave, never to another origin a redirect leads to, even one it names"
  )
  func netrcNotToARedirectsOrigin() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let home = try Self.home(scratch, hosts: ["127.0.0.1"])
    let target = server.url("/headers/private")
    let hostile = server.url("/redirect/x?to=\(target)").replacingOccurrences(
      of: "127.0.0.1", with: "localhost")
    let fetched = try CLI.run(
      ["--store", scratch["store"], "fetch", hostile], environment: ["HOME": home])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    #expect(
      server.headerLog().contains { $0.hasPrefix("GET /headers/private") },
      "\(server.headerLog())")
    #expect(Self.netrcSent(server).isEmpty, "\(server.headerLog())")
    // The origin the user named gets it.
    _ = try CLI.run(
      ["--store", scratch["store"], "fetch", server.url("/headers/mine")],
      environment: ["HOME": home])
    #expect(Self.netrcSent(server).count == 1, "\(server.headerLog())")
  }

  @Test(
    "a rewrite rule in a store others can write sends the rewritten URL no credential: no -H, --auth-env or ~/.netrc"
  )
  func foreignRewriteGetsNoCredential() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let home = try Self.home(scratch, hosts: ["127.0.0.1"])
    try trove(store, ["put", try scratch.write("in", [1, 2, 3])])
    #expect(chmod(store, 0o2770) == 0)
    let base = server.url("/").replacingOccurrences(of: "127.0.0.1", with: "localhost")
    let rule = "\(base)=\(server.url("/headers/"))"
    #expect(try CLI.run(["--store", store, "config", "set", "rewrite.team", rule]).status == 0)
    let fetched = try CLI.run(
      [
        "--store", store, "fetch", base + "tool.tgz", "-H", "Authorization: Bearer t0ken",
        "--auth-env", "TOK",
      ], environment: ["HOME": home, "TOK": "alice:pw"])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    let sent = server.headerLog().filter { $0.hasPrefix("GET /headers/tool.tgz") }
    #expect(sent.count == 1, "\(server.headerLog())")
    #expect(!sent.joined().contains("Authorization"), "\(sent)")
    // Made private, the rules are this user's: ~/.netrc goes with them.
    #expect(chmod(store, 0o700) == 0)
    _ = try CLI.run(
      ["--store", store, "fetch", base + "other.tgz"], environment: ["HOME": home])
    #expect(
      Self.netrcSent(server).contains { $0.hasPrefix("GET /headers/other.tgz") },
      "\(server.headerLog())")
  }

  @Test("remote add refuses any login in an http(s) URL in one line that shows none of it")
  func remoteURLLogin() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let added = try CLI.run([
      "--store", store, "remote", "add", "tok", "https://glpat-S3cr3tT0ken@cache.example/x",
    ])
    let error = added.errorLines.filter { $0.hasPrefix("Error:") }
    #expect(added.status == 64 && error.count == 1, "\(added.stderr)")
    #expect(error.first?.contains("'https://***@cache.example/x'") == true, "\(added.stderr)")
    #expect(error.first?.contains("--auth-env") == true, "\(added.stderr)")
    #expect(!added.stderr.contains("S3cr3t"), "\(added.stderr)")
    #expect(!FileManager.default.fileExists(atPath: store + "/remotes.json"))
    // One written by hand or by an older version is refused the same way.
    _ = try scratch.store()
    let file = """
      {"format": 1, "remotes": [{"name": "tok", "url": "https://glpat-S3cr3tT0ken@cache.example/x", "read-only": true}]}
      """
    _ = try scratch.write("store/remotes.json", Array(file.utf8))
    let listed = try CLI.run(["--store", store, "remote", "ls"])
    #expect(listed.status == 78, "\(listed.stderr)")
    #expect(!(listed.out + listed.stderr).contains("S3cr3t"), "\(listed.stderr)")
    #expect(
      RemoteSpec.redacted("redis://reader@cache.example:6379/0")
        == "redis://***@cache.example:6379/0")
  }

  @Test("an -H value with no colon is refused without echoing any of it")
  func headerWithoutColon() throws {
    let scratch = try Scratch()
    let run = try CLI.run([
      "--store", scratch["store"], "fetch", "-H", "PRIVATE-TOKEN=hdrS3cret",
      "http://127.0.0.1:9/x",
    ])
    let error = run.errorLines.filter { $0.hasPrefix("Error:") }
    #expect(run.status == 64 && error.count == 1, "\(run.stderr)")
    #expect(error.first?.contains("--header") == true, "\(run.stderr)")
    #expect(!run.stderr.contains("hdrS3cret") && !run.stderr.contains("PRIVATE"), "\(run.stderr)")
  }

  @Test("a cancelled async fetch names the URL without its login")
  func cancelledFetchMessage() async throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let task = Task { () async -> TroveError? in
      while !Task.isCancelled { await Task.yield() }
      do {
        _ = try await store.fetch(FetchRequest(url: "http://alice:AsyncPw9@127.0.0.1:9/x"))
        return nil
      } catch let error as TroveError {
        return error
      } catch {
        return nil
      }
    }
    task.cancel()
    let error = try #require(await task.value)
    #expect(error.code == .cancelled, "\(error)")
    #expect(
      !error.description.contains("AsyncPw9") && error.description.contains("127.0.0.1:9/x"),
      "\(error)")
  }

  @Test("keys, record show and export hide a login older versions kept in a URL key")
  func oldLoginKeys() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("in", Bytes.random(3_000, seed: 2813))
    try trove(store, ["record", "start", "ci"])
    // As an older version's fetch recorded it: the login in the key.
    try trove(store, ["put", "--key", "http://alice:OldKeyPw7@cache.example/tool.tgz", file])
    try trove(store, ["put", "--key", "npm://lodash@4.17.21", file])
    let keys = try trove(store, ["keys"])
    #expect(keys.out.contains("http://***@cache.example/tool.tgz"), "\(keys.out)")
    #expect(keys.out.contains("npm://lodash@4.17.21"), "\(keys.out)")
    let json = try trove(store, ["keys", "--json"])
    let shown = try trove(store, ["record", "show", "ci"])
    let shownJSON = try trove(store, ["record", "show", "ci", "--json"])
    for out in [keys.out, json.out, shown.out, shownJSON.out] {
      #expect(!out.contains("OldKeyPw7"), "\(out)")
    }
    // Exported, the key is the URL without its login: what a fetch keys now.
    try trove(store, ["export", "--record", "ci", scratch["out"]])
    try trove(store, ["export", "--record", "ci", scratch["out.tar"]])
    #expect(files(under: scratch["out"], holding: "OldKeyPw7").isEmpty)
    let archive = try Data(contentsOf: URL(fileURLWithPath: scratch["out.tar"]))
    #expect(archive.range(of: Data("OldKeyPw7".utf8)) == nil)
    let exported = try trove(scratch["out"], ["keys"]).out
    #expect(exported.contains("  http://cache.example/tool.tgz\n"), "\(exported)")
    #expect(exported.contains("npm://lodash@4.17.21"), "\(exported)")
    let imported = scratch["imported"]
    try trove(imported, ["import", scratch["out.tar"]])
    #expect(try trove(imported, ["keys"]).out.contains("  http://cache.example/tool.tgz\n"))
  }
}

/// A pulled key record's fetch time and final URL are a writer's word.
@Suite(
  "a pulled record's time and final URL are not trusted",
  .enabled(if: Nginx.executable != nil, Nginx.missing))
struct PulledRecordWordTests {
  @Test("--max-age never serves a record pulled from a remote: the origin is asked first")
  func maxAgeAsksForPulledRecord() throws {
    let origin = try Nginx()
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    _ = try origin.files.write("aged.bin", Bytes.random(40_000, seed: 2804))
    let url = origin.url("/aged.bin")
    let (_, b) = try RemoteRecordTrustTests.publish([url], dav: dav, base: "age", scratch: scratch)
    #expect(origin.requests("/aged.bin").count == 1)
    // The record says it was fetched just now, as any writer could.
    try RemoteRecordTrustTests.tamper(dav, "age", url) {
      $0["fetched"] = Int64(Date().timeIntervalSince1970 * 1e9)
    }
    let (status, record, stderr) = try RemoteRecordTrustTests.fetch(b, ["--max-age", "1d", url])
    #expect(status == 0, "\(stderr)")
    #expect(record?["source"] as? String == "revalidated", "\(String(describing: record))")
    #expect(origin.requests("/aged.bin").count == 2)
    // Once the origin answered here, --max-age counts from that answer.
    let (again, served, _) = try RemoteRecordTrustTests.fetch(b, ["--max-age", "1d", url])
    #expect(again == 0 && served?["source"] as? String == "cache", "\(String(describing: served))")
    #expect(origin.requests("/aged.bin").count == 2)
  }

  @Test("--max-age never serves a pulled record that carries no origin at all")
  func maxAgeAsksForOriginlessRecord() throws {
    let origin = try Nginx()
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    _ = try origin.files.write("bare.bin", Bytes.random(30_000, seed: 2805))
    let url = origin.url("/bare.bin")
    let (_, b) = try RemoteRecordTrustTests.publish([url], dav: dav, base: "bare", scratch: scratch)
    #expect(origin.requests("/bare.bin").count == 1)
    // The record names the object and nothing of the origin, as a put's.
    let path = URL(fileURLWithPath: RemoteRecordTrustTests.record(dav, "bare", url))
    var json = try #require(
      try JSONSerialization.jsonObject(with: Data(contentsOf: path)) as? [String: Any])
    json["origin"] = nil
    try JSONSerialization.data(withJSONObject: json).write(to: path)
    let (status, record, stderr) = try RemoteRecordTrustTests.fetch(b, ["--max-age", "1d", url])
    #expect(status == 0, "\(stderr)")
    #expect(record?["source"] as? String != "cache", "\(String(describing: record))")
    #expect(origin.requests("/bare.bin").count == 2)
  }

  @Test(
    "a pulled record's finalURL loses its login; one holding a control character binds nothing")
  func finalURLChecked() throws {
    let server = try FaultServer()
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let loginURL = server.url("/ok/login?size=4000")
    let controlURL = server.url("/ok/control?size=5000")
    let (_, b) = try RemoteRecordTrustTests.publish(
      [loginURL, controlURL], dav: dav, base: "fin", scratch: scratch)
    try RemoteRecordTrustTests.tamper(dav, "fin", loginURL) {
      $0["finalURL"] = "http://mallory:FinalPw3@cache.example/x"
    }
    try RemoteRecordTrustTests.tamper(dav, "fin", controlURL) {
      $0["finalURL"] = "http://cache.example/\u{1b}]8;;http://evil.example\u{7}x"
    }
    let pulled = try RemoteTests.remote(b, ["pull", loginURL])
    #expect(pulled.status == 0, "\(pulled.stderr)")
    let keys = try CLI.run(["--store", b, "keys", "--json"])
    let bound = try #require(
      try JSONSerialization.jsonObject(with: Data(keys.stdout)) as? [[String: Any]])
    #expect(bound.count == 1, "\(bound)")
    #expect(bound.first?["finalURL"] as? String == "http://cache.example/x", "\(bound)")
    #expect(files(under: b, holding: "FinalPw3").isEmpty)
    // The record with a control character is not used: the origin is.
    let fetched = try CLI.run(["--store", b, "fetch", controlURL])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    #expect(fetched.stderr.contains("finalURL holds a control character"), "\(fetched.stderr)")
    let shared = try #require(try RemoteReadThroughTests.status(b)["shared"])
    #expect(shared["corrupt"] as? Int == 1, "\(shared)")
  }
}
