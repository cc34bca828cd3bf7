import CCurl
import Foundation

/// A libcurl easy handle, reused for request after request by one thread
/// (so connections, TLS sessions and DNS answers are reused): the one
/// place a request is set up and its response's head read, for the fetch
/// path (``HTTPClient``) and the WebDAV remotes (``RemoteHTTPTransfer``).
/// libcurl is called directly, not through URLSession: the write callback
/// hands the body over synchronously, so TCP throttles the sender and
/// memory stays bounded; resume and stall limits are libcurl's (redirects
/// too when ``Request/maxRedirects`` is set; the fetch path follows them
/// itself, to decide what goes along).
///
/// Every request is HTTP or HTTPS (redirects too), sends no signal, keeps
/// TCP alive, has a connect timeout and a stall limit — below `stallSpeed`
/// bytes a second for `stallTimeout` seconds is a failure — and never a
/// limit on the whole transfer, a 512 KiB receive buffer, asks for the
/// bytes as they are (`Accept-Encoding: identity`: compressed transfer
/// encodings break ranges and would hash the decoded bytes), sends a body
/// without an `Expect: 100-continue` round trip, and says it is Trove
/// (``TroveVersion/userAgent``). Proxies come from the environment
/// (`http_proxy`, `https_proxy`, `no_proxy`), as with the `curl` command.
final class HTTPHandle {
  /// One request.
  struct Request {
    /// `GET`, `HEAD`, `PUT` (with a body) or any other method.
    var method = "GET"
    var url: String
    /// Extra header lines, `Name: value`.
    var headers: [String] = []
    /// Seconds to wait for a connection.
    var connectTimeout: Double
    /// Bytes a second below which, for ``stallTimeout`` seconds, a
    /// transfer has stalled and fails.
    var stallSpeed: Int
    /// See ``stallSpeed``.
    var stallTimeout: Double
    var userAgent = TroveVersion.userAgent
    /// Redirects followed at most (one more is an error); nil follows none.
    var maxRedirects: Int?
    /// Ask for the body from this offset on (a `Range` request); libcurl
    /// refuses an answer that does not start there.
    var resumeFrom: Int64 = 0
    /// The length of the body the exchange's ``HTTPExchange/read(into:)``
    /// gives; nil sends none.
    var bodySize: Int64?
    /// `user:password` for basic authentication.
    var login: String?
    /// Whether `~/.netrc`'s login is used when it names the host.
    var usesNetrc = false
    /// AWS Signature Version 4 by libcurl (`aws:amz:REGION:SERVICE`), with
    /// ``login`` as `ACCESS_KEY_ID:SECRET_ACCESS_KEY`; nil signs nothing.
    var awsSigV4: String?
    /// A file of PEM certificates to verify the server's with, instead of
    /// the system's (`AWS_CA_BUNDLE`): only these are trusted. Nil trusts
    /// the system's.
    var caBundle: String?
    /// Whether the request waits for a connection being set up, to be
    /// multiplexed over it, rather than opening another.
    var waitsToMultiplex = false
  }

  /// How a request ended.
  struct Ending {
    /// libcurl's result (`CURLE_OK` when the exchange completed).
    var code: CURLcode
    /// libcurl's message for a failure.
    var message: String
    /// The URL after redirects.
    var effectiveURL: String?
    /// Where a redirect that was not followed points (its `Location`,
    /// resolved against the URL).
    var redirectURL: String?
  }

  let curl: LibCurl
  private let handle: LibCurl.Easy
  /// The header lines of the request set up last (libcurl reads them
  /// while it runs).
  private var headerLines: UnsafeMutablePointer<curl_slist>?
  private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))

  /// Loads libcurl on the first call (see ``LibCurl``): throws when it
  /// cannot be loaded.
  init() throws(TroveError) {
    curl = try LibCurl.loaded()
    guard let handle = curl.easyInit() else {
      throw TroveError(.ioError, "cannot start libcurl: curl_easy_init failed")
    }
    self.handle = handle
  }

  deinit {
    curl.easyCleanup(handle)
    curl.slistFreeAll(headerLines)
    errorBuffer.deallocate()
  }

  /// Sets `request` up, its callbacks going to `exchange`, and runs it to
  /// its end on this thread (`curl_easy_perform`).
  func perform(_ request: Request, _ exchange: HTTPExchange) -> Ending {
    perform(request, exchange) { curl.easyPerform($0) }
  }

  /// Sets `request` up, its callbacks going to `exchange`, and runs it to
  /// its end with `run`, which is given the handle and returns libcurl's
  /// result.
  func perform(
    _ request: Request, _ exchange: HTTPExchange, run: (LibCurl.Easy) -> CURLcode
  ) -> Ending {
    ending(run(prepare(request, exchange)))
  }

  /// Sets `request` up on the handle, its callbacks going to `exchange`
  /// (which the caller keeps alive until the transfer ends), for the
  /// caller to run — `curl_easy_perform`, or a multi handle it drives;
  /// ``ending(_:)`` then reads how it ended. The handle holds the request's
  /// header lines until the next request is set up.
  func prepare(_ request: Request, _ exchange: HTTPExchange) -> LibCurl.Easy {
    curl.easyReset(handle)
    curl.slistFreeAll(headerLines)
    headerLines = nil
    errorBuffer[0] = 0
    let pointer = Unmanaged.passUnretained(exchange).toOpaque()
    var list: UnsafeMutablePointer<curl_slist>?
    // libcurl 7.88 signs a removed header ("Expect:") as an empty one it
    // never sends, so a signed request keeps curl's Expect: 100-continue.
    let removed = request.awsSigV4 == nil ? ["Expect:"] : []
    for line in ["Accept-Encoding: identity"] + removed + request.headers {
      list = curl.slistAppend(list, line)
    }
    headerLines = list
    let setopt = curl.easySetopt
    trove_curl_set_string(setopt, handle, CURLOPT_URL, request.url)
    trove_curl_set_string(setopt, handle, CURLOPT_PROTOCOLS_STR, "http,https")
    trove_curl_set_long(setopt, handle, CURLOPT_NOSIGNAL, 1)
    trove_curl_set_long(setopt, handle, CURLOPT_TCP_KEEPALIVE, 1)
    trove_curl_set_long(
      setopt, handle, CURLOPT_CONNECTTIMEOUT_MS, Int(request.connectTimeout * 1000))
    trove_curl_set_long(setopt, handle, CURLOPT_LOW_SPEED_LIMIT, max(1, request.stallSpeed))
    trove_curl_set_long(
      setopt, handle, CURLOPT_LOW_SPEED_TIME, max(1, Int(request.stallTimeout.rounded(.up))))
    trove_curl_set_long(setopt, handle, CURLOPT_BUFFERSIZE, 512 * 1024)
    trove_curl_set_string(setopt, handle, CURLOPT_USERAGENT, request.userAgent)
    trove_curl_set_list(setopt, handle, CURLOPT_HTTPHEADER, list)
    trove_curl_set_pointer(setopt, handle, CURLOPT_ERRORBUFFER, errorBuffer)
    if let redirects = request.maxRedirects {
      trove_curl_set_long(setopt, handle, CURLOPT_FOLLOWLOCATION, 1)
      trove_curl_set_long(setopt, handle, CURLOPT_MAXREDIRS, redirects)
      trove_curl_set_string(setopt, handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
    }
    if request.usesNetrc {
      trove_curl_set_long(setopt, handle, CURLOPT_NETRC, 1)  // CURL_NETRC_OPTIONAL
    }
    if let login = request.login {
      trove_curl_set_string(setopt, handle, CURLOPT_USERPWD, login)
    }
    if let scope = request.awsSigV4 {
      trove_curl_set_string(setopt, handle, CURLOPT_AWS_SIGV4, scope)
    }
    if let caBundle = request.caBundle {
      // Only these: libcurl's default folder of the system's certificates
      // would be trusted beside them.
      trove_curl_set_string(setopt, handle, CURLOPT_CAINFO, caBundle)
      trove_curl_set_pointer(setopt, handle, CURLOPT_CAPATH, nil)
    }
    if request.waitsToMultiplex {
      trove_curl_set_long(setopt, handle, CURLOPT_PIPEWAIT, 1)
    }
    if request.resumeFrom > 0 {
      trove_curl_set_offset(
        setopt, handle, CURLOPT_RESUME_FROM_LARGE, curl_off_t(request.resumeFrom))
    }
    switch request.method {
    case "GET": break
    case "HEAD": trove_curl_set_long(setopt, handle, CURLOPT_NOBODY, 1)
    case "PUT" where request.bodySize != nil: break  // CURLOPT_UPLOAD makes it a PUT
    default: trove_curl_set_string(setopt, handle, CURLOPT_CUSTOMREQUEST, request.method)
    }
    if let size = request.bodySize {
      trove_curl_set_long(setopt, handle, CURLOPT_UPLOAD, 1)
      // Fewer, larger reads of a file than libcurl's default 64 KiB.
      trove_curl_set_long(setopt, handle, CURLOPT_UPLOAD_BUFFERSIZE, 1 << 20)
      trove_curl_set_offset(setopt, handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(size))
      trove_curl_set_pointer(setopt, handle, CURLOPT_READDATA, pointer)
      trove_curl_set_data_callback(setopt, handle, CURLOPT_READFUNCTION) {
        buffer, size, count, user in
        let exchange = Unmanaged<HTTPExchange>.fromOpaque(user!).takeUnretainedValue()
        guard let buffer else { return 0 }
        let target = UnsafeMutableRawBufferPointer(start: buffer, count: size * count)
        return exchange.read(into: target) ?? 0x1000_0000  // CURL_READFUNC_ABORT
      }
    }
    trove_curl_set_pointer(setopt, handle, CURLOPT_HEADERDATA, pointer)
    trove_curl_set_data_callback(setopt, handle, CURLOPT_HEADERFUNCTION) {
      buffer, size, count, user in
      let exchange = Unmanaged<HTTPExchange>.fromOpaque(user!).takeUnretainedValue()
      let n = size * count
      exchange.head.add(line: UnsafeRawBufferPointer(start: buffer, count: n))
      return n
    }
    trove_curl_set_pointer(setopt, handle, CURLOPT_WRITEDATA, pointer)
    trove_curl_set_data_callback(setopt, handle, CURLOPT_WRITEFUNCTION) {
      buffer, size, count, user in
      let exchange = Unmanaged<HTTPExchange>.fromOpaque(user!).takeUnretainedValue()
      let n = size * count
      switch exchange.body(UnsafeRawBufferPointer(start: buffer, count: n)) {
      case .accepted: return n
      case .pause: return 0x1000_0001  // CURL_WRITEFUNC_PAUSE
      case .stop: return 0
      }
    }
    if exchange.reportsProgress {
      trove_curl_set_long(setopt, handle, CURLOPT_NOPROGRESS, 0)
      trove_curl_set_pointer(setopt, handle, CURLOPT_XFERINFODATA, pointer)
      trove_curl_set_progress_callback(setopt, handle) { user, total, now, _, _ in
        let exchange = Unmanaged<HTTPExchange>.fromOpaque(user!).takeUnretainedValue()
        let going = exchange.progress(
          received: Int64(now), expected: total > 0 ? Int64(total) : nil)
        return going ? 0 : 1
      }
    }
    return handle
  }

  /// How the transfer set up by ``prepare(_:_:)`` ended with `code`.
  func ending(_ code: CURLcode) -> Ending {
    var effective: UnsafeMutablePointer<CChar>?
    trove_curl_get_string(curl.easyGetinfo, handle, CURLINFO_EFFECTIVE_URL, &effective)
    var redirect: UnsafeMutablePointer<CChar>?
    trove_curl_get_string(curl.easyGetinfo, handle, CURLINFO_REDIRECT_URL, &redirect)
    let detail = String(cString: errorBuffer)
    return Ending(
      code: code, message: detail.isEmpty ? curl.message(code) : detail,
      effectiveURL: effective.map { String(cString: $0) },
      redirectURL: redirect.map { String(cString: $0) })
  }
}

/// What is done with a piece of a response's body.
enum HTTPWriteAnswer {
  /// Taken: go on.
  case accepted
  /// Stop the transfer.
  case stop
  /// Not taken yet: pause the transfer and give it again later.
  case pause
}

/// One request's side of libcurl's callbacks: the response's head, read
/// as it comes (``head``), and what a subclass does with the body, the
/// progress and the body it sends. Called on the thread running the
/// request, one callback at a time.
class HTTPExchange {
  /// The head of the latest response so far (after redirects, the last).
  final var head = HTTPResponseHead()

  /// Whether ``progress(received:expected:)`` is to be called.
  var reportsProgress: Bool { false }

  /// The next piece of the body; by default, taken and dropped.
  func body(_ bytes: UnsafeRawBufferPointer) -> HTTPWriteAnswer { .accepted }

  /// Body bytes received so far in this response, and how many it has in
  /// all when the server said; false stops the transfer.
  func progress(received: Int64, expected: Int64?) -> Bool { true }

  /// Fills the start of `buffer` with the next bytes of the body sent:
  /// how many (0 at its end), or nil to stop the transfer.
  func read(into buffer: UnsafeMutableRawBufferPointer) -> Int? { 0 }
}
