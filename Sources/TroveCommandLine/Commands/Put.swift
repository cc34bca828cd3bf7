import Foundation
import Trove

let putCommand = CommandSpec(
  name: "put",
  abstract: "Store files (or standard input) and print their digests.",
  usage:
    "[--optional] [--key <key>] [--expect-size <n>] [--format <format>] [--json] [-v] <file>...",
  arguments: [("file", "A file to store, or '-' for standard input.")],
  options: [
    OptionSpec(
      names: ["--optional"], valueName: nil,
      help: "Skip the put (exit 75) when the volume is below the store's min-free."),
    OptionSpec(
      names: ["--key"], valueName: "key",
      help: "Bind a name (a URL, a package id) to the digest; one file only."),
    expectSizeOption, formatOption, jsonOption, verboseOption,
  ],
  discussion: """
    Prints 'DIGEST  NAME' per input, as xxhsum -H2 does. A file on the store's
    filesystem is cloned in (no data copied) where the filesystem can clone;
    others are read once. Content the store already holds is not stored again.
    Every input is tried; the exit status is that of the first failure. An
    input longer than the store's max-object-size, or than --expect-size, is
    read no further than that and stored not at all (exit 65).
    """,
  store: .creates,
  run: { invocation in
    guard !invocation.positionals.isEmpty else {
      throw invocation.usageError("Missing expected argument '<file>'")
    }
    let key = invocation.value("--key")
    if key == "" {
      throw invocation.usageError("invalid --key '': a key is not empty")
    }
    if key != nil && invocation.positionals.count != 1 {
      throw invocation.usageError("--key names one file; \(invocation.positionals.count) given")
    }
    let expectedSize = try invocation.size("--expect-size")
    if expectedSize != nil && invocation.positionals.count != 1 {
      throw invocation.usageError(
        "--expect-size gives one file's length; \(invocation.positionals.count) files given")
    }
    let readsOfInput = invocation.positionals.filter { $0 == "-" }.count
    if readsOfInput > 1 {
      throw invocation.usageError(
        "standard input can be read once: '-' is given \(readsOfInput) times")
    }
    let xxhsum = try invocation.xxhsumFormat()
    let priority: PutPriority = invocation.flag("--optional") ? .opportunistic : .important
    let store = try invocation.openStore()
    let verbose = invocation.flag("--verbose")
    var status = ExitStatus.success
    var results: [PutRecord] = []
    let count = invocation.positionals.count
    func show(_ name: String, _ outcome: Result<PutResult, TroveError>) {
      switch outcome {
      case .success(let result):
        if invocation.flag("--json") {
          results.append(
            PutRecord(name: name, result: result, entry: try? store.entry(for: result.digest)))
        } else {
          Output.line(digestLine(result.digest, name, xxhsum: xxhsum))
        }
        if verbose {
          let how = result.isDuplicate ? "already stored" : "stored by \(result.method.rawValue)"
          Output.error("trove: \(name): \(Output.size(result.size)), \(how)")
          for sweep in result.sweeps {
            Output.error("trove: \(name): \(describe(sweep.reason)): \(sweepSummary(sweep))")
          }
        }
        if result.exceedsBudget {
          let budget =
            (try? store.policy().budget).flatMap { $0 }.map {
              CachePolicy.Quantities.formatSizeSetting($0)
            }
            ?? "?"
          Output.warning(
            "\(name) (\(Output.size(result.size))) alone exceeds the store's \(budget) budget; it is stored, and the rest of the store was trimmed to its low-water mark"
          )
        }
      case .failure(let error):
        Output.error("Error: \(error.withHint)")
        if status == ExitStatus.success { status = ExitStatus.of(error) }
        if invocation.flag("--json") { results.append(PutRecord(name: name, error: error)) }
      }
    }
    if count > 1 && readsOfInput == 0 {
      // Many files: one group commit per batch; each line is printed once
      // its object is durable and indexed.
      // One progress line, naming the file being read: `NAME (3/20)`.
      let names = invocation.positionals
      let progress = ProgressLine.start("put", unit: .bytes, for: invocation)
      defer { progress?.finish() }
      _ = try store.put(
        files: names, priority: priority,
        onProgress: { index, report in
          let name = names[index].split(separator: "/").last ?? ""
          progress?.update(report, label: "put \(name) (\(index + 1)/\(count))")
        }
      ) { index, outcome in show(names[index], outcome) }
      progress?.finish()
    } else {
      for (number, name) in invocation.positionals.enumerated() {
        let label =
          (name == "-" ? "put stdin" : "put \(name.split(separator: "/").last ?? "")")
          + (count > 1 ? " (\(number + 1)/\(count))" : "")
        let progress = ProgressLine.start(label, unit: .bytes, for: invocation)
        defer { progress?.finish() }
        let outcome: Result<PutResult, TroveError>
        do throws(TroveError) {
          outcome = .success(
            name == "-"
              ? try store.put(
                reading: FileHandle.standardInput, key: key, expectedSize: expectedSize,
                priority: priority, onProgress: progress?.handler)
              : try store.put(
                file: name, key: key, expectedSize: expectedSize, priority: priority,
                onProgress: progress?.handler))
        } catch {
          outcome = .failure(error)
        }
        progress?.finish()
        show(name, outcome)
      }
    }
    if invocation.flag("--json") { Output.json(results) }
    return status
  })

/// One input of `put --json`: what was stored, or why not.
struct PutRecord: Encodable {
  var name: String
  @Nullable var digest: String? = nil
  @Nullable var size: Int64? = nil
  @Nullable var duplicate: Bool? = nil
  /// How the bytes came in: clone, copy, stream or existing.
  @Nullable var ingest: String? = nil
  /// The object's form in the store: raw or zstd.
  @Nullable var stored: String? = nil
  /// The object file's length (the frame's, when zstd).
  @Nullable var storedBytes: Int64? = nil
  /// Why the input was not stored (the command then exits non-zero).
  @Nullable var error: String? = nil

  init(name: String, result: PutResult, entry: StoreEntry?) {
    self.name = name
    digest = result.digest.description
    size = result.size
    duplicate = result.isDuplicate
    ingest = result.method.rawValue
    stored = entry.map { $0.isCompressed ? "zstd" : "raw" }
    storedBytes = entry?.storedBytes
    error = nil
  }

  init(name: String, error: TroveError) {
    self.name = name
    self.error = error.withHint
  }
}
