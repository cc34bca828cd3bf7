import Trove

/// The commands `trove` knows, in the order `help` lists them.
let allCommands: [CommandSpec] = [
  putCommand, getCommand, hasCommand, pathCommand, removeCommand, listCommand, statsCommand,
  sweepCommand, pinCommand, unpinCommand, pinsCommand, keysCommand, configCommand,
  recompressCommand, verifyCommand, reindexCommand,
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

  /// Parses an argument that names an object: a digest (`xxh128:…`) or a
  /// key bound by `put --key`. Text in another digest's form (`sha256:…`,
  /// `sha512:…`) is parsed as a digest, and refused as one this store does
  /// not name objects by (a usage error, before any store is opened);
  /// anything else is a key.
  func reference(_ text: String) throws(UsageError) -> ObjectReference {
    if ["xxh128:", "sha256:", "sha512:"].contains(where: { text.hasPrefix($0) }) {
      return .digest(try digest(text))
    }
    return .key(text)
  }

  /// Resolves an argument that is a digest or a key (see ``reference(_:)``).
  /// - Throws: `.notFound` naming the key when it is not bound.
  func digestOrKey(_ text: String, in store: Store) throws -> Digest {
    try resolve(try reference(text), in: store)
  }

  /// The digest `reference` names.
  /// - Throws: `.notFound` naming the key when it is not bound.
  func resolve(_ reference: ObjectReference, in store: Store) throws(TroveError) -> Digest {
    switch reference {
    case .digest(let digest): return digest
    case .key(let key):
      guard let digest = try store.digest(forKey: key) else {
        throw TroveError(.notFound, "no key '\(key)' in store '\(store.root)'", value: key)
      }
      return digest
    }
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

/// What a command argument names: an object by its digest, or by a key.
enum ObjectReference {
  case digest(Digest)
  case key(String)
}
