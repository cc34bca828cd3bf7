import Foundation
import Trove

#if canImport(Glibc)
  import Glibc
#endif

let cleanCommand = CommandSpec(
  name: "clean",
  abstract: "Empty the store (as ccache -C, uv cache clean): every object, or every unpinned one.",
  usage: "[--keep-pinned] [--dry-run] [--yes]",
  arguments: [],
  options: [
    OptionSpec(names: ["--keep-pinned"], valueName: nil, help: "Keep pinned objects."),
    OptionSpec(
      names: ["--dry-run"], valueName: nil,
      help: "Say what would go and what it frees; remove nothing."),
    OptionSpec(names: ["-y", "--yes"], valueName: nil, help: "Do not ask first."),
  ],
  discussion: """
    Removes every object — their keys and pins go with them — or, with
    --keep-pinned, every object no pin holds; then what dead writers left in
    tmp/. It asks first on a terminal; elsewhere it needs --yes (or --dry-run).
    Unpinned objects go as a sweep with a budget of 0 removes them (in batches,
    each re-checked as it goes), pinned ones one by one as 'trove rm' does.
    The store stays, empty, with its settings.
    """,
  store: .writes,
  run: { invocation in try clean(invocation) })

/// `trove clean`.
private func clean(_ invocation: Invocation) throws -> Int32 {
  try invocation.requirePositionals([])
  let store = try invocation.openStore()
  let now = Date()
  let pinned = Set(try store.pins().filter { $0.isActive(at: now) }.map(\.digest))
  let kept = invocation.flag("--keep-pinned") ? pinned : []
  let doomed = try store.entries().filter { !kept.contains($0.digest) }
  let bytes = doomed.reduce(Int64(0)) { $0 + $1.allocatedBytes }
  let what = objects(doomed.count, bytes)
  if invocation.flag("--dry-run") {
    Output.line("would remove \(what) from '\(store.root)'")
    return ExitStatus.success
  }
  if !invocation.flag("--yes") {
    guard isatty(0) == 1 && isatty(2) == 1 else {
      throw invocation.usageError(
        "clean removes \(what) from '\(store.root)': pass --yes to go ahead, or --dry-run")
    }
    FileHandle.standardError.write(Data("remove \(what) from '\(store.root)'? [y/N] ".utf8))
    let answer = (readLine() ?? "").trimmingCharacters(in: .whitespaces).lowercased()
    guard answer == "y" || answer == "yes" else {
      Output.error("trove: nothing removed")
      return ExitStatus.failure
    }
  }
  let progress = ProgressLine.start("clean", unit: .bytes, for: invocation)
  let (removed, freed) = try empty(store, keeping: kept, onProgress: progress?.handler)
  progress?.finish()
  Output.line("removed \(objects(removed, freed)) from '\(store.root)'")
  return ExitStatus.success
}

/// `1 object (4.0 KiB)`, `3 objects (12.0 KiB)`.
private func objects(_ count: Int, _ bytes: Int64) -> String {
  "\(count) \(count == 1 ? "object" : "objects") (\(Output.size(bytes)))"
}

/// Removes every object of `store` but those in `kept`: the unpinned in a
/// sweep's batches (it leaves the pinned), the rest one by one as `rm`
/// does; a store whose settings are damaged cannot sweep, so then all go
/// one by one. Returns how many went and the bytes they took.
private func empty(
  _ store: Store, keeping kept: Set<BlobDigest>, onProgress: ProgressHandler?
) throws -> (Int, Int64) {
  var swept = (0, Int64(0))
  let sweep: Result<SweepReport, TroveError> = Result { () throws(TroveError) in
    try store.sweep(SweepOptions(budget: 0, maxAge: nil), onProgress: onProgress)
  }
  switch sweep {
  case .success(let report): swept = (report.removedEntries, report.removedBytes)
  // Damaged settings: not swept; every object goes one by one below.
  case .failure(let error) where error.code == .invalidConfig: break
  case .failure(let error): throw error
  }
  let left = try store.entries().filter { !kept.contains($0.digest) }
  let gone = try left.filter { try store.remove($0.digest) }
  return (swept.0 + gone.count, swept.1 + gone.reduce(Int64(0)) { $0 + $1.allocatedBytes })
}
