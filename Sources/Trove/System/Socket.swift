import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A connected TCP socket: a thin, typed face over the descriptor, for the
/// Redis client. Resolving the name and connecting each wait at most a
/// given time; every later read or write fails (EAGAIN) when the peer is
/// silent for longer than the stall limit (`SO_RCVTIMEO`, `SO_SNDTIMEO`).
/// A limit on the rate of a whole reply is the caller's policy. Owned:
/// ``close()`` once.
struct Socket: Sendable {
  let rawValue: Int32

  /// Resolves `host` (`getaddrinfo(3)`, waiting at most `resolveTimeout`
  /// seconds) and connects to the first address that answers within
  /// `timeout` seconds: a non-blocking `connect(2)` and `poll(2)`. Then
  /// sets the stall limit and `TCP_NODELAY`; a failure of any of these
  /// calls (`fcntl`, `setsockopt`, `getsockopt`) is thrown, naming it.
  static func connect(
    host: String, port: Int, resolveTimeout: Double, timeout: Double, stall: Double
  ) throws(SystemCallError) -> Socket {
    let list = try resolve(host: host, port: port, timeout: resolveTimeout)
    defer { freeaddrinfo(list) }
    var lastError = SystemCallError("connect", Errno(rawValue: ECONNREFUSED))
    var entry: UnsafeMutablePointer<addrinfo>? = list
    while let current = entry {
      entry = current.pointee.ai_next
      let fd = socket(
        current.pointee.ai_family, current.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue),
        current.pointee.ai_protocol)
      guard fd >= 0 else {
        lastError = SystemCallError("socket", .current)
        continue
      }
      do throws(SystemCallError) {
        let flags = try Sys.call("fcntl") { fcntl(fd, F_GETFL) }
        _ = try Sys.call("fcntl") { fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
        if Glibc.connect(fd, current.pointee.ai_addr, current.pointee.ai_addrlen) != 0 {
          guard errno == EINPROGRESS else { throw SystemCallError("connect", .current) }
          var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
          let ready = try Sys.call("poll") { poll(&poller, 1, Int32(timeout * 1000)) }
          guard ready > 0 else { throw SystemCallError("connect", Errno(rawValue: ETIMEDOUT)) }
          var failure: Int32 = 0
          var length = socklen_t(MemoryLayout<Int32>.size)
          _ = try Sys.call("getsockopt") { getsockopt(fd, SOL_SOCKET, SO_ERROR, &failure, &length) }
          guard failure == 0 else { throw SystemCallError("connect", Errno(rawValue: failure)) }
        }
        _ = try Sys.call("fcntl") { fcntl(fd, F_SETFL, flags) }
        var limit = timeval(tv_sec: Int(stall), tv_usec: Int((stall - stall.rounded(.down)) * 1e6))
        let size = socklen_t(MemoryLayout<timeval>.size)
        _ = try Sys.call("setsockopt") { setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, size) }
        _ = try Sys.call("setsockopt") { setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, size) }
        var one: Int32 = 1
        _ = try Sys.call("setsockopt") {
          setsockopt(
            fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        return Socket(rawValue: fd)
      } catch {
        Glibc.close(fd)
        lastError = error
      }
    }
    throw lastError
  }

  /// What a resolving thread leaves for the caller.
  private struct Resolution: @unchecked Sendable {
    /// `getaddrinfo`'s status and list, once it returned.
    var result: (status: Int32, error: Int32, list: UnsafeMutablePointer<addrinfo>?)?
    /// The caller stopped waiting: the thread frees what it gets.
    var abandoned = false
  }

  /// The ``Resolution`` the caller and the resolving thread share.
  private final class SharedResolution: Sendable {
    let state = Mutex(Resolution())
  }

  /// `getaddrinfo(3)` of `host`:`port` (TCP, any family) on a thread of its
  /// own, waited for at most `timeout` seconds (ETIMEDOUT after): the
  /// resolver's own timeouts are seconds per server and try. A list that
  /// comes after the wait is freed by that thread. The caller frees the
  /// list returned (`freeaddrinfo`).
  private static func resolve(host: String, port: Int, timeout: Double)
    throws(SystemCallError) -> UnsafeMutablePointer<addrinfo>
  {
    let shared = SharedResolution()
    let done = DispatchSemaphore(value: 0)
    let service = String(port)
    let work: @Sendable () -> Void = {
      var hints = addrinfo()
      hints.ai_family = AF_UNSPEC
      hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
      var list: UnsafeMutablePointer<addrinfo>?
      let status = getaddrinfo(host, service, &hints, &list)
      let error = errno
      let late = shared.state.withLock { (resolution) -> Bool in
        guard !resolution.abandoned else { return true }
        resolution.result = (status, error, list)
        return false
      }
      if late, let list { freeaddrinfo(list) }
      done.signal()
    }
    DispatchQueue.global().async(execute: work)
    _ = done.wait(timeout: .now() + .milliseconds(Int(timeout * 1000)))
    let result = shared.state.withLock { (resolution) in
      if resolution.result == nil { resolution.abandoned = true }
      return resolution.result
    }
    guard let result else { throw SystemCallError("getaddrinfo", Errno(rawValue: ETIMEDOUT)) }
    guard result.status == 0, let list = result.list else {
      if let list = result.list { freeaddrinfo(list) }
      throw SystemCallError(
        "getaddrinfo", Errno(rawValue: result.status == EAI_SYSTEM ? result.error : ENOENT))
    }
    return list
  }

  /// Closes it. `close(2)`.
  func close() { _ = Glibc.close(rawValue) }

  /// Sends all of `bytes`. `send(2)` with `MSG_NOSIGNAL` (a closed peer is
  /// EPIPE, not a signal).
  func sendAll(_ bytes: UnsafeRawBufferPointer) throws(SystemCallError) {
    var sent = 0
    while sent < bytes.count {
      let n = try Sys.call("send") {
        send(rawValue, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
      }
      sent += n
    }
  }

  /// Sends all of `bytes`, as `sendAll(_:)` does.
  func sendAll(_ bytes: [UInt8]) throws(SystemCallError) {
    var sent = 0
    while sent < bytes.count {
      let n = try Sys.call("send") {
        bytes.withUnsafeBytes {
          send(rawValue, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL))
        }
      }
      sent += n
    }
  }

  /// Receives up to `buffer.count` bytes; 0 when the peer closed. `recv(2)`.
  func receive(into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Int {
    try Sys.call("recv") { recv(rawValue, buffer.baseAddress, buffer.count, 0) }
  }
}
