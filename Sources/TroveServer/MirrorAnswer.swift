import CMicroHTTPD
import Foundation
@_spi(Serving) import Trove

/// The answers of `/m/NAME/PATH`: a fetch of the mirror's upstream URL
/// through the store's own fetch (fresh copies served without a request,
/// revalidation, one transfer across clients and processes, resume,
/// recorded checksums), then the object it names, with its origin's type
/// and validators.
extension RequestHandler {
  /// Suspends the connection and fetches on another thread; the
  /// connection is answered by ``answerMirror(_:_:)`` once resumed.
  func beginMirror(_ request: Request, name: String, path: MirrorPath) -> MHD_Result {
    guard let mirror = configuration.mirrors.first(where: { $0.name == name }) else {
      return request.text(404, "no mirror \(name)")
    }
    return beginFetch(request, url: mirror.url(of: path), proxied: false)
  }

  /// Fetches `url` for a mirror's request or, `proxied`, a proxy's
  /// (which lends the fetch no credential of the user's and leaves index
  /// pages as they are): the connection waits, suspended, for its outcome.
  func beginFetch(_ request: Request, url: String, proxied: Bool) -> MHD_Result {
    let plain =
      !request.isHead && request.header("Range") == nil && request.header("If-None-Match") == nil
      && request.header("If-Modified-Since") == nil
    let fetch = PendingFetch(connection: request.connection, readsAlong: plain)
    request.state.pending = fetch
    // Suspended before anyone may resume it.
    trove_mhd_suspend_connection(request.connection)
    fetches.waiting(fetch)
    // A proxy's fetch lends no credential and may be led to fewer hosts:
    // it joins only other proxy requests (the store's lock still makes one
    // transfer at the origin).
    let (transfer, isNew) = transfers.join(proxied ? "proxy " + url : url)
    let handler = self
    switch transfer.wait(fetch) {
    case .waiting where isNew:
      fetches.start(fetch) {
        handler.metrics.activeTransfers.add(1, ordering: .relaxed)
        defer { handler.metrics.activeTransfers.subtract(1, ordering: .relaxed) }
        let (outcome, stored) = handler.fetchMirrored(
          url, proxied: proxied, progress: transfer.progress)
        handler.transfers.remove(transfer)
        if case .storeFailed(let error) = outcome, transfer.source != nil {
          // Its readers were cut short, or got the verified body the store
          // then failed to keep: the log says why.
          handler.configuration.onError("GET \(Route.shown(Substring(url))): \(error)")
        }
        transfer.finish(outcome, stored: stored)
        return outcome
      }
    case .waiting:
      break
    case .readAlong:
      fetch.finish(.readAlong(transfer))
    case .ended:
      // Joined as it ended: a fetch of its own (most likely a hit now).
      fetches.start(fetch) { handler.fetchMirrored(url, proxied: proxied).outcome }
    }
    return .YES
  }

  /// Answers a resumed mirror request with its fetch's outcome.
  func answerMirror(_ request: Request, _ fetch: PendingFetch) -> MHD_Result {
    fetches.answered(fetch)
    switch fetch.outcome {
    case .readAlong(let transfer)?:
      return answerReadAlong(request, transfer)
    case nil:
      return request.text(503, "the server is stopping; try again")
    case .refused(let status, let line)?:
      return request.text(status, line)
    case .storeFailed(let error)? where error.code == .noSpace || error.code == .lowOnSpace:
      // The client learns the cause; the path and the figures go to the log only.
      configuration.onError(
        "\(request.state.method) \(Route.shown(Substring(request.state.path))): \(error)")
      return request.text(507, "the cache's volume is full: the file cannot be stored")
    case .storeFailed(let error)?:
      return failed(request, error)
    case .rewritten(let body, let headers)?:
      var all = headers.headers
      if let etag = headers.etag {
        all.append(("ETag", etag))
        if ObjectResponse.matches(request.header("If-None-Match"), etag) {
          return request.bytes(304, [], type: headers.contentType ?? "text/html", headers: all)
        }
      }
      return request.bytes(200, body, type: headers.contentType ?? "text/html", headers: all)
    case .served(let digest, let headers)?:
      do throws(TroveError) {
        return try ObjectResponse(
          store: store, request: request, digest: digest, mirrored: headers
        ).queue()
      } catch {
        return failed(request, error)
      }
    }
  }

  /// Fetches `url` into the store; on a failure of the origin, serves the
  /// copy the store holds (stale-if-error) unless that is turned off.
  func fetchMirrored(
    _ url: String, proxied: Bool = false, progress: (@Sendable (FetchProgress) -> Void)? = nil
  ) -> (outcome: MirrorOutcome, stored: (BlobDigest, Int64)?) {
    // The sha256 an index page published for this file: expected of its
    // bytes, and enough to serve a stored object without asking anyone.
    var request = FetchRequest(url: url, expected: published.checksum(for: url).map { [$0] } ?? [])
    if proxied {
      // A proxy's client chose the URL: ~/.netrc's logins are not for it,
      // and a redirect may not lead it past --proxy-allow.
      request.usesNetrc = false
      if !configuration.proxyAllow.isEmpty {
        request.redirectHosts = configuration.proxyAllow.map(\.description)
      }
    }
    do throws(TroveError) {
      let result = try store.fetch(
        request, options: configuration.mirrorFetchOptions, progress: progress)
      let cache: String
      switch result.source {
      case .cache: cache = "hit"
      case .revalidated: cache = "revalidated"
      case .network, .resumed, .delta: cache = "miss"
      }
      metrics.recordMirror(cache: cache, bytes: result.bytesTransferred, originFailed: false)
      return (
        try served(result, cache: cache, rewritesIndexes: !proxied), (result.digest, result.size)
      )
    } catch {
      guard let status = Self.originStatus(error) else { return (.storeFailed(error), nil) }
      metrics.recordMirror(cache: nil, bytes: 0, originFailed: status != 404)
      if status != 404, configuration.staleIfError {
        var offline = request
        offline.mode = .offline
        if let stale = try? store.fetch(offline, options: configuration.mirrorFetchOptions),
          let outcome = try? served(
            stale, cache: "stale", rewritesIndexes: !proxied,
            warning: "111 trove \"Revalidation Failed\"")
        {
          metrics.recordMirror(cache: "stale", bytes: 0, originFailed: false)
          return (outcome, nil)
        }
      }
      return (.refused(status, error.message), nil)
    }
  }

  /// A body as it arrives: the origin's headers, its announced length,
  /// the bytes from the part file (see ``MirrorTransfer``).
  func answerReadAlong(_ request: Request, _ transfer: MirrorTransfer) -> MHD_Result {
    guard let source = transfer.source else {
      return request.text(503, "the transfer ended; try again")
    }
    let stream = Unmanaged.passRetained(
      ReadAlongStream(transfer: transfer, source: source, connection: request.connection)
    ).toOpaque()
    guard
      let response = trove_mhd_create_response_from_callback(
        UInt64(source.total), ObjectResponse.blockSize, readAlongBlock, stream, releaseReadAlong)
    else {
      Unmanaged<ReadAlongStream>.fromOpaque(stream).release()
      return .NO
    }
    Request.add(
      ("Content-Type", source.headers.contentType ?? "application/octet-stream"), to: response)
    for header in source.headers.headers { Request.add(header, to: response) }
    if let etag = source.headers.etag { Request.add(("ETag", etag), to: response) }
    return request.queue(200, response, bodyBytes: source.total)
  }

  /// The outcome for a fetch's result: the headers its key's record holds.
  /// Index pages get their links through the mirrors when
  /// `rewritesIndexes` (a proxy's client reads pages as their origin wrote
  /// them: a link into `/m/` would name the origin's host).
  private func served(
    _ result: FetchResult, cache: String, rewritesIndexes: Bool, warning: String? = nil
  ) throws(TroveError) -> MirrorOutcome {
    let origin = try store.binding(forKey: result.url)?.origin
    var headers: [(String, String)] = [("X-Trove-Cache", cache)]
    if let modified = origin?.lastModified { headers.append(("Last-Modified", modified)) }
    if let warning { headers.append(("Warning", warning)) }
    if rewritesIndexes, let format = PackageIndex.format(of: origin?.contentType),
      result.size <= PackageIndex.maximumSize,
      let page = try store.readObject(result.digest),
      let rewritten = PackageIndex.rewrite(page, format: format, mirrors: configuration.mirrors)
    {
      published.record(rewritten.published)
      // A tag of the bytes sent: the origin's names the page before its links changed.
      let etag = "\"\(XXH3Hasher.digest(rewritten.body).hex)\""
      return .rewritten(
        rewritten.body,
        MirroredHeaders(contentType: origin?.contentType, etag: etag, headers: headers))
    }
    return .served(
      result.digest,
      MirroredHeaders(contentType: origin?.contentType, etag: origin?.etag, headers: headers))
  }

  /// The status for a fetch that failed at its origin: 404 for the
  /// origin's 404 or 410, 504 when it timed out, 502 for any other failure
  /// of the origin or its bytes; nil for a failure of the store.
  static func originStatus(_ error: TroveError) -> Int? {
    switch error.code {
    case .notFound: return 404
    case .transferFailed:
      return error.message.contains("curl error 28") ? 504 : 502
    case .unavailable, .checksumMismatch, .tooLarge, .invalidArgument: return 502
    default: return nil
    }
  }
}

extension Store {
  /// The whole of `digest`'s bytes (decompressed), for a page small enough
  /// to rewrite in memory; nil when the store no longer holds it.
  fileprivate func readObject(_ digest: BlobDigest) throws(TroveError) -> [UInt8]? {
    guard let body = try openBody(digest, recordingRead: false) else { return nil }
    if body.isCompressed {
      let reader = try body.decompressedReader(from: 0)
      var bytes = [UInt8](repeating: 0, count: Int(body.size))
      var filled = 0
      while filled < bytes.count {
        let read = bytes.withUnsafeMutableBytes { buffer in
          Result { () throws(TroveError) in
            try reader.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
          }
        }
        let n = try read.get()
        guard n > 0 else {
          throw TroveError(.corruptObject, "\(digest) ends before its \(body.size) bytes")
        }
        filled += n
      }
      return bytes
    }
    guard let fd = body.takeDescriptor() else { return nil }
    let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    do {
      return Array(try handle.readToEnd() ?? Data())
    } catch {
      throw TroveError(.ioError, "cannot read \(digest): \(error)")
    }
  }
}
