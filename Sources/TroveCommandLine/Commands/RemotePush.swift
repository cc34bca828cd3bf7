import Foundation
import Trove

#if canImport(Glibc)
  import Glibc
#endif

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
      records.append(PushRecord(digest: digest, remote: item.remote, error: error.withHint))
      Output.error("Error: \(error.withHint)")
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
