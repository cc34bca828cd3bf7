/// A setting in a store's `config.json` that cannot be used as written: a
/// value `trove config set` would refuse (`"budget": -5`), or a file that
/// cannot be read at all.
///
/// A store whose settings have a problem still opens, and reads work; what
/// depends on the policy (puts, fetches, sweeps, recompressing) is refused
/// with ``TroveError/Code/invalidConfig`` until it is repaired with `trove
/// config set`, `trove config reset`, ``Store/setPolicy(_:to:)`` or
/// ``Store/resetPolicy()``. Nothing falls back to a default in its place.
public struct PolicyProblem: Sendable, Hashable, Codable, CustomStringConvertible {
  /// The setting, or nil when the file as a whole cannot be read (not
  /// JSON, no format number): every setting is then unknown.
  public var key: CachePolicy.Key?
  /// The setting's value as the file has it, in JSON (`-5`, `"lots"`); or,
  /// without a key, what is wrong with the file.
  public var found: String

  /// Makes a problem.
  public init(key: CachePolicy.Key?, found: String) {
    self.key = key
    self.found = found
  }

  /// `invalid budget -5: expected a size such as …`, or what is wrong with
  /// the file.
  public var description: String {
    guard let key else { return found }
    return "invalid \(key.rawValue) \(found): expected \(key.acceptedForms)"
  }

  /// The error for settings with `problems`, in the file at `path`: one
  /// line naming the file, the first problem, the others' keys, and how to
  /// repair it.
  static func error(_ problems: [PolicyProblem], path: String) -> TroveError {
    let first = problems[0]
    guard let key = first.key else {
      return TroveError(
        .invalidConfig,
        "'\(path)' is damaged: \(first.found)", path: path, remedy: .repairSettings(key: nil))
    }
    let others = problems.dropFirst().compactMap { $0.key?.rawValue }
    let also = others.isEmpty ? "" : " (also invalid: \(others.joined(separator: ", ")))"
    return TroveError(
      .invalidConfig,
      "invalid \(key.rawValue) \(first.found) in '\(path)': expected \(key.acceptedForms)\(also)",
      path: path, value: first.found, remedy: .repairSettings(key: key))
  }
}

/// A store's policy as its `config.json` now has it, with what in it
/// cannot be used.
public struct PolicyStatus: Sendable, Hashable {
  /// The settings that could be read. One listed in ``problems`` holds its
  /// default here, and is not used by the store.
  public var policy: CachePolicy
  /// The settings that cannot be used as written, in ``CachePolicy/Key`` order;
  /// empty when the file is sound.
  public var problems: [PolicyProblem]
  /// The path of the `config.json` read.
  public var path: String
  /// Settings this process takes from the environment
  /// (``StoreConfiguration/policyOverrides``) rather than from the file.
  public var overridden: Set<CachePolicy.Key> = []

  /// The problem with `key`, or with the whole file, if there is one.
  public func problem(with key: CachePolicy.Key) -> PolicyProblem? {
    problems.first { $0.key == key || $0.key == nil }
  }

  /// The error for the problem with `key` (with any setting, when nil): one
  /// line naming the file, the setting, its value and how to repair it —
  /// what ``Store/policy()`` throws; nil when there is none.
  public func error(for key: CachePolicy.Key? = nil) -> TroveError? {
    if let key {
      return problem(with: key).map { PolicyProblem.error([$0], path: path) }
    }
    return problems.isEmpty ? nil : PolicyProblem.error(problems, path: path)
  }
}
