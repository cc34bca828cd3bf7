import Foundation
import Synchronization
import Trove

/// The sweeps a long-running server makes on its own schedule: a store
/// whose puts are rare (a read-mostly mirror) still expires what went
/// unused past its maximum age and keeps to its budget when the policy
/// changes. Each is the store's own sweep (``Store/sweep(_:onProgress:)``),
/// skipped when another process is sweeping.
final class PeriodicSweep: Sendable {
  private let store: Store
  private let interval: Duration
  private let metrics: Metrics
  private let onError: @Sendable (String) -> Void
  private let stopping = Atomic<Bool>(false)
  private let finished = Mutex<Bool>(false)
  private let wake = NSCondition()

  init(
    store: Store, every interval: Duration, metrics: Metrics,
    onError: @escaping @Sendable (String) -> Void
  ) {
    self.store = store
    self.interval = interval
    self.metrics = metrics
    self.onError = onError
  }

  /// Starts the thread that sweeps every interval until ``stop()``.
  func start() {
    let thread = Thread { [self] in
      while waitOneInterval() { sweepOnce() }
      finished.withLock { $0 = true }
    }
    thread.name = "trove-serve-sweep"
    thread.start()
  }

  /// Stops the schedule; a sweep under way finishes first (this waits for
  /// it, up to a minute).
  func stop() {
    stopping.store(true, ordering: .releasing)
    wake.lock()
    wake.broadcast()
    wake.unlock()
    let deadline = ContinuousClock.now + .seconds(60)
    while !finished.withLock({ $0 }), ContinuousClock.now < deadline { usleep(10_000) }
  }

  /// Waits one interval; false when stopped meanwhile.
  private func waitOneInterval() -> Bool {
    let seconds =
      Double(interval.components.seconds)
      + Double(interval.components.attoseconds) / 1e18
    let until = Date(timeIntervalSinceNow: seconds)
    wake.lock()
    defer { wake.unlock() }
    while !stopping.load(ordering: .acquiring) {
      if !wake.wait(until: until) { return !stopping.load(ordering: .acquiring) }
    }
    return false
  }

  private func sweepOnce() {
    do throws(TroveError) {
      let report = try store.sweep(SweepOptions(wait: false))
      metrics.recordSweep(
        entries: report.expiredEntries + report.evictedEntries, bytes: report.removedBytes)
    } catch  where error.code == .busy {
      // Another process sweeps now: this one is not needed.
    } catch {
      onError("trove: scheduled sweep failed: \(error.message)")
    }
  }
}
