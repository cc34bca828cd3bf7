import CMicroHTTPD
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A `CONNECT` tunnel: bytes relayed both ways between the client and
/// `HOST:PORT`, never looked at or cached.
///
/// libmicrohttpd does not tunnel: it hands a connection over only after a
/// `101 Switching Protocols` (its upgrade), which no proxy client accepts
/// in answer to `CONNECT`, and it refuses or ends any `2xx` answer to one.
/// So the connection is suspended (libmicrohttpd then neither reads nor
/// writes its socket, nor times it out) while the tunnel connects; a
/// failure is answered by libmicrohttpd once resumed (502, 504), as any
/// response. Once connected, the tunnel writes the `200` status line
/// itself, on its own duplicate of the socket, relays until either side
/// ends or stays idle too long, and resumes the connection, which
/// libmicrohttpd then closes. Bytes a client sends before it reads the
/// `200` (none of curl, pip or Python's `http.client` does) may have been
/// read by libmicrohttpd with the request's head, and are lost.
final class Tunnel: @unchecked Sendable {
  /// How a tunnel ended.
  enum Outcome: Sendable {
    /// It never opened: answered with a status and one line.
    case refused(Int, String)
    /// It opened: bytes sent upstream and to the client.
    case relayed(up: Int64, down: Int64)
    /// The server stopped before it opened (503).
    case stopped
  }

  let connection: OpaquePointer
  let authority: ProxyAuthority
  /// A duplicate of the client connection's socket: this tunnel's own,
  /// valid even after libmicrohttpd closes its descriptor.
  private let client: Int32
  private struct State {
    var outcome: Outcome?
    var resumed = false
    var relaying = false
  }
  private let state = Mutex(State())
  private let stopping = Atomic<Bool>(false)

  /// A tunnel for `connection`, nil when its socket cannot be had.
  init?(connection: OpaquePointer, authority: ProxyAuthority) {
    let socket = trove_mhd_socket(connection)
    guard socket >= 0 else { return nil }
    let own = fcntl(socket, F_DUPFD_CLOEXEC, 0)
    guard own >= 0 else { return nil }
    self.connection = connection
    self.authority = authority
    client = own
  }

  /// What the resumed connection is answered with; nil until it ends.
  var outcome: Outcome? { state.withLock { $0.outcome } }

  /// Connects, relays and resumes the connection: on a thread of its own.
  /// `version` is the request's (`HTTP/1.1`), `connectTimeout` in seconds,
  /// `idleTimeout` the seconds without a byte either way that end it.
  func run(version: String, connectTimeout: Double, idleTimeout: Int, metrics: Metrics) {
    let outcome: Outcome
    switch connect(timeout: connectTimeout) {
    case .failure(let refusal):
      outcome = .refused(refusal.status, refusal.line)
    case .success(let upstream):
      if state.withLock({ state in
        guard !state.resumed else { return false }
        state.relaying = true
        return true
      }) {
        metrics.activeTunnels.add(1, ordering: .relaxed)
        let established =
          (version == "HTTP/1.0" ? "HTTP/1.0" : "HTTP/1.1")
          + " 200 Connection established\r\n\r\n"
        let (up, down) = relay(upstream, greeting: Array(established.utf8), idle: idleTimeout)
        metrics.activeTunnels.subtract(1, ordering: .relaxed)
        metrics.recordTunnel(up: up, down: down)
        outcome = .relayed(up: up, down: down)
      } else {
        outcome = .stopped
      }
      close(upstream)
    }
    close(client)
    state.withLock {
      guard !$0.resumed else { return }
      $0.outcome = outcome
      $0.resumed = true
      trove_mhd_resume_connection(connection)
    }
  }

  /// Ends the tunnel soon (the server stops): a relay within a quarter
  /// second; one not yet relaying (resolving a name, connecting) has its
  /// connection resumed now, answered 503.
  func stop() {
    stopping.store(true, ordering: .releasing)
    state.withLock {
      guard !$0.resumed, !$0.relaying else { return }
      $0.outcome = .stopped
      $0.resumed = true
      trove_mhd_resume_connection(connection)
    }
  }

  /// Whether the connection has been resumed.
  var isResumed: Bool { state.withLock { $0.resumed } }

  // MARK: Connecting

  private struct Refusal: Error {
    let status: Int
    let line: String
  }

  /// A connected, non-blocking socket to the authority: each address its
  /// name resolves to in turn, until `timeout` seconds have passed.
  private func connect(timeout: Double) -> Result<Int32, Refusal> {
    var hints = addrinfo()
    hints.ai_family = AF_UNSPEC
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    hints.ai_flags = AI_NUMERICSERV
    var list: UnsafeMutablePointer<addrinfo>?
    let resolved = getaddrinfo(authority.host, "\(authority.port)", &hints, &list)
    guard resolved == 0 else {
      return .failure(
        Refusal(
          status: 502,
          line: "cannot resolve \(authority.host): \(String(cString: gai_strerror(resolved)))"))
    }
    defer { freeaddrinfo(list) }
    let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
    var cause = "no address"
    var next = list
    while let address = next?.pointee {
      next = address.ai_next
      let fd = socket(
        address.ai_family,
        Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
        0)
      guard fd >= 0 else {
        cause = String(cString: strerror(errno))
        continue
      }
      if Glibc.connect(fd, address.ai_addr, address.ai_addrlen) == 0 { return .success(fd) }
      guard errno == EINPROGRESS else {
        cause = String(cString: strerror(errno))
        close(fd)
        continue
      }
      var waiting = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
      while poll(&waiting, 1, 250) == 0 {
        if stopping.load(ordering: .acquiring) {
          close(fd)
          return .failure(Refusal(status: 503, line: "the server is stopping"))
        }
        if ContinuousClock.now >= deadline {
          close(fd)
          return .failure(
            Refusal(
              status: 504,
              line: "connecting to \(authority) timed out after \(Int(timeout)) s"))
        }
      }
      var error: Int32 = 0
      var length = socklen_t(MemoryLayout<Int32>.size)
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
      if error == 0 { return .success(fd) }
      cause = String(cString: strerror(error))
      close(fd)
    }
    return .failure(Refusal(status: 502, line: "cannot connect to \(authority): \(cause)"))
  }

  // MARK: Relaying

  /// Relays until both sides have ended, one fails, the tunnel is idle for
  /// `idle` seconds or the server stops; `greeting` goes to the client
  /// first. Returns the bytes relayed upstream and to the client.
  private func relay(_ upstream: Int32, greeting: [UInt8], idle: Int) -> (Int64, Int64) {
    var up = Direction(from: client, to: upstream)
    var down = Direction(from: upstream, to: client)
    down.queue(greeting)
    var quiet = 0
    while !(up.isDone && down.isDone), !stopping.load(ordering: .acquiring) {
      var fds = [
        pollfd(
          fd: client, events: up.events(reading: true) | down.events(reading: false), revents: 0),
        pollfd(
          fd: upstream, events: down.events(reading: true) | up.events(reading: false), revents: 0),
      ]
      let ready = poll(&fds, 2, 250)
      if ready < 0, errno != EINTR { break }
      if ready <= 0 {
        quiet += 250
        if quiet >= idle * 1000 { break }
        continue
      }
      quiet = 0
      // A socket in error has nothing more to give or take.
      let broken = Int16(POLLERR) | Int16(POLLNVAL)
      if fds[0].revents & broken != 0 || fds[1].revents & broken != 0 { break }
      let failed =
        !up.step(readable: fds[0].revents != 0, writable: fds[1].revents != 0)
        || !down.step(readable: fds[1].revents != 0, writable: fds[0].revents != 0)
      if failed { break }
    }
    return (up.bytes, max(0, down.bytes - Int64(greeting.count)))
  }
}

/// One way of a tunnel: what was read from `from` and not yet written to
/// `to`. Once `from` ends and all is written, `to`'s writing side is shut.
private struct Direction {
  let from: Int32
  let to: Int32
  private var buffer = [UInt8](repeating: 0, count: 65536)
  private var start = 0
  private var end = 0
  private var ended = false
  /// Whether `to` has been told the end.
  private(set) var isDone = false
  /// Bytes written to `to`.
  private(set) var bytes: Int64 = 0

  init(from: Int32, to: Int32) {
    self.from = from
    self.to = to
  }

  /// Bytes to write before any read (they fit the buffer).
  mutating func queue(_ bytes: [UInt8]) {
    buffer.replaceSubrange(0..<bytes.count, with: bytes)
    end = bytes.count
  }

  /// The poll events this way waits for on `from` (`reading`) or `to`.
  func events(reading: Bool) -> Int16 {
    if reading { return !ended && start == end ? Int16(POLLIN) : 0 }
    return start < end ? Int16(POLLOUT) : 0
  }

  /// Reads when `from` is `readable`, writes what it holds when `to` is
  /// `writable` or it has just read; false when either side failed.
  mutating func step(readable: Bool, writable: Bool) -> Bool {
    var fresh = false
    if readable, !ended, start == end {
      let n = buffer.withUnsafeMutableBytes { recv(from, $0.baseAddress, $0.count, 0) }
      if n > 0 {
        start = 0
        end = n
        fresh = true
      } else if n == 0 {
        ended = true
      } else if errno != EAGAIN, errno != EINTR {
        return false
      }
    }
    if writable || fresh, start < end {
      let n = buffer.withUnsafeBytes {
        send(to, $0.baseAddress! + start, end - start, Int32(MSG_NOSIGNAL))
      }
      if n > 0 {
        start += n
        bytes += Int64(n)
      } else if n < 0, errno != EAGAIN, errno != EINTR {
        return false
      }
    }
    if ended, start == end, !isDone {
      shutdown(to, Int32(SHUT_WR))
      isDone = true
    }
    return true
  }
}

/// The tunnels open now, so that a stopping server ends each and resumes
/// its connection before its daemons end (libmicrohttpd requires it).
final class Tunnels: Sendable {
  private let open = Mutex<[ObjectIdentifier: Tunnel]>([:])

  /// Runs `tunnel` on a thread of its own until it ends.
  func start(_ tunnel: Tunnel, _ work: @escaping @Sendable (Tunnel) -> Void) {
    open.withLock { $0[ObjectIdentifier(tunnel)] = tunnel }
    let thread = Thread { [self] in
      work(tunnel)
      _ = open.withLock { $0.removeValue(forKey: ObjectIdentifier(tunnel)) }
    }
    thread.name = "trove-tunnel"
    thread.start()
  }

  /// Ends every tunnel, and waits (at most two seconds) until each has
  /// resumed its connection.
  func stopAll() {
    let all = open.withLock { Array($0.values) }
    for tunnel in all { tunnel.stop() }
    let deadline = ContinuousClock.now + .seconds(2)
    while all.contains(where: { !$0.isResumed }), ContinuousClock.now < deadline {
      usleep(20_000)
    }
  }
}
