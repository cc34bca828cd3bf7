import CCurl
import Foundation
import Synchronization

/// One libcurl multi handle driving the transfers of several job threads
/// from a thread of its own: connections (and TLS sessions, DNS answers)
/// are shared by all of them, and requests to an HTTP/2 server are
/// multiplexed over one connection.
///
/// The multi's thread only moves bytes. Each transfer's body goes through
/// a ``HTTPRelay`` — a bounded queue — to the job thread that asked for it,
/// which hashes and writes it there; a full queue pauses that transfer
/// alone (`CURL_WRITEFUNC_PAUSE`) until its job catches up. A slow disk or
/// a job waiting for a sweep thus slows its own transfer, never the others
/// (on its own connection; see below for HTTP/2).
///
/// HTTP/2 multiplexing is used only with libcurl 8 or later and no proxy
/// in the environment. Before 8.0 (Debian 12 has 7.88), a paused stream
/// stops libcurl reading its whole HTTP/2 connection — one job behind would
/// stall its neighbours — and multiplexing through proxies is mishandled
/// (cargo #12234). Then each transfer gets a connection of its own (reused
/// from one URL to the next).
final class HTTPMulti: Sendable {
  private struct Handle: @unchecked Sendable { let raw: UnsafeMutableRawPointer }

  private struct Queue {
    var pending: [(Handle, HTTPRelay)] = []
    var unpause: [Handle] = []
    var stopping = false
  }

  private let curl: LibCurl
  private let multi: Handle
  private let queue = Mutex(Queue())
  private let finished = DispatchSemaphore(value: 0)
  /// Whether requests wait to be multiplexed over a connection being set up.
  let multiplexes: Bool
  /// Free places for transfers, when their number is bounded: a job takes
  /// one to start a transfer and it is given back when the transfer ends.
  private let places: DispatchSemaphore?

  /// With `connections`, that many idle connections are kept at least
  /// (libcurl's own bound follows the transfers running at the moment, and
  /// closes connections a moment later transfers would reuse). With
  /// `transfers`, at most that many run at once, whatever the number of
  /// jobs: ``start(_:relay:)`` waits for a place.
  init(keeping connections: Int? = nil, transfers: Int? = nil) throws(TroveError) {
    places = transfers.map { DispatchSemaphore(value: max(1, $0)) }
    curl = try LibCurl.loaded()
    guard let multi = curl.multiInit() else {
      throw TroveError(.ioError, "cannot start libcurl: curl_multi_init failed")
    }
    self.multi = Handle(raw: multi)
    if let connections {
      trove_curl_multi_set_long(curl.multiSetopt, multi, CURLMOPT_MAXCONNECTS, connections)
    }
    multiplexes = Self.setMultiplexing(multi, curl)
    let thread = Thread { [self] in run() }
    thread.name = "trove-curl-multi"
    thread.start()
  }

  /// Whether requests to an HTTP/2 server are multiplexed over one
  /// connection: not with libcurl before 8.0, nor with a proxy in the
  /// environment (see above).
  static func multiplexes(_ curl: LibCurl) -> Bool {
    let proxied = ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]
      .contains { !(EnvironmentVariables.value($0) ?? "").isEmpty }
    let version = curl.versionInfo(CURLVERSION_FIRST)?.pointee.version_num ?? 0
    return !proxied && version >= 0x08_00_00
  }

  /// Turns multiplexing off on `multi` where it is not to be used
  /// (``multiplexes(_:)``); returns whether it is used.
  static func setMultiplexing(_ multi: LibCurl.Multi, _ curl: LibCurl) -> Bool {
    let used = multiplexes(curl)
    if !used { trove_curl_multi_set_long(curl.multiSetopt, multi, CURLMOPT_PIPELINING, 0) }
    return used
  }

  /// Starts the transfer set up on `handle` (once there is a place for
  /// it); its body and its end reach `relay`.
  func start(_ handle: UnsafeMutableRawPointer, relay: HTTPRelay) {
    places?.wait()
    let accepted = queue.withLock { q in
      guard !q.stopping else { return false }
      q.pending.append((Handle(raw: handle), relay))
      return true
    }
    guard accepted else {
      end(relay, CURLE_FAILED_INIT)
      return
    }
    _ = curl.multiWakeup(multi.raw)
  }

  /// Ends a started transfer with `code`, giving back its place.
  private func end(_ relay: HTTPRelay, _ code: CURLcode) {
    relay.finish(code)
    places?.signal()
  }

  /// Lets a transfer paused by a full relay go on (called by its job).
  func resume(_ handle: UnsafeMutableRawPointer) {
    queue.withLock { $0.unpause.append(Handle(raw: handle)) }
    _ = curl.multiWakeup(multi.raw)
  }

  /// Stops the thread once no transfer is running, and frees the handle.
  /// Call once, after every transfer ended.
  func shutdown() {
    queue.withLock { $0.stopping = true }
    _ = curl.multiWakeup(multi.raw)
    finished.wait()
    _ = curl.multiCleanup(multi.raw)
  }

  private func run() {
    let multi = self.multi.raw
    let curl = self.curl
    var running: [UnsafeMutableRawPointer: HTTPRelay] = [:]
    var failures = 0
    while true {
      let (new, unpause, stopping) = queue.withLock { q in
        defer {
          q.pending.removeAll()
          q.unpause.removeAll()
        }
        return (q.pending, q.unpause, q.stopping)
      }
      for (handle, relay) in new {
        if curl.multiAddHandle(multi, handle.raw) == CURLM_OK {
          running[handle.raw] = relay
        } else {
          end(relay, CURLE_FAILED_INIT)
        }
      }
      for handle in unpause where running[handle.raw] != nil {
        _ = curl.easyPause(handle.raw, 0)  // CURLPAUSE_CONT
      }
      if stopping && running.isEmpty { break }
      var active: Int32 = 0
      let performed = curl.multiPerform(multi, &active)
      var left: Int32 = 0
      while let message = curl.multiInfoRead(multi, &left) {
        guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else {
          continue
        }
        let code = message.pointee.data.result
        _ = curl.multiRemoveHandle(multi, easy)
        if let relay = running.removeValue(forKey: easy) { end(relay, code) }
      }
      for relay in running.values { relay.wakeIfQueued() }
      let polled = curl.multiPoll(multi, nil, 0, 1000, nil)
      if performed != CURLM_OK || polled != CURLM_OK {
        // The multi handle itself failed (out of memory, a broken poll):
        // end every transfer with an error rather than spin.
        failures += 1
        if failures >= 3 {
          for (easy, relay) in running {
            _ = curl.multiRemoveHandle(multi, easy)
            end(relay, CURLE_OUT_OF_MEMORY)
          }
          running.removeAll()
        }
        Sys.sleep(microseconds: 10_000)
      } else {
        failures = 0
      }
    }
    finished.signal()
  }
}

/// A transfer's bounded queue between the multi's thread (libcurl's
/// callbacks, which only copy) and the job thread that delivers the head,
/// the body and the progress to the real sink, in order.
///
/// The callbacks queue without waking the job: the multi's thread wakes it
/// once per round of transfers (``wakeIfQueued()``) or when the transfer
/// ends, so a small body's head, bytes, progress and end cost the job one
/// wake-up rather than one each.
final class HTTPRelay: HTTPBodySink, @unchecked Sendable {
  private enum Event {
    case begin(HTTPResponseHead)
    case data([UInt8])
  }

  /// Bytes held at most before the transfer is paused.
  static let capacity = 2 << 20

  private let condition = NSCondition()
  private var events: [Event] = []
  private var queued = 0
  private var paused = false
  private var progress: (Int64, Int64?)?
  private var stopRequested = false
  private var code: CURLcode?
  /// Whether something was queued since the job was last woken.
  private var queuedUnseen = false
  /// Whether the job is woken only when the transfer ends: its body,
  /// announced, fits the queue, so nothing could pause it. Its bytes are
  /// then gathered in `held`, handed over in one piece.
  private var wakesAtEnd = false
  private var held: [UInt8] = []
  /// Whether a small announced body may wait for its end: not when the
  /// job reports progress or watches for cancellation, which a stalled
  /// body would then hold up until libcurl's own timeout.
  private let holdsSmallBodies: Bool

  init(holdsSmallBodies: Bool = true) {
    self.holdsSmallBodies = holdsSmallBodies
  }

  // MARK: The multi's thread

  func begin(_ head: HTTPResponseHead) -> Bool {
    condition.lock()
    defer { condition.unlock() }
    events.append(.begin(head))
    queuedUnseen = true
    if holdsSmallBodies, let length = head.announcedLength, length <= Self.capacity / 2 {
      wakesAtEnd = true
      held.reserveCapacity(Int(length))
    }
    return !stopRequested
  }

  func write(_ bytes: UnsafeRawBufferPointer) -> HTTPWriteAnswer {
    condition.lock()
    defer { condition.unlock() }
    if stopRequested { return .stop }
    if queued >= Self.capacity {
      // Longer than announced: woken from now on, as any body.
      paused = true
      wakesAtEnd = false
      queueHeld()
      condition.signal()
      return .pause
    }
    if wakesAtEnd {
      held.append(contentsOf: bytes)
    } else {
      events.append(.data([UInt8](bytes)))
    }
    queued += bytes.count
    queuedUnseen = true
    return .accepted
  }

  func progress(received: Int64, expected: Int64?) -> Bool {
    condition.lock()
    defer { condition.unlock() }
    progress = (received, expected)
    queuedUnseen = true
    return !stopRequested
  }

  /// Queues the bytes gathered so far (holding the lock).
  private func queueHeld() {
    guard !held.isEmpty else { return }
    events.append(.data(held))
    held = []
  }

  /// Wakes the job when something was queued since it was last woken.
  func wakeIfQueued() {
    condition.lock()
    defer { condition.unlock() }
    if queuedUnseen && !wakesAtEnd {
      queuedUnseen = false
      condition.signal()
    }
  }

  func finish(_ code: CURLcode) {
    condition.lock()
    queueHeld()
    self.code = code
    condition.signal()
    condition.unlock()
  }

  // MARK: The job's thread

  /// Delivers everything to `sink` until the transfer ends; returns
  /// libcurl's result and whether `sink` stopped it.
  func drain(into sink: any HTTPBodySink, resume: () -> Void) -> (CURLcode, stopped: Bool) {
    var stopped = false
    while true {
      condition.lock()
      while events.isEmpty && progress == nil && code == nil { condition.wait() }
      let batch = events
      events.removeAll()
      let latest = progress
      progress = nil
      let ended = code
      condition.unlock()
      var delivered = 0
      for event in batch {
        switch event {
        case .begin(let head):
          if !stopped, !sink.begin(head) { stopped = true }
        case .data(let bytes):
          delivered += bytes.count
          if !stopped {
            let answer = bytes.withUnsafeBytes { sink.write($0) }
            if answer != .accepted { stopped = true }
          }
        }
      }
      if let (received, expected) = latest, !stopped {
        if !sink.progress(received: received, expected: expected) { stopped = true }
      }
      condition.lock()
      queued -= delivered
      if stopped { stopRequested = true }
      let wake = paused && (stopped || queued < Self.capacity / 2)
      if wake { paused = false }
      let done = code != nil && events.isEmpty
      condition.unlock()
      // A stopped transfer is let go on too, so that libcurl calls back and
      // learns it is to end.
      if wake && !done { resume() }
      if let ended, done { return (ended, stopped) }
    }
  }
}
