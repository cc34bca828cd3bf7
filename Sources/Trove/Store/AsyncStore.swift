import Dispatch
import Foundation
import Synchronization

/// Calling a store from Swift concurrency.
///
/// Every call of ``Store`` blocks its thread on files, the index and the
/// network. These `async` forms run the same call on a Dispatch worker
/// thread, never on the cooperative pool, so a hundred concurrent puts do
/// not starve the tasks around them; the caller's task suspends until the
/// call is done. Each has the same arguments, result and errors as the
/// blocking call of the same name.
///
/// Cancellation: a task cancelled before the call starts throws
/// ``TroveError/Code/cancelled`` and does nothing. A fetch that is
/// transferring stops within about a second of its task's cancellation and
/// throws `.cancelled`; what arrived stays as a part file, and the next
/// fetch of the URL resumes it. The other calls, once started, run to their
/// end (each keeps the store whole at every step, so there is no half-way
/// point to stop at that would save work), and their result is returned.
extension Store {
  /// `put(file:key:expectedSize:priority:onProgress:)`, off the cooperative pool.
  public func put(
    file path: String, key: String? = nil, expectedSize: Int64? = nil,
    priority: PutPriority = .important, onProgress: ProgressHandler? = nil
  ) async throws(TroveError) -> PutResult {
    try await Self.detached("put '\(path)'") { () throws(TroveError) in
      try self.put(
        file: path, key: key, expectedSize: expectedSize, priority: priority,
        onProgress: onProgress)
    }
  }

  /// `put(bytes:key:priority:)`, off the cooperative pool:
  /// the same bytes (`[UInt8]`, `Data`, an `ArraySlice`, any `ContiguousBytes`
  /// that is `Sendable`).
  public func put(
    bytes: some ContiguousBytes & Sendable, key: String? = nil, priority: PutPriority = .important
  ) async throws(TroveError) -> PutResult {
    try await Self.detached("put bytes") { () throws(TroveError) in
      try self.put(bytes: bytes, key: key, priority: priority)
    }
  }

  /// `materialize(_:at:mode:replacing:durable:verify:)`, off the
  /// cooperative pool.
  public func materialize(
    _ digest: BlobDigest, at destination: String, mode: LinkMode = .auto, replacing: Bool = false,
    durable: Bool = false, verify: Bool = false
  ) async throws(TroveError) -> Materialization {
    try await Self.detached("get \(digest)") { () throws(TroveError) in
      try self.materialize(
        digest, at: destination, mode: mode, replacing: replacing, durable: durable,
        verify: verify)
    }
  }

  /// `fetch(_:options:progress:)`, off the cooperative pool; cancelling
  /// the task stops the transfer.
  public func fetch(
    _ request: FetchRequest, options: FetchOptions = FetchOptions(),
    progress: (@Sendable (FetchProgress) -> Void)? = nil
  ) async throws(TroveError) -> FetchResult {
    let cancellation = Cancellation()
    return try await Self.detached("fetch '\(URLUserinfo.split(request.url).url)'", cancellation) {
      () throws(TroveError) in
      let result = try self.fetch(
        request, options: options,
        client: LazyHTTPClient { () throws(TroveError) in try HTTPClient() }, progress: progress,
        cancellation: cancellation)
      if request.mode != .offline { self.writeBack.run(self) }
      return result
    }
  }

  /// `verify(repair:onProgress:)`, off the cooperative pool.
  public func verify(repair: Bool = false, onProgress: ProgressHandler? = nil)
    async throws(TroveError) -> VerifyReport
  {
    try await Self.detached("verify") { () throws(TroveError) in
      try self.verify(repair: repair, onProgress: onProgress)
    }
  }

  /// `sweep(_:onProgress:)`, off the cooperative pool.
  public func sweep(_ options: SweepOptions = SweepOptions(), onProgress: ProgressHandler? = nil)
    async throws(TroveError) -> SweepReport
  {
    try await Self.detached("sweep") { () throws(TroveError) in
      try self.sweep(options, onProgress: onProgress)
    }
  }

  /// Runs `work` on a Dispatch worker thread and suspends until it is
  /// done; throws `.cancelled` without running it when the task is already
  /// cancelled, and raises `cancellation` when the task is cancelled while
  /// it runs.
  static func detached<T: Sendable>(
    _ action: String, _ cancellation: Cancellation? = nil,
    _ work: @escaping @Sendable () throws(TroveError) -> T
  ) async throws(TroveError) -> T {
    let flag = cancellation ?? Cancellation()
    if Task.isCancelled { flag.cancel() }
    if flag.isCancelled { throw flag.error(action) }
    let result = await withTaskCancellationHandler {
      await withCheckedContinuation {
        (continuation: CheckedContinuation<Result<T, TroveError>, Never>) in
        DispatchQueue.global(qos: .userInitiated).async {
          continuation.resume(returning: Result { () throws(TroveError) in try work() })
        }
      }
    } onCancel: {
      flag.cancel()
    }
    return try result.get()
  }
}

/// Whether the task that asked for some work was cancelled: raised by the
/// `async` calls' cancellation handler, read by the work where it can stop.
final class Cancellation: Sendable {
  private let raised = Atomic<Bool>(false)

  var isCancelled: Bool { raised.load(ordering: .acquiring) }

  func cancel() { raised.store(true, ordering: .releasing) }

  /// The error a stopped `action` throws.
  func error(_ action: String) -> TroveError {
    TroveError(.cancelled, "\(action) was cancelled: its task was cancelled")
  }
}
