#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Environment variables read by name with `getenv(3)`. `ProcessInfo`'s
/// `environment` builds a dictionary of every variable on each call, a
/// large share of a short command (`has`, a fresh-hit `fetch`).
public enum EnvironmentVariables {
  /// The value of `name`, or nil when it is not set or not UTF-8 (as
  /// `ProcessInfo`, which leaves such variables out).
  @usableFromInline
  static func value(_ name: String) -> String? {
    getenv(name).flatMap { String(validatingCString: $0) }
  }

  /// The variables of `names` that are set, with their values: what a
  /// dictionary of the whole environment would give for those names.
  @usableFromInline
  static func named(_ names: [String]) -> [String: String] {
    var found: [String: String] = [:]
    for name in names {
      if let value = value(name) { found[name] = value }
    }
    return found
  }

  /// The value of `name` for the command line: nil when it is not set.
  public static func lookUp(_ name: String) -> String? { value(name) }
}
