import Foundation

/// The small bodies of a many-URL fetch, staged and waiting to be published
/// together: a job hands its body over and goes on to the next URL, and a
/// thread of this batch's own publishes the bodies in groups — one group
/// commit, with its syncs and its index transaction, for each — where each
/// job waiting for its own commit made groups only as large as the bodies
/// that happened to finish together.
///
/// A group goes out when ``groupSize`` bodies wait, or when the first of
/// them has waited ``longestWait``: a body is never held back for the rest
/// of the list. Its result is made once it is published, and its URL's lock
/// is held until then, so another fetch of the URL waits for the published
/// object rather than download it again. ``finish()`` publishes what is
/// left and stops the thread; the fetch of many URLs calls it before it
/// returns.
final class DeferredPublishing: @unchecked Sendable {
  /// A staged body, the lock of its URL, and what to do once it is
  /// published (or failed to be).
  struct Entry {
    let put: StagedPut
    let lock: FetchLock?
    let published: (Result<PutResult, TroveError>) -> Void
  }

  let store: Store
  /// Bodies a group publishes at most. Each holds a descriptor (its
  /// staged file), and as many may wait while a group is published: with
  /// the jobs' own descriptors, a group commit's folders and a margin as
  /// large again, they stay within the process's limit.
  let groupSize: Int
  /// How long a body waits for others at most before its group goes out.
  static let longestWait: Duration = .milliseconds(50)

  private let condition = NSCondition()
  private var waiting: [Entry] = []
  private var oldest: ContinuousClock.Instant?
  private var publishing = false
  private var finishing = false
  private var stopped = false

  /// For a fetch running `threads` job threads.
  init(store: Store, threads: Int) {
    self.store = store
    groupSize = Self.groupSize(threads: threads)
    let thread = Thread { [self] in run() }
    thread.name = "trove-publish"
    thread.start()
  }

  /// The bodies a group of a fetch running `threads` job threads holds.
  static func groupSize(threads: Int) -> Int {
    let limit = Sys.openFileLimit.map { Int(clamping: $0) } ?? 1024
    return max(8, min(256, (limit - 512 - 8 * threads) / 4))
  }

  /// The descriptors a fetch of `bodies` URLs on `threads` job threads
  /// may hold open at once: two groups' staged files, the jobs' own, a
  /// commit's folders.
  static func descriptors(threads: Int, bodies: Int) -> Int {
    min(bodies, 2 * groupSize(threads: threads)) + 8 * threads + min(bodies, 256)
  }

  /// Adds `entry`; waits while a full group waits behind one being
  /// published.
  func add(_ entry: Entry) {
    condition.lock()
    defer { condition.unlock() }
    if waiting.isEmpty { oldest = .now }
    waiting.append(entry)
    condition.broadcast()
    while publishing && waiting.count >= groupSize { condition.wait() }
  }

  /// Publishes every body left and stops the thread; returns once they are
  /// published.
  func finish() {
    condition.lock()
    defer { condition.unlock() }
    finishing = true
    condition.broadcast()
    while !stopped { condition.wait() }
  }

  private func run() {
    condition.lock()
    while true {
      let due = oldest.map { $0 + Self.longestWait }
      let ready =
        !publishing && !waiting.isEmpty
        && (waiting.count >= groupSize || finishing || due.map { $0 <= .now } ?? false)
      if ready {
        let group = waiting
        waiting = []
        oldest = nil
        publishing = true
        condition.unlock()
        let results = store.publish(group.map(\.put))
        // Each URL's lock goes with its entry, once its result is known.
        for (entry, result) in zip(group, results) { entry.published(result) }
        condition.lock()
        publishing = false
        condition.broadcast()
        continue
      }
      if finishing && waiting.isEmpty { break }
      if let due {
        let left = (due - .now).components
        let seconds = Double(left.seconds) + Double(left.attoseconds) / 1e18
        _ = condition.wait(until: Date(timeIntervalSinceNow: max(0.001, seconds)))
      } else {
        condition.wait()
      }
    }
    stopped = true
    condition.broadcast()
    condition.unlock()
  }
}
