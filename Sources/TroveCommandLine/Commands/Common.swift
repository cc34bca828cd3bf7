import Foundation
import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// The commands `trove` knows, in the order `help` lists them.
let allCommands: [CommandSpec] = [
  fetchCommand, putCommand, getCommand, hasCommand, pathCommand, removeCommand, listCommand,
  showCommand, statsCommand,
  sweepCommand, pinCommand, unpinCommand, pinsCommand, keysCommand, configCommand,
  recompressCommand, dedupeCommand, verifyCommand, reindexCommand, dirCommand, hashCommand,
  cleanCommand,
  doctorCommand,
  recordCommand, exportCommand, importCommand,
  remoteCommand, keygenCommand, serveCommand,
]

let jsonOption = OptionSpec(names: ["--json"], valueName: nil, help: "Print JSON on stdout.")
let verboseOption = OptionSpec(
  names: ["-v", "--verbose"], valueName: nil, help: "Say what was done on stderr.")
/// `--expect-size N` of `fetch` and `put`, read with `size("--expect-size")`.
let expectSizeOption = OptionSpec(
  names: ["--expect-size"], valueName: "n",
  help: "The input's exact length in bytes: any other fails (exit 65) and stores nothing.")

extension Invocation {
  /// Opens the store named by `--store`, `TROVE_STORE` or the default
  /// (see ``storeRoot``). Only the commands that store, sweep or
  /// configure create a missing store; the others say it is not there
  /// (exit 66) and make nothing — but see ``openStoreIfPresent()``.
  /// With `TROVE_DEBUG=FILE` its decisions are traced to FILE.
  ///
  /// A command that must write a read-only store (see ``writesStore``)
  /// fails here, before doing anything: `read-only store 'DIR': CAUSE`,
  /// exit 77.
  func openStore() throws(TroveError) -> Store {
    let store = try Store(
      StoreConfiguration(
        root: try storeRoot, createIfMissing: command.store.creates,
        onWarning: { Output.warning($0) },
        policyOverrides: StoreConfiguration.environmentOverrides(),
        startsBackgroundUpload: Self.startBackgroundUpload, trace: debugTrace,
        remedyWording: Hints.suffix))
    if writesStore { try store.requireWritable() }
    return store
  }

  /// How the library's `async` write-back drains the upload queue for the
  /// command: a detached `trove remote push --if-idle`, in a process of its
  /// own with /dev/null for its standard files and nothing else of this
  /// one's open, so a caller reading this command's output to its end is
  /// not kept waiting for the upload.
  @Sendable static func startBackgroundUpload(_ root: String) -> String? {
    BackgroundProcess.start(
      "/proc/self/exe", ["--store", root, "--quiet", "remote", "push", "--if-idle"]
    ).map { "cannot start 'trove remote push': \(String(cString: strerror($0)))" }
  }

  /// The store, or nil when none exists at the path yet: for the commands
  /// that look things up (`has`, `get`, `path`, `show`) and list (`ls`,
  /// `keys`, `pins`), a store that was never made is an empty cache — a
  /// miss, or an empty listing — and nothing is made.
  func openStoreIfPresent() throws(TroveError) -> Store? {
    do {
      return try openStore()
    } catch  where error.code == .storeMissing {
      return nil
    }
  }

  /// The miss of `text` (of every name, when nil) when no store exists
  /// at the path yet (exit 1).
  func missWithoutStore(_ text: String?) throws(TroveError) -> TroveError {
    let what = text.map { "no object or key '\($0)'" } ?? "no object or key named"
    return TroveError(
      .notFound, "\(what): no store exists at '\(try storeRoot)' yet", value: text)
  }

  /// Whether this invocation must write the store (its command's
  /// ``CommandSpec/store``): those that only read work on a read-only store.
  var writesStore: Bool { command.store.writes(self) }

  /// The store's folder as an absolute path: `--store`, else
  /// `TROVE_STORE`, else the default location
  /// (``StoreConfiguration/defaultRoot(environment:)``); a leading `~` or
  /// `~user` expanded as a shell would (a quoted `'~/x'` reaches Trove
  /// unexpanded), a relative path made absolute, and repeated slashes,
  /// `.` components and a trailing slash dropped, so every message and
  /// `trove path` name it whole and once (`a//b/` is `$PWD/a/b`).
  /// - Throws: `.invalidConfig` when no store is named and there is no
  ///   default location (no `HOME`, no home folder for this user).
  var storeRoot: String {
    get throws(TroveError) {
      let named: String
      if let store {
        named = store
      } else {
        named = try StoreConfiguration.defaultRoot()
      }
      let expanded = Self.expandingTilde(named)
      let absolute =
        expanded.hasPrefix("/")
        ? expanded : FileManager.default.currentDirectoryPath + "/" + expanded
      return Self.normalized(absolute)
    }
  }

  /// An absolute path with repeated slashes, `.` components and a
  /// trailing slash removed (`..` is kept: through a link it is not the
  /// parent).
  static func normalized(_ path: String) -> String {
    // Concatenated by hand: `joined(separator:)` looks up a conformance at
    // run time, a scan of all of them on a command's first use.
    var normal = ""
    for part in path.split(separator: "/", omittingEmptySubsequences: true) where part != "." {
      normal.append("/")
      normal.append(contentsOf: part)
    }
    return normal.isEmpty ? "/" : normal
  }

  /// `~` → `$HOME`, `~user` → that user's home, as shells expand them.
  static func expandingTilde(_ path: String) -> String {
    guard path.hasPrefix("~") else { return path }
    let slash = path.firstIndex(of: "/") ?? path.endIndex
    let user = String(path[path.index(after: path.startIndex)..<slash])
    let home: String?
    if user.isEmpty {
      home =
        EnvironmentVariables.lookUp("HOME")
        ?? getpwuid(getuid()).map { String(cString: $0.pointee.pw_dir) }
    } else {
      home = getpwnam(user).map { String(cString: $0.pointee.pw_dir) }
    }
    guard let home else { return path }
    return home + path[slash...]
  }

  /// Parses a digest argument; bad text is a usage error quoting it.
  func digest(_ text: String) throws(UsageError) -> BlobDigest {
    do {
      return try BlobDigest(parsing: text)
    } catch {
      throw usageError(error.description)
    }
  }

  /// Parses an argument that names an object: a digest (`xxh128:…`, the
  /// prefix in either case), a unique prefix of one (8 to 31 hex digits,
  /// with or without `xxh128:`), bare hex (a key first, else a digest or a
  /// prefix), a publisher's checksum a fetch verified (`sha256:…`,
  /// `sha512:…`), or a key (a URL, or any name bound by `put --key`).
  /// Malformed digest or checksum text, and an `xxh128:` prefix shorter
  /// than 8 hex digits, are usage errors quoting it, before any store is
  /// opened.
  func reference(_ text: String) throws(UsageError) -> ObjectReference {
    // The common case first, without copies: a whole digest as printed
    // (`trove rm` of 10,000 digests parses them all before it starts).
    if text.utf8.count == BlobDigest.prefix.utf8.count + 32, text.hasPrefix(BlobDigest.prefix),
      let digest = try? BlobDigest(parsing: text)
    {
      return .digest(digest)
    }
    if text.lowercased().hasPrefix(BlobDigest.prefix) {
      let hex = String(text.dropFirst(BlobDigest.prefix.count))
      if (1..<32).contains(hex.utf8.count) && isHex(hex) {
        guard hex.utf8.count >= minimumPrefix else {
          throw usageError(
            "digest prefix '\(text)' is too short: give at least \(minimumPrefix) hex digits")
        }
        return .prefix(hex.lowercased())
      }
      return .digest(try digest(BlobDigest.prefix + hex))
    }
    if (1...32).contains(text.utf8.count) && isHex(text) { return .hex(text) }
    if ["sha256:", "sha512:"].contains(where: { text.lowercased().hasPrefix($0) }) {
      do throws(TroveError) {
        return .checksum(try Checksum(parsing: text))
      } catch {
        throw usageError(error.description)
      }
    }
    return .key(text)
  }

  /// Resolves an argument that is a digest, a checksum or a key (see
  /// ``reference(_:)``).
  /// - Throws: `.notFound` naming the key or checksum when nothing has it.
  func digestOrKey(_ text: String, in store: Store) throws -> BlobDigest {
    try resolve(try reference(text), in: store)
  }

  /// The digest `reference` names.
  /// - Throws: `.notFound` naming the key, checksum or prefix when nothing
  ///   has it; ``AmbiguousDigestPrefix`` when a prefix names several
  ///   objects; a ``UsageError`` for bare hex too short to be a prefix
  ///   that is not a key either.
  func resolve(_ reference: ObjectReference, in store: Store) throws -> BlobDigest {
    switch reference {
    case .digest(let digest): return digest
    case .prefix(let hex): return try digest(prefix: hex, in: store)
    case .hex(let text): return try digest(hex: text, in: store)
    case .checksum(let checksum):
      guard let digest = try store.digest(for: checksum) else {
        throw TroveError(
          .notFound, "no object with \(checksum) in store '\(store.root)'",
          value: checksum.description)
      }
      return digest
    case .key(let key):
      if let digest = try boundDigest(key, in: store) { return digest }
      throw TroveError(.notFound, "no key '\(key)' in store '\(store.root)'", value: key)
    }
  }

  /// The digest `key` is bound to, looked up as the command's
  /// ``CommandSpec/keyLookup`` says: used (noted in the active records) by
  /// those that use the object, read through the remotes by those that
  /// fetch it out, only looked at by those that show or manage keys.
  /// `readingThrough` false keeps to the store's own keys.
  func boundDigest(_ key: String, in store: Store, readingThrough: Bool = true)
    throws(TroveError) -> BlobDigest?
  {
    var lookup = command.keyLookup(self)
    if !readingThrough { lookup.remove(.readThrough) }
    return try store.digest(forKey: key, lookup)
  }

  /// A size option (`--budget 10G`), or nil when absent.
  func size(_ option: String) throws(UsageError) -> Int64? {
    guard let text = value(option) else { return nil }
    try refuseNegative(text, "size", option)
    guard let bytes = CachePolicy.Quantities.parseSize(text) else {
      throw usageError(
        "invalid \(option) '\(text)': expected a size such as 500M, 10G, 1.5GiB or 0")
    }
    return bytes
  }

  /// A duration option (`--max-age 30d`), or nil when absent.
  func duration(_ option: String) throws(UsageError) -> Int64? {
    guard let text = value(option) else { return nil }
    try refuseNegative(text, "duration", option)
    guard let seconds = CachePolicy.Quantities.parseDuration(text) else {
      throw usageError(
        "invalid \(option) '\(text)': expected a duration up to 36500d such as 30d, 12h, 90m or 45s"
      )
    }
    return seconds
  }

  /// A whole-number option (`--jobs 8`), or nil when absent.
  func count(_ option: String) throws(UsageError) -> Int? {
    guard let text = value(option) else { return nil }
    try refuseNegative(text, "number", option)
    guard let n = Int(text), n >= 0, n <= 1_000_000 else {
      throw usageError("invalid \(option) '\(text)': expected a whole number")
    }
    return n
  }

  /// A number of seconds (`--stall-timeout 2.5`), or nil when absent.
  func seconds(_ option: String) throws(UsageError) -> Double? {
    guard let text = value(option) else { return nil }
    try refuseNegative(text, "number of seconds", option)
    guard let n = Double(text), n > 0, n <= 86400 else {
      throw usageError(
        "invalid \(option) '\(text)': expected seconds, more than 0, such as 30 or 2.5")
    }
    return n
  }

  /// Refuses a value written with a minus sign: "negative duration '-5m'
  /// for --for".
  func refuseNegative(_ text: String, _ kind: String, _ option: String) throws(UsageError) {
    if text.trimmingCharacters(in: .whitespaces).hasPrefix("-") {
      throw usageError("negative \(kind) '\(text)' for \(option)")
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

/// What a command argument names: an object by its digest, by a
/// publisher's checksum, or by a key.
enum ObjectReference {
  case digest(BlobDigest)
  /// The start of a digest's hex (8 to 31 digits, lowercase), `xxh128:` given.
  case prefix(String)
  /// Bare hex digits (1 to 32): a key if one is bound so, else a digest
  /// or the start of one.
  case hex(String)
  case checksum(Checksum)
  case key(String)
}
