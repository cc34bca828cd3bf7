import Foundation
import Testing

@testable import Trove

/// `trove fetch` at the edges of HTTP, against `Tests/Servers/fault_server.py`
/// on 127.0.0.1: header lines checked as bytes, URL lists with CRLF line
/// ends, redirects that must not carry the user's headers or change
/// scheme, and responses whose length is not one number.
@Suite(
  "HTTP edges: header lines, URL lists, redirects, lengths",
  .enabled(if: FaultServer.python != nil, FaultServer.missing))
struct HTTPEdgeTests {
  static func fetch(_ store: String, _ arguments: [String]) throws -> CLI.Result {
    try CLI.run(["--store", store, "fetch"] + arguments)
  }

  /// A URL on `server` that redirects to `target`.
  static func redirect(_ server: FaultServer, to target: String) -> String {
    server.url(
      "/redirect/r?to=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
  }

  @Test("-H with a line break inside, CR LF included, is refused before any request")
  func headerLineBreaks() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    for line in ["X-A: b\r\nX-C: d", "X-A: b\nX-C: d", "X-A: b\rX-C: d"] {
      let run = try Self.fetch(scratch["store"], ["-H", line, server.url("/headers/x")])
      #expect(run.status == 64, "\(run.status) \(run.stderr)")
      #expect(
        run.errorLines.first
          == "Error: invalid --header 'X-A: …': a header line holds no line break (CR or LF)",
        "\(run.stderr)")
    }
    #expect(server.headerLog().isEmpty, "\(server.headerLog())")
  }

  @Test("fetch -i reads a list with CRLF line ends as one URL a line")
  func crlfList() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let urls = [server.url("/ok/a?size=100"), server.url("/ok/b?size=200")]
    let list = try scratch.write(
      "urls", Array("\(urls[0])\r\n# a comment\r\n\r\n\(urls[1]) \r\n".utf8))
    let run = try Self.fetch(scratch["store"], ["-i", list])
    #expect(run.status == 0, "\(run.stderr)")
    let lines = run.out.split(separator: "\n").map(String.init)
    #expect(lines.count == 2 && lines[0].hasSuffix("  " + urls[0]), "\(lines)")
    #expect(lines.count == 2 && lines[1].hasSuffix("  " + urls[1]), "\(lines)")
  }

  @Test(
    "-H lines and a URL's login go to its origin only: a redirect to another port goes without them"
  )
  func headersStayWithTheirOrigin() throws {
    let first = try FaultServer()
    let other = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let away = Self.redirect(first, to: other.url("/headers/away"))
    let home = Self.redirect(first, to: first.url("/headers/home"))
    // Both at once: through the multi handle, as `-j` runs them.
    let run = try Self.fetch(
      store,
      ["--json", "-H", "PRIVATE-TOKEN: tok-1"]
        + [away, home].map { $0.replacingOccurrences(of: "http://", with: "http://alice:pw9@") })
    #expect(run.status == 0, "\(run.stderr)")
    let records = try JSONSerialization.jsonObject(with: Data(run.stdout)) as? [[String: Any]]
    let digests = (records ?? []).compactMap { $0["digest"] as? String }
    #expect(digests.count == 2 && records?.map { $0["url"] as? String } == [away, home])
    guard digests.count == 2 else { return }
    func body(_ digest: String) throws -> String {
      String(decoding: try trove(store, ["get", digest, "-"]).stdout, as: UTF8.self)
    }
    let awayBody = try body(digests[0])
    #expect(awayBody.contains("Host: 127.0.0.1:\(other.port)"), "\(awayBody)")
    #expect(!awayBody.contains("tok-1") && !awayBody.contains("Authorization"), "\(awayBody)")
    let homeBody = try body(digests[1])
    #expect(homeBody.contains("PRIVATE-TOKEN: tok-1") && homeBody.contains("Authorization: Basic"))
    // The first server got both with each first request, as asked.
    let asked = first.headerLog().filter { $0.hasPrefix("GET /redirect/") }
    #expect(asked.count == 2 && asked.allSatisfy { $0.contains("PRIVATE-TOKEN: tok-1") })
    #expect(asked.allSatisfy { $0.contains("Authorization: Basic") })
    let binding = try scratch.store().binding(forKey: home)
    #expect(binding?.origin?.finalURL == first.url("/headers/home"))
  }

  @Test("a redirect to file:// or ftp:// exits 69 in one line; nothing is stored")
  func redirectToOtherSchemes() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    for target in ["file:///etc/passwd", "ftp://127.0.0.1/x"] {
      let run = try Self.fetch(scratch["store"], [Self.redirect(server, to: target)])
      #expect(run.status == 69 && run.errorLines.count == 1, "\(run.status) \(run.stderr)")
      #expect(run.stderr.contains("not an http:// or https:// URL"), "\(run.stderr)")
    }
    #expect(try scratch.store().entries().isEmpty)
  }

  @Test("a redirect loop ends at the limit with exit 69 in one line")
  func redirectLoop() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let run = try Self.fetch(scratch["store"], [server.url("/redirect/loop")])
    #expect(run.status == 69 && run.errorLines.count == 1, "\(run.status) \(run.stderr)")
    #expect(run.stderr.contains("more than 10 redirects"), "\(run.stderr)")
    #expect(server.headerLog().count == 11)
  }

  @Test("which redirects are followed: never https:// to http://, nor to another scheme")
  func redirectRules() {
    func refused(_ from: String, _ to: String) -> Bool {
      if case .refuse = HTTPOrigin.redirect(from: from, to: to) { return true }
      return false
    }
    #expect(refused("https://a.example/x", "http://a.example/y"))
    #expect(refused("https://a.example/x", "HTTP://b.example/y"))
    #expect(refused("http://a.example/x", "file:///etc/passwd"))
    #expect(refused("http://a.example/x", "gopher://a.example/"))
    #expect(
      HTTPOrigin.redirect(from: "http://a.example/x", to: "https://a.example/y")
        == .follow(sameOrigin: false))
    #expect(
      HTTPOrigin.redirect(from: "http://a.example/x", to: "http://A.example:80/y")
        == .follow(sameOrigin: true))
    #expect(
      HTTPOrigin.redirect(from: "http://127.0.0.1:8/x", to: "http://localhost:8/x")
        == .follow(sameOrigin: false))
    #expect(
      HTTPOrigin.redirect(from: "https://a.example/x", to: "https://a.example:8443/x")
        == .follow(sameOrigin: false))
  }

  @Test("conflicting Content-Length headers: exit 69 in one line, nothing stored")
  func conflictingLengths() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let run = try Self.fetch(scratch["store"], [server.url("/lengths/x?size=100")])
    #expect(run.status == 69 && run.errorLines.count == 1, "\(run.status) \(run.stderr)")
    #expect(run.stderr.contains("conflicting Content-Length headers (100, 5)"), "\(run.stderr)")
    #expect(try scratch.store().entries().isEmpty)
    #expect(scratch.temporaries("store").isEmpty)
  }
}
