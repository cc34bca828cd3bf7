import Foundation

/// The userinfo of a URL's authority (`http://alice:pw@host/x`): a
/// credential, which no key, record, file or message may hold. The
/// authority runs from `://` to the first `/`, `?` or `#`, and its
/// userinfo ends at its last `@`, so a password holding an `@` is cut
/// whole rather than left half in place.
enum URLUserinfo {
  /// Where `url`'s userinfo and the `@` ending it are, if it has any.
  /// Looked for in the UTF-8 bytes: every delimiter is ASCII, and a fetch
  /// asks this of each URL several times.
  static func range(in url: String) -> Range<String.Index>? {
    let bytes = url.utf8
    guard let authority = authorityStart(of: url) else { return nil }
    let rest = bytes[authority...]
    let end =
      rest.firstIndex {
        $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#")
      }
      ?? rest.endIndex
    guard let at = rest[..<end].lastIndex(of: UInt8(ascii: "@")) else { return nil }
    return authority..<bytes.index(after: at)
  }

  /// Where `url`'s authority starts: after its first `://`. A plain scan
  /// of the UTF-8 bytes: the generic `firstRange(of:)` cost more than all
  /// else a fetch does with its URL's text.
  static func authorityStart(of url: String) -> String.Index? {
    let bytes = url.utf8
    let colon = UInt8(ascii: ":")
    let slash = UInt8(ascii: "/")
    var i = bytes.startIndex
    while i != bytes.endIndex {
      let next = bytes.index(after: i)
      if bytes[i] == colon, next != bytes.endIndex, bytes[next] == slash {
        let last = bytes.index(after: next)
        if last != bytes.endIndex, bytes[last] == slash { return bytes.index(after: last) }
      }
      i = next
    }
    return nil
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

  /// `url` with its userinfo, if any, replaced by `***`: all of it, as a
  /// token given as the user name is as secret as a password.
  static func redacted(_ url: String) -> String {
    guard var range = range(in: url) else { return url }
    range = range.lowerBound..<url.index(before: range.upperBound)
    var shown = url
    shown.replaceSubrange(range, with: "***")
    return shown
  }
}

extension URLUserinfo {
  /// Whether `key` is an http:// or https:// URL: only there is the text
  /// before an `@` a login (`npm://lodash@4` names a version).
  static func isHTTP(_ key: String) -> Bool {
    // `| 0x20` lowercases an ASCII letter and makes no other byte one.
    let scheme = key.utf8.prefix { $0 != UInt8(ascii: ":") }.lazy.map { $0 | 0x20 }
    return (scheme.elementsEqual("http".utf8) || scheme.elementsEqual("https".utf8))
      && authorityStart(of: key) != nil
  }

  /// `key` as it may be shown: an http(s) URL holding a login (older
  /// versions kept it in the key) with the login as `***`.
  static func shown(key: String) -> String {
    isHTTP(key) ? redacted(key) : key
  }

  /// `key` as it may leave the store (an export): an http(s) URL without
  /// its login, the key a fetch of it makes.
  static func exported(key: String) -> String {
    isHTTP(key) ? split(key).url : key
  }
}

extension KeyBinding {
  /// ``key`` as it may be printed: a login in a URL key, which older
  /// versions kept, shown as `***`.
  public var shownKey: String { URLUserinfo.shown(key: key) }
}

extension KeyOrigin {
  /// ``finalURL`` as it may be printed, its login (if any) shown as `***`.
  public var shownFinalURL: String? { finalURL.map(URLUserinfo.redacted) }
  /// ``servedBy`` as it may be printed: a fetch never records a login in
  /// it, but the journal a rebuild reads is a file anyone sharing the
  /// store could have written.
  public var shownServedBy: String? { servedBy.map(URLUserinfo.redacted) }
}

extension RecordedObject {
  /// ``keys`` as they may be printed: a login in a URL key, which older
  /// versions kept, shown as `***`.
  public var shownKeys: [String] { keys.map(URLUserinfo.shown(key:)) }
}
