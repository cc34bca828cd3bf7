import Trove

#if canImport(Glibc)
  import Glibc
#endif

let configCommand = CommandSpec(
  name: "config",
  abstract: "Show, change or reset the store's settings.",
  usage: "[get <key> | set <key> <value> | reset]",
  arguments: [
    ("key", (["access"] + PolicyKey.allCases.map(\.rawValue)).joined(separator: ", ")),
    ("value", "The new value, in one of the forms listed above."),
  ],
  options: [],
  discussion: """
    Settings live in the store's config.json, so every process using the store
    follows them. With no arguments, lists every key with its value and meaning;
    reset writes the defaults.

    \(PolicyKey.allCases.map { "  \($0.rawValue): \($0.acceptedForms)" }.joined(separator: "\n"))
      access: private or group

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
  run: { invocation in
    let args = invocation.positionals
    func key(_ text: String) throws -> PolicyKey {
      guard let key = PolicyKey(rawValue: text) else {
        throw invocation.usageError(
          "unknown setting '\(text)': expected one of \(PolicyKey.allCases.map(\.rawValue).joined(separator: ", "))"
        )
      }
      return key
    }
    if args.count >= 2, args[1] == "access" {
      return try accessSetting(invocation)
    }
    switch args.first {
    case nil:
      let store = try invocation.openStore()
      let status = try store.policyStatus()
      if status.problems.contains(where: { $0.key == nil }), let error = status.error() {
        throw error
      }
      let rows =
        [("access", store.access.rawValue, accessSummary)]
        + PolicyKey.allCases.map { key in
          (
            key.rawValue,
            status.problem(with: key).map { "invalid: \($0.found)" }
              ?? key.value(in: status.policy),
            key.summary
          )
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
      var check = CachePolicy.default
      do throws(TroveError) {
        try chosen.set(args[2], in: &check)
      } catch {
        throw invocation.usageError(error.description)
      }
      let store = try invocation.openStore()
      let before = try store.policyStatus()
      let after = try store.setPolicy(chosen, to: args[2])
      if let damage = before.problems.first(where: { $0.key == nil }) {
        Output.error(
          "trove: '\(before.path)' was damaged (\(damage.found)): written again with \(chosen.rawValue) \(chosen.value(in: after.policy)) and the defaults for the other settings"
        )
      } else if let repaired = before.problem(with: chosen) {
        Output.error(
          "trove: repaired \(chosen.rawValue) in '\(before.path)': \(repaired.found) is now \(chosen.value(in: after.policy))"
        )
      }
      if let remaining = after.error() { Output.warning("\(remaining)") }
    case "reset":
      try invocation.requirePositionals(["reset"])
      try invocation.openStore().resetPolicy()
    default:
      throw invocation.usageError("unknown action '\(args[0])': expected get, set or reset")
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
  default:
    throw invocation.usageError("unknown action '\(args[0])': expected get or set")
  }
}
