import CCurl
import Foundation

/// Where a transfer's body goes: called in order, by one thread at a time.
protocol HTTPBodySink: AnyObject {
  /// The last response's head is in and its body (maybe empty) follows;
  /// false stops the transfer.
  func begin(_ head: HTTPResponseHead) -> Bool
  /// The next piece of the body.
  func write(_ bytes: UnsafeRawBufferPointer) -> HTTPWriteAnswer
  /// Body bytes received so far in this response, and how many it has in
  /// all when the server said; false stops the transfer.
  func progress(received: Int64, expected: Int64?) -> Bool
}

/// One HTTP GET.
struct HTTPRequest {
  var url: String
  /// Extra header lines, `Name: value`.
  var headers: [String] = []
  /// Ask for the body from this offset on (a `Range` request); libcurl
  /// refuses an answer that does not start there.
  var resumeFrom: Int64 = 0
  var options: FetchOptions
}

/// How a transfer ended.
struct HTTPOutcome {
  /// libcurl's result (`CURLE_OK` for a complete transfer).
  var code: CURLcode
  /// libcurl's message for a failure.
  var message: String
  /// The last response, if any came.
  var head: HTTPResponseHead
  /// The URL after redirects.
  var effectiveURL: String?
  /// Whether the sink stopped it.
  var stoppedBySink: Bool

  var succeeded: Bool { code == CURLE_OK && !stoppedBySink }
}

/// The fetch path's HTTP GETs, on one reused ``HTTPHandle``, run by
/// `curl_easy_perform` on the calling thread or by a shared ``HTTPMulti``.
final class HTTPClient {
  private let handle: HTTPHandle

  /// Runs the transfers when given, while this client's thread handles
  /// their bodies.
  private let multi: HTTPMulti?

  /// A client whose transfers run on the calling thread
  /// (`curl_easy_perform`), or on `multi`'s thread with the body relayed
  /// back to the calling one. Loads libcurl on the first call (see
  /// ``LibCurl``): throws when it cannot be loaded.
  init(multi: HTTPMulti? = nil) throws(TroveError) {
    handle = try HTTPHandle()
    self.multi = multi
  }

  /// A transfer's callbacks, handing the body to a sink once the last
  /// response's head is in.
  private final class Exchange: HTTPExchange {
    let sink: any HTTPBodySink
    var began = false
    var stopped = false
    init(sink: any HTTPBodySink) { self.sink = sink }

    func begin() -> Bool {
      guard !began else { return !stopped }
      began = true
      if !sink.begin(head) { stopped = true }
      return !stopped
    }

    override func body(_ bytes: UnsafeRawBufferPointer) -> HTTPWriteAnswer {
      guard begin() else { return .stop }
      guard !bytes.isEmpty else { return .accepted }
      switch sink.write(bytes) {
      case .accepted: return .accepted
      case .pause where sink is HTTPRelay: return .pause  // the relay's job resumes it
      case .pause, .stop:  // nothing would resume a pause
        stopped = true
        return .stop
      }
    }

    override var reportsProgress: Bool { true }

    override func progress(received: Int64, expected: Int64?) -> Bool {
      guard began else { return true }
      return sink.progress(received: received, expected: expected)
    }
  }

  /// Runs `request` to its end on this thread, giving the body to `sink`.
  func perform(_ request: HTTPRequest, into sink: any HTTPBodySink) -> HTTPOutcome {
    // Through a multi, libcurl calls back on its thread: into a relay,
    // which this thread drains into `sink`.
    let relay = multi.map { _ in HTTPRelay() }
    let exchange = Exchange(sink: relay ?? sink)
    let o = request.options
    let setup = HTTPHandle.Request(
      url: request.url, headers: request.headers, connectTimeout: o.connectTimeout,
      stallSpeed: o.stallSpeed, stallTimeout: o.stallTimeout, userAgent: o.userAgent,
      maxRedirects: o.maxRedirects, resumeFrom: request.resumeFrom,
      waitsToMultiplex: multi?.multiplexes ?? false)
    var stopped = false
    let ending = handle.perform(setup, exchange) { easy in
      var code: CURLcode
      if let multi, let relay {
        multi.start(easy, relay: relay)
        (code, stopped) = relay.drain(into: sink) { multi.resume(easy) }
        // A response without a body (304, an empty file) calls no write.
        if code == CURLE_OK, !exchange.began, !stopped, !sink.begin(exchange.head) {
          stopped = true
          code = CURLE_WRITE_ERROR
        }
      } else {
        code = handle.curl.easyPerform(easy)
        if code == CURLE_OK, !exchange.began, !exchange.begin() { code = CURLE_WRITE_ERROR }
        stopped = exchange.stopped
      }
      return code
    }
    return HTTPOutcome(
      code: ending.code, message: ending.message, head: exchange.head,
      effectiveURL: ending.effectiveURL, stoppedBySink: stopped)
  }
}
