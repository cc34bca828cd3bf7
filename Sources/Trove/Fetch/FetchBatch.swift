import CCurl
import Synchronization

/// The first pass of a fetch of many URLs: one thread a core, each running
/// its share of the transfers in an ``HTTPEventLoop`` and, between them,
/// each URL's steps before and after its transfer — the store's answer,
/// the lock, the checks, the hand-over of the body to be published with
/// others. A URL the store answers costs no transfer; a URL not in it, with
/// nothing to resume and one URL to ask, is one plain GET in the loop, its
/// redirects followed there under the rules of ``HTTPClient/Hops``, its
/// body taken when it is small (``SmallBodies``).
///
/// Anything else is left to the second pass, which fetches each URL as a
/// fetch of one URL does (``Fetcher/run()``), going on from the transfer
/// this pass made, if any (``Fetcher/EarlierTransfer``: a try of a failure
/// to retry counts among the retries): a URL whose lock another holds, one
/// with a cached copy to revalidate, a part file to resume or mirrors to
/// fall back on, a body longer than 4 MiB or of a length not announced
/// (refused at its head), an answer to a request it did not make, a
/// failure to retry — and every URL of a store with remotes, whose records
/// would be asked for in the loop. Its own failures (an HTTP 404, a
/// checksum that does not match, a redirect refused) are final here as
/// there.
final class FetchBatch: Sendable {
  let store: Store
  let requests: [FetchRequest]
  let options: FetchOptions
  let progress: (@Sendable (FetchProgress) -> Void)?
  let publishing: DeferredPublishing
  let admissions: AdmissionSharing
  /// Each request's outcome once this pass settled it; nil: left to the
  /// second pass.
  let results: Mutex<[Result<FetchResult, TroveError>?]>
  /// Outcomes of bodies published together, reported once they were.
  let published = Mutex<[Int: Result<FetchResult, TroveError>]>([:])
  /// The transfers this pass made for URLs it left to the second.
  let earlier = Mutex<[Int: Fetcher.EarlierTransfer]>([:])
  private let next = Atomic<Int>(0)

  init(
    store: Store, requests: [FetchRequest], options: FetchOptions,
    progress: (@Sendable (FetchProgress) -> Void)?, publishing: DeferredPublishing
  ) {
    self.store = store
    self.requests = requests
    self.options = options
    self.progress = progress
    self.publishing = publishing
    // The settings, and the room measured for small bodies, shared a second.
    admissions = AdmissionSharing(store: store)
    results = Mutex(Array(repeating: nil, count: requests.count))
  }

  /// Runs `jobs` transfers at once at most, on `loops` threads. A store
  /// with remotes leaves every URL to the second pass: asking a remote for
  /// a URL's record (and pulling its blob) would hold up a loop's transfers.
  func run(jobs: Int, loops: Int) {
    guard (try? store.remotes())?.isEmpty ?? false else { return }
    let loops = max(1, min(loops, jobs))
    Parallel.forEach(loops, width: loops) { loop in
      // The places, shared out as evenly as they go.
      self.work(places: jobs / loops + (loop < jobs % loops ? 1 : 0))
    }
  }

  /// One loop's share: URLs taken in turn until none is left.
  private func work(places: Int) {
    // Made, loading libcurl, when a URL first needs the network: a fetch
    // the store answers loads none. Never asked for a transfer here.
    let client = LazyHTTPClient { () throws(TroveError) in try HTTPClient() }
    let taken = { () -> HTTPEventLoop.Transfer? in
      while true {
        let i = self.next.add(1, ordering: .relaxed).oldValue
        guard i < self.requests.count else { return nil }
        if let transfer = self.begin(i, client: client) { return transfer }
      }
    }
    guard let made = taken() else { return }
    var first: HTTPEventLoop.Transfer? = made
    let loop: HTTPEventLoop
    do throws(TroveError) {
      loop = try HTTPEventLoop(places: places)
    } catch {
      return  // that URL (its lock let go with its transfer) and the rest go to the second pass
    }
    loop.run {
      guard let transfer = first else { return taken() }
      first = nil
      return transfer
    }
  }

  /// URL `i`'s steps up to its transfer: nil when it is settled without
  /// one or left to the second pass.
  private func begin(_ i: Int, client: LazyHTTPClient) -> HTTPEventLoop.Transfer? {
    do throws(TroveError) {
      var fetcher = try Fetcher(
        store: store, request: requests[i], options: options, client: client,
        progress: progress, admissions: admissions)
      fetcher.deferred = (publishing, { result in self.published.withLock { $0[i] = result } })
      switch try fetcher.start(waiting: false) {
      case .served(let result):
        settle(i, .success(result))
        return nil
      case .busy:
        return nil
      case .network(let lock, let cached):
        guard let (download, request) = try fetcher.plainTransfer(cached: cached, lock: lock)
        else {
          return nil  // the lock goes with it
        }
        // Each hop in turn, as `HTTPClient.perform(_:into:)` makes them.
        var hops = HTTPClient.Hops(request)
        let multiplexes = HTTPMulti.multiplexes(try LibCurl.loaded())
        let gate = SmallBodies(download)
        func hop() -> HTTPEventLoop.Transfer {
          let exchange = HTTPClient.Exchange(sink: gate, wantsProgress: download.wantsProgress)
          return HTTPEventLoop.Transfer(
            request: hops.setup(multiplexes: multiplexes), exchange: exchange
          ) {
            ending in
            var ending = ending
            let stopped: Bool
            (ending.code, stopped) = exchange.ended(with: ending.code)
            var (outcome, redirect) = HTTPClient.outcome(
              ending, exchange, stopped: stopped, sink: gate)
            if let next = redirect {
              guard let refused = hops.follow(next, after: outcome) else { return hop() }
              outcome = refused
            }
            do throws(TroveError) {
              switch try fetcher.settle(download, outcome, refused: gate.refused, lock: lock) {
              case .result(let result): self.settle(i, .success(result))
              case .again(let transfer): self.earlier.withLock { $0[i] = transfer }
              }
            } catch {
              self.settle(i, .failure(error))
            }
            return nil
          }
        }
        return hop()
      }
    } catch {
      settle(i, .failure(error))
      return nil
    }
  }

  private func settle(_ i: Int, _ outcome: Result<FetchResult, TroveError>) {
    results.withLock { $0[i] = outcome }
  }
}

/// The first pass's sink: a body longer than a small one, or of a length
/// not announced, is refused at its head and its URL left to the second
/// pass — its staging, syncs and any compression would hold up every other
/// transfer of the loop. Anything else goes to the download.
final class SmallBodies: HTTPBodySink {
  let download: Download
  /// Whether the body was refused.
  private(set) var refused = false

  init(_ download: Download) { self.download = download }

  func begin(_ head: HTTPResponseHead) -> Bool {
    if head.status == 200, head.announcedLength.map({ $0 > Download.smallBody }) ?? true {
      refused = true
      return false
    }
    return download.begin(head)
  }

  func write(_ bytes: UnsafeRawBufferPointer) -> HTTPWriteAnswer { download.write(bytes) }

  func progress(received: Int64, expected: Int64?) -> Bool {
    download.progress(received: received, expected: expected)
  }

  var wantsProgress: Bool { download.wantsProgress }
}

extension Fetcher {
  /// The receiving end and the setup of the one plain GET a URL makes in
  /// the first pass of a fetch of many URLs: it is not in the store, it
  /// has no mirror, and no part file to resume (its lock honoured; a
  /// small body's stale part is discarded as a fetch of one URL discards
  /// it). Nil otherwise: the URL takes the whole path.
  func plainTransfer(cached: KeyBinding?, lock: FetchLock) throws(TroveError) -> (
    Download, HTTPRequest
  )? {
    guard cached == nil, candidates.count == 1, let candidate = candidates.first else {
      return nil
    }
    let part = lock.isHonoured ? try PartialDownload(store: store, key: url) : nil
    guard part?.resumePoint(from: candidate.url) == nil else { return nil }
    warnOfExposure(candidate)
    return (
      makeDownload(from: candidate, part: part, offset: 0),
      httpRequest(to: candidate, headers: [], offset: 0)
    )
  }

  /// A transfer the first pass made for a URL and left to the second: the
  /// second goes on from it rather than from nothing.
  struct EarlierTransfer: Sendable {
    /// Its last response's head.
    var head: HTTPResponseHead
    /// Body bytes it received.
    var transferred: Int64
    /// Whether it failed for now, a try the retries count.
    var failedForNow: Bool
  }

  /// How a plain GET ended.
  enum Settled {
    case result(FetchResult)
    /// For the whole path, which goes on from this transfer.
    case again(EarlierTransfer)
  }

  /// The end of a plain GET into `download`, its redirects followed: the
  /// result, or the transfer to go on from when the URL is to take the
  /// whole path — an answer to a request it did not make, a failure to
  /// retry — with nothing of it kept but a part file's bytes. Its own
  /// failures throw, as they do on the whole path with one URL to ask.
  mutating func settle(
    _ download: Download, _ outcome: HTTPOutcome, refused: Bool, lock: FetchLock
  ) throws(TroveError) -> Settled {
    let candidate = candidates[0]
    transferred += download.received
    if outcome.head.status != 0 { status = outcome.head.status }
    if refused {
      download.abandon(discardingPart: false)
      return .again(EarlierTransfer(head: outcome.head, transferred: 0, failedForNow: false))
    }
    if let failure = download.failure {
      Self.abandon(download, stoppedBy: failure)
      throw failure
    }
    let sofar = transferred
    let earlier = { (failedForNow: Bool) -> Settled in
      .again(EarlierTransfer(head: outcome.head, transferred: sofar, failedForNow: failedForNow))
    }
    let retries = options.retries
    let retried = { (error: TroveError) -> Bool in
      error.code == .transferFailed && retries > 0
    }
    switch download.answer {
    case .status(let code)?:
      let error = Self.statusError(candidate.url, outcome.head, code: code)
      download.abandon(discardingPart: false)
      if retried(error) { return earlier(true) }
      throw error
    case .notModified?, .misfit?:
      download.abandon(discardingPart: false)
      return earlier(false)
    case .body?, nil:
      break
    }
    guard outcome.code != CURLE_RANGE_ERROR else {
      download.abandon(discardingPart: false)
      return earlier(false)
    }
    let body: Download.Body
    do throws(TroveError) {
      guard outcome.succeeded else { throw Self.transferError(candidate.url, outcome) }
      body = try download.finish()
    } catch {
      download.abandon(discardingPart: false)  // what arrived stays, to resume
      if retried(error) { return earlier(true) }
      throw error
    }
    let cause = store.trace.isEnabled ? downloadCause(nil) : ""
    return .result(
      try deliver(
        body, of: download, outcome: outcome, from: candidate, lock: lock, source: .network,
        why: cause))
  }
}
