import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The ObjectTable's removals, which its ``RemovalEngine`` carries out.
extension ObjectTable {
  /// The engine that removes this table's objects.
  var removals: RemovalEngine { RemovalEngine(objects: self, tuning: removalTuning) }

  /// Evicts those of `entries` that are still evictable as they were
  /// chosen (see ``RemovalEngine/evict(_:now:part:)``).
  func evict(_ entries: [StoreEntry], now: Int64, part: Int = RemovalEngine.removalPart)
    throws(TroveError) -> (evicted: [Bool], failures: [TroveError])
  {
    try removals.evict(entries, now: now, part: part)
  }

  /// Removes `digest`'s object whatever its state (see
  /// ``RemovalEngine/remove(_:)``); whether there was anything.
  func drop(_ digest: BlobDigest) throws(TroveError) -> Bool {
    try removals.remove(digest)
  }

  /// Removes `digests`' objects whatever their state (see
  /// ``RemovalEngine/remove(_:part:)``).
  func drop(_ digests: [BlobDigest], part: Int = RemovalEngine.removalPart) throws(TroveError)
    -> (present: [Bool], failures: [TroveError])
  {
    try removals.remove(digests, part: part)
  }

  /// Finishes the removals whose removers stopped between the two steps
  /// (see ``RemovalEngine/finishStale(olderThan:)``).
  func finishStaleRemovals(olderThan age: Int64)
    throws(TroveError) -> (finished: Int, failure: TroveError?)
  {
    try removals.finishStale(olderThan: age)
  }
}

/// Removing objects in two steps — eviction, `rm`, the stale removals a
/// killed remover left — and the records that stand between the steps.
///
/// The first step, in one durable index transaction, deletes the objects'
/// rows and records each removal: the files it is to unlink, named by
/// their identity (inode and write time). The second, in another, takes
/// the records that still stand and unlinks those files, if they are
/// still those files. Anything that wants an object in between (a dedup
/// hit; for an eviction also a read, a pin, a key) takes its record, and
/// so calls the removal off. Every unlink happens under the index's write
/// lock.
///
/// The rest of the store calls only this type's few methods (and, inside
/// its own transactions, ``underway(_:_:)`` and ``callOff(_:_:)``); the
/// ``ObjectTable`` owns it and stays the one owner of object state.
struct RemovalEngine: Sendable {
  let objects: ObjectTable
  /// Which of its optimisations the engine makes.
  let tuning: RemovalTuning

  /// Evicts those of `entries` that are still evictable as they were
  /// chosen — last access unchanged, no unexpired pin — in two steps:
  /// one index transaction deletes their rows and records the removals;
  /// a second unlinks the files of those whose removal still stands (a
  /// dedup hit, a read or a pin in between keeps the object) and removes
  /// their keys. Many entries go in parts, two to a transaction (see
  /// ``removeInParts(_:_:part:explicit:firstStep:)``). A crash between or within the
  /// steps leaves files whose row is gone — adopted again by the next read
  /// or reconcile — never a row whose file is gone. A file that cannot be
  /// unlinked (an immutable file: EPERM) keeps its object, and the others
  /// go all the same. Returns which were evicted, and why each object that
  /// was not could not be removed.
  ///
  /// A reader that already opened an object keeps reading correct bytes;
  /// clones, copies and hard links made from it earlier are not touched.
  func evict(_ entries: [StoreEntry], now: Int64, part: Int = removalPart)
    throws(TroveError) -> (evicted: [Bool], failures: [TroveError])
  {
    guard !entries.isEmpty else { return ([], []) }
    var deleted = [Bool](repeating: false, count: entries.count)
    let finished = try removeInParts(entries.map(\.digest), "evict", part: part, explicit: false) {
      (range, lookups, tx) throws(TroveError) -> (digests: [BlobDigest], rows: [Int64]) in
      let part = Array(entries[range])
      let rows = try tx.deleteIfEvictable(part, now: now, bulkFrom: tuning.bulkRemovalMinimum)
      for (position, row) in zip(range, rows) { deleted[position] = row }
      let looked = try lookups.wait()
      let ids = try tx.insertRemovals(
        part.indices.filter { rows[$0] }.map { looked[$0] }, now: now, perRow: recordsPerRow)
      return (part.indices.filter { rows[$0] }.map { part[$0].digest }, ids)
    }
    // What was evicted stays evicted; the files that could not be unlinked
    // are the caller's to report.
    let evicted = entries.indices.map {
      deleted[$0] && finished.removed.contains(entries[$0].digest)
    }
    return (evicted, finished.failures)
  }

  /// How many objects the first transaction of a removal takes at once.
  static let removalPart = 8192

  /// Removes `digests` (each once) in parts of `size` (``removalPart``),
  /// the two steps of consecutive parts sharing a transaction: one durable
  /// index transaction takes the removal records of part k and unlinks
  /// its files on one thread while another looks up the files of part
  /// k + 1 (their identities: the filesystem only); once the unlinks are
  /// done, it adopts back the objects whose files could not be unlinked,
  /// deletes part k's pins and keys, and runs the first step of part
  /// k + 1 (`firstStep`: given the part's range and its lookups, delete
  /// the rows of those that are to go, wait for the lookups, record their
  /// removals, and return their digests and the rows recorded). One
  /// commit per part instead of two; the lookups overlap the unlinks of
  /// the part before and the deletes of their own part's rows.
  ///
  /// Every first step is on disk before any file of its part goes (the
  /// transaction is durable), and every unlink happens under the index's
  /// write lock, as in ``finish(_:)``. No statement runs while
  /// files are being unlinked: SQLite rolls a transaction back by itself
  /// when a statement meets an I/O error or a full volume, which would
  /// give up the write lock — and let another process call a removal off —
  /// in the middle of the unlinks. Files looked up before their rows are
  /// deleted are still those files: the write lock is held, and every
  /// change of an object's files (a publish, a conversion, a removal)
  /// takes it. Returns the digests removed (their record was taken and
  /// their files are gone), those that had a file to unlink, and each
  /// failure to unlink a file (that object was adopted back).
  private func removeInParts(
    _ digests: [BlobDigest], _ what: String, part size: Int, explicit: Bool,
    firstStep: (Range<Int>, Lookups, IndexSession) throws(TroveError) -> (
      digests: [BlobDigest], rows: [Int64]
    )
  ) throws(TroveError) -> (
    removed: Set<BlobDigest>, unlinked: Set<BlobDigest>, failures: [TroveError]
  ) {
    var removed = Set<BlobDigest>()
    var unlinked = Set<BlobDigest>()
    var failures: [TroveError] = []
    var pending: (digests: [BlobDigest], rows: [Int64]) = ([], [])
    var start = 0
    let size = max(1, size)
    while start < digests.count || !pending.digests.isEmpty {
      let part = start..<min(start + size, digests.count)
      let (finishing, rows) = pending
      do throws(TroveError) {
        let step = try index().write(
          "\(what) \(finishing.count + part.count) objects", durable: !part.isEmpty
        ) { (tx) throws(TroveError) in
          let unlinking = try startUnlinking(finishing, rows: rows, tx)
          let lookups = Lookups()
          if !part.isEmpty { lookups.start(self, Array(digests[part]), explicit: explicit) }
          defer { _ = try? lookups.wait() }
          let finished = try finishUnlinking(unlinking, tx)
          let recorded = part.isEmpty ? ([], []) : try firstStep(part, lookups, tx)
          return (recorded, finished)
        }
        pending = step.0
        removed.formUnion(step.1.removed)
        unlinked.formUnion(step.1.unlinked)
        failures += step.1.failures
      } catch {
        objects.journalAsIs(digests: finishing + digests[part])
        throw error
      }
      start = part.upperBound
    }
    return (removed, unlinked, failures)
  }

  /// The lookups of a part's files (`lookUp(_:explicit:)` of many), made on
  /// another thread while the remover unlinks the part before it, and
  /// then deletes this part's rows.
  final class Lookups: Sendable {
    private let done = DispatchGroup()
    private let result = Mutex<Result<[Removal], TroveError>>(.success([]))

    /// Starts looking up the files of `digests` with `engine`.
    func start(_ engine: RemovalEngine, _ digests: [BlobDigest], explicit: Bool) {
      done.enter()
      Thread { [self] in
        let found: Result<[Removal], TroveError>
        do throws(TroveError) {
          found = .success(try engine.lookUp(digests, explicit: explicit))
        } catch {
          found = .failure(error)
        }
        result.withLock { $0 = found }
        done.leave()
      }.start()
    }

    /// Waits for the lookups; the files found, or the first failure.
    func wait() throws(TroveError) -> [Removal] {
      done.wait()
      return try result.withLock { $0 }.get()
    }
  }

  /// The second step of a removal under way: the records taken, the
  /// files being unlinked on other threads.
  private final class Unlinking: Sendable {
    let digests: [BlobDigest]
    let claimed: [Bool]
    let done = DispatchGroup()
    let unlinked: Mutex<[Bool]>
    let failures = Mutex<[Int: TroveError]>([:])

    init(_ digests: [BlobDigest], claimed: [Bool]) {
      self.digests = digests
      self.claimed = claimed
      unlinked = Mutex([Bool](repeating: false, count: digests.count))
    }

    /// Waits for the unlinks; returns which files were found and unlinked.
    func wait() -> [Bool] {
      done.wait()
      return unlinked.withLock { $0 }
    }
  }

  /// Takes the removal records of `digests` (inside a write transaction)
  /// and starts unlinking the files they name, on other threads; the
  /// caller must ``Unlinking/wait()`` before its transaction ends. With
  /// `rows`, the records are those rows' (recorded by this remover for
  /// exactly `digests`), taken whole; else each digest's is looked for.
  private func startUnlinking(_ digests: [BlobDigest], rows: [Int64]? = nil, _ tx: IndexSession)
    throws(TroveError) -> Unlinking
  {
    let records: [Removal?]
    if digests.isEmpty {
      records = []
    } else if let rows {
      var taken: [BlobDigest: Removal] = [:]
      for removal in try tx.takeRemovals(rows: rows) { taken[removal.digest] = removal }
      records = digests.map { taken[$0] }
    } else {
      records = try tx.takeRemovals(digests)
    }
    let unlinking = Unlinking(digests, claimed: records.map { $0 != nil })
    let claimed = digests.indices.filter { records[$0] != nil }
    guard !claimed.isEmpty else { return unlinking }
    unlinking.done.enter()
    let lanes = unlinkLanes(records, claimed)
    Thread { [self] in
      // A folder's outcomes are kept aside and published under one lock,
      // so that the threads do not contend for it file by file.
      let unlink: @Sendable (Result<FileDescriptor?, TroveError>, [Int]) -> Void = {
        [self] (folder, positions) in
        var found: [Int] = []
        var failed: [(Int, TroveError)] = []
        for position in positions {
          guard let record = records[position] else { continue }
          do throws(TroveError) {
            if try unlinkFiles(of: record, in: try folder.get()) { found.append(position) }
          } catch {
            failed.append((position, error))
          }
        }
        if !found.isEmpty { unlinking.unlinked.withLock { for i in found { $0[i] = true } } }
        if !failed.isEmpty { unlinking.failures.withLock { for (i, e) in failed { $0[i] = e } } }
      }
      if let lanes {
        inFolders(of: digests, lanes: lanes, unlink)
      } else {
        inFolders(of: digests, claimed, width: unlinkWidth, unlink)
      }
      unlinking.done.leave()
    }.start()
    return unlinking
  }

  /// On XFS, how the unlinks of `positions` (indices into `records`) are
  /// shared among threads: by the allocation group of each file's inode,
  /// whole groups to a thread, as many threads as groups up to the number
  /// of processors. An XFS unlink takes its inode's group lock (to put the
  /// inode on the group's unlinked list), as does the background worker
  /// that frees the inode afterwards; threads unlinking in one group only
  /// queue for that lock. Nil elsewhere, when there is one thread's worth,
  /// or when ``RemovalTuning/unlinkLanes`` is off.
  func unlinkLanes(_ records: [Removal?], _ positions: [Int]) -> [[Int]]? {
    guard let groups = objects.allocationGroups, positions.count >= 16,
      tuning.unlinkLanes
    else { return nil }
    var byGroup: [UInt64: [Int]] = [:]
    for position in positions {
      guard let record = records[position], let file = record.raw ?? record.compressed else {
        continue
      }
      byGroup[file.inode >> UInt64(groups.inodeBits), default: []].append(position)
    }
    let width = min(byGroup.count, ProcessInfo.processInfo.activeProcessorCount, 8)
    guard width > 1 else { return nil }
    // The largest group first, each to the lane with the fewest files.
    var lanes = [[Int]](repeating: [], count: width)
    for group in byGroup.values.sorted(by: { $0.count > $1.count }) {
      let lane = lanes.indices.min { lanes[$0].count < lanes[$1].count } ?? 0
      lanes[lane] += group
    }
    // A record with no file left to unlink goes too (it finds nothing).
    let laned = Set(lanes.joined())
    lanes[0] += positions.filter { !laned.contains($0) }
    return lanes
  }

  /// Ends `unlinking` in its transaction: waits for its unlinks, adopts
  /// back the objects whose files could not be unlinked, deletes the pins,
  /// keys and checksums of the others and journals their drop.
  private func finishUnlinking(_ unlinking: Unlinking, _ tx: IndexSession)
    throws(TroveError) -> (removed: [BlobDigest], unlinked: [BlobDigest], failures: [TroveError])
  {
    let digests = unlinking.digests
    guard !digests.isEmpty else { return ([], [], []) }
    let unlinked = unlinking.wait()
    var removed = unlinking.claimed
    let failed = unlinking.failures.withLock { $0 }.sorted { $0.key < $1.key }
    for (position, _) in failed {
      // Its file is still there: so is its object.
      var unmeasured: [BlobDigest] = []  // an orphan then, adopted later
      _ = try objects.reconcile(tx, digests[position], repair: true, deferred: &unmeasured)
      removed[position] = false
    }
    let gone = digests.indices.filter { removed[$0] }.map { digests[$0] }
    try tx.deleteReferences(to: gone)
    // A drop line for each the log names, pins and keys or not: the log
    // may hold a pin or a key the index no longer has (an unpin whose line
    // could not be written), which a rebuild must not bring back onto a
    // later copy.
    journalDrops(gone, tx)
    return (gone, digests.indices.filter { unlinked[$0] }.map { digests[$0] }, failed.map(\.value))
  }

  /// How many fan-out folders a removal works in at once: on XFS, one
  /// (its unlinks go by allocation group instead, see
  /// ``unlinkLanes(_:_:)``, when the files are spread over several); on
  /// ext4 mounted with `discard` an unlink waits for the device, and the
  /// waits overlap.
  var unlinkWidth: Int { objects.filesystem == .xfs ? 1 : 8 }

  /// Runs `body` for `positions` (indices into `digests`) folder by
  /// folder: once for each fan-out folder, with the folder open — or the
  /// error opening it, nil when it is missing — and the positions of the
  /// digests in it. Each folder is opened once and worked through by one
  /// thread, with up to `width` folders at once (one thread alone for
  /// fewer than 16 positions). Lookups and unlinks then go by name
  /// relative to the open folder, no two threads contend for one folder's
  /// lock, and a body that gathers its folder's outcomes publishes them
  /// under one lock, not one per object.
  private func inFolders(
    of digests: [BlobDigest], _ positions: [Int], width: Int,
    _ body:
      @escaping @Sendable (_ folder: Result<FileDescriptor?, TroveError>, _ positions: [Int]) ->
      Void
  ) {
    let groups = Array(Dictionary(grouping: positions) { StoreLayout.fanout(digests[$0]) }.values)
    Parallel.forEach(groups.count, width: positions.count < 16 ? 1 : width) {
      [self] (g) throws(Never) in
      inFolder(of: digests[groups[g][0]]) { folder in body(folder, groups[g]) }
    }
  }

  /// ``inFolders(of:_:width:_:)`` with the positions shared out beforehand: one
  /// thread for each of `lanes`, which works through its positions folder
  /// by folder (each folder opened once by that thread).
  private func inFolders(
    of digests: [BlobDigest], lanes: [[Int]],
    _ body:
      @escaping @Sendable (_ folder: Result<FileDescriptor?, TroveError>, _ positions: [Int]) ->
      Void
  ) {
    Parallel.forEach(lanes.count, width: lanes.count) { [self] (lane) throws(Never) in
      let byFolder = Dictionary(grouping: lanes[lane]) { StoreLayout.fanout(digests[$0]) }
      for positions in byFolder.values {
        inFolder(of: digests[positions[0]]) { folder in body(folder, positions) }
      }
    }
  }

  /// Runs `body` with `digest`'s fan-out folder open — or the error
  /// opening it, nil when it is missing — and closes it.
  private func inFolder(
    of digest: BlobDigest, _ body: (Result<FileDescriptor?, TroveError>) -> Void
  ) {
    let folder: Result<FileDescriptor?, TroveError>
    do throws(TroveError) {
      folder = .success(try openFolder(of: digest))
    } catch {
      folder = .failure(error)
    }
    defer { if case .success(let open?) = folder { open.close() } }
    body(folder)
  }

  /// Removes `digest`'s object whatever its state — row, pins and keys,
  /// then its files — in the two steps ``evict(_:now:part:)`` takes. Only a put
  /// of the same bytes in between calls it off (the put stores them
  /// again); a read, a pin or a key finds the object gone. Whether there
  /// was anything.
  func remove(_ digest: BlobDigest) throws(TroveError) -> Bool {
    let (present, failures) = try remove([digest])
    if let failure = failures.first { throw failure }
    return present[0]
  }

  /// ``remove(_:)`` of many objects (`digests`, each once) in the same two
  /// steps, in parts as evictions are
  /// (``removeInParts(_:_:part:explicit:firstStep:)``): each first step on
  /// disk before any file of its part goes. Returns,
  /// for each, whether there was anything, and why the objects whose files
  /// could not be unlinked were kept.
  func remove(_ digests: [BlobDigest], part: Int = removalPart) throws(TroveError) -> (
    present: [Bool], failures: [TroveError]
  ) {
    guard !digests.isEmpty else { return ([], []) }
    var hadRows = [Bool](repeating: false, count: digests.count)
    let finished = try removeInParts(digests, "remove", part: part, explicit: true) {
      (range, lookups, tx) throws(TroveError) -> (digests: [BlobDigest], rows: [Int64]) in
      let part = Array(digests[range])
      for (position, had) in zip(
        range, try tx.deleteObjects(part, bulkFrom: tuning.bulkRemovalMinimum))
      { hadRows[position] = had }
      let looked = try lookups.wait()
      journalDrops(part, tx)
      return (
        part, try tx.insertRemovals(looked, now: currentTimeNanoseconds(), perRow: recordsPerRow)
      )
    }
    let present = digests.indices.map { hadRows[$0] || finished.unlinked.contains(digests[$0]) }
    return (present, finished.failures)
  }

  /// The removal of `digest`'s object files as they are now: each regular
  /// file's identity, so that only that file is ever unlinked for it.
  func lookUp(_ digest: BlobDigest, explicit: Bool) throws(TroveError) -> Removal {
    func identity(_ compressed: Bool) throws(TroveError) -> FileIdentity? {
      guard let status = try status(digest, compressed: compressed), status.isRegular else {
        return nil
      }
      return FileIdentity(status)
    }
    return Removal(
      digest: digest, isExplicit: explicit, raw: try identity(false), compressed: try identity(true)
    )
  }

  /// `lookUp(_:explicit:)` of one, for each of `digests`, looked up folder by
  /// folder from 8 threads (an inode not in memory is a read from the
  /// device; a lookup takes no allocation group's lock on XFS, where
  /// unlinks go one thread a group). Throws the first failure to look one
  /// up.
  func lookUp(_ digests: [BlobDigest], explicit: Bool) throws(TroveError) -> [Removal] {
    let found = Mutex([Removal?](repeating: nil, count: digests.count))
    let failure = Mutex<TroveError?>(nil)
    inFolders(of: digests, Array(digests.indices), width: 8) { [self] (folder, positions) in
      do throws(TroveError) {
        let folder = try folder.get()
        let present = folder.flatMap { Self.names(in: $0, lookingUpMany: positions.count) }
        func identity(_ i: Int, _ compressed: Bool) throws(TroveError) -> FileIdentity? {
          guard let folder,
            present?.contains(StoreLayout.objectName(digests[i], compressed: compressed)) ?? true,
            let status = try status(digests[i], compressed: compressed, in: folder),
            status.isRegular
          else { return nil }
          return FileIdentity(status)
        }
        var removals: [(Int, Removal)] = []
        removals.reserveCapacity(positions.count)
        for i in positions {
          removals.append(
            (
              i,
              Removal(
                digest: digests[i], isExplicit: explicit, raw: try identity(i, false),
                compressed: try identity(i, true))
            ))
        }
        found.withLock { for (i, removal) in removals { $0[i] = removal } }
      } catch {
        failure.withLock { if $0 == nil { $0 = error } }
      }
    }
    if let error = failure.withLock({ $0 }) { throw error }
    return found.withLock { $0.map { $0! } }
  }

  /// The names in fan-out `folder`, listed when `count` objects are to
  /// be looked up in it and the folder is not much larger (at most about
  /// 8 names for each): each object has one form but for a moment in a
  /// conversion, and a failed lookup of the absent one costs a search of
  /// the folder's entries, far more than a listing's share. Nil otherwise,
  /// or when the listing fails: then each name is looked up.
  ///
  /// The listing is as good as the lookups: a name published after it —
  /// none is while the write lock is held — would only be left out of
  /// the removal, to be adopted back as an object.
  static func names(in folder: FileDescriptor, lookingUpMany count: Int) -> Set<String>? {
    // A folder's size is about 40 bytes a name on XFS and ext4, or more.
    guard count >= 32, let status = try? folder.status(), status.size / 40 <= Int64(count) * 8,
      let names = try? folder.entries()
    else { return nil }
    return Set(names)
  }

  /// Finishes removals recorded more than `age` nanoseconds ago, whose
  /// removers stopped between the two steps (killed, or failed): their
  /// rows are gone, and their files would otherwise wait for a repair or
  /// for the sweep that reconciles their folder. Finishing a removal its
  /// remover is still making is harmless: one of them takes the record.
  /// Returns how many removals were finished (one per object, whatever
  /// forms it had), and the first failure to unlink a file (that object
  /// is adopted back; the others are finished all the same).
  func finishStale(olderThan age: Int64)
    throws(TroveError) -> (finished: Int, failure: TroveError?)
  {
    let before = currentTimeNanoseconds().subtractingSaturated(age)
    let stale = try index().read("look up stale removals") { (tx) throws(TroveError) in
      try tx.removals(recordedBefore: before, limit: 1000)
    }
    let (removed, failures) = try finish(stale)
    return (removed.filter { $0 }.count, failures.first)
  }

  /// The second step of a removal, in one index transaction: for each
  /// digest whose removal record is still there, takes the record and
  /// unlinks the files it names, if they are still those files; returns
  /// which were removed, and each failure (in the order of `digests`). A
  /// file that could not be unlinked is adopted back.
  func finish(_ digests: [BlobDigest])
    throws(TroveError) -> (removed: [Bool], failures: [TroveError])
  {
    guard !digests.isEmpty else { return ([], []) }
    do throws(TroveError) {
      let (removed, _, failures) = try index().write("remove \(digests.count) files") {
        (tx) throws(TroveError) in
        try finishUnlinking(try startUnlinking(digests, tx), tx)
      }
      let gone = Set(removed)
      return (digests.map { gone.contains($0) }, failures)
    } catch {
      objects.journalAsIs(digests: digests)
      throw error
    }
  }

  /// Unlinks the files `removal` names, each only if the file under that
  /// name is still the one it names; whether one was unlinked. Call
  /// inside a write transaction.
  func unlinkFiles(of removal: Removal) throws(TroveError) -> Bool {
    guard removal.raw != nil || removal.compressed != nil,
      let folder = try openFolder(of: removal.digest)
    else { return false }
    defer { folder.close() }
    return try unlinkFiles(of: removal, in: folder)
  }

  /// ``unlinkFiles(of:)`` with the digest's fan-out folder open (nil: it
  /// is missing, so there is nothing to unlink): each file looked up and
  /// unlinked by its name in that folder.
  private func unlinkFiles(of removal: Removal, in folder: FileDescriptor?) throws(TroveError)
    -> Bool
  {
    guard let folder else { return false }
    var removed = false
    for (compressed, identity) in [(false, removal.raw), (true, removal.compressed)] {
      guard let identity, let now = try status(removal.digest, compressed: compressed, in: folder),
        FileIdentity(now) == identity
      else { continue }
      do throws(SystemCallError) {
        try folder.removeFile(StoreLayout.objectName(removal.digest, compressed: compressed))
        removed = true
      } catch  where error.errno == .noSuchFileOrDirectory {
        continue
      } catch {
        throw TroveError.system(
          error, "remove", path: path(removal.digest, compressed: compressed))
      }
    }
    return removed
  }

  // MARK: Inside another transaction

  /// The removal under way of `digest`, if any: between its two steps,
  /// by a remover at work or one that stopped.
  func underway(_ digest: BlobDigest, _ tx: IndexSession) throws(TroveError) -> Removal? {
    try tx.removal(of: digest)
  }

  /// The removals under way whose digest's hex starts with `prefix` (a
  /// fan-out folder's, for its reconcile).
  func underway(withPrefix prefix: String, _ tx: IndexSession) throws(TroveError)
    -> [BlobDigest: Removal]
  {
    try tx.removals(withPrefix: prefix)
  }

  /// Calls off the removals of `digests` (a dedup hit, a read, a pin, a
  /// reconcile wants them): takes their records, so that no second step
  /// unlinks their files. Each one's record, nil when there was none.
  func callOff(_ digests: [BlobDigest], _ tx: IndexSession) throws(TroveError) -> [Removal?] {
    try tx.takeRemovals(digests)
  }

  /// The first step's record of removing `digests`, whose rows `tx` has
  /// deleted: looks up their files and records, at `now`, which are to
  /// go. Returns the ids of the rows recorded. The second step is
  /// ``finish(_:)`` (or the remover's own, in ``evict(_:now:part:)`` and
  /// ``remove(_:part:)``).
  @discardableResult
  func record(_ digests: [BlobDigest], explicit: Bool, now: Int64, _ tx: IndexSession)
    throws(TroveError) -> [Int64]
  {
    try tx.insertRemovals(
      try lookUp(digests, explicit: explicit), now: now, perRow: recordsPerRow)
  }

  /// ``RemovalTuning/recordsPerRow`` in force.
  private var recordsPerRow: Int { tuning.recordsPerRow }

  // MARK: The drops a removal writes to references.log

  /// Records that `digests` lost every pin and key (their rows went): a
  /// drop line for each that the log names outside a drop line — a drop
  /// changes a replay only where a pin or a key line came before it.
  /// Which those are is read from the log itself, inside the write
  /// transaction (every line is appended inside one, so none is added
  /// meanwhile), for 64 digests or more and a log of up to
  /// ``journalScanLimit``; otherwise each digest gets its line. A removal
  /// of many objects from a store without pins or keys then writes no
  /// drops, nor the compaction (and its `fsync`) they would bring.
  func journalDrops(_ digests: [BlobDigest], _ tx: IndexSession) {
    var dropping = digests
    if digests.count >= Self.journalScanMinimum, let named = digestsNamedInJournal() {
      dropping = digests.filter { named.contains($0) }
    }
    objects.journal(dropping.map { JournalRecord(op: .drop, digest: $0) }, tx)
  }

  /// The largest log ``journalDrops(_:_:)`` reads to leave out drops.
  static let journalScanLimit = 4 << 20

  /// The fewest drops ``journalDrops(_:_:)`` reads the log for.
  static let journalScanMinimum = 64

  /// The digests the log names in its lines other than drops (empty when
  /// there is no log); nil when it is larger than ``journalScanLimit`` or
  /// cannot be read.
  private func digestsNamedInJournal() -> Set<BlobDigest>? {
    let fd: FileDescriptor
    do throws(SystemCallError) {
      fd = try FileDescriptor.open(
        StoreLayout.journal, in: objects.rootDirectory, [.readOnly, .noFollow, .nonBlocking])
    } catch  where error.errno == .noSuchFileOrDirectory {
      return []
    } catch {
      return nil
    }
    defer { fd.close() }
    guard let status = try? fd.status(), status.isRegular,
      status.size <= Int64(Self.journalScanLimit),
      let bytes = try? fd.readAll(limit: Int(status.size) + 1),
      bytes.count <= status.size
    else { return nil }
    return Self.digestsNamed(in: bytes)
  }

  /// Every digest (`xxh128:` and 32 hex digits) in the lines of `log`
  /// that are not drops: a superset of those a pin or key line names (a
  /// key or a checksum may read like a digest; a line cut short by a crash
  /// and run into the next is never replayed).
  ///
  /// A plain loop over the bytes: the log is read under the write lock.
  static func digestsNamed(in log: [UInt8]) -> Set<BlobDigest> {
    let drop = Array(#""op":"drop""#.utf8)
    let prefix = Array(BlobDigest.prefix.utf8)
    var named = Set<BlobDigest>()
    log.withUnsafeBufferPointer { bytes in
      /// The offsets in `line` where `needle` starts.
      func starts(of needle: [UInt8], in line: Range<Int>) -> [Int] {
        var found: [Int] = []
        var i = line.lowerBound
        while i + needle.count <= line.upperBound {
          if bytes[i] == needle[0] && (1..<needle.count).allSatisfy({ bytes[i + $0] == needle[$0] })
          {
            found.append(i)
            i += needle.count
          } else {
            i += 1
          }
        }
        return found
      }
      var start = 0
      while start < bytes.count {
        var end = start
        while end < bytes.count && bytes[end] != 0x0A { end += 1 }
        let line = start..<end
        if starts(of: drop, in: line).isEmpty {
          for at in starts(of: prefix, in: line) {
            let hex = (at + prefix.count)..<min(at + prefix.count + 32, end)
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[hex]), as: UTF8.self)
            if let digest = BlobDigest(hex: Substring(text)) { named.insert(digest) }
          }
        }
        start = end + 1
      }
    }
    return named
  }

  // MARK: What the engine uses of its table

  private func index() throws(TroveError) -> Index { try objects.index() }
  private func openFolder(of digest: BlobDigest) throws(TroveError) -> FileDescriptor? {
    try objects.openFolder(of: digest)
  }
  private func status(_ digest: BlobDigest, compressed: Bool) throws(TroveError) -> FileStatus? {
    try objects.status(digest, compressed: compressed)
  }
  private func status(_ digest: BlobDigest, compressed: Bool, in folder: FileDescriptor)
    throws(TroveError) -> FileStatus?
  {
    try objects.status(digest, compressed: compressed, in: folder)
  }
  private func path(_ digest: BlobDigest, compressed: Bool) -> String {
    objects.path(digest, compressed: compressed)
  }
}
