#if canImport(Glibc)
  import Glibc
#endif

/// An IP address written as a literal (`127.0.0.1`, `::1`), parsed by
/// `inet_pton(3)`: a host name, however it looks, is not one.
enum IPAddress: Equatable {
  case v4([UInt8])
  case v6([UInt8])

  /// The address `text` spells, or nil when it is not an IPv4 dotted quad
  /// or an IPv6 literal (without brackets).
  init?(literal text: String) {
    var v4 = in_addr()
    if inet_pton(AF_INET, text, &v4) == 1 {
      self = .v4(withUnsafeBytes(of: &v4) { Array($0) })
      return
    }
    var v6 = in6_addr()
    if inet_pton(AF_INET6, text, &v6) == 1 {
      self = .v6(withUnsafeBytes(of: &v6) { Array($0) })
      return
    }
    return nil
  }

  /// Whether it is this machine's: 127.0.0.0/8 or `::1`.
  var isLoopback: Bool {
    switch self {
    case .v4(let bytes): return bytes.first == 127
    case .v6(let bytes): return bytes == [UInt8](repeating: 0, count: 15) + [1]
    }
  }
}
