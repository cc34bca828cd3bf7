import CMicroHTTPD
import Foundation
@_spi(Serving) import Trove

/// Decides each request's answer: the token, the method, the route, then
/// what the store holds. Every answer that is not a body is a short
/// `text/plain` line naming the cause.
struct RequestHandler: Sendable {
  let store: Store
  let configuration: ServerConfiguration
  /// Blobs received and waiting for their `MOVE` (`--writable`).
  let uploads: PendingUploads
  /// Mirror fetches whose connections wait, suspended.
  let fetches: PendingFetches
  /// What the records served as a remote are signed with; nil for unsigned.
  let signing: ServedSigning?
  /// The sha256s index pages published for the files they link.
  let published = PublishedChecksums()
  /// The mirror fetches under way, which requests of one URL share.
  let transfers = MirrorTransfers()
  /// What `/metrics` reports.
  let metrics = Metrics()
  /// The `CONNECT` tunnels open.
  let tunnels = Tunnels()

  /// The methods answered.
  var allowed: String { configuration.writable ? "GET, HEAD, PUT, MOVE, DELETE" : "GET, HEAD" }

  /// Queues the answer to `state`'s request on `connection`.
  func answer(_ connection: OpaquePointer, _ state: RequestState) -> MHD_Result {
    let request = Request(connection: connection, state: state)
    if state.method == "CONNECT" || !state.path.hasPrefix("/") { return answerProxy(request) }
    let route = Route.parse(state.path, target: state.target)
    state.routeName = (try? route.get())?.metricName ?? "invalid"
    let reads = state.method == "GET" || state.method == "HEAD"
    if reads {
      if let tokens = configuration.tokens, !configuration.publicRead,
        route != .success(.health), !tokens.accepts(authorization: request.header("Authorization"))
      {
        return request.text(
          401, "a bearer token is required (Authorization: Bearer TOKEN)",
          headers: [("WWW-Authenticate", "Bearer realm=\"trove\"")])
      }
    } else if configuration.writable, ["PUT", "MOVE", "DELETE"].contains(state.method) {
      if let refusal = writeRefusal(request) { return refusal }
    } else {
      return request.text(
        405,
        "method \(Route.shown(Substring(state.method))) is not allowed: this server \(configuration.writable ? "takes GET, HEAD, PUT, MOVE and DELETE" : "reads only")",
        headers: [("Allow", allowed)])
    }
    switch route {
    case .failure(.unknown):
      return request.text(404, "no such path")
    case .failure(.malformed(let why)):
      return request.text(400, why)
    case .success(let route):
      return reads ? answer(request, route) : answerWrite(request, route)
    }
  }

  private func answer(_ request: Request, _ route: Route) -> MHD_Result {
    do throws(TroveError) {
      switch route {
      case .health:
        return request.text(200, "ok")
      case .metrics:
        return request.bytes(
          200, Array(metrics.exposition(store: store).utf8),
          type: "text/plain; version=0.0.4; charset=utf-8")
      case .remoteLayout:
        return request.bytes(200, Store.servedLayoutRecord, type: "application/json")
      case .keyRecord(let name):
        guard let record = try store.servedKeyRecord(named: name, signing: signing) else {
          return request.text(404, "no key record \(name)")
        }
        return request.bytes(200, record, type: "application/json")
      case .signedEntry(let digest):
        guard let signing else {
          return request.text(404, "no signed entries: the store signs nothing (signing-key)")
        }
        guard let entry = try store.servedSignedEntry(of: digest, signing: signing) else {
          return request.text(404, "no object \(digest)")
        }
        return request.bytes(200, entry, type: "application/json")
      case .manifest(let digest):
        // Cut from the object's own bytes when it has none recorded (and
        // recorded then, in a store this server may write). An index made
        // before manifests, read-only, has none to give.
        guard try store.entry(for: digest) != nil,
          let manifest = try? store.chunkManifest(of: digest)
        else {
          return request.text(404, "no chunk manifest of \(digest)")
        }
        return request.bytes(200, manifest.encoded, type: "application/octet-stream")
      case .blockSums(let digest):
        guard let list = request.argument("blocks") else {
          return request.text(400, "blocks=FIRST-LAST,… is required")
        }
        guard let sums = try store.servedBlockSums(of: digest, blocks: list) else {
          return request.text(
            404,
            "no block sums of \(digest) for blocks=\(Route.shown(Substring(list))): not stored uncompressed, or not whole blocks of it, ascending, at most \(BlockSums.maximumBlocks)"
          )
        }
        return request.bytes(200, sums, type: "application/octet-stream")
      case .blobRanges(let digest):
        guard let list = request.argument("ranges") else {
          return request.text(400, "ranges=FIRST-LAST,… is required")
        }
        guard let bytes = try store.servedRanges(of: digest, ranges: list) else {
          return request.text(
            404,
            "no ranges of \(digest) for ranges=\(Route.shown(Substring(list))): not stored uncompressed, or not within it, ascending, at most \(BlockSums.maximumRangeBytes) bytes"
          )
        }
        return request.bytes(200, bytes, type: "application/octet-stream")
      case .upload:
        return request.text(404, "uploads are not read back")
      case .cas(let digest), .remoteBlob(let digest):
        return try ObjectResponse(store: store, request: request, digest: digest).queue()
      case .mirror(let name, let path):
        return beginMirror(request, name: name, path: path)
      case .proxy, .tunnel:
        return request.text(400, "a proxy's target is not a path")
      case .checksum(let checksum):
        guard let digest = try store.digest(for: checksum) else {
          return request.text(404, "no object with \(checksum)")
        }
        return try ObjectResponse(store: store, request: request, digest: digest).queue()
      }
    } catch {
      return failed(request, error)
    }
  }

  /// The answer for a failure of the store: its cause to the server's
  /// log, a line without paths to the client.
  func failed(_ request: Request, _ error: TroveError) -> MHD_Result {
    configuration.onError(
      "\(request.state.method) \(Route.shown(Substring(request.state.path))): \(error)")
    return request.text(500, "the store could not answer; the server's log says why")
  }

  // MARK: Writes

  /// 401 without a token, 403 with one that is not accepted; nil when the
  /// request may write.
  private func writeRefusal(_ request: Request) -> MHD_Result? {
    guard !mayWrite(request) else { return nil }
    return request.header("Authorization") == nil
      ? request.text(
        401, "writing needs a bearer token (Authorization: Bearer TOKEN)",
        headers: [("WWW-Authenticate", "Bearer realm=\"trove\"")])
      : request.text(403, "the token is not accepted")
  }

  /// Whether the request carries a token that may write.
  private func mayWrite(_ request: Request) -> Bool {
    configuration.writable
      && configuration.tokens?.accepts(authorization: request.header("Authorization")) == true
  }

  /// The body a write request's head asks to send, when it may: a blob to
  /// a temp name, or a key record. Nil for any other request, whose body
  /// is not read.
  func upload(for request: Request) -> UploadBody? {
    guard request.state.method == "PUT", mayWrite(request) else { return nil }
    switch Route.parse(request.state.path) {
    case .success(.upload(let name)):
      let length = request.header("Content-Length").flatMap { Int64($0) }
      do throws(TroveError) {
        return UploadBody(
          .blob(name: name, writer: try store.makeWriter(expectedSize: length)))
      } catch {
        let body = UploadBody(.record(name: name))
        body.failure = error
        return body
      }
    case .success(.keyRecord(let name)):
      return UploadBody(.record(name: name))
    default:
      return nil
    }
  }

  private func answerWrite(_ request: Request, _ route: Route) -> MHD_Result {
    switch (request.state.method, route) {
    case ("PUT", .upload(let name)):
      guard let body = request.state.upload, case .blob(_, let writer) = body.kind else {
        let error = request.state.upload?.failure
        return request.text(
          error.map(status) ?? 500, error?.message ?? "the upload could not be received")
      }
      if let error = body.failure {
        body.abandon()
        return request.text(status(of: error), error.message)
      }
      body.handedOver = true
      guard uploads.keep(writer, size: body.received, as: name) else {
        return request.text(503, "too many uploads wait for their MOVE; try again later")
      }
      return request.text(201, "received \(body.received) bytes")
    case ("PUT", .keyRecord(let name)):
      guard let body = request.state.upload else { return request.text(500, "no body") }
      do throws(TroveError) {
        if let error = body.failure { throw error }
        try store.bindPushedKeyRecord(body.bytes, named: name)
        return request.text(201, "bound")
      } catch {
        return request.text(status(of: error), error.message)
      }
    case ("MOVE", .upload(let name)):
      return move(request, name)
    case ("DELETE", .upload(let name)):
      guard let (writer, _) = uploads.take(name) else {
        return request.text(404, "no upload \(name)")
      }
      writer.cancel()
      return request.text(204, "")
    case ("PUT", .remoteLayout):
      return request.text(403, "the layout record is this server's own")
    case ("PUT", .signedEntry):
      return request.text(403, "signed entries are not stored by this server yet")
    case ("PUT", .manifest):
      return request.text(403, "this server cuts the manifests of its objects from their bytes")
    default:
      return request.text(
        403,
        "\(request.state.method) of \(Route.shown(Substring(request.state.path))) is not allowed")
    }
  }

  /// `MOVE tmp/<name>` onto `Destination: …/cas/<aa>/<hex>`: the blob
  /// received under `name` is committed to the store if its bytes are
  /// that digest's (else dropped: 409). 412 when the store holds it
  /// already and `Overwrite: F` was asked, as a WebDAV server answers.
  private func move(_ request: Request, _ name: String) -> MHD_Result {
    guard let destination = request.header("Destination"),
      case .success(.remoteBlob(let digest)) = Route.parse(Self.path(of: destination))
    else {
      return request.text(400, "the Destination of a MOVE must be a blob's path, cas/<aa>/<hex>")
    }
    guard let (writer, size) = uploads.take(name) else {
      return request.text(404, "no upload \(name)")
    }
    do throws(TroveError) {
      if try store.contains(digest) {
        writer.cancel()
        return request.header("Overwrite")?.uppercased() == "F"
          ? request.text(412, "the store holds \(digest) already") : request.text(204, "")
      }
      // Rehashed by the store's writer: bytes that are not the digest's
      // are never published.
      _ = try writer.commit(expecting: digest, size: size)
      return request.text(201, "stored \(digest)")
    } catch {
      writer.cancel()
      if error.code == .checksumMismatch {
        return request.text(409, "the bytes received are not \(digest); nothing stored")
      }
      return request.text(status(of: error), error.message)
    }
  }

  /// The path of a `Destination` (an absolute URL or a path).
  static func path(of destination: String) -> String {
    guard let scheme = destination.range(of: "://") else { return destination }
    let rest = destination[scheme.upperBound...]
    return rest.firstIndex(of: "/").map { String(rest[$0...]) } ?? "/"
  }

  /// The status for a write the store refused.
  private func status(of error: TroveError) -> Int {
    switch error.code {
    case .tooLarge: return 413
    case .noSpace, .lowOnSpace: return 507
    case .invalidArgument: return 400
    case .checksumMismatch, .notFound: return 409
    case .readOnlyStore, .permissionDenied: return 403
    default:
      configuration.onError("\(error)")
      return 500
    }
  }
}

/// A request being answered: its headers, and the ways to queue a response.
struct Request {
  let connection: OpaquePointer
  let state: RequestState

  var isHead: Bool { state.method == "HEAD" }

  /// Whether a body follows the head.
  var hasBody: Bool {
    header("Transfer-Encoding") != nil || (header("Content-Length").map { $0 != "0" } ?? false)
  }

  /// A query argument's value (decoded), if it was sent.
  func argument(_ name: String) -> String? {
    trove_mhd_lookup_connection_value(connection, .GET_ARGUMENT_KIND, name).map {
      String(cString: $0)
    }
  }

  /// A request header's value, if it was sent.
  func header(_ name: String) -> String? {
    trove_mhd_lookup_connection_value(connection, .HEADER_KIND, name).map { String(cString: $0) }
  }

  /// Queues `response` with `status`, noting both for the access log.
  func queue(_ status: Int, _ response: OpaquePointer?, bodyBytes: Int64) -> MHD_Result {
    guard let response else { return .NO }
    defer { trove_mhd_destroy_response(response) }
    state.status = status
    state.bytes = isHead ? 0 : bodyBytes
    return trove_mhd_queue_response(connection, UInt32(status), response)
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
      trove_mhd_create_response_from_buffer(
        $0.count, UnsafeMutableRawPointer(mutating: $0.baseAddress), .RESPMEM_MUST_COPY)
    }
    guard let response else { return .NO }
    Self.add(("Content-Type", type), to: response)
    for header in headers { Self.add(header, to: response) }
    return queue(status, response, bodyBytes: Int64(body.count))
  }

  static func add(_ header: (String, String), to response: OpaquePointer) {
    _ = trove_mhd_add_response_header(response, header.0, header.1)
  }
}
