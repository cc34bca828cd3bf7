import Foundation
import Trove

/// `--format trove|xxhsum` of `hash`, `put` and `ls`.
let formatOption = OptionSpec(
  names: ["--format"], valueName: "format",
  help: "trove (xxh128:HEX  NAME; default) or xxhsum (HEX  NAME, which 'xxhsum -c' checks).")

extension Invocation {
  /// Whether `--format xxhsum` was asked (`trove`, the default, when not).
  /// `--format` and `--json` both choose the output: given together they
  /// are a usage error.
  func xxhsumFormat() throws(UsageError) -> Bool {
    if let format = value("--format"), flag("--json") {
      throw usageError("--json and --format \(format) both choose the output: give one")
    }
    switch value("--format") ?? "trove" {
    case "trove": return false
    case "xxhsum": return true
    case let other: throw usageError("invalid format '\(other)': expected trove or xxhsum")
    }
  }
}

/// One line naming `digest` for `name`: `xxh128:HEX  NAME`, or `HEX  NAME`
/// as `xxhsum -H2` prints it.
func digestLine(_ digest: BlobDigest, _ name: String, xxhsum: Bool) -> String {
  (xxhsum ? digest.hex : digest.description) + "  " + name
}

let hashCommand = CommandSpec(
  name: "hash",
  abstract: "Print the digests of files (or standard input) without storing them.",
  usage: "[--format <format>] <file>...",
  arguments: [("file", "A file to hash, or '-' for standard input.")],
  options: [formatOption],
  discussion: """
    The digest 'put' would give each input, computed as 'put' computes it
    (XXH3-128, 1 MiB reads), with no store opened. With '--format xxhsum' the
    lines are those 'xxhsum -H2' prints, so 'xxhsum -c' checks them.
    """,
  run: { invocation in
    guard !invocation.positionals.isEmpty else {
      throw invocation.usageError("missing <file>: name at least one file, or '-'")
    }
    if invocation.positionals.filter({ $0 == "-" }).count > 1 {
      throw invocation.usageError("standard input can be read once: '-' is given more than once")
    }
    let xxhsum = try invocation.xxhsumFormat()
    var status = ExitStatus.success
    for name in invocation.positionals {
      do throws(TroveError) {
        let digest: BlobDigest
        if name == "-" {
          var hasher = XXH3Hasher()
          while true {
            let chunk = FileHandle.standardInput.readData(ofLength: 1 << 20)
            if chunk.isEmpty { break }
            hasher.update(chunk)
          }
          digest = hasher.finalize()
        } else {
          digest = try XXH3Hasher.digest(ofFile: name)
        }
        Output.line(digestLine(digest, name, xxhsum: xxhsum))
      } catch {
        Output.error("Error: \(error)")
        if status == ExitStatus.success {
          let missing = error.errno == ENOENT
          status = missing ? ExitStatus.noInput : ExitStatus.of(error)
        }
      }
    }
    return status
  })
