/// What a sweep may do beyond the store's policy.
public struct SweepOptions: Sendable, Hashable {
  /// A budget for this sweep instead of the policy's (nil: the policy's).
  public var budget: Int64?
  /// An expiry for this sweep instead of the policy's: entries unused for
  /// longer are removed.
  public var maxAge: Duration?
  /// Plan only: report what would be removed, remove nothing.
  public var dryRun: Bool
  /// Wait for a sweep already running in another process instead of
  /// failing with `.busy`.
  public var wait: Bool
  /// Entries never to evict in this sweep (the object a put just stored).
  public var protected: Set<BlobDigest>

  /// Options that follow the store's policy.
  public init(
    budget: Int64? = nil, maxAge: Duration? = nil, dryRun: Bool = false, wait: Bool = true,
    protected: Set<BlobDigest> = []
  ) {
    self.budget = budget
    self.maxAge = maxAge
    self.dryRun = dryRun
    self.wait = wait
    self.protected = protected
  }
}

/// Why entries were removed.
public enum SweepReason: String, Sendable, Hashable, Codable {
  /// A sweep someone asked for (`trove sweep`, `Store.sweep(_:onProgress:)`).
  case requested = "sweep"
  /// A put took the store over its budget.
  case overBudget = "over-budget"
  /// The volume was below `min-free` before an important put.
  case lowSpace = "low-space"
  /// A write found the volume full (ENOSPC, EDQUOT).
  case diskFull = "disk-full"
}

/// What a sweep removed (or, in a dry run, would remove).
public struct SweepReport: Sendable, Hashable, Codable {
  /// Why it ran.
  public var reason: SweepReason = .requested
  /// Whether nothing was removed because this was a plan.
  public var dryRun: Bool
  /// Entries removed for not being used within the maximum age.
  public var expiredEntries: Int
  /// Entries removed, least recently used first, to bring the store under
  /// its budget or to make room on the volume.
  public var evictedEntries: Int
  /// Bytes (allocated) the removed entries took.
  public var removedBytes: Int64
  /// Free space the volume gained, measured with `statvfs`, when this
  /// eviction was for space. Less than ``removedBytes`` when evicted
  /// objects share their blocks with clones handed out earlier.
  public var freedBytes: Int64?
  /// Entries chosen but skipped because they were read, stored or pinned
  /// after being chosen, or because their file could not be unlinked
  /// (named in ``housekeepingErrors``).
  public var skippedEntries: Int
  /// Leftover files of dead writers removed from `tmp/`.
  public var temporaryFiles: Int
  /// Bytes those leftovers took.
  public var temporaryBytes: Int64
  /// Stale leftovers (in `tmp/`, `partial/`, `locks/`) that could not be
  /// removed — a folder made immutable, a mount point — and left in place.
  /// The sweep goes on past them: the budget and the maximum age are
  /// enforced all the same.
  public var temporaryFailures: Int = 0
  /// Why each could not be removed, one line each
  /// (`cannot remove '…/tmp/x/y': Operation not permitted (unlinkat, errno 1)`),
  /// for the first 100.
  public var temporaryErrors: [String] = []
  /// Why housekeeping (reconciling a folder, finishing removals that
  /// removers stopped halfway) or an eviction (an object whose file cannot
  /// be unlinked, which is kept) failed, one line each
  /// (`cannot remove '…/objects/ab/…': Operation not permitted (unlinkat, errno 1)`;
  /// the eviction failures of one sweep up to 100).
  /// The sweep goes on past them: the budget and the maximum age are
  /// enforced all the same, evicting other entries in the kept ones'
  /// place, and the next sweep tries again.
  public var housekeepingErrors: [String] = []
  /// What reconciling one fan-out folder of the index found and fixed
  /// (each sweep takes the next folder, so every orphan is found within
  /// 256 sweeps).
  public var reconciled = ReconcileReport()
  /// Bytes of new versions of large objects the sweep made share their
  /// blocks with earlier versions (``Store/shareBlocks(of:dryRun:limit:)``).
  public var sharedBytes: Int64 = 0
  /// Bytes (allocated) the store's entries take after the sweep.
  public var bytesAfter: Int64
  /// Of those, the bytes held by unexpired pins.
  public var pinnedBytes: Int64 = 0
  /// The budget the sweep worked to, if any.
  public var budget: Int64?
  /// How long the sweep took, in seconds.
  public var seconds: Double

  /// Entries removed, for any reason.
  public var removedEntries: Int { expiredEntries + evictedEntries }

  /// Whether the store is still above its budget (pinned entries, or an
  /// object a put just stored, can hold it there).
  public var isOverBudget: Bool { budget.map { bytesAfter > $0 } ?? false }

  private enum CodingKeys: String, CodingKey {
    case reason, dryRun, expiredEntries, evictedEntries, removedBytes, freedBytes
    case skippedEntries, temporaryFiles, temporaryBytes, temporaryFailures, temporaryErrors
    case housekeepingErrors
    case reconciled, sharedBytes, bytesAfter, pinnedBytes
    case budget, seconds, removedEntries, overBudget
  }

  init(reason: SweepReason, dryRun: Bool = false, budget: Int64? = nil) {
    self.reason = reason
    self.dryRun = dryRun
    expiredEntries = 0
    evictedEntries = 0
    removedBytes = 0
    skippedEntries = 0
    temporaryFiles = 0
    temporaryBytes = 0
    bytesAfter = 0
    self.budget = budget
    seconds = 0
  }

  public init(from decoder: any Decoder) throws {
    let c = try decoder.container(keyedBy: CodingKeys.self)
    reason = try c.decode(SweepReason.self, forKey: .reason)
    dryRun = try c.decode(Bool.self, forKey: .dryRun)
    expiredEntries = try c.decode(Int.self, forKey: .expiredEntries)
    evictedEntries = try c.decode(Int.self, forKey: .evictedEntries)
    removedBytes = try c.decode(Int64.self, forKey: .removedBytes)
    freedBytes = try c.decodeIfPresent(Int64.self, forKey: .freedBytes)
    skippedEntries = try c.decode(Int.self, forKey: .skippedEntries)
    temporaryFiles = try c.decode(Int.self, forKey: .temporaryFiles)
    temporaryBytes = try c.decode(Int64.self, forKey: .temporaryBytes)
    temporaryFailures = try c.decodeIfPresent(Int.self, forKey: .temporaryFailures) ?? 0
    temporaryErrors = try c.decodeIfPresent([String].self, forKey: .temporaryErrors) ?? []
    housekeepingErrors =
      try c.decodeIfPresent([String].self, forKey: .housekeepingErrors) ?? []
    reconciled = try c.decode(ReconcileReport.self, forKey: .reconciled)
    sharedBytes = try c.decodeIfPresent(Int64.self, forKey: .sharedBytes) ?? 0
    bytesAfter = try c.decode(Int64.self, forKey: .bytesAfter)
    pinnedBytes = try c.decode(Int64.self, forKey: .pinnedBytes)
    budget = try c.decodeIfPresent(Int64.self, forKey: .budget)
    seconds = try c.decode(Double.self, forKey: .seconds)
  }

  public func encode(to encoder: any Encoder) throws {
    var c = encoder.container(keyedBy: CodingKeys.self)
    try c.encode(reason, forKey: .reason)
    try c.encode(dryRun, forKey: .dryRun)
    try c.encode(removedEntries, forKey: .removedEntries)
    try c.encode(expiredEntries, forKey: .expiredEntries)
    try c.encode(evictedEntries, forKey: .evictedEntries)
    try c.encode(removedBytes, forKey: .removedBytes)
    try c.encode(freedBytes, forKey: .freedBytes)
    try c.encode(skippedEntries, forKey: .skippedEntries)
    try c.encode(temporaryFiles, forKey: .temporaryFiles)
    try c.encode(temporaryBytes, forKey: .temporaryBytes)
    try c.encode(temporaryFailures, forKey: .temporaryFailures)
    try c.encode(temporaryErrors, forKey: .temporaryErrors)
    try c.encode(housekeepingErrors, forKey: .housekeepingErrors)
    try c.encode(reconciled, forKey: .reconciled)
    try c.encode(sharedBytes, forKey: .sharedBytes)
    try c.encode(bytesAfter, forKey: .bytesAfter)
    try c.encode(pinnedBytes, forKey: .pinnedBytes)
    try c.encode(budget, forKey: .budget)
    try c.encode(isOverBudget, forKey: .overBudget)
    try c.encode(seconds, forKey: .seconds)
  }
}

extension Store {
  /// How old a recorded removal must be before a sweep finishes it for a
  /// remover that stopped between its two steps: a minute (one that is
  /// still running takes milliseconds between them).
  static let staleRemovalAge: Int64 = 60_000_000_000
  /// New large objects a sweep shares the blocks of, at most: each costs
  /// the kernel a comparison of the bytes it shares.
  static let sharingPerSweep = 4

  /// How many eviction failures ``SweepReport/housekeepingErrors`` names.
  static let reportedErrors = 100

  /// Trims the store to its policy, in four steps:
  /// 1. removes leftovers of dead writers in `tmp/` (whatever they are:
  ///    files, links, FIFOs, folders; one it cannot remove is reported in
  ///    ``SweepReport/temporaryFailures`` and the sweep goes on);
  /// 2. reconciles the index with the next fan-out folder of `objects/`
  ///    (adopting orphans, dropping rows whose file is gone), so that every
  ///    folder is reconciled once in 256 sweeps; and finishes removals
  ///    recorded more than a minute ago whose removers stopped halfway
  ///    (what fails here is reported in ``SweepReport/housekeepingErrors``
  ///    and the sweep goes on);
  /// 3. removes entries not used within the maximum age;
  /// 4. while the store takes more than its budget, removes least recently
  ///    used entries until it is at or below the low-water mark.
  ///
  /// Pinned entries are never removed. Deciding whether there is anything
  /// to evict reads the running totals (O(1)); victims come from the index
  /// in LRU order, O(evicted · log n); each is re-checked in the index
  /// transaction that removes it. Only one sweep runs at a time (see
  /// ``SweepOptions/wait``). The sweep is recorded in the store's sweep
  /// log (``StoreStatistics/lastSweep``).
  ///
  /// `onProgress`, when given, hears of the bytes removed so far after each
  /// batch of evictions: of an unknown total while expired entries go, then
  /// out of what the budget asks for.
  @discardableResult
  public func sweep(_ options: SweepOptions = SweepOptions(), onProgress: ProgressHandler? = nil)
    throws(TroveError) -> SweepReport
  {
    try requireWritable()
    return try withSweepLock(wait: options.wait) { () throws(TroveError) in
      try sweepLocked(options, reason: .requested, onProgress: onProgress)
    }
  }

  /// A sweep, holding the sweep lock; recorded in the sweep log unless
  /// `recording` is false (the caller records a report of its own).
  func sweepLocked(
    _ options: SweepOptions, reason: SweepReason, recording: Bool = true,
    onProgress: ProgressHandler? = nil
  ) throws(TroveError) -> SweepReport {
    let clock = ContinuousClock()
    let start = clock.now
    let policy = try currentSettings().policy
    let budget = options.budget ?? policy.budget
    let maxAge = options.maxAge.map(\.wholeSecondsRoundedUp) ?? policy.maxAge
    let now = currentTimeNanoseconds()
    let index = try index()
    var report = SweepReport(reason: reason, dryRun: options.dryRun, budget: budget)

    let leftovers = removeStaleTemporaries(
      olderThan: policy.temporaryMaxAge, dryRun: options.dryRun)
    report.temporaryFiles = leftovers.count
    report.temporaryBytes = leftovers.bytes
    report.temporaryFailures = leftovers.failures
    report.temporaryErrors = leftovers.errors
    if !options.dryRun {
      // Looks before it deletes: no write lock when no lease ran out.
      _ = try index.read("remove expired pins") { (tx) throws(TroveError) in
        try tx.deleteExpiredPins(now: now)
      }
      // Housekeeping: on a full volume it waits, and the eviction frees room.
      // Either step failing (a file that cannot be unlinked, a damaged
      // row) is reported and the sweep goes on: expiry and the budget
      // matter more than one folder's bookkeeping.
      do throws(TroveError) {
        report.reconciled = try objects.reconcileNextFolder()
      } catch  where error.code == .noSpace {
      } catch {
        report.housekeepingErrors.append(line(error))
      }
      do throws(TroveError) {
        let stale = try objects.finishStaleRemovals(olderThan: Self.staleRemovalAge)
        report.reconciled.removalsFinished += stale.finished
        if let failure = stale.failure { report.housekeepingErrors.append(line(failure)) }
      } catch  where error.code == .noSpace {
      } catch {
        report.housekeepingErrors.append(line(error))
      }
    }

    var total = try index.read("read totals") { (tx) throws(TroveError) in
      try tx.totals().allocatedBytes
    }
    var planned = Set<BlobDigest>()
    var swept: Int64 = 0  // for onProgress
    func tally(_ removal: Removal) -> Int {
      report.skippedEntries += removal.skipped
      // An object whose file cannot be unlinked is kept; the sweep went on
      // to the next ones until the budget was met.
      report.housekeepingErrors += removal.errors.prefix(
        max(0, Self.reportedErrors - report.housekeepingErrors.count))
      report.removedBytes += removal.bytes
      total -= removal.bytes
      return removal.entries
    }
    if let maxAge {
      let removal = try removeLeastRecentlyUsed(
        before: now.subtractingSaturated(.nanoseconds(fromSeconds: maxAge)), now: now,
        dryRun: options.dryRun, protected: options.protected, planned: &planned,
        because:
          "expired: unused for longer than max-age \(CachePolicy.Quantities.formatDuration(maxAge))",
        afterBatch: { (batch) throws(TroveError) in
          swept += batch.bytes
          onProgress?(ProgressReport(unit: .bytes, completed: swept, total: nil))
          return true
        }, until: { _ in false })
      report.expiredEntries = tally(removal)
    }
    if let budget, total > budget {
      // An object the put just stored that alone exceeds the budget is
      // kept, and only the rest is trimmed to the low-water mark: the store
      // is never emptied to make room for one object that cannot fit.
      let kept = try index.read("look up protected entries") { (tx) throws(TroveError) in
        var bytes: Int64 = 0
        for digest in options.protected {
          bytes += try tx.entry(for: digest)?.allocatedBytes ?? 0
        }
        return bytes
      }
      let lowWater = Int64(exactly: (Double(budget) * policy.lowWater).rounded(.down)) ?? budget
      let target = kept > budget ? kept.addingSaturated(lowWater) : lowWater
      let over = total
      let goal = swept + max(0, over - target)
      // An object sharing blocks with another frees less than its allocated
      // bytes: after each batch, the index's total says how much more is
      // left than the evicted bytes suggest.
      var evicted: Int64 = 0
      var shortfall: Int64 = 0
      let removal = try removeLeastRecentlyUsed(
        before: nil, now: now, dryRun: options.dryRun, protected: options.protected,
        planned: &planned,
        because: Self.overBudget(over, budget: budget, target: target, reason: reason),
        afterBatch: { (batch) throws(TroveError) in
          swept += batch.bytes
          evicted += batch.bytes
          onProgress?(ProgressReport(unit: .bytes, completed: swept, total: goal))
          let left = try index.read("read totals") { (tx) throws(TroveError) in
            try tx.totals().allocatedBytes
          }
          shortfall = max(0, left - (over - evicted))
          return true
        }, until: { removed in over - removed + shortfall <= target })
      report.evictedEntries = tally(removal)
    }
    if !options.dryRun {
      // Housekeeping too, after the evictions (no work on what they
      // removed), bounded: the objects stored since the last sweep.
      do throws(TroveError) {
        let sharing = try shareBlocks(limit: Self.sharingPerSweep)
        report.sharedBytes = sharing.sharedBytes
      } catch {
        report.housekeepingErrors.append(line(error))
      }
      // What is left, as the index counts it: blocks shared count once.
      total = try index.read("read totals") { (tx) throws(TroveError) in
        try tx.totals().allocatedBytes
      }
    }
    report.bytesAfter = total
    report.pinnedBytes = try index.read("count pinned entries") { (tx) throws(TroveError) in
      try tx.pinnedTotals(now: now).bytes
    }
    report.seconds = (clock.now - start).seconds
    if !options.dryRun && report.removedBytes > 0 { restoreReserve() }
    if recording && !options.dryRun { try record(report, at: now) }
    return report
  }

  /// Appends `report` to the store's sweep log.
  func record(_ report: SweepReport, at time: Int64) throws(TroveError) {
    trace(
      report.reason == .lowSpace || report.reason == .diskFull ? .pressure : .remove,
      "sweep (\(report.reason.rawValue)) removed \(report.expiredEntries) expired and \(report.evictedEntries) evicted entries (\(CachePolicy.Quantities.formatSize(report.removedBytes)))"
        + (report.freedBytes.map { ", the volume gained \(CachePolicy.Quantities.formatSize($0))" }
          ?? "")
        + (report.skippedEntries > 0 ? ", \(report.skippedEntries) skipped" : ""),
      why: Self.sweepCause(report.reason), duration: .seconds(report.seconds))
    try index().write("record sweep") { (tx) throws(TroveError) in
      try tx.appendSweep(
        SweepRecord(
          time: time, reason: report.reason, removedEntries: Int64(report.removedEntries),
          removedBytes: report.removedBytes, freedBytes: report.freedBytes,
          nanoseconds: Int64(report.seconds * 1e9)))
    }
  }

  /// What one pass of removals did.
  struct Removal {
    var entries = 0
    var bytes: Int64 = 0
    var skipped = 0
    /// Why objects chosen could not be removed (a file that cannot be
    /// unlinked), one line each; they were kept.
    var errors: [String] = []
  }

  /// Removes unpinned entries in least-recently-used order (last accessed
  /// before `cutoff`, if given) until `done` says the bytes removed so far
  /// are enough, or `batches` pages were removed. In a dry run, adds them
  /// to `planned` instead. Entries in `protected` or already `planned` are
  /// passed over, and so are those larger than `largest` (allocated bytes);
  /// one that changed since it was chosen is skipped and the walk goes on.
  /// `why` is what the trace says of each entry evicted (the default: to
  /// make room on the volume). Each page of up to `pageSize` entries is one
  /// ``ObjectTable/evict(_:now:part:)``; `afterBatch` runs after each and may
  /// stop the walk. With `firstPageSize`, pages start that small and double
  /// up to `pageSize`, so a caller that measures after each batch stops
  /// after little when the first frees nothing. O(removed · log n) through the index's access order.
  ///
  /// With the policy's ``CachePolicy/evictRemoteBackedFirst`` (the default)
  /// in a store with remotes, the walk takes the objects a remote is known
  /// to hold first (a `get` reads them back through it), then the others,
  /// each in least-recently-used order; each walk passes over the rows of
  /// the other kind, so it may read every row (O(n)) — only in stores with
  /// remotes.
  func removeLeastRecentlyUsed(
    before cutoff: Int64?, now: Int64, dryRun: Bool, protected: Set<BlobDigest>,
    planned: inout Set<BlobDigest>, pageSize: Int = Store.sweepBatch, firstPageSize: Int? = nil,
    largest: Int64? = nil,
    because why: @autoclosure () -> String =
      "least recently used, evicted to make room on the store's volume",
    afterBatch: (_ batch: Removal) throws(TroveError) -> Bool = { _ in true },
    until done: (_ removedBytes: Int64) -> Bool
  ) throws(TroveError) -> Removal {
    let index = try index()
    var removal = Removal()
    let remoteFirst =
      (try? currentSettings().policy.evictRemoteBackedFirst) == true
      && !((try? remotes()) ?? []).isEmpty
    // Two walks: what a remote holds (each confirmed there first), then
    // everything left; or the second alone.
    let check = remoteFirst ? RemoteCopyCheck(store: self) : nil
    for remoteBacked: Bool? in remoteFirst ? [true, nil] : [nil] {
      let goOn = try removeLeastRecentlyUsed(
        index, remoteBacked: remoteBacked, confirming: remoteBacked == true ? check : nil,
        before: cutoff, now: now, dryRun: dryRun, protected: protected, planned: &planned,
        pageSize: pageSize, firstPageSize: firstPageSize, largest: largest,
        why: trace.isEnabled ? why() : "", removal: &removal, afterBatch: afterBatch,
        until: done)
      if !goOn || done(removal.bytes) { break }
    }
    return removal
  }

  /// One walk of ``removeLeastRecentlyUsed(before:now:dryRun:protected:planned:pageSize:firstPageSize:largest:because:afterBatch:until:)``:
  /// only over objects a remote holds when `remoteBacked` is true, only
  /// over the others when false; adds to `removal`.
  /// Returns false when `afterBatch` stopped it.
  private func removeLeastRecentlyUsed(
    _ index: Index, remoteBacked: Bool?, confirming check: RemoteCopyCheck?,
    before cutoff: Int64?, now: Int64, dryRun: Bool,
    protected: Set<BlobDigest>, planned: inout Set<BlobDigest>, pageSize: Int,
    firstPageSize: Int?, largest: Int64?, why: String, removal: inout Removal,
    afterBatch: (_ batch: Removal) throws(TroveError) -> Bool,
    until done: (_ removedBytes: Int64) -> Bool
  ) throws(TroveError) -> Bool {
    var cursor: (Int64, String) = (.min, "")
    var size = min(firstPageSize ?? pageSize, pageSize)
    while !done(removal.bytes) {
      let after = cursor
      let limit = size
      let page = try index.read("list eviction candidates") { (tx) throws(TroveError) in
        try tx.leastRecentlyUsed(
          after: after, before: cutoff, largest: largest, now: now, remoteBacked: remoteBacked,
          limit: limit)
      }
      size = min(size * 2, pageSize)
      guard !page.isEmpty else { return true }
      var batch: [StoreEntry] = []
      var batchBytes: Int64 = 0
      // The walk goes on after the last entry taken or passed over: those
      // of the page after it stay candidates should some of the batch be
      // kept (read, pinned, or a file that cannot be unlinked).
      var considered = page.count
      for (i, entry) in page.enumerated()
      where !protected.contains(entry.digest) && !planned.contains(entry.digest) {
        if done(removal.bytes + batchBytes) {
          considered = i
          break
        }
        // Evicted for a remote's copy only when a remote confirms it now.
        if let check, !check.confirms(entry) { continue }
        batch.append(entry)
        batchBytes += entry.allocatedBytes
      }
      let last = page[max(0, considered - 1)]
      cursor = (last.lastAccessNanoseconds, last.digest.hex)
      if dryRun {
        planned.formUnion(batch.map(\.digest))
        removal.entries += batch.count
        removal.bytes += batchBytes
        continue
      }
      var thisBatch = Removal()
      let started = trace.now
      let (evicted, failures) = try objects.evict(batch, now: now)
      thisBatch.errors = failures.map(\.description)
      for (entry, removed) in zip(batch, evicted) {
        if removed {
          thisBatch.entries += 1
          thisBatch.bytes += entry.allocatedBytes
          trace(
            .remove, "evicted \(entry.digest) (\(CachePolicy.Quantities.formatSize(entry.size)))",
            why: Self.evictionCause(why, entry, now: now, remoteBacked: remoteBacked == true))
        } else {
          trace(
            .remove, "kept \(entry.digest)",
            why:
              "chosen for eviction, but read, stored or pinned since, or its file could not be unlinked"
          )
          thisBatch.skipped += 1
        }
      }
      trace(
        .remove,
        "evicted \(thisBatch.entries) of \(batch.count) entries chosen (\(CachePolicy.Quantities.formatSize(thisBatch.bytes)))",
        why: why, duration: trace.elapsed(since: started))
      removal.entries += thisBatch.entries
      removal.bytes += thisBatch.bytes
      removal.skipped += thisBatch.skipped
      removal.errors += thisBatch.errors.prefix(max(0, Self.reportedErrors - removal.errors.count))
      if !batch.isEmpty, try !afterBatch(thisBatch) { return false }
    }
    return true
  }

  /// How many entries a sweep evicts per batch: one
  /// ``ObjectTable/evict(_:now:part:)``, which removes them in parts of
  /// ``RemovalEngine/removalPart``, two parts to a
  /// transaction (each part's unlinks overlapping the next part's file
  /// lookups). The pipeline of parts starts and drains once per batch, so
  /// batches are large (about 10 MB of candidates in memory per batch).
  /// The index's cost per entry falls with the part: its rows are spread
  /// over the B-trees by digest, so a part writes pages shared by many of
  /// its entries once. Each transaction holds the index's write lock while
  /// a part is unlinked (other writers wait up to 30 s).
  static let sweepBatch = 131_072

  /// The trace's reason for evicting `entry`: `why`, with when it was
  /// last used and whether a remote holds it.
  private static func evictionCause(
    _ why: String, _ entry: StoreEntry, now: Int64, remoteBacked: Bool
  ) -> String {
    let idle = max(0, now - entry.lastAccessNanoseconds) / 1_000_000_000
    return "\(why); last used \(CachePolicy.Quantities.formatDuration(idle)) ago"
      + (remoteBacked ? "; a remote holds it (confirmed), so it goes first" : "")
  }

  /// The trace's reason for a budget eviction.
  private static func overBudget(
    _ stored: Int64, budget: Int64, target: Int64, reason: SweepReason
  ) -> String {
    let size = CachePolicy.Quantities.formatSize
    return
      "least recently used: \(size(stored)) stored, over the budget of \(size(budget)); evicting down to \(size(target))"
      + (reason == .overBudget ? " after a put" : "")
  }

  /// The trace's reason for a sweep.
  private static func sweepCause(_ reason: SweepReason) -> String {
    switch reason {
    case .requested: return "a sweep was asked for"
    case .overBudget: return "a put took the store over its budget"
    case .lowSpace: return "the volume was below min-free before an important put"
    case .diskFull: return "a write found the volume full"
    }
  }

  /// After a put: if the store is over its budget (an O(1) read of the
  /// running totals), sweeps — unless another process already is. Never
  /// evicts `protected`, the objects the put just stored. Returns the
  /// sweep's report, if one ran.
  func sweepIfOverBudget(protecting protected: [BlobDigest]) throws(TroveError) -> SweepReport? {
    guard let budget = try currentSettings().policy.budget,
      try index().read("read totals", { (tx) throws(TroveError) in try tx.totals() })
        .allocatedBytes > budget
    else { return nil }
    do throws(TroveError) {
      return try withSweepLock(wait: false) { () throws(TroveError) in
        try sweepLocked(SweepOptions(protected: Set(protected)), reason: .overBudget)
      }
    } catch  where error.code == .busy {
      // The running sweep will bring the store down.
      return nil
    }
  }
}
