import Foundation
import Trove

let getCommand = CommandSpec(
  name: "get",
  abstract: "Write objects to files (clones where possible), or one to stdout.",
  usage:
    "[--mode <mode>] [--force] [--sync] [--verify] [--json] [-v] (<digest-or-key> <destination> | <digest-or-key>... -C <dir> | --from <file>)",
  arguments: [
    (
      "digest-or-key",
      "The object's digest ('xxh128:' and 32 hex digits), or a key bound with 'put --key'."
    ),
    ("destination", "The file to create, or '-' for standard output."),
  ],
  options: [
    OptionSpec(
      names: ["-C", "--directory"], valueName: "dir",
      help: "Write each object named into <dir>, named after its key, else its digest's hex."),
    OptionSpec(
      names: ["--from"], valueName: "file",
      help: "Read 'DIGEST-OR-KEY DESTINATION' lines from <file> ('-': stdin); '#' comments."),
    OptionSpec(
      names: ["--mode"], valueName: "mode",
      help: "auto (clone, else copy; default), clone (fail if impossible), copy, hardlink."),
    OptionSpec(names: ["-f", "--force"], valueName: nil, help: "Replace an existing destination."),
    OptionSpec(
      names: ["--sync"], valueName: nil,
      help: "fsync the destination before it appears (whole after a crash too)."),
    OptionSpec(
      names: ["--verify"], valueName: nil,
      help: "Hash a clone or hard link before it appears (copies are always checked)."),
    jsonOption, verboseOption,
  ],
  discussion: """
    The destination appears whole or not at all. In auto mode a clone is tried
    first; when the filesystems cannot clone (another filesystem, ext4, NFS), the
    object is copied and a warning says why. 'hardlink' makes the destination
    the store's own read-only file: never modify it (see Docs/CLI.md).
    A clone or hard link is the object as it is on disk: --verify reads it
    back first. An object found corrupt is moved to the store's quarantine/
    and the command fails (65); with '-', objects up to 16 MiB are checked
    before any byte is written, larger ones as they stream.
    Many objects at once (-C, --from): every name is resolved and every
    destination checked first, and nothing is written if one is unknown
    (exit 1), exists (73, unless --force) or is named twice; then each file
    is made. One that fails is said on stderr and the rest are still made
    (those made stay); the exit status is the first failure's.
    """,
  keyLookup: { _ in [.use, .readThrough] },
  run: { invocation in
    if invocation.value("--directory") != nil || invocation.value("--from") != nil {
      return try runGetMany(invocation)
    }
    try invocation.requirePositionals(["digest-or-key", "destination"])
    let reference = try invocation.reference(invocation.positionals[0])
    let destination = invocation.positionals[1]
    let modeText = invocation.value("--mode") ?? "auto"
    guard let mode = LinkMode(rawValue: modeText) else {
      throw invocation.usageError(
        "invalid mode '\(modeText)': expected auto, clone, copy or hardlink")
    }
    guard let store = try invocation.openStoreIfPresent() else {
      throw try invocation.missWithoutStore(invocation.positionals[0])
    }
    let digest = try invocation.resolve(reference, in: store)
    if destination == "-" {
      try store.write(digest, to: FileHandle.standardOutput)
      return ExitStatus.success
    }
    let done = try store.materialize(
      digest, at: destination, mode: mode, replacing: invocation.flag("--force"),
      durable: invocation.flag("--sync"), verify: invocation.flag("--verify"))
    if invocation.flag("--json") {
      Output.json(GetRecord(done))
    }
    if let reason = done.fallbackReason {
      Output.warning(
        "copied '\(destination)' (\(done.method.rawValue)), not cloned: \(reason)")
    } else if invocation.flag("--verbose") {
      Output.error(
        "trove: \(done.method.rawValue) \(digest) -> '\(destination)' (\(Output.size(done.size)))")
    }
    return ExitStatus.success
  })

/// `get --json`.
struct GetRecord: Encodable {
  var digest: String
  var destination: String
  var method: String
  var size: Int64
  @Nullable var fallbackReason: String?

  init(_ m: Materialization) {
    digest = m.digest.description
    destination = m.destination
    method = m.method.rawValue
    size = m.size
    fallbackReason = m.fallbackReason
  }
}

/// `get D1 D2 … -C DIR` and `get --from FILE`: many objects, one store.
private func runGetMany(_ invocation: Invocation) throws -> Int32 {
  let modeText = invocation.value("--mode") ?? "auto"
  guard let mode = LinkMode(rawValue: modeText) else {
    throw invocation.usageError(
      "invalid mode '\(modeText)': expected auto, clone, copy or hardlink")
  }
  // What to make: (reference, its text, the destination or nil for a name
  // from the key or digest in `directory`).
  var wanted: [(reference: ObjectReference, destination: String?)] = []
  var directory: String?
  if let list = invocation.value("--from") {
    if invocation.value("--directory") != nil {
      throw invocation.usageError("--from names each destination: -C does not go with it")
    }
    if let extra = invocation.positionals.first {
      throw invocation.usageError("Unexpected argument '\(extra)': --from names every object")
    }
    wanted = try readGetList(list, invocation: invocation)
  } else if let folder = invocation.value("--directory") {
    guard !invocation.positionals.isEmpty else {
      throw invocation.usageError("Missing expected argument '<digest-or-key>'")
    }
    directory = folder
    for text in invocation.positionals {
      wanted.append((try invocation.reference(text), nil))
    }
  }
  guard let store = try invocation.openStoreIfPresent() else {
    // Every name is unknown: nothing is written (exit 1), as for one.
    throw try invocation.missWithoutStore(nil)
  }
  var requests: [MaterializeRequest] = []
  for item in wanted {
    let digest = try invocation.resolve(item.reference, in: store)
    var destination = item.destination ?? ""
    if let directory {
      var name = digest.hex
      if case .key(let key) = item.reference { name = fileName(fromKey: key) ?? name }
      destination = (directory.hasSuffix("/") ? directory : directory + "/") + name
    }
    requests.append(MaterializeRequest(digest, at: destination))
  }
  let progress = ProgressLine.start(
    "get", unit: .items, total: Int64(requests.count), for: invocation)
  let results = try store.materialize(
    requests, mode: mode, replacing: invocation.flag("--force"),
    durable: invocation.flag("--sync"), verify: invocation.flag("--verify"),
    onProgress: progress?.handler)
  progress?.finish()
  var status = ExitStatus.success
  var records: [GetRecord] = []
  for (request, result) in zip(requests, results) {
    switch result {
    case .success(let done):
      records.append(GetRecord(done))
      if let reason = done.fallbackReason {
        Output.warning(
          "copied '\(done.destination)' (\(done.method.rawValue)), not cloned: \(reason)")
      } else if invocation.flag("--verbose") {
        Output.error(
          "trove: \(done.method.rawValue) \(done.digest) -> '\(done.destination)' (\(Output.size(done.size)))"
        )
      }
    case .failure(let error):
      // Of many files, say which one failed: a failure to read the object
      // names the object's file, not the destination.
      let named = error.path == request.destination
      Output.error(
        "Error: "
          + (named ? error.withHint : "cannot write '\(request.destination)': \(error.withHint)"))
      if status == ExitStatus.success { status = ExitStatus.of(error) }
    }
  }
  if invocation.flag("--json") { Output.json(records) }
  return status
}

/// The file name `get -C` gives the object of `key`: its last path
/// component (of a URL, of the path, without query or fragment), or nil
/// when that is no usable name (empty, `.`, `..`), and the digest's hex
/// is used.
func fileName(fromKey key: String) -> String? {
  var path = Substring(key)
  if let scheme = path.range(of: "://") {
    path = path[scheme.upperBound...]
    path = path[(path.firstIndex(of: "/") ?? path.endIndex)...]  // past the host
    if let end = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = path[..<end] }
  }
  guard let last = path.split(separator: "/").last,
    last != ".", last != "..", !last.contains("\u{0}")
  else { return nil }
  return String(last)
}

/// The bytes of a list file (`get --from`, `fetch -i`), or of standard
/// input for `-`.
/// - Throws: ``unreadable(_:_:)``'s error.
func readList(_ path: String) throws -> Data {
  if path == "-" { return FileHandle.standardInput.readDataToEndOfFile() }
  do {
    return try Data(contentsOf: URL(fileURLWithPath: path))
  } catch {
    throw unreadable(path, error)
  }
}

/// `cannot read 'PATH': CAUSE` for a file Foundation could not read, the
/// cause in the C library's words: exit 66 for a file that is not there
/// or not a file, 77 for one this user may not read, else 74.
func unreadable(_ path: String, _ error: any Error) -> TroveError {
  var isFolder: ObjCBool = false
  let number: Int32
  if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) && isFolder.boolValue {
    number = EISDIR
  } else if let posix = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError,
    posix.domain == NSPOSIXErrorDomain
  {
    number = Int32(posix.code)
  } else {
    switch (error as? CocoaError)?.code {
    case .fileReadNoSuchFile?, .fileNoSuchFile?: number = ENOENT
    case .fileReadNoPermission?: number = EACCES
    default: number = EIO
    }
  }
  let code: TroveError.Code =
    switch number {
    case ENOENT, ENOTDIR: .sourceMissing
    case EISDIR: .sourceNotFile
    case EACCES, EPERM: .permissionDenied
    default: .ioError
    }
  return TroveError(code, "cannot read '\(path)': \(String(cString: strerror(number)))", path: path)
}

/// `get --from FILE`: `DIGEST-OR-KEY DESTINATION` a line (the destination
/// is the rest of the line, trimmed); blank lines and `#` comments
/// skipped. A malformed line is a usage error naming FILE:LINE.
private func readGetList(_ path: String, invocation: Invocation) throws
  -> [(reference: ObjectReference, destination: String?)]
{
  let data = try readList(path)
  let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
  var items: [(reference: ObjectReference, destination: String?)] = []
  // "\r\n" is one Character: a CRLF list splits on it too.
  for (number, line) in String(decoding: data, as: UTF8.self).split(
    omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }
  ).enumerated() {
    let text = line.drop(while: blank)
    guard let first = text.first, first != "#" else { continue }
    let place = "\(path == "-" ? "<stdin>" : path):\(number + 1)"
    let name = text.prefix(while: { !blank($0) })
    var rest = text.dropFirst(name.count).drop(while: blank)
    while let last = rest.last, blank(last) { rest = rest.dropLast() }
    guard !rest.isEmpty else {
      throw invocation.usageError(
        "\(place): expected 'DIGEST-OR-KEY DESTINATION', got '\(line)'")
    }
    guard rest != "-" else {
      throw invocation.usageError(
        "\(place): '-' (standard output) cannot be one of many destinations")
    }
    let reference: ObjectReference
    do {
      reference = try invocation.reference(String(name))
    } catch {
      throw invocation.usageError("\(place): \(error.message)")
    }
    items.append((reference, String(rest)))
  }
  guard !items.isEmpty else {
    throw invocation.usageError("\(path == "-" ? "<stdin>" : path): names no object")
  }
  return items
}
