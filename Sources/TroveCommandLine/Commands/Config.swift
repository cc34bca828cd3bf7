import Trove

#if canImport(Glibc)
  import Glibc
#endif

let configCommand = CommandSpec(
  name: "config",
  abstract: "Show, change or reset the store's settings.",
  usage: "[--json] [get <key> | set <key> <value> | unset <key> | reset]",
  arguments: [
    ("key", (["access"] + CachePolicy.Key.allCases.map(\.rawValue)).joined(separator: ", ")),
    ("value", "The new value, in one of the forms listed above."),
  ],
  options: [
    OptionSpec(
      names: ["--json"], valueName: nil,
      help: "With no action: print every setting as JSON (value, bytes or seconds, source).")
  ],
  discussion: """
    Settings live in the store's config.json, so every process using the store
    follows them. An environment variable overrides one for the process that
    has it, without changing config.json: TROVE_ and the key in capitals with _
    for - (TROVE_BUDGET, TROVE_MIN_FREE, TROVE_MAX_AGE, …); config shows it as
    the source, and an invalid value is an error naming the variable (exit 78). With no arguments, lists every key with its value and meaning
    ('--json': value, bytes or seconds, and source: default, config or invalid);
    'unset KEY' puts one setting back to its default, 'reset' all of them.

    \(CachePolicy.Key.allCases.map { "  \($0.rawValue): \($0.acceptedForms)" }.joined(separator: "\n"))
      access: private or group

    'rewrite.NAME' is one rewrite rule, 'PREFIX=REPLACEMENT' (split at the first
    '='): every fetch, of the library and of the command alike, asks for a URL
    (or a mirror) starting with PREFIX at REPLACEMENT and the rest of the URL
    instead; the key stays the URL asked for. Each rule that matches gives one
    URL, in the order of the rules' names; the URL a rule replaced is not
    asked (a rule whose REPLACEMENT is its PREFIX keeps it). 'config set
    rewrite.NAME RULE' adds or replaces one rule, 'config unset rewrite.NAME'
    removes it, 'config get rewrite' lists them, one NAME=PREFIX=REPLACEMENT a
    line, and 'config get rewrite.NAME' prints one. TROVE_REWRITE (the same
    entries separated by spaces, or none) replaces them all for one process.

    'mirror.NAME' is one pull-through mirror every 'trove serve' of the store
    serves at /m/NAME/ (UPSTREAM, an http:// or https:// URL), beside those of
    its --mirror options, which win over one of the same name. 'config get
    mirror', 'get|set|unset mirror.NAME' and TROVE_MIRROR work as for rewrite.

    'access' is not in config.json: the store's root folder says it. 'set access
    group' shares the store with its root folder's group (chgrp the folder to
    the team's group first): folders become 2770, the files every writer opens
    0660, and every folder and file the group's; 'set access private' takes it
    back (0700). Files another user owns can only be changed by them or root:
    each is named, and the command exits 77.

    A config.json holding a value these forms do not allow (edited by hand), or
    that is not readable at all, is reported naming the setting (exit 78): reads
    still work, but puts, fetches and sweeps are refused until it is repaired.
    'set' repairs one setting and keeps the others as they are ('reset' or 'set'
    on a file that is not JSON at all writes the defaults for the others).
    """,
  store: StoreUse(
    creates: true, writes: { ["set", "reset", "unset"].contains($0.positionals.first) }),
  closedPipeIsSuccess: true,
  run: { invocation in
    let args = invocation.positionals
    func key(_ text: String) throws -> CachePolicy.Key {
      guard let key = CachePolicy.Key(rawValue: text) else {
        throw invocation.usageError(
          "unknown setting '\(text)': expected one of \(CachePolicy.Key.allCases.map(\.rawValue).joined(separator: ", "))"
        )
      }
      return key
    }
    if invocation.flag("--json") && !args.isEmpty {
      throw invocation.usageError("--json lists every setting: give it no action")
    }
    if args.count >= 2, args[1] == "access", ["get", "set", "unset"].contains(args[0]) {
      return try accessSetting(invocation)
    }
    if args.count >= 2, args[1].hasPrefix("rewrite.") || (args[0] == "get" && args[1] == "rewrite")
    {
      return try namedSetting(URLRewrite.self, invocation)
    }
    if args.count >= 2, args[1].hasPrefix("mirror.") || (args[0] == "get" && args[1] == "mirror") {
      return try namedSetting(MirrorRule.self, invocation)
    }
    switch args.first {
    case nil:
      let store = try invocation.openStore()
      let status = try store.policyStatus()
      if status.problems.contains(where: { $0.key == nil }), let error = status.error() {
        throw error
      }
      if invocation.flag("--json") {
        Output.json(
          [SettingRecord(access: store.access)]
            + CachePolicy.Key.allCases.map { SettingRecord($0, status) })
        if let error = status.error() { throw error }
        return ExitStatus.success
      }
      let rows =
        [("access", store.access.rawValue, accessSummary)]
        + CachePolicy.Key.allCases.flatMap { key in
          let overridden = status.overridden.contains(key) ? " (\(key.environmentVariable))" : ""
          // One row a rule: a list of URLs on one line reads badly.
          if key == .rewrite, status.problem(with: key) == nil, !status.policy.rewrites.isEmpty {
            return status.policy.rewrites.map {
              ("rewrite.\($0.name)", $0.rule + overridden, key.summary)
            }
          }
          if key == .mirror, status.problem(with: key) == nil, !status.policy.mirrors.isEmpty {
            return status.policy.mirrors.map {
              ("mirror.\($0.name)", $0.rule + overridden, key.summary)
            }
          }
          return [
            (
              key.rawValue,
              status.problem(with: key).map { "invalid: \($0.found)" }
                ?? key.value(in: status.policy) + overridden,
              key.summary
            )
          ]
        }
      let nameWidth = rows.map(\.0.count).max()! + 2
      let valueWidth = rows.map(\.1.count).max()! + 2
      for (name, value, summary) in rows {
        Output.line(
          name + String(repeating: " ", count: nameWidth - name.count) + value
            + String(repeating: " ", count: valueWidth - value.count) + summary)
      }
      if let error = status.error() { throw error }
    case "get":
      try invocation.requirePositionals(["get", "key"])
      let chosen = try key(args[1])
      let status = try invocation.openStore().policyStatus()
      if let error = status.error(for: chosen) { throw error }
      Output.line(chosen.value(in: status.policy))
    case "set":
      try invocation.requirePositionals(["set", "key", "value"])
      let chosen = try key(args[1])
      let value = chosen == .signingKey ? absolutePath(args[2]) : args[2]
      var check = CachePolicy.default
      do throws(TroveError) {
        try chosen.set(value, in: &check)
      } catch {
        throw invocation.usageError(error.description)
      }
      let store = try invocation.openStore()
      let before = try store.policyStatus()
      let after = try store.setPolicy(chosen, to: value)
      if let damage = before.problems.first(where: { $0.key == nil }) {
        Output.error(
          "trove: '\(before.path)' was damaged (\(damage.found)): written again with \(chosen.rawValue) \(chosen.value(in: after.policy)) and the defaults for the other settings"
        )
      } else if let repaired = before.problem(with: chosen) {
        Output.error(
          "trove: repaired \(chosen.rawValue) in '\(before.path)': \(repaired.found) is now \(chosen.value(in: after.policy))"
        )
      }
      if let remaining = after.error() { Output.warning(remaining.withHint) }
      if before.overridden.contains(chosen) {
        Output.warning(
          "\(chosen.environmentVariable) overrides \(chosen.rawValue) in this environment")
      }
    case "unset":
      try invocation.requirePositionals(["unset", "key"])
      let chosen = try key(args[1])
      let store = try invocation.openStore()
      let after = try store.unsetPolicy(chosen)
      if let remaining = after.error() { Output.warning(remaining.withHint) }
      warnOverridden(try store.policyStatus().overridden.filter { $0 == chosen })
    case "reset":
      try invocation.requirePositionals(["reset"])
      let store = try invocation.openStore()
      try store.resetPolicy()
      warnOverridden(try store.policyStatus().overridden)
    default:
      throw invocation.usageError(
        "unknown action '\(args[0])': expected get, set, unset or reset")
    }
    return ExitStatus.success
  })

let accessSummary = "who may read and write: its owner, or its root folder's group"

/// `config get access`, `config set access private|group`.
private func accessSetting(_ invocation: Invocation) throws -> Int32 {
  let args = invocation.positionals
  switch args[0] {
  case "get":
    try invocation.requirePositionals(["get", "key"])
    Output.line(try invocation.openStore().access.rawValue)
    return ExitStatus.success
  case "set":
    try invocation.requirePositionals(["set", "key", "value"])
    guard let access = StoreAccess(rawValue: args[2]) else {
      throw invocation.usageError("invalid access '\(args[2])': expected private or group")
    }
    let change = try invocation.openStore().setAccess(access)
    for failure in change.failures { Output.error("trove: warning: \(failure)") }
    guard change.failures.isEmpty else {
      Output.error(
        "trove: access set to \(access.rawValue), but not every file could be changed: run it again as their owners or as root"
      )
      return ExitStatus.permission
    }
    if access == .group && change.groupID == getgid() {
      Output.error(
        "trove: note: the store is shared with group \(change.groupID), your own; 'chgrp' its folder to the team's group first, then set access again"
      )
    }
    return ExitStatus.success
  case "unset":
    try invocation.requirePositionals(["unset", "key"])
    throw invocation.usageError(
      "access has no default to go back to: the store folder's mode holds it, not config.json; choose with 'trove config set access private' or 'group'"
    )
  default:
    throw invocation.usageError("unknown action '\(args[0])': expected get or set")
  }
}

/// `config get KEY`, `config get|set|unset KEY.NAME` of a setting made of
/// named entries (`rewrite`, `mirror`).
private func namedSetting<Rule: NamedRule>(_: Rule.Type, _ invocation: Invocation) throws
  -> Int32
{
  let args = invocation.positionals
  let key = Rule.setting
  let name = String(args[1].dropFirst(key.rawValue.count + 1))
  switch args[0] {
  case "get" where args[1] == key.rawValue:
    try invocation.requirePositionals(["get", "key"])
    let status = try invocation.openStore().policyStatus()
    if let error = status.error(for: key) { throw error }
    for rule in status.policy[keyPath: Rule.inPolicy] { Output.line("\(rule.name)=\(rule.rule)") }
  case "get":
    try invocation.requirePositionals(["get", "key"])
    let status = try invocation.openStore().policyStatus()
    if let error = status.error(for: key) { throw error }
    guard let rule = status.policy[keyPath: Rule.inPolicy].first(where: { $0.name == name }) else {
      throw TroveError(
        .notFound, "no \(key.rawValue).\(name) in '\(status.path)'", value: name)
    }
    Output.line(rule.rule)
  case "set":
    try invocation.requirePositionals(["set", "key", "value"])
    let rule: Rule
    do throws(TroveError) {
      rule = try Rule(name: name, rule: args[2])
    } catch {
      throw invocation.usageError(error.description)
    }
    let store = try invocation.openStore()
    let after =
      key == .rewrite
      ? try store.setRewrite(rule.name, to: rule.rule)
      : try store.setMirror(rule.name, to: rule.rule)
    if let remaining = after.error() { Output.warning(remaining.withHint) }
    if try store.policyStatus().overridden.contains(key) {
      Output.warning("\(key.environmentVariable) overrides \(key.rawValue) in this environment")
    }
  case "unset":
    try invocation.requirePositionals(["unset", "key"])
    let store = try invocation.openStore()
    let after = key == .rewrite ? try store.removeRewrite(name) : try store.removeMirror(name)
    if let remaining = after.error() { Output.warning(remaining.withHint) }
    warnOverridden(try store.policyStatus().overridden.filter { $0 == key })
  default:
    throw invocation.usageError(
      "unknown action '\(args[0])': expected get, set or unset")
  }
  return ExitStatus.success
}

/// After `unset` or `reset`: a setting its environment variable still
/// overrides does not take the default in this environment; say so.
private func warnOverridden(_ keys: some Collection<CachePolicy.Key>) {
  for key in CachePolicy.Key.allCases where keys.contains(key) {
    Output.warning(
      "\(key.environmentVariable) still overrides \(key.rawValue) in this environment: unset it to use the default"
    )
  }
}

/// One setting in `config --json`.
struct SettingRecord: Encodable {
  var key: String
  /// As `trove config get` prints it (`none`, `10%`, `1.0 GiB`, `60s`).
  var value: String
  /// The value in bytes, for a size setting that holds one; else null.
  @Nullable var bytes: Int64?
  /// The value in seconds, for a duration setting that holds one; else null.
  @Nullable var seconds: Int64?
  /// `default` (the value is the default), `config` (config.json sets
  /// another), `env` (its TROVE_… variable overrides config.json in this
  /// environment), `invalid` (config.json holds a value that cannot be
  /// used), or `folder` (access: the store's root folder says it).
  var source: String
  /// What config.json holds instead, when invalid.
  @Nullable var found: String?

  init(access: StoreAccess) {
    key = "access"
    value = access.rawValue
    source = "folder"
  }

  init(_ key: CachePolicy.Key, _ status: PolicyStatus) {
    let policy = status.policy
    self.key = key.rawValue
    value = key.value(in: policy)
    switch key {
    case .budget: bytes = policy.budget
    case .maximumObjectSize: bytes = policy.maximumObjectSize
    case .compressionMinimumSize: bytes = policy.compressionMinimumSize
    case .chunkMinimumSize: bytes = policy.chunkMinimumSize
    case .minimumFree:
      if case .bytes(let n) = policy.minimumFree { bytes = n }
    case .maxAge: seconds = policy.maxAge
    case .accessResolution: seconds = policy.accessResolution
    case .temporaryMaxAge: seconds = policy.temporaryMaxAge
    default: break
    }
    if status.overridden.contains(key) {
      source = "env"
    } else if let problem = status.problem(with: key) {
      source = "invalid"
      found = problem.found
      bytes = nil
      seconds = nil
    } else {
      source = value == key.value(in: .default) ? "default" : "config"
    }
  }
}

extension CachePolicy.Key {
  /// What the setting means, for `trove config`.
  var summary: String {
    switch self {
    case .budget: return "bytes the store may use before sweeps evict (none: no limit)"
    case .maxAge: return "entries unused this long are removed by sweeps (none: never)"
    case .lowWater: return "fraction of the budget a sweep trims to"
    case .accessResolution: return "reads record access only when the last is older than this"
    case .minimumFree: return "free space the volume keeps; below it optional puts are skipped"
    case .maximumObjectSize: return "largest object a put or fetch may store (none: no limit)"
    case .temporaryMaxAge: return "in-flight files idle this long are removed by sweeps"
    case .compression: return "how new objects are stored (recompress rewrites old ones)"
    case .compressionWorkers: return "zstd threads for large objects (0: none)"
    case .compressionMinimumSize: return "smaller objects are stored raw"
    case .checksums:
      return "SHA-2 checksums every fetch computes and records (none: only --expect's)"
    case .evictRemoteFirst:
      return "sweeps evict objects a remote holds (a get reads them back) before the others"
    case .signingKey:
      return "key file pushes sign records and objects with (none: unsigned)"
    case .rewrite:
      return "rules sending every fetch of a URL prefix elsewhere (rewrite.NAME)"
    case .mirror:
      return "pull-through mirrors trove serve serves at /m/NAME/ (mirror.NAME)"
    case .chunking:
      return "large raw objects record their chunks, to share blocks and transfers"
    case .chunkMinimumSize: return "smaller objects get no chunk manifest"
    }
  }
}
