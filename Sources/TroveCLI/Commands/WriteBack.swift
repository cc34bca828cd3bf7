import Foundation
import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// After a put or fetch stored objects: sends them to the store's
/// writable remotes as each remote's `--write` says (``RemoteWrite``) —
/// `sync` now, `async` by a detached `trove remote push --if-idle` that
/// outlives this process, `off` not at all. Never fails the command: a
/// remote that fails is a warning, and the objects stay queued.
func writeBack(_ store: Store, _ invocation: Invocation) {
  guard let remotes = try? store.remotes().filter({ !$0.readOnly }), !remotes.isEmpty else {
    return
  }
  var background = false
  for remote in remotes {
    switch remote.write ?? .async {
    case .off: continue
    case .async: background = true
    case .sync:
      do {
        // Never behind another process's drain: that one sends these too.
        try store.uploadQueued(to: remote.name, ifIdle: true) { item in
          // A remote its breaker skips was warned about when it failed.
          if let error = item.error, !item.skippedByBreaker {
            Output.warning("not uploaded: \(error)")
          }
        }
      } catch {
        Output.warning("not uploaded to remote '\(remote.name)': \(error)")
      }
    }
  }
  guard background else { return }
  // A process of its own, with /dev/null for its standard files and
  // nothing else of this one's open: a caller reading this command's
  // output to its end is not kept waiting for the upload.
  if let errno = BackgroundProcess.start(
    "/proc/self/exe", ["--store", store.root, "--quiet", "remote", "push", "--if-idle"])
  {
    Output.warning(
      "cannot start the background upload ('trove remote push' sends the queue): \(String(cString: strerror(errno)))"
    )
  }
}

/// `remote push` without digests: sends the upload queue (what each
/// writable remote, or `--remote`, is not known to hold: stored since it
/// was added, or with `--all` everything). Exit 0 when every object went
/// up (or was there, or is too large for the remote), else the first
/// failure's status.
func pushQueue(_ invocation: Invocation) throws -> Int32 {
  let store = try invocation.openStore()
  if invocation.value("--remote") == nil, try store.remotes().allSatisfy(\.readOnly) {
    throw TroveError(
      .notFound,
      "store '\(store.root)' has no writable remote to push to (see 'trove remote add')")
  }
  let json = invocation.flag("--json")
  var status = ExitStatus.success
  var records: [PushRecord] = []
  // Typed by a user, the push asks each remote even while its breaker is
  // open; the background push a put starts (--if-idle) does not.
  try store.uploadQueued(
    to: invocation.value("--remote"), everything: invocation.flag("--all"),
    ifIdle: invocation.flag("--if-idle"), probing: !invocation.flag("--if-idle")
  ) { item in
    let digest = item.digest?.description
    if let error = item.error {
      records.append(PushRecord(digest: digest, remote: item.remote, error: error.description))
      Output.error("Error: \(error)")
      if status == ExitStatus.success { status = ExitStatus.of(error) }
      return
    }
    let outcome = item.outcome ?? .present
    records.append(PushRecord(digest: digest, remote: item.remote, outcome: outcome.rawValue))
    guard !json, let digest else { return }
    switch outcome {
    case .uploaded: Output.line("\(digest)  uploaded to '\(item.remote)'")
    case .present: Output.line("\(digest)  already on '\(item.remote)'")
    case .tooLarge:
      let limit = (try? store.remote(named: item.remote).sizeLimit).flatMap { $0 }
      Output.line(
        "\(digest)  skipped: larger than the max-object-size of '\(item.remote)'"
          + (limit.map { " (\(CachePolicy.Quantities.formatSizeSetting($0)))" } ?? ""))
    }
  }
  if json { Output.json(records) }
  return status
}
