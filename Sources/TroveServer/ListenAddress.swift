#if canImport(Glibc)
  import Glibc
#endif

/// A `--listen` address: `ADDR:PORT` with a numeric IPv4 address, or
/// `[ADDR]:PORT` with an IPv6 one. No names are resolved: what a server
/// binds to is what was written.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
  /// The address as written, without brackets.
  public let host: String
  /// The port; 0 lets the kernel choose one (the URL printed names it).
  public let port: UInt16
  /// Whether it is IPv6.
  public let isIPv6: Bool
  private let bytes: [UInt8]

  /// The default: loopback, port 7780.
  public static let `default` = try! ListenAddress(parsing: "127.0.0.1:7780")

  /// An address that cannot be listened on, named in one line.
  public struct Invalid: Error, Sendable {
    public let message: String
  }

  /// Parses `text`.
  public init(parsing text: String) throws(Invalid) {
    func invalid(_ why: String) -> Invalid {
      Invalid(
        message:
          "invalid listen address '\(text)': \(why); expected ADDR:PORT such as 127.0.0.1:7780 or [::1]:7780"
      )
    }
    guard let colon = text.lastIndex(of: ":") else { throw invalid("no port") }
    var host = String(text[..<colon])
    let portText = text[text.index(after: colon)...]
    guard let port = UInt16(portText), portText.allSatisfy(\.isASCII) else {
      throw invalid("'\(portText)' is not a port from 0 to 65535")
    }
    let isIPv6 = host.hasPrefix("[") && host.hasSuffix("]")
    if isIPv6 { host = String(host.dropFirst().dropLast()) }
    var address = [UInt8](repeating: 0, count: 16)
    let parsed = inet_pton(isIPv6 ? AF_INET6 : AF_INET, host, &address)
    guard parsed == 1 else {
      throw invalid(
        isIPv6
          ? "'\(host)' is not an IPv6 address"
          : "'\(host)' is not an IPv4 address (IPv6 goes in brackets)")
    }
    self.host = host
    self.port = port
    self.isIPv6 = isIPv6
    bytes = Array(address.prefix(isIPv6 ? 16 : 4))
  }

  /// Whether only this machine can reach it: 127.0.0.0/8 or ::1.
  public var isLoopback: Bool {
    isIPv6 ? bytes == [UInt8](repeating: 0, count: 15) + [1] : bytes[0] == 127
  }

  /// `ADDR:PORT` or `[ADDR]:PORT`.
  public var description: String { url(port: port).dropFirst(7).dropLast().description }

  /// The base URL of a server listening here on `port`.
  public func url(port: UInt16) -> String {
    "http://" + (isIPv6 ? "[\(host)]" : host) + ":\(port)/"
  }

  /// Calls `body` with the address as a `sockaddr` and its length.
  func withSocketAddress<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
    if isIPv6 {
      var address = sockaddr_in6()
      address.sin6_family = sa_family_t(AF_INET6)
      address.sin6_port = port.bigEndian
      withUnsafeMutableBytes(of: &address.sin6_addr) { $0.copyBytes(from: bytes) }
      return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          body($0, socklen_t(MemoryLayout<sockaddr_in6>.size))
        }
      }
    }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    withUnsafeMutableBytes(of: &address.sin_addr) { $0.copyBytes(from: bytes) }
    return withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        body($0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
  }
}
