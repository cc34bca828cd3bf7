import Synchronization

/// Admission, the first step of an ingest: the store's settings, read
/// once, and room on the volume for each input, measured by the rule of
/// ``Store/makeRoom(size:priority:input:policy:)`` (room for the input's
/// size above `min-free`, or the rules of storage pressure).
///
/// Every input is admitted through one: a put alone has its own; the puts
/// of one group of a multi-file put (``Store/put(files:priority:onProgress:onResult:)``)
/// share one, so that a group of small files pays once for what does not
/// change from file to file — the settings (where reading them costs a
/// status of `config.json` each time) and the free-space check: one
/// `statvfs` admits the group's files for as long as each still fits in
/// what it measured after what was admitted before it.
///
/// Each input admitted from a measurement is charged its size rounded up
/// to whole 4 KiB blocks plus one block (its inode and its name), more than
/// it takes on the filesystems stores live on; an input that does not fit
/// in what is left is admitted by a new measurement and, below the
/// threshold, by the sweep and evictions of a put alone. A shared admission
/// lasts at most ``lifetime`` (a multi-file put's, besides, one group of up
/// to 512 objects or 64 MiB): another process's writes meanwhile are seen
/// at the next measurement, and a volume that fills anyway is met by the
/// writer's evictions on ENOSPC. Inputs on several threads may share one (a
/// fetch of many URLs does, through ``AdmissionSharing``); those that
/// measure at once each charge their own measurement.
final class Admission: Sendable {
  /// How long one reading of the settings and one measurement serve.
  static let lifetime = Duration.seconds(1)

  private let store: Store
  /// The store's settings when the admission began.
  let settings: StoreSettings
  private let clock = ContinuousClock()
  private let start: ContinuousClock.Instant
  /// The last measurement that found room without evicting, and the bytes
  /// charged against it since.
  private let room = Mutex<(measured: FreeSpace?, charged: Int64)>((nil, 0))

  /// Reads the store's settings.
  ///
  /// - Throws: `.invalidConfig` when they cannot be used.
  init(store: Store) throws(TroveError) {
    self.store = store
    settings = try store.currentSettings()
    start = clock.now
  }

  /// The policy every decision of the ingest takes.
  var policy: CachePolicy { settings.policy }

  /// Whether the admission has served its ``lifetime``: the next input
  /// starts a new one.
  var isExpired: Bool { clock.now - start >= Self.lifetime }

  /// Makes room for `size` bytes of data from `input` (nil when unknown; 0
  /// for a clone, which takes no data blocks): no system call when its
  /// size, charged as above, still leaves the threshold free in the last
  /// measurement. Returns the evictions it made (in the sweep log).
  ///
  /// - Throws: `.lowOnSpace` for an opportunistic put below `min-free`;
  ///   `.noSpace` naming `input` when the put cannot fit at all.
  func admit(size: Int64?, priority: PutPriority, input: String) throws(TroveError)
    -> [SweepReport]
  {
    let admitted = room.withLock { room -> Bool in
      guard let size, let space = room.measured else { return false }
      let cost = Self.charge(size)
      guard
        space.available.subtractingSaturated(room.charged).subtractingSaturated(cost)
          >= space.threshold
      else { return false }
      room.charged = room.charged.addingSaturated(cost)
      return true
    }
    if admitted { return [] }
    // Measured outside the lock: making room may wait for a sweep, which
    // must not hold up the inputs sharing this admission (an opportunistic
    // one fails at once below `min-free`, as it would alone).
    let (sweeps, measured) = try store.makeRoom(
      size: size, priority: priority, input: input, policy: settings.policy)
    room.withLock { $0 = (measured, measured == nil ? 0 : Self.charge(size ?? 0)) }
    return sweeps
  }

  /// The lengths an input from `source` may have: `expected`, and the
  /// policy's `max-object-size`.
  func sizeLimit(for source: String, expected: Int64?) -> SizeLimit {
    SizeLimit(source: source, expected: expected, maximum: settings.policy.maximumObjectSize)
  }

  /// The room an input of `size` bytes is taken to use: whole 4 KiB
  /// blocks, and one more.
  static func charge(_ size: Int64) -> Int64 {
    let block: Int64 = 4096
    return (max(0, size).addingSaturated(block - 1) / block + 1).multipliedSaturated(by: block)
  }
}

/// One admission shared by the inputs of a batch while it lasts
/// (``Admission/lifetime``), then the next: inputs from several threads
/// pay once a second for what does not change between them.
final class AdmissionSharing: Sendable {
  private let store: Store
  private let current = Mutex<Admission?>(nil)

  init(store: Store) { self.store = store }

  /// The admission in force, or a new one when it expired.
  ///
  /// - Throws: `.invalidConfig` when the store's settings cannot be used.
  func admission() throws(TroveError) -> Admission {
    if let live = current.withLock({ $0 }), !live.isExpired { return live }
    let fresh = try Admission(store: store)
    current.withLock { $0 = fresh }
    return fresh
  }

  /// `sharing`'s admission in force, else one of the input's own.
  static func admission(_ sharing: AdmissionSharing?, store: Store) throws(TroveError)
    -> Admission
  {
    if let sharing { return try sharing.admission() }
    return try Admission(store: store)
  }
}
