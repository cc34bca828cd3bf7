import Foundation

extension Store {
  /// Fetches every request, up to `jobs` transfers at a time. Each request
  /// is fetched as `fetch(_:options:progress:)` fetches it; one failing
  /// does not stop the others, and requests for one URL make one transfer.
  ///
  /// Most of a list goes in a first pass: one thread a core, each driving
  /// its share of the transfers through a libcurl multi handle, as `curl
  /// --parallel` does, and doing each URL's look-ups and checks between
  /// them; a URL not in the store, with nothing to resume and no mirror, is
  /// one GET there when its body is up to 4 MiB long. What that pass leaves
  /// (a cached copy to revalidate, a part file to resume, mirrors, a longer
  /// body, retries, a URL another fetch holds, every URL of a store with
  /// remotes) is fetched in a second one, each URL on a thread of its own,
  /// its transfer run by one shared multi handle. A small body (up to 4
  /// MiB, its length announced) is not published on its own: it is handed
  /// over staged and published with others in groups of up to 256, each one
  /// group commit, when a group is full or its first body has waited 50 ms.
  /// Each result is made once its body is durable and indexed. Returns each
  /// request's outcome, in order.
  public func fetch(
    _ requests: [FetchRequest], jobs: Int = 8, options: FetchOptions = FetchOptions(),
    progress: (@Sendable (FetchProgress) -> Void)? = nil
  ) -> [Result<FetchResult, TroveError>] {
    let jobs = min(max(1, jobs), 1 << 16)
    let threads = Self.fetchThreads(requests: requests.count, jobs: jobs)
    // Room for the files the batch holds open, made before its threads
    // start (growing the table later stalls them all, again and again).
    Sys.reserveDescriptors(
      DeferredPublishing.descriptors(threads: threads, bodies: requests.count))
    // Small bodies are published together, and reported once they are.
    let publishing = DeferredPublishing(store: self, threads: threads)
    let batch = FetchBatch(
      store: self, requests: requests, options: options, progress: progress,
      publishing: publishing)
    batch.run(jobs: jobs, loops: ProcessInfo.processInfo.activeProcessorCount)
    let rest = batch.results.withLock { results in results.indices.filter { results[$0] == nil } }
    if !rest.isEmpty { fetchEach(rest, of: batch, jobs: jobs) }
    publishing.finish()
    if requests.contains(where: { $0.mode != .offline }) { writeBack.run(self) }
    let reported = batch.published.withLock { $0 }
    return batch.results.withLock { results in results.indices.map { reported[$0] ?? results[$0]! }
    }
  }

  /// The second pass: the requests at `indices` of `batch`, each fetched
  /// whole (``Fetcher/run()``) on a thread of its own, two threads a
  /// transfer, the transfers run by one libcurl multi handle, which keeps
  /// their connections (and, with libcurl 8 or later, multiplexes requests
  /// to an HTTP/2 server over one).
  private func fetchEach(_ indices: [Int], of batch: FetchBatch, jobs: Int) {
    let multi: HTTPMulti
    do throws(TroveError) {
      // One kept connection per job: libcurl's own bound would close
      // them between one file and the next. At most `jobs` transfers run
      // at once: a thread whose transfer ended leaves its place to the
      // next URL's while it hands its body over.
      multi = try HTTPMulti(keeping: jobs, transfers: jobs)
    } catch {
      batch.results.withLock { results in for i in indices { results[i] = .failure(error) } }
      return
    }
    defer { multi.shutdown() }
    let makeClient: @Sendable () -> Result<HTTPClient, TroveError> = {
      do throws(TroveError) { return .success(try HTTPClient(multi: multi)) } catch {
        return .failure(error)
      }
    }
    let run: @Sendable (Result<HTTPClient, TroveError>, Int) -> Void = { client, k in
      let i = indices[k]
      let outcome = Result { () throws(TroveError) -> FetchResult in
        var fetcher = try Fetcher(
          store: self, request: batch.requests[i], options: batch.options,
          client: LazyHTTPClient { () throws(TroveError) in try client.get() },
          progress: batch.progress, admissions: batch.admissions)
        fetcher.deferred = (
          batch.publishing, { result in batch.published.withLock { $0[i] = result } }
        )
        if let earlier = batch.earlier.withLock({ $0[i] }) {
          fetcher.earlier = earlier
          fetcher.transferred = earlier.transferred
        }
        return try fetcher.run()
      }
      batch.results.withLock { $0[i] = outcome }
    }
    Parallel.forEach(
      indices.count, width: Self.fetchThreads(requests: indices.count, jobs: jobs),
      context: makeClient, run)
  }

  /// Threads for `requests` fetches of `jobs` transfers at a time: two a
  /// transfer, so that a thread looking the next URL up or handing its body
  /// over leaves the transfers running.
  static func fetchThreads(requests: Int, jobs: Int) -> Int {
    let jobs = min(max(1, jobs), 1 << 16)
    return max(1, min(requests, 2 * jobs))
  }
}
