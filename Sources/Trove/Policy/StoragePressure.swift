/// How much a put matters when the volume runs low on space (the seeds'
/// important and opportunistic capacity).
public enum PutPriority: String, Sendable, Hashable, Codable {
  /// Work the user asked for: stored if there is any way to make room.
  case important
  /// Optional work (prefetch, warming): skipped with `.lowOnSpace` when
  /// the volume is below the policy's minimum free space, even after a sweep.
  case opportunistic
}

/// The store volume's free space beside the policy's threshold.
public struct FreeSpace: Sendable, Hashable, Codable {
  /// Bytes available to unprivileged users (statvfs `f_bavail`).
  public var available: Int64
  /// The volume's size.
  public var total: Int64
  /// The free space the policy wants kept (`min-free`), in bytes.
  public var threshold: Int64

  /// Whether the volume is below the threshold.
  public var isLow: Bool { available < threshold }
}

extension Store {
  /// Free space on the store's volume (statvfs) and the policy's threshold.
  public func freeSpace() throws(TroveError) -> FreeSpace {
    let space = try attempt("inspect", root) { () throws(SystemCallError) in
      try Sys.spaceAvailable(at: root)
    }
    let threshold = try currentSettings().policy.minimumFree.bytes(ofVolume: space.total)
    return FreeSpace(available: space.available, total: space.total, threshold: threshold)
  }

  /// Before a put of `size` bytes (nil when unknown): if the volume would
  /// fall below the policy's minimum free space, sweep least recently used
  /// entries to make room first. An opportunistic put that still would not
  /// fit above the threshold is refused with `.lowOnSpace`. One statvfs
  /// when there is room.
  func admit(size: Int64?, priority: PutPriority) throws(TroveError) {
    var space = try freeSpace()
    let needed = space.threshold + (size ?? 0)
    guard space.available < needed else { return }
    _ = try makeRoom(available: needed)
    space = try freeSpace()
    if priority == .opportunistic && space.available < needed {
      throw TroveError(
        .lowOnSpace,
        "skipped an optional put into '\(root)': \(Quantities.formatSize(space.available)) free, below the \(Quantities.formatSize(space.threshold)) the store keeps free (min-free)",
        path: root)
    }
  }

  /// Removes unpinned entries, least recently used first, until `needed`
  /// bytes are available on the volume or nothing more can go. Returns the
  /// bytes (allocated) removed. Takes the sweep lock, waiting for it.
  func makeRoom(available needed: Int64, protecting protected: Set<Digest> = []) throws(TroveError)
    -> Int64
  {
    try withSweepLock(wait: true) { () throws(TroveError) in
      // A full volume leaves the index no room to record deletions: give
      // back the ballast first, and take it again once there is room.
      let space = try? Sys.spaceAvailable(at: root)
      if (space?.available ?? 0) < 4 * StoreLayout.reserveSize { _ = releaseReserve() }
      defer {
        if ((try? Sys.spaceAvailable(at: root).available) ?? 0) > 8 * StoreLayout.reserveSize {
          ensureReserve()
        }
      }
      var planned = Set<Digest>()
      let available = (try? Sys.spaceAvailable(at: root).available) ?? 0
      let removal = try removeLeastRecentlyUsed(
        before: nil, now: currentTimeNanoseconds(), dryRun: false, protected: protected,
        planned: &planned
      ) { removed in available + removed >= needed }
      return removal.bytes
    }
  }
}

/// Writes into a temp file of `tmp/` under storage pressure: a full
/// filesystem (ENOSPC, EDQUOT) is met once by evicting least recently used
/// entries — enough for the bytes still to come when that is known, all that
/// can go when it is not — and the failed write is retried from where it
/// stopped; bytes already written are kept. A second failure is thrown.
struct PressuredWrites {
  let store: Store
  private var triedToMakeRoom = false

  init(store: Store) { self.store = store }

  /// Writes all of `bytes` to `file`; `remaining` is what is still to be
  /// written counting `bytes`, or nil when unknown.
  mutating func writeAll(
    _ bytes: UnsafeRawBufferPointer, to file: FileDescriptor, remaining: Int64?
  ) throws(SystemCallError) {
    var offset = 0
    while offset < bytes.count {
      do throws(SystemCallError) {
        offset += try file.write(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
      } catch {
        guard error.errno == .noSpace || error.errno == .diskQuotaExceeded, !triedToMakeRoom
        else { throw error }
        triedToMakeRoom = true
        let missing = remaining.map { $0 - Int64(offset) } ?? .max / 2
        let freed = (try? store.makeRoom(available: missing + (1 << 20))) ?? 0
        if freed == 0 { throw error }
      }
    }
  }
}
