import Foundation
import Synchronization

/// Work that mostly waits on the kernel, spread over a few threads so the
/// waits overlap: more threads than cores is the point. (Dispatch's pool
/// stays near the core count on Linux, as it cannot see a thread blocked
/// in a system call.)
enum Parallel {
  /// Runs `body` for every index in `0..<count`, on up to `width` threads
  /// (the calling one included), each taking the next index as it
  /// finishes one. Returns when all are done; throws the first error any
  /// of them threw (the others still ran).
  static func forEach<Failure: Error & Sendable>(
    _ count: Int, width: Int, _ body: @escaping @Sendable (Int) throws(Failure) -> Void
  ) throws(Failure) {
    try forEach(count, width: width, context: {}, { (_, i) throws(Failure) in try body(i) })
  }

  /// ``forEach(_:width:_:)`` with a context each thread makes for itself
  /// before its first index (a connection, a buffer) and passes to `body`.
  static func forEach<Context, Failure: Error & Sendable>(
    _ count: Int, width: Int, context: @escaping @Sendable () -> Context,
    _ body: @escaping @Sendable (Context, Int) throws(Failure) -> Void
  ) throws(Failure) {
    let state = State<Failure>()
    let work: @Sendable () -> Void = {
      guard state.next.load(ordering: .relaxed) < count else { return }
      let local = context()
      while true {
        let i = state.next.add(1, ordering: .relaxed).oldValue
        if i >= count { return }
        do throws(Failure) {
          try body(local, i)
        } catch {
          state.failure.withLock { if $0 == nil { $0 = error } }
        }
      }
    }
    let helpers = max(0, min(width, count) - 1)
    let group = DispatchGroup()
    for _ in 0..<helpers {
      group.enter()
      // The thread lets go of `work` (and all it holds: a store, say)
      // before it says it is done, so that once this returns, the caller
      // owns them alone — a deinit that writes (a store's counts) runs on
      // its side, not on a thread still ending as the process exits.
      let slot = WorkSlot(work)
      Thread {
        slot.run()
        group.leave()
      }.start()
    }
    work()
    group.wait()
    if let error = state.failure.withLock({ $0 }) { throw error }
  }

  /// A helper thread's work, dropped once run.
  private final class WorkSlot: @unchecked Sendable {
    private var work: (@Sendable () -> Void)?
    init(_ work: @escaping @Sendable () -> Void) { self.work = work }
    func run() {
      work?()
      work = nil
    }
  }

  private final class State<Failure: Error & Sendable>: Sendable {
    let next = Atomic<Int>(0)
    let failure = Mutex<Failure?>(nil)
  }
}
