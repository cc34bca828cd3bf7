#if canImport(Glibc)
  import Glibc
#endif

/// Publishing: the one durability sequence, and dedup hits.
extension ObjectTable {
  /// Publishes `staged` as its digest's object, or — when the store
  /// already holds those bytes — drops it and counts a dedup hit. The
  /// staged file is gone from `tmp/` when this returns or throws.
  ///
  /// The durability sequence: data sync, fan-out folder, then in one index
  /// transaction a rename that never replaces, the row, and a sync of the
  /// folder. A failure after the rename undoes it: the put throws and
  /// leaves nothing. `binding`, when given, is bound in the transaction
  /// that publishes the object or counts its hit.
  func publish(_ staged: StagedObject, binding: KeyRequest? = nil) throws(TroveError)
    -> PublishOutcome
  {
    let digest = staged.digest
    let objectPath = path(digest, compressed: staged.isCompressed)
    let temp = staged.name
    var renamed = false
    defer { if !renamed { try? tmpDirectory.removeFile(temp) } }

    // Known content: drop the copy before paying for a sync.
    if try locate(digest) != nil,
      let entry = try recordHit(digest, size: staged.size, binding: binding)
    {
      return .duplicate(entry)
    }
    let allocated = try attempt("store", objectPath) { () throws(SystemCallError) -> Int64 in
      try staged.file.setPermissions(StoreLayout.objectPermissions)
      try staged.file.sync()
      return try staged.file.status().contentBytes
    }
    let folder = try fanoutFolder(digest)
    defer { folder.close() }
    let now = currentTimeNanoseconds()
    let entry = StoreEntry(
      digest: digest, size: staged.size, allocatedBytes: allocated, created: now, lastAccess: now,
      isCompressed: staged.isCompressed, storedBytes: staged.storedBytes)
    let outcome: PublishOutcome
    do throws(TroveError) {
      outcome = try index().write("store \(digest)") {
        (tx) throws(TroveError) -> PublishOutcome in
        if let hit = try hit(tx, digest, size: staged.size, now: now) {
          try record(binding, for: digest, tx)
          return .duplicate(hit)
        }
        // Something that is not an object under its name (a link, a
        // folder, a FIFO) makes way for the real one, kept in quarantine.
        let name = StoreLayout.objectName(digest, compressed: staged.isCompressed)
        if let odd = try? folder.status(of: name, followSymlinks: false), !odd.isRegular {
          var report = ReconcileReport()
          try setAside(name, inFolder: StoreLayout.fanout(digest), repair: true, into: &report)
        }
        do throws(SystemCallError) {
          try tmpDirectory.renameWithoutReplacing(
            temp, to: StoreLayout.objectName(digest, compressed: staged.isCompressed), in: folder)
        } catch  where error.errno == .fileExists {
          // Only a lock that was not honoured gets here: a file appeared
          // between the look above and the rename. It holds these bytes
          // if it is an object at all.
          if let hit = try hit(tx, digest, size: staged.size, now: now) {
            try record(binding, for: digest, tx)
            return .duplicate(hit)
          }
          throw notAFile(digest, compressed: staged.isCompressed, what: "not a regular file")
        } catch {
          throw TroveError.system(error, "store", path: objectPath)
        }
        renamed = true
        do throws(TroveError) {
          try tx.upsert(entry)
          if let skip = staged.skipped { try tx.countSkip(skip) }
          try record(binding, for: digest, tx)
          // The new name is durable before the row can be: whatever survives
          // a power loss, no row names a file that did not.
          try attempt("store", objectPath) { () throws(SystemCallError) in try folder.sync() }
        } catch {
          // Not published after all: no other writer can have counted on
          // the file (they wait for this transaction), so it goes.
          try? folder.removeFile(StoreLayout.objectName(digest, compressed: staged.isCompressed))
          throw error
        }
        return .stored(entry)
      }
    } catch {
      // Renamed, but the commit failed (a full disk, an I/O error, a busy
      // network filesystem): take the file back, in a transaction of its
      // own, unless another writer has recorded it since.
      if renamed { undoPublish(staged) }
      for key in binding?.keys ?? [] { journalAsIs(key: key) }
      throw error
    }
    return outcome
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

  /// Counts a put of bytes the store may already hold: if `digest`'s
  /// object is there, refreshes its last access (adopting it if the index
  /// lost its row) and counts the hit, all in one transaction. Nil when
  /// the object is not there — it may have just been evicted — and the
  /// caller must store its own copy. `binding`, when given, is bound in
  /// the same transaction when the object is there.
  func recordHit(_ digest: BlobDigest, size: Int64, binding: KeyRequest? = nil)
    throws(TroveError) -> StoreEntry?
  {
    let now = currentTimeNanoseconds()
    do throws(TroveError) {
      return try index().write("record duplicate \(digest)") { (tx) throws(TroveError) in
        guard let entry = try hit(tx, digest, size: size, now: now) else { return nil }
        try record(binding, for: digest, tx)
        return entry
      }
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
    if let folder { found = try locate(digest, in: folder) } else { found = try locate(digest) }
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
        folder = try tmpDirectory.makeStoreFolder(folderName, access: access).0
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
        "store folder '\(folderPath)' is not a folder (a symbolic link or a file): Trove never writes through one; run 'trove verify --repair'",
        path: folderPath)
    } catch {
      throw TroveError.system(error, "create folder", path: folderPath)
    }
  }
}
