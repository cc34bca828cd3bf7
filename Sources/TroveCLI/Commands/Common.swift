import Trove

/// The commands `trove` knows, in the order `help` lists them.
let allCommands: [CommandSpec] = [
  putCommand, getCommand, hasCommand, pathCommand, removeCommand, listCommand, statsCommand,
  sweepCommand, pinCommand, unpinCommand, pinsCommand, configCommand, recompressCommand,
  verifyCommand, reindexCommand,
]

let jsonOption = OptionSpec(names: ["--json"], valueName: nil, help: "Print JSON on stdout.")
let verboseOption = OptionSpec(
  names: ["-v", "--verbose"], valueName: nil, help: "Say what was done on stderr.")

extension Invocation {
  /// Opens the store named by `--store`, `TROVE_STORE` or the default.
  func openStore() throws(TroveError) -> Store {
    try Store(StoreConfiguration(root: store))
  }

  /// Parses a digest argument; bad text is a usage error quoting it.
  func digest(_ text: String) throws(UsageError) -> Digest {
    do {
      return try Digest(parsing: text)
    } catch {
      throw usageError(error.description)
    }
  }

  /// Resolves an argument that is a digest (`xxh128:…`) or a key bound by
  /// `put --key`.
  func digestOrKey(_ text: String, in store: Store) throws -> Digest {
    if text.hasPrefix(Digest.prefix) { return try digest(text) }
    guard let digest = try store.digest(forKey: text) else {
      throw TroveError(.notFound, "no key '\(text)' in store '\(store.root)'", value: text)
    }
    return digest
  }

  /// A size option (`--budget 10G`), or nil when absent.
  func size(_ option: String) throws(UsageError) -> Int64? {
    guard let text = value(option) else { return nil }
    guard let bytes = Quantities.parseSize(text) else {
      throw usageError(
        "invalid \(option) '\(text)': expected a size such as 500M, 10G, 1.5GiB or 0")
    }
    return bytes
  }

  /// A duration option (`--max-age 30d`), or nil when absent.
  func duration(_ option: String) throws(UsageError) -> Int64? {
    guard let text = value(option) else { return nil }
    guard let seconds = Quantities.parseDuration(text) else {
      throw usageError(
        "invalid \(option) '\(text)': expected a duration up to 36500d such as 30d, 12h, 90m or 45s"
      )
    }
    return seconds
  }

  /// Requires exactly `count` positionals named `names`.
  func requirePositionals(_ names: [String]) throws(UsageError) {
    if positionals.count < names.count {
      throw usageError("Missing expected argument '<\(names[positionals.count])>'")
    }
    if positionals.count > names.count {
      throw usageError("Unexpected argument '\(positionals[names.count])'")
    }
  }
}
