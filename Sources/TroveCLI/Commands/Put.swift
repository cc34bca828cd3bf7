import Foundation
import Trove

let putCommand = CommandSpec(
  name: "put",
  abstract: "Store files (or standard input) and print their digests.",
  usage: "[--json] [-v] <file>...",
  arguments: [("file", "A file to store, or '-' for standard input.")],
  options: [jsonOption, verboseOption],
  discussion: """
    Prints 'DIGEST  NAME' per input, as xxhsum -H2 does. A file on the store's
    filesystem is cloned in (no data copied) where the filesystem can clone;
    others are read once. Content the store already holds is not stored again.
    Every input is tried; the exit status is that of the first failure.
    """,
  run: { invocation in
    guard !invocation.positionals.isEmpty else {
      throw invocation.usageError("Missing expected argument '<file>'")
    }
    let store = try invocation.openStore()
    let verbose = invocation.flag("--verbose")
    var status = ExitStatus.success
    var results: [PutRecord] = []
    for name in invocation.positionals {
      do throws(TroveError) {
        let result =
          name == "-"
          ? try store.put(reading: FileHandle.standardInput) : try store.put(file: name)
        if invocation.flag("--json") {
          results.append(PutRecord(name: name, result: result))
        } else {
          Output.line("\(result.digest)  \(name)")
        }
        if verbose {
          let how = result.isDuplicate ? "already stored" : "stored by \(result.method.rawValue)"
          Output.error("trove: \(name): \(Output.size(result.size)), \(how)")
        }
      } catch {
        Output.error("Error: \(error)")
        if status == ExitStatus.success { status = ExitStatus.of(error) }
      }
    }
    if invocation.flag("--json") { Output.json(results) }
    return status
  })

/// One line of `put --json`.
struct PutRecord: Encodable {
  var name: String
  var digest: String
  var size: Int64
  var duplicate: Bool
  var method: String

  init(name: String, result: PutResult) {
    self.name = name
    digest = result.digest.description
    size = result.size
    duplicate = result.isDuplicate
    method = result.method.rawValue
  }
}
