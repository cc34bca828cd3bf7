import Foundation

/// How to open a store: where it lives, and whether to create it.
///
/// Passed once, at ``Store/init(_:)``; every process that opens the same
/// root shares the store's persisted settings (its `config.json`).
public struct StoreConfiguration: Sendable, Hashable {
  /// The store's root folder.
  public var root: String
  /// Create the root (mode 0700) and its layout when missing. Default true.
  public var createIfMissing: Bool

  /// A configuration for the store at `root`, or at ``defaultRoot(environment:)`` when nil.
  public init(root: String? = nil, createIfMissing: Bool = true) {
    self.root = root ?? Self.defaultRoot()
    self.createIfMissing = createIfMissing
  }

  /// Where a store lives when none is named: `TROVE_STORE` when set, else
  /// the platform's caches folder as Foundation reports it
  /// (`$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on
  /// macOS) followed by `trove`. Never a hand-built home path.
  public static func defaultRoot(
    environment: [String: String] = ProcessInfo.processInfo.environment
  )
    -> String
  {
    if let explicit = environment["TROVE_STORE"], !explicit.isEmpty { return explicit }
    let caches =
      FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
      ?? FileManager.default.temporaryDirectory
    return caches.appendingPathComponent("trove", isDirectory: true).path
  }
}
