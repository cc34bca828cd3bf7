/// The durability sequence, written once: it publishes a group of staged
/// objects, and a single put is a group of one.
///
/// The sequence, for the group:
/// 1. Objects of one digest inside the group: the first stands for the
///    rest, whose temp files are dropped (they hold the same bytes) and
///    which count as dedup hits once it is in.
/// 2. A look in each fan-out folder: objects the store already holds are
///    not synced (they are hits in step 4).
/// 3. Fan-out folders still missing are made, then the data of the objects
///    not already stored is made durable — one `syncfs(2)` of the store's
///    filesystem for a group, on kernels where it reports write-back
///    errors (Linux 5.8+), which makes the new folders durable too; alone,
///    or where it fails or cannot report, an `fsync(2)` of each file (a file
///    whose sync fails is not published: its own error) and one of
///    `objects/` for the new folders.
/// 4. In one index write transaction: dedup hits first (one may ask for a
///    durable commit, which runs the body again, and nothing is renamed
///    yet); a rename that never replaces of each new file into its fan-out
///    folder, made only while its temp name is still the file the put
///    wrote (``ObjectTable/moveStaged(_:to:in:)``: another member of a
///    group store may not swap bytes in); the new names made durable — one more `syncfs(2)` for a group
///    touching several folders, else an `fsync(2)` of each folder a rename
///    touched (a folder whose sync fails takes its new objects back out:
///    they fail); then the rows, and each object's key binding, of the
///    objects whose names are durable, the keys' lines appended to
///    `references.log` in one write. So the name is durable before the
///    row can be.
/// 5. A failed commit takes every file renamed in it back out: they all
///    fail with the commit's error.
///
/// What a group cannot settle inside its transaction is published alone
/// after it, as a group of one, in order: an object whose name was taken
/// between the look and the rename (a hit, or something that is not an
/// object, which a put alone sets aside into `quarantine/`), one whose
/// bytes were thought stored but were evicted meanwhile, and those a full
/// volume stopped (a fan-out folder or a name with no room, an index
/// journal with no room; files the transaction had renamed go back into
/// `tmp/` first) — so each that finds no room fails alone and gives its
/// blocks back to the volume for the next.
///
/// Every staged file is gone from `tmp/` and its descriptor closed when
/// ``run()`` returns; every object is then published and recorded, or
/// absent with its own error.
struct GroupCommit {
  /// Where one object of the group stands.
  enum State {
    /// Waiting for the next phase.
    case pending
    /// Holds the same digest as the earlier member `leader`: a hit on it.
    case follower(of: Int)
    /// The store held the digest at the look: not synced; a hit.
    case known
    /// Not stored at the look: its data is synced, then it is renamed.
    case fresh
    /// Synced; renamed inside the transaction.
    case synced(allocated: Int64)
    /// Renamed into its fan-out folder by the transaction under way.
    case renamed(allocated: Int64)
    /// Done.
    case settled(PublishOutcome)
    /// To be published alone after the group.
    case alone
    /// Failed, with its own error.
    case failed(TroveError)
  }

  private struct Member {
    let staged: StagedObject
    var state = State.pending
  }

  private let table: ObjectTable
  private var members: [Member]
  /// A group of one: what it finds at its name is settled inside its own
  /// transaction (a hit, or an odd thing set aside), never deferred.
  private let isAlone: Bool
  /// Open fan-out folders by name; names known to be missing.
  private var folders: [String: FileDescriptor] = [:]
  private var missingFolders = Set<String>()
  private var createdFolders: [String] = []
  /// Members published as groups of their own (which traced them).
  private var publishedAlone = Set<Int>()

  /// A commit of `group`. `assumingAbsent`: the look of step 2 is skipped
  /// (the object was thought stored and was not).
  init(_ table: ObjectTable, _ group: [StagedObject], assumingAbsent: Bool = false) {
    self.table = table
    members = group.map { Member(staged: $0, state: assumingAbsent ? .fresh : .pending) }
    isAlone = group.count == 1
  }

  /// Runs the sequence; one outcome per object, in order.
  mutating func run() -> [Result<PublishOutcome, TroveError>] {
    defer { for folder in folders.values { folder.close() } }
    let started = table.trace.now
    assignLeaders()
    look()
    makeFolders()
    let syncedTogether = syncData()
    syncNewFolders(syncedTogether: syncedTogether)
    commit()
    closeSettled()
    publishAlone()
    let results = outcomes()
    if table.trace.isEnabled { trace(results, duration: table.trace.elapsed(since: started)) }
    return results
  }

  /// One line per object at the publish seam: stored, a dedup hit, or
  /// failed, and why. Members published alone were traced by their own
  /// group of one.
  private func trace(_ results: [Result<PublishOutcome, TroveError>], duration: Duration?) {
    let group = isAlone ? "alone" : "in a group of \(members.count)"
    var seen = Set<BlobDigest>()
    for (i, result) in results.enumerated() {
      let staged = members[i].staged
      let isFollower = !seen.insert(staged.digest).inserted
      if publishedAlone.contains(i) { continue }
      let key = staged.binding?.key.map { ", key '\($0)' bound" } ?? ""
      switch result {
      case .success(.stored(let entry)):
        table.trace(
          .publish,
          "stored \(entry.digest) (\(CachePolicy.Quantities.formatSize(entry.size))\(staged.isCompressed ? ", zstd" : ""))",
          why: "new bytes, published \(group)\(key)", duration: duration)
      case .success(.duplicate(let entry)):
        let why =
          if isFollower {
            "same bytes as an earlier input of the group"
          } else { "the store holds these bytes already" }
        table.trace(
          .publish, "dedup hit on \(entry.digest)", why: why + key, duration: duration)
      case .failure(let error):
        table.trace(
          .publish, "did not store \(staged.digest)", why: error.description, duration: duration)
      }
    }
  }

  // MARK: Phases before the transaction

  private mutating func assignLeaders() {
    var first = [BlobDigest: Int]()
    for i in members.indices {
      if let leader = first[members[i].staged.digest] {
        members[i].state = .follower(of: leader)
        try? table.tmpDirectory.removeFile(members[i].staged.name)
      } else {
        first[members[i].staged.digest] = i
      }
    }
  }

  /// Each form looked for once (``ObjectTable/find(_:)`` looks at the raw
  /// form twice, for a conversion racing past): a miss here only means the
  /// file is synced, and the transaction looks again before it renames.
  private mutating func look() {
    for i in members.indices where isPending(i) {
      let digest = members[i].staged.digest
      do throws(TroveError) {
        guard let folder = try folder(of: digest) else {
          members[i].state = .fresh
          continue
        }
        var held = try table.status(digest, compressed: false, in: folder) != nil
        if !held { held = try table.status(digest, compressed: true, in: folder) != nil }
        members[i].state = held ? .known : .fresh
      } catch {
        members[i].state = .failed(error)
      }
    }
  }

  /// The missing folders of fresh objects, made before the data sync, which
  /// makes them durable with the data (else one `fsync(2)` of `objects/`).
  /// A folder the volume has no room for: in a group, its objects are
  /// published alone after it.
  private mutating func makeFolders() {
    var errors = [String: TroveError]()
    for i in members.indices where isFresh(i) {
      let digest = members[i].staged.digest
      let name = StoreLayout.fanout(digest)
      if folders[name] == nil, errors[name] == nil {
        do throws(TroveError) {
          let (folder, made) = try table.makeFanoutFolder(digest)
          folders[name] = folder
          missingFolders.remove(name)
          if made { createdFolders.append(name) }
        } catch {
          errors[name] = error
        }
      }
      if let error = errors[name] {
        members[i].state = error.code == .noSpace && !isAlone ? .alone : .failed(error)
      }
    }
  }

  /// Makes the data of the fresh objects durable and notes each file's
  /// allocated bytes; whether one `syncfs(2)` did it for all. When that
  /// fails, some write of this filesystem was lost (perhaps not ours): each
  /// file's own `fsync(2)` says whose.
  private mutating func syncData() -> Bool {
    var ready: [Int] = []
    for i in members.indices where isFresh(i) {
      do throws(SystemCallError) {
        try members[i].staged.file.setPermissions(StoreLayout.objectPermissions)
        ready.append(i)
      } catch {
        members[i].state = .failed(storeError(error, i))
      }
    }
    let together = ready.count > 1 && Sys.syncfsReportsErrors && table.syncFilesystem()
    for i in ready {
      do throws(SystemCallError) {
        if !together { try members[i].staged.file.sync() }
        members[i].state = .synced(allocated: try members[i].staged.file.status().contentBytes)
      } catch {
        members[i].state = .failed(storeError(error, i))
      }
    }
    return together
  }

  /// Folders made by ``makeFolders()`` that the data's `syncfs(2)` did not
  /// make durable: one `fsync(2)` of `objects/`; if it fails, they may not
  /// outlast a power loss, and nothing goes in them.
  private mutating func syncNewFolders(syncedTogether: Bool) {
    guard !createdFolders.isEmpty, !syncedTogether else { return }
    do throws(SystemCallError) {
      try table.objectsDirectory.sync()
    } catch {
      let lost = Set(createdFolders)
      for i in members.indices {
        guard case .synced = members[i].state else { continue }
        let name = StoreLayout.fanout(members[i].staged.digest)
        guard lost.contains(name) else { continue }
        members[i].state = .failed(
          TroveError.system(error, "create folder", path: table.objectsPath + "/" + name))
      }
    }
  }

  // MARK: The transaction

  /// Step 4, and step 5 when the commit fails.
  private mutating func commit() {
    let work = members.map(\.state)
    let needed = work.contains { state in
      switch state {
      case .known, .synced: return true
      default: return false
      }
    }
    guard needed else { return }
    let now = currentTimeNanoseconds()
    var inside = work
    do throws(TroveError) {
      let count = members.count
      try table.index().write(
        count == 1 ? "store \(members[0].staged.digest)" : "store \(count) objects"
      ) {
        (tx) throws(TroveError) in
        // The body may run again (durably): it starts afresh.
        inside = work
        // The keys' journal lines, appended once for the group.
        var lines: [JournalRecord] = []
        try recordHits(tx, now: now, &inside, &lines)
        var touched = [String: [Int]]()
        for i in inside.indices {
          guard case .synced(let allocated) = inside[i] else { continue }
          inside[i] = try rename(i, allocated: allocated, tx, now: now, &lines)
          if case .renamed = inside[i] {
            touched[StoreLayout.fanout(members[i].staged.digest), default: []].append(i)
          }
        }
        syncNames(touched, &inside)
        try writeRows(tx, now: now, &inside, &lines)
        table.journal(lines, tx)
      }
      for i in inside.indices { members[i].state = inside[i] }
    } catch {
      undo(after: error, inside)
    }
  }

  /// Dedup hits, before anything is renamed. A fresh object's look found
  /// neither form, and nothing changes `objects/` while the transaction is
  /// open: of what another process published since, the other form is
  /// looked for here, and the rename, which never replaces, finds its own.
  private func recordHits(
    _ tx: IndexSession, now: Int64, _ work: inout [State], _ lines: inout [JournalRecord]
  )
    throws(TroveError)
  {
    for i in work.indices {
      let staged = members[i].staged
      let folder = folders[StoreLayout.fanout(staged.digest)]
      switch work[i] {
      case .known:
        if let entry = try table.hit(tx, staged.digest, size: staged.size, now: now, in: folder) {
          try table.record(staged.binding, for: staged.digest, tx, journalling: &lines)
          try recordManifest(of: staged, entry, tx)
          work[i] = .settled(.duplicate(entry))
        } else {
          work[i] = .alone  // evicted since the look: its file was not synced
        }
      case .synced:
        guard let folder,
          try table.status(staged.digest, compressed: !staged.isCompressed, in: folder) != nil,
          let entry = try table.hit(tx, staged.digest, size: staged.size, now: now, in: folder)
        else { continue }
        try table.record(staged.binding, for: staged.digest, tx, journalling: &lines)
        try recordManifest(of: staged, entry, tx)
        work[i] = .settled(.duplicate(entry))
      default: continue
      }
    }
  }

  /// Renames member `i`'s file into its fan-out folder, never replacing,
  /// and returns what became of it: failed, storing nothing, when its temp
  /// name was no longer the file it wrote. Something at its name
  /// settles a group of one here (a hit; something that is not an object
  /// is set aside first) and a member of a larger group alone, after; so
  /// does a folder with no room for the name.
  private func rename(
    _ i: Int, allocated: Int64, _ tx: IndexSession, now: Int64, _ lines: inout [JournalRecord]
  )
    throws(TroveError) -> State
  {
    let staged = members[i].staged
    let name = StoreLayout.objectName(staged.digest, compressed: staged.isCompressed)
    guard let folder = folders[StoreLayout.fanout(staged.digest)] else {
      return .failed(table.notFound(staged.digest))
    }
    if isAlone, let odd = try? folder.status(of: name, followSymlinks: false), !odd.isRegular {
      // Something that is not an object (a link, a folder, a FIFO) makes
      // way for the real one, kept in quarantine.
      var report = ReconcileReport()
      try table.setAside(
        name, inFolder: StoreLayout.fanout(staged.digest), repair: true, into: &report)
    }
    do throws(SystemCallError) {
      guard try table.moveStaged(staged, to: name, in: folder) else {
        return .failed(table.stagedFileReplaced(staged))
      }
    } catch  where !isAlone && (error.errno == .fileExists || error.errno == .noSpace) {
      return .alone
    } catch  where error.errno == .fileExists {
      // Only a lock that was not honoured gets here: a file appeared
      // between the look and the rename. It holds these bytes if it is an
      // object at all.
      guard let entry = try table.hit(tx, staged.digest, size: staged.size, now: now, in: folder)
      else {
        return .failed(
          table.notAFile(staged.digest, compressed: staged.isCompressed, what: "not a regular file")
        )
      }
      try table.record(staged.binding, for: staged.digest, tx, journalling: &lines)
      return .settled(.duplicate(entry))
    } catch {
      return .failed(storeError(error, i))
    }
    return .renamed(allocated: allocated)
  }

  /// The new names made durable before any row: one `syncfs(2)` for several
  /// folders (their renames are in the filesystem's journal), or, when it
  /// fails or cannot report a failure, an `fsync(2)` of each folder. A
  /// folder whose sync fails takes its new objects back out.
  private func syncNames(_ touched: [String: [Int]], _ work: inout [State]) {
    let together = touched.count > 1 && Sys.syncfsReportsErrors && table.syncFilesystem()
    guard !together else { return }
    for (name, renamed) in touched {
      do throws(SystemCallError) {
        try folders[name]?.sync()
      } catch {
        for i in renamed {
          let staged = members[i].staged
          try? folders[name]?.removeFile(
            StoreLayout.objectName(staged.digest, compressed: staged.isCompressed))
          work[i] = .failed(storeError(error, i))
        }
      }
    }
  }

  /// The rows of the renamed objects and their bindings, then the hits of
  /// the followers on their leaders, now in place.
  private func writeRows(
    _ tx: IndexSession, now: Int64, _ work: inout [State], _ lines: inout [JournalRecord]
  ) throws(TroveError) {
    for i in work.indices {
      guard case .renamed(let allocated) = work[i] else { continue }
      let staged = members[i].staged
      let entry = StoreEntry(
        digest: staged.digest, size: staged.size, allocatedBytes: allocated, created: now,
        lastAccess: now, isCompressed: staged.isCompressed, storedBytes: staged.storedBytes)
      try tx.upsert(entry)
      if let skip = staged.skipped { try tx.countSkip(skip) }
      try table.record(staged.binding, for: staged.digest, tx, journalling: &lines)
      try recordManifest(of: staged, entry, tx)
      work[i] = .settled(.stored(entry))
    }
    for i in work.indices {
      guard case .follower(let leader) = work[i], leaderIsIn(work[leader]) else { continue }
      let staged = members[i].staged
      let folder = folders[StoreLayout.fanout(staged.digest)]
      if let entry = try table.hit(tx, staged.digest, size: staged.size, now: now, in: folder) {
        try table.record(staged.binding, for: staged.digest, tx, journalling: &lines)
        work[i] = .settled(.duplicate(entry))
      }
    }
  }

  /// The chunks a put cut, recorded with the object's row or hit: a raw
  /// object's (a compressed one has no blocks to share them with).
  private func recordManifest(of staged: StagedObject, _ entry: StoreEntry, _ tx: IndexSession)
    throws(TroveError)
  {
    guard let manifest = staged.manifest, !entry.isCompressed else { return }
    try tx.insertManifest(manifest, of: staged.digest)
  }

  private func leaderIsIn(_ state: State) -> Bool {
    if case .settled = state { true } else { false }
  }

  /// Step 5: nothing of the transaction stands. Files it renamed go back
  /// out. A journal with no room, in a group: they go back into `tmp/`,
  /// and every object it held is published alone, so each that finds no
  /// room fails and frees its blocks for the next. Otherwise they all fail
  /// with the commit's error; their keys are journalled as the index has them.
  private mutating func undo(after error: TroveError, _ inside: [State]) {
    let renamed = inside.indices.filter { i in
      switch inside[i] {
      case .renamed, .settled(.stored): return true
      default: return false
      }
    }
    // Bind lines the rolled-back transaction appended to the journal: the
    // journal is told what the index holds of those keys instead.
    for i in inside.indices {
      guard case .settled = inside[i] else { continue }
      for key in members[i].staged.binding?.keys ?? [] { table.journalAsIs(key: key) }
    }
    if error.code == .noSpace, !isAlone {
      let back = table.takeBack(renamed.map { members[$0].staged })
      let returned = Set(zip(renamed, back).filter(\.1).map(\.0))
      for i in members.indices {
        if renamed.contains(i), !returned.contains(i) {
          table.undoPublish(members[i].staged)
          members[i].state = .failed(error)
          continue
        }
        if case .failed(let inner) = inside[i] {
          // Failed inside for a cause of its own (its folder's sync): its
          // file is gone; that error stands.
          members[i].state = .failed(inner)
          continue
        }
        switch members[i].state {
        case .known, .synced, .pending, .fresh, .alone: members[i].state = .alone
        default: continue
        }
      }
      return
    }
    for i in renamed { table.undoPublish(members[i].staged) }
    for i in members.indices {
      if case .failed = members[i].state { continue }
      members[i].state = .failed(error)
      if case .settled = inside[i] { continue }  // journalled above
      for key in members[i].staged.binding?.keys ?? [] { table.journalAsIs(key: key) }
    }
  }

  // MARK: After the transaction

  /// Drops the temp files of members that are settled or failed (a
  /// renamed file is no longer there) and closes them; a file is closed
  /// as soon as it is settled, so that the blocks of one that failed go
  /// back to the volume (an open file keeps them) before the next is
  /// published alone.
  private mutating func closeSettled() {
    for i in members.indices {
      if case .alone = members[i].state { continue }
      if case .follower = members[i].state {
      } else if case .settled(.stored) = members[i].state {
      } else {
        try? table.tmpDirectory.removeFile(members[i].staged.name)
      }
      members[i].staged.file.close()
    }
  }

  /// Publishes, in order, the members set aside as groups of one; their
  /// followers are hits on them once they are in.
  private mutating func publishAlone() {
    for i in members.indices {
      guard case .alone = members[i].state else { continue }
      // Alone already, it was thought stored and was not: no look again.
      var single = GroupCommit(table, [members[i].staged], assumingAbsent: isAlone)
      members[i].state = single.runAlone()
      publishedAlone.insert(i)
      guard case .settled = members[i].state else { continue }
      for j in members.indices {
        guard case .follower(let leader) = members[j].state, leader == i else { continue }
        let staged = members[j].staged
        do throws(TroveError) {
          if let entry = try table.recordHit(
            staged.digest, size: staged.size, binding: staged.binding, tracing: false)
          {
            members[j].state = .settled(.duplicate(entry))
          }
        } catch {
          members[j].state = .failed(error)
        }
      }
    }
  }

  /// ``run()`` for a group of one, returning its member's final state.
  private mutating func runAlone() -> State {
    let outcome = run()[0]
    switch outcome {
    case .success(let published): return .settled(published)
    case .failure(let error): return .failed(error)
    }
  }

  private func outcomes() -> [Result<PublishOutcome, TroveError>] {
    members.indices.map { i in
      switch members[i].state {
      case .settled(let outcome): return .success(outcome)
      case .failed(let error): return .failure(error)
      case .follower(let leader):
        if case .failed(let error) = members[leader].state { return .failure(error) }
      default: break
      }
      let digest = members[i].staged.digest
      return .failure(
        TroveError(
          .ioError, "cannot store \(digest): it was not published", path: table.path(digest)))
    }
  }

  // MARK: Helpers

  private func isPending(_ i: Int) -> Bool {
    if case .pending = members[i].state { true } else { false }
  }

  private func isFresh(_ i: Int) -> Bool {
    if case .fresh = members[i].state { true } else { false }
  }

  /// `digest`'s fan-out folder, opened (or found missing) once per group.
  private mutating func folder(of digest: BlobDigest) throws(TroveError) -> FileDescriptor? {
    let name = StoreLayout.fanout(digest)
    if let open = folders[name] { return open }
    if missingFolders.contains(name) { return nil }
    guard let folder = try table.openFolder(of: digest) else {
      missingFolders.insert(name)
      return nil
    }
    folders[name] = folder
    return folder
  }

  private func storeError(_ error: SystemCallError, _ i: Int) -> TroveError {
    let staged = members[i].staged
    return TroveError.system(
      error, "store", path: table.path(staged.digest, compressed: staged.isCompressed))
  }
}
