import Foundation

/// The settings persisted beside a store in `config.json`, so every process
/// that writes the store uses the same ones.
struct StoreSettings: Codable, Sendable, Equatable {
  /// The on-disk format this store was written in.
  var format: Int
  /// What the store keeps and for how long.
  var policy: CachePolicy

  /// The format this build writes and the newest it reads.
  static let currentFormat = 1

  static let initial = StoreSettings(format: currentFormat, policy: .default)

  init(format: Int, policy: CachePolicy) {
    self.format = format
    self.policy = policy
  }

  enum CodingKeys: String, CodingKey { case format, policy }

  init(from decoder: any Decoder) throws {
    let c = try decoder.container(keyedBy: CodingKeys.self)
    format = try c.decode(Int.self, forKey: .format)
    policy = try c.decodeIfPresent(CachePolicy.self, forKey: .policy) ?? .default
  }

  func encoded() -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    // Encoding a struct of plain values cannot fail.
    return Array((try? encoder.encode(self)) ?? Data()) + [0x0A]
  }

  static func decode(_ bytes: [UInt8], path: String) throws(TroveError) -> StoreSettings {
    let settings: StoreSettings
    do {
      settings = try JSONDecoder().decode(StoreSettings.self, from: Data(bytes))
    } catch {
      throw TroveError(
        .unsupportedFormat, "cannot read store settings '\(path)': \(error)", path: path)
    }
    guard settings.format <= currentFormat, settings.format >= 1 else {
      throw TroveError(
        .unsupportedFormat,
        "store '\(path)' has format \(settings.format); this trove reads formats 1 to \(currentFormat)",
        path: path)
    }
    return settings
  }
}

extension CachePolicy {
  /// The keys of `config.json`'s `policy` object: the `trove config` names.
  enum CodingKeys: String, CodingKey {
    case budget
    case maxAge = "max-age"
    case lowWater = "low-water"
    case
      accessResolution = "access-resolution"
    case minimumFree = "min-free"
    case
      temporaryMaxAge = "tmp-max-age"
    case compression
    case compressionWorkers = "compression-workers"
    case
      compressionMinimumSize = "compression-min-size"
    case checksums
  }

  /// Reads a policy from `config.json`. Numbers outside what `trove config
  /// set` accepts (a hand-edited file, an older Trove) are brought to the
  /// nearest accepted value, so such a setting never crashes a store or
  /// stops it working (a value of the wrong type, or too large for its
  /// type, is refused with an error naming the file): budgets, sizes and
  /// durations below 0 become 0
  /// (`tmp-max-age` 1 s), durations above 100 years become 100 years, a
  /// `low-water` outside (0, 1] becomes the default 0.9, and worker counts
  /// are kept within 0–64.
  public init(from decoder: any Decoder) throws {
    let c = try decoder.container(keyedBy: CodingKeys.self)
    let d = CachePolicy.default
    func duration(_ key: CodingKeys, minimum: Int64 = 0) throws -> Int64? {
      try c.decodeIfPresent(Int64.self, forKey: key).map {
        min(max($0, minimum), Quantities.maximumDuration)
      }
    }
    budget = try c.decodeIfPresent(Int64.self, forKey: .budget).map { max(0, $0) }
    maxAge = try duration(.maxAge)
    let lowWater = try c.decodeIfPresent(Double.self, forKey: .lowWater) ?? d.lowWater
    self.lowWater = lowWater > 0 && lowWater <= 1 ? lowWater : d.lowWater
    accessResolution = try duration(.accessResolution) ?? d.accessResolution
    temporaryMaxAge = try duration(.temporaryMaxAge, minimum: 1) ?? d.temporaryMaxAge
    if let text = try? c.decodeIfPresent(String.self, forKey: .minimumFree) {
      var policy = d
      _ = try? PolicyKey.minimumFree.set(text, in: &policy)
      minimumFree = policy.minimumFree
    } else if let bytes = try c.decodeIfPresent(Int64.self, forKey: .minimumFree) {
      minimumFree = .bytes(max(0, bytes))
    } else {
      minimumFree = d.minimumFree
    }
    let compressionText = try c.decodeIfPresent(String.self, forKey: .compression) ?? "none"
    guard let compression = Compression(compressionText) else {
      throw DecodingError.dataCorruptedError(
        forKey: .compression, in: c, debugDescription: "unknown compression '\(compressionText)'")
    }
    self.compression = compression
    compressionWorkers = min(
      max(
        try c.decodeIfPresent(Int32.self, forKey: .compressionWorkers) ?? d.compressionWorkers, 0),
      64)
    compressionMinimumSize = max(
      0,
      try c.decodeIfPresent(Int64.self, forKey: .compressionMinimumSize)
        ?? d.compressionMinimumSize)
    checksums =
      (try? c.decodeIfPresent(String.self, forKey: .checksums)).flatMap {
        $0.flatMap(PolicyKey.checksums)
      } ?? []
  }

  public func encode(to encoder: any Encoder) throws {
    var c = encoder.container(keyedBy: CodingKeys.self)
    try c.encode(budget, forKey: .budget)
    try c.encode(maxAge, forKey: .maxAge)
    try c.encode(lowWater, forKey: .lowWater)
    try c.encode(accessResolution, forKey: .accessResolution)
    switch minimumFree {
    case .percent: try c.encode(minimumFree.description, forKey: .minimumFree)
    case .bytes(let n): try c.encode(n, forKey: .minimumFree)
    }
    try c.encode(temporaryMaxAge, forKey: .temporaryMaxAge)
    try c.encode(compression.description, forKey: .compression)
    try c.encode(compressionWorkers, forKey: .compressionWorkers)
    try c.encode(compressionMinimumSize, forKey: .compressionMinimumSize)
    try c.encode(PolicyKey.checksums.value(in: self), forKey: .checksums)
  }
}
