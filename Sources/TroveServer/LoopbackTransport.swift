import CMicroHTTPD

#if canImport(Glibc)
  import Glibc
#endif

/// The TCP congestion control of the connections a loopback listener
/// accepts: Reno, whatever the host's default.
///
/// Between two processes of one machine there is no path for a congestion
/// control to model. A model that paces its sends (BBR, which hosts make
/// their default) meets the reordering loopback shows when both ends' CPUs
/// transmit, and slows a large body for nothing. Reno neither paces nor
/// models; it is the one algorithm every kernel has and lets any user
/// choose. Accepted sockets inherit it from the listening one. Only speed
/// depends on it, so a kernel that refuses leaves the default.
enum LoopbackTransport {
  static func apply(to daemon: OpaquePointer) {
    let socket = trove_mhd_listen_socket(daemon)
    guard socket >= 0 else { return }
    let name = Array("reno".utf8)
    _ = name.withUnsafeBytes {
      setsockopt(socket, Int32(IPPROTO_TCP), TCP_CONGESTION, $0.baseAddress, socklen_t($0.count))
    }
  }
}
