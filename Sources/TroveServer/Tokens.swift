import CCrypto
import Foundation

/// The bearer tokens a server accepts (`--token-file`): one a line, blank
/// lines and `#` comments skipped. Only their SHA-256 digests are kept, and
/// a presented token is hashed and compared with every one in constant
/// time (`CRYPTO_memcmp`), so neither its length nor its first differing
/// byte shows in the time an answer takes. A token never appears in a
/// message or a log line.
public struct Tokens: Sendable {
  private let digests: [[UInt8]]

  /// A token file that cannot be used, named in one line (the tokens are not quoted).
  public struct Invalid: Error, Sendable {
    public let message: String
  }

  /// The longest token file read.
  static let maximumFileSize = 1 << 20

  /// Reads the tokens of the file at `path`: a regular file that others
  /// cannot read, holding at least one token of 16 or more visible
  /// ASCII characters.
  public init(contentsOf path: String) throws(Invalid) {
    func invalid(_ why: String) -> Invalid {
      Invalid(message: "token file '\(path)' \(why)")
    }
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
    guard fd >= 0 else { throw invalid("cannot be opened: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var status = stat()
    guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
      throw invalid("is not a regular file")
    }
    guard status.st_mode & 0o007 == 0 else {
      throw invalid(
        "can be read by others (mode \(String(status.st_mode & 0o777, radix: 8))): chmod o-rwx it")
    }
    guard status.st_size <= Self.maximumFileSize else { throw invalid("is larger than 1 MiB") }
    var bytes = [UInt8](repeating: 0, count: Int(status.st_size))
    var filled = 0
    while filled < bytes.count {
      let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, $0.count - filled) }
      guard n > 0 else { throw invalid("cannot be read: \(String(cString: strerror(errno)))") }
      filled += n
    }
    var digests: [[UInt8]] = []
    for (number, line) in bytes.split(separator: 0x0A, omittingEmptySubsequences: false)
      .enumerated()
    {
      var token = line
      while let last = token.last, last == 0x0D || last == 0x20 || last == 0x09 {
        token.removeLast()
      }
      while let first = token.first, first == 0x20 || first == 0x09 { token.removeFirst() }
      if token.isEmpty || token.first == UInt8(ascii: "#") { continue }
      guard token.allSatisfy({ (0x21...0x7E).contains($0) }) else {
        throw invalid("line \(number + 1): a token is visible ASCII characters without spaces")
      }
      guard token.count >= 16 else {
        throw invalid("line \(number + 1): a token is at least 16 characters")
      }
      digests.append(Self.sha256(Array(token)))
    }
    guard !digests.isEmpty else { throw invalid("holds no token") }
    self.digests = digests
  }

  /// Whether an `Authorization` header value carries one of the tokens.
  public func accepts(authorization: String?) -> Bool {
    guard let authorization else { return false }
    let scheme = "bearer "
    guard authorization.utf8.count > scheme.utf8.count,
      authorization.prefix(scheme.count).lowercased() == scheme
    else { return false }
    return matches(Array(authorization.utf8.dropFirst(scheme.utf8.count)))
  }

  /// Whether a `Proxy-Authorization` header value carries one of the
  /// tokens: `Bearer TOKEN`, or `Basic` with the token as the password
  /// (any user name), which is what a client sends for a proxy URL
  /// `http://USER:TOKEN@HOST:PORT` (pip, urllib, curl).
  public func accepts(proxyAuthorization: String?) -> Bool {
    guard let value = proxyAuthorization else { return false }
    let scheme = "basic "
    guard value.utf8.count > scheme.utf8.count, value.prefix(scheme.count).lowercased() == scheme
    else { return accepts(authorization: value) }
    guard let decoded = Data(base64Encoded: String(value.dropFirst(scheme.count))),
      let colon = decoded.firstIndex(of: 0x3A)
    else { return false }
    return matches(Array(decoded[decoded.index(after: colon)...]))
  }

  /// Whether `token` is one of the tokens.
  private func matches(_ token: [UInt8]) -> Bool {
    let presented = Self.sha256(token)
    var matched = false
    for digest in digests {
      // Every token is compared, whichever matches.
      let equal = CRYPTO_memcmp(digest, presented, 32) == 0
      matched = matched || equal
    }
    return matched
  }

  private static func sha256(_ bytes: [UInt8]) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 32)
    var length: UInt32 = 0
    _ = EVP_Digest(bytes, bytes.count, &out, &length, EVP_sha256(), nil)
    return out
  }
}
