/// A second lock beside SQLite's write lock (`removal.lock` in the store's
/// root, an open-file-description lock on the whole file): every write
/// transaction holds it shared from `BEGIN IMMEDIATE` to its end, and a
/// removal holds it exclusively while it unlinks files.
///
/// SQLite's write lock alone keeps other writers out while a removal's
/// unlinks run, as long as the removal's transaction lasts. But SQLite
/// rolls a transaction back by itself when a statement meets an I/O
/// error, a full volume or no memory, and gives up the write lock there
/// and then. A removal that runs statements while its files are being
/// unlinked (``ObjectTable``'s removals in parts do, to overlap the two)
/// would then let another process in mid-unlink — one that could call a
/// removal off and record as present a file about to go. The gate holds
/// that process at the door until the unlinks are over: it has the write
/// lock, but waits for the gate before it looks at anything.
///
/// Without contention in normal work (whoever holds the write lock is the
/// only one at the gate), so taking it costs two `fcntl` calls per write
/// transaction. Where the filesystem has no such locks, a store has no
/// gate and removals never run statements during their unlinks.
final class WriteGate: Sendable {
  let file: FileDescriptor
  let path: String

  /// A gate on `file` (open read-write), if the filesystem keeps its
  /// locks: nil when a lock cannot be taken (ENOLCK, EINVAL…).
  init?(file: FileDescriptor, path: String) {
    guard (try? file.lockRange(exclusive: false)) != nil else { return nil }
    file.unlockRange()
    self.file = file
    self.path = path
  }

  deinit { file.close() }

  /// Takes the gate shared (a write transaction's entry), waiting for an
  /// exclusive holder — a removal whose transaction SQLite ended during
  /// its unlinks — as long as SQLite waits for a busy write lock.
  func enter() throws(TroveError) {
    try take(exclusive: false)
  }

  /// Turns this transaction's shared hold into an exclusive one, before
  /// a removal's unlinks. Anyone else holding it shared lost their
  /// transaction already; this waits for them to finish.
  func holdExclusively() throws(TroveError) {
    try take(exclusive: true)
  }

  /// Turns an exclusive hold back into a shared one (never waits).
  func holdShared() {
    _ = try? file.lockRange(exclusive: false)
  }

  /// Lets go of the gate (a transaction's end).
  func leave() {
    file.unlockRange()
  }

  /// How long a write waits at the gate, as SQLite waits for its lock.
  static let patience: Duration = .seconds(30)

  private func take(exclusive: Bool) throws(TroveError) {
    let clock = ContinuousClock()
    let deadline = clock.now + Self.patience
    var attempt: UInt32 = 0
    while true {
      do throws(SystemCallError) {
        if try file.lockRange(exclusive: exclusive) { return }
      } catch {
        throw TroveError.system(error, "lock", path: path)
      }
      guard clock.now < deadline else {
        throw TroveError(
          .busy,
          "index lock '\(path)' is held by another process's removal for more than \(Self.patience)",
          path: path)
      }
      attempt += 1
      Sys.sleep(microseconds: min(attempt, 20) * 500)
    }
  }
}
