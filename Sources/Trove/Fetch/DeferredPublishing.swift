import Foundation

/// The small bodies of a many-URL fetch, staged and waiting to be published
/// together: a job hands its body over and goes on to the next URL, and the
/// bodies are published in groups of up to ``groupSize`` — one group
/// commit, with its syncs and its index transaction, for each, where each
/// job waiting for its own commit made groups as small as the bodies that
/// happened to finish together.
///
/// A body is reported only once its group is published (the fetch's result
/// is made then), and its URL's lock is held until then: another fetch of
/// the URL waits for the published object rather than download it again.
/// Every body left waiting is published by ``flush()``, which the fetch of
/// many URLs calls before it returns.
final class DeferredPublishing: @unchecked Sendable {
  /// A staged body, the lock of its URL, and what to do once it is
  /// published (or failed to be).
  struct Entry {
    let put: StagedPut
    let lock: FetchLock?
    let published: (Result<PutResult, TroveError>) -> Void
  }

  let store: Store
  /// Bodies a group publishes at most (give or take the jobs that handed
  /// theirs over at the same time). Each body holds two descriptors (its
  /// staged file, its URL's lock), and a group may wait while another is
  /// published: the two stay well within the process's limit.
  let groupSize: Int

  private let condition = NSCondition()
  private var waiting: [Entry] = []
  private var publishing = false

  init(store: Store) {
    self.store = store
    let limit = Sys.openFileLimit.map { Int(clamping: $0) } ?? 1024
    groupSize = max(8, min(256, (limit - 320) / 5))
  }

  /// Adds `entry`. A full group is published on the calling thread; while
  /// another thread publishes one, the next full group waits for it.
  func add(_ entry: Entry) {
    condition.lock()
    waiting.append(entry)
    while publishing && waiting.count >= groupSize { condition.wait() }
    guard !publishing, waiting.count >= groupSize else {
      condition.unlock()
      return
    }
    publishLocked()
  }

  /// Publishes every body waiting now, whatever their number, after a
  /// group under way.
  func flush() {
    condition.lock()
    while publishing { condition.wait() }
    guard !waiting.isEmpty else {
      condition.unlock()
      return
    }
    publishLocked()
  }

  /// Takes the waiting bodies and publishes them; called holding the
  /// condition's lock, which it gives up while publishing.
  private func publishLocked() {
    let group = waiting
    waiting = []
    publishing = true
    condition.unlock()
    let results = store.publish(group.map(\.put))
    // Each URL's lock goes with its entry, once its result is known.
    for (entry, result) in zip(group, results) { entry.published(result) }
    condition.lock()
    publishing = false
    condition.broadcast()
    condition.unlock()
  }
}
