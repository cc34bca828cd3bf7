import Foundation
import Synchronization
@_spi(Serving) import Trove

/// Python package index pages (PEP 503 HTML, PEP 691 JSON) as a mirror
/// serves them: absolute links into a mirror's upstream become links
/// through that mirror (`/m/NAME/PATH`, root-relative, so whatever host
/// name the client used holds), and each linked file's published sha256
/// is returned, for the file's fetch to expect. Links to anywhere else,
/// relative links and links with a query are left as they are.
enum PackageIndex {
  /// A page's format, from its `Content-Type`.
  enum Format {
    /// `text/html`, `application/vnd.pypi.simple.v1+html`: `href`
    /// attributes, `#sha256=` fragments.
    case html
    /// `application/vnd.pypi.simple.v1+json`: `files[].url` and
    /// `files[].hashes.sha256`.
    case json
  }

  /// Pages longer than this are served as they are.
  static let maximumSize = 64 << 20

  /// The format of a page of `contentType`, nil for any other type.
  static func format(of contentType: String?) -> Format? {
    guard let contentType else { return nil }
    let type = contentType.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces)
      .lowercased()
    switch type {
    case "text/html", "application/vnd.pypi.simple.v1+html": return .html
    case "application/vnd.pypi.simple.v1+json": return .json
    default: return nil
    }
  }

  /// A rewritten page and the sha256 each rewritten link's file is
  /// published with, by the upstream URL the mirror fetches for it.
  struct Rewritten {
    var body: [UInt8]
    var published: [String: Checksum]
  }

  /// `body` with its links into `mirrors`' upstreams rewritten; nil when
  /// it holds none (or is JSON that does not parse: served as it is).
  static func rewrite(_ body: [UInt8], format: Format, mirrors: [Mirror]) -> Rewritten? {
    let byLength = mirrors.sorted { $0.upstream.utf8.count > $1.upstream.utf8.count }
    switch format {
    case .html: return rewriteHTML(body, byLength)
    case .json: return rewriteJSON(body, byLength)
    }
  }

  /// Where an absolute URL goes through a mirror: the path to link and the
  /// upstream URL the mirror fetches for it; nil when no mirror's upstream
  /// starts it, or it has a query or a path a mirror refuses.
  static func local(_ url: String, _ mirrors: [Mirror]) -> (link: String, upstream: String)? {
    for mirror in mirrors {
      guard url.hasPrefix(mirror.upstream + "/") else { continue }
      let rest = url.dropFirst(mirror.upstream.count + 1)
      guard !rest.contains("?"), let path = try? MirrorPath(parsing: rest) else { return nil }
      return ("/m/\(mirror.name)/\(path.encoded)", mirror.url(of: path))
    }
    return nil
  }

  /// A `#sha256=HEX` fragment's checksum.
  static func sha256(fragment: Substring) -> Checksum? {
    guard fragment.hasPrefix("sha256=") else { return nil }
    let hex = fragment.dropFirst(7)
    guard hex.utf8.count == 64 else { return nil }
    return try? Checksum(parsing: "sha256:" + hex.lowercased())
  }

  // MARK: HTML

  /// Scans for `href` attributes (quoted or not) and nothing else: a
  /// tolerant pass over the bytes, not an HTML parser. What is not an
  /// `href` is copied as it is.
  private static func rewriteHTML(_ page: [UInt8], _ mirrors: [Mirror]) -> Rewritten? {
    var out: [UInt8] = []
    out.reserveCapacity(page.count)
    var published: [String: Checksum] = [:]
    var changed = false
    var i = 0
    let n = page.count
    while i < n {
      guard let value = hrefValue(page, at: i) else {
        out.append(page[i])
        i += 1
        continue
      }
      out += page[i..<value.start]
      let raw = String(decoding: page[value.start..<value.end], as: UTF8.self)
      let hash = raw.firstIndex(of: "#")
      let target = entitiesDecoded(hash.map { String(raw[..<$0]) } ?? raw)
      if let (link, upstream) = local(target, mirrors) {
        changed = true
        // The path is re-encoded: only '&' and "'" need escaping in HTML.
        let escaped = link.replacingOccurrences(of: "&", with: "&amp;")
          .replacingOccurrences(of: "'", with: "&#39;")
        out += Array(escaped.utf8)
        if let hash {
          let fragment = raw[hash...]
          out += Array(fragment.utf8)
          if let checksum = sha256(fragment: fragment.dropFirst()) {
            published[upstream] = checksum
          }
        }
      } else {
        out += page[value.start..<value.end]
      }
      i = value.end
    }
    return changed ? Rewritten(body: out, published: published) : nil
  }

  /// The value of an `href` attribute whose name starts at `i` (after
  /// white space), as a range of `page`; nil when none starts there.
  private static func hrefValue(_ page: [UInt8], at i: Int) -> (start: Int, end: Int)? {
    let name: [UInt8] = Array("href".utf8)
    guard i > 0, isSpace(page[i - 1]), i + 4 < page.count else { return nil }
    for k in 0..<4 where page[i + k] | 0x20 != name[k] { return nil }
    var j = i + 4
    while j < page.count, isSpace(page[j]) { j += 1 }
    guard j < page.count, page[j] == UInt8(ascii: "=") else { return nil }
    j += 1
    while j < page.count, isSpace(page[j]) { j += 1 }
    guard j < page.count else { return nil }
    let quote = page[j]
    if quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") {
      guard let end = page[(j + 1)...].firstIndex(of: quote) else { return nil }
      return (j + 1, end)
    }
    var end = j
    while end < page.count, !isSpace(page[end]), page[end] != UInt8(ascii: ">") { end += 1 }
    return end > j ? (j, end) : nil
  }

  private static func isSpace(_ c: UInt8) -> Bool {
    c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D || c == 0x0C
  }

  /// The character references an `href` of a link may hold.
  private static func entitiesDecoded(_ text: String) -> String {
    guard text.contains("&") else { return text }
    return text.replacingOccurrences(of: "&#39;", with: "'")
      .replacingOccurrences(of: "&#x27;", with: "'")
      .replacingOccurrences(of: "&quot;", with: "\"")
      .replacingOccurrences(of: "&amp;", with: "&")
  }

  // MARK: JSON

  private static func rewriteJSON(_ page: [UInt8], _ mirrors: [Mirror]) -> Rewritten? {
    guard
      var root = (try? JSONSerialization.jsonObject(with: Data(page))) as? [String: Any],
      var files = root["files"] as? [Any]
    else { return nil }
    var published: [String: Checksum] = [:]
    var changed = false
    for index in files.indices {
      guard var file = files[index] as? [String: Any], let url = file["url"] as? String else {
        continue
      }
      let hash = url.firstIndex(of: "#")
      guard let (link, upstream) = local(hash.map { String(url[..<$0]) } ?? url, mirrors)
      else { continue }
      file["url"] = link + (hash.map { String(url[$0...]) } ?? "")
      if let hex = (file["hashes"] as? [String: Any])?["sha256"] as? String,
        let checksum = sha256(fragment: Substring("sha256=" + hex))
      {
        published[upstream] = checksum
      }
      files[index] = file
      changed = true
    }
    guard changed else { return nil }
    root["files"] = files
    guard
      let data = try? JSONSerialization.data(
        withJSONObject: root, options: [.sortedKeys, .withoutEscapingSlashes])
    else { return nil }
    return Rewritten(body: Array(data), published: published)
  }
}

/// The sha256 each file was published with on an index page this server
/// rewrote, by the upstream URL its mirror fetches: the file's fetch
/// expects it, and is served with no request when the store holds an
/// object of that sha256. Kept in memory, at most ``limit`` URLs (all are
/// forgotten when more come: a page served again records its files again).
final class PublishedChecksums: Sendable {
  static let limit = 500_000
  private let table = Mutex<[String: Checksum]>([:])

  func record(_ published: [String: Checksum]) {
    guard !published.isEmpty else { return }
    table.withLock { table in
      if table.count + published.count > Self.limit { table.removeAll() }
      table.merge(published) { _, new in new }
    }
  }

  func checksum(for url: String) -> Checksum? { table.withLock { $0[url] } }
}
