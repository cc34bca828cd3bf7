import Foundation
import Trove

let getCommand = CommandSpec(
  name: "get",
  abstract: "Write an object to a file (a clone where possible) or to stdout.",
  usage:
    "[--mode <mode>] [--force] [--sync] [--verify] [--json] [-v] <digest-or-key> <destination>",
  arguments: [
    (
      "digest-or-key",
      "The object's digest ('xxh128:' and 32 hex digits), or a key bound with 'put --key'."
    ),
    ("destination", "The file to create, or '-' for standard output."),
  ],
  options: [
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
    """,
  run: { invocation in
    try invocation.requirePositionals(["digest-or-key", "destination"])
    let reference = try invocation.reference(invocation.positionals[0])
    let destination = invocation.positionals[1]
    let modeText = invocation.value("--mode") ?? "auto"
    guard let mode = LinkMode(rawValue: modeText) else {
      throw invocation.usageError(
        "invalid mode '\(modeText)': expected auto, clone, copy or hardlink")
    }
    let store = try invocation.openStore()
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
