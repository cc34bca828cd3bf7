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
  /// Told, in one line, what the store repaired on its own — a damaged
  /// index set aside and rebuilt from the objects — so a tool can show
  /// it. Default: nothing is said.
  public var onWarning: (@Sendable (String) -> Void)?
  /// Settings this process uses in place of `config.json`'s, as text in the
  /// forms `trove config set` takes (`"150M"`), by setting: the
  /// environment's overrides (``environmentOverrides(_:)``) for the CLI.
  /// `config.json` is not changed; other processes follow it. A value that
  /// cannot be used fails every decision that reads the settings with
  /// `.invalidConfig` naming its variable. Default: none.
  public var policyOverrides: [CachePolicy.Key: String]
  /// A record this process notes every digest and key it uses in (see
  /// ``Store/startRecord(_:)``), made when missing; besides those started
  /// for every process. Default: `TROVE_RECORD` when set and not empty.
  public var recordName: String?
  /// Whether a put or fetch sends what it stores to the store's writable
  /// remotes as each remote's ``RemoteSpec/write`` says (`async`, `sync`,
  /// `off`), as `trove put` and `trove fetch` do. Default true; false leaves
  /// the upload queue to ``Store/uploadQueued(to:everything:ifIdle:probing:onEach:)``.
  public var writesBack: Bool
  /// How an `async` write-back starts a drain of the upload queue that
  /// outlives the call: given the store's root, it starts one and returns
  /// nil, or returns why it could not (a warning; the objects stay queued).
  /// The `trove` command starts a detached `trove remote push --if-idle`.
  /// Default nil: a thread of this process drains the queue, one at a time;
  /// what it has not sent when the process ends is sent by the next drain of
  /// any process, as the queue follows from the index.
  public var startsBackgroundUpload: (@Sendable (_ root: String) -> String?)?
  /// Told of each decision the store makes at its seams — an object
  /// stored, evicted or removed and why, space made under pressure, a
  /// fetch served, revalidated or downloaded again and why, a remote read
  /// through, skipped or uploaded to — as a ``TraceEvent``. Called on the
  /// thread that decided, from many at once: keep it quick.
  /// ``TraceLog/appending(to:)`` makes one that appends lines to a file
  /// (the CLI's `TROVE_DEBUG=FILE`); the library reads no variable for
  /// it. Default: nil, and an event costs nothing.
  public var trace: (@Sendable (TraceEvent) -> Void)?
  /// How this program words an error's ``TroveError/remedy``, after the
  /// error's one line, in the text the store composes from errors:
  /// warnings, a sweep's housekeeping failures, a remote check's error,
  /// a diagnosis's findings.
  /// The `trove` command names its commands. Default nil: the line alone.
  public var remedyWording: (@Sendable (TroveError.Remedy) -> String)?
  /// Where this user's credential bindings are kept: which remotes they
  /// lend credentials to (``Store/lendCredentials(toRemote:authEnvironment:)``).
  /// Default: ``CredentialBindings/standard(environment:)``
  /// (`~/.config/trove/credentials.json`); nil lends no credential to any
  /// remote.
  public var credentialBindings: CredentialBindings? = .standard()
  /// Which of the removal engine's optimisations this process makes, for
  /// measuring each against its absence. Default: all of them.
  @_spi(Measuring) public var removalTuning: RemovalTuning = .tuned

  /// A configuration for the store at `root`, or at ``defaultRoot(environment:)`` when nil
  /// (an empty root, which ``Store/init(_:)`` refuses, when there is no
  /// default location: call ``defaultRoot(environment:)`` to learn why).
  public init(
    root: String? = nil, createIfMissing: Bool = true,
    onWarning: (@Sendable (String) -> Void)? = nil,
    policyOverrides: [CachePolicy.Key: String] = [:],
    recordName: String? = EnvironmentVariables.value("TROVE_RECORD"),
    writesBack: Bool = true,
    startsBackgroundUpload: (@Sendable (_ root: String) -> String?)? = nil,
    trace: (@Sendable (TraceEvent) -> Void)? = nil,
    remedyWording: (@Sendable (TroveError.Remedy) -> String)? = nil
  ) {
    self.writesBack = writesBack
    self.startsBackgroundUpload = startsBackgroundUpload
    self.root = root ?? ((try? Self.defaultRoot()) ?? "")
    self.createIfMissing = createIfMissing
    self.onWarning = onWarning
    self.policyOverrides = policyOverrides
    self.recordName = recordName?.isEmpty == false ? recordName : nil
    self.trace = trace
    self.remedyWording = remedyWording
  }

  public static func == (a: Self, b: Self) -> Bool {
    a.root == b.root && a.createIfMissing == b.createIfMissing
      && a.policyOverrides == b.policyOverrides && a.recordName == b.recordName
      && a.writesBack == b.writesBack && a.removalTuning == b.removalTuning
  }

  public func hash(into hasher: inout Hasher) {
    hasher.combine(root)
    hasher.combine(createIfMissing)
    hasher.combine(policyOverrides)
  }

  /// The settings `environment` overrides: each ``CachePolicy/Key`` whose
  /// ``CachePolicy/Key/environmentVariable`` (`TROVE_BUDGET`, `TROVE_MIN_FREE`, …)
  /// is set and not empty, with its text (checked when the store reads its
  /// settings).
  public static func environmentOverrides(
    _ environment: [String: String] = EnvironmentVariables.named(
      CachePolicy.Key.allCases.map(\.environmentVariable))
  ) -> [CachePolicy.Key: String] {
    var overrides: [CachePolicy.Key: String] = [:]
    for key in CachePolicy.Key.allCases {
      if let text = environment[key.environmentVariable], !text.isEmpty { overrides[key] = text }
    }
    return overrides
  }

  /// Where a store lives when none is named: `TROVE_STORE` when set and
  /// not empty; else `$XDG_CACHE_HOME/trove` when `XDG_CACHE_HOME` is an
  /// absolute path (a relative one is ignored, as the XDG Base Directory
  /// specification asks); else `$HOME/.cache/trove` when `HOME` is set and
  /// not empty; else `.cache/trove` in the home folder the user database
  /// gives this process's user.
  ///
  /// - Throws: ``TroveError`` `.invalidConfig` when none of these exists
  ///   (no `HOME`, and a user with no home in the user database, as a
  ///   service account may be): `no store location: …; give --store DIR or
  ///   set TROVE_STORE`.
  public static func defaultRoot(
    environment: [String: String] = EnvironmentVariables.named(
      ["TROVE_STORE", "XDG_CACHE_HOME", "HOME"])
  ) throws(TroveError) -> String {
    if let explicit = environment["TROVE_STORE"], !explicit.isEmpty { return explicit }
    if let caches = environment["XDG_CACHE_HOME"], caches.hasPrefix("/") {
      return joined(caches, "trove")
    }
    if let home = environment["HOME"], !home.isEmpty { return joined(home, ".cache/trove") }
    let uid = Sys.realUserID
    let home: String?
    do throws(SystemCallError) {
      home = try Sys.homeDirectory(ofUser: uid)
    } catch {
      throw TroveError(
        .invalidConfig,
        "no store location: HOME is not set and the home folder of user \(uid) cannot be "
          + "looked up: \(error.errno) (\(error.call), errno \(error.errno.rawValue))",
        value: String(uid), remedy: .chooseStore)
    }
    guard let home else {
      throw TroveError(
        .invalidConfig,
        "no store location: HOME is not set and user \(uid) has no home folder in the user "
          + "database",
        value: String(uid), remedy: .chooseStore)
    }
    return joined(home, ".cache/trove")
  }

  /// `folder` + `/` + `name`, without doubling a trailing slash of `folder`.
  static func joined(_ folder: String, _ name: String) -> String {
    var folder = folder
    while folder.count > 1 && folder.hasSuffix("/") { folder.removeLast() }
    return folder == "/" ? "/" + name : folder + "/" + name
  }
}
