import CCurl
import Foundation
import Synchronization

/// One libcurl multi handle that runs the transfers of several threads on
/// a thread of its own: connections (and TLS sessions, DNS answers) are
/// shared by all of them, and requests to one HTTP/2 server are multiplexed
/// over one connection. A thread hands its easy handle over with
/// ``perform(_:)`` and waits; the body callbacks run on the multi's thread
/// meanwhile, one transfer's at a time in order, as libcurl allows.
///
/// Multiplexing is off when a proxy is set in the environment: libcurl
/// before 8.0 (Debian 12 has 7.88) mishandles it through proxies (cargo
/// #12234).
final class HTTPMulti: Sendable {
  private final class Job: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer
    let done = DispatchSemaphore(value: 0)
    /// Written by the multi's thread before `done` is signalled.
    var code = CURLE_OK
    init(handle: UnsafeMutableRawPointer) { self.handle = handle }
  }

  private struct Queue {
    var pending: [Job] = []
    var stopping = false
  }

  private struct Handle: @unchecked Sendable { let raw: UnsafeMutableRawPointer }

  private let multi: Handle
  private let queue = Mutex(Queue())
  private let finished = DispatchSemaphore(value: 0)

  init() throws(TroveError) {
    guard HTTPClient.libraryReady, let multi = curl_multi_init() else {
      throw TroveError(.ioError, "cannot start libcurl: curl_multi_init failed")
    }
    self.multi = Handle(raw: multi)
    let env = ProcessInfo.processInfo.environment
    let proxied = ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]
      .contains { !(env[$0] ?? "").isEmpty }
    trove_curl_multi_set_long(multi, CURLMOPT_PIPELINING, proxied ? 0 : 2)  // CURLPIPE_MULTIPLEX
    let thread = Thread { [self] in run() }
    thread.name = "trove-curl-multi"
    thread.start()
  }

  /// Runs the transfer set up on `handle` to its end and returns libcurl's
  /// result, as `curl_easy_perform` would.
  func perform(_ handle: UnsafeMutableRawPointer) -> CURLcode {
    let job = Job(handle: handle)
    queue.withLock { $0.pending.append(job) }
    curl_multi_wakeup(multi.raw)
    job.done.wait()
    return job.code
  }

  /// Stops the thread once no transfer is running; the handle is freed.
  /// Call once, after every ``perform(_:)`` returned.
  func shutdown() {
    queue.withLock { $0.stopping = true }
    curl_multi_wakeup(multi.raw)
    finished.wait()
    curl_multi_cleanup(multi.raw)
  }

  private func run() {
    let multi = self.multi.raw
    var running: [UnsafeMutableRawPointer: Job] = [:]
    while true {
      let (new, stopping) = queue.withLock { q in
        defer { q.pending.removeAll() }
        return (q.pending, q.stopping)
      }
      for job in new {
        if curl_multi_add_handle(multi, job.handle) == CURLM_OK {
          running[job.handle] = job
        } else {
          job.code = CURLE_FAILED_INIT
          job.done.signal()
        }
      }
      if stopping && running.isEmpty { break }
      var active: Int32 = 0
      curl_multi_perform(multi, &active)
      var left: Int32 = 0
      while let message = curl_multi_info_read(multi, &left) {
        guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else {
          continue
        }
        let code = message.pointee.data.result
        curl_multi_remove_handle(multi, easy)
        if let job = running.removeValue(forKey: easy) {
          job.code = code
          job.done.signal()
        }
      }
      curl_multi_poll(multi, nil, 0, 1000, nil)
    }
    finished.signal()
  }
}
