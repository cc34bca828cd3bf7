import Foundation

/// The userinfo of a URL's authority (`http://alice:pw@host/x`): a
/// credential, which no key, record, file or message may hold. The
/// authority runs from `://` to the first `/`, `?` or `#`, and its
/// userinfo ends at its last `@`, so a password holding an `@` is cut
/// whole rather than left half in place.
enum URLUserinfo {
  /// Where `url`'s userinfo and the `@` ending it are, if it has any.
  static func range(in url: String) -> Range<String.Index>? {
    guard let scheme = url.range(of: "://") else { return nil }
    let rest = url[scheme.upperBound...]
    let end = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
    guard let at = rest[..<end].lastIndex(of: "@") else { return nil }
    return scheme.upperBound..<url.index(after: at)
  }

  /// `url` without its userinfo, and the userinfo as a login
  /// (`user:password`, percent-decoded), when it has one.
  static func split(_ url: String) -> (url: String, login: String?) {
    guard let range = range(in: url) else { return (url, nil) }
    var stripped = url
    stripped.removeSubrange(range)
    let info = url[range.lowerBound..<url.index(before: range.upperBound)]
    let parts = info.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
    let decoded = parts.map { String($0).removingPercentEncoding ?? String($0) }
    return (stripped, decoded.joined(separator: ":"))
  }

  /// `url` with the password of its userinfo, if any, replaced by `***`.
  static func redacted(_ url: String) -> String {
    guard let range = range(in: url) else { return url }
    let info = url[range.lowerBound..<url.index(before: range.upperBound)]
    guard let colon = info.firstIndex(of: ":") else { return url }
    return String(url[...colon]) + "***" + String(url[url.index(before: range.upperBound)...])
  }
}
