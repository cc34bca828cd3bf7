import Trove

let configCommand = CommandSpec(
  name: "config",
  abstract: "Show or change the store's settings.",
  usage: "[get <key> | set <key> <value>]",
  arguments: [
    ("key", PolicyKey.allCases.map(\.rawValue).joined(separator: ", ")),
    ("value", "The new value, in one of the forms listed above."),
  ],
  options: [],
  discussion: """
    Settings live in the store's config.json, so every process using the store
    follows them. With no arguments, lists every key with its value and meaning.

    \(PolicyKey.allCases.map { "  \($0.rawValue): \($0.acceptedForms)" }.joined(separator: "\n"))
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
      let policy = try invocation.openStore().policy()
      let rows = PolicyKey.allCases.map { ($0.rawValue, $0.value(in: policy), $0.summary) }
      let nameWidth = rows.map(\.0.count).max()! + 2
      let valueWidth = rows.map(\.1.count).max()! + 2
      for (name, value, summary) in rows {
        Output.line(
          name + String(repeating: " ", count: nameWidth - name.count) + value
            + String(repeating: " ", count: valueWidth - value.count) + summary)
      }
    case "get":
      try invocation.requirePositionals(["get", "key"])
      Output.line(try key(args[1]).value(in: try invocation.openStore().policy()))
    case "set":
      try invocation.requirePositionals(["set", "key", "value"])
      let chosen = try key(args[1])
      var check = CachePolicy.default
      do throws(TroveError) {
        try chosen.set(args[2], in: &check)
      } catch {
        throw invocation.usageError(error.description)
      }
      try invocation.openStore().updatePolicy { (policy) throws(TroveError) in
        try chosen.set(args[2], in: &policy)
      }
    default:
      throw invocation.usageError("unknown action '\(args[0])': expected get or set")
    }
    return ExitStatus.success
  })
