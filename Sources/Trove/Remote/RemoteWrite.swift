/// When the objects a put or fetch stores are uploaded to a writable
/// remote (`remote add --write`); the store's write-back carries it out.
public enum RemoteWrite: String, Sendable, Hashable, Codable, CaseIterable {
  /// By a drain of the upload queue that the put or fetch starts and does
  /// not wait for (see ``StoreConfiguration/startsBackgroundUpload``), so a
  /// put costs no time for the upload.
  case async
  /// Before the put or fetch returns: the upload's time is the call's.
  case sync
  /// Only by an explicit push (``Store/uploadQueued(to:everything:ifIdle:probing:onEach:)``).
  case off
}
