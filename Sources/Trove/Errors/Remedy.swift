extension TroveError {
  /// What would fix a failure, in the library's terms: the message says what
  /// went wrong and why, and a program turns the remedy into advice in its
  /// own words (the `trove` command names its commands and options).
  public enum Remedy: Sendable, Hashable {
    /// Verify the store with repair (`verify(repair: true)`): it
    /// quarantines corrupt objects and folders and rebuilds a damaged
    /// index.
    case repairStore
    /// Rebuild the index from the objects (``Store/rebuildIndex()``).
    case rebuildIndex
    /// Rebuild the index (``Store/rebuildIndex()``) from a process that
    /// may write the store: this one opened it read-only.
    case rebuildIndexWhereWritable
    /// Open the store once where it may be written (its volume mounted
    /// read-write, as a user who may write it), or use another store.
    case openWritable
    /// Name the store's folder (``StoreConfiguration/root``): there is no
    /// default location.
    case chooseStore
    /// Keep a remote's secret in an environment variable and name that
    /// variable (``RemoteSpec/authEnvironment``), never in its URL.
    case credentialVariable
    /// Write the setting `key` again (``Store/setPolicy(_:to:)``), or all
    /// settings (``Store/resetPolicy()``); `key` is nil when the file as a
    /// whole is damaged.
    case repairSettings(key: CachePolicy.Key?)
    /// Raise the store's maximum object size
    /// (``CachePolicy/maximumObjectSize``).
    case raiseMaximumObjectSize
    /// The length the caller expected does not match the input: check
    /// the expected size given.
    case checkExpectedSize
    /// Remove the remote named `name` before adding one of that name.
    case removeRemoteFirst(name: String)
    /// Lend the remote named `name` this user's credentials
    /// (``Store/lendCredentials(toRemote:authEnvironment:)``): it refused a
    /// request sent without any, and this user lends it none.
    case lendCredentials(name: String)
    /// See the remote's state (``Store/remoteStatus()``): its circuit
    /// breaker skips it after failures until it reopens.
    case remoteStatus(name: String)
    /// List the configured remotes (``Store/remotes()``).
    case listRemotes
    /// Fetch without ``FetchRequest/Mode/offline``: the network is needed.
    case allowNetwork
    /// Keep the store on the same filesystem as `path` (for hard links
    /// and clones), or get in another mode.
    case sameFilesystem(path: String)
    /// Get in another mode (clone or copy): hard links are refused here.
    case anotherLinkMode
    /// Free space on the store's volume, set a budget
    /// (``CachePolicy/budget``), or lower the minimum free space.
    case freeSpace
    /// Remove the corrupt object and store its bytes again.
    case removeAndStoreAgain
    /// Store the bytes again: the corrupt object was moved aside.
    case storeAgain
  }
}
