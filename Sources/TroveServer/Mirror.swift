import Trove

/// A pull-through mirror (`--mirror NAME=UPSTREAM`): `GET /m/NAME/PATH` is a
/// fetch of `UPSTREAM/PATH` through the store.
public struct Mirror: Sendable, Hashable {
  /// The name in the server's paths: 1 to 64 lowercase letters, digits,
  /// `-`, `_` or `.`, starting with a letter or digit.
  public let name: String
  /// The URL the paths are appended to: `http://` or `https://`, no login,
  /// query or fragment, no trailing `/`.
  public let upstream: String

  /// Why a `--mirror` value cannot be used, in one line.
  public struct Invalid: Error, Sendable {
    public let message: String
  }

  /// A mirror of `upstream` named `name`, checked as ``MirrorRule`` checks
  /// `config set mirror.NAME`.
  ///
  /// - Throws: ``Invalid`` naming the value and what is wrong with it.
  public init(name: String, upstream: String) throws(Invalid) {
    do throws(TroveError) {
      self.init(try MirrorRule(name: name, rule: upstream))
    } catch {
      throw Invalid(message: error.message)
    }
  }

  /// The mirror a store's settings name.
  public init(_ rule: MirrorRule) {
    name = rule.name
    upstream = rule.upstream
  }

  /// `NAME=UPSTREAM`, as `--mirror` takes it.
  public init(parsing text: String) throws(Invalid) {
    guard let equals = text.firstIndex(of: "=") else {
      throw Invalid(
        message:
          "invalid --mirror '\(Route.shown(Substring(text)))': expected NAME=UPSTREAM (pypi=https://pypi.org)"
      )
    }
    try self.init(
      name: String(text[..<equals]), upstream: String(text[text.index(after: equals)...]))
  }

  /// The URL fetched for a request's path under this mirror, checked by
  /// ``MirrorPath``.
  func url(of path: MirrorPath) -> String { upstream + "/" + path.encoded }

  static func isName(_ name: String) -> Bool { MirrorRule.isName(name) }
}

/// The path of a mirror request after `/m/NAME/`, checked and put back in
/// one canonical percent-encoded form; never joined onto the file system.
///
/// The rules: the path is taken as the client sent it (before any
/// decoding), its query dropped. Each `/`-separated segment is
/// percent-decoded once; a segment that is then empty (but the last: a
/// trailing `/` is kept), `.` or `..`, or holds `/`, `?`, `#`, `\`, a
/// control character or a byte that is not UTF-8 is refused. Every byte
/// but letters, digits and `-._~!$&'()*+,;=:@` is encoded again as
/// `%XX`, so `a%2Fb` cannot become a second segment upstream, nor `%3F` a
/// query.
public struct MirrorPath: Equatable, Sendable {
  /// The path as fetched, percent-encoded: `simple/pkg/`.
  public let encoded: String

  /// Paths longer than this are refused.
  static let maximumLength = 4096

  /// Parses `raw`, the part of the request target after `/m/NAME/`,
  /// without its query.
  public init(parsing raw: Substring) throws(Route.Refusal) {
    guard raw.utf8.count <= Self.maximumLength else {
      throw .malformed("the mirror path is longer than \(Self.maximumLength) bytes")
    }
    guard !raw.isEmpty else {
      encoded = ""
      return
    }
    let segments = raw.split(separator: "/", omittingEmptySubsequences: false)
    var encoded: [String] = []
    for (index, segment) in segments.enumerated() {
      guard let bytes = Self.percentDecoded(segment) else {
        throw .malformed("'\(Route.shown(segment))' has a '%' not followed by two hex digits")
      }
      let isLast = index == segments.count - 1
      if bytes.isEmpty {
        guard isLast, index > 0 else {
          throw .malformed("the mirror path '\(Route.shown(raw))' has an empty segment")
        }
        encoded.append("")
        continue
      }
      guard bytes != [0x2E], bytes != [0x2E, 0x2E] else {
        throw .malformed("the mirror path '\(Route.shown(raw))' has a '.' or '..' segment")
      }
      guard
        !bytes.contains(where: {
          $0 < 0x20 || $0 == 0x7F || $0 == 0x2F || $0 == 0x3F || $0 == 0x23 || $0 == 0x5C
        }), String(validating: bytes, as: UTF8.self) != nil
      else {
        throw .malformed(
          "'\(Route.shown(segment))' decodes to a control character, '/', '?', '#', '\\' or bytes that are not UTF-8"
        )
      }
      encoded.append(Self.percentEncoded(bytes))
    }
    self.encoded = encoded.joined(separator: "/")
  }

  private static func percentDecoded(_ text: Substring) -> [UInt8]? {
    var out: [UInt8] = []
    var bytes = text.utf8.makeIterator()
    while let byte = bytes.next() {
      guard byte == 0x25 else {
        out.append(byte)
        continue
      }
      guard let high = bytes.next().flatMap(hexValue), let low = bytes.next().flatMap(hexValue)
      else { return nil }
      out.append(high << 4 | low)
    }
    return out
  }

  private static func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case 0x30...0x39: return c - 0x30
    case 0x41...0x46: return c - 0x41 + 10
    case 0x61...0x66: return c - 0x61 + 10
    default: return nil
    }
  }

  /// The bytes left as they are in a segment: RFC 3986's unreserved
  /// characters, sub-delimiters, `:` and `@`.
  private static let kept = Set("-._~!$&'()*+,;=:@".utf8)

  private static func percentEncoded(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789ABCDEF".utf8)
    var out: [UInt8] = []
    for byte in bytes {
      if (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte)
        || (0x61...0x7A).contains(byte) || kept.contains(byte)
      {
        out.append(byte)
      } else {
        out += [0x25, digits[Int(byte >> 4)], digits[Int(byte & 15)]]
      }
    }
    return String(decoding: out, as: UTF8.self)
  }
}
