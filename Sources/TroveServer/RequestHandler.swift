import CMicroHTTPD
import Foundation
@_spi(Serving) import Trove

/// Decides each request's answer: the token, the method, the route, then
/// what the store holds. Every answer that is not a body is a short
/// `text/plain` line naming the cause.
struct RequestHandler: Sendable {
  let store: Store
  let configuration: ServerConfiguration

  /// Queues the answer to `state`'s request on `connection`.
  func answer(_ connection: OpaquePointer, _ state: RequestState) -> MHD_Result {
    let request = Request(connection: connection, state: state)
    let route = Route.parse(state.path)
    if let tokens = configuration.tokens, !configuration.publicRead, route != .success(.health),
      !tokens.accepts(authorization: request.header("Authorization"))
    {
      return request.text(
        401, "a bearer token is required (Authorization: Bearer TOKEN)",
        headers: [("WWW-Authenticate", "Bearer realm=\"trove\"")])
    }
    guard state.method == "GET" || state.method == "HEAD" else {
      return request.text(
        405,
        "method \(Route.shown(Substring(state.method))) is not allowed: this server reads only",
        headers: [("Allow", "GET, HEAD")])
    }
    switch route {
    case .failure(.unknown):
      return request.text(404, "no such path")
    case .failure(.malformed(let why)):
      return request.text(400, why)
    case .success(let route):
      return answer(request, route)
    }
  }

  private func answer(_ request: Request, _ route: Route) -> MHD_Result {
    do throws(TroveError) {
      switch route {
      case .health:
        return request.text(200, "ok")
      case .remoteLayout:
        return request.bytes(200, Store.servedLayoutRecord, type: "application/json")
      case .keyRecord(let name):
        guard let record = try store.servedKeyRecord(named: name) else {
          return request.text(404, "no key record \(name)")
        }
        return request.bytes(200, record, type: "application/json")
      case .signedEntry:
        return request.text(404, "signed entries are not served")
      case .cas(let digest), .remoteBlob(let digest):
        return try ObjectResponse(store: store, request: request, digest: digest).queue()
      case .checksum(let checksum):
        guard let digest = try store.digest(for: checksum) else {
          return request.text(404, "no object with \(checksum)")
        }
        return try ObjectResponse(store: store, request: request, digest: digest).queue()
      }
    } catch {
      configuration.onError(
        "\(request.state.method) \(Route.shown(Substring(request.state.path))): \(error)")
      return request.text(500, "the store could not answer; the server's log says why")
    }
  }
}

/// A request being answered: its headers, and the ways to queue a response.
struct Request {
  let connection: OpaquePointer
  let state: RequestState

  var isHead: Bool { state.method == "HEAD" }

  /// A request header's value, if it was sent.
  func header(_ name: String) -> String? {
    MHD_lookup_connection_value(connection, .HEADER_KIND, name).map { String(cString: $0) }
  }

  /// Queues `response` with `status`, noting both for the access log.
  func queue(_ status: Int, _ response: OpaquePointer?, bodyBytes: Int64) -> MHD_Result {
    guard let response else { return .NO }
    defer { MHD_destroy_response(response) }
    state.status = status
    state.bytes = isHead ? 0 : bodyBytes
    return MHD_queue_response(connection, UInt32(status), response)
  }

  /// A short text answer: `line` and a newline.
  func text(_ status: Int, _ line: String, headers: [(String, String)] = []) -> MHD_Result {
    bytes(status, Array((line + "\n").utf8), type: "text/plain; charset=utf-8", headers: headers)
  }

  /// An answer of `body` in memory.
  func bytes(_ status: Int, _ body: [UInt8], type: String, headers: [(String, String)] = [])
    -> MHD_Result
  {
    let response = body.withUnsafeBytes {
      MHD_create_response_from_buffer(
        $0.count, UnsafeMutableRawPointer(mutating: $0.baseAddress), .RESPMEM_MUST_COPY)
    }
    guard let response else { return .NO }
    Self.add(("Content-Type", type), to: response)
    for header in headers { Self.add(header, to: response) }
    return queue(status, response, bodyBytes: Int64(body.count))
  }

  static func add(_ header: (String, String), to response: OpaquePointer) {
    _ = MHD_add_response_header(response, header.0, header.1)
  }
}
