import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A host and port a proxy request goes to: checked, the host in lower
/// case, an IPv6 address without its brackets.
public struct ProxyAuthority: Sendable, Hashable, CustomStringConvertible {
  /// A name (letters, digits, `-`, `.`), an IPv4 or an IPv6 address.
  public let host: String
  public let port: Int

  /// `HOST:PORT`, `[ADDR]:PORT` for IPv6.
  public var description: String { hostInURL + ":\(port)" }

  /// The host as a URL writes it.
  var hostInURL: String { host.contains(":") ? "[\(host)]" : host }

  /// Checks `host` (brackets allowed around an IPv6 address) and `port`;
  /// nil when either cannot be one.
  init?(host: String, port: Int) {
    guard (1...65535).contains(port) else { return nil }
    var host = host.lowercased()
    if host.hasPrefix("[") && host.hasSuffix("]") {
      host = String(host.dropFirst().dropLast())
      var address = [UInt8](repeating: 0, count: 16)
      guard inet_pton(AF_INET6, host, &address) == 1 else { return nil }
    } else {
      guard (1...253).contains(host.utf8.count),
        host.utf8.allSatisfy({
          (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D || $0 == 0x2E
        })
      else { return nil }
    }
    self.host = host
    self.port = port
  }
}

/// The request targets of a forward proxy, parsed by Foundation's URL
/// parser once their bytes are known to be a URL's:
///
/// ```
/// GET http://HOST[:PORT]/PATH[?QUERY]   .proxy   fetched through the store
/// CONNECT HOST:PORT                     .tunnel  bytes relayed, not cached
/// ```
enum ProxyTarget {
  /// Targets longer than this are refused.
  static let maximumLength = 8192

  /// An absolute-form target, as the client sent it (query included):
  /// `http://` only, no login, no fragment. The URL fetched keeps the
  /// path and query as sent, and drops the default port.
  static func absolute(_ target: String) -> Result<Route, Route.Refusal> {
    guard let components = components(target) else {
      return .failure(.malformed("'\(Route.shown(Substring(target)))' is not a URL"))
    }
    guard components.scheme?.lowercased() == "http" else {
      return .failure(
        .malformed(
          "only http:// URLs are proxied: '\(Route.shown(Substring(target)))' (https:// goes through CONNECT)"
        ))
    }
    guard components.percentEncodedUser == nil, components.percentEncodedPassword == nil else {
      return .failure(.malformed("a login in a proxied URL is refused: none is passed on"))
    }
    guard components.fragment == nil else {
      return .failure(.malformed("a proxied URL has no fragment ('#')"))
    }
    guard let host = components.percentEncodedHost,
      let authority = ProxyAuthority(host: host, port: components.port ?? 80)
    else {
      return .failure(
        .malformed("'\(Route.shown(Substring(target)))' does not name a host and a port"))
    }
    let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
    let query = components.percentEncodedQuery.flatMap { $0.isEmpty ? nil : "?" + $0 } ?? ""
    let port = authority.port == 80 ? "" : ":\(authority.port)"
    return .success(
      .proxy(url: "http://" + authority.hostInURL + port + path + query, authority: authority))
  }

  /// CONNECT's authority-form target: `HOST:PORT`, the port required.
  static func tunnel(_ target: String) -> Result<Route, Route.Refusal> {
    guard !target.contains("/"), !target.contains("@"), let components = components("//" + target),
      components.percentEncodedPath.isEmpty, components.percentEncodedQuery == nil,
      let port = components.port, let host = components.percentEncodedHost,
      let authority = ProxyAuthority(host: host, port: port)
    else {
      return .failure(
        .malformed(
          "'\(Route.shown(Substring(target)))' is not a CONNECT target: expected HOST:PORT"))
    }
    return .success(.tunnel(authority))
  }

  /// Foundation's parse of `text`, once every byte is printable ASCII and
  /// each `%` starts an escape: the parser would otherwise encode what it
  /// finds wrong, and the URL fetched would not be the one sent.
  fileprivate static func components(_ text: String) -> URLComponents? {
    let bytes = Array(text.utf8)
    guard (1...maximumLength).contains(bytes.count),
      bytes.allSatisfy({ (0x21...0x7E).contains($0) && $0 != 0x5C })
    else { return nil }
    for (index, byte) in bytes.enumerated() where byte == 0x25 {
      guard index + 2 < bytes.count, bytes[index + 1].isHexDigit, bytes[index + 2].isHexDigit
      else { return nil }
    }
    return URLComponents(string: text)
  }
}

/// A `--proxy-allow` entry: a host, any port, or one port of a host.
public struct ProxyAllowance: Sendable, Hashable, CustomStringConvertible {
  public let host: String
  /// Nil for any port.
  public let port: Int?

  /// A `--proxy-allow` value that cannot be one, named in one line.
  public struct Invalid: Error, Sendable {
    public let message: String
  }

  /// Parses `HOST`, `HOST:PORT`, `[ADDR]` or `[ADDR]:PORT`.
  public init(parsing text: String) throws(Invalid) {
    let invalid = Invalid(
      message:
        "invalid --proxy-allow '\(Route.shown(Substring(text)))': expected HOST or HOST:PORT (example.org, 127.0.0.1:8080, [::1]:8080)"
    )
    guard !text.contains("/"), !text.contains("@"),
      let components = ProxyTarget.components("//" + text),
      components.percentEncodedPath.isEmpty, components.percentEncodedQuery == nil,
      let host = components.percentEncodedHost,
      let authority = ProxyAuthority(host: host, port: components.port ?? 80)
    else { throw invalid }
    self.host = authority.host
    port = components.port
  }

  /// Whether a request to `authority` may go through.
  func allows(_ authority: ProxyAuthority) -> Bool {
    host == authority.host && (port == nil || port == authority.port)
  }

  public var description: String {
    let shown = host.contains(":") ? "[\(host)]" : host
    return port.map { shown + ":\($0)" } ?? shown
  }
}

extension UInt8 {
  fileprivate var isHexDigit: Bool {
    (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
  }
}
