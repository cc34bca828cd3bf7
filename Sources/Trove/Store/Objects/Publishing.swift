#if canImport(Glibc)
  import Glibc
#endif

/// Publishing (the one durability sequence, ``GroupCommit``), and dedup hits.
extension ObjectTable {
  /// Publishes each of `group` as its digest's object, or — when the store
  /// already holds those bytes, or an earlier member of the group holds
  /// them — drops it and counts a dedup hit, binding each member's key in
  /// the transaction that publishes its object or counts its hit. Returns
  /// one outcome per object, in order. Every staged file is gone from
  /// `tmp/` and its descriptor closed when this returns; every object is
  /// published and recorded, or absent with its own error.
  func publish(group: [StagedObject]) -> [Result<PublishOutcome, TroveError>] {
    var commit = GroupCommit(self, group)
    return commit.run()
  }

  /// ``publish(group:)`` of one object: a group of one.
  func publish(_ staged: StagedObject) throws(TroveError) -> PublishOutcome {
    try publish(group: [staged])[0].get()
  }

  /// Renames `staged` from its name in `tmp/` to `name` in `folder`, never
  /// replacing, only while that name is the staged file itself; whether it
  /// was. In a group store another member could otherwise swap a file of
  /// theirs in under the name (the staging folders are sticky, but their
  /// owner may still rename in them) and this put would publish their
  /// bytes under its digest. The name is compared with the open descriptor
  /// (device and inode) before the rename, and the new name after it: a
  /// file swapped in between is taken back out of `folder`. False: nothing
  /// of `staged` was published. Called inside the index write
  /// transaction, so no reader adopts what is taken back out.
  func moveStaged(_ staged: StagedObject, to name: String, in folder: FileDescriptor)
    throws(SystemCallError) -> Bool
  {
    let held = try staged.file.status()
    Sys.pauseForTest("publish", staged.name)
    let named = try tmpDirectory.status(of: staged.name, followSymlinks: false)
    guard named.device == held.device, named.inode == held.inode else { return false }
    Sys.pauseForTest("rename", staged.name)
    try tmpDirectory.renameWithoutReplacing(staged.name, to: name, in: folder)
    guard let placed = try? folder.status(of: name, followSymlinks: false),
      placed.device == held.device, placed.inode == held.inode
    else {
      try? folder.removeFile(name)
      return false
    }
    return true
  }

  /// The error of a put whose staged file was not there to publish under
  /// its name (``moveStaged(_:to:in:)`` said false).
  func stagedFileReplaced(_ staged: StagedObject) -> TroveError {
    let path = tmpPath + "/" + staged.name
    return TroveError(
      .ioError,
      "cannot store \(staged.digest): its temp file '\(path)' was replaced by another file before it was published (another user of the store?); nothing was stored",
      path: path)
  }

  /// Unlinks the object file `staged` became, if it is still that file
  /// and no row records it. Best effort: what stays is an orphan, adopted
  /// by the next read or reconcile.
  func undoPublish(_ staged: StagedObject) {
    let digest = staged.digest
    guard let inode = try? staged.file.status().inode else { return }
    _ = try? index().write("take back \(digest)") { (tx) throws(TroveError) in
      guard try tx.entry(for: digest) == nil,
        try status(digest, compressed: staged.isCompressed)?.inode == inode
      else { return }
      try? unlinkObject(digest, compressed: staged.isCompressed)
    }
  }

  /// Renames each of `staged`, published by a group transaction that then
  /// failed, from its fan-out folder back to its name in `tmp/`, if it is
  /// still that file and no row records it; whether each went back. One
  /// index write transaction (it writes no row), as every change to
  /// `objects/` takes.
  func takeBack(_ staged: [StagedObject]) -> [Bool] {
    guard !staged.isEmpty else { return [] }
    let inodes = staged.map { try? $0.file.status().inode }
    let back = try? index().write("take back \(staged.count) objects") {
      (tx) throws(TroveError) -> [Bool] in
      var back: [Bool] = []
      for (object, inode) in zip(staged, inodes) {
        guard let inode, try tx.entry(for: object.digest) == nil,
          let folder = try openFolder(of: object.digest)
        else {
          back.append(false)
          continue
        }
        defer { folder.close() }
        let name = StoreLayout.objectName(object.digest, compressed: object.isCompressed)
        guard
          try status(object.digest, compressed: object.isCompressed, in: folder)?.inode == inode,
          (try? folder.renameWithoutReplacing(name, to: object.name, in: tmpDirectory)) != nil
        else {
          back.append(false)
          continue
        }
        back.append(true)
      }
      return back
    }
    return back ?? staged.map { _ in false }
  }

  /// One `syncfs(2)` of the store's filesystem through ``tmpDirectory``;
  /// whether it vouches for every write of this process's files since they
  /// were created. A lost write is reported once per open file
  /// description, and every group of this process syncs through the same
  /// one: a failure reported to one group may be another's (a group
  /// staged while this one committed), whose own `syncfs` then succeeds.
  /// So once one has failed, none vouches again for this table, and every
  /// later group syncs each file and folder on its own, whose errors are
  /// each file's. The call and the record of its failure are made under
  /// one lock, so no other group's sync can slip between them.
  func syncFilesystem() -> Bool {
    syncfsLostWrites.withLock { lost in
      guard !lost else { return false }
      do throws(SystemCallError) {
        try tmpDirectory.syncFilesystem()
        return true
      } catch {
        lost = true
        return false
      }
    }
  }

  /// Counts a put of bytes the store may already hold: if `digest`'s
  /// object is there, refreshes its last access (adopting it if the index
  /// lost its row) and counts the hit, all in one transaction. Nil when
  /// the object is not there — it may have just been evicted — and the
  /// caller must store its own copy. `binding`, when given, is bound in
  /// the same transaction when the object is there.
  ///
  /// `tracing` says it at the publish seam (a put that hashed its input
  /// first); a group commit says its own.
  func recordHit(
    _ digest: BlobDigest, size: Int64, binding: KeyRequest? = nil, tracing: Bool = true
  ) throws(TroveError) -> StoreEntry? {
    let now = currentTimeNanoseconds()
    let started = trace.now
    do throws(TroveError) {
      let entry = try index().write("record duplicate \(digest)") {
        (tx) throws(TroveError) -> StoreEntry? in
        guard let entry = try hit(tx, digest, size: size, now: now) else { return nil }
        try record(binding, for: digest, tx)
        return entry
      }
      if tracing, entry != nil {
        trace(
          .publish, "dedup hit on \(digest)",
          why: "hashed first: the store holds these bytes already"
            + (binding?.key.map { ", key '\($0)' bound" } ?? ""),
          duration: trace.elapsed(since: started))
      }
      return entry
    } catch {
      for key in binding?.keys ?? [] { journalAsIs(key: key) }
      throw error
    }
  }

  /// The dedup hit inside a write transaction; `folder`, when given, is
  /// `digest`'s fan-out folder, open.
  func hit(
    _ tx: IndexSession, _ digest: BlobDigest, size: Int64, now: Int64,
    in folder: FileDescriptor? = nil
  )
    throws(TroveError) -> StoreEntry?
  {
    let found: StoredObject?
    if let folder { found = try find(digest, in: folder) } else { found = try find(digest) }
    guard let object = found, object.status.isRegular else { return nil }
    // A hit on an object whose removal is under way calls the removal off:
    // that must outlast a power loss, or the removal would come back and
    // take an object this put reported stored.
    if try tx.removal(of: digest) != nil { try tx.requireDurable() }
    if try !tx.refreshAccess(digest, to: now) {
      try tx.upsert(
        StoreEntry(
          digest: digest, size: size, allocatedBytes: object.status.contentBytes, created: now,
          lastAccess: now, isCompressed: object.isCompressed, storedBytes: object.status.size))
    }
    try tx.countDuplicate(size: size)
    return try tx.entry(for: digest)
  }

  /// Creates a temp file for an object on its way in (`purpose`: `put`,
  /// `zst`, `raw`), `O_EXCL`, mode 0600, in one of `tmp/`'s staging
  /// folders (``StoreLayout/stagingName(_:)``), making the folder if it is
  /// missing; returns it and its name relative to `tmp/`. The folder is
  /// opened first, never through a symbolic link, and the file made in it.
  /// Something else under the folder's name (a file, a link) is passed
  /// over: the file is made in `tmp/` itself.
  func createStagingFile(_ purpose: String) throws(SystemCallError) -> (
    file: FileDescriptor, name: String
  ) {
    let options: FileDescriptor.Options = [.readWrite, .create, .exclusive]
    let name = StoreLayout.stagingName(purpose)
    let slash = name.firstIndex(of: "/") ?? name.startIndex
    let folderName = String(name[..<slash])
    let folder: FileDescriptor
    do throws(SystemCallError) {
      do throws(SystemCallError) {
        folder = try FileDescriptor.open(folderName, in: tmpDirectory, [.directory, .noFollow])
      } catch  where error.errno == .noSuchFileOrDirectory {
        folder = try tmpDirectory.makeStoreFolder(folderName, access: access, staging: true).0
      }
    } catch  where error.errno.meansNotAFolder {
      let flat = StoreLayout.temporaryName(purpose)
      return (try FileDescriptor.open(flat, in: tmpDirectory, options, permissions: 0o600), flat)
    }
    defer { folder.close() }
    let file = try FileDescriptor.open(
      String(name[name.index(after: slash)...]), in: folder, options, permissions: 0o600)
    return (file, name)
  }

  /// Opens `digest`'s fan-out folder, creating it when missing; a folder
  /// created here is made durable in `objects/` before anything is put in
  /// it. Something else under its name (a symbolic link, a file) is never
  /// written through: an error asks for `verify --repair`.
  func fanoutFolder(_ digest: BlobDigest) throws(TroveError) -> FileDescriptor {
    let (folder, created) = try makeFanoutFolder(digest)
    if created {
      do throws(SystemCallError) {
        try objectsDirectory.sync()
      } catch {
        folder.close()
        throw TroveError.system(
          error, "create folder", path: objectsPath + "/" + StoreLayout.fanout(digest))
      }
    }
    return folder
  }

  /// Opens `digest`'s fan-out folder, creating it when missing, and says
  /// whether it was created: the caller makes a new folder durable in
  /// `objects/` before anything put in it can be (``fanoutFolder(_:)``
  /// with an `fsync(2)` of `objects/`; a group commit with the `syncfs(2)`
  /// of its data).
  func makeFanoutFolder(_ digest: BlobDigest) throws(TroveError) -> (
    FileDescriptor, created: Bool
  ) {
    let name = StoreLayout.fanout(digest)
    let folderPath = objectsPath + "/" + name
    do throws(SystemCallError) {
      return try objectsDirectory.makeStoreFolder(name, access: access)
    } catch  where error.errno.meansNotAFolder {
      throw TroveError(
        .corruptObject,
        "store folder '\(folderPath)' is not a folder (a symbolic link or a file): Trove never writes through one",
        path: folderPath, remedy: .repairStore)
    } catch {
      throw TroveError.system(error, "create folder", path: folderPath)
    }
  }
}
