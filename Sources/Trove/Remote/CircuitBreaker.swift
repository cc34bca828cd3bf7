import Synchronization

/// When a remote that failed is tried again: a circuit breaker per remote,
/// kept in the store's index so that short-lived processes share it (a
/// `trove` command lives milliseconds; a dead remote must cost one connect
/// timeout across a hundred of them, not one each).
///
/// Closed, a remote is asked. A request that cannot reach it or breaks
/// (``TroveError/Code/unavailable``, ``TroveError/Code/transferFailed``)
/// opens the breaker: the remote is skipped for ``firstInterval``, doubling
/// with each failure in a row up to ``longestInterval``. When the interval
/// is over, one process takes the probe (a compare-and-set in the index:
/// the others keep skipping for ``probeLease``); its success closes the
/// breaker, its failure opens it again for longer. An answer of any kind —
/// even "not here" or corrupt bytes — proves the remote reachable.
///
/// The breaker keeps incidental work fast (a read through, a write-back);
/// it never refuses what a user asked of the remote by name: an explicit
/// push, pull or check asks it whatever its breaker says, as a probe whose
/// answer closes the breaker and whose failure keeps it open.
///
/// In a read-only store (no index writes) the breaker lives in the process.
/// Either way a remote that failed once in a process is not asked again by
/// that process until its interval is over.
enum CircuitBreaker {
  /// The first interval a failing remote is skipped for (nanoseconds).
  static let firstInterval: Int64 = 60_000_000_000
  /// The longest (15 minutes).
  static let longestInterval: Int64 = 900_000_000_000
  /// How long the process that took the probe has before another may:
  /// longer than a transfer may stall (15 s) before it fails.
  static let probeLease: Int64 = 20_000_000_000

  /// The interval after `failures` failures in a row.
  static func interval(after failures: Int64) -> Int64 {
    let doublings = min(max(failures - 1, 0), 10)
    return min(firstInterval << doublings, longestInterval)
  }
}

/// A process's own view of its remotes' breakers: remotes it saw fail,
/// with when they may be tried again.
struct ProcessBreakers: Sendable {
  var retryAt: [String: Int64] = [:]
}

extension Store {
  /// Whether `remote` may be asked now; takes the probe when its breaker's
  /// interval is over. A remote the breaker skips is counted (`skipped`).
  /// With `probing` (a command that names the remote) it is always asked:
  /// its answer closes the breaker (``remoteAnswered(_:_:)``), its failure
  /// keeps it open (``remoteFailed(_:_:)``).
  func breakerAdmits(_ remote: String, probing: Bool = false) -> Bool {
    let now = currentTimeNanoseconds()
    if let local = processBreakers.withLock({ $0.retryAt[remote] }), now < local {
      return skipOrProbe(remote, until: local, probing: probing)
    }
    guard !isReadOnly, let index = try? index() else { return true }
    let closed = try? index.read("consult the breaker of remote '\(remote)'") {
      (tx) throws(TroveError) in try tx.remoteRecord(remote).failures == 0
    }
    if closed ?? true { return true }
    var retryAt: Int64 = 0
    var probe = false
    let admitted = try? index.write("consult the breaker of remote '\(remote)'") {
      (tx) throws(TroveError) -> Bool in
      let record = try tx.remoteRecord(remote)
      guard record.failures > 0 else { return true }
      guard now >= record.retryAt else {
        retryAt = record.retryAt
        if !probing { try tx.addToRemote(remote, ["skipped": 1]) }
        return probing
      }
      // The interval is over: this process probes; others wait for it.
      try tx.setRemote(remote, ["retry-at": now + CircuitBreaker.probeLease])
      probe = true
      return true
    }
    // Told once the transaction is over: a hook never holds the index.
    if admitted == true, probe {
      trace(
        .remote, "probing remote '\(remote)'",
        why:
          "its circuit breaker's interval is over: this process asks it; others wait for the answer"
      )
    } else if admitted == true, retryAt > 0 {
      trace(
        .remote, "asking remote '\(remote)' although its circuit breaker is open",
        why: "a command named it (a probe): an answer closes the breaker")
    } else if admitted == false {
      trace(.remote, "skipped remote '\(remote)'", why: Self.openBreaker(until: retryAt))
    }
    return admitted ?? true
  }

  /// The verdict of this process's own breaker of `remote` (open until
  /// `until`): skip it, counted, or, `probing`, ask it anyway.
  private func skipOrProbe(_ remote: String, until: Int64, probing: Bool) -> Bool {
    if probing {
      trace(
        .remote, "asking remote '\(remote)' although its circuit breaker is open",
        why: "a command named it (a probe): an answer closes the breaker")
      return true
    }
    noteRemote(remote, ["skipped": 1])
    trace(.remote, "skipped remote '\(remote)'", why: Self.openBreaker(until: until))
    return false
  }

  /// The trace's reason for skipping a remote whose breaker is open.
  private static func openBreaker(until: Int64) -> String {
    let left = max(0, until - currentTimeNanoseconds()) / 1_000_000_000
    return
      "it failed lately: its circuit breaker is open for \(CachePolicy.Quantities.formatDuration(left)) more"
  }

  /// Runs `body`, a request a command made of the remote `remote` by name
  /// (whatever its breaker says), and tells the breaker how it went: a
  /// result, or an answer that the remote does not hold something or sent
  /// other bytes, closes it; a failure to reach the remote opens it (or
  /// keeps it open). Other errors (this store's) leave it as it is.
  func askingDirectly<T>(_ remote: String, _ body: () throws(TroveError) -> T)
    throws(TroveError) -> T
  {
    do throws(TroveError) {
      let value = try body()
      remoteAnswered(remote)
      return value
    } catch {
      remoteReplied(remote, with: error)
      throw error
    }
  }

  /// Records that `remote` answered: its breaker closes (a write only
  /// when it was open), and `counts` join the process's pending counts.
  func remoteAnswered(_ remote: String, _ counts: [String: Int64] = [:]) {
    processBreakers.withLock { _ = $0.retryAt.removeValue(forKey: remote) }
    noteRemote(remote, counts)
    guard !isReadOnly, let index = try? index() else { return }
    let open = try? index.read("consult the breaker of remote '\(remote)'") {
      (tx) throws(TroveError) in try tx.remoteRecord(remote).failures > 0
    }
    guard open ?? true else { return }
    let closed = try? index.write("record an answer of remote '\(remote)'") {
      (tx) throws(TroveError) -> Bool in
      guard try tx.remoteRecord(remote).failures > 0 else { return false }
      try tx.setRemote(remote, ["failures": 0, "retry-at": 0])
      return true
    }
    if closed == true {
      trace(.remote, "closed the circuit breaker of remote '\(remote)'", why: "it answered")
    }
  }

  /// Records that `remote` failed (with `error`, for the trace): its
  /// breaker opens for longer each time. Returns how long it will be
  /// skipped (nanoseconds).
  @discardableResult
  func remoteFailed(_ remote: String, _ error: TroveError? = nil) -> Int64 {
    let now = currentTimeNanoseconds()
    var interval = CircuitBreaker.firstInterval
    if !isReadOnly, let index = try? index() {
      _ = try? index.write("record a failure of remote '\(remote)'") { (tx) throws(TroveError) in
        let record = try tx.remoteRecord(remote)
        try tx.addToRemote(remote, ["errors": 1])
        // Only the failure that opens the breaker, or its probe's (the
        // interval over, give or take the probe's lease), counts as one in
        // a row: requests let through together while it was closed fail
        // together, and open it once.
        guard record.failures == 0 || now + CircuitBreaker.probeLease >= record.retryAt else {
          interval = max(0, record.retryAt - now)
          return
        }
        let failures = record.failures + 1
        interval = CircuitBreaker.interval(after: failures)
        try tx.setRemote(remote, ["failures": failures, "retry-at": now + interval])
      }
    }
    processBreakers.withLock { $0.retryAt[remote] = now + interval }
    trace(
      .remote, "remote '\(remote)' failed",
      why: (error.map { "\($0.message); " } ?? "")
        + "its circuit breaker is open for \(CachePolicy.Quantities.formatDuration(interval / 1_000_000_000))"
    )
    return interval
  }

  /// Adds `counts` to `remote`'s record: kept with the hit counts and
  /// written with them (``writeAccessCounts()``), not one write each;
  /// nothing in a read-only store.
  func noteRemote(_ remote: String, _ counts: [String: Int64]) {
    guard counts.contains(where: { $0.value != 0 }) else { return }
    count { pending in pending.remotes[remote, default: [:]].merge(counts, uniquingKeysWith: +) }
  }
}
