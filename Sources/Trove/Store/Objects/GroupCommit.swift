/// Group commit: many staged objects published by one durability sequence.
extension ObjectTable {
  /// Publishes every object of `group` as ``publish(_:binding:)`` publishes
  /// one, with the sequence's costs paid once for the group instead of once
  /// per object; returns one outcome per object, in order. Each staged file
  /// is gone from `tmp/` and its descriptor closed when this returns, and
  /// every object is either published and recorded or absent, with its own
  /// error.
  ///
  /// The sequence, for the group:
  /// 1. Objects of one digest inside the group: the first stands for the
  ///    rest, whose temp files are dropped (they hold the same bytes) and
  ///    which count as dedup hits once it is in.
  /// 2. Fan-out folders still missing are made, then the data: the files
  ///    of objects not already stored are made durable together — one
  ///    `syncfs(2)` of the store's filesystem, on kernels where it reports
  ///    write-back errors (Linux 5.8+), which makes the new folders durable
  ///    too; where it fails or cannot report, an `fsync(2)` of each file (a
  ///    file whose sync fails is not published: its own error) and one of
  ///    `objects/` for the new folders.
  /// 3. In one index write transaction: dedup hits for digests the store
  ///    holds (for an object the look before the sync did not find, only
  ///    its other form is looked for again: the rename finds its own); a
  ///    rename that never replaces of each new file into its
  ///    fan-out folder; the new names made durable — one more `syncfs(2)`,
  ///    or where it fails or cannot report, an `fsync(2)` of each folder a
  ///    rename touched, once (a folder whose sync fails takes its new
  ///    objects back out: they fail); then the rows of the objects whose
  ///    names are durable. So the name is durable before the row can be, as
  ///    for one object.
  /// 4. A failed commit takes every file renamed in it back out: they all
  ///    fail with the commit's error.
  ///
  /// A volume too full for the group (a fan-out folder that cannot be
  /// made, a rename that finds no room in its folder, or an index
  /// transaction that finds no room for its journal):
  /// the objects it stopped are published alone afterwards, in order, by
  /// ``publish(_:binding:)`` — their files renamed back into `tmp/` when
  /// the transaction had renamed them — so that each one that finds no
  /// room fails alone and gives its blocks back to the volume for the
  /// next: the objects that fit are stored, and each of the others fails
  /// with its own error.
  ///
  /// An object whose bytes were thought stored but were evicted meanwhile,
  /// or whose name was taken between the look and the rename, is published
  /// alone afterwards by ``publish(_:binding:)``.
  func publish(group: [StagedObject]) -> [Result<PublishOutcome, TroveError>] {
    var failures = [Int: TroveError]()
    var leaders: [Int] = []
    var followers = [Int: [Int]]()
    var first = [BlobDigest: Int]()
    for (i, staged) in group.enumerated() {
      if let leader = first[staged.digest] {
        followers[leader, default: []].append(i)
        try? tmpDirectory.removeFile(staged.name)
      } else {
        first[staged.digest] = i
        leaders.append(i)
      }
    }
    // Each fan-out folder opened (or found missing) once; leaders whose
    // bytes the store holds are not synced (a hit below).
    var folders = [String: FileDescriptor]()
    var missing = Set<String>()
    defer { for folder in folders.values { folder.close() } }
    var known = Set<Int>()
    for i in leaders {
      let name = StoreLayout.fanout(group[i].digest)
      do throws(TroveError) {
        if folders[name] == nil, !missing.contains(name) {
          if let folder = try openFolder(of: group[i].digest) {
            folders[name] = folder
          } else {
            missing.insert(name)
          }
        }
        // Each form once (``locate(_:in:)`` looks at the raw form twice, for
        // a conversion racing past): a miss here only means the file is
        // synced, and the transaction looks again before it renames.
        if let folder = folders[name] {
          if try status(group[i].digest, compressed: false, in: folder) != nil {
            known.insert(i)
          } else if try status(group[i].digest, compressed: true, in: folder) != nil {
            known.insert(i)
          }
        }
      } catch {
        failures[i] = error
      }
    }
    let fresh = leaders.filter { !known.contains($0) && failures[$0] == nil }
    // The folders still missing, made before the data sync, which makes
    // them durable with the data (else one fsync of `objects/` for all of
    // them, below). A folder the volume has no room for: its objects are
    // published alone after the group.
    var folderErrors = [String: TroveError]()
    var created: [String] = []
    var roomless: [Int] = []
    for i in fresh {
      let name = StoreLayout.fanout(group[i].digest)
      if folders[name] == nil, folderErrors[name] == nil {
        do throws(TroveError) {
          let (folder, made) = try makeFanoutFolder(group[i].digest)
          folders[name] = folder
          if made { created.append(name) }
        } catch {
          folderErrors[name] = error
        }
      }
      if let error = folderErrors[name] {
        if error.code == .noSpace { roomless.append(i) } else { failures[i] = error }
      }
    }
    let (allocated, syncedTogether) = syncData(
      group, fresh.filter { failures[$0] == nil }, failures: &failures)
    if !created.isEmpty, !syncedTogether {
      do throws(SystemCallError) {
        try objectsDirectory.sync()
      } catch {
        // The new folders may not outlast a power loss: nothing goes in them.
        let lost = Set(created)
        for i in fresh
        where failures[i] == nil && lost.contains(StoreLayout.fanout(group[i].digest)) {
          failures[i] = TroveError.system(
            error, "create folder", path: objectsPath + "/" + StoreLayout.fanout(group[i].digest))
        }
      }
    }

    let now = currentTimeNanoseconds()
    var outcomes = [Int: PublishOutcome]()
    var renamed: [Int] = []
    var alone: [Int] = []
    var failedInside = [Int: TroveError]()
    do throws(TroveError) {
      outcomes = try index().write("store \(group.count) objects") {
        (tx) throws(TroveError) -> [Int: PublishOutcome] in
        // The body may run again (durably): it starts afresh.
        renamed = []
        alone = []
        failedInside = [:]
        var out = [Int: PublishOutcome]()
        // Hits first: one may ask for a durable commit (a removal it calls
        // off), which reruns this body, and nothing is renamed yet.
        for i in leaders where failures[i] == nil {
          let staged = group[i]
          let folder = folders[StoreLayout.fanout(staged.digest)]
          // A fresh object's look before the sync found neither form, and
          // nothing changes `objects/` while this transaction is open: of
          // what another process published in between, the other form is
          // looked for here, and the rename below, which never replaces,
          // finds its own (that object is then settled alone).
          if let folder, !known.contains(i),
            try status(staged.digest, compressed: !staged.isCompressed, in: folder) == nil
          {
            continue
          }
          if let entry = try hit(tx, staged.digest, size: staged.size, now: now, in: folder) {
            out[i] = .duplicate(entry)
          } else if known.contains(i) {
            alone.append(i)  // evicted since the look: its file was not synced
          }
        }
        var touched = [String: [Int]]()
        for i in fresh where failures[i] == nil && out[i] == nil {
          let staged = group[i]
          let fanout = StoreLayout.fanout(staged.digest)
          guard let folder = folders[fanout] else { continue }
          let name = StoreLayout.objectName(staged.digest, compressed: staged.isCompressed)
          do throws(SystemCallError) {
            try tmpDirectory.renameWithoutReplacing(staged.name, to: name, in: folder)
          } catch  where error.errno == .fileExists || error.errno == .noSpace {
            // Appeared since the look, or something that is not an object
            // (a link, a folder) under its name: settled alone, after, as a
            // put alone settles it (a hit, or the odd thing set aside). Or
            // no room for the name in its folder: tried alone, after, once
            // the objects that failed have given their blocks back.
            alone.append(i)
            continue
          } catch {
            failedInside[i] = TroveError.system(
              error, "store", path: path(staged.digest, compressed: staged.isCompressed))
            continue
          }
          renamed.append(i)
          touched[fanout, default: []].append(i)
        }
        // The new names durable before any row: one syncfs for all the
        // folders (their renames are in the filesystem's journal), or, when
        // it fails or cannot report a failure, an fsync of each folder.
        var namesSynced = false
        if touched.count > 1, Sys.syncfsReportsErrors {
          namesSynced = syncFilesystem()
        }
        for (fanout, members) in touched where !namesSynced {
          do throws(SystemCallError) {
            try folders[fanout]?.sync()
          } catch {
            for i in members {
              let staged = group[i]
              try? folders[fanout]?.removeFile(
                StoreLayout.objectName(staged.digest, compressed: staged.isCompressed))
              failedInside[i] = TroveError.system(
                error, "store", path: path(staged.digest, compressed: staged.isCompressed))
            }
            renamed.removeAll { members.contains($0) }
          }
        }
        for i in renamed {
          let staged = group[i]
          let entry = StoreEntry(
            digest: staged.digest, size: staged.size, allocatedBytes: allocated[i] ?? staged.size,
            created: now, lastAccess: now, isCompressed: staged.isCompressed,
            storedBytes: staged.storedBytes)
          try tx.upsert(entry)
          if let skip = staged.skipped { try tx.countSkip(skip) }
          out[i] = .stored(entry)
        }
        // The others of each digest: hits on what is now in place.
        for (leader, others) in followers where out[leader] != nil {
          for i in others {
            let folder = folders[StoreLayout.fanout(group[i].digest)]
            if let entry = try hit(tx, group[i].digest, size: group[i].size, now: now, in: folder) {
              out[i] = .duplicate(entry)
            }
          }
        }
        return out
      }
    } catch  where error.code == .noSpace {
      // No room for the index's journal: nothing of the transaction
      // stands. What it renamed goes back to `tmp/`, and every object it
      // held is published alone below: each that finds no room fails and
      // frees its blocks for the next.
      let back = takeBack(renamed.map { group[$0] })
      for (i, returned) in zip(renamed, back) where !returned {
        undoPublish(group[i])
        failures[i] = error
      }
      alone = leaders.filter { failures[$0] == nil && failedInside[$0] == nil }
      roomless = []
      renamed = []
    } catch {
      // Nothing of the transaction stands: take back what it renamed.
      for i in renamed { undoPublish(group[i]) }
      for i in leaders + followers.values.flatMap({ $0 }) where failures[i] == nil {
        failures[i] = error
      }
      renamed = []
      alone = []
      roomless = []
    }
    for (i, error) in failedInside { failures[i] = error }
    alone = (alone + roomless).sorted()
    // Objects of the group not yet settled drop their temp files (a failed
    // or known leader's), unless they are published alone now; each file
    // is closed as soon as it is settled, so that the blocks of one that
    // failed go back to the volume (an open file keeps them) before the
    // next is published alone.
    let waiting = Set(alone)
    for i in leaders where !renamed.contains(i) && !waiting.contains(i) {
      try? tmpDirectory.removeFile(group[i].name)
    }
    for i in group.indices where !waiting.contains(i) { group[i].file.close() }
    for i in alone {
      do throws(TroveError) {
        outcomes[i] = try publish(group[i])
        for other in followers[i] ?? [] {
          if let entry = try recordHit(group[other].digest, size: group[other].size) {
            outcomes[other] = .duplicate(entry)
          }
        }
      } catch {
        failures[i] = error
      }
      group[i].file.close()
    }
    return group.indices.map { i in
      if let outcome = outcomes[i] { return .success(outcome) }
      let leader = first[group[i].digest] ?? i
      if let error = failures[i] ?? failures[leader] { return .failure(error) }
      return .failure(
        TroveError(
          .ioError, "cannot store \(group[i].digest): it was not published",
          path: path(group[i].digest)))
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

  /// Makes the data of `group[fresh]` durable and returns each file's
  /// allocated bytes; a file that cannot be synced gets its error in
  /// `failures`. One `syncfs(2)` when it can report a lost write, else
  /// (or when it fails) an `fsync(2)` per file, which tells which file
  /// lost its bytes.
  private func syncData(
    _ group: [StagedObject], _ fresh: [Int], failures: inout [Int: TroveError]
  ) -> (allocated: [Int: Int64], syncedTogether: Bool) {
    var ready: [Int] = []
    for i in fresh {
      do throws(SystemCallError) {
        try group[i].file.setPermissions(StoreLayout.objectPermissions)
        ready.append(i)
      } catch {
        failures[i] = TroveError.system(error, "store", path: path(group[i].digest))
      }
    }
    // When the sync fails, some write of this filesystem was lost
    // (perhaps not ours): each file's own sync says whose.
    let syncedTogether = ready.count > 1 && Sys.syncfsReportsErrors && syncFilesystem()
    var allocated = [Int: Int64]()
    for i in ready {
      do throws(SystemCallError) {
        if !syncedTogether { try group[i].file.sync() }
        allocated[i] = try group[i].file.status().contentBytes
      } catch {
        failures[i] = TroveError.system(error, "store", path: path(group[i].digest))
      }
    }
    return (allocated, syncedTogether)
  }
}
