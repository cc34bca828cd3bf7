/// What the puts of one group of a multi-file put
/// (``Store/put(files:priority:onProgress:onResult:)``) share, so that a
/// group of small files pays once for what does not change from file to
/// file: the store's settings, read once (where a put alone reads
/// `config.json`'s status several times), and the free-space check — one
/// `statvfs` admits the group's files for as long as each still fits in
/// what it measured after what the group admitted before it.
///
/// The rule each file is admitted by is ``Store/admit(size:priority:input:)``'s
/// (room for its size above `min-free`, or the rules of storage pressure);
/// only the measurement is shared. Each file admitted from a measurement is
/// charged its size rounded up to whole 4 KiB blocks plus one block (its
/// inode and its name), more than it takes on the filesystems stores live
/// on; a file that does not fit in what is left is admitted by a new
/// measurement and, below the threshold, by the sweep and evictions of a
/// put alone. A batch lasts for one group (up to 512 objects or 64 MiB) and
/// at most ``lifetime``: another process's writes meanwhile are seen at the
/// next measurement, as they are seen by a put alone at its own, and a
/// volume that fills anyway is met by the writer's evictions on ENOSPC.
final class PutBatch {
  /// How long one reading of the settings and one measurement serve.
  static let lifetime = Duration.seconds(1)

  private let store: Store
  /// The store's settings when the batch began.
  let settings: StoreSettings
  private let clock = ContinuousClock()
  private let start: ContinuousClock.Instant
  /// The last measurement that found room without evicting, and the bytes
  /// charged against it since.
  private var measured: FreeSpace?
  private var charged: Int64 = 0

  /// Reads the store's settings.
  ///
  /// - Throws: `.invalidConfig` when they cannot be used.
  init(store: Store) throws(TroveError) {
    self.store = store
    settings = try store.currentSettings()
    start = clock.now
  }

  /// Whether the batch has served its ``lifetime``: the next file starts a new one.
  var isExpired: Bool { clock.now - start >= Self.lifetime }

  /// ``Store/admit(size:priority:input:)`` for one file of the batch: no
  /// system call when its size, charged as above, still leaves the
  /// threshold free in the last measurement.
  func admit(size: Int64?, priority: PutPriority, input: String) throws(TroveError)
    -> [SweepReport]
  {
    if let size, let space = measured {
      let cost = Self.charge(size)
      if space.available.subtractingSaturated(charged).subtractingSaturated(cost)
        >= space.threshold
      {
        charged = charged.addingSaturated(cost)
        return []
      }
    }
    let (sweeps, room) = try store.admit(
      size: size, priority: priority, input: input, policy: settings.policy)
    measured = room
    charged = room == nil ? 0 : Self.charge(size ?? 0)
    return sweeps
  }

  /// The room a file of `size` bytes is taken to use: whole 4 KiB blocks,
  /// and one more.
  static func charge(_ size: Int64) -> Int64 {
    let block: Int64 = 4096
    return (max(0, size).addingSaturated(block - 1) / block + 1).multipliedSaturated(by: block)
  }
}

extension Store {
  /// `batch`'s settings when there is one, else ``currentSettings()``.
  func settings(for batch: PutBatch?) throws(TroveError) -> StoreSettings {
    guard let batch else { return try currentSettings() }
    return batch.settings
  }

  /// ``admit(size:priority:input:)`` through `batch` when there is one.
  func admit(size: Int64?, priority: PutPriority, input: String, batch: PutBatch?)
    throws(TroveError) -> [SweepReport]
  {
    guard let batch else { return try admit(size: size, priority: priority, input: input) }
    return try batch.admit(size: size, priority: priority, input: input)
  }
}
