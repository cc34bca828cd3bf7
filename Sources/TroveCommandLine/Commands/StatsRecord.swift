import Trove

/// `stats --json`: every key always present (`null` when absent), sizes in
/// bytes, times ISO 8601 UTC.
struct StatsRecord: Encodable {
  var root: String
  var entries: Int64
  var logicalBytes: Int64
  var allocatedBytes: Int64
  var sharedBytes: Int64
  var dedupHits: Int64
  var dedupSavedBytes: Int64
  var filesystem: String
  var cloneSupported: Bool
  var availableBytes: Int64
  var totalBytes: Int64
  var minimumFreeBytes: Int64
  @Nullable var budget: Int64?
  @Nullable var maxAge: Int64?
  var overBudget: Bool
  var pinnedEntries: Int64
  var pinnedBytes: Int64
  @Nullable var lastSweep: SweepRecord?
  @Nullable var lastPressureEviction: SweepRecord?
  var keys: Int64
  var compression: String
  var storedBytes: Int64
  var compressedEntries: Int64
  var compressionRatio: Double
  var skippedIncompressible: Int64
  var skippedSmall: Int64
  var quarantinedEntries: Int
  var quarantinedBytes: Int64
  var configProblems: [Problem]
  var hits: Hits
  var remoteBackedEntries: Int64
  var remoteBackedBytes: Int64
  var misses: Int64
  @Nullable var hitRate: Double?
  @Nullable var countedSince: String?
  /// The environment variables overriding settings (`TROVE_BUDGET`, …).
  var overrides: [String]

  /// Hits by where they were served from: the local store, or a remote
  /// that held what the store did not (read through it).
  struct Hits: Encodable {
    var local: Int64
    var remote: Int64
  }

  /// One logged sweep.
  struct SweepRecord: Encodable {
    var time: String
    var reason: String
    var removedEntries: Int64
    var removedBytes: Int64
    @Nullable var freedBytes: Int64?
    var seconds: Double
  }

  /// A setting in config.json that cannot be used.
  struct Problem: Encodable {
    @Nullable var key: String?
    var found: String
  }

  init(_ s: StoreStatistics) {
    func sweep(_ last: StoreStatistics.LastSweep) -> SweepRecord {
      SweepRecord(
        time: Output.time(last.time), reason: last.reason.rawValue,
        removedEntries: last.removedEntries, removedBytes: last.removedBytes,
        freedBytes: last.freedBytes, seconds: last.seconds)
    }
    root = s.root
    entries = s.entries
    logicalBytes = s.logicalBytes
    allocatedBytes = s.allocatedBytes
    sharedBytes = s.sharedBytes
    dedupHits = s.dedupHits
    dedupSavedBytes = s.dedupSavedBytes
    filesystem = s.filesystem
    cloneSupported = s.cloneSupported
    availableBytes = s.availableBytes
    totalBytes = s.totalBytes
    minimumFreeBytes = s.minimumFreeBytes
    budget = s.budget
    maxAge = s.maxAge
    overBudget = s.isOverBudget
    pinnedEntries = s.pinnedEntries
    pinnedBytes = s.pinnedBytes
    lastSweep = s.lastSweep.map(sweep)
    lastPressureEviction = s.lastPressureEviction.map(sweep)
    keys = s.keys
    compression = s.compression
    storedBytes = s.storedBytes
    compressedEntries = s.compressedEntries
    compressionRatio = s.compressionRatio
    skippedIncompressible = s.skippedIncompressible
    skippedSmall = s.skippedSmall
    quarantinedEntries = s.quarantinedEntries
    quarantinedBytes = s.quarantinedBytes
    configProblems = s.configProblems.map { Problem(key: $0.key?.rawValue, found: $0.found) }
    hits = Hits(local: s.hits, remote: s.remoteHits)
    remoteBackedEntries = s.remoteBackedEntries
    remoteBackedBytes = s.remoteBackedBytes
    misses = s.misses
    hitRate = s.hitRate
    countedSince = s.countedSince.map(Output.time)
    overrides = CachePolicy.Key.allCases.filter(s.overriddenSettings.contains).map(
      \.environmentVariable)
  }
}
