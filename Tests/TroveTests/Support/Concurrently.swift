import Foundation
import Synchronization

/// Runs `bodies` at once, each on a thread of its own, and waits for all;
/// rethrows the first error any of them threw.
func concurrently(_ bodies: [@Sendable () throws -> Void]) throws {
  let failure = Mutex<(any Error)?>(nil)
  let group = DispatchGroup()
  for body in bodies {
    group.enter()
    Thread {
      do { try body() } catch { failure.withLock { if $0 == nil { $0 = error } } }
      group.leave()
    }.start()
  }
  group.wait()
  if let error = failure.withLock({ $0 }) { throw error }
}
