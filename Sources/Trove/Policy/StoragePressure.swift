#if canImport(Glibc)
  import Glibc
#endif

/// How much a put matters when the volume runs low on space (the seeds'
/// important and opportunistic capacity).
public enum PutPriority: String, Sendable, Hashable, Codable {
  /// Work the user asked for: stored if there is any way to make room.
  case important
  /// Optional work (prefetch, warming): skipped with `.lowOnSpace` when
  /// the volume is below the policy's minimum free space, evicting nothing.
  case opportunistic
}

/// The store volume's free space beside the policy's threshold.
public struct FreeSpace: Sendable, Hashable, Codable {
  /// Bytes available to unprivileged users (statvfs `f_bavail`).
  public var available: Int64
  /// The volume's size.
  public var total: Int64
  /// The free space the policy wants kept (`min-free`), in bytes.
  public var threshold: Int64

  /// Whether the volume is below the threshold.
  public var isLow: Bool { available < threshold }
}

/// The janitor's rules for a volume running out of space — a cache that
/// stops growing, not one that purges itself because other data filled
/// the disk:
///
/// - Above `min-free` (plus the put's own size), a put costs one `statvfs`.
/// - Below it, an optional put is skipped and evicts nothing.
/// - An important put first runs the normal sweep (expiry, then LRU down
///   to the budget's low-water mark when there is a budget). If the volume
///   is still short, it evicts least recently used entries worth about its
///   own size (plus a margin), so the store does not grow by it — never
///   more, whatever else fills the volume.
/// - A put that could not fit even if every unpinned entry went fails at
///   once, before writing, naming its input, what it needs and what is free.
/// - A write that finds the volume full evicts what is still to be written
///   (64 MiB worth when that is unknown), measures, and retries, a bounded
///   number of times.
/// - Evictions for space go batch by batch, each followed by a `statvfs`
///   — the first batch one entry, each next twice the last —, and stop as
///   soon as a batch freed nothing measurable: objects whose
///   blocks are shared with clones handed out earlier free nothing, and
///   removing more of them would empty the cache for nothing.
///
/// Every such eviction is recorded in the sweep log with its reason and
/// returned to the put that caused it.
enum PressurePolicy {
  /// Room made beyond a put's own size: 1 MiB, or 1/16 of the size.
  static func margin(for size: Int64) -> Int64 { max(1 << 20, size / 16) }
  /// What a write into a full volume evicts per round when it does not know
  /// how much is still to come.
  static let unknownSizeBatch: Int64 = 64 << 20
  /// How many times a write into a full volume evicts and retries.
  static let fullDiskRounds = 16
  /// Entries evicted between two measurements of free space.
  static let batchSize = 16
  /// How long a put under pressure waits for a running sweep before it
  /// goes on without evicting.
  static let lockWait = Duration.seconds(30)
  /// How long a measurement waits for freed blocks to show.
  static let settleTime = Duration.milliseconds(100)
  /// A batch that freed less than this (or less than an eighth of what
  /// its entries recorded) freed nothing measurable: removing a file
  /// whose blocks are shared with clones still gives back a little (XFS
  /// drops its copy-on-write preallocation), which is not room.
  static func freedAnything(_ freed: Int64, of recorded: Int64) -> Bool {
    freed >= max(smallestMeasurable, recorded / 8)
  }
  /// Less than this freed is not told apart from nothing.
  static let smallestMeasurable: Int64 = 4096
}

extension Store {
  /// Free space on the store's volume (statvfs) and the policy's threshold.
  public func freeSpace() throws(TroveError) -> FreeSpace {
    try freeSpace(policy: currentSettings().policy)
  }

  /// ``freeSpace()`` against `policy`'s threshold (settings already read).
  func freeSpace(policy: CachePolicy) throws(TroveError) -> FreeSpace {
    let space = try volumeSpace()
    let threshold = policy.minimumFree.bytes(ofVolume: space.total)
    return FreeSpace(available: space.available, total: space.total, threshold: threshold)
  }

  func volumeSpace() throws(TroveError) -> (available: Int64, total: Int64) {
    try attempt("inspect", root) { () throws(SystemCallError) in
      try Sys.spaceAvailable(at: root)
    }
  }

  /// The rule that admits a put of `size` bytes of data (nil when
  /// unknown; 0 for a clone, which takes no data blocks) from `input` under
  /// `policy`: one `statvfs` when there is room; else the rules of
  /// ``PressurePolicy``. Returns the evictions it made (recorded in the
  /// sweep log) and the free space it measured when that was enough without
  /// evicting (nil when it evicted, or for a size not known). Ingests reach
  /// it through their ``Admission``.
  ///
  /// - Throws: `.lowOnSpace` for an opportunistic put below `min-free`;
  ///   `.noSpace` naming `input` when the put cannot fit at all.
  func makeRoom(size: Int64?, priority: PutPriority, input: String, policy: CachePolicy)
    throws(TroveError) -> (sweeps: [SweepReport], room: FreeSpace?)
  {
    let space = try freeSpace(policy: policy)
    let needed = space.threshold.addingSaturated(size ?? 0)
    guard space.available < needed else { return ([], size == nil ? nil : space) }
    guard priority == .important else {
      trace(
        .pressure, "skipped an optional put of '\(input)'",
        why:
          "\(CachePolicy.Quantities.formatSize(space.available)) free, min-free \(CachePolicy.Quantities.formatSizeSetting(space.threshold))"
      )
      let room =
        space.available < space.threshold || size == nil
        ? "\(CachePolicy.Quantities.formatSize(space.available)) free, below"
        : "it needs \(CachePolicy.Quantities.formatSize(size ?? 0)) of the \(CachePolicy.Quantities.formatSize(space.available)) free, which would leave less than"
      throw TroveError(
        .lowOnSpace,
        "skipped an optional put of '\(input)' into '\(root)': \(room) the \(CachePolicy.Quantities.formatSizeSetting(space.threshold)) the store keeps free (min-free)",
        path: input)
    }
    if let size, size > space.available {
      let now = currentTimeNanoseconds()
      let (stored, pinned) = try index().read("read totals") {
        (tx) throws(TroveError) -> (Int64, Int64) in
        (try tx.totals().allocatedBytes, try tx.pinnedTotals(now: now).bytes)
      }
      let evictable = max(0, stored - pinned)
      if size > space.available.addingSaturated(evictable) {
        trace(
          .pressure, "refused a put of '\(input)'",
          why:
            "it needs \(CachePolicy.Quantities.formatSize(size)), \(CachePolicy.Quantities.formatSize(space.available)) free and \(CachePolicy.Quantities.formatSize(evictable)) evictable"
        )
        throw TroveError(
          .noSpace,
          "cannot put '\(input)': it needs \(CachePolicy.Quantities.formatSize(size)) and the store's volume has \(CachePolicy.Quantities.formatSize(space.available)) free, \(CachePolicy.Quantities.formatSize(evictable)) more if every unpinned entry were evicted",
          path: input)
      }
    }
    do throws(TroveError) {
      return (try relieveLowSpace(size: size, needed: needed), nil)
    } catch  where error.code == .busy {
      // A sweep that does not end (stopped, or endless): go on without
      // evicting; a full volume is still met when the writes meet it.
      return ([], nil)
    }
  }

  /// The important put's part of ``makeRoom(size:priority:input:policy:)`` below
  /// `min-free`: the normal sweep, then evictions worth about its size.
  private func relieveLowSpace(size: Int64?, needed: Int64) throws(TroveError) -> [SweepReport] {
    try withSweepLock(waitingAtMost: PressurePolicy.lockWait) {
      () throws(TroveError) -> [SweepReport] in
      let clock = ContinuousClock()
      let start = clock.now
      let before = try volumeSpace().available
      // The janitor's normal pass first.
      var report = try sweepLocked(SweepOptions(), reason: .lowSpace, recording: false)
      var available = try volumeSpace().available
      if let size, size > 0, available < needed {
        // Still short: stop growing. Evict about the put's own size.
        let relief = try evictForSpace(
          worth: size + PressurePolicy.margin(for: size), until: needed, batches: .max,
          sizedToNeed: true)
        report.evictedEntries += relief.entries
        report.removedBytes += relief.bytes
        report.skippedEntries += relief.skipped
        report.bytesAfter -= relief.bytes
        available = try volumeSpace().available
      }
      report.freedBytes = available - before
      report.seconds = (clock.now - start).seconds
      // Recorded even when nothing could go: `stats` and `put -v` say so.
      try record(report, at: currentTimeNanoseconds())
      return [report]
    }
  }

  /// Evicts least recently used unpinned entries, batch by batch, each
  /// followed by a `statvfs`, until they recorded `worth` bytes, the volume
  /// has `until` bytes available, `batches` batches were evicted, or a
  /// batch freed nothing measurable. The first batch is one entry, and
  /// each next one twice the last, up to ``PressurePolicy/batchSize``: where
  /// eviction frees nothing (blocks shared with clones handed out), one
  /// entry goes, not a batch. With `sizedToNeed`, entries larger than
  /// `worth` are passed over: a small put never costs a large object.
  /// Hold the sweep lock.
  private func evictForSpace(
    worth: Int64, until: Int64?, batches: Int, sizedToNeed: Bool
  ) throws(TroveError) -> Removal {
    var planned = Set<BlobDigest>()
    var available = try quietSpace()
    var left = batches
    return try removeLeastRecentlyUsed(
      before: nil, now: currentTimeNanoseconds(), dryRun: false, protected: [],
      planned: &planned, pageSize: PressurePolicy.batchSize, firstPageSize: 1,
      largest: sizedToNeed ? worth : nil,
      afterBatch: { (batch) throws(TroveError) -> Bool in
        left -= 1
        if left <= 0 { return false }
        // Entries that recorded less than a block (empty objects) prove
        // nothing either way: the next batch's measurement counts them.
        guard batch.bytes >= PressurePolicy.smallestMeasurable else { return true }
        let now = try settledSpace(after: available, freeing: batch.bytes)
        defer { available = now }
        if let until, now >= until { return false }
        return PressurePolicy.freedAnything(now - available, of: batch.bytes)
      },
      until: { removed in removed >= worth })
  }

  /// The volume's available bytes once they hold still: after a write
  /// met a full volume, XFS trims preallocations and frees blocks in the
  /// background for a while, and space it frees after this reading would
  /// be taken for what the first eviction freed. Reads until two readings
  /// 5 ms apart agree, for up to ``PressurePolicy/settleTime``.
  private func quietSpace() throws(TroveError) -> Int64 {
    let clock = ContinuousClock()
    let deadline = clock.now + PressurePolicy.settleTime
    var last = try volumeSpace().available
    while clock.now < deadline {
      Sys.sleep(microseconds: 5_000)
      let now = try volumeSpace().available
      if now == last { return now }
      last = now
    }
    return last
  }

  /// The volume's available bytes after an eviction that recorded
  /// `recorded` bytes, from `before`: some filesystems (XFS) free the
  /// blocks of unlinked files in the background, a millisecond or two
  /// later, so this looks again for up to ``PressurePolicy/settleTime``
  /// until the space shows.
  private func settledSpace(after before: Int64, freeing recorded: Int64) throws(TroveError)
    -> Int64
  {
    let clock = ContinuousClock()
    let deadline = clock.now + PressurePolicy.settleTime
    var now = try volumeSpace().available
    while !PressurePolicy.freedAnything(now - before, of: recorded) && clock.now < deadline {
      Sys.sleep(microseconds: 2_000)
      now = try volumeSpace().available
    }
    return now
  }

  /// After a write found the volume full: gives back the ballast when the
  /// volume is nearly full (so the index can record deletions), evicts
  /// least recently used entries worth `needed` bytes
  /// (``PressurePolicy/unknownSizeBatch`` when unknown), and records it. Returns the report; its `freedBytes` says
  /// whether retrying can help.
  func relieveFullDisk(needed: Int64?) throws(TroveError) -> SweepReport {
    try withSweepLock(waitingAtMost: PressurePolicy.lockWait) {
      () throws(TroveError) -> SweepReport in
      let clock = ContinuousClock()
      let start = clock.now
      let before = try volumeSpace().available
      if before < 4 * StoreLayout.reserveSize { _ = releaseReserve() }
      let released = try quietSpace()
      defer {
        if ((try? volumeSpace().available) ?? 0) > 8 * StoreLayout.reserveSize {
          ensureReserve()
        }
      }
      let relief = try evictForSpace(
        worth: needed.map { $0 + PressurePolicy.margin(for: $0) }
          ?? PressurePolicy.unknownSizeBatch,
        until: nil, batches: .max, sizedToNeed: false)
      var report = SweepReport(reason: .diskFull)
      report.evictedEntries = relief.entries
      report.removedBytes = relief.bytes
      report.skippedEntries = relief.skipped
      report.freedBytes = try volumeSpace().available - released
      report.bytesAfter = try index().read("read totals") { (tx) throws(TroveError) in
        try tx.totals().allocatedBytes
      }
      report.seconds = (clock.now - start).seconds
      if relief.entries > 0 { try record(report, at: currentTimeNanoseconds()) }
      return report
    }
  }
}

/// Writes into a temp file of `tmp/` under storage pressure: a full
/// filesystem (ENOSPC, EDQUOT) is met by ``Store/relieveFullDisk(needed:)``
/// — evicting what is still to be written, or 64 MiB worth when that is
/// unknown — and the failed write is retried from where it stopped; bytes
/// already written are kept. It gives up, throwing the write's error, when
/// an eviction freed nothing or after ``PressurePolicy/fullDiskRounds``; an
/// opportunistic put gives up at once, evicting nothing.
struct PressuredWrites {
  let store: Store
  /// An opportunistic put evicts nothing: a full volume fails it.
  let priority: PutPriority
  private var rounds = 0
  /// The evictions made so far.
  private(set) var reliefs: [SweepReport] = []

  init(store: Store, priority: PutPriority) {
    self.store = store
    self.priority = priority
  }

  /// Adds an eviction made by another writer on this put's behalf.
  mutating func record(_ relief: SweepReport) { reliefs.append(relief) }

  /// Writes all of `bytes` to `file`; `remaining` is what is still to be
  /// written counting `bytes`, or nil when unknown.
  mutating func writeAll(
    _ bytes: UnsafeRawBufferPointer, to file: FileDescriptor, remaining: Int64?
  ) throws(SystemCallError) {
    var offset = 0
    while offset < bytes.count {
      do throws(SystemCallError) {
        offset += try file.write(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
      } catch {
        guard error.errno == .noSpace || error.errno == .diskQuotaExceeded,
          priority == .important, rounds < PressurePolicy.fullDiskRounds
        else { throw error }
        rounds += 1
        guard
          let relief = try? store.relieveFullDisk(
            needed: remaining.map { $0 - Int64(offset) })
        else { throw error }
        if relief.removedEntries > 0 { reliefs.append(relief) }
        guard let freed = relief.freedBytes,
          PressurePolicy.freedAnything(freed, of: relief.removedBytes)
        else { throw error }
      }
    }
  }
}
