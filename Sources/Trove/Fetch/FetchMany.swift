import Synchronization

extension Store {
  /// Fetches every request, up to `jobs` transfers at a time. Each request
  /// runs on one of more threads than that (eight a transfer, at most 64
  /// unless two a transfer need more), which hashes and writes its body and
  /// waits for its commit there,
  /// while the next URL's transfer takes its place; the transfers
  /// all run through one libcurl multi handle, which shares
  /// connections between them (and, with libcurl 8 or later, multiplexes
  /// requests to an HTTP/2 server over one). Returns each request's outcome, in order; one failing does
  /// not stop the others. Requests for one URL make one transfer (see
  /// `fetch(_:options:progress:)`).
  public func fetch(
    _ requests: [FetchRequest], jobs: Int = 8, options: FetchOptions = FetchOptions(),
    progress: (@Sendable (FetchProgress) -> Void)? = nil
  ) -> [Result<FetchResult, TroveError>] {
    let results = Mutex<[Result<FetchResult, TroveError>?]>(
      Array(repeating: nil, count: requests.count))
    let multi: HTTPMulti
    do throws(TroveError) {
      // One kept connection per job: libcurl's own bound would close
      // them between one file and the next. At most `jobs` transfers run
      // at once: a thread whose body waits for its group commit leaves its
      // place to the next URL's transfer.
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
    let run: @Sendable (Result<HTTPClient, TroveError>, Int) -> Void = { client, i in
      let outcome = Result { () throws(TroveError) -> FetchResult in
        try self.fetch(requests[i], options: options, client: client.get(), progress: progress)
      }
      results.withLock { $0[i] = outcome }
    }
    let threads = Self.fetchThreads(requests: requests.count, jobs: jobs)
    Parallel.forEach(requests.count, width: threads, context: makeClient, run)
    if requests.contains(where: { $0.mode != .offline }) { writeBack.run(self) }
    return results.withLock { $0.map { $0! } }
  }

  /// Threads for `requests` fetches of `jobs` transfers at a time: bodies
  /// waiting for their commit hold a thread each, and the more wait, the
  /// larger a group commit and the fewer its syncs per file — eight per
  /// transfer, at least two, at most 64 unless two a transfer need more.
  static func fetchThreads(requests: Int, jobs: Int) -> Int {
    let jobs = min(max(1, jobs), 1 << 16)
    return max(1, min(requests, max(2 * jobs, min(8 * jobs, 64))))
  }
}
