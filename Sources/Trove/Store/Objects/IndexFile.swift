#if canImport(Glibc)
  import Glibc
#endif

/// The index file itself: opened without following a link, and set aside
/// when damaged so that a new one is rebuilt from `objects/`, the truth.
extension ObjectTable {
  /// What SQLite may keep beside the index: its WAL, shared memory and
  /// rollback journal.
  static let indexCompanions = ["-wal", "-shm", "-journal"]

  /// Opens the index. Anything but a regular file under a companion's
  /// name is removed first (SQLite would write through a link). An index
  /// that is not a database, is damaged where opening reads, or is a
  /// symbolic link is set aside (``setIndexAside(_:because:)``) and a new
  /// one made, which ``index()`` rebuilds.
  ///
  /// In a read-only store nothing is removed or set aside: the index is
  /// opened read-only as it is (``Index/init(path:resolvedPath:filesystem:blockSize:readOnly:)``),
  /// and one that is missing or damaged fails in one line.
  func openIndex() throws(TroveError) -> Index {
    if isReadOnly { return try openIndexReadOnly() }
    for suffix in Self.indexCompanions {
      let name = StoreLayout.index + suffix
      if let status = try? rootDirectory.status(of: name, followSymlinks: false),
        !status.isRegular
      {
        _ = try? rootDirectory.removeFile(name)
      }
    }
    // A full volume: the ballast goes now, so that the index can open
    // (SQLite maps its shared memory, and a journal takes blocks) and
    // record what frees space.
    if let space = try? Sys.spaceAvailable(at: resolvedRoot),
      space.available < 4 * StoreLayout.reserveSize
    {
      _ = releaseReserve()
    }
    let before = try? rootDirectory.status(of: StoreLayout.index, followSymlinks: false)
    do throws(TroveError) {
      return try makeIndex()
    } catch  where error.code == .indexDamaged {
      try setIndexAside(before, because: error)
      return try makeIndex()
    } catch  where error.code == .noSpace && releaseReserve() {
      return try makeIndex()
    }
  }

  /// `digest`'s last access as the index records it, read without
  /// opening the index for writing (``Index/peekLastAccess(of:resolvedPath:)``),
  /// by the first read of a store that has not opened its index; nil
  /// otherwise, or when it cannot be read so.
  func peekLastAccess(_ digest: BlobDigest) -> Int64? {
    guard !hasOpenIndex, !hasPeeked.exchange(true, ordering: .relaxed) else { return nil }
    return Index.peekLastAccess(of: digest, resolvedPath: resolvedRoot + "/" + StoreLayout.index)
  }

  /// Opens the index of a read-only store as it is.
  private func openIndexReadOnly() throws(TroveError) -> Index {
    let refusal = "the store is read-only, so it cannot be rebuilt"
    guard
      (try? rootDirectory.status(of: StoreLayout.index, followSymlinks: false))?.isRegular == true
    else {
      throw TroveError(
        .readOnlyStore,
        "read-only store '\(root)': its index '\(indexPath)' is missing or not a file, and \(refusal)",
        path: indexPath, remedy: .rebuildIndexWhereWritable)
    }
    do throws(TroveError) {
      return try Index(
        path: indexPath, resolvedPath: resolvedRoot + "/" + StoreLayout.index,
        filesystem: filesystem, blockSize: 4096, readOnly: true)
    } catch  where error.code == .indexDamaged {
      throw TroveError(
        .indexDamaged,
        "index '\(indexPath)' is damaged (\(error.value ?? error.message)) and \(refusal)",
        path: indexPath, value: error.value, remedy: .rebuildIndexWhereWritable)
    }
  }

  /// Gives the store's ballast (`reserve`) back to the volume; whether
  /// there was any.
  func releaseReserve() -> Bool {
    (try? rootDirectory.removeFile(StoreLayout.reserve)) != nil
  }

  private func makeIndex() throws(TroveError) -> Index {
    let blockSize = (try? rootDirectory.status().blockSize) ?? 4096
    let index = try Index(
      path: indexPath, resolvedPath: resolvedRoot + "/" + StoreLayout.index,
      filesystem: filesystem, blockSize: blockSize, readOnly: false)
    index.onFull = { [weak self] in self?.releaseReserve() ?? false }
    if access == .group {
      // SQLite made them with the umask's mode; every member writes them.
      for suffix in [""] + Self.indexCompanions {
        if let file = try? FileDescriptor.open(
          StoreLayout.index + suffix, in: rootDirectory, [.readOnly, .noFollow, .nonBlocking])
        {
          file.shareForStore(access)
          file.close()
        }
      }
    }
    index.onDamage = { [weak self, weak index] error in
      guard let self, let index else { return }
      let file = try? self.rootDirectory.status(of: StoreLayout.index, followSymlinks: false)
      try? self.setIndexAside(file, because: error)
      self.forgetIndex(index)
    }
    return index
  }

  /// Puts the index in a new file (`VACUUM INTO`, renamed over it) and
  /// removes the old one's WAL and shared memory: a process that opened
  /// the old file while others could write it writes no more to it (its
  /// next statement opens the new file, ``Index``). Every key in the copy is marked as a remote's binding
  /// (``KeyBinding/isPulled``) before it takes the index's name, so no
  /// crash leaves an index with unmarked keys under that name. This
  /// process's own connections are closed first (the next ``index()``
  /// opens the new file). The new file gets the mode of a store with
  /// `newAccess`, and (when root does this) the root folder's owner.
  /// O(index size).
  func moveIndexToNewFile(access newAccess: StoreAccess) throws(TroveError) {
    _ = try? rootDirectory.lock()
    defer { rootDirectory.unlock() }
    // Closed when released: SQLite then checkpoints the old WAL by name,
    // which must still be the old file's.
    if let current = try? index() { forgetIndex(current) }
    // Beside the index, in the root folder only this user may write by
    // now (tmp/ may be another member's): SQLite writes it by path.
    let temp = "." + StoreLayout.temporaryName("index")
    let tempPath = root + "/" + temp
    // No connection opens the index from here until the old file's WAL and
    // shared memory are gone (``Index/lockForOpening(_:)``): one opened in
    // between would pair the new file with them. Taken before the old
    // file's write lock, which an opening connection may wait for.
    let opening = try attempt("lock", root + "/" + StoreLayout.indexLock) {
      () throws(SystemCallError) -> FileDescriptor in
      let fd = try FileDescriptor.open(
        StoreLayout.indexLock, in: rootDirectory, [.readOnly, .create, .noFollow, .nonBlocking],
        permissions: 0o644)
      _ = try fd.lock(exclusive: true)
      return fd
    }
    defer {
      opening.unlock()
      opening.close()
    }
    // The old file's write lock, held until the new file has its name: a
    // write another process commits is in the copy, or finds the file
    // moved once it has the lock and writes to the new one (``Index``).
    let hold: SQLiteConnection
    do throws(SQLiteConnection.Failure) {
      hold = try SQLiteConnection(path: indexPath, busyTimeoutMilliseconds: 30_000)
      // Its close must remove no name: they are the new file's by then.
      hold.persistWAL()
      try hold.execute("BEGIN IMMEDIATE")
    } catch {
      throw Index.error(error, "lock the index", indexPath)
    }
    defer { try? hold.execute("ROLLBACK") }
    Sys.pauseForTest("index-move", indexPath)
    do throws(SQLiteConnection.Failure) {
      let db = try SQLiteConnection(path: indexPath, busyTimeoutMilliseconds: 10_000)
      try db.execute("VACUUM INTO '\(tempPath.replacingOccurrences(of: "'", with: "''"))'")
      let copy = try SQLiteConnection(path: tempPath, busyTimeoutMilliseconds: 10_000)
      try copy.execute("UPDATE keys SET pulled = 1 WHERE pulled IS NULL")
    } catch {
      try? rootDirectory.removeFile(temp)
      throw Index.error(error, "copy the index to a new file", indexPath)
    }
    do throws(TroveError) {
      try attempt("replace", indexPath) { () throws(SystemCallError) in
        let file = try FileDescriptor.openRegularFile(temp, in: rootDirectory)
        defer { file.close() }
        // The file SQLite made for this process, and no other.
        let status = try file.status()
        guard status.owner == Sys.effectiveUserID, status.linkCount == 1 else {
          throw SystemCallError("open", .notPermitted)
        }
        try file.setPermissions(newAccess.sharedFileMode)
        if Sys.effectiveUserID == 0 {
          let folder = try rootDirectory.status()
          try file.setOwner(folder.owner, folder.group)
        }
        try file.sync()
        try rootDirectory.rename(temp, to: StoreLayout.index, in: rootDirectory)
      }
    } catch {
      try? rootDirectory.removeFile(temp)
      throw error
    }
    Sys.pauseForTest("index-renamed", indexPath)
    for suffix in Self.indexCompanions {
      _ = try? rootDirectory.removeFile(StoreLayout.index + suffix)
    }
  }

  /// Checks every page of the index (`PRAGMA quick_check`, O(index
  /// size)); a damaged one is set aside and a new one rebuilt from the
  /// objects. For `reindex` and `verify --repair`, which read everything
  /// anyway; other commands find damage when they touch it.
  func checkIndex() throws(TroveError) {
    let index = try index()
    let seen = try? rootDirectory.status(of: StoreLayout.index, followSymlinks: false)
    var problem: String?
    do throws(TroveError) {
      problem = try index.read("check index") { (tx) throws(TroveError) in
        var lines: [String] = []
        try tx.run { db throws(SQLiteConnection.Failure) in
          try db.query("PRAGMA quick_check") { row in lines.append(row.text(0)) }
        }
        return lines == ["ok"] ? nil : lines.prefix(3).joined(separator: "; ")
      }
    } catch  where error.code == .indexDamaged {
      _ = try self.index()  // set aside by the failing statement; rebuilt
      return
    }
    guard let problem else { return }
    try setIndexAside(
      seen,
      because: TroveError(.indexDamaged, problem, path: indexPath, value: problem))
    forgetIndex(index)
    _ = try self.index()
  }

  /// Renames the damaged index (and its companions) to
  /// `index.sqlite.damaged-<time>`, kept for inspection, if it is still
  /// the file `seen` (another process may have set it aside and made a
  /// new one meanwhile), and says so through ``warn``. Rename never
  /// follows a link.
  func setIndexAside(_ seen: FileStatus?, because error: TroveError) throws(TroveError) {
    _ = try? rootDirectory.lock()
    defer { rootDirectory.unlock() }
    let now = try? rootDirectory.status(of: StoreLayout.index, followSymlinks: false)
    guard let now, let seen, now.inode == seen.inode, now.device == seen.device else { return }
    let aside =
      StoreLayout.index + ".damaged-\(currentTimeNanoseconds() / 1_000_000_000)-"
      + String(UInt32.random(in: .min ... .max), radix: 16)
    try attempt("set aside", indexPath) { () throws(SystemCallError) in
      try rootDirectory.renameWithoutReplacing(StoreLayout.index, to: aside, in: rootDirectory)
    }
    for suffix in Self.indexCompanions {
      try? rootDirectory.rename(
        StoreLayout.index + suffix, to: aside + suffix, in: rootDirectory)
    }
    _ = try? rootDirectory.sync()
    warn(
      "index '\(indexPath)' is damaged (\(error.value ?? error.message)); moved it to '\(root)/\(aside)' and rebuilt it from the objects"
    )
  }
}
