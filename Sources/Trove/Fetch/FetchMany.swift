import Synchronization

extension Store {
  /// Fetches every request, up to `jobs` at a time, each job on a thread of
  /// its own that hashes and writes its own bodies; their libcurl handles
  /// share one pool of connections (and DNS answers, TLS sessions), so a
  /// connection opened for one URL serves the next. Returns each request's
  /// outcome, in order; one failing does not stop the others. Requests for
  /// one URL make one transfer (see ``fetch(_:options:progress:)``).
  public func fetch(
    _ requests: [FetchRequest], jobs: Int = 8, options: FetchOptions = FetchOptions(),
    progress: (@Sendable (FetchProgress) -> Void)? = nil
  ) -> [Result<FetchResult, TroveError>] {
    let results = Mutex<[Result<FetchResult, TroveError>?]>(
      Array(repeating: nil, count: requests.count))
    let share: HTTPShare
    do throws(TroveError) {
      share = try HTTPShare()
    } catch {
      return requests.map { _ in .failure(error) }
    }
    let makeClient: @Sendable () -> Result<HTTPClient, TroveError> = {
      do throws(TroveError) { return .success(try HTTPClient(share: share)) } catch {
        return .failure(error)
      }
    }
    let run: @Sendable (Result<HTTPClient, TroveError>, Int) -> Void = { client, i in
      let outcome = Result { () throws(TroveError) -> FetchResult in
        try self.fetch(requests[i], options: options, client: client.get(), progress: progress)
      }
      results.withLock { $0[i] = outcome }
    }
    Parallel.forEach(requests.count, width: max(1, jobs), context: makeClient, run)
    return results.withLock { $0.map { $0! } }
  }
}
