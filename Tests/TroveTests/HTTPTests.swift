import Foundation
import Testing

@testable import Trove

/// What every HTTP request of Trove's shares, the fetch path's and the
/// WebDAV remotes' alike: one libcurl handle's setup (``HTTPHandle``) and
/// one reading of response heads (``HTTPResponseHead``).
@Suite("HTTP requests and response heads")
struct HTTPTests {
  /// The head made of `lines`, each handed over as libcurl hands it.
  static func head(_ lines: [String]) -> HTTPResponseHead {
    var head = HTTPResponseHead()
    for line in lines { Array(line.utf8).withUnsafeBytes { head.add(line: $0) } }
    return head
  }

  @Test("a field's value loses the spaces and tabs around it and its line ending, nothing more")
  func fieldValues() {
    let head = Self.head([
      "HTTP/1.1 200 OK\r\n", "ETag: \t\"v1\" \t\r\n", "X-Inner:  a \t b \r\n",
      "X-Wide: \u{A0}kept\u{A0}\r\n", "X-Empty: \t \r\n", "Content-Length:12\n", "\r\n",
    ])
    #expect(head.status == 200)
    #expect(head.reason == "OK")
    #expect(head.field("etag") == "\"v1\"")
    #expect(head.field("x-inner") == "a \t b")
    #expect(head.field("x-wide") == "\u{A0}kept\u{A0}")
    #expect(head.field("x-empty") == "")
    #expect(head.field("content-length") == "12")
    #expect(head.fields.count == 5)
  }

  @Test(
    "a status line starts the head afresh: after a redirect only the last response's fields are kept"
  )
  func statusLineStartsOver() {
    let head = Self.head([
      "HTTP/1.1 301 Moved Permanently\r\n", "Location: /b\r\n", "Content-Length: 0\r\n", "\r\n",
      "HTTP/2 404\r\n", "content-length: 5\r\n", "\r\n",
    ])
    #expect(head.status == 404)
    #expect(head.reason == "")
    #expect(head.field("location") == nil)
    #expect(head.lastField("content-length") == "5")
  }

  @Test(
    "a line that starts with whitespace continues the field before it; repeated fields are joined")
  func foldedAndRepeatedFields() {
    let head = Self.head([
      "HTTP/1.1 200 OK\r\n", "Cache-Control: max-age=60,\r\n", "\t immutable \r\n",
      "Vary: a\r\n", "Vary: b\r\n",
    ])
    #expect(head.field("cache-control") == "max-age=60, immutable")
    #expect(head.field("vary") == "a, b")
    #expect(head.lastField("vary") == "b")
  }

  @Test(
    "a fetch and a WebDAV request both say User-Agent: trove/VERSION, the version --version prints",
    .enabled(if: FaultServer.python != nil, FaultServer.missing))
  func userAgent() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let version = try CLI.run(["--version"]).out.trimmingCharacters(in: .newlines)
    #expect(version == TroveVersion.current)
    let expected = "User-Agent: trove/" + version

    let fetched = try CLI.run(
      ["--store", scratch["store"], "fetch", "--json", server.url("/headers/fetch")])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    let digest = try BlobDigest(parsing: try FetchTests.record(fetched)["digest"] as? String ?? "")
    let sentByFetch = String(decoding: try scratch.store().bytes(for: digest), as: UTF8.self)
    #expect(sentByFetch.split(separator: "\n").contains { $0 == expected }, "\(sentByFetch)")

    var body: [UInt8] = []
    let outcome = try RemoteHTTPTransfer(limits: .standard, credential: nil, usesNetrc: false)
      .perform("GET", server.url("/headers/webdav")) { body += $0 }
    #expect(outcome.status == 200, "\(outcome.message)")
    #expect(outcome.contentLength == Int64(body.count))
    let sentByRemote = String(decoding: body, as: UTF8.self)
    #expect(sentByRemote.split(separator: "\n").contains { $0 == expected }, "\(sentByRemote)")
  }
}
