import CCurl

/// Transfers run by one libcurl multi handle on the calling thread, as
/// `curl --parallel` runs them: libcurl's callbacks hand each body to its
/// exchange on this thread, so a small transfer costs no thread, no relay
/// and no wake-up of another — the work around each transfer is done
/// between them. A fetch of many URLs runs one loop a core.
///
/// Each of its places holds an ``HTTPHandle`` (its connection kept alive
/// from one transfer to the next); ``run(next:)`` keeps every place busy
/// until `next` has no more.
final class HTTPEventLoop {
  /// One transfer to run: its setup, where its callbacks go (kept alive
  /// here until it ends), and what to do when it has — which may be
  /// another transfer to run in its place (a redirect's next hop).
  struct Transfer {
    var request: HTTPHandle.Request
    var exchange: HTTPExchange
    var ended: (HTTPHandle.Ending) -> Transfer?
  }

  private let curl: LibCurl
  private let multi: LibCurl.Multi
  private let handles: [HTTPHandle]

  /// A loop of `places` transfers at once at most. Loads libcurl on the
  /// first call (see ``LibCurl``): throws when it cannot be loaded.
  init(places: Int) throws(TroveError) {
    curl = try LibCurl.loaded()
    guard let multi = curl.multiInit() else {
      throw TroveError(.ioError, "cannot start libcurl: curl_multi_init failed")
    }
    self.multi = multi
    // libcurl's own bound follows the transfers running at the moment and
    // would close a connection the next URL is about to reuse.
    trove_curl_multi_set_long(curl.multiSetopt, multi, CURLMOPT_MAXCONNECTS, max(1, places))
    // Multiplexed only where a shared multi handle would be.
    _ = HTTPMulti.setMultiplexing(multi, curl)
    var handles: [HTTPHandle] = []
    do throws(TroveError) {
      for _ in 0..<max(1, places) { handles.append(try HTTPHandle()) }
    } catch {
      _ = curl.multiCleanup(multi)
      throw error
    }
    self.handles = handles
  }

  deinit { _ = curl.multiCleanup(multi) }

  /// Runs transfers until `next` says there are no more (nil) and every
  /// one started has ended. `next` is asked whenever a place is free, and
  /// each transfer's `ended` is called once it ends, both on this thread.
  func run(next: () -> Transfer?) {
    var free = Array(handles.indices.reversed())
    var running: [LibCurl.Easy: (place: Int, transfer: Transfer)] = [:]
    var exhausted = false
    var failures = 0
    // Starts `transfer` in `place`, or the ones its end leads to.
    func start(_ transfer: Transfer, in place: Int) {
      var transfer = transfer
      while true {
        let easy = handles[place].prepare(transfer.request, transfer.exchange)
        if curl.multiAddHandle(multi, easy) == CURLM_OK {
          running[easy] = (place, transfer)
          return
        }
        guard let next = transfer.ended(handles[place].ending(CURLE_FAILED_INIT)) else {
          free.append(place)
          return
        }
        transfer = next
      }
    }
    while true {
      while !exhausted, let place = free.popLast() {
        guard let transfer = next() else {
          free.append(place)
          exhausted = true
          break
        }
        start(transfer, in: place)
      }
      if running.isEmpty { return }
      var active: Int32 = 0
      let performed = curl.multiPerform(multi, &active)
      var left: Int32 = 0
      var ended = 0
      while let message = curl.multiInfoRead(multi, &left) {
        guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
          let (place, transfer) = running.removeValue(forKey: easy)
        else { continue }
        let code = message.pointee.data.result
        _ = curl.multiRemoveHandle(multi, easy)
        ended += 1
        if let next = transfer.ended(handles[place].ending(code)) {
          start(next, in: place)
        } else {
          free.append(place)
        }
      }
      // A place just freed is filled before waiting: the wait would
      // otherwise last until another transfer moved.
      if ended > 0 { continue }
      let polled = curl.multiPoll(multi, nil, 0, 1000, nil)
      if performed != CURLM_OK || polled != CURLM_OK {
        // The multi handle itself failed (out of memory, a broken poll):
        // end every transfer with an error rather than spin.
        failures += 1
        if failures >= 3 {
          let failing = running
          running.removeAll()
          for (easy, (place, transfer)) in failing {
            _ = curl.multiRemoveHandle(multi, easy)
            // What it leads to fails the same way at the next round.
            if let next = transfer.ended(handles[place].ending(CURLE_OUT_OF_MEMORY)) {
              start(next, in: place)
            } else {
              free.append(place)
            }
          }
        }
        Sys.sleep(microseconds: 10_000)
      } else {
        failures = 0
      }
    }
  }
}
