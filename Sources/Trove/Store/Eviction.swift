#if canImport(Glibc)
  import Glibc
#endif

/// The mechanism of eviction: removing one chosen entry safely, clearing
/// dead writers' leftovers, and the lock that keeps sweeps from competing.
/// What to remove is decided in Policy/Sweeper.swift.
extension Store {
  /// Removes those of `entries` still as they were chosen (not read,
  /// stored again or pinned since): their index rows first, in one
  /// transaction, then their files. A crash between the two leaves orphan
  /// files, which `reindex` adopts — never a row that points at nothing.
  /// A reader that already opened an object keeps reading correct bytes.
  /// Returns which were removed.
  func evict(_ entries: [Entry], now: Int64) throws(TroveError) -> [Bool] {
    let removed = try index().evict(entries, now: now)
    recentReads.withLock { reads in
      for (entry, gone) in zip(entries, removed) where gone {
        reads.removeValue(forKey: entry.digest)
      }
    }
    let victims = zip(entries, removed).filter(\.1).map(\.0)
    // An unlink that frees blocks can wait on the device (a `discard`
    // mount, a network filesystem: about 100 µs each on this VM's root);
    // several at once overlap the waits (8000 files: 0.81 s one by one,
    // 0.32 s from 8 at once). Already gone is fine (another sweep on a
    // filesystem whose locks lie).
    try Parallel.forEach(victims.count, width: victims.count < 16 ? 1 : Self.unlinkWidth) {
      [self] (i) throws(TroveError) in
      _ = try removeObjectFiles(victims[i].digest, recorded: victims[i].isCompressed)
    }
    return removed
  }

  /// How many unlinks an eviction has in flight at once.
  static let unlinkWidth = 8

  /// Removes `entry` if it is still as it was chosen; whether it was.
  func evict(_ entry: Entry, now: Int64) throws(TroveError) -> Bool {
    try evict([entry], now: now)[0]
  }

  /// Removes files in `tmp/` not modified for `seconds`: leftovers of
  /// writers that died. A live writer touches its file as it writes; one
  /// idle that long and then removed fails its publish cleanly (ENOENT),
  /// never publishing wrong bytes. O(files in tmp/).
  func removeStaleTemporaries(olderThan seconds: Int64, dryRun: Bool) throws(TroveError)
    -> (count: Int, bytes: Int64)
  {
    let names = try attempt("list", tmpPath) { () throws(SystemCallError) in
      try tmpDirectory.entries()
    }
    let cutoff = currentTimeNanoseconds() / 1_000_000_000 - seconds
    var removed = (count: 0, bytes: Int64(0))
    for name in names {
      guard let status = try? tmpDirectory.status(of: name, followSymlinks: false),
        status.modificationTime < cutoff
      else { continue }
      if !dryRun {
        do throws(SystemCallError) {
          try tmpDirectory.removeFile(name)
        } catch  where error.errno == .noSuchFileOrDirectory {
          continue
        } catch {
          throw TroveError.system(error, "remove", path: tmpPath + "/" + name)
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
  /// eviction re-checks its entry in the index.
  func withSweepLock<T>(wait: Bool, _ body: () throws(TroveError) -> T) throws(TroveError) -> T {
    let path = root + "/" + StoreLayout.sweepLock
    let fd = try attempt("open", path) { () throws(SystemCallError) in
      try FileDescriptor.open(
        StoreLayout.sweepLock, in: rootDirectory, [.readWrite, .create], permissions: 0o644)
    }
    defer { fd.close() }
    let locked = try attempt("lock", path) { () throws(SystemCallError) in
      try fd.lock(exclusive: true, wait: wait)
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

  /// Makes sure the ballast file exists: 1 MiB the store can give back
  /// when the volume fills, so that the index (which needs room to record
  /// deletions) can evict. Best effort: on a full volume it stays absent.
  func ensureReserve() {
    if (try? rootDirectory.status(of: StoreLayout.reserve))?.size == StoreLayout.reserveSize {
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

  /// Gives the ballast back to the volume; whether there was any.
  func releaseReserve() -> Bool {
    (try? rootDirectory.removeFile(StoreLayout.reserve)) != nil
  }
}
