import Foundation
import Synchronization

/// Group commit of single puts made concurrently in one process: the
/// objects that threads publish while a commit is running are published
/// together by the next one (``ObjectTable/publish(group:)``), as a
/// database's log writer commits the transactions that queued behind it.
///
/// Leader and followers. A thread that finds no commit running leads: it
/// publishes its own object at once, alone (a lone put never waits for
/// company). A thread that finds one running queues its staged object and
/// sleeps. When a leader's commit is done it hands out the outcomes, and
/// the oldest queued thread, woken, leads the next commit with everything
/// queued by then (up to ``maximumGroup`` objects) while the leader
/// returns. So the batching comes from the puts that arrive during a
/// commit, and each caller returns only once its own object is durable
/// and indexed, or failed with its own error: the guarantee of a single
/// put does not change.
///
/// The queue holds only staged objects and outcomes; every state change of
/// an object is the ``ObjectTable``'s, made by the leader on its thread.
/// State is guarded by a `Mutex`; sleeping and waking by an `NSCondition`,
/// whose lock a waiting thread holds from its look at the state to its
/// wait, so no wake-up is lost (no busy wait, no timeout).
final class CommitQueue: Sendable {
  /// At most this many objects share one commit (their temp files stay
  /// open until it: a descriptor each).
  static let maximumGroup = 512

  /// What the queue has done, for tests and benchmarks.
  struct Statistics: Sendable, Equatable {
    /// Commits led, of one object or more.
    var commits = 0
    /// Of those, commits of more than one object.
    var groups = 0
    /// Objects published by those group commits.
    var objectsInGroups = 0
  }

  /// One queued put: its ticket and staged object.
  struct Entry: Sendable {
    var ticket: Int
    var staged: StagedObject
  }

  private struct State: Sendable {
    /// Whether a commit is running, or handed to a queued thread that has
    /// not woken yet: a new put queues.
    var committing = false
    var nextTicket = 0
    var queued: [Entry] = []
    /// Outcomes for queued puts, by ticket, until their thread takes them.
    var outcomes: [Int: Result<PublishOutcome, TroveError>] = [:]
    /// The next commit, handed to the thread of its first ticket.
    var handedOver: [Int: [Entry]] = [:]
    var statistics = Statistics()
  }

  private let state = Mutex(State())
  private let wakeUp = NSCondition()

  var statistics: Statistics { state.withLock { $0.statistics } }

  /// Publishes `staged` through `commit` — alone, or with the objects other
  /// threads queued meanwhile — and returns its own outcome. `commit` is
  /// given each group in order and returns one outcome per object; it runs
  /// on one thread at a time. The caller's staged file is `commit`'s to
  /// close.
  func publish(
    _ staged: StagedObject,
    by commit: ([StagedObject]) -> [Result<PublishOutcome, TroveError>]
  ) -> Result<PublishOutcome, TroveError> {
    let (ticket, leading) = state.withLock { state -> (Int, [Entry]?) in
      let ticket = state.nextTicket
      state.nextTicket += 1
      let entry = Entry(ticket: ticket, staged: staged)
      if state.committing {
        state.queued.append(entry)
        return (ticket, nil)
      }
      state.committing = true
      return (ticket, [entry])
    }
    var group: [Entry]
    if let leading {
      group = leading
    } else {
      switch wait(ticket) {
      case .done(let outcome): return outcome
      case .lead(let handed): group = handed
      }
    }
    let outcomes = commit(group.map(\.staged))
    var mine: Result<PublishOutcome, TroveError>?
    state.withLock { state in
      state.statistics.commits += 1
      if group.count > 1 {
        state.statistics.groups += 1
        state.statistics.objectsInGroups += group.count
      }
      for (entry, outcome) in zip(group, outcomes) {
        if entry.ticket == ticket { mine = outcome } else { state.outcomes[entry.ticket] = outcome }
      }
      if state.queued.isEmpty {
        state.committing = false
      } else {
        let next = Array(state.queued.prefix(Self.maximumGroup))
        state.queued.removeFirst(next.count)
        state.handedOver[next[0].ticket] = next
      }
    }
    wakeUp.lock()
    wakeUp.broadcast()
    wakeUp.unlock()
    return mine
      ?? .failure(TroveError(.ioError, "cannot store \(staged.digest): it was not published"))
  }

  private enum Turn {
    /// The leader published the object: its outcome.
    case done(Result<PublishOutcome, TroveError>)
    /// This thread leads the next commit, of these objects (its own first).
    case lead([Entry])
  }

  /// Sleeps until `ticket` is settled or its thread is to lead.
  private func wait(_ ticket: Int) -> Turn {
    wakeUp.lock()
    defer { wakeUp.unlock() }
    while true {
      let turn = state.withLock { state -> Turn? in
        if let outcome = state.outcomes.removeValue(forKey: ticket) { return .done(outcome) }
        if let group = state.handedOver.removeValue(forKey: ticket) { return .lead(group) }
        return nil
      }
      if let turn { return turn }
      wakeUp.wait()
    }
  }
}

extension ObjectTable {
  /// ``publish(_:)`` for a single put, coalesced with the single puts
  /// other threads of this process publish at the same time (see
  /// ``CommitQueue``) into one ``publish(group:)``. The staged file is gone
  /// from `tmp/` and its descriptor closed when this returns or throws.
  func publishCoalescing(_ staged: StagedObject) throws(TroveError) -> PublishOutcome {
    try commits.publish(staged) { group in publish(group: group) }.get()
  }
}
