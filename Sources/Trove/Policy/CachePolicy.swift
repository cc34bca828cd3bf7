import Foundation

/// What a store keeps and for how long: the byte budget, expiry, the
/// low-water mark sweeps trim to, how coarsely reads are recorded, and how
/// much free space the volume must keep. Persisted in the store's
/// `config.json`, so every process that uses the store follows the same
/// policy; change it with ``Store/updatePolicy(_:)`` or `trove config set`.
public struct CachePolicy: Sendable, Hashable, Codable {
  /// The most bytes (allocated on disk) unpinned and pinned entries may
  /// take together before a sweep evicts; nil for no limit. Pinned entries
  /// are never evicted, so they can hold a store above its budget.
  public var budget: Int64?
  /// Entries not read or stored again for this many seconds are removed by
  /// a sweep; nil for no expiry.
  public var maxAge: Int64?
  /// A sweep that evicts for the budget stops at this fraction of it, so
  /// sweeps do not run after every put. In (0, 1].
  public var lowWater: Double
  /// Reads refresh an entry's last access only when the recorded one is at
  /// least this many seconds old: reads rarely write. 0 records every read.
  public var accessResolution: Int64
  /// Below this much free space on the store's volume, opportunistic puts
  /// are skipped and every put sweeps first.
  public var minimumFree: FreeSpaceThreshold
  /// Files in `tmp/` untouched for this many seconds are leftovers of dead
  /// writers, removed by every sweep.
  public var temporaryMaxAge: Int64
  /// How new objects are stored: raw (the default, clonable) or zstd.
  public var compression: Compression
  /// zstd worker threads for large objects (zstd's nbWorkers); 0 compresses
  /// in the calling thread.
  public var compressionWorkers: Int32
  /// Objects smaller than this are stored raw even when compression is on:
  /// the saving would not pay for the CPU.
  public var compressionMinimumSize: Int64
  /// The SHA-2 checksums every fetch computes (in the same pass as
  /// XXH3-128) and records beside the object, so that a later `sha256:`
  /// look-up finds it; empty: only those a fetch is asked to expect.
  public var checksums: [ChecksumAlgorithm] = []
  /// The most bytes one object may have: a put or fetch of more is refused
  /// before its first byte when its length is known, and stopped as soon as
  /// it passes the limit when it streams (``TroveError/Code/tooLarge``);
  /// nil for no limit.
  public var maximumObjectSize: Int64?
  /// Whether sweeps evict objects a remote is known to hold with the right
  /// bytes (this store uploaded them, or pulled them and they hashed to
  /// their digest; a `get` reads them back through it) before any other
  /// object, each group in least-recently-used order. Without remotes there
  /// are none such.
  public var evictRemoteBackedFirst: Bool = true
  /// The absolute path of the private key file (`trove keygen`) a push
  /// signs key records and objects with; nil: pushes are not signed. The
  /// key itself is never kept here: the file is read when a push signs.
  public var signingKey: String?
  /// The rules that send every fetch of a URL prefix elsewhere (see
  /// ``URLRewrite``), in name order; empty: URLs are asked as given.
  public var rewrites: [URLRewrite] = []
  /// The mirrors `trove serve` serves besides those its command line gives
  /// (see ``MirrorRule``), in name order.
  public var mirrors: [MirrorRule] = []
  /// Whether raw objects of ``chunkMinimumSize`` bytes or more are cut into
  /// content-defined chunks as they are written, and the chunks recorded
  /// (a manifest), so that versions of a file share disk blocks and
  /// transfers move only the chunks a store lacks.
  public var chunking: Bool = true
  /// The smallest object that gets a manifest.
  public var chunkMinimumSize: Int64 = 8 << 20

  /// No budget, no expiry, 90% low water, 60 s access resolution, 10% of
  /// the volume kept free, leftovers removed after an hour, no limit on an
  /// object's size. No compression.
  public static let `default` = CachePolicy(
    budget: nil, maxAge: nil, lowWater: 0.9, accessResolution: 60,
    minimumFree: .percent(10), temporaryMaxAge: 3600)

  /// Makes a policy.
  public init(
    budget: Int64?, maxAge: Int64?, lowWater: Double, accessResolution: Int64,
    minimumFree: FreeSpaceThreshold, temporaryMaxAge: Int64, compression: Compression = .none,
    compressionWorkers: Int32 = 0, compressionMinimumSize: Int64 = 64 * 1024,
    maximumObjectSize: Int64? = nil
  ) {
    self.budget = budget
    self.maxAge = maxAge
    self.lowWater = lowWater
    self.accessResolution = accessResolution
    self.minimumFree = minimumFree
    self.temporaryMaxAge = temporaryMaxAge
    self.compression = compression
    self.compressionWorkers = compressionWorkers
    self.compressionMinimumSize = compressionMinimumSize
    self.maximumObjectSize = maximumObjectSize
  }
}

extension CachePolicy {
  /// How objects are stored on disk.
  public enum Compression: Sendable, Hashable, CustomStringConvertible {
    /// Raw bytes: gets are clones where the filesystem allows.
    case none
    /// A standard zstd frame (content size and checksum set) at this level:
    /// 1 to 19, or zstd's negative fast levels. Gets decompress; no clones.
    case zstd(level: Int32)

    /// `none`, or `zstd:LEVEL`.
    public var description: String {
      switch self {
      case .none: return "none"
      case .zstd(let level): return "zstd:\(level)"
      }
    }

    /// Parses `none`, `zstd` (level 3) or `zstd:LEVEL`.
    public init?(_ text: String) {
      let lower = text.lowercased()
      if lower == "none" {
        self = .none
        return
      }
      guard lower.hasPrefix("zstd") else { return nil }
      let rest = lower.dropFirst(4)
      if rest.isEmpty {
        self = .zstd(level: 3)
        return
      }
      guard rest.first == ":", let level = Int32(rest.dropFirst()), level != 0,
        Zstd.levels.contains(level)
      else { return nil }
      self = .zstd(level: level)
    }
  }
}

/// Free space a volume must keep: bytes, or a percentage of its size.
public enum FreeSpaceThreshold: Sendable, Hashable, Codable, CustomStringConvertible {
  /// An absolute amount.
  case bytes(Int64)
  /// A percentage of the volume's size, 0 to 100.
  case percent(Double)

  /// The threshold in bytes on a volume of `total` bytes.
  public func bytes(ofVolume total: Int64) -> Int64 {
    switch self {
    case .bytes(let n): return n
    case .percent(let p): return Int64(Double(total) * p / 100)
    }
  }

  /// `10%` or a size such as `1.0 GiB` or `500 MB`
  /// (``CachePolicy/Quantities/formatSizeSetting(_:)``).
  public var description: String {
    switch self {
    case .bytes(let n): return CachePolicy.Quantities.formatSizeSetting(n)
    case .percent(let p):
      return p == p.rounded() ? "\(Int(p))%" : "\(p)%"
    }
  }
}

extension CachePolicy {
  /// The settings `trove config` knows, with their parsers and the forms
  /// they accept.
  public enum Key: String, CaseIterable, Sendable, Codable {
    case budget
    case maxAge = "max-age"
    case lowWater = "low-water"
    case accessResolution = "access-resolution"
    case minimumFree = "min-free"
    case maximumObjectSize = "max-object-size"
    case temporaryMaxAge = "tmp-max-age"
    case compression
    case compressionWorkers = "compression-workers"
    case compressionMinimumSize = "compression-min-size"
    case checksums
    case evictRemoteFirst = "evict-remote-first"
    case signingKey = "signing-key"
    /// Every ``URLRewrite`` rule at once; `trove config set rewrite.NAME`
    /// sets one (``Store/setRewrite(_:to:)``).
    case rewrite
    /// Every ``MirrorRule`` at once; `trove config set mirror.NAME` sets
    /// one (``Store/setMirror(_:to:)``).
    case mirror
    case chunking
    case chunkMinimumSize = "chunk-min-object-size"

    /// The environment variable that overrides the setting for one process:
    /// `TROVE_` and its name in capitals, `-` as `_` (`TROVE_MAX_AGE`).
    public var environmentVariable: String {
      // In ASCII, as the names are: neither Foundation's
      // replacingOccurrences (bridging to NSString) nor Unicode case
      // mapping, each a visible part of every command's start.
      let upper = rawValue.utf8.map { byte -> UInt8 in
        if byte == UInt8(ascii: "-") { return UInt8(ascii: "_") }
        return (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) ? byte - 32 : byte
      }
      return "TROVE_" + String(decoding: upper, as: UTF8.self)
    }

    /// The forms the setting accepts, for error messages.
    public var acceptedForms: String {
      switch self {
      case .budget: return "a size such as 500M, 10G, 1.5GiB or 0, or 'none'"
      case .maxAge: return "a duration up to 36500d such as 30d, 12h, 90m or 45s, or 'none'"
      case .lowWater: return "a ratio above 0 and at most 1, such as 0.9"
      case .accessResolution: return "a duration up to 36500d such as 60s, 5m or 0"
      case .minimumFree: return "a percentage such as 10% or a size such as 1G"
      case .maximumObjectSize: return "a size such as 10G or 500M, or 'none'"
      case .temporaryMaxAge: return "a duration from 1s to 36500d such as 1h or 30m"
      case .compression:
        return
          "none, zstd, or zstd:LEVEL with LEVEL from \(Zstd.levels.lowerBound) to \(Zstd.levels.upperBound), not 0"
      case .compressionWorkers: return "a whole number from 0 to 64"
      case .compressionMinimumSize: return "a size such as 64K or 1M"
      case .checksums: return "none, sha256, sha512, or sha256,sha512"
      case .evictRemoteFirst: return "true or false"
      case .signingKey: return "the absolute path of a key file 'trove keygen' wrote, or 'none'"
      case .rewrite:
        return
          "'PREFIX=REPLACEMENT' for each rule (config set rewrite.NAME), both the beginnings of http:// or https:// URLs; all at once: none, or NAME=PREFIX=REPLACEMENT entries separated by spaces"
      case .mirror:
        return
          "an http:// or https:// URL for each mirror (config set mirror.NAME); all at once: none, or NAME=UPSTREAM entries separated by spaces"
      case .chunking: return "on or off"
      case .chunkMinimumSize: return "a size of at least 1M such as 8M or 1G"
      }
    }

    /// The setting's value in `policy`, as `trove config` prints it.
    public func value(in policy: CachePolicy) -> String {
      switch self {
      case .budget:
        return policy.budget.map { CachePolicy.Quantities.formatSizeSetting($0) } ?? "none"
      case .maxAge: return policy.maxAge.map(CachePolicy.Quantities.formatDuration) ?? "none"
      case .lowWater: return "\(policy.lowWater)"
      case .accessResolution: return CachePolicy.Quantities.formatDuration(policy.accessResolution)
      case .minimumFree: return policy.minimumFree.description
      case .maximumObjectSize:
        return policy.maximumObjectSize.map { CachePolicy.Quantities.formatSizeSetting($0) }
          ?? "none"
      case .temporaryMaxAge: return CachePolicy.Quantities.formatDuration(policy.temporaryMaxAge)
      case .compression: return policy.compression.description
      case .compressionWorkers: return "\(policy.compressionWorkers)"
      case .compressionMinimumSize:
        return CachePolicy.Quantities.formatSizeSetting(policy.compressionMinimumSize)
      case .checksums:
        return policy.checksums.isEmpty
          ? "none" : policy.checksums.map(\.rawValue).joined(separator: ",")
      case .evictRemoteFirst: return policy.evictRemoteBackedFirst ? "true" : "false"
      case .signingKey: return policy.signingKey ?? "none"
      case .rewrite: return URLRewrite.listText(policy.rewrites)
      case .mirror: return MirrorRule.listText(policy.mirrors)
      case .chunking: return policy.chunking ? "on" : "off"
      case .chunkMinimumSize:
        return CachePolicy.Quantities.formatSizeSetting(policy.chunkMinimumSize)
      }
    }

    /// Sets the setting in `policy` from `text`: the one validation of a
    /// setting, made by `trove config set` and by every read of a store's
    /// `config.json` (a number there is read as bytes, seconds or a ratio).
    ///
    /// - Throws: `.invalidArgument` quoting `text` and listing the accepted forms.
    public func set(_ text: String, in policy: inout CachePolicy) throws(TroveError) {
      let invalid = TroveError(
        .invalidArgument, "invalid \(rawValue) '\(text)': expected \(acceptedForms)", value: text)
      let none = text.lowercased() == "none"
      switch self {
      case .budget:
        if none {
          policy.budget = nil
          return
        }
        guard let size = CachePolicy.Quantities.parseSize(text) else { throw invalid }
        policy.budget = size
      case .maxAge:
        if none {
          policy.maxAge = nil
          return
        }
        guard let seconds = CachePolicy.Quantities.parseDuration(text) else { throw invalid }
        policy.maxAge = seconds
      case .lowWater:
        guard let ratio = Double(text), ratio > 0, ratio <= 1 else { throw invalid }
        policy.lowWater = ratio
      case .accessResolution:
        guard let seconds = CachePolicy.Quantities.parseDuration(text) else { throw invalid }
        policy.accessResolution = seconds
      case .minimumFree:
        if text.hasSuffix("%") {
          guard let p = Double(text.dropLast()), p >= 0, p <= 100 else { throw invalid }
          policy.minimumFree = .percent(p)
        } else {
          guard let size = CachePolicy.Quantities.parseSize(text) else { throw invalid }
          policy.minimumFree = .bytes(size)
        }
      case .maximumObjectSize:
        if none {
          policy.maximumObjectSize = nil
          return
        }
        guard let size = CachePolicy.Quantities.parseSize(text) else { throw invalid }
        policy.maximumObjectSize = size
      case .temporaryMaxAge:
        guard let seconds = CachePolicy.Quantities.parseDuration(text), seconds > 0 else {
          throw invalid
        }
        policy.temporaryMaxAge = seconds
      case .compression:
        guard let compression = Compression(text) else { throw invalid }
        policy.compression = compression
      case .compressionWorkers:
        guard let workers = Int32(text), (0...64).contains(workers) else { throw invalid }
        policy.compressionWorkers = workers
      case .compressionMinimumSize:
        guard let size = CachePolicy.Quantities.parseSize(text) else { throw invalid }
        policy.compressionMinimumSize = size
      case .checksums:
        guard let list = Self.checksums(text) else { throw invalid }
        policy.checksums = list
      case .evictRemoteFirst:
        switch text.lowercased() {
        case "true": policy.evictRemoteBackedFirst = true
        case "false": policy.evictRemoteBackedFirst = false
        default: throw invalid
        }
      case .signingKey:
        if none {
          policy.signingKey = nil
          return
        }
        guard text.hasPrefix("/"), !text.unicodeScalars.contains(where: { $0.value < 0x20 })
        else { throw invalid }
        policy.signingKey = text
      case .rewrite:
        policy.rewrites = try URLRewrite.parseList(text)
      case .mirror:
        policy.mirrors = try MirrorRule.parseList(text)
      case .chunking:
        switch text.lowercased() {
        case "on", "true": policy.chunking = true
        case "off", "false": policy.chunking = false
        default: throw invalid
        }
      case .chunkMinimumSize:
        // Below a few chunks a manifest shares nothing worth its row.
        guard let size = CachePolicy.Quantities.parseSize(text), size >= 1 << 20 else {
          throw invalid
        }
        policy.chunkMinimumSize = size
      }
    }

    /// `none`, or SHA-2 names separated by commas, in a fixed order.
    static func checksums(_ text: String) -> [ChecksumAlgorithm]? {
      if text.lowercased() == "none" { return [] }
      var found = Set<ChecksumAlgorithm>()
      for name in text.lowercased().split(separator: ",") {
        guard
          let algorithm = ChecksumAlgorithm(rawValue: String(Quantities.trimmed(name))),
          algorithm != .xxh128
        else { return nil }
        found.insert(algorithm)
      }
      return found.isEmpty ? nil : found.sorted { $0.rawValue < $1.rawValue }
    }
  }
}
