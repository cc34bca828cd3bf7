import CMicroHTTPD
import Foundation
import Synchronization
@_spi(Serving) import Trove

/// What a mirror request's fetch came to, for the answer its connection
/// gets once resumed.
enum MirrorOutcome: Sendable {
  /// The URL's object, and what the response says of it.
  case served(BlobDigest, MirroredHeaders)
  /// A package index page with its links rewritten, held in memory.
  case rewritten([UInt8], MirroredHeaders)
  /// The body as it arrives, from the transfer's part file.
  case readAlong(MirrorTransfer)
  /// No body: a status and one line (the origin's 404, an unreachable
  /// origin's 502 or 504).
  case refused(Int, String)
  /// The store failed: 500, its cause to the server's log.
  case storeFailed(TroveError)
}

/// One mirror request waiting for its fetch, its connection suspended by
/// libmicrohttpd (whose threads keep answering others) until an outcome
/// resumes it: the fetch's, or a body to read along.
final class PendingFetch: @unchecked Sendable {
  let connection: OpaquePointer
  /// A plain `GET` (no range, no condition): it may read a body along as
  /// it arrives.
  let readsAlong: Bool
  private struct State {
    var outcome: MirrorOutcome?
    var resumed = false
  }
  private let state = Mutex(State())

  init(connection: OpaquePointer, readsAlong: Bool) {
    self.connection = connection
    self.readsAlong = readsAlong
  }

  /// The outcome it was resumed with (nil when the server stopped waiting).
  var outcome: MirrorOutcome? { state.withLock { $0.outcome } }

  /// Resumes the connection with `outcome`; the first outcome wins (a
  /// body to read along comes before the fetch's end), and nothing is
  /// done once the stopping server resumed it.
  func finish(_ outcome: MirrorOutcome) {
    state.withLock {
      guard !$0.resumed else { return }
      $0.outcome = outcome
      $0.resumed = true
      trove_mhd_resume_connection(connection)
    }
  }

  /// Resumes the connection without an outcome (the server stops): it is
  /// answered 503. The fetch goes on into the store.
  func abandon() {
    state.withLock {
      guard !$0.resumed else { return }
      $0.resumed = true
      trove_mhd_resume_connection(connection)
    }
  }
}

/// The requests waiting for a mirror fetch, so a stopping server resumes
/// every suspended connection before its daemons end (libmicrohttpd
/// requires it); and the bound on fetches running at once.
final class PendingFetches: Sendable {
  private let pending = Mutex<[ObjectIdentifier: PendingFetch]>([:])
  private let slots: DispatchSemaphore

  init(limit: Int) { slots = DispatchSemaphore(value: max(1, limit)) }

  /// Notes a suspended request, until ``answered(_:)``.
  func waiting(_ fetch: PendingFetch) {
    pending.withLock { $0[ObjectIdentifier(fetch)] = fetch }
  }

  /// A request was resumed and answered.
  func answered(_ fetch: PendingFetch) {
    _ = pending.withLock { $0.removeValue(forKey: ObjectIdentifier(fetch)) }
  }

  /// Runs `work` on a new thread, at most the limit at once (the others
  /// wait for a slot), and finishes `fetch` with its outcome.
  func start(_ fetch: PendingFetch, _ work: @escaping @Sendable () -> MirrorOutcome) {
    let thread = Thread { [self] in
      slots.wait()
      let outcome = work()
      slots.signal()
      fetch.finish(outcome)
    }
    thread.name = "trove-mirror-fetch"
    thread.start()
  }

  /// Resumes every connection still waiting for its fetch.
  func abandonAll() {
    let all = pending.withLock { Array($0.values) }
    for fetch in all { fetch.abandon() }
  }
}
