import Foundation

/// A URL's origin: its scheme, host and port (RFC 6454). What a user
/// gives for one origin — a header, a login — goes to that origin only.
struct HTTPOrigin: Hashable {
  var scheme: String
  var host: String
  var port: Int

  /// The origin of `url`, or nil when it has no scheme or host.
  init?(_ url: String) {
    guard let components = URLComponents(string: url),
      let scheme = components.scheme?.lowercased(),
      let host = components.host?.lowercased(), !host.isEmpty
    else { return nil }
    self.scheme = scheme
    self.host = host
    switch (components.port, scheme) {
    case (let port?, _): self.port = port
    case (nil, "https"): self.port = 443
    case (nil, "http"): self.port = 80
    default: return nil
    }
  }

  /// Whether the host is this machine (`localhost`, 127.0.0.0/8, `::1`):
  /// plain HTTP to it crosses no network.
  var isLoopback: Bool { Self.isLoopback(host: host) }

  /// Whether `host` names this machine: `localhost`, or an IP literal in
  /// 127.0.0.0/8 or `::1`. A name that only looks like one
  /// (`127.example.com`) is anyone's.
  static func isLoopback(host: String) -> Bool {
    var bare = host.lowercased()
    if bare.hasPrefix("["), bare.hasSuffix("]") { bare = String(bare.dropFirst().dropLast()) }
    return bare == "localhost" || IPAddress(literal: bare)?.isLoopback == true
  }

  /// Whether one of `entries` (`HOST` or `HOST:PORT`, lower case, an IPv6
  /// address in brackets) names this origin. O(entries).
  func isNamed(by entries: [String]) -> Bool {
    entries.contains(host) || entries.contains("\(host):\(port)")
  }

  /// Whether a credential sent here would cross a network in clear.
  var exposesCredentials: Bool { scheme == "http" && !isLoopback }

  /// Whether `~/.netrc`'s login for the host of `url` may go with a
  /// request to it: never in clear over a network (plain http:// to a
  /// host that is not this machine), nor to a URL with no origin.
  static func mayUseNetrc(_ url: String) -> Bool {
    guard let origin = HTTPOrigin(url) else { return false }
    return !origin.exposesCredentials
  }

  /// What a fetch does with a redirect from `from` to `to`.
  enum Redirect: Equatable {
    /// Followed; the user's headers and login go along only to the same
    /// origin.
    case follow(sameOrigin: Bool)
    /// Not followed, for this reason.
    case refuse(String)
  }

  /// Whether a redirect from `from` to `to` is followed: only to http://
  /// or https://, and never from https:// down to plain http://, which
  /// would hand the rest of the exchange to anyone on the path.
  static func redirect(from: String, to: String) -> Redirect {
    let scheme = to.prefix { $0 != ":" }.lowercased()
    guard scheme == "http" || scheme == "https", let target = HTTPOrigin(to) else {
      return .refuse(
        "redirected to '\(URLUserinfo.split(to).url)', which is not an http:// or https:// URL")
    }
    let source = HTTPOrigin(from)
    if source?.scheme == "https" && target.scheme == "http" {
      return .refuse(
        "redirected from https:// to plain http:// ('\(URLUserinfo.split(to).url)')")
    }
    return .follow(sameOrigin: source == target)
  }
}
