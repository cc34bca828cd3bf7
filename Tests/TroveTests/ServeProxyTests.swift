import Foundation
import Synchronization
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// `trove serve` as the `http_proxy` of curl and Python's urllib: an
/// `http://` URL is the store's fetch of it (cached, served with the origin
/// gone), a `CONNECT` is relayed both ways and cached nowhere, and no
/// client reaches a host the listener may not proxy.
@Suite(.enabled(if: Nginx.executable != nil && FaultServer.python != nil, Nginx.missing))
struct ServeProxyTests {
  /// `http_proxy` pointing at `server`, and nothing that would bypass it
  /// for 127.0.0.1.
  static func proxying(_ server: TroveServe) -> [String: String] {
    ["http_proxy": server.url, "no_proxy": "", "NO_PROXY": ""]
  }

  /// `Tests/Servers/proxy_client.py ARGS`: its output, trimmed.
  static func python(_ arguments: [String], environment: [String: String] = [:]) throws
    -> String
  {
    let io = try Scratch()
    let outcome = try Spawned(
      executable: FaultServer.python ?? "/usr/bin/python3",
      [repositoryRoot + "/Tests/Servers/proxy_client.py"] + arguments, io: io["client"],
      environment: environment
    ).wait()
    let out = String(decoding: outcome.stdout, as: UTF8.self)
    #expect(outcome.status == 0, "\(outcome)")
    return out.trimmingCharacters(in: .whitespacesAndNewlines)
  }

  /// The port of a server's URL (`http://ADDR:PORT/`).
  static func port(_ url: String) -> String {
    String(url.dropLast().split(separator: ":").last ?? "")
  }

  /// `Tests/Servers/echo_server.py`: bytes back as they come.
  final class Echo {
    let state: Scratch
    let process: Spawned
    let port: Int

    init() throws {
      state = try Scratch()
      (process, port) = try startPython(
        "the echo server", [repositoryRoot + "/Tests/Servers/echo_server.py", state["port"]],
        state: state)
    }

    deinit {
      process.kill()
      _ = try? process.wait()
    }
  }

  @Test(
    "curl with http_proxy: a miss is fetched through the store; with nginx stopped the same URL comes from the store; nginx saw one GET"
  )
  func curlThroughTheStore() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    let nginx = try Nginx()
    let server = try TroveServe(store: scratch["store"])
    let bytes = Bytes.random(300_000, seed: 91)
    try nginx.files.write("model.bin", bytes)
    let url = nginx.url("/fresh/model.bin")

    let miss = try curl([url], environment: Self.proxying(server))
    #expect(miss.status == 200 && miss.body == bytes)
    #expect(miss.headers["x-trove-cache"] == "miss")
    nginx.stop()
    let hit = try curl([url], environment: Self.proxying(server))
    #expect(hit.status == 200 && hit.body == bytes)
    #expect(hit.headers["x-trove-cache"] == "hit")
    let head = try curl(["-I", url], environment: Self.proxying(server))
    #expect(head.status == 200 && head.headers["content-length"] == "\(bytes.count)")
    #expect(nginx.requests("/fresh/model.bin").count == 1)

    // The key is the URL asked for; the access log names it (no query).
    #expect(try trove(scratch["store"], ["keys"]).out.contains(url))
    let metrics = try curl([server.url("metrics")])
    #expect(
      String(decoding: metrics.body, as: UTF8.self).contains(
        "trove_http_requests_total{route=\"proxy\",status=\"200\"} 3"))
    #expect(try server.stop().status == 0)
    #expect(server.accessLog().filter { $0.contains("\"GET \(url) HTTP/1.1\" 200") }.count == 2)
  }

  @Test(
    "Python's urllib with http_proxy: the query reaches the origin; the second fetch, nginx stopped, is served by the store"
  )
  func urllibThroughTheStore() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    let nginx = try Nginx()
    let server = try TroveServe(store: scratch["store"])
    let bytes = Bytes.random(200_000, seed: 92)
    try nginx.files.write("data.bin", bytes)
    let url = nginx.url("/fresh/data.bin?v=2")
    let environment = Self.proxying(server)

    #expect(
      try Self.python(["urllib", url, scratch["one"]], environment: environment) == "200 miss")
    #expect(try contents(scratch["one"]) == bytes)
    nginx.stop()
    #expect(
      try Self.python(["urllib", url, scratch["two"]], environment: environment) == "200 hit")
    #expect(try contents(scratch["two"]) == bytes)
    #expect(nginx.requests("/fresh/data.bin?v=2").count == 1)
    #expect(nginx.accessLog().count == 1)
  }

  @Test(
    "a CONNECT is tunnelled both ways (http.client to an echo server: 3 MB back, half-close carried); curl -p reaches nginx through it, and nothing is cached"
  )
  func tunnels() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    let nginx = try Nginx()
    let echo = try Echo()
    let server = try TroveServe(store: scratch["store"])
    let proxyPort = Self.port(server.url)

    let echoed = try Self.python(["tunnel", proxyPort, "127.0.0.1", "\(echo.port)", "3000000"])
    #expect(echoed == "echoed 3000000")

    let bytes = Bytes.random(100_000, seed: 93)
    try nginx.files.write("page.bin", bytes)
    let url = nginx.url("/fresh/page.bin")
    let tunnelled = try curl(["-p", "-x", server.url, url])
    #expect(tunnelled.status == 200 && tunnelled.body == bytes)
    #expect(tunnelled.headers["x-trove-cache"] == nil)
    #expect(nginx.requests("/fresh/page.bin").count == 1)
    #expect(!(try trove(scratch["store"], ["keys"]).out.contains(url)))

    // A port nothing listens on: the proxy's answer to the CONNECT is 502.
    let dead = try curl([
      "-p", "-x", server.url, "-w", "%{http_connect}", "http://127.0.0.1:\(deadPort())/",
    ])
    #expect(dead.status == 502 && dead.exitStatus != 0)

    let metrics = String(decoding: try curl([server.url("metrics")]).body, as: UTF8.self)
    #expect(metrics.contains("trove_http_requests_total{route=\"connect\",status=\"200\"} 2"))
    #expect(metrics.contains("trove_http_requests_total{route=\"connect\",status=\"502\"} 1"))
    #expect(metrics.contains("trove_tunnel_bytes_total{direction=\"up\"} "))
    #expect(metrics.contains("trove_tunnels_active 0"))
    let up = metrics.split(separator: "\n").first {
      $0.hasPrefix("trove_tunnel_bytes_total{direction=\"up\"}")
    }
    #expect(
      up.flatMap { Int64($0.split(separator: " ").last ?? "") }.map { $0 > 3_000_000 } == true)
    #expect(try server.stop().status == 0)
    let log = server.accessLog()
    #expect(log.contains { $0.contains("\"CONNECT 127.0.0.1:\(echo.port) HTTP/1.0\" 200 3000000") })
    #expect(log.contains { $0.contains("\"CONNECT 127.0.0.1:\(nginx.port) HTTP/1.1\" 200 ") })
  }

  @Test(
    "8 clients of one missing URL through the proxy at once: one GET at nginx, every client the whole body"
  )
  func singleFlight() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    // The WebDAV configuration has /slow/.
    let nginx = try Nginx(webDAV: true)
    let server = try TroveServe(store: scratch["store"])
    let bytes = Bytes.random(1_500_000, seed: 96)
    try nginx.files.write("big.bin", bytes)
    // 1 MB/s (/slow/): the clients join a transfer under way.
    let url = nginx.url("/slow/big.bin")
    let environment = Self.proxying(server)
    let results = Mutex<[CurlResult]>([])
    try concurrently(
      (0..<8).map { _ in
        {
          let got = try curl([url], environment: environment)
          results.withLock { $0.append(got) }
        }
      })
    let all = results.withLock { $0 }
    #expect(all.count == 8)
    #expect(
      all.allSatisfy { $0.status == 200 && $0.body == bytes },
      "\(all.map { ($0.status, $0.body.count, $0.headers["x-trove-cache"] ?? "-") })")
    #expect(nginx.requests("/slow/big.bin").count == 1)
  }

  @Test(
    "SIGTERM with a tunnel open: the server exits 0 once the grace period ends, and the client sees its tunnel close"
  )
  func stopWithTunnelOpen() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    let echo = try Echo()
    let server = try TroveServe(store: scratch["store"], ["--grace-period", "1s"])
    let io = try Scratch()
    let client = try Spawned(
      executable: FaultServer.python ?? "/usr/bin/python3",
      [
        repositoryRoot + "/Tests/Servers/proxy_client.py", "hold", Self.port(server.url),
        "127.0.0.1", "\(echo.port)",
      ], io: io["client"])
    let opened = poll(times: 250) {
      (try? String(contentsOfFile: io["client"] + ".out", encoding: .utf8))
        .flatMap { $0.contains("open") ? true : nil }
    }
    #expect(opened == true)
    let stopped = try server.stop()
    #expect(stopped.status == 0, "\(stopped)")
    #expect(stopped.stderr.contains("cut off"))
    let outcome = try client.wait()
    #expect(String(decoding: outcome.stdout, as: UTF8.self) == "open\nclosed\n", "\(outcome)")
  }

  @Test(
    "--proxy-allow, given, holds on loopback too: a host or port not on it is 403 for GET and CONNECT and reaches nothing"
  )
  func allowlist() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    let nginx = try Nginx()
    let echo = try Echo()
    let server = try TroveServe(
      store: scratch["store"],
      ["--proxy-allow", "127.0.0.1:\(nginx.port)", "--proxy-allow", "LOCALHOST"])
    let bytes = Bytes.random(10_000, seed: 94)
    try nginx.files.write("a.bin", bytes)
    let environment = Self.proxying(server)

    let allowed = try curl([nginx.url("/fresh/a.bin")], environment: environment)
    #expect(allowed.status == 200 && allowed.body == bytes)
    // Another address on the same port, and another port of the host.
    let otherHost = try curl(
      ["http://127.0.0.2:\(nginx.port)/fresh/a.bin"], environment: environment)
    #expect(otherHost.status == 403)
    #expect(String(decoding: otherHost.body, as: UTF8.self).contains("--proxy-allow"))
    let otherPort = try curl([
      "-p", "-x", server.url, "-w", "%{http_connect}", "http://127.0.0.1:\(echo.port)/",
    ])
    #expect(otherPort.status == 403)
    #expect(
      try Self.python([
        "raw", Self.port(server.url), "CONNECT 127.0.0.1:\(echo.port) HTTP/1.1",
        "Host: 127.0.0.1:\(echo.port)",
      ]) == "403")
    // A host allowed on any port.
    let named = try curl(["http://localhost:\(nginx.port)/fresh/a.bin"], environment: environment)
    #expect(named.status == 200 && named.body == bytes)
    #expect(nginx.accessLog().count == 2)
  }

  @Test(
    "with --proxy-allow, an allowed host's redirect to a host not on it is 502 and never followed; to one on it, followed; on loopback without it, followed anywhere"
  )
  func redirectsStayAllowed() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    let origin = try FaultServer()
    let nginx = try Nginx()
    let bytes = Bytes.random(20_000, seed: 97)
    try nginx.files.write("target.bin", bytes)
    let target = nginx.url("/target.bin")
    let encoded = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
    let originHost = "127.0.0.1:\(origin.port)"

    let strict = try TroveServe(store: scratch["store"], ["--proxy-allow", originHost])
    let refused = try curl(
      [origin.url("/redirect/a?to=\(encoded)")], environment: Self.proxying(strict))
    #expect(refused.status == 502)
    #expect(String(decoding: refused.body, as: UTF8.self).contains("may not reach"))
    #expect(nginx.accessLog().isEmpty)

    let both = try TroveServe(
      store: scratch["store"],
      ["--proxy-allow", originHost, "--proxy-allow", "127.0.0.1:\(nginx.port)"])
    let followed = try curl(
      [origin.url("/redirect/b?to=\(encoded)")], environment: Self.proxying(both))
    #expect(followed.status == 200 && followed.body == bytes)

    let loopback = try TroveServe(store: scratch["store"])
    let anywhere = try curl(
      [origin.url("/redirect/c?to=\(encoded)")], environment: Self.proxying(loopback))
    #expect(anywhere.status == 200 && anywhere.body == bytes)
    #expect(nginx.requests("/target.bin").count == 2)
  }

  @Test(
    "a listener other machines reach (0.0.0.0, token) proxies no host without --proxy-allow; a proxy's client needs the token (Proxy-Authorization: Bearer, or the proxy URL's password for curl and urllib; 407 without); it is never logged"
  )
  func exposedListener() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    let nginx = try Nginx()
    try nginx.files.write("b.bin", Bytes.random(5000, seed: 95))
    let secret = "proxy-token-0123456789"
    let tokens = try scratch.write("tokens", Array("\(secret)\n".utf8))
    chmod(tokens, 0o600)
    let bearer = "Proxy-Authorization: Bearer \(secret)"
    let url = nginx.url("/fresh/b.bin")

    let closed = try TroveServe(
      store: scratch["store"], ["--token-file", tokens], listen: ["0.0.0.0:0"])
    // Only ever reached over loopback, though it listens on every address.
    let proxy = closed.url.replacingOccurrences(of: "0.0.0.0", with: "127.0.0.1")
    let refused = try curl(["-x", proxy, "--proxy-header", bearer, url])
    #expect(refused.status == 403)
    #expect(String(decoding: refused.body, as: UTF8.self).contains("--proxy-allow"))
    #expect(
      try Self.python([
        "raw", Self.port(proxy), "CONNECT 127.0.0.1:\(nginx.port) HTTP/1.1",
        "Host: 127.0.0.1:\(nginx.port)", bearer,
      ]) == "403")
    #expect(nginx.accessLog().isEmpty)

    let allowing = try TroveServe(
      store: scratch["store"],
      ["--token-file", tokens, "--proxy-allow", "127.0.0.1:\(nginx.port)"],
      listen: ["0.0.0.0:0"])
    let allowedProxy = allowing.url.replacingOccurrences(of: "0.0.0.0", with: "127.0.0.1")
    let without = try curl(["-x", allowedProxy, url])
    #expect(without.status == 407)
    // Challenges for Bearer and Basic (the helper keeps the last).
    #expect(without.headers["proxy-authenticate"]?.hasSuffix("realm=\"trove\"") == true)
    #expect(String(decoding: without.body, as: UTF8.self).contains("Proxy-Authorization: Bearer"))
    // The origin's Authorization header is not the proxy's credential.
    let wrongHeader = try curl(["-x", allowedProxy, "-H", "Authorization: Bearer \(secret)", url])
    #expect(wrongHeader.status == 407)
    let with = try curl(["-x", allowedProxy, "--proxy-header", bearer, url])
    #expect(with.status == 200 && with.body.count == 5000)
    let tunnelled = try curl(["-p", "-x", allowedProxy, "--proxy-header", bearer, url])
    #expect(tunnelled.status == 200 && tunnelled.body.count == 5000)
    // The token as the password of the proxy URL (Basic), as pip and
    // urllib send it from http_proxy; another password is refused.
    let withLogin = allowedProxy.replacingOccurrences(
      of: "http://", with: "http://trove:\(secret)@")
    #expect(try curl(["-x", withLogin, url]).status == 200)
    let wrongLogin = allowedProxy.replacingOccurrences(
      of: "http://", with: "http://trove:not-the-token-0123456789@")
    #expect(try curl(["-x", wrongLogin, url]).status == 407)
    #expect(
      try Self.python(
        ["urllib", url, scratch["urllib"]],
        environment: ["http_proxy": withLogin, "no_proxy": "", "NO_PROXY": ""]) == "200 hit")
    #expect(nginx.requests("/fresh/b.bin").count == 2)
    for server in [closed, allowing] {
      let outcome = try server.stop()
      #expect(outcome.status == 0 && !outcome.stderr.contains(secret))
      #expect(!server.accessLog().joined().contains(secret))
    }
  }

  @Test(
    "a proxied fetch sends the origin none of the client's headers (Proxy-Authorization, Proxy-Connection) and no ~/.netrc login, which a mirror of the same origin does send"
  )
  func nothingPassedOn() throws {
    let origin = try FaultServer()
    let scratch = try Scratch()
    _ = try scratch.store()
    let home = try CredentialLeakTests.home(scratch, hosts: ["127.0.0.1"])
    let secret = "proxy-token-9876543210"
    let tokens = try scratch.write("tokens", Array("\(secret)\n".utf8))
    chmod(tokens, 0o600)
    let server = try TroveServe(
      store: scratch["store"], ["--token-file", tokens, "--mirror", "f=" + origin.url("")],
      environment: ["HOME": home])

    let proxied = try curl([
      "-x", server.url, "--proxy-header", "Proxy-Authorization: Bearer \(secret)",
      origin.url("/ok/proxied?size=100"),
    ])
    #expect(proxied.status == 200 && proxied.body.count == 100)
    let logged = origin.headerLog().filter { $0.contains("/ok/proxied") }
    #expect(logged.count == 1)
    for line in logged {
      #expect(!line.lowercased().contains("proxy-"), "\(line)")
      #expect(!line.contains(secret) && !line.lowercased().contains("authorization"), "\(line)")
    }
    #expect(CredentialLeakTests.netrcSent(origin).isEmpty)

    // The netrc is read, and a mirror (its upstream the user's choice) lends it.
    let mirrored = try curl([
      "-H", "Authorization: Bearer \(secret)", server.url("m/f/ok/mirrored?size=100"),
    ])
    #expect(mirrored.status == 200)
    #expect(CredentialLeakTests.netrcSent(origin).count == 1, "\(origin.headerLog())")
  }

  @Test("a --proxy-allow that is not HOST or HOST:PORT is a usage error (64) naming it")
  func badAllowance() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    for value in ["http://example.org/", "example.org:0", "exa mple.org", "user@example.org", ""] {
      let run = try CLI.run(["--store", scratch["store"], "serve", "--proxy-allow", value])
      #expect(run.status == 64, "\(value): \(run.stderr)")
      #expect(run.stderr.contains("invalid --proxy-allow"), "\(value): \(run.stderr)")
    }
  }

  @Test(
    "a target the proxy does not take is 400 or 405 with one line, and reaches no origin: https://, ftp://, a login, a bad escape, CONNECT without a port, POST"
  )
  func refusals() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    let nginx = try Nginx()
    let server = try TroveServe(store: scratch["store"])
    let port = Self.port(server.url)
    let origin = "127.0.0.1:\(nginx.port)"
    for (line, status) in [
      ("GET https://\(origin)/x HTTP/1.1", "400"),
      ("GET ftp://\(origin)/x HTTP/1.1", "400"),
      ("GET http://user:pw@\(origin)/x HTTP/1.1", "400"),
      ("GET http://\(origin)/a%zz HTTP/1.1", "400"),
      ("GET http:///x HTTP/1.1", "400"),
      ("CONNECT 127.0.0.1 HTTP/1.1", "400"),
      ("CONNECT 127.0.0.1:0 HTTP/1.1", "400"),
      ("POST http://\(origin)/x HTTP/1.1", "405"),
    ] {
      #expect(try Self.python(["raw", port, line, "Host: \(origin)"]) == status, "\(line)")
    }
    #expect(nginx.accessLog().isEmpty)
    #expect(try server.stop().status == 0)
    #expect(server.accessLog().count == 8)
  }
}
