/// A store's policy as its `config.json` holds it: reading it, changing
/// it, and repairing a file that holds settings that cannot be used.
extension Store {
  /// What the store keeps and for how long, as `config.json` now says.
  ///
  /// - Throws: `.invalidConfig` naming the file, the setting and its value
  ///   when a setting cannot be used (see ``PolicyProblem``).
  public func policy() throws(TroveError) -> CachePolicy {
    try currentSettings().policy
  }

  /// The policy as `config.json` now has it, with the settings in it that
  /// cannot be used: what `trove config` shows. Never throws for such a
  /// setting.
  public func policyStatus() throws(TroveError) -> PolicyStatus {
    let settings = try loadedSettings()
    return PolicyStatus(
      policy: settings.policy, problems: settings.problems, path: settingsPath,
      overridden: settings.overridden)
  }

  /// Changes the persisted policy: reads the latest, applies `change`, and
  /// replaces `config.json` atomically (temp file, fsync, rename). Two
  /// processes changing it at once are serialized by a lock on the store's
  /// root; where locks are ignored, the later change wins whole — the file
  /// is never torn. Settings are validated as ``CachePolicy/Key/set(_:in:)``
  /// validates them.
  ///
  /// - Throws: `.invalidArgument` naming a setting `change` made invalid
  ///   (nothing is written); `.invalidConfig` when the file already holds a
  ///   setting that cannot be used: repair it first with
  ///   ``setPolicy(_:to:)`` or ``resetPolicy()``.
  /// - Returns: the policy now in force.
  @discardableResult
  public func updatePolicy(_ change: (inout CachePolicy) throws(TroveError) -> Void)
    throws(TroveError) -> CachePolicy
  {
    try rewriteSettings { (settings) throws(TroveError) in
      settings = try settings.checked(path: settingsPath)
      try change(&settings.policy)
      let reread = try StoreSettings.decode(settings.encoded(), path: settingsPath)
      if let problem = reread.problems.first {
        throw TroveError(.invalidArgument, problem.description, value: problem.found)
      }
    }.policy
  }

  /// Sets one setting from its text (`10G`, `30d`, `none`), as `trove
  /// config set` does, validated by ``CachePolicy/Key/set(_:in:)``. This repairs
  /// the setting when `config.json` holds an invalid value for it; other
  /// settings are kept as they are, invalid ones included. A file that
  /// cannot be read at all is written again from the defaults.
  ///
  /// - Throws: `.invalidArgument` quoting `text` (nothing is written).
  /// - Returns: the settings now in the file, with those still invalid.
  @discardableResult
  public func setPolicy(_ key: CachePolicy.Key, to text: String) throws(TroveError) -> PolicyStatus
  {
    if key == .signingKey, text.lowercased() != "none" {
      // The file is checked now (owner-only, a key), not at the first push.
      var policy = CachePolicy.default
      try key.set(text, in: &policy)
      _ = try SigningKey.load(text)
    }
    let settings = try rewriteSettings { (settings) throws(TroveError) in
      try settings.set(key, text)
    }
    return PolicyStatus(policy: settings.policy, problems: settings.problems, path: settingsPath)
  }

  /// Adds the rewrite rule `name` (``URLRewrite``), or replaces the one of
  /// that name, as `trove config set rewrite.NAME 'PREFIX=REPLACEMENT'`
  /// does; every fetch of the store follows it from then on. The other
  /// rules stay as they are (when `config.json`'s rules cannot all be used,
  /// those that can are kept and the rest dropped).
  ///
  /// - Throws: `.invalidArgument` naming the rule and what is wrong with
  ///   `rule` (see ``URLRewrite/init(name:rule:)``): nothing is written.
  /// - Returns: the settings now in the file, with those still invalid.
  @discardableResult
  public func setRewrite(_ name: String, to rule: String) throws(TroveError) -> PolicyStatus {
    try setRule(URLRewrite(name: name, rule: rule))
  }

  /// Removes the rewrite rule `name`, as `trove config unset rewrite.NAME`
  /// does.
  ///
  /// - Throws: `.notFound` when the store has no rule of that name.
  /// - Returns: the settings now in the file, with those still invalid.
  @discardableResult
  public func removeRewrite(_ name: String) throws(TroveError) -> PolicyStatus {
    try removeRule(URLRewrite.self, name)
  }

  /// Adds the mirror `name` of `upstream` (``MirrorRule``) that every
  /// `trove serve` of the store serves, or replaces the one of that name,
  /// as `trove config set mirror.NAME UPSTREAM` does.
  ///
  /// - Throws: `.invalidArgument` naming the mirror and what is wrong with
  ///   `upstream`: nothing is written.
  /// - Returns: the settings now in the file, with those still invalid.
  @discardableResult
  public func setMirror(_ name: String, to upstream: String) throws(TroveError) -> PolicyStatus {
    try setRule(MirrorRule(name: name, rule: upstream))
  }

  /// Removes the mirror `name`, as `trove config unset mirror.NAME` does.
  ///
  /// - Throws: `.notFound` when the store has no mirror of that name.
  /// - Returns: the settings now in the file, with those still invalid.
  @discardableResult
  public func removeMirror(_ name: String) throws(TroveError) -> PolicyStatus {
    try removeRule(MirrorRule.self, name)
  }

  private func setRule<Rule: NamedRule>(_ added: Rule) throws(TroveError) -> PolicyStatus {
    try changeRules(Rule.self) { rules throws(TroveError) in
      rules.removeAll { $0.name == added.name }
      rules.append(added)
    }
  }

  private func removeRule<Rule: NamedRule>(_: Rule.Type, _ name: String) throws(TroveError)
    -> PolicyStatus
  {
    try changeRules(Rule.self) { rules throws(TroveError) in
      guard rules.contains(where: { $0.name == name }) else {
        throw TroveError(
          .notFound, "no \(Rule.setting.rawValue).\(name) in '\(settingsPath)'", value: name)
      }
      rules.removeAll { $0.name == name }
    }
  }

  /// Applies `change` to the entries of `Rule`'s setting in `config.json`
  /// and writes them.
  private func changeRules<Rule: NamedRule>(
    _: Rule.Type, _ change: (inout [Rule]) throws(TroveError) -> Void
  ) throws(TroveError) -> PolicyStatus {
    let settings = try rewriteSettings { (settings) throws(TroveError) in
      var rules =
        settings.problems.contains { $0.key == Rule.setting }
        ? Rule.usable(settings.kept[Rule.setting.rawValue])
        : settings.policy[keyPath: Rule.inPolicy]
      try change(&rules)
      rules.sort { $0.name < $1.name }
      try settings.set(Rule.setting, Rule.listText(rules))
    }
    return PolicyStatus(policy: settings.policy, problems: settings.problems, path: settingsPath)
  }

  /// Sets `key` back to its default (``CachePolicy/default``), as `trove
  /// config unset KEY` does; the other settings stay as they are (an
  /// unreadable file is started again from the defaults).
  /// - Returns: the policy and the problems now in force.
  @discardableResult
  public func unsetPolicy(_ key: CachePolicy.Key) throws(TroveError) -> PolicyStatus {
    let settings = try rewriteSettings { (settings) throws(TroveError) in
      try settings.unset(key)
    }
    return PolicyStatus(policy: settings.policy, problems: settings.problems, path: settingsPath)
  }

  /// Writes the default policy (``CachePolicy/default``) over whatever
  /// `config.json` holds, as `trove config reset` does.
  /// - Returns: the policy now in force.
  @discardableResult
  public func resetPolicy() throws(TroveError) -> CachePolicy {
    try rewriteSettings(reading: false) { _ in }.policy
  }

  /// Reads `config.json` under the root's lock (or, without `reading`,
  /// starts from the defaults), applies `change`, and replaces the file
  /// atomically with the result (``replaceRootFile(_:with:)``), which it
  /// returns.
  ///
  /// The file written is this user's: when the one read is not
  /// (``rootFileRefusal(_:)``), its `signing-key` is another user's choice
  /// and is dropped, with a warning, unless `change` sets one.
  private func rewriteSettings(
    reading: Bool = true, _ change: (inout StoreSettings) throws(TroveError) -> Void
  ) throws(TroveError) -> StoreSettings {
    try requireWritable()
    _ = try? rootDirectory.lock()
    defer { rootDirectory.unlock() }
    var settings = StoreSettings.initial
    var dropped: String? = nil
    if reading {
      let read = try Self.readSettings(root: root, rootFD: rootDirectory)
      settings = read.settings
      if let reason = Self.rootFileRefusal(read.status),
        settings.policy.signingKey != nil
          || settings.problems.contains(where: { $0.key == .signingKey })
      {
        try settings.set(.signingKey, "none")
        dropped = reason
      }
    }
    try change(&settings)
    if let dropped, settings.policy.signingKey == nil {
      configuration.onWarning?(
        "'\(settingsPath)' \(dropped): its signing-key dropped, as another user chose it (set your own with 'trove config set signing-key FILE')"
      )
    }
    try replaceRootFile(StoreLayout.settings, with: settings.encoded())
    _ = try loadedSettings()
    return settings
  }

  /// Whether the rewrite rules in force are this user's choice: given to
  /// this process (an override), or read from a store no one else can
  /// write (its root folder owned by this user or root, and not writable by
  /// group or others). In a store others can write, any member could have
  /// put a `config.json` there (even a file of this user's, renamed), so
  /// its rules get no credential of this user's.
  func rewritesAreThisUsers() -> Bool { settingIsThisUsers(.rewrite) }

  /// Whether the mirrors in force (``CachePolicy/mirrors``) are this
  /// user's choice, as ``rewritesAreThisUsers()`` judges rewrite rules: a
  /// server serves none that another user may have chosen, since its
  /// fetches would carry this user's `~/.netrc` logins to their upstreams.
  @_spi(Serving)
  public func mirrorsAreThisUsers() -> Bool { settingIsThisUsers(.mirror) }

  private func settingIsThisUsers(_ key: CachePolicy.Key) -> Bool {
    if configuration.policyOverrides[key] != nil { return true }
    guard let folder = try? rootDirectory.status() else { return false }
    return (folder.owner == Sys.effectiveUserID || folder.owner == 0)
      && folder.mode & 0o022 == 0
  }
}
