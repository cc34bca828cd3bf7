import CMicroHTTPD
import Foundation
import Synchronization
@_spi(Serving) import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// How a server is set up: where it listens, who may read, its limits and
/// its log.
public struct ServerConfiguration: Sendable {
  /// The addresses listened on, one daemon each.
  public var listen: [ListenAddress] = [.default]
  /// The bearer tokens accepted; nil for none.
  public var tokens: Tokens?
  /// Whether reads need no token even where tokens are given, or on an
  /// address other machines reach (`--public-read`).
  public var publicRead = false
  /// Whether the write side of the WebDAV layout is served (`--writable`):
  /// blobs and key records another store pushes, each request with a token.
  public var writable = false
  /// What clients are allowed.
  public var limits = Limits()
  /// Where each request is logged; nil for nowhere.
  public var accessLog: AccessLog?
  /// The pull-through mirrors (`--mirror NAME=UPSTREAM`), served at
  /// `/m/NAME/`, besides those the store's settings name
  /// (``Trove/MirrorRule``), which give way to one of the same name here.
  public var mirrors: [Mirror] = []
  /// Whether a mirror whose origin fails serves the copy the store holds,
  /// with a `Warning` (stale-if-error, RFC 5861); `--no-stale-if-error`
  /// turns it off.
  public var staleIfError = true
  /// How often the server sweeps the store on its own (expiry, budget),
  /// besides the sweeps puts make; nil for never (`--sweep-interval off`).
  public var sweepInterval: Duration? = .seconds(600)
  /// The hosts the forward proxy serves (`--proxy-allow`): when given, to
  /// every client; when not, any host to clients of a loopback address
  /// and none to clients of another.
  public var proxyAllow: [ProxyAllowance] = []
  /// How mirror and proxy fetches behave (timeouts, retries); tunnels use
  /// its connect timeout.
  public var mirrorFetchOptions = FetchOptions()
  /// Told of a failure no response can carry (an object that cannot be
  /// read): one line.
  public var onError: @Sendable (String) -> Void = { _ in }

  /// The defaults: loopback, port 7780, no token.
  public init() {}
}

/// Why a server does not start, in one line.
public struct ServerError: Error, Sendable, CustomStringConvertible {
  /// What went wrong.
  public enum Kind: Sendable {
    /// A flag's value or a file it names cannot be used.
    case invalidConfiguration
    /// A listening address other machines reach, with no token and no
    /// `--public-read`.
    case refusedExposure
    /// Another process listens there.
    case addressInUse
    /// The address cannot be listened on (not this machine's, no permission).
    case cannotListen
  }
  public let kind: Kind
  public let message: String
  public var description: String { message }

  init(_ kind: Kind, _ message: String) {
    self.kind = kind
    self.message = message
  }

  /// A flag's value, or the file it names, that cannot be used.
  public static func invalidConfiguration(_ message: String) -> ServerError {
    ServerError(.invalidConfiguration, message)
  }
}

/// `trove serve`: one libmicrohttpd daemon per listening address (epoll on
/// an internal thread, a pool of threads answering), serving a store's
/// objects by digest and checksum and the read side of a WebDAV remote.
///
/// libmicrohttpd parses HTTP and enforces the limits (connections, idle
/// time, the memory that bounds a request's head); the ``RequestHandler``
/// decides each answer. Callbacks are C function pointers: the server
/// reaches them through an unretained context pointer, valid as long as
/// the daemons run (``stop(grace:)`` ends them before the server can go).
public final class Server: @unchecked Sendable {
  let store: Store
  let configuration: ServerConfiguration
  let handler: RequestHandler
  /// The running daemons, one per address.
  private var daemons: [OpaquePointer] = []
  /// Each daemon's context, kept alive as long as it runs.
  private var listeners: [Listener] = []
  private var sweeps: PeriodicSweep?
  /// Requests begun and not yet completed, for the grace period.
  let inFlight = Atomic<Int>(0)

  /// A server of `store`; nothing listens until ``start()``.
  ///
  /// - Throws: `.refusedExposure` for an address other machines reach
  ///   with neither tokens nor `publicRead`.
  public init(store: Store, configuration: ServerConfiguration) throws(ServerError) {
    if configuration.tokens == nil, !configuration.publicRead,
      let exposed = configuration.listen.first(where: { !$0.isLoopback })
    {
      throw ServerError(
        .refusedExposure,
        "refusing to listen on \(exposed): other machines reach it; give --token-file FILE to require a token, or --public-read to serve reads to anyone who reaches it"
      )
    }
    if configuration.writable, configuration.tokens == nil {
      throw ServerError(
        .refusedExposure, "--writable needs --token-file FILE: every write needs a token")
    }
    var configuration = configuration
    configuration.mirrors = try Self.mirrors(configuration, store)
    self.store = store
    self.configuration = configuration
    let signing: ServedSigning?
    do throws(TroveError) {
      signing = try ServedSigning.of(store)
    } catch {
      throw ServerError(.invalidConfiguration, error.description)
    }
    handler = RequestHandler(
      store: store, configuration: configuration, uploads: PendingUploads(),
      fetches: PendingFetches(limit: configuration.limits.originTransfers), signing: signing)
  }

  deinit { stop(grace: 0) }

  /// The mirrors served: the configuration's, then those the store's
  /// settings name (`config set mirror.NAME`) under other names, read once
  /// as the server starts. A `mirror` setting that cannot be used is
  /// reported and adds none.
  private static func mirrors(_ configuration: ServerConfiguration, _ store: Store)
    throws(ServerError) -> [Mirror]
  {
    let status: PolicyStatus
    do throws(TroveError) {
      status = try store.policyStatus()
    } catch {
      throw ServerError(.invalidConfiguration, error.description)
    }
    if let error = status.error(for: .mirror) { configuration.onError(error.description) }
    let given = Set(configuration.mirrors.map(\.name))
    let configured = status.policy.mirrors.filter { !given.contains($0.name) }
    guard configured.isEmpty || store.mirrorsAreThisUsers() else {
      configuration.onError(
        "the mirrors of '\(status.path)' (\(configured.map(\.name).joined(separator: ", "))) are not served: others may write the store, so another user may have chosen them, and their fetches would carry your ~/.netrc logins; give them with --mirror"
      )
      return configuration.mirrors
    }
    return configuration.mirrors + configured.map(Mirror.init)
  }

  /// Starts listening on every address; returns the base URL of each, in
  /// order (an address given port 0 names the port the kernel chose).
  /// Either every address listens or none does.
  public func start() throws(ServerError) -> [String] {
    var urls: [String] = []
    for address in configuration.listen {
      let daemon: OpaquePointer
      do throws(ServerError) {
        daemon = try startDaemon(address)
      } catch {
        stop(grace: 0)
        throw error
      }
      daemons.append(daemon)
      urls.append(address.url(port: trove_mhd_port(daemon)))
    }
    if let interval = configuration.sweepInterval {
      let sweeps = PeriodicSweep(
        store: store, every: interval, metrics: handler.metrics, onError: configuration.onError)
      sweeps.start()
      self.sweeps = sweeps
    }
    return urls
  }

  private func startDaemon(_ address: ListenAddress) throws(ServerError) -> OpaquePointer {
    if let reason = trove_mhd_load() {
      throw ServerError(
        .cannotListen,
        "cannot listen on \(address): \(String(cString: reason)) (install libmicrohttpd12)")
    }
    let limits = configuration.limits
    var flags =
      MHD_USE_EPOLL_INTERNAL_THREAD.rawValue | MHD_USE_ITC.rawValue
      | MHD_ALLOW_SUSPEND_RESUME.rawValue
    if address.isIPv6 { flags |= MHD_USE_IPv6.rawValue }
    let listener = Listener(server: self, isExposed: !address.isLoopback)
    listeners.append(listener)
    let context = Unmanaged.passUnretained(listener).toOpaque()
    let started: OpaquePointer? = address.withSocketAddress { socketAddress, _ in
      let options: [MHD_OptionItem] = [
        MHD_OptionItem(
          option: .THREAD_POOL_SIZE, value: max(1, limits.threads), ptr_value: nil),
        MHD_OptionItem(
          option: .CONNECTION_LIMIT, value: max(1, limits.connections), ptr_value: nil),
        MHD_OptionItem(
          option: .CONNECTION_TIMEOUT, value: max(1, limits.idleTimeout),
          ptr_value: nil),
        MHD_OptionItem(
          option: .CONNECTION_MEMORY_LIMIT, value: limits.headerBytes, ptr_value: nil),
        MHD_OptionItem(
          option: .NOTIFY_COMPLETED, value: unsafeBitCast(requestCompleted, to: Int.self),
          ptr_value: context),
        MHD_OptionItem(
          option: .URI_LOG_CALLBACK, value: unsafeBitCast(requestBegan, to: Int.self),
          ptr_value: context),
        MHD_OptionItem(
          option: .SOCK_ADDR, value: 0,
          ptr_value: UnsafeMutableRawPointer(mutating: socketAddress)),
        MHD_OptionItem(option: .END, value: 0, ptr_value: nil),
      ]
      return options.withUnsafeBufferPointer {
        trove_mhd_start(UInt32(flags), accessHandler, context, $0.baseAddress)
      }
    }
    guard let started else {
      let code = errno
      if code == EADDRINUSE {
        throw ServerError(
          .addressInUse, "cannot listen on \(address): another process listens there")
      }
      let cause = code == 0 ? "libmicrohttpd could not start" : String(cString: strerror(code))
      throw ServerError(.cannotListen, "cannot listen on \(address): \(cause)")
    }
    if address.isLoopback { LoopbackTransport.apply(to: started) }
    return started
  }

  /// Stops: no new connection is accepted, responses under way get up to
  /// `grace` seconds to finish, then every connection is closed. Returns
  /// whether all of them finished. Calling it again does nothing.
  @discardableResult
  public func stop(grace: Int) -> Bool {
    guard !daemons.isEmpty else { return true }
    sweeps?.stop()
    sweeps = nil
    for daemon in daemons {
      let listening = trove_mhd_quiesce_daemon(daemon)
      if listening >= 0 { close(listening) }
    }
    let deadline = ContinuousClock.now + .seconds(grace)
    while inFlight.load(ordering: .acquiring) > 0, ContinuousClock.now < deadline {
      usleep(20_000)
    }
    let finished = inFlight.load(ordering: .acquiring) == 0
    // libmicrohttpd must not stop with a connection suspended: those still
    // waiting for a mirror fetch are answered 503 (the fetch goes on).
    handler.fetches.abandonAll()
    handler.transfers.stopAll()
    handler.tunnels.stopAll()
    if !finished { usleep(100_000) }
    for daemon in daemons { trove_mhd_stop_daemon(daemon) }
    daemons.removeAll()
    listeners.removeAll()
    handler.uploads.dropAll()
    store.flushAccessCounts()
    return finished
  }

  /// Blocks SIGTERM and SIGINT in the calling thread and the threads it
  /// starts afterwards (call it before ``start()``), so that
  /// ``waitForStopSignal()`` receives them and no daemon thread is
  /// interrupted.
  public static func blockStopSignals() {
    var signals = sigset_t()
    sigemptyset(&signals)
    sigaddset(&signals, SIGTERM)
    sigaddset(&signals, SIGINT)
    pthread_sigmask(SIG_BLOCK, &signals, nil)
  }

  /// Waits for SIGTERM or SIGINT; returns its number.
  public static func waitForStopSignal() -> Int32 {
    var signals = sigset_t()
    sigemptyset(&signals)
    sigaddset(&signals, SIGTERM)
    sigaddset(&signals, SIGINT)
    var received: Int32 = 0
    while sigwait(&signals, &received) != 0 {}
    return received
  }

  // MARK: Requests

  /// A request's line was read: its ``RequestState`` starts here, so that
  /// a request libmicrohttpd answers itself (a head too large) is logged too.
  fileprivate func began(_ connection: OpaquePointer?, uri: String, exposed: Bool)
    -> UnsafeMutableRawPointer
  {
    // The query is never logged: it may hold what a client thought private.
    let path = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first
    let state = RequestState(
      client: connection.map(Self.clientAddress) ?? "-", path: String(path ?? ""))
    state.target = state.path
    state.isExposed = exposed
    // A proxy's URL is fetched with its query.
    if !uri.hasPrefix("/") { state.proxyTarget = uri }
    inFlight.add(1, ordering: .acquiringAndReleasing)
    return Unmanaged.passRetained(state).toOpaque()
  }

  /// The first call once a request's head is read notes its method; the
  /// next answers it.
  fileprivate func handle(
    _ connection: OpaquePointer, url: String, method: String, version: String,
    uploadData: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>?,
    state slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>, exposed: Bool
  ) -> MHD_Result {
    if slot.pointee == nil { slot.pointee = began(connection, uri: url, exposed: exposed) }
    let state = Unmanaged<RequestState>.fromOpaque(slot.pointee!).takeUnretainedValue()
    guard state.headRead else {
      state.headRead = true
      state.method = method
      state.version = version
      state.path = url
      let request = Request(connection: connection, state: state)
      state.upload = handler.upload(for: request)
      if state.upload == nil, request.hasBody {
        // A body nobody reads: answered before it is read (libmicrohttpd
        // sends no 100 Continue, and closes the connection after).
        state.answered = true
        return handler.answer(connection, state)
      }
      return .YES
    }
    if let size = uploadSize, size.pointee > 0 {
      defer { size.pointee = 0 }
      guard let upload = state.upload else {
        // A body nobody reads: the answer is given now, and the
        // connection closed after it.
        if state.answered { return .YES }
        state.answered = true
        return handler.answer(connection, state)
      }
      if let data = uploadData {
        upload.receive(UnsafeRawBufferPointer(start: UnsafeRawPointer(data), count: size.pointee))
      }
      return .YES
    }
    if state.answered {
      // A mirror request's connection, resumed once its fetch is done.
      if let fetch = state.pending, !state.pendingAnswered {
        state.pendingAnswered = true
        return handler.answerMirror(Request(connection: connection, state: state), fetch)
      }
      // A CONNECT's connection, resumed once its tunnel opened and closed
      // or could not open.
      if let tunnel = state.tunnel, !state.pendingAnswered {
        state.pendingAnswered = true
        return handler.endTunnel(Request(connection: connection, state: state), tunnel)
      }
      return .YES
    }
    state.answered = true
    return handler.answer(connection, state)
  }

  fileprivate func completed(
    _ connection: OpaquePointer?, _ slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    _ termination: MHD_RequestTerminationCode
  ) {
    guard let slot, let pointer = slot.pointee else { return }
    slot.pointee = nil
    let state = Unmanaged<RequestState>.fromOpaque(pointer).takeRetainedValue()
    state.upload?.abandon()
    inFlight.subtract(1, ordering: .acquiringAndReleasing)
    let status =
      state.status != 0 ? state.status : connection.map { Int(trove_mhd_status($0)) } ?? 0
    // A tunnel's connection is closed by design once it has been relayed.
    let completed = termination == .REQUEST_TERMINATED_COMPLETED_OK || state.isTunnelled
    handler.metrics.recordResponse(
      route: state.routeName, status: status, bytes: completed ? state.bytes : 0)
    configuration.accessLog?.record(
      AccessLog.Entry(
        client: state.client, method: state.method, path: state.path, version: state.version,
        status: status, bytes: state.bytes, completed: completed, time: state.time))
  }

  private static func clientAddress(_ connection: OpaquePointer) -> String {
    guard let address = trove_mhd_client_address(connection) else { return "-" }
    var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    switch Int32(address.pointee.sa_family) {
    case AF_INET:
      address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
        var ip = $0.pointee.sin_addr
        _ = inet_ntop(AF_INET, &ip, &text, socklen_t(text.count))
      }
    case AF_INET6:
      address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
        var ip = $0.pointee.sin6_addr
        _ = inet_ntop(AF_INET6, &ip, &text, socklen_t(text.count))
      }
    default: return "-"
    }
    return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}

/// A daemon's context in libmicrohttpd's callbacks: the server, and
/// whether other machines reach the address it listens on.
private final class Listener: @unchecked Sendable {
  unowned(unsafe) let server: Server
  let isExposed: Bool

  init(server: Server, isExposed: Bool) {
    self.server = server
    self.isExposed = isExposed
  }

  static func from(_ context: UnsafeMutableRawPointer) -> Listener {
    Unmanaged<Listener>.fromOpaque(context).takeUnretainedValue()
  }
}

/// libmicrohttpd's request callback: to the server of the listener in
/// `context`.
private let accessHandler: MHD_AccessHandlerCallback = {
  context, connection, url, method, version, uploadData, uploadSize, slot in
  guard let context, let connection, let slot else { return .NO }
  let listener = Listener.from(context)
  return listener.server.handle(
    connection, url: url.map { String(cString: $0) } ?? "",
    method: method.map { String(cString: $0) } ?? "",
    version: version.map { String(cString: $0) } ?? "", uploadData: uploadData,
    uploadSize: uploadSize, state: slot, exposed: listener.isExposed)
}

/// libmicrohttpd's callback for a request's end, whether its response
/// went out whole or not.
private let requestCompleted: MHD_RequestCompletedCallback = {
  context, connection, slot, termination in
  guard let context else { return }
  Listener.from(context).server.completed(connection, slot, termination)
}

/// libmicrohttpd's callback for a request line read: the request's state.
private let requestBegan:
  @convention(c) (
    UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?
  ) -> UnsafeMutableRawPointer? = { context, uri, connection in
    guard let context else { return nil }
    let listener = Listener.from(context)
    return listener.server.began(
      connection, uri: uri.map { String(cString: $0) } ?? "", exposed: listener.isExposed)
  }

/// One request, from its head to its end: what the access log says of it.
final class RequestState: @unchecked Sendable {
  let client: String
  let time = Date()
  /// What the request line said; `-` until its head is read.
  var method = "-"
  var path: String
  var version = "-"
  var headRead = false
  var answered = false
  /// The body being received, for a write that takes one.
  var upload: UploadBody?
  /// The request target as the client sent it (not decoded), without its
  /// query: a mirror's path is parsed from it.
  var target: String?
  /// A mirror or proxy request's fetch, while its connection is suspended.
  var pending: PendingFetch?
  /// A CONNECT's tunnel, while its connection is suspended.
  var tunnel: Tunnel?
  var pendingAnswered = false
  /// An absolute-form target as sent, with its query: a proxy's URL.
  var proxyTarget: String?
  /// Whether the listener it came to is reachable from other machines.
  var isExposed = false
  /// Whether a tunnel relayed on its connection (closed on purpose after).
  var isTunnelled = false
  /// The route's label in `/metrics`; `other` for a request answered
  /// before its route was known (a head too large).
  var routeName = "other"
  var status = 0
  var bytes: Int64 = 0

  init(client: String, path: String) {
    self.client = client
    self.path = path
  }
}
