/// When the objects a put or fetch stores are uploaded to a writable
/// remote (`remote add --write`).
public enum RemoteWrite: String, Sendable, Hashable, Codable, CaseIterable {
  /// In the background, after the command has answered: the `trove`
  /// command starts a detached `trove remote push --queued` (one at a time
  /// per store), so a put costs no time for the upload.
  case async
  /// Before the command returns, after it has printed its answer: the
  /// upload's time is the command's.
  case sync
  /// Only by `trove remote push`.
  case off
}
