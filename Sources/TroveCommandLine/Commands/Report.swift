import Trove

let listCommand = CommandSpec(
  name: "ls",
  abstract: "List the stored objects, with their keys, sizes, form, pins and last use.",
  usage:
    "[--sort <order>] [--limit <n>] [--older-than <duration>] [--larger-than <size>] [--pinned] [--key <glob>] [--format <format>] [--json]",
  arguments: [],
  options: [
    OptionSpec(
      names: ["--sort"], valueName: "order",
      help:
        "digest (default), size (largest first), access (most recently used first) or created (newest first)."
    ),
    OptionSpec(
      names: ["--limit"], valueName: "n", help: "List at most n objects (the first in the order)."),
    OptionSpec(
      names: ["--older-than"], valueName: "duration",
      help: "Only objects not used for longer than this (30d, 12h, 90m)."),
    OptionSpec(
      names: ["--larger-than"], valueName: "size",
      help: "Only objects larger than this (500M, 1G, 4096)."),
    OptionSpec(
      names: ["--pinned"], valueName: nil, help: "Only objects a pin holds (lapsed leases do not)."),
    OptionSpec(
      names: ["--key"], valueName: "glob",
      help: "Only objects with a key matching this shell glob ('*', '?', '[a-z]'; quote it)."),
    OptionSpec(
      names: ["--format"], valueName: "format",
      help:
        "trove (the columns below; default) or xxhsum (HEX  PATH of each object stored raw, which 'xxhsum -c' checks); not with --json."
    ),
    jsonOption,
  ],
  discussion: """
    One line per object, columns aligned: digest, size, stored form (raw or zstd),
    pins that hold it ('-', '1 pin', '2 pins'), last use ('3 days ago'), and its
    keys: the first in key order, then '(+N more)' when there are others ('-' for
    none; 'trove show' lists them all). By digest unless '--sort' says otherwise;
    ties are broken by digest. Filters combine (all must hold). '--json' prints the
    same objects with every field, times in ISO 8601 UTC. With '--format xxhsum',
    'HEX  PATH' for each selected object stored raw (PATH its file in the store),
    which 'xxhsum -c' checks; objects stored compressed are left out (their files
    hold zstd frames: 'trove verify' checks them).
    """,
  closedPipeIsSuccess: true,
  run: { invocation in
    try invocation.requirePositionals([])
    let xxhsum = try invocation.xxhsumFormat()
    let query = try invocation.entryQuery()
    // No store yet: an empty cache lists nothing.
    guard let store = try invocation.openStoreIfPresent() else {
      if invocation.flag("--json") { Output.json([EntryRecord]()) }
      return ExitStatus.success
    }
    let root = try invocation.storeRoot
    let now = RelativeTime.now
    if invocation.flag("--json") {
      Output.json(try store.list(query).map { EntryRecord($0, now: now) })
      return ExitStatus.success
    }
    var out = Output.Lines()
    defer { out.flush() }
    if xxhsum {
      try store.list(query) { details in
        let e = details.entry
        guard !e.isCompressed else { return }
        out.line(
          digestLine(
            e.digest, root + "/objects/\(e.digest.hex.prefix(2))/\(e.digest.hex)", xxhsum: true))
      }
      return ExitStatus.success
    }
    // The columns are aligned to their widest cell: a listing that fits in
    // memory is printed from it; a longer one is read twice, first for
    // the widths alone, so memory stays bounded.
    var table = ListingTable(now: now)
    var held: [[String]]? = []
    try store.list(query) { details in
      let row = table.measure(details)
      if held != nil {
        held!.append(row)
        if held!.count > ListingTable.heldRows { held = nil }
      }
    }
    if let held {
      for row in held { out.line(table.line(row)) }
    } else {
      try store.list(query) { details in out.line(table.line(table.cells(details))) }
    }
    return ExitStatus.success
  })

/// The columns of `ls`: each object's cells, and the widths that align them.
struct ListingTable {
  /// At most this many rows are held to be printed after their widths are
  /// known; a longer listing is read again instead.
  static let heldRows = 10_000
  let now: Int64
  var widths = [Int](repeating: 0, count: 6)

  /// digest, size, stored form, pins, last use, keys.
  func cells(_ details: EntryDetails) -> [String] {
    let pins = details.activePins(at: now).count
    let keys =
      details.keys.first.map {
        $0 + (details.keys.count > 1 ? " (+\(details.keys.count - 1) more)" : "")
      }
      ?? "-"
    return [
      details.entry.digest.description, Output.size(details.entry.size),
      details.entry.isCompressed ? "zstd" : "raw",
      pins == 0 ? "-" : "\(pins) pin\(pins == 1 ? "" : "s")",
      RelativeTime.describe(details.entry.lastAccess, now: now), keys,
    ]
  }

  /// The row's cells, its widths taken into account.
  mutating func measure(_ details: EntryDetails) -> [String] {
    let row = cells(details)
    for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) }
    return row
  }

  /// The row as printed: size right-aligned; the last column (keys) unpadded.
  func line(_ row: [String]) -> String {
    row.enumerated().map { (i, cell) -> String in
      let pad = String(repeating: " ", count: max(0, widths[i] - cell.count))
      return i == 1 ? pad + cell : i == row.count - 1 ? cell : cell + pad
    }.joined(separator: "  ")
  }
}

extension Invocation {
  /// `ls`'s order, limit and filters, from its options.
  func entryQuery() throws(UsageError) -> EntryQuery {
    var query = EntryQuery()
    if let text = value("--sort") {
      guard let order = EntryQuery.Order(rawValue: text) else {
        throw usageError("invalid --sort '\(text)': expected digest, size, access or created")
      }
      query.order = order
    }
    query.limit = try count("--limit")
    query.unusedFor = try duration("--older-than")
    query.largerThan = try size("--larger-than")
    query.pinnedOnly = flag("--pinned")
    query.keyPattern = value("--key")
    return query
  }
}

/// One object in `ls --json` and `show --json`: every field, `null` for
/// what is absent.
struct EntryRecord: Encodable {
  var digest: String
  var size: Int64
  var allocatedBytes: Int64
  var storedBytes: Int64
  var compressed: Bool
  var created: String
  var lastAccess: String
  var keys: [String]
  var pinned: Bool
  var pins: [PinRecord]

  init(_ details: EntryDetails, now: Int64) {
    let e = details.entry
    digest = e.digest.description
    size = e.size
    allocatedBytes = e.allocatedBytes
    storedBytes = e.storedBytes
    compressed = e.isCompressed
    created = Output.time(e.created)
    lastAccess = Output.time(e.lastAccess)
    keys = details.keys
    pinned = !details.activePins(at: now).isEmpty
    pins = details.pins.map { PinRecord($0, now: now) }
  }
}

let statsCommand = CommandSpec(
  name: "stats",
  abstract: "Show what the store holds and what its filesystem can do.",
  usage: "[--reset] [--json]",
  arguments: [],
  options: [
    OptionSpec(
      names: ["--reset"], valueName: nil,
      help: "Set the hit and miss counts to zero (not the totals), then show the statistics."),
    jsonOption,
  ],
  discussion: """
    Sizes are human-readable here and exact (bytes) in JSON. Allocated bytes are
    st_blocks × 512 when stored; clones share extents, so the disk may hold less.
    Settings in config.json that cannot be used are shown as invalid, with a
    'config' line saying what is wrong.

    Hits are reads by digest (get, fetch) the store served, misses those it could
    not (a get of an object it does not hold, a fetch that downloaded); 'has' is
    a probe and counts nothing. A hit is counted as its access is recorded for
    LRU: at most once per object per access-resolution (set it to 0 to count
    every read). '--reset' zeroes the hits and misses only (as 'ccache -z').
    """,
  store: .writes(when: { $0.flag("--reset") }),
  closedPipeIsSuccess: true,
  run: { invocation in
    try invocation.requirePositionals([])
    let store = try invocation.openStore()
    if invocation.flag("--reset") {
      try store.resetAccessCounts()
      Output.error("trove: hit and miss counts reset to zero")
    }
    let s = try store.statistics()
    if invocation.flag("--json") {
      Output.json(StatsRecord(s))
      return ExitStatus.success
    }
    /// A setting's value, or what config.json holds instead when it cannot be used.
    func setting(_ key: CachePolicy.Key, _ value: String) -> String {
      if s.overriddenSettings.contains(key) { return value + " (\(key.environmentVariable))" }
      guard let problem = s.configProblems.first(where: { $0.key == key || $0.key == nil }) else {
        return value
      }
      return problem.key == nil ? "unknown (config.json is damaged)" : "invalid: \(problem.found)"
    }
    let config =
      s.configProblems.isEmpty
      ? []
      : [
        (
          "config",
          s.configProblems.map { ($0.key == nil ? "config.json is damaged: " : "") + "\($0)" }
            .joined(separator: "; ")
            + "; puts, fetches and sweeps are refused until 'trove config set' or 'trove config reset' repairs it"
        )
      ]
    let rows: [(String, String)] =
      config + [
        ("store", s.root),
        ("entries", "\(s.entries)"),
        (
          "hits",
          "\(s.hits) local, " + (s.remoteHits > 0 ? "\(s.remoteHits) remote, " : "")
            + Output.count(s.misses, "miss", "misses")
            + (s.hitRate.map { String(format: " (hit rate %.1f%%)", $0 * 100) } ?? "")
            + (s.countedSince.map { " since \(Output.time($0))" } ?? "")
        ),
        ("logical", "\(Output.size(s.logicalBytes)) (\(Output.count(s.logicalBytes, "byte")))"),
        (
          "allocated",
          "\(Output.size(s.allocatedBytes)) (\(Output.count(s.allocatedBytes, "byte")))"
            + (s.sharedBytes > 0
              ? ", \(Output.size(s.sharedBytes)) of versions' blocks shared within the store" : "")
        ),
        ("dedup hits", "\(s.dedupHits) (saved \(Output.size(s.dedupSavedBytes)))"),
        ("filesystem", s.filesystem),
        ("clones", s.cloneSupported ? "supported" : "not supported (gets are copies)"),
        (
          "free space",
          "\(Output.size(s.availableBytes)) of \(Output.size(s.totalBytes)) (keeps \(setting(.minimumFree, CachePolicy.Quantities.formatSizeSetting(s.minimumFreeBytes))) free)"
        ),
        (
          "budget",
          setting(.budget, s.budget.map { CachePolicy.Quantities.formatSizeSetting($0) } ?? "none")
            + ", \(Output.size(s.allocatedBytes)) used"
            + (s.isOverBudget
              ? " (over budget: \(Output.size(s.pinnedBytes)) pinned, \(Output.size(s.allocatedBytes)) in use)"
              : "")
        ),
        (
          "max age", setting(.maxAge, s.maxAge.map(CachePolicy.Quantities.formatDuration) ?? "none")
        ),
        (
          "pinned",
          "\(Output.count(s.pinnedEntries, "entry", "entries")), \(Output.size(s.pinnedBytes))"
        ),
        (
          "compression",
          "\(setting(.compression, s.compression)); \(s.compressedEntries) compressed, stored \(Output.size(s.storedBytes)) (ratio \(String(format: "%.2f", s.compressionRatio)), saved \(Output.size(s.logicalBytes - s.storedBytes))); skipped \(s.skippedIncompressible) incompressible, \(s.skippedSmall) small"
        ),
        ("last sweep", s.lastSweep.map(describe) ?? "never"),
        ("for space", s.lastPressureEviction.map(describe) ?? "never"),
        ("keys", "\(s.keys)"),
        (
          "quarantine",
          s.quarantinedEntries == 0
            ? "empty"
            : "\(Output.count(s.quarantinedEntries, "entry", "entries")), \(Output.size(s.quarantinedBytes)) (corrupt or misplaced; never served)"
        ),
      ]
    let remote: [(String, String)] =
      s.remoteBackedEntries == 0
      ? []
      : [
        (
          "on remotes",
          "\(Output.count(s.remoteBackedEntries, "entry", "entries")), \(Output.size(s.remoteBackedBytes)) a remote holds too"
        )
      ]
    for (name, value) in rows + remote {
      Output.line(name + String(repeating: " ", count: max(1, 12 - name.count)) + value)
    }
    return ExitStatus.success
  })

let reindexCommand = CommandSpec(
  name: "reindex",
  abstract: "Rebuild the index from the objects folder.",
  usage: "[-v]",
  arguments: [],
  options: [verboseOption],
  discussion: """
    The objects folder is the truth; the index may lag it after a crash. This adopts
    object files the index does not know, drops rows whose file is gone (with their
    pins and keys), corrects rows whose form or size is wrong, and removes the
    compressed copy of an object stored both ways. Safe while other processes work.
    Says what it did on stderr: object files adopted, rows dropped or corrected,
    twins removed, removals finished, and the pins and keys a new index took back
    from references.log.
    """,
  store: .creates,
  run: { invocation in
    try invocation.requirePositionals([])
    let report = try invocation.openStore().rebuildIndex()
    for path in report.unexpected {
      let moved = report.quarantined.contains(path)
      Output.error(
        "trove: unexpected: \(path) (\(moved ? "moved to quarantine/" : "left alone"))")
    }
    // The summary is what reindex says: -q silences it (errors still print).
    if Output.quiet { return ExitStatus.success }
    Output.error(
      "trove: index rebuilt: \(report.added) added, \(report.dropped) dropped, "
        + "\(report.corrected) corrected, \(Output.count(report.twins, "twin")) removed"
        + (report.removalsFinished > 0
          ? ", \(Output.count(report.removalsFinished, "removal")) finished" : "")
        + (report.pinsRestored + report.keysRestored + report.referencesLost > 0
          ? "; \(Output.count(report.pinsRestored, "pin")) and "
            + "\(Output.count(report.keysRestored, "key")) restored, "
            + "\(report.referencesLost) not restored (object gone)" : ""))
    return ExitStatus.success
  })

/// One logged sweep, for `stats`.
func describe(_ sweep: StoreStatistics.LastSweep) -> String {
  var line =
    "\(Output.time(sweep.time)) (\(describe(sweep.reason))): removed \(Output.count(sweep.removedEntries, "entry", "entries")), \(Output.size(sweep.removedBytes))"
  if let freed = sweep.freedBytes { line += ", freed \(Output.size(freed))" }
  return line + ", in \(String(format: "%.3f", sweep.seconds)) s"
}
