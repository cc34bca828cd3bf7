import CCurl
import Foundation

extension Store {
  /// Brings `request.url` into the store once and says which object it is.
  ///
  /// - An expected checksum (``FetchRequest/expected``) whose object the
  ///   store holds is served without a request.
  /// - A URL fetched before and still fresh (`Cache-Control: max-age`,
  ///   `Expires`, `immutable`, or ``FetchRequest/maxAge``) is served
  ///   without a request; a stale one is revalidated (`If-None-Match`,
  ///   `If-Modified-Since`), and a 304 whose validator matches serves the
  ///   cached object.
  /// - Otherwise the body is downloaded, hashed as it streams (XXH3-128
  ///   and the expected SHA-2s in one pass), checked against its announced
  ///   length and the expectations, and published; the URL is recorded as
  ///   a key with its validators and freshness, and the verified checksums
  ///   beside the object.
  /// - An interrupted download (a dropped connection, a killed process) is
  ///   resumed by the next fetch of the URL with a conditional range
  ///   request; transient failures are retried ``FetchOptions/retries``
  ///   times, resuming.
  /// - Threads and processes fetching one URL make one transfer: the others
  ///   wait for it, then serve what it stored, whatever mirrors each listed.
  /// - When the URL fails (it cannot be reached, a failure status, a body
  ///   that does not match the expectations), its mirrors
  ///   (``FetchRequest/mirrors``) are asked in order; the store's rewrite
  ///   rules (``URLRewrite``) replace each URL first. The key is the URL
  ///   asked for; the record names the URL that served it
  ///   (``KeyOrigin/servedBy``). Every request goes down the list from its
  ///   start, and a revalidation's validators go only to the URL that
  ///   served the cached copy.
  ///
  /// - A login in the URL, ``FetchRequest/credential`` (else `~/.netrc`)
  ///   and ``FetchRequest/headers`` go to the URL's origin only; redirects
  ///   are followed to http:// and https:// only, never from https:// to
  ///   http://. The URL is recorded and reported without its login.
  ///
  /// Nothing is stored, bound or kept as a part file when the bytes do not
  /// match: the store only ever holds verified, complete bodies.
  ///
  /// - Throws: `.notFound` (HTTP 404 or 410; a miss with `.offline`),
  ///   `.checksumMismatch`, `.transferFailed` (transient, after retries),
  ///   `.unavailable` (no such host, refused, TLS, a redirect refused,
  ///   conflicting `Content-Length` headers, other HTTP failures),
  ///   `.invalidArgument` (not an http or https URL, or a mirror that is
  ///   not), `.tooLarge` (a body longer than the policy's
  ///   ``CachePolicy/maximumObjectSize``, refused at its `Content-Length` or
  ///   as soon as it passes it), `.invalidConfig` (the store's settings
  ///   cannot be used: no fetch is made, not even from the cache), and the
  ///   store's own errors (`.noSpace`, `.ioError`…). When every URL of
  ///   several failed, one error names each failure: `.transferFailed` when
  ///   one of them may pass, else `.checksumMismatch` or `.tooLarge` when a
  ///   body was refused, else `.notFound` when every URL said so, else
  ///   `.unavailable`.
  public func fetch(
    _ request: FetchRequest, options: FetchOptions = FetchOptions(),
    progress: (@Sendable (FetchProgress) -> Void)? = nil
  ) throws(TroveError) -> FetchResult {
    let result = try fetch(
      request, options: options,
      client: LazyHTTPClient { () throws(TroveError) in try HTTPClient() },
      progress: progress)
    if request.mode != .offline { writeBack.run(self) }
    return result
  }

  func fetch(
    _ request: FetchRequest, options: FetchOptions, client: HTTPClient,
    progress: (@Sendable (FetchProgress) -> Void)?, cancellation: Cancellation? = nil
  ) throws(TroveError) -> FetchResult {
    try fetch(
      request, options: options, client: LazyHTTPClient { client }, progress: progress,
      cancellation: cancellation)
  }

  func fetch(
    _ request: FetchRequest, options: FetchOptions, client: LazyHTTPClient,
    progress: (@Sendable (FetchProgress) -> Void)?, cancellation: Cancellation? = nil
  ) throws(TroveError) -> FetchResult {
    var fetcher = try Fetcher(
      store: self, request: request, options: options, client: client, progress: progress)
    fetcher.cancellation = cancellation
    return try fetcher.run()
  }
}

/// One fetch of one URL, from the cache look-up to the recorded key.
struct Fetcher {
  let store: Store
  let request: FetchRequest
  let options: FetchOptions
  /// Made when the first request is: a fetch the cache answers loads no
  /// libcurl.
  let client: LazyHTTPClient
  let progress: (@Sendable (FetchProgress) -> Void)?
  /// Set when the task of an `async` fetch is cancelled.
  var cancellation: Cancellation?
  /// Set by a fetch of many URLs: a small body is handed to these bodies
  /// waiting to be published together, and its result goes to `reported`
  /// once it is published (``DeferredPublishing``).
  var deferred:
    (
      publishing: DeferredPublishing,
      reported: @Sendable (Result<FetchResult, TroveError>) -> Void
    )?
  /// The transfer the first pass of a fetch of many URLs made for this
  /// URL, when it left the URL to the second.
  var earlier: EarlierTransfer?
  /// The admission the bodies of a fetch of many URLs share, and the
  /// settings it read; nil for a fetch alone.
  let admissions: AdmissionSharing?
  /// The store's policy: what every body is checked against and hashed for.
  let policy: CachePolicy
  /// The user's header lines and credential, for the URL's origin only.
  let originHeaders: [String]
  let login: String?
  /// The URLs to ask, in order: the URL and its mirrors, after rewrites.
  let candidates: [Candidate]
  let started = ContinuousClock.now
  var url: String { request.url }
  /// Body bytes received by this fetch.
  var transferred: Int64 = 0
  /// The last HTTP status seen.
  var status: Int?

  init(
    store: Store, request: FetchRequest, options: FetchOptions, client: LazyHTTPClient,
    progress: (@Sendable (FetchProgress) -> Void)?, admissions: AdmissionSharing? = nil
  ) throws(TroveError) {
    self.store = store
    self.admissions = admissions
    // The key, and every message and record, is the URL without its
    // userinfo: the credential in it goes with the requests and nowhere else.
    var request = request
    let (bare, userinfo) = URLUserinfo.split(request.url)
    request.url = bare
    let mirrors = request.mirrors.map(URLUserinfo.split)
    request.mirrors = mirrors.map(\.url)
    var headers = request.headers
    var login = userinfo
    if login == nil, let credential = request.credential {
      if credential.contains(":") {
        login = credential
      } else {
        headers.append("Authorization: Bearer \(credential)")
      }
    }
    request.credential = nil
    request.headers = []
    self.request = request
    self.login = login
    originHeaders = headers
    self.options = options
    self.client = client
    self.progress = progress
    // Settings that cannot be used stop a fetch before anything else, even
    // one the store could serve: what a fetch does never depends on luck.
    if let admissions {
      policy = try admissions.admission().policy
    } else {
      policy = try store.policy()
    }
    candidates = Candidate.list(
      [(bare, login)] + mirrors, key: bare, keyLogin: login, keyHeaders: headers,
      rewrites: policy.rewrites,
      ownRewrites: policy.rewrites.isEmpty || store.rewritesAreThisUsers(),
      netrc: request.usesNetrc)
  }

  mutating func run() throws(TroveError) -> FetchResult {
    switch try start(waiting: true) {
    case .served(let result): return result
    case .network(let lock, let cached): return try download(cached: cached, lock: lock)
    case .busy: preconditionFailure("a fetch that waits for the lock finds it free")
    }
  }

  /// How a fetch begins: served from the store, or bound for the network.
  enum Start {
    /// Served without a request.
    case served(FetchResult)
    /// To be downloaded, holding the URL's lock; the URL's binding as it
    /// was once the lock was taken.
    case network(FetchLock, cached: KeyBinding?)
    /// Another fetch holds the URL's lock (only when not `waiting` for it).
    case busy
  }

  /// The steps before the network: the checks of the request, the store's
  /// answer when it has one, the URL's lock — waited for, or with
  /// `waiting` false, `.busy` when another holds it — and the store's
  /// answer again, since another may have fetched it meanwhile.
  mutating func start(waiting: Bool) throws(TroveError) -> Start {
    guard URLUserinfo.isHTTP(url) else {
      throw TroveError(
        .invalidArgument, "cannot fetch '\(url)': only http:// and https:// URLs are fetched",
        value: url)
    }
    for mirror in request.mirrors where !URLUserinfo.isHTTP(mirror) {
      throw TroveError(
        .invalidArgument,
        "cannot fetch '\(url)': its mirror '\(mirror)' is not an http:// or https:// URL",
        value: mirror)
    }
    if let hit = try expectedHit() { return .served(hit) }
    var cached = try store.binding(forKey: url)
    // Not here: a remote may have it (its record, then its blob).
    if cached == nil, request.mode != .offline, store.readThroughKey(url) {
      cached = try store.binding(forKey: url)
    }
    if let cached, let served = try serve(cached, waitedSince: nil) { return .served(served) }
    if request.mode == .offline {
      throw TroveError(
        .notFound, "'\(url)' is not in store '\(store.root)'", value: url, remedy: .allowNetwork)
    }
    // The network is needed from here on: libcurl is loaded now, and a
    // library that cannot be fails the fetch before anything is locked.
    _ = try client.get()
    let waitStart = currentTimeNanoseconds()
    guard let lock = takeLock(waiting: waiting) else { return .busy }
    // Another thread or process may have fetched it while this one waited.
    let current = try store.binding(forKey: url)
    if let current, let served = try serve(current, waitedSince: waitStart) {
      return .served(served)
    }
    if let hit = try expectedHit() { return .served(hit) }
    return .network(lock, cached: current)
  }

  /// The URL's lock: nil when another holds it and this fetch is not
  /// `waiting`. With bodies waiting to be published together, its holder
  /// may be one of them, which lets go only once its group is published
  /// (within ``DeferredPublishing/longestWait`` and the commit): this
  /// thread must not block its own process, so it looks again until the
  /// lock is free.
  private func takeLock(waiting: Bool) -> FetchLock? {
    let name = Store.downloadName(url)
    guard waiting else { return FetchLock(store: store, name: name, wait: false) }
    guard deferred != nil else { return FetchLock(store: store, name: name) }
    var pause: UInt32 = 1_000
    while true {
      if let lock = FetchLock(store: store, name: name, wait: false) { return lock }
      Sys.sleep(microseconds: pause)
      pause = min(pause * 2, 50_000)
    }
  }

  /// The result of a fetch of `digest`.
  func result(
    _ digest: BlobDigest, size: Int64, source: FetchSource, verified: [Checksum],
    servedBy: String? = nil, why: @autoclosure () -> String
  ) -> FetchResult {
    store.records.note(digest, key: url)
    let elapsed = ContinuousClock.now - started
    store.trace(
      .fetch,
      "\(Self.traceVerb(source)) \(url) as \(digest) (\(CachePolicy.Quantities.formatSize(size)))",
      why: why(), duration: elapsed)
    let seconds =
      Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return FetchResult(
      url: url, digest: digest, size: size, source: source,
      httpStatus: source == .cache ? nil : status, bytesTransferred: transferred,
      seconds: seconds, verified: verified, servedBy: source == .cache ? nil : servedBy)
  }

  // MARK: The cache

  /// An expected checksum whose object the store holds: served with no
  /// request, and the URL bound to it (keeping what a fetch of the URL
  /// recorded, when it is bound to that object already).
  func expectedHit() throws(TroveError) -> FetchResult? {
    for checksum in request.expected {
      guard let digest = try store.digest(for: checksum),
        let entry = try store.entry(for: digest)
      else { continue }
      let verified = try verify(digest, size: entry.size)
      if try store.binding(forKey: url)?.digest != digest {
        try store.objects.bind(key: url, to: digest)
      }
      store.recordRead(digest)
      store.countFetch(digest, served: true)
      return result(
        digest, size: entry.size, source: .cache, verified: verified,
        why: "the store holds an object with the expected checksum \(checksum)")
    }
    return nil
  }

  /// The cached object of the URL, when it may be served without asking
  /// the server: offline, fresh, young enough for ``FetchRequest/maxAge``,
  /// or fetched by another process while this one waited (`waitedSince`).
  /// One that does not match the expectations is not served (offline, it
  /// is a mismatch): the server may have a newer body.
  func serve(_ cached: KeyBinding, waitedSince: Int64?) throws(TroveError) -> FetchResult? {
    let now = currentTimeNanoseconds()
    // A binding pulled from a remote's record was never fetched here,
    // whenever it was bound: the record is anyone's word.
    let fetched =
      cached.origin?.fetchedNanoseconds ?? (cached.isPulled ? 0 : cached.updatedNanoseconds)
    let young =
      request.maxAge.map { now.subtractingSaturated(fetched) < $0.nanoseconds }
      ?? false
    let servable: Bool
    switch request.mode {
    case .offline: servable = true
    case .refresh:
      // Whatever the recorded freshness says: only a fetch that asked the
      // server while this one waited stands in for asking it.
      servable = waitedSince.map { fetched >= $0 } ?? false
    case .normal:
      // Bound while this one waited: fetched by the holder of the lock,
      // whose body may have arrived before this one began to wait.
      let bound = max(fetched, cached.isPulled ? 0 : cached.updatedNanoseconds)
      servable =
        (cached.origin?.isFresh(at: now) ?? false) || young
        || waitedSince.map { bound >= $0 } ?? false
    }
    guard servable, let entry = try store.entry(for: cached.digest) else { return nil }
    let verified: [Checksum]
    do throws(TroveError) {
      verified = try verify(cached.digest, size: entry.size)
    } catch  where error.code == .checksumMismatch && request.mode != .offline {
      return nil
    }
    store.recordRead(cached.digest)
    store.countFetch(cached.digest, served: true)
    return result(
      cached.digest, size: entry.size, source: .cache, verified: verified,
      why: servedCause(cached, now: now, young: young, waitedSince: waitedSince))
  }

  /// Checks `digest`'s object (`size` bytes) against the expectations;
  /// returns the checksums it matched.
  /// - Throws: `.checksumMismatch` naming both values.
  /// `source` is the URL that sent the bytes, for the message.
  func verify(
    _ digest: BlobDigest, size: Int64, computed: [Checksum] = [], source: String? = nil
  ) throws(TroveError) -> [Checksum] {
    let source = source ?? url
    try SizeLimit(source: source, expected: request.expectedSize, maximum: nil)
      .checkComplete(size)
    guard !request.expected.isEmpty else { return [] }
    var known = Dictionary(computed.map { ($0.algorithm, $0) }) { a, _ in a }
    known[.xxh128] = Checksum(digest)
    let missing = Set(request.expected.map(\.algorithm)).subtracting(known.keys)
    if !missing.isEmpty {
      known.merge(try store.checksums(of: digest, missing)) { a, _ in a }
    }
    for expected in request.expected {
      guard let actual = known[expected.algorithm], actual == expected else {
        throw TroveError(
          .checksumMismatch,
          "'\(source)' has \(known[expected.algorithm]?.description ?? "no checksum"), expected \(expected)",
          value: source)
      }
    }
    return request.expected
  }

  // MARK: The network

  /// Asks the URLs in order (``candidates``) until one gives the body or
  /// a 304 for the cached copy; a failure of the network's or the bytes'
  /// (``movesOn(_:)``) moves on to the next, any other (the store's own)
  /// ends the fetch. Called holding the URL's lock.
  mutating func download(cached: KeyBinding?, lock: FetchLock) throws(TroveError) -> FetchResult {
    let part = lock.isHonoured ? try PartialDownload(store: store, key: url) : nil
    let cause = store.trace.isEnabled ? downloadCause(cached) : ""
    if let first = candidates.first,
      let rebuilt = try deltaDownload(cached: cached, from: first, part: part, cause: cause)
    {
      return rebuilt
    }
    var failures: [TroveError] = []
    for (index, candidate) in candidates.enumerated() {
      let after =
        failures.isEmpty
        ? ""
        : "; asked '\(candidate.url)' after: " + failures.map(\.message).joined(separator: "; ")
      do throws(TroveError) {
        return try download(
          from: candidate, isLast: index == candidates.count - 1, cached: cached, part: part,
          lock: lock, cause: cause + after)
      } catch {
        guard Self.movesOn(error) else { throw error }
        failures.append(error)
      }
    }
    throw Self.failure(url, failures)
  }

  /// Asks `candidate`: conditionally when the URL's cached object has
  /// validators it sent, resuming the part file when it sent its bytes;
  /// retries what may pass (a URL with others after it only when it had
  /// begun sending a body: the next URL is asked at once otherwise).
  mutating func download(
    from candidate: Candidate, isLast: Bool, cached: KeyBinding?, part: PartialDownload?,
    lock: FetchLock, cause: String
  ) throws(TroveError) -> FetchResult {
    let source = candidate.url
    // A transfer the first pass of a fetch of many URLs made warned already,
    // and counts among the tries.
    if earlier == nil { warnOfExposure(candidate) }
    // Validators are the server's names for its bytes: they go only to the
    // URL that sent the cached copy.
    var conditional = cached.flatMap {
      ConditionalRequest.canRevalidate($0.origin) && ($0.origin?.servedBy ?? url) == source
        ? $0 : nil
    }
    var retries = 0
    if let earlier, earlier.failedForNow, isLast {
      retries = 1
      pause(retries, head: earlier.head)
    }
    var restarts = 0
    var restartCauses: [String] = []
    func restart(_ why: String) throws(TroveError) {
      restarts += 1
      restartCauses.append(why)
      if restarts > 3 {
        throw TroveError(.unavailable, "cannot fetch '\(source)': \(why)", value: source)
      }
    }
    while true {
      var headers: [String] = []
      var offset: Int64 = 0
      if let origin = conditional?.origin {
        headers += ConditionalRequest.revalidation(origin)
      } else if let point = part?.resumePoint(from: source),
        let condition = ConditionalRequest.resumption(point.validator)
      {
        offset = point.offset
        headers.append(condition)
      }
      let download = makeDownload(from: candidate, part: part, offset: offset)
      let outcome = try client.get().perform(
        httpRequest(to: candidate, headers: headers, offset: offset), into: download)
      transferred += download.received
      if outcome.head.status != 0 { status = outcome.head.status }
      if let failure = download.failure {
        Self.abandon(download, stoppedBy: failure)
        throw failure
      }
      switch download.answer {
      case .notModified?:
        guard let cached = conditional, let origin = cached.origin,
          Self.confirms(outcome.head, origin)
        else {
          // A 304 that names no validator of ours proves nothing.
          conditional = nil
          try restart("the server answered 304 without a matching validator")
          continue
        }
        // What is served is the stored object: its own length is checked,
        // reported and recorded, never the one recorded with the key.
        guard let entry = try store.entry(for: cached.digest) else {
          conditional = nil  // evicted meanwhile: fetch the body
          try restart("its cached object was removed during revalidation")
          continue
        }
        var refreshed = Self.refreshed(origin, by: outcome.head)
        refreshed.size = entry.size
        refreshed.servedBy = source
        do throws(TroveError) {
          // A 304 vouches for the validator, not for where the binding came from.
          try store.objects.bind(
            key: url, to: cached.digest, origin: refreshed, pulled: cached.isPulled)
        } catch  where error.code == .notFound {
          conditional = nil
          try restart("its cached object was removed during revalidation")
          continue
        }
        let verified = try verify(cached.digest, size: entry.size)
        store.recordRead(cached.digest)
        store.countFetch(cached.digest, served: true)
        return result(
          cached.digest, size: entry.size, source: .revalidated, verified: verified,
          servedBy: source, why: cause + "; the server answered 304 Not Modified")
      case .status(let code)?:
        let error = Self.statusError(source, outcome.head, code: code)
        if error.code == .transferFailed, retries < options.retries, isLast {
          retries += 1
          pause(retries, head: outcome.head)
          continue
        }
        throw error
      case .misfit?:
        part?.discard()
        try restart("the server's answers to a range request do not fit together")
        continue
      case .body?, nil:
        break
      }
      if outcome.code == CURLE_RANGE_ERROR {
        // A 200 to the range request: the body changed (If-Range) or the
        // server cannot resume. Start again from zero; never append it.
        part?.discard()
        try restart("the server cannot resume it")
        continue
      }
      var body: Download.Body?
      var failure: TroveError?
      if outcome.succeeded {
        do throws(TroveError) { body = try download.finish() } catch { failure = error }
      } else {
        failure = Self.transferError(source, outcome)
      }
      if let failure {
        download.abandon(discardingPart: false)  // what arrived stays, to resume
        if failure.code == .transferFailed, retries < options.retries,
          isLast || download.received > 0
        {
          retries += 1
          pause(retries, head: outcome.head)
          continue
        }
        throw failure
      }
      guard let body else { continue }
      let why =
        cause + (conditional != nil ? "; the server sent a new body" : "")
        + (offset > 0 ? "; resumed at byte \(offset) of an interrupted download" : "")
        + restartCauses.map { "; started again: \($0)" }.joined()
      return try deliver(
        body, of: download, outcome: outcome, from: candidate, lock: lock,
        source: offset > 0 ? .resumed : .network, why: why)
    }
  }

  /// Publishes a body `candidate` sent whole into `download`: checked
  /// against the expectations, then bound to the URL with the response's
  /// validators and freshness in the transaction that publishes it (or
  /// counts its dedup hit) — one commit per body, shared with whatever
  /// other threads publish at the same time; in a fetch of many URLs, a
  /// small body joins the bodies waiting to be published together, and
  /// its result is reported once it is.
  func deliver(
    _ body: Download.Body, of download: Download, outcome: HTTPOutcome, from candidate: Candidate,
    lock: FetchLock, source fetchSource: FetchSource, why: String
  ) throws(TroveError) -> FetchResult {
    let verified: [Checksum]
    do throws(TroveError) {
      verified = try verify(
        body.digest, size: body.size, computed: body.checksums, source: candidate.url)
    } catch {
      download.abandon(discardingPart: true)
      throw error
    }
    // Readers of the part file may end before the commit's sync.
    download.reportVerified(body)
    var origin = Freshness.origin(
      outcome.head, size: body.size, finalURL: outcome.effectiveURL,
      now: currentTimeNanoseconds())
    origin.servedBy = candidate.url
    let binding = KeyRequest(key: url, origin: origin, checksums: body.checksums)
    if let deferred, let staged = try download.stage(body, binding: binding) {
      // Published with the bodies of other URLs; reported then.
      let fetcher = self
      deferred.publishing.add(
        DeferredPublishing.Entry(put: staged, lock: lock) { published in
          deferred.reported(
            published.map { put in
              fetcher.store.countFetch(put.digest, served: false)
              return fetcher.result(
                put.digest, size: body.size, source: fetchSource, verified: verified,
                servedBy: candidate.url, why: why)
            })
        })
      return FetchResult(
        url: url, digest: body.digest, size: body.size, source: fetchSource, httpStatus: status,
        bytesTransferred: transferred, seconds: 0, verified: verified, servedBy: candidate.url)
    }
    let put = try download.publish(body, binding: binding)
    store.countFetch(put.digest, served: false)
    return result(
      put.digest, size: body.size, source: fetchSource, verified: verified,
      servedBy: candidate.url, why: why)
  }

  /// Warns when `candidate` sends a credential in clear over a network.
  func warnOfExposure(_ candidate: Candidate) {
    if candidate.login != nil || candidate.headers.contains(where: Self.isCredentialHeader),
      candidate.origin?.exposesCredentials == true
    {
      store.warn(
        "fetch '\(candidate.url)': its credential goes over plain http://, readable on the network; use https://"
      )
    }
  }

  /// The receiving end of a request to `candidate` for the body from
  /// `offset` on, into `part` (nil: a private writer).
  func makeDownload(from candidate: Candidate, part: PartialDownload?, offset: Int64) -> Download {
    var asked = request
    asked.url = candidate.url
    // Progress is the key's, whichever URL sends the bytes.
    let key = url
    let progress = self.progress.map { report in
      { @Sendable (received: FetchProgress) in
        var shown = received
        shown.url = key
        report(shown)
      }
    }
    // The policy's checksums are computed on every body, in the same pass.
    let download = Download(
      store: store, request: asked, part: part, offset: offset,
      algorithms: Set(request.expected.map(\.algorithm)).union(policy.checksums),
      limit: SizeLimit(
        source: candidate.url, expected: request.expectedSize,
        maximum: policy.maximumObjectSize),
      progress: progress)
    download.cancellation = cancellation
    download.admissions = admissions
    return download
  }

  /// The request to `candidate`, with `headers` (validators, a range's
  /// condition) and the candidate's own login and headers.
  func httpRequest(to candidate: Candidate, headers: [String], offset: Int64) -> HTTPRequest {
    HTTPRequest(
      url: candidate.url, origin: candidate.origin, headers: headers,
      originHeaders: candidate.headers, login: candidate.login, usesNetrc: candidate.usesNetrc,
      redirectHosts: request.redirectHosts, resumeFrom: offset, options: options)
  }

  /// Lets go of a transfer this side stopped with `failure`: bytes known
  /// to be wrong, more than the store takes, or a part that filled the
  /// volume (it holds the room a resume needs) are not kept. A resumed
  /// part refused room before a new byte stays.
  static func abandon(_ download: Download, stoppedBy failure: TroveError) {
    let filledVolume =
      [.noSpace, .lowOnSpace].contains(failure.code)
      && (download.received > 0 || download.offset == 0)
    download.abandon(
      discardingPart: filledVolume || [.checksumMismatch, .tooLarge].contains(failure.code))
  }

  /// Waits before retry number `attempt`: the server's `Retry-After` (in
  /// seconds or as a date, up to a minute away) or a doubling delay.
  func pause(_ attempt: Int, head: HTTPResponseHead) {
    var delay = min(30, options.retryDelay * Double(1 << min(attempt - 1, 10)))
    // Retry-After: seconds, or an HTTP date.
    let text = head.field("retry-after")
    let asked =
      text.flatMap { Double($0) }
      ?? text.flatMap(Freshness.httpDate).map {
        Double($0.subtractingSaturated(currentTimeNanoseconds())) / 1e9
      }
    if let asked, asked <= 60 { delay = max(0, asked) }
    Thread.sleep(forTimeInterval: delay)
  }

  /// Whether a 304 vouches for the cached object: it carries the ETag or
  /// the Last-Modified the object was fetched with.
  static func confirms(_ head: HTTPResponseHead, _ origin: KeyOrigin) -> Bool {
    if let etag = origin.etag, let answered = head.field("etag") {
      return answered == etag
    }
    if let modified = origin.lastModified, let answered = head.field("last-modified") {
      return answered == modified
    }
    return false
  }

  /// `origin` as revalidated now by a 304 with `head`: new freshness,
  /// validators kept unless the server sent new ones.
  static func refreshed(_ origin: KeyOrigin, by head: HTTPResponseHead) -> KeyOrigin {
    let now = currentTimeNanoseconds()
    var fresh = Freshness.origin(head, size: origin.size, finalURL: origin.finalURL, now: now)
    fresh.etag = fresh.etag ?? origin.etag
    fresh.lastModified = fresh.lastModified ?? origin.lastModified
    // A 304 describes the stored body, whose type it does not send.
    fresh.contentType = origin.contentType
    if Freshness.lifetime(head) == nil {
      // A 304 that says nothing of freshness leaves the stored expiry as it
      // was: right for an `Expires`, and for a `max-age` it only makes the
      // next fetch ask again sooner.
      fresh.expiresNanoseconds = origin.expiresNanoseconds
      fresh.isImmutable = origin.isImmutable
    }
    return fresh
  }

  /// The error for an HTTP failure status.
  static func statusError(_ url: String, _ head: HTTPResponseHead, code: Int) -> TroveError {
    let text = "HTTP \(code)\(head.reason.isEmpty ? "" : " " + head.reason)"
    switch code {
    case 404, 410:
      return TroveError(.notFound, "cannot fetch '\(url)': \(text)", value: url)
    case 408, 425, 429, 500, 502, 503, 504:
      return TroveError(.transferFailed, "cannot fetch '\(url)': \(text)", value: url)
    case 200..<300:
      return TroveError(
        .unavailable, "cannot fetch '\(url)': unexpected \(text) to a GET", value: url)
    default:
      return TroveError(.unavailable, "cannot fetch '\(url)': \(text)", value: url)
    }
  }

  /// Whether a header line carries a credential (`Authorization`,
  /// `Proxy-Authorization`, `Cookie`, or a name that says token or key).
  static func isCredentialHeader(_ line: String) -> Bool {
    let name = line.prefix { $0 != ":" }.lowercased()
    return ["authorization", "proxy-authorization", "cookie"].contains(name)
      || name.contains("token") || name.contains("key") || name.contains("secret")
  }

  /// The error for a transfer libcurl ended with a failure, or Trove
  /// ended at a redirect it does not follow.
  static func transferError(_ url: String, _ outcome: HTTPOutcome) -> TroveError {
    if let refused = outcome.refusedRedirect {
      return TroveError(.unavailable, "cannot fetch '\(url)': \(refused)", value: url)
    }
    let code = Int(outcome.code.rawValue)
    let message = "cannot fetch '\(url)': \(outcome.message) (curl error \(code))"
    switch outcome.code {
    case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT:
      return TroveError(.invalidArgument, message, value: url)
    case CURLE_OPERATION_TIMEDOUT, CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING, CURLE_SEND_ERROR,
      CURLE_RECV_ERROR, CURLE_HTTP2, CURLE_HTTP2_STREAM:
      return TroveError(.transferFailed, message, value: url)
    default:
      return TroveError(.unavailable, message, value: url)
    }
  }
}
