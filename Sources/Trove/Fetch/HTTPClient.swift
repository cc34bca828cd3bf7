import CCurl
import Foundation

/// The response a transfer ended with (the last one, after redirects).
struct HTTPResponseHead: Sendable {
  /// The status code (200, 206, 304, 404…); 0 when no response came.
  var status = 0
  /// The status line's reason phrase ("Not Found"), if the server sent one.
  var reason = ""
  /// Header fields in order, names lowercased.
  var fields: [(name: String, value: String)] = []

  /// The value of `name` (lowercase); several fields of one name are
  /// joined with ", " as HTTP allows.
  func field(_ name: String) -> String? {
    let values = fields.filter { $0.name == name }.map(\.value)
    return values.isEmpty ? nil : values.joined(separator: ", ")
  }
}

/// What a sink says to a piece of the body.
enum HTTPWriteAnswer {
  /// Taken: go on.
  case accepted
  /// Stop the transfer.
  case stop
  /// Not taken yet: pause the transfer and give it again later.
  case pause
}

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

/// A libcurl easy handle, reused for transfer after transfer by one thread
/// (so connections, TLS sessions and DNS answers are reused), run by
/// `curl_easy_perform` or by a shared ``HTTPMulti``. libcurl is
/// called directly, not through URLSession: the write callback feeds the
/// hashers and the file synchronously, so TCP throttles the sender and
/// memory stays bounded; resume, stall limits and redirects are libcurl's.
/// Proxies come from the environment (`http_proxy`, `https_proxy`,
/// `no_proxy`), as with the `curl` command.
final class HTTPClient {
  private let curl: LibCurl
  private let handle: UnsafeMutableRawPointer
  private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))

  /// Runs the transfers when given, while this client's thread handles
  /// their bodies.
  private let multi: HTTPMulti?

  /// A client whose transfers run on the calling thread
  /// (`curl_easy_perform`), or on `multi`'s thread with the body relayed
  /// back to the calling one. Loads libcurl on the first call (see
  /// ``LibCurl``): throws when it cannot be loaded.
  init(multi: HTTPMulti? = nil) throws(TroveError) {
    curl = try LibCurl.loaded()
    guard let handle = curl.easyInit() else {
      throw TroveError(.ioError, "cannot start libcurl: curl_easy_init failed")
    }
    self.handle = handle
    self.multi = multi
  }

  deinit {
    curl.easyCleanup(handle)
    errorBuffer.deallocate()
  }

  /// The context the C callbacks reach through their user pointer.
  private final class Context {
    let sink: any HTTPBodySink
    var head = HTTPResponseHead()
    var began = false
    var stopped = false
    init(sink: any HTTPBodySink) { self.sink = sink }

    func begin() -> Bool {
      guard !began else { return !stopped }
      began = true
      if !sink.begin(head) { stopped = true }
      return !stopped
    }
  }

  /// Runs `request` to its end on this thread, giving the body to `sink`.
  func perform(_ request: HTTPRequest, into sink: any HTTPBodySink) -> HTTPOutcome {
    curl.easyReset(handle)
    errorBuffer[0] = 0
    // Through a multi, libcurl calls back on its thread: into a relay,
    // which this thread drains into `sink`.
    let relay = multi.map { _ in HTTPRelay() }
    let context = Context(sink: relay ?? sink)
    let pointer = Unmanaged.passUnretained(context).toOpaque()
    var list: UnsafeMutablePointer<curl_slist>?
    // Compressed transfer encodings break ranges and would hash the
    // decoded bytes: ask for the bytes as they are.
    for line in ["Accept-Encoding: identity"] + request.headers {
      list = curl.slistAppend(list, line)
    }
    defer { curl.slistFreeAll(list) }
    let o = request.options
    curl.setTransferOptions(
      handle, url: request.url, connectTimeout: o.connectTimeout, stallSpeed: o.stallSpeed,
      stallTimeout: o.stallTimeout, userAgent: o.userAgent)
    trove_curl_set_string(curl.easySetopt, handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
    trove_curl_set_long(curl.easySetopt, handle, CURLOPT_FOLLOWLOCATION, 1)
    trove_curl_set_long(curl.easySetopt, handle, CURLOPT_MAXREDIRS, o.maxRedirects)
    trove_curl_set_list(curl.easySetopt, handle, CURLOPT_HTTPHEADER, list)
    trove_curl_set_pointer(curl.easySetopt, handle, CURLOPT_ERRORBUFFER, errorBuffer)
    if let multi, multi.multiplexes {
      trove_curl_set_long(curl.easySetopt, handle, CURLOPT_PIPEWAIT, 1)
    }
    if request.resumeFrom > 0 {
      trove_curl_set_offset(
        curl.easySetopt, handle, CURLOPT_RESUME_FROM_LARGE, curl_off_t(request.resumeFrom))
    }
    trove_curl_set_pointer(curl.easySetopt, handle, CURLOPT_HEADERDATA, pointer)
    trove_curl_set_data_callback(curl.easySetopt, handle, CURLOPT_HEADERFUNCTION) {
      buffer, size, count, user in
      let context = Unmanaged<Context>.fromOpaque(user!).takeUnretainedValue()
      let n = size * count
      guard let buffer else { return n }
      var line = Substring(
        String(decoding: UnsafeRawBufferPointer(start: buffer, count: n), as: UTF8.self))
      while let last = line.last, last.isNewline { line = line.dropLast() }
      if line.hasPrefix("HTTP/") {
        // A new response (after a redirect, or the first): start over.
        let parts = line.split(separator: " ", maxSplits: 2)
        context.head = HTTPResponseHead(
          status: parts.count > 1 ? Int(parts[1]) ?? 0 : 0,
          reason: parts.count > 2 ? String(parts[2]) : "")
      } else if let colon = line.firstIndex(of: ":") {
        let name = line[..<colon].lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        context.head.fields.append((name, value))
      }
      return n
    }
    trove_curl_set_pointer(curl.easySetopt, handle, CURLOPT_WRITEDATA, pointer)
    trove_curl_set_data_callback(curl.easySetopt, handle, CURLOPT_WRITEFUNCTION) {
      buffer, size, count, user in
      let context = Unmanaged<Context>.fromOpaque(user!).takeUnretainedValue()
      let n = size * count
      guard context.begin() else { return 0 }
      guard n > 0 else { return n }
      switch context.sink.write(UnsafeRawBufferPointer(start: buffer, count: n)) {
      case .accepted: return n
      case .pause where context.sink is HTTPRelay:
        return 0x1000_0001  // CURL_WRITEFUNC_PAUSE: the relay's job resumes it
      case .pause:  // nothing would resume it
        context.stopped = true
        return 0
      case .stop:
        context.stopped = true
        return 0
      }
    }
    trove_curl_set_long(curl.easySetopt, handle, CURLOPT_NOPROGRESS, 0)
    trove_curl_set_pointer(curl.easySetopt, handle, CURLOPT_XFERINFODATA, pointer)
    trove_curl_set_progress_callback(curl.easySetopt, handle) { user, total, now, _, _ in
      let context = Unmanaged<Context>.fromOpaque(user!).takeUnretainedValue()
      guard context.began else { return 0 }
      let going = context.sink.progress(
        received: Int64(now), expected: total > 0 ? Int64(total) : nil)
      return going ? 0 : 1
    }
    var code: CURLcode
    var stopped = false
    if let multi, let relay {
      multi.start(handle, relay: relay)
      let handle = self.handle
      (code, stopped) = relay.drain(into: sink) { multi.resume(handle) }
      // A response without a body (304, an empty file) calls no write.
      if code == CURLE_OK, !context.began, !stopped, !sink.begin(context.head) {
        stopped = true
        code = CURLE_WRITE_ERROR
      }
    } else {
      code = curl.easyPerform(handle)
      if code == CURLE_OK, !context.began, !context.begin() { code = CURLE_WRITE_ERROR }
      stopped = context.stopped
    }
    var effective: UnsafeMutablePointer<CChar>?
    trove_curl_get_string(curl.easyGetinfo, handle, CURLINFO_EFFECTIVE_URL, &effective)
    let detail = String(cString: errorBuffer)
    return HTTPOutcome(
      code: code,
      message: detail.isEmpty ? curl.message(code) : detail,
      head: context.head, effectiveURL: effective.map { String(cString: $0) },
      stoppedBySink: stopped)
  }
}
