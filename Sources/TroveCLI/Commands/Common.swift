import Trove

/// The commands `trove` knows, in the order `help` lists them.
let allCommands: [CommandSpec] = [
  putCommand, getCommand, hasCommand, pathCommand, removeCommand, listCommand, statsCommand,
  reindexCommand,
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
