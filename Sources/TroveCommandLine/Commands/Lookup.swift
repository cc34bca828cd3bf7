import Trove

let hasCommand = CommandSpec(
  name: "has",
  abstract: "Exit 0 if the store holds an object, 1 if not.",
  usage: "[-v] [--remote] <digest-or-key>",
  arguments: [
    ("digest-or-key", "A digest (or its first 8+ hex digits), or a key bound with 'put --key'.")
  ],
  options: [
    verboseOption,
    OptionSpec(
      names: ["--remote"], valueName: nil,
      help: "When the store does not hold it, ask its remotes (nothing is downloaded)."),
  ],
  discussion: """
    A key that is not bound is absent too, and so is anything in a store that does
    not exist yet (nothing is made). With --remote, an object the store does
    not hold is present when a remote holds it, and a key it lacks when a remote
    has a record of the key naming a blob that remote (or the store) holds; -v says
    where. Nothing is downloaded.
    """,
  keyLookup: { _ in .use },
  run: { invocation in
    try invocation.requirePositionals(["digest-or-key"])
    let text = invocation.positionals[0]
    let reference = try invocation.reference(text)
    guard let store = try invocation.openStoreIfPresent() else {
      if invocation.flag("--verbose") {
        Output.error(
          "trove: \(text): absent (no store exists at '\(try invocation.storeRoot)' yet)")
      }
      return ExitStatus.failure
    }
    var present = false
    var digest: BlobDigest?
    do {
      digest = try invocation.resolve(reference, in: store)
      present = try store.contains(digest!)
    } catch let error as TroveError where error.code == .notFound {}
    var holder: String?
    if !present, invocation.flag("--remote") {
      switch reference {
      case .key(let key): holder = store.remoteHolding(key: key)
      case .hex(let text):
        // A key first, as everywhere; then the digest 32 digits name.
        holder = store.remoteHolding(key: text) ?? digest.flatMap { store.remoteHolding($0) }
      default: holder = digest.flatMap { store.remoteHolding($0) }
      }
      present = holder != nil
    }
    if invocation.flag("--verbose") {
      let place = holder.map { " on remote '\($0)'" } ?? ""
      Output.error("trove: \(text): \(present ? "present" : "absent")\(place)")
    }
    return present ? ExitStatus.success : ExitStatus.failure
  })

let pathCommand = CommandSpec(
  name: "path",
  abstract: "Print the path of an object's file, for reading in place.",
  usage: "[--decompress] <digest-or-key>",
  arguments: [
    ("digest-or-key", "A digest (or its first 8+ hex digits), or a key bound with 'put --key'.")
  ],
  options: [
    OptionSpec(
      names: ["--decompress"], valueName: nil,
      help: "If the object is stored compressed, store it raw first (else: exit 69).")
  ],
  discussion: """
    The file is the store's own copy, read-only: read it, never write it. Zero
    copies; it can disappear when the object is removed. A compressed object has no
    such file: 'get' decompresses a copy, '--decompress' stores it raw.
    """,
  closedPipeIsSuccess: true,
  keyLookup: { _ in [.use, .readThrough] },
  run: { invocation in
    try invocation.requirePositionals(["digest-or-key"])
    let reference = try invocation.reference(invocation.positionals[0])
    guard let store = try invocation.openStoreIfPresent() else {
      throw try invocation.missWithoutStore(invocation.positionals[0])
    }
    // Exact, as `realpath` prints it: a program opens this path.
    let path = try store.path(
      for: try invocation.resolve(reference, in: store),
      decompressing: invocation.flag("--decompress"))
    Output.raw(path + "\n")
    return ExitStatus.success
  })

let removeCommand = CommandSpec(
  name: "rm",
  abstract: "Remove objects from the store.",
  usage: "[-v] <digest-or-key>...",
  arguments: [
    ("digest-or-key", "A digest (or its first 8+ hex digits), or a key bound with 'put --key'.")
  ],
  options: [verboseOption],
  discussion: """
    Files made from the objects earlier (clones, copies) are not touched. Removing
    an object by a key removes the object, and with it every key that names it;
    'trove keys rm' removes a key alone.
    """,
  store: .writes,
  run: { invocation in
    guard !invocation.positionals.isEmpty else {
      throw invocation.usageError("Missing expected argument '<digest-or-key>'")
    }
    let references = try invocation.positionals.map { (text) throws(UsageError) in
      try invocation.reference(text)
    }
    let store = try invocation.openStore()
    var status = ExitStatus.success
    var digests: [BlobDigest] = []
    for reference in references {
      do {
        digests.append(try invocation.resolve(reference, in: store))
      } catch {
        reportError(error)
        status = ExitStatus.failure
      }
    }
    // All of them at once, in parts: an index transaction and parallel
    // unlinks for thousands of objects, not one of each per object.
    for (digest, removed) in zip(digests, try store.remove(digests)) {
      if removed {
        if invocation.flag("--verbose") { Output.error("trove: removed \(digest)") }
      } else {
        Output.error("Error: no object \(digest) in store '\(store.root)'")
        status = ExitStatus.failure
      }
    }
    return status
  })

/// The fewest hex digits a digest prefix may have: `trove get 1f3a9c04`.
let minimumPrefix = 8

/// Whether `text` is all hex digits (either case).
func isHex(_ text: String) -> Bool {
  text.utf8.allSatisfy {
    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
      || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
      || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains($0)
  }
}

extension Invocation {
  /// The one object whose digest starts with `hex` (lowercase hex digits).
  /// - Throws: `.notFound` when none does, ``AmbiguousDigestPrefix`` when
  ///   several do.
  func digest(prefix hex: String, in store: Store) throws -> BlobDigest {
    let found = try store.digests(withPrefix: hex, limit: AmbiguousDigestPrefix.shown)
    guard found.count <= 1 else {
      throw AmbiguousDigestPrefix(prefix: hex, candidates: found, root: store.root)
    }
    guard let digest = found.first else {
      throw TroveError(
        .notFound, "no object whose digest starts with '\(hex)' in store '\(store.root)'",
        value: hex)
    }
    return digest
  }

  /// What bare hex digits name: the key bound with exactly that text if
  /// there is one (as a branch shadows a short SHA in git), else the
  /// digest (32 digits) or the object whose digest starts with them (8 to
  /// 31). A full digest costs no prefix query.
  /// - Throws: a ``UsageError`` (exit 64, with the usage line) for fewer
  ///   than 8 digits that are not a key either; as ``digest(prefix:in:)`` otherwise.
  ///
  /// Where a key the store lacks is read through its remotes
  /// (``CommandSpec/keyLookup``), so is one named by hex digits — when no
  /// object of the store is named by them.
  func digest(hex text: String, in store: Store) throws -> BlobDigest {
    if let bound = try boundDigest(text, in: store, readingThrough: false) { return bound }
    func keyThroughRemotes() throws -> BlobDigest? {
      guard command.keyLookup(self).contains(.readThrough) else { return nil }
      return try boundDigest(text, in: store)
    }
    if text.utf8.count == 32 {
      let digest = try BlobDigest(parsing: BlobDigest.prefix + text.lowercased())
      if try store.entry(for: digest) == nil, let bound = try keyThroughRemotes() { return bound }
      return digest
    }
    guard text.utf8.count >= minimumPrefix else {
      if let bound = try keyThroughRemotes() { return bound }
      // A usage error, with the usage line, as a too-short `xxh128:` prefix is.
      throw usageError(
        "no key '\(text)' in store '\(store.root)', and '\(text)' is too short for a digest prefix: give at least \(minimumPrefix) hex digits"
      )
    }
    do {
      return try digest(prefix: text.lowercased(), in: store)
    } catch let error as TroveError where error.code == .notFound {
      if let bound = try keyThroughRemotes() { return bound }
      throw error
    }
  }
}

/// A digest prefix that several objects start with: exit 64, the error
/// line, then one `hint:` line per candidate digest (as git lists an
/// ambiguous short SHA's candidates).
struct AmbiguousDigestPrefix: Error, CustomStringConvertible {
  /// At most this many candidates are looked up and listed.
  static let shown = 50

  var prefix: String
  var candidates: [BlobDigest]
  var root: String

  var description: String {
    let count = candidates.count >= Self.shown ? "\(Self.shown) or more" : "\(candidates.count)"
    return
      "digest prefix '\(prefix)' is ambiguous: \(count) objects in store '\(root)' start with it"
  }

  /// Prints the error line and the candidates on stderr.
  func report() {
    Output.error("Error: \(self)")
    for digest in candidates { Output.error("hint: \(digest)") }
  }
}

/// Prints `error` on stderr as `Error: …` (with an ambiguous prefix's
/// candidates), for commands that go on to their next argument.
func reportError(_ error: any Error) {
  if let ambiguous = error as? AmbiguousDigestPrefix {
    ambiguous.report()
  } else if let usage = error as? UsageError {
    Output.error("Error: \(usage.message)")
  } else if let error = error as? TroveError {
    Output.error("Error: \(error.withHint)")
  } else {
    Output.error("Error: \(error)")
  }
}
