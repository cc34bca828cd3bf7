import Foundation

/// The settings persisted beside a store in `config.json`, so every process
/// that writes the store uses the same ones, as they were read: a setting
/// that cannot be used is listed in ``problems`` (and holds its default in
/// ``policy``), never taken as it is and never silently replaced.
struct StoreSettings: Sendable, Equatable {
  /// The on-disk format this store was written in.
  var format: Int
  /// What the store keeps and for how long: every setting that could be
  /// read; one listed in ``problems`` holds its default here.
  var policy: CachePolicy
  /// Settings that cannot be used as written, in ``CachePolicy/Key`` order, or
  /// one problem without a key when the file as a whole cannot be read.
  var problems: [PolicyProblem] = []
  /// Values of `policy` kept as the file has them, so that rewriting the
  /// file changes only what was changed: invalid settings, and keys this
  /// build does not know (written by a later Trove of the same format).
  var kept: [String: JSONValue] = [:]
  /// Settings this process takes from ``StoreConfiguration/policyOverrides``
  /// (the environment) instead of the file; never written to it.
  var overridden: Set<CachePolicy.Key> = []

  /// The format this build writes and the newest it reads.
  static let currentFormat = 1

  static let initial = StoreSettings(format: currentFormat, policy: .default)

  /// Whether the file as a whole could not be read (not JSON, no format):
  /// a change starts from the defaults.
  var isUnreadable: Bool { problems.contains { $0.key == nil } }

  /// The file's bytes: `format`, and `policy` with every sound setting in
  /// its exact unit and every kept value as it was.
  func encoded() -> [UInt8] {
    struct File: Encodable {
      var format: Int
      var policy: [String: JSONValue]
    }
    var object = kept
    for key in CachePolicy.Key.allCases where !problems.contains(where: { $0.key == key }) {
      object[key.rawValue] = key.json(in: policy)
    }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    // Encoding plain values cannot fail.
    return Array((try? encoder.encode(File(format: format, policy: object))) ?? Data()) + [0x0A]
  }

  /// Reads `config.json`'s bytes. Each setting goes through
  /// ``CachePolicy/Key/set(_:in:)``, the validation `trove config set` makes;
  /// what fails it, and a file that is not a settings object at all, is
  /// listed in ``problems`` rather than thrown, so that reads still work.
  ///
  /// - Throws: `.unsupportedFormat` when a newer Trove wrote the file.
  static func decode(_ bytes: [UInt8], path: String) throws(TroveError) -> StoreSettings {
    func unreadable(_ why: String) -> StoreSettings {
      var settings = initial
      settings.problems = [PolicyProblem(key: nil, found: why)]
      return settings
    }
    // JSONDecoder reads what the fast reader does not (UTF-16 or UTF-32 text).
    guard
      let value = JSONValue(parsing: bytes)
        ?? (try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)))
    else {
      return unreadable("it is not valid JSON")
    }
    guard case .object(let file) = value else { return unreadable("it is not a JSON object") }
    guard let format = file["format"]?.integer, format >= 1 else {
      return unreadable("it has no valid format number")
    }
    guard format <= currentFormat else {
      throw TroveError(
        .unsupportedFormat,
        "store '\(path)' has format \(format); this trove reads formats 1 to \(currentFormat)",
        path: path)
    }
    var settings = StoreSettings(format: Int(format), policy: .default)
    switch file["policy"] {
    case nil: break
    case .object(let object)?:
      (settings.policy, settings.problems, settings.kept) = CachePolicy.read(object)
    case let other?:
      return unreadable("its policy is \(other.text), not a JSON object")
    }
    return settings
  }

  /// These settings with `overrides` in place of the file's (each set by
  /// ``CachePolicy/Key/set(_:in:)``, a problem with it in the file dropped).
  ///
  /// - Throws: `.invalidConfig` naming the variable, its value and the
  ///   forms it takes, for an override that cannot be used.
  func overriding(_ overrides: [CachePolicy.Key: String]) throws(TroveError) -> StoreSettings {
    guard !overrides.isEmpty else { return self }
    var settings = self
    for key in CachePolicy.Key.allCases {
      guard let text = overrides[key] else { continue }
      do throws(TroveError) {
        try key.set(text, in: &settings.policy)
      } catch {
        throw TroveError(
          .invalidConfig,
          "invalid \(key.environmentVariable) '\(text)' in the environment: expected \(key.acceptedForms); unset it or correct it",
          value: text)
      }
      settings.problems.removeAll { $0.key == key }
      settings.overridden.insert(key)
    }
    return settings
  }

  /// These settings, or the error naming the first problem, the file
  /// and how to repair it.
  func checked(path: String) throws(TroveError) -> StoreSettings {
    // Only a server reads the mirrors: one that cannot be used is its to
    // report, and stops no put or fetch.
    let blocking = problems.filter { $0.key != .mirror }
    guard blocking.isEmpty else { throw PolicyProblem.error(blocking, path: path) }
    return self
  }

  /// Sets `key` from `text` (validated by ``CachePolicy/Key/set(_:in:)``),
  /// repairing it if it was invalid; other settings stay as they are. An
  /// unreadable file is started again from the defaults.
  mutating func set(_ key: CachePolicy.Key, _ text: String) throws(TroveError) {
    var changed = isUnreadable ? .initial : self
    try key.set(text, in: &changed.policy)
    changed.problems.removeAll { $0.key == key }
    changed.kept[key.rawValue] = nil
    self = changed
  }

  /// Sets `key` back to its default (``CachePolicy/default``), repairing
  /// it if it was invalid; other settings stay as they are.
  mutating func unset(_ key: CachePolicy.Key) throws(TroveError) {
    try set(key, key.json(in: .default).settingText(seconds: key.takesSeconds))
  }
}

extension CachePolicy {
  /// Reads the settings in `config.json`'s `policy` object: each known key
  /// through ``CachePolicy/Key/set(_:in:)``; a missing key means its default.
  /// Returns the policy, the keys that failed (holding their default in
  /// the policy), and the values to keep as written: those that failed
  /// and unknown keys.
  static func read(_ object: [String: JSONValue]) -> (
    CachePolicy, [PolicyProblem], kept: [String: JSONValue]
  ) {
    var policy = CachePolicy.default
    var problems: [PolicyProblem] = []
    var kept = object.filter { CachePolicy.Key(rawValue: $0.key) == nil }
    for key in CachePolicy.Key.allCases {
      guard let value = object[key.rawValue] else { continue }
      do throws(TroveError) {
        if key == .rewrite, case .object(let rules) = value {
          policy.rewrites = try URLRewrite.read(rules)
        } else if key == .mirror, case .object(let rules) = value {
          policy.mirrors = try MirrorRule.read(rules)
        } else {
          try key.set(value.settingText(seconds: key.takesSeconds), in: &policy)
        }
      } catch {
        problems.append(PolicyProblem(key: key, found: value.text))
        kept[key.rawValue] = value
      }
    }
    return (policy, problems, kept)
  }

  /// Reads a policy from a `policy` object as `config.json` holds it,
  /// validated as ``CachePolicy/Key/set(_:in:)`` validates `trove config set`.
  ///
  /// - Throws: `DecodingError.dataCorrupted` naming the first invalid
  ///   setting and the forms it accepts.
  public init(from decoder: any Decoder) throws {
    let (policy, problems, _) = CachePolicy.read(try [String: JSONValue](from: decoder))
    if let problem = problems.first {
      throw DecodingError.dataCorrupted(
        DecodingError.Context(codingPath: decoder.codingPath, debugDescription: "\(problem)"))
    }
    self = policy
  }

  /// Writes the policy as `config.json` holds it: sizes in bytes, durations
  /// in seconds, `null` for none.
  public func encode(to encoder: any Encoder) throws {
    try [String: JSONValue](
      uniqueKeysWithValues: CachePolicy.Key.allCases.map { ($0.rawValue, $0.json(in: self)) }
    ).encode(to: encoder)
  }
}

extension CachePolicy.Key {
  /// Whether the setting is a duration, which `config.json` holds in seconds.
  var takesSeconds: Bool {
    switch self {
    case .maxAge, .accessResolution, .temporaryMaxAge: return true
    default: return false
    }
  }

  /// The setting's value in `policy` as `config.json` holds it.
  func json(in policy: CachePolicy) -> JSONValue {
    func optional(_ n: Int64?) -> JSONValue { n.map { .integer($0) } ?? .null }
    switch self {
    case .budget: return optional(policy.budget)
    case .maxAge: return optional(policy.maxAge)
    case .lowWater: return .number(policy.lowWater)
    case .accessResolution: return .integer(policy.accessResolution)
    case .minimumFree:
      switch policy.minimumFree {
      case .percent: return .string(policy.minimumFree.description)
      case .bytes(let n): return .integer(n)
      }
    case .maximumObjectSize: return optional(policy.maximumObjectSize)
    case .temporaryMaxAge: return .integer(policy.temporaryMaxAge)
    case .compression: return .string(policy.compression.description)
    case .compressionWorkers: return .integer(Int64(policy.compressionWorkers))
    case .compressionMinimumSize: return .integer(policy.compressionMinimumSize)
    case .checksums: return .string(value(in: policy))
    case .evictRemoteFirst: return .bool(policy.evictRemoteBackedFirst)
    case .signingKey: return policy.signingKey.map { .string($0) } ?? .null
    // One entry a rule, as set.
    case .rewrite: return URLRewrite.json(policy.rewrites)
    case .mirror: return MirrorRule.json(policy.mirrors)
    case .chunking: return .bool(policy.chunking)
    case .chunkMinimumSize: return .integer(policy.chunkMinimumSize)
    }
  }
}
