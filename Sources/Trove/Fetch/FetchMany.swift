import Synchronization

extension Store {
  /// Fetches every request, up to `jobs` transfers at a time, on twice as
  /// many threads; the transfers all run through one libcurl multi handle,
  /// which shares connections between them (and, with libcurl 8 or later,
  /// multiplexes requests to an HTTP/2 server over one). Each request is
  /// fetched as `fetch(_:options:progress:)` fetches it, but a small body
  /// (up to 4 MiB, its length announced) is not published on its own: its
  /// thread hands it over staged and goes on to the next URL, and the
  /// bodies are published in groups of up to 256, each one group commit,
  /// when a group is full or its first body has waited 50 ms. Each result
  /// is made once its body is durable and indexed. Returns each request's
  /// outcome, in order; one failing does not stop the others. Requests for
  /// one URL make one transfer.
  public func fetch(
    _ requests: [FetchRequest], jobs: Int = 8, options: FetchOptions = FetchOptions(),
    progress: (@Sendable (FetchProgress) -> Void)? = nil
  ) -> [Result<FetchResult, TroveError>] {
    let results = Mutex<[Result<FetchResult, TroveError>?]>(
      Array(repeating: nil, count: requests.count))
    let threads = Self.fetchThreads(requests: requests.count, jobs: jobs)
    // Room for the files the batch holds open, made before its threads
    // start (growing the table later stalls them all, again and again).
    Sys.reserveDescriptors(
      DeferredPublishing.descriptors(threads: threads, bodies: requests.count))
    let multi: HTTPMulti
    do throws(TroveError) {
      // One kept connection per job: libcurl's own bound would close
      // them between one file and the next. At most `jobs` transfers run
      // at once: a thread whose transfer ended leaves its place to the
      // next URL's while it hands its body over.
      multi = try HTTPMulti(keeping: max(1, jobs), transfers: max(1, jobs))
    } catch {
      return requests.map { _ in .failure(error) }
    }
    defer { multi.shutdown() }
    let makeClient: @Sendable () -> Result<HTTPClient, TroveError> = {
      do throws(TroveError) { return .success(try HTTPClient(multi: multi)) } catch {
        return .failure(error)
      }
    }
    // Small bodies are published together, and reported once they are.
    let publishing = DeferredPublishing(store: self, threads: threads)
    let published = Mutex<[Int: Result<FetchResult, TroveError>]>([:])
    // The settings, and the room measured for small bodies, shared a second.
    let admissions = AdmissionSharing(store: self)
    let run: @Sendable (Result<HTTPClient, TroveError>, Int) -> Void = { client, i in
      let outcome = Result { () throws(TroveError) -> FetchResult in
        var fetcher = try Fetcher(
          store: self, request: requests[i], options: options,
          client: LazyHTTPClient { () throws(TroveError) in try client.get() },
          progress: progress, admissions: admissions)
        fetcher.deferred = (publishing, { result in published.withLock { $0[i] = result } })
        return try fetcher.run()
      }
      results.withLock { $0[i] = outcome }
    }
    Parallel.forEach(requests.count, width: threads, context: makeClient, run)
    publishing.finish()
    if requests.contains(where: { $0.mode != .offline }) { writeBack.run(self) }
    let reported = published.withLock { $0 }
    return results.withLock { results in results.indices.map { reported[$0] ?? results[$0]! } }
  }

  /// Threads for `requests` fetches of `jobs` transfers at a time: two a
  /// transfer, so that a thread looking the next URL up or handing its body
  /// over leaves the transfers running.
  static func fetchThreads(requests: Int, jobs: Int) -> Int {
    let jobs = min(max(1, jobs), 1 << 16)
    return max(1, min(requests, 2 * jobs))
  }
}
