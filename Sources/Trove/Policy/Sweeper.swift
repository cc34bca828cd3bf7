/// What a sweep may do beyond the store's policy.
public struct SweepOptions: Sendable, Hashable {
  /// A budget for this sweep instead of the policy's (nil: the policy's).
  public var budget: Int64?
  /// An expiry, in seconds, for this sweep instead of the policy's.
  public var maxAge: Int64?
  /// Plan only: report what would be removed, remove nothing.
  public var dryRun: Bool
  /// Wait for a sweep already running in another process instead of
  /// failing with `.busy`.
  public var wait: Bool
  /// Entries never to evict in this sweep (the object a put just stored).
  public var protected: Set<Digest>

  /// Options that follow the store's policy.
  public init(
    budget: Int64? = nil, maxAge: Int64? = nil, dryRun: Bool = false, wait: Bool = true,
    protected: Set<Digest> = []
  ) {
    self.budget = budget
    self.maxAge = maxAge
    self.dryRun = dryRun
    self.wait = wait
    self.protected = protected
  }
}

/// What a sweep removed (or, in a dry run, would remove).
public struct SweepReport: Sendable, Hashable, Encodable {
  /// Whether nothing was removed because this was a plan.
  public var dryRun: Bool
  /// Entries removed for not being used within the maximum age.
  public var expiredEntries: Int
  /// Entries removed, least recently used first, to bring the store under
  /// its budget.
  public var evictedEntries: Int
  /// Bytes (allocated) the removed entries took.
  public var removedBytes: Int64
  /// Entries chosen but skipped because they were read, stored or pinned
  /// after being chosen.
  public var skippedEntries: Int
  /// Leftover files of dead writers removed from `tmp/`.
  public var temporaryFiles: Int
  /// Bytes those leftovers took.
  public var temporaryBytes: Int64
  /// Bytes (allocated) the store's entries take after the sweep.
  public var bytesAfter: Int64
  /// The budget the sweep worked to, if any.
  public var budget: Int64?
  /// How long the sweep took, in seconds.
  public var seconds: Double

  /// Entries removed, for any reason.
  public var removedEntries: Int { expiredEntries + evictedEntries }

  private enum CodingKeys: String, CodingKey {
    case dryRun, expiredEntries, evictedEntries, removedBytes, skippedEntries, temporaryFiles
    case temporaryBytes, bytesAfter, budget, seconds, removedEntries
  }

  public func encode(to encoder: any Encoder) throws {
    var c = encoder.container(keyedBy: CodingKeys.self)
    try c.encode(dryRun, forKey: .dryRun)
    try c.encode(removedEntries, forKey: .removedEntries)
    try c.encode(expiredEntries, forKey: .expiredEntries)
    try c.encode(evictedEntries, forKey: .evictedEntries)
    try c.encode(removedBytes, forKey: .removedBytes)
    try c.encode(skippedEntries, forKey: .skippedEntries)
    try c.encode(temporaryFiles, forKey: .temporaryFiles)
    try c.encode(temporaryBytes, forKey: .temporaryBytes)
    try c.encode(bytesAfter, forKey: .bytesAfter)
    try c.encode(budget, forKey: .budget)
    try c.encode(seconds, forKey: .seconds)
  }
}

extension Store {
  /// Trims the store to its policy, in three steps:
  /// 1. removes leftovers of dead writers in `tmp/`;
  /// 2. removes entries not used within the maximum age;
  /// 3. while the store takes more than its budget, removes least recently
  ///    used entries until it is at or below the low-water mark.
  ///
  /// Pinned entries are never removed. Deciding whether there is anything
  /// to evict reads the running totals (O(1)); victims come from the index
  /// in LRU order, O(evicted · log n); each is re-checked just before it is
  /// removed. Only one sweep runs at a time (see ``SweepOptions/wait``).
  @discardableResult
  public func sweep(_ options: SweepOptions = SweepOptions()) throws(TroveError) -> SweepReport {
    try withSweepLock(wait: options.wait) { () throws(TroveError) in
      try sweepLocked(options)
    }
  }

  private func sweepLocked(_ options: SweepOptions) throws(TroveError) -> SweepReport {
    let clock = ContinuousClock()
    let start = clock.now
    let policy = try currentSettings().policy
    let budget = options.budget ?? policy.budget
    let maxAge = options.maxAge ?? policy.maxAge
    let now = currentTimeNanoseconds()
    let index = try index()
    var report = SweepReport(
      dryRun: options.dryRun, expiredEntries: 0, evictedEntries: 0, removedBytes: 0,
      skippedEntries: 0, temporaryFiles: 0, temporaryBytes: 0, bytesAfter: 0, budget: budget,
      seconds: 0)

    let leftovers = try removeStaleTemporaries(
      olderThan: policy.temporaryMaxAge, dryRun: options.dryRun)
    (report.temporaryFiles, report.temporaryBytes) = leftovers
    if !options.dryRun { _ = try index.removeExpiredPins(now: now) }

    var total = try index.totals().allocatedBytes
    var planned = Set<Digest>()
    func tally(_ removal: Removal) -> Int {
      report.skippedEntries += removal.skipped
      report.removedBytes += removal.bytes
      total -= removal.bytes
      return removal.entries
    }
    if let maxAge {
      let removal = try removeLeastRecentlyUsed(
        before: now - maxAge * 1_000_000_000, now: now, dryRun: options.dryRun,
        protected: options.protected, planned: &planned
      ) { _ in false }
      report.expiredEntries = tally(removal)
    }
    if let budget, total > budget {
      let target = Int64(Double(budget) * policy.lowWater)
      let over = total
      let removal = try removeLeastRecentlyUsed(
        before: nil, now: now, dryRun: options.dryRun, protected: options.protected,
        planned: &planned
      ) { removed in over - removed <= target }
      report.evictedEntries = tally(removal)
    }
    report.bytesAfter = total
    report.seconds = (clock.now - start).seconds
    if !options.dryRun {
      try index.recordSweep(
        at: now, removed: Int64(report.removedEntries), bytes: report.removedBytes,
        nanoseconds: Int64(report.seconds * 1e9))
    }
    return report
  }

  /// What one pass of removals did.
  struct Removal {
    var entries = 0
    var bytes: Int64 = 0
    var skipped = 0
  }

  /// Removes unpinned entries in least-recently-used order (last accessed
  /// before `cutoff`, if given) until `done` says the bytes removed so far
  /// are enough. In a dry run, adds them to `planned` instead. Entries in
  /// `protected` or already `planned` are passed over; one that changed
  /// since it was chosen is skipped and the walk goes on. Removals are
  /// batched, one index transaction per page of up to 256 entries;
  /// O(removed · log n) through the index's access order.
  func removeLeastRecentlyUsed(
    before cutoff: Int64?, now: Int64, dryRun: Bool, protected: Set<Digest>,
    planned: inout Set<Digest>, until done: (_ removedBytes: Int64) -> Bool
  ) throws(TroveError) -> Removal {
    let index = try index()
    var removal = Removal()
    var cursor: (Int64, String) = (.min, "")
    while !done(removal.bytes) {
      let page = try index.leastRecentlyUsed(after: cursor, before: cutoff, now: now, limit: 256)
      guard let last = page.last else { return removal }
      cursor = (last.lastAccess, last.digest.hex)
      var batch: [Entry] = []
      var batchBytes: Int64 = 0
      for entry in page where !protected.contains(entry.digest) && !planned.contains(entry.digest) {
        if done(removal.bytes + batchBytes) { break }
        batch.append(entry)
        batchBytes += entry.allocatedBytes
      }
      if dryRun {
        planned.formUnion(batch.map(\.digest))
        removal.entries += batch.count
        removal.bytes += batchBytes
        continue
      }
      for (entry, removed) in zip(batch, try evict(batch, now: now)) {
        if removed {
          removal.entries += 1
          removal.bytes += entry.allocatedBytes
        } else {
          removal.skipped += 1
        }
      }
    }
    return removal
  }

  /// After a put: if the store is over its budget (an O(1) read of the
  /// running totals), sweeps — unless another process already is. Never
  /// evicts `protected`, the object the put just stored.
  func sweepIfOverBudget(protecting protected: Digest) throws(TroveError) {
    guard let budget = try currentSettings().policy.budget,
      try index().totals().allocatedBytes > budget
    else { return }
    do throws(TroveError) {
      try sweep(SweepOptions(wait: false, protected: [protected]))
    } catch  where error.code == .busy {
      // The running sweep will bring the store down.
    }
  }
}
