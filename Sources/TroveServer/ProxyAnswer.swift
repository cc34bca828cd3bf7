import CMicroHTTPD
import Foundation
@_spi(Serving) import Trove

/// The answers of a forward proxy (`http_proxy=http://HOST:PORT`): an
/// absolute-form `GET`/`HEAD` of an `http://` URL is the store's fetch of
/// it, as a mirror's request is (the same single flight, revalidation,
/// read-along and stale-if-error); a `CONNECT` is a ``Tunnel``, not cached.
/// Never an open proxy: a listener other machines reach serves only the
/// hosts of `--proxy-allow`.
extension RequestHandler {
  /// Checks the method, the proxy's token, the target and the allowlist,
  /// then fetches or tunnels.
  func answerProxy(_ request: Request) -> MHD_Result {
    let state = request.state
    let connects = state.method == "CONNECT"
    state.routeName = connects ? "connect" : "proxy"
    guard connects || state.method == "GET" || state.method == "HEAD" else {
      return request.text(
        405,
        "method \(Route.shown(Substring(state.method))) is not proxied: GET and HEAD of http:// URLs are, and CONNECT",
        headers: [("Allow", "GET, HEAD, CONNECT")])
    }
    // The client's credential for this proxy: never passed on (a fetch
    // sends headers of its own; a tunnel relays only what follows).
    if let tokens = configuration.tokens, !configuration.publicRead,
      !tokens.accepts(proxyAuthorization: request.header("Proxy-Authorization"))
    {
      return request.text(
        407,
        "the proxy needs a token (Proxy-Authorization: Bearer TOKEN, or the proxy URL http://USER:TOKEN@HOST:PORT)",
        headers: [
          ("Proxy-Authenticate", "Bearer realm=\"trove\""),
          ("Proxy-Authenticate", "Basic realm=\"trove\""),
        ])
    }
    let route =
      connects
      ? ProxyTarget.tunnel(state.target ?? state.path)
      : ProxyTarget.absolute(state.proxyTarget ?? state.path)
    switch route {
    case .failure(.malformed(let why)):
      return request.text(400, why)
    case .failure(.unknown):
      return request.text(400, "no such proxy target")
    case .success(.proxy(let url, let authority)):
      if let refusal = proxyRefusal(authority, exposed: state.isExposed) {
        return request.text(403, refusal)
      }
      return beginFetch(request, url: url, proxied: true)
    case .success(.tunnel(let authority)):
      if let refusal = proxyRefusal(authority, exposed: state.isExposed) {
        return request.text(403, refusal)
      }
      return beginTunnel(request, authority)
    case .success:
      return request.text(400, "not a proxy's target")
    }
  }

  /// Why `authority` is not served to this client, in one line; nil when
  /// it is. With `--proxy-allow`, only its hosts; without, any host on a
  /// loopback listener and none on one other machines reach.
  func proxyRefusal(_ authority: ProxyAuthority, exposed: Bool) -> String? {
    let allowed = configuration.proxyAllow
    if allowed.isEmpty {
      return exposed
        ? "\(authority) is not proxied: this address is reachable from other machines and proxies only the hosts given with --proxy-allow"
        : nil
    }
    return allowed.contains { $0.allows(authority) }
      ? nil : "\(authority) is not proxied: it is not on this server's --proxy-allow list"
  }

  /// Suspends the connection while a thread of its own connects and
  /// relays; answered by ``endTunnel(_:_:)`` once resumed.
  private func beginTunnel(_ request: Request, _ authority: ProxyAuthority) -> MHD_Result {
    guard let tunnel = Tunnel(connection: request.connection, authority: authority) else {
      return request.text(500, "the connection's socket cannot be relayed")
    }
    request.state.tunnel = tunnel
    // Suspended before the tunnel may resume it.
    trove_mhd_suspend_connection(request.connection)
    let version = request.state.version
    let connectTimeout = configuration.mirrorFetchOptions.connectTimeout
    let idleTimeout = max(1, configuration.limits.idleTimeout)
    let metrics = metrics
    tunnels.start(tunnel) {
      $0.run(
        version: version, connectTimeout: connectTimeout, idleTimeout: idleTimeout,
        metrics: metrics)
    }
    return .YES
  }

  /// Answers a resumed `CONNECT`: its refusal, or (the tunnel has been
  /// and gone) closes the connection.
  func endTunnel(_ request: Request, _ tunnel: Tunnel) -> MHD_Result {
    switch tunnel.outcome {
    case .refused(let status, let line)?:
      return request.text(status, line)
    case .relayed(_, let down)?:
      request.state.status = 200
      request.state.bytes = down
      request.state.isTunnelled = true
      // The 200 and the relayed bytes went out on the socket: libmicrohttpd
      // closes it, and sends nothing.
      return .NO
    case .stopped?, nil:
      return request.text(503, "the server is stopping; try again")
    }
  }
}
