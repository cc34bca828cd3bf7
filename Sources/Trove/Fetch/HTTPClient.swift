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
  /// Whether ``progress(received:expected:)`` is to be called: each call
  /// of libcurl's, many a second, costs the transfer's thread.
  var wantsProgress: Bool { get }
}

extension HTTPBodySink {
  var wantsProgress: Bool { true }
}

/// One HTTP GET.
struct HTTPRequest {
  var url: String
  /// The origin of `url`, when the caller parsed it already.
  var origin: HTTPOrigin?
  /// Extra header lines, `Name: value`, sent to every URL a redirect leads to.
  var headers: [String] = []
  /// The user's header lines and login (`user:password`): sent to the
  /// URL's own origin only, never to another a redirect leads to.
  var originHeaders: [String] = []
  var login: String?
  /// Whether `~/.netrc`'s login for the URL's host may go with it: to the
  /// URL's own origin only, never to another a redirect leads to (an
  /// origin could otherwise send this user's login for a private host
  /// there, and the bytes into a store others read).
  var usesNetrc = true
  /// The hosts a redirect may lead to (``FetchRequest/redirectHosts``);
  /// nil for any.
  var redirectHosts: [String]?
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
  /// Why a redirect was not followed (to another scheme, from https://
  /// to http://, past the limit); the transfer ended there.
  var refusedRedirect: String?

  var succeeded: Bool { code == CURLE_OK && !stoppedBySink && refusedRedirect == nil }
}

/// The fetch path's HTTP GETs, on one reused ``HTTPHandle``, run by
/// `curl_easy_perform` on the calling thread or by a shared ``HTTPMulti``.
/// Redirects are followed here, not by libcurl, which would send the
/// user's headers on to another host: each hop is decided by
/// `HTTPOrigin.redirect(from:to:)`.
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
  /// response's head is in; a redirect's body is dropped.
  final class Exchange: HTTPExchange {
    let sink: any HTTPBodySink
    var began = false
    var stopped = false
    /// The response is a redirect, to be followed by the client.
    var redirects = false
    private let wantsProgress: Bool
    init(sink: any HTTPBodySink, wantsProgress: Bool) {
      self.sink = sink
      self.wantsProgress = wantsProgress
    }

    func begin() -> Bool {
      if redirects { return true }
      guard !began else { return !stopped }
      if HTTPClient.isRedirect(head) {
        redirects = true
        return true
      }
      began = true
      if !sink.begin(head) { stopped = true }
      return !stopped
    }

    override func body(_ bytes: UnsafeRawBufferPointer) -> HTTPWriteAnswer {
      guard begin() else { return .stop }
      guard !bytes.isEmpty, !redirects else { return .accepted }
      switch sink.write(bytes) {
      case .accepted: return .accepted
      case .pause where sink is HTTPRelay: return .pause  // the relay's job resumes it
      case .pause, .stop:  // nothing would resume a pause
        stopped = true
        return .stop
      }
    }

    override var reportsProgress: Bool { wantsProgress }

    /// libcurl's result for a transfer whose callbacks ran on the thread
    /// that ended it with `code`, and whether the sink stopped it: a
    /// response without a body (304, an empty file) called no write.
    func ended(with code: CURLcode) -> (CURLcode, stopped: Bool) {
      if code == CURLE_OK, !began, !begin() { return (CURLE_WRITE_ERROR, stopped) }
      return (code, stopped)
    }

    override func progress(received: Int64, expected: Int64?) -> Bool {
      guard began else { return true }
      return sink.progress(received: received, expected: expected)
    }
  }

  /// The statuses libcurl would follow, when they name a `Location`.
  static func isRedirect(_ head: HTTPResponseHead) -> Bool {
    [301, 302, 303, 307, 308].contains(head.status) && head.field("location") != nil
  }

  /// Runs `request` to its end on this thread, giving the body to `sink`,
  /// following redirects: at most ``FetchOptions/maxRedirects``, only to
  /// http:// and https://, never from https:// to http://; the user's
  /// headers and login go only to the request's own origin.
  func perform(_ request: HTTPRequest, into sink: any HTTPBodySink) -> HTTPOutcome {
    var hops = Hops(request)
    while true {
      let (result, redirect) = perform(
        hops.setup(multiplexes: multi?.multiplexes ?? false), into: sink)
      guard let next = redirect else { return result }
      if let refused = hops.follow(next, after: result) { return refused }
    }
  }

  /// The hops of one request: its own URL, then each one a redirect leads
  /// to, while the rules let it be followed.
  struct Hops {
    let request: HTTPRequest
    let origin: HTTPOrigin?
    /// The URL of the hop to make next.
    private(set) var url: String
    private var followed = 0

    init(_ request: HTTPRequest) {
      self.request = request
      origin = request.origin ?? HTTPOrigin(request.url)
      url = request.url
    }

    /// The setup of the hop to make next (``HTTPClient/setup(_:hop:origin:multiplexes:)``).
    func setup(multiplexes: Bool) -> HTTPHandle.Request {
      HTTPClient.setup(request, hop: url, origin: origin, multiplexes: multiplexes)
    }

    /// Follows the hop that ended in `outcome` with a redirect to `next`:
    /// nil when it is to be made next, else the outcome, its redirect
    /// refused — to a scheme other than http:// or https://, from https://
    /// to http://, to a host not among ``HTTPRequest/redirectHosts``, past
    /// ``FetchOptions/maxRedirects``.
    mutating func follow(_ next: String, after outcome: HTTPOutcome) -> HTTPOutcome? {
      var refused = outcome
      switch HTTPOrigin.redirect(from: url, to: next) {
      case .refuse(let why):
        refused.refusedRedirect = why
        return refused
      case .follow:
        break
      }
      if let hosts = request.redirectHosts, HTTPOrigin(next)?.isNamed(by: hosts) != true {
        refused.refusedRedirect =
          "redirected to '\(URLUserinfo.split(next).url)', a host this fetch may not reach"
        return refused
      }
      followed += 1
      if followed > request.options.maxRedirects {
        refused.refusedRedirect =
          "more than \(request.options.maxRedirects) redirects (the last to '\(URLUserinfo.split(next).url)')"
        return refused
      }
      // A login the server puts in a Location is not ours to send or keep.
      url = URLUserinfo.split(next).url
      return nil
    }
  }

  /// The setup of one hop of `request` (whose origin is `origin`): to
  /// `url`, which is the request's own URL or one a redirect led to. The
  /// user's headers and login go only to the request's own origin.
  static func setup(_ request: HTTPRequest, hop url: String, origin: HTTPOrigin?, multiplexes: Bool)
    -> HTTPHandle.Request
  {
    let hop = url == request.url ? origin : HTTPOrigin(url)
    let own = origin != nil && hop == origin
    // ~/.netrc names a login per host: for a hop with no login of its
    // own, and never one that would carry it in clear.
    let login = own ? request.login : nil
    let o = request.options
    var setup = HTTPHandle.Request(
      url: url, headers: request.headers + (own ? request.originHeaders : []),
      connectTimeout: o.connectTimeout, stallSpeed: o.stallSpeed, stallTimeout: o.stallTimeout,
      userAgent: o.userAgent, maxRedirects: nil, resumeFrom: request.resumeFrom, login: login,
      waitsToMultiplex: multiplexes)
    setup.usesNetrc = own && request.usesNetrc && login == nil && hop?.exposesCredentials == false
    return setup
  }

  /// One request, no redirect followed: its outcome, and where it
  /// redirects to when it does.
  private func perform(_ setup: HTTPHandle.Request, into sink: any HTTPBodySink) -> (
    result: HTTPOutcome, redirect: String?
  ) {
    // Through a multi, libcurl calls back on its thread: into a relay,
    // which this thread drains into `sink`.
    let relay = multi.map { _ in HTTPRelay(holdsSmallBodies: !sink.wantsProgress) }
    let exchange = Exchange(sink: relay ?? sink, wantsProgress: sink.wantsProgress)
    var stopped = false
    let ending = handle.perform(setup, exchange) { easy in
      var code: CURLcode
      if let multi, let relay {
        multi.start(easy, relay: relay)
        (code, stopped) = relay.drain(into: sink) { multi.resume(easy) }
        // A response without a body (304, an empty file, most redirects)
        // calls no write.
        if code == CURLE_OK, !exchange.began, !exchange.redirects, !stopped {
          if HTTPClient.isRedirect(exchange.head) {
            exchange.redirects = true
          } else if !sink.begin(exchange.head) {
            stopped = true
            code = CURLE_WRITE_ERROR
          }
        }
      } else {
        (code, stopped) = exchange.ended(with: handle.curl.easyPerform(easy))
      }
      return code
    }
    return Self.outcome(ending, exchange, stopped: stopped, sink: sink)
  }

  /// The outcome of one hop that ended as `ending`, its callbacks having
  /// gone to `exchange` (`stopped`: the sink stopped it), and where it
  /// redirects to when it does; `sink` is the body's.
  static func outcome(
    _ ending: HTTPHandle.Ending, _ exchange: Exchange, stopped: Bool, sink: any HTTPBodySink
  ) -> (result: HTTPOutcome, redirect: String?) {
    var stopped = stopped
    var redirects = ending.code == CURLE_OK && !stopped && exchange.redirects
    if redirects && ending.redirectURL == nil {
      // A Location libcurl cannot resolve: the answer is the redirect itself.
      redirects = false
      if !sink.begin(exchange.head) { stopped = true }
    }
    let result = HTTPOutcome(
      code: ending.code, message: ending.message, head: exchange.head,
      effectiveURL: ending.effectiveURL.map { URLUserinfo.split($0).url },
      stoppedBySink: stopped)
    return (result, redirects ? ending.redirectURL : nil)
  }
}

/// A fetch's ``HTTPClient``, made by its first ``get()``: a fetch that the
/// cache answers needs no client, so it neither loads libcurl (and the
/// libraries it brings in) nor fails when libcurl is missing.
final class LazyHTTPClient {
  private var made: HTTPClient?
  private let make: () throws(TroveError) -> HTTPClient

  init(_ make: @escaping () throws(TroveError) -> HTTPClient) { self.make = make }

  /// The client, made on the first call; a failure is thrown again by the
  /// next call.
  func get() throws(TroveError) -> HTTPClient {
    if let made { return made }
    let client = try make()
    made = client
    return client
  }
}
