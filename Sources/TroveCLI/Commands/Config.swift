import Trove

let configCommand = CommandSpec(
  name: "config",
  abstract: "Show, change or reset the store's settings.",
  usage: "[get <key> | set <key> <value> | reset]",
  arguments: [
    ("key", PolicyKey.allCases.map(\.rawValue).joined(separator: ", ")),
    ("value", "The new value, in one of the forms listed above."),
  ],
  options: [],
  discussion: """
    Settings live in the store's config.json, so every process using the store
    follows them. With no arguments, lists every key with its value and meaning;
    reset writes the defaults.

    \(PolicyKey.allCases.map { "  \($0.rawValue): \($0.acceptedForms)" }.joined(separator: "\n"))

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
    switch args.first {
    case nil:
      let status = try invocation.openStore().policyStatus()
      if status.problems.contains(where: { $0.key == nil }), let error = status.error() {
        throw error
      }
      let rows = PolicyKey.allCases.map { key in
        (
          key.rawValue,
          status.problem(with: key).map { "invalid: \($0.found)" } ?? key.value(in: status.policy),
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
      if let remaining = after.error() { Output.error("trove: warning: \(remaining)") }
    case "reset":
      try invocation.requirePositionals(["reset"])
      try invocation.openStore().resetPolicy()
    default:
      throw invocation.usageError("unknown action '\(args[0])': expected get, set or reset")
    }
    return ExitStatus.success
  })
