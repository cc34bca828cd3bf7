/// What a store holds and what its filesystem can do.
public struct StoreStatistics: Sendable, Hashable, Codable {
  /// The store's root folder.
  public var root: String
  /// Objects stored.
  public var entries: Int64
  /// Sum of their sizes.
  public var logicalBytes: Int64
  /// Sum of their allocated sizes when stored (`st_blocks * 512`), blocks
  /// two objects share counted once (``sharedBytes``). Clones handed out
  /// share extents with their sources, so the disk may hold less than this.
  public var allocatedBytes: Int64
  /// Bytes of objects' files whose blocks an earlier version's file holds
  /// too (``Store/shareBlocks(of:dryRun:limit:)``), as the kernel shared them.
  public var sharedBytes: Int64 = 0
  /// Puts whose bytes were already stored.
  public var dedupHits: Int64
  /// Bytes those puts did not store again.
  public var dedupSavedBytes: Int64
  /// The store's filesystem (`xfs`, `btrfs`, `ext4`, …).
  public var filesystem: String
  /// Whether that filesystem clones files (FICLONE), probed.
  public var cloneSupported: Bool
  /// Bytes free for unprivileged users on the store's filesystem.
  public var availableBytes: Int64
  /// The store filesystem's size.
  public var totalBytes: Int64
  /// Free space the policy keeps on the volume (`min-free`), in bytes.
  public var minimumFreeBytes: Int64
  /// The byte budget (allocated bytes), if any.
  public var budget: Int64?
  /// The maximum age in seconds, if any.
  public var maxAge: Int64?
  /// Entries held by an unexpired pin.
  public var pinnedEntries: Int64
  /// Bytes (allocated) those entries take.
  public var pinnedBytes: Int64
  /// The last sweep or eviction of any kind, if there was one.
  public var lastSweep: LastSweep?
  /// The last eviction for space (``SweepReason/lowSpace`` or
  /// ``SweepReason/diskFull``), if there was one.
  public var lastPressureEviction: LastSweep?
  /// Whether the store takes more than its budget; ``pinnedBytes`` says how
  /// much of it no sweep may remove.
  public var isOverBudget: Bool { budget.map { allocatedBytes > $0 } ?? false }
  /// Keys bound to objects.
  public var keys: Int64
  /// The compression policy for new objects (`none` or `zstd:LEVEL`).
  public var compression: String
  /// Bytes the object files hold: logical bytes for raw objects, frame
  /// lengths for compressed ones.
  public var storedBytes: Int64
  /// Objects stored compressed.
  public var compressedEntries: Int64
  /// Objects stored raw with compression on because their sample did not
  /// shrink enough (already-compressed downloads).
  public var skippedIncompressible: Int64
  /// Objects stored raw with compression on because they were small.
  public var skippedSmall: Int64
  /// Entries in `quarantine/`: corrupt objects and what a repair moved out
  /// of `objects/` — never served, not counted above; sweeps remove them
  /// 30 days after they were moved there.
  public var quarantinedEntries = 0
  /// Their allocated bytes.
  public var quarantinedBytes: Int64 = 0
  /// Settings in `config.json` that cannot be used (see ``PolicyProblem``):
  /// the store refuses puts, fetches and sweeps until they are repaired.
  /// The policy values above hold their defaults for those settings.
  public var configProblems: [PolicyProblem] = []
  /// Reads served from the store since the counts were last reset
  /// (``Store/resetAccessCounts()``): every `Store.materialize(_:at:mode:replacing:durable:verify:)`,
  /// ``Store/write(_:to:)`` and ``Store/bytes(for:)`` of an object it
  /// holds, and every fetch it served (writing the fetched object out is
  /// part of the fetch). ``Store/contains(_:)`` (`has`) is a probe, and
  /// the store's own reads (verify, export, a remote push) are not
  /// served to anyone: they count nothing. Counts are written to the
  /// index in batches (``Store/statistics()`` writes this store's first).
  public var hits: Int64 = 0
  /// Reads served by objects the store read through one of its remotes
  /// (a local miss the remote held); not in ``hits``.
  public var remoteHits: Int64 = 0
  /// Objects the store holds that one of its remotes is known to hold too
  /// (uploaded, found there or pulled from it): what it could evict and
  /// read back. 0 for a store without remotes.
  public var remoteBackedEntries: Int64 = 0
  /// Their logical bytes.
  public var remoteBackedBytes: Int64 = 0
  /// Reads the store could not serve (a `get` of an object it does not
  /// hold, a `fetch` that downloaded).
  public var misses: Int64 = 0
  /// When the counts were last reset, nanoseconds since 1970; nil if never.
  public var countedSince: Int64?

  /// Settings this process takes from the environment rather than from
  /// `config.json` (``StoreConfiguration/policyOverrides``).
  public var overriddenSettings: Set<CachePolicy.Key> = []

  /// Hits ÷ (hits + misses), from 0 to 1; nil before the first read.
  public var hitRate: Double? {
    let served = hits + remoteHits
    return served + misses > 0 ? Double(served) / Double(served + misses) : nil
  }

  /// Logical ÷ stored bytes: 1 without compression.
  public var compressionRatio: Double {
    storedBytes > 0 ? Double(logicalBytes) / Double(storedBytes) : 1
  }

  /// What a sweep did, as the store's sweep log records it.
  public struct LastSweep: Sendable, Hashable, Codable {
    /// When it ran, nanoseconds since 1970.
    public var time: Int64
    /// Why it ran.
    public var reason: SweepReason
    /// Entries it removed.
    public var removedEntries: Int64
    /// Bytes (allocated) they took.
    public var removedBytes: Int64
    /// Free space the volume gained (`statvfs`), for evictions made for space.
    public var freedBytes: Int64?
    /// How long it took, in seconds.
    public var seconds: Double

    init(_ record: SweepRecord) {
      time = record.time
      reason = record.reason
      removedEntries = record.removedEntries
      removedBytes = record.removedBytes
      freedBytes = record.freedBytes
      seconds = Double(record.nanoseconds) / 1e9
    }
  }
}

/// The answer of a clone probe between the store and a folder.
public struct CloneSupport: Sendable, Hashable, Codable {
  /// Whether FICLONE works from the store to the folder.
  public var isSupported: Bool
  /// The store's filesystem.
  public var storeFilesystem: String
  /// The folder's filesystem.
  public var destinationFilesystem: String
  /// Why not, when not: the failing call and errno.
  public var reason: String?
}

extension Store {
  /// Totals from the index (O(1); with remotes, O(objects) for the
  /// remote-backed bytes), the store filesystem's kind and free space, and
  /// whether it can clone.
  public func statistics() throws(TroveError) -> StoreStatistics {
    writeAccessCounts()
    let hasRemotes = !((try? remotes()) ?? []).isEmpty
    let backed =
      hasRemotes
      ? try index().read("count remote-backed objects") { (tx) throws(TroveError) in
        try tx.remoteBackedTotals()
      } : (0, 0)
    let now = currentTimeNanoseconds()
    let (totals, pinned, last, pressure, keys) = try index().read("read totals") {
      (tx) throws(TroveError) in
      (
        try tx.totals(), try tx.pinnedTotals(now: now), try tx.lastSweep(),
        try tx.lastSweep(reasons: [.lowSpace, .diskFull]), try tx.keyCount()
      )
    }
    let quarantine = objects.quarantineContents()
    // Statistics describe a store whose settings are damaged too.
    let settings = try loadedSettings()
    let policy = settings.policy
    let volume = try volumeSpace()
    let space = FreeSpace(
      available: volume.available, total: volume.total,
      threshold: policy.minimumFree.bytes(ofVolume: volume.total))
    // A read-only store has no scratch room to probe in: it clones nothing in.
    var clones = CloneSupport(
      isSupported: false, storeFilesystem: objects.filesystem.description,
      destinationFilesystem: objects.filesystem.description,
      reason: readOnlyReason.map { "read-only store: \($0)" })
    if !isReadOnly { clones = try cloneSupport() }
    return StoreStatistics(
      root: root, entries: totals.entries, logicalBytes: totals.logicalBytes,
      allocatedBytes: totals.allocatedBytes, sharedBytes: totals.sharedBytes,
      dedupHits: totals.dedupHits,
      dedupSavedBytes: totals.dedupBytes, filesystem: clones.storeFilesystem,
      cloneSupported: clones.isSupported, availableBytes: space.available,
      totalBytes: space.total, minimumFreeBytes: space.threshold, budget: policy.budget,
      maxAge: policy.maxAge, pinnedEntries: pinned.entries, pinnedBytes: pinned.bytes,
      lastSweep: last.map(StoreStatistics.LastSweep.init),
      lastPressureEviction: pressure.map(StoreStatistics.LastSweep.init), keys: keys,
      compression: policy.compression.description,
      storedBytes: totals.storedBytes, compressedEntries: totals.compressedEntries,
      skippedIncompressible: totals.skippedIncompressible, skippedSmall: totals.skippedSmall,
      quarantinedEntries: quarantine.entries, quarantinedBytes: quarantine.bytes,
      configProblems: settings.problems, hits: totals.hits, remoteHits: totals.remoteHits,
      remoteBackedEntries: backed.0, remoteBackedBytes: backed.1,
      misses: totals.misses,
      countedSince: totals.countedSince, overriddenSettings: settings.overridden)
  }

  /// Probes whether objects can be cloned into `folder` (the store's own
  /// `tmp/` when nil): clones a one-block scratch file there and removes
  /// both. The verdict is remembered for the pair of filesystems.
  public func cloneSupport(to folder: String? = nil) throws(TroveError) -> CloneSupport {
    let target = folder ?? tmpPath
    return try attempt("probe clones into", target) { () throws(SystemCallError) in
      let destinationDirectory =
        folder == nil ? tmpDirectory : try FileDescriptor.open(target, .directory)
      defer { if folder != nil { destinationDirectory.close() } }
      let sourceName = StoreLayout.temporaryName("probe")
      let source = try FileDescriptor.open(
        sourceName, in: tmpDirectory, [.readWrite, .create, .exclusive], permissions: 0o600)
      defer {
        source.close()
        try? tmpDirectory.removeFile(sourceName)
      }
      try source.writeAll([UInt8](repeating: 0x54, count: 4096))
      let cloneName = ".trove-" + StoreLayout.temporaryName("probe")
      let clone = try FileDescriptor.open(
        cloneName, in: destinationDirectory, [.writeOnly, .create, .exclusive],
        permissions: 0o600)
      defer {
        clone.close()
        try? destinationDirectory.removeFile(cloneName)
      }
      let destinationDevice = try clone.status().device
      let kinds = (try source.filesystemKind(), try clone.filesystemKind())
      var support = CloneSupport(
        isSupported: true, storeFilesystem: kinds.0.description,
        destinationFilesystem: kinds.1.description, reason: nil)
      do throws(SystemCallError) {
        try clone.cloneContents(from: source)
        cloneProbe.record(.supported, from: device, to: destinationDevice)
      } catch  where error.errno.meansUnsupported {
        cloneProbe.record(.unsupported(error), from: device, to: destinationDevice)
        support.isSupported = false
        support.reason = error.description
      }
      return support
    }
  }
}
