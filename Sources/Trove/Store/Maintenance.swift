#if canImport(Glibc)
  import Glibc
#endif

/// The store's housekeeping mechanisms: clearing dead writers' leftovers
/// in `tmp/`, the lock that keeps sweeps from competing, and the ballast
/// that lets the index record evictions on a full volume. Removing objects
/// is ``ObjectTable``'s; what to remove is decided in Policy/.
extension Store {
  /// Removes entries in `tmp/` and its staging folders not modified for
  /// `seconds`: leftovers of writers that died. A live writer touches its file as it writes; one
  /// idle that long and then removed fails its publish cleanly (ENOENT),
  /// never publishing wrong bytes. This process's own temp files are kept,
  /// however old: a put of many files stages its next group while the
  /// sweep after its last group runs. In a group store's sticky folders,
  /// only this user's entries are removed (root's sweep removes all).
  /// Interrupted downloads in `partial/` that old go too, while no fetch
  /// holds their URL's lock, and so do the lock files of earlier versions
  /// in `locks/`. Whatever an entry is — a file, a symbolic link (removed as
  /// a link, never followed), a FIFO, a folder with everything in it (see
  /// ``FileDescriptor/removeTree(_:dryRun:depth:)``) — it goes; one that
  /// cannot be removed is reported in the result and the rest still go.
  /// Entries of `quarantine/` go ``quarantineDays`` after they were moved
  /// there. O(entries in those folders).
  func removeStaleTemporaries(
    olderThan seconds: Int64, dryRun: Bool, now: Int64 = currentTimeNanoseconds()
  ) -> Leftovers {
    let cutoff = now / 1_000_000_000 - min(seconds, Int64.max / 4)
    // This process's own temp files are in use (a put of many files stages
    // its next group while a sweep runs after the last), however old.
    // The staging folders stay; what is in them is aged file by file (a
    // long write touches its file, not its folder).
    let staging = Set(
      StoreLayout.stagingFolders.filter {
        (try? tmpDirectory.status(of: $0, followSymlinks: false))?.isDirectory == true
      })
    var removed = removeOld(
      in: tmpDirectory, tmpPath, before: cutoff, dryRun: dryRun,
      keep: { staging.contains($0) || StoreLayout.isThisProcessTemporary($0) })
    for name in staging.sorted() {
      guard
        let folder = try? FileDescriptor.open(name, in: tmpDirectory, [.directory, .noFollow])
      else { continue }
      defer { folder.close() }
      removed.add(
        removeOld(
          in: folder, tmpPath + "/" + name, before: cutoff, dryRun: dryRun,
          keep: StoreLayout.isThisProcessTemporary))
    }
    let locks = try? FileDescriptor.open(
      StoreLayout.locks, in: rootDirectory, [.directory, .noFollow])
    defer { locks?.close() }
    // A part goes only while no fetch holds its URL's lock: its byte of
    // `fetch.lock`, and the `locks/<k>.lock` that Trove versions before it
    // flocked, if there is one. A dry run asks, taking nothing.
    if let folder = try? FileDescriptor.open(
      StoreLayout.partial, in: rootDirectory, [.directory, .noFollow])
    {
      defer { folder.close() }
      removed.add(
        removeOld(in: folder, root + "/" + StoreLayout.partial, before: cutoff, dryRun: dryRun) {
          file in
          let k = String(file.prefix { $0 != "." })
          if dryRun {
            if FetchLocks.isHeld(k, in: self.rootDirectory) { return nil }
            return FolderLockClaim(nil, flocking: k + ".lock", in: locks)
          }
          guard let lock = FetchLock(store: self, name: k, wait: false) else { return nil }
          return FolderLockClaim(lock, flocking: k + ".lock", in: locks)
        })
    }
    // Lock files of earlier versions go while no one flocks them.
    if let locks {
      removed.add(
        removeOld(
          in: locks, root + "/" + StoreLayout.locks, before: cutoff, dryRun: dryRun,
          lock: { FolderLockClaim(nil, flocking: $0, in: locks) }))
    }
    // Quarantined entries go 30 days after they were moved there (a
    // rename sets their change time).
    if let quarantine = try? FileDescriptor.open(
      StoreLayout.quarantine, in: rootDirectory, [.directory, .noFollow])
    {
      defer { quarantine.close() }
      let kept = now / 1_000_000_000 - Self.quarantineDays * 86_400
      removed.add(
        removeOld(
          in: quarantine, root + "/" + StoreLayout.quarantine, before: kept, dryRun: dryRun,
          age: \.changeTimeSeconds))
    }
    return removed
  }

  /// How long `quarantine/` keeps what was moved there.
  static let quarantineDays: Int64 = 30

  /// What clearing leftovers removed, and what it could not.
  struct Leftovers {
    /// Entries removed (or, in a dry run, to remove).
    var count = 0
    /// Allocated bytes they took.
    var bytes: Int64 = 0
    /// Entries that could not be removed (or folders not listed).
    var failures = 0
    /// Why, one line each, for the first ``maximumErrors``.
    var errors: [String] = []

    static let maximumErrors = 100

    mutating func fail(_ error: TroveError) {
      failures += 1
      if errors.count < Self.maximumErrors { errors.append(error.description) }
    }

    mutating func add(_ other: Leftovers) {
      count += other.count
      bytes += other.bytes
      failures += other.failures
      errors += other.errors.prefix(Self.maximumErrors - errors.count)
    }
  }

  /// Removes the entries in `folder` older than `cutoff`; with `lock`,
  /// only those whose fetch lock it takes (nil: a fetch holds it), held
  /// while the entry goes. An entry that cannot be removed is counted and
  /// the walk goes on.
  private func removeOld(
    in folder: FileDescriptor, _ path: String, before cutoff: Int64, dryRun: Bool,
    age: KeyPath<FileStatus, Int64> = \.modificationTime,
    lock claim: ((String) -> FolderLockClaim?)? = nil, keep: (String) -> Bool = { _ in false }
  ) -> Leftovers {
    var result = Leftovers()
    let names: [String]
    do throws(SystemCallError) {
      names = try folder.entries()
    } catch {
      result.fail(TroveError.system(error, "list", path: path))
      return result
    }
    // In a sticky folder (a group store's staging folders) only an entry's
    // owner, the folder's owner or root may remove it: another member's
    // leftovers are theirs to clear, not failures of this sweep.
    let me = Sys.effectiveUserID
    let guarded = (try? folder.status()).map { status in
      status.mode & UInt32(S_ISVTX) != 0 && status.owner != me && me != 0
    }
    for name in names where !keep(name) {
      guard let status = try? folder.status(of: name, followSymlinks: false),
        status[keyPath: age] < cutoff, guarded != true || status.owner == me
      else { continue }
      let held = claim.map { $0(name) }
      if case .some(nil) = held { continue }
      let removal = withExtendedLifetime(held) { folder.removeTree(name, dryRun: dryRun) }
      result.bytes += removal.bytes
      if let failure = removal.failure {
        result.fail(TroveError.system(failure.error, "remove", path: path + "/" + failure.path))
      } else if removal.isRemoved {
        result.count += 1
      }
    }
    return result
  }

  /// Runs `body` holding the sweep lock (`sweep.lock`, with this process's
  /// id written in it). When another process holds it: waits if `wait`,
  /// else throws `.busy` naming the holder. The lock saves work; a
  /// filesystem that ignores it costs work, not correctness — every
  /// eviction re-checks its entry in the index transaction that removes it.
  func withSweepLock<T>(wait: Bool, _ body: () throws(TroveError) -> T) throws(TroveError) -> T {
    try withSweepLock(waitingAtMost: wait ? nil : .zero, body)
  }

  /// Runs `body` holding the sweep lock, waiting for it at most `limit`
  /// (nil: as long as it takes); throws `.busy` naming the holder when the
  /// wait runs out. A put under storage pressure waits a bounded time: a
  /// sweep stopped by its user must not stop every put with it.
  func withSweepLock<T>(waitingAtMost limit: Duration?, _ body: () throws(TroveError) -> T)
    throws(TroveError) -> T
  {
    let path = root + "/" + StoreLayout.sweepLock
    let fd = try openOwnFile(StoreLayout.sweepLock)
    defer { fd.close() }
    let clock = ContinuousClock()
    let deadline = limit.map { clock.now + $0 }
    var locked = false
    while true {
      locked = try attempt("lock", path) { () throws(SystemCallError) in
        try fd.lock(exclusive: true, wait: deadline == nil)
      }
      guard !locked, let deadline, clock.now < deadline else { break }
      Sys.sleep(microseconds: 10_000)
    }
    guard locked else {
      let holder = (try? fd.readAll(limit: 32)).map { String(decoding: $0, as: UTF8.self) }
      let pid = holder?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
      throw TroveError(
        .busy,
        "a sweep of store '\(root)' is already running\(pid.isEmpty ? "" : " (process \(pid))")",
        path: path)
    }
    defer { fd.unlock() }
    try? fd.truncate(to: 0)
    try? fd.writeAll(Array("\(getpid())\n".utf8))
    return try body()
  }

  /// Opens (creating) a file of the store's own in its root for reading
  /// and writing, never through a symbolic link: a planted link under its
  /// name is unlinked (never followed); a folder or a FIFO is refused,
  /// never blocked on.
  func openOwnFile(_ name: String) throws(TroveError) -> FileDescriptor {
    let path = root + "/" + name
    for attempt in 0..<2 {
      do throws(SystemCallError) {
        let fd = try FileDescriptor.open(
          name, in: rootDirectory, [.readWrite, .create, .noFollow, .nonBlocking],
          permissions: access.sharedFileMode)
        if try fd.status().isRegular {
          fd.shareForStore(access)
          return fd
        }
        fd.close()
      } catch  where attempt == 0 && error.errno == .tooManySymbolicLinks {
        try? rootDirectory.removeFile(name)  // the link itself goes
        continue
      } catch  where attempt == 0 && error.errno == .noSpace && releaseReserve() {
        continue  // a full volume: the ballast makes room for the file
      } catch  where error.errno == .isDirectory {
      } catch {
        throw TroveError.system(error, "open", path: path)
      }
      break
    }
    throw TroveError(
      .storeUnavailable, "cannot open '\(path)': it is not a regular file; remove it", path: path)
  }

  /// Makes sure the ballast file exists: 1 MiB the store can give back
  /// when the volume fills, so that the index (which needs room to record
  /// deletions) can evict. Best effort: on a full volume it stays absent.
  func ensureReserve() {
    if let reserve = try? rootDirectory.status(of: StoreLayout.reserve, followSymlinks: false),
      reserve.isRegular, reserve.size == StoreLayout.reserveSize
    {
      return
    }
    let temp = StoreLayout.temporaryName("reserve")
    do throws(SystemCallError) {
      let fd = try FileDescriptor.open(
        temp, in: tmpDirectory, [.writeOnly, .create, .exclusive], permissions: 0o600)
      defer { fd.close() }
      try fd.allocate(StoreLayout.reserveSize)
      try tmpDirectory.rename(temp, to: StoreLayout.reserve, in: rootDirectory)
    } catch {
      try? tmpDirectory.removeFile(temp)
    }
  }

  /// After a removal freed space: makes the ballast again if it was
  /// released and the volume has room for it twice over, so the next time
  /// the volume fills the store can free space again.
  func restoreReserve() {
    if (try? rootDirectory.status(of: StoreLayout.reserve, followSymlinks: false)) != nil {
      return
    }
    guard let space = try? Sys.spaceAvailable(at: root),
      space.available >= 2 * StoreLayout.reserveSize
    else { return }
    ensureReserve()
  }

  /// Gives the ballast back to the volume; whether there was any.
  func releaseReserve() -> Bool { objects.releaseReserve() }
}

/// What keeps fetches away from an entry of `partial/` or `locks/` while
/// a sweep removes it: the URL's ``FetchLock``, and the `flock` of the
/// `locks/<k>.lock` an earlier Trove version holds while it fetches. A
/// lock file unlinked while flocked here: a fetch that opened it
/// meanwhile holds a lock nobody else will find — one extra download at
/// worst, never a wrong byte.
final class FolderLockClaim {
  private let lock: FetchLock?
  private let legacy: FileDescriptor?

  /// Nil when an earlier version's fetch holds `lockName` in `locks`.
  init?(_ lock: FetchLock?, flocking lockName: String, in locks: FileDescriptor?) {
    let legacy = locks.flatMap {
      try? FileDescriptor.open(lockName, in: $0, [.readWrite, .noFollow])
    }
    if let legacy, (try? legacy.lock(exclusive: true, wait: false)) != true {
      legacy.close()
      return nil
    }
    self.lock = lock
    self.legacy = legacy
  }

  deinit { legacy?.close() }
}
