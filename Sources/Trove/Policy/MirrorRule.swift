/// A pull-through mirror that `trove serve` serves (`trove config set
/// mirror.NAME UPSTREAM`, or `--mirror NAME=UPSTREAM` for one server):
/// `GET /m/NAME/PATH` is a fetch of `UPSTREAM/PATH` through the store.
/// Kept in the store's settings so that every server of the store serves
/// it without repeating it on each command line.
public struct MirrorRule: NamedRule {
  public static var setting: CachePolicy.Key { .mirror }
  public static var inPolicy: WritableKeyPath<CachePolicy, [MirrorRule]> { \.mirrors }

  /// The name in the server's paths: 1 to 64 lowercase letters, digits,
  /// `-`, `_` or `.`, starting with a letter or digit.
  public let name: String
  /// The URL the paths are appended to: `http://` or `https://`, no login,
  /// query or fragment, no trailing `/`.
  public let upstream: String

  public var rule: String { upstream }

  /// The mirror `name` of `upstream` (trailing `/`s dropped).
  ///
  /// - Throws: `.invalidArgument` naming the mirror, the value and what is
  ///   wrong: a name of other characters; an upstream that is not an
  ///   http:// or https:// URL with a host, or holds a space, a query, a
  ///   fragment or a login (`user:pw@`: the settings are no place for a
  ///   credential, `~/.netrc` is).
  public init(name: String, rule upstream: String) throws(TroveError) {
    guard Self.isName(name) else {
      throw TroveError(
        .invalidArgument,
        "invalid mirror name '\(Self.shown(name))': expected 1 to 64 lowercase letters, digits, '-', '_' or '.', starting with a letter or digit",
        value: name)
    }
    func refuse(_ why: String) -> TroveError {
      TroveError(
        .invalidArgument, "invalid upstream '\(Self.shown(upstream))' of mirror \(name): \(why)",
        value: upstream)
    }
    var url = upstream
    while url.hasSuffix("/") { url.removeLast() }
    let lowered = url.lowercased()
    guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://") else {
      throw refuse("expected an http:// or https:// URL")
    }
    let rest = url.drop { $0 != ":" }.dropFirst(3)
    let authority = rest.prefix { $0 != "/" }
    guard !authority.isEmpty,
      url.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != 0x3F && $0 != 0x23 })
    else {
      throw refuse("expected a host, and no space, query or fragment")
    }
    // A login would be logged and shown with every key: refused outright.
    guard !authority.contains("@") else {
      throw TroveError(
        .invalidArgument,
        "the upstream of mirror \(name) holds a login: give the credential to the origin another way (~/.netrc)",
        value: name)
    }
    self.name = name
    self.upstream = url
  }

  /// Whether `name` may name a mirror.
  public static func isName(_ name: String) -> Bool {
    let bytes = Array(name.utf8)
    guard (1...64).contains(bytes.count), isLowerAlphanumeric(bytes[0]) else { return false }
    return bytes.allSatisfy { isLowerAlphanumeric($0) || $0 == 0x2D || $0 == 0x5F || $0 == 0x2E }
  }

  private static func isLowerAlphanumeric(_ c: UInt8) -> Bool {
    (0x61...0x7A).contains(c) || (0x30...0x39).contains(c)
  }

  /// `text` as a message quotes it: escaped, at most 80 characters.
  private static func shown(_ text: String) -> String {
    let escaped = MessageText.escaped(text)
    return escaped.count > 80 ? String(escaped.prefix(77)) + "..." : escaped
  }
}
