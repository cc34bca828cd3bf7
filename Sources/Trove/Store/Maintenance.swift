#if canImport(Glibc)
  import Glibc
#endif

/// The store's housekeeping mechanisms: clearing dead writers' leftovers
/// in `tmp/`, the lock that keeps sweeps from competing, and the ballast
/// that lets the index record evictions on a full volume. Removing objects
/// is ``ObjectTable``'s; what to remove is decided in Policy/.
extension Store {
  /// Removes files in `tmp/` not modified for `seconds`: leftovers of
  /// writers that died. A live writer touches its file as it writes; one
  /// idle that long and then removed fails its publish cleanly (ENOENT),
  /// never publishing wrong bytes. Interrupted downloads in `partial/` and
  /// URL locks in `locks/` that old go too (a lock only when no fetch
  /// holds it). O(files in those folders).
  func removeStaleTemporaries(olderThan seconds: Int64, dryRun: Bool) throws(TroveError)
    -> (count: Int, bytes: Int64)
  {
    let cutoff = currentTimeNanoseconds() / 1_000_000_000 - min(seconds, Int64.max / 4)
    var removed = try removeOld(in: tmpDirectory, tmpPath, before: cutoff, dryRun: dryRun)
    let locks = try? FileDescriptor.open(
      StoreLayout.locks, in: rootDirectory, [.directory, .noFollow])
    defer { locks?.close() }
    for name in [StoreLayout.partial, StoreLayout.locks] {
      guard
        let folder = try? FileDescriptor.open(name, in: rootDirectory, [.directory, .noFollow])
      else { continue }
      defer { folder.close() }
      // A part or a lock goes only while no fetch holds its URL's lock.
      let more = try removeOld(in: folder, root + "/" + name, before: cutoff, dryRun: dryRun) {
        file in
        let lockName = String(file.prefix { $0 != "." }) + ".lock"
        return locks.flatMap {
          try? FileDescriptor.open(lockName, in: $0, [.readWrite, .noFollow])
        }
      }
      removed.count += more.count
      removed.bytes += more.bytes
    }
    return removed
  }

  /// Removes the files in `folder` older than `cutoff`; with `lock`, only
  /// those whose lock file (opened by `lock`; nil: none exists) it can take.
  private func removeOld(
    in folder: FileDescriptor, _ path: String, before cutoff: Int64, dryRun: Bool,
    lock lockFile: ((String) -> FileDescriptor?)? = nil
  ) throws(TroveError) -> (count: Int, bytes: Int64) {
    let names = try attempt("list", path) { () throws(SystemCallError) in
      try folder.entries()
    }
    var removed = (count: 0, bytes: Int64(0))
    for name in names {
      guard let status = try? folder.status(of: name, followSymlinks: false),
        status.modificationTime < cutoff
      else { continue }
      // A lock file unlinked while held here: a fetch that opened it
      // meanwhile holds a lock nobody else will find — one extra download
      // at worst, never a wrong byte.
      let lock = lockFile?(name)
      defer { lock?.close() }
      if let lock, (try? lock.lock(exclusive: true, wait: false)) != true { continue }
      if !dryRun {
        do throws(SystemCallError) {
          try folder.removeFile(name)
        } catch  where error.errno == .noSuchFileOrDirectory {
          continue
        } catch {
          throw TroveError.system(error, "remove", path: path + "/" + name)
        }
      }
      removed.count += 1
      removed.bytes += status.allocatedBytes
    }
    return removed
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
      usleep(10_000)
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
          permissions: 0o644)
        if try fd.status().isRegular { return fd }
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
