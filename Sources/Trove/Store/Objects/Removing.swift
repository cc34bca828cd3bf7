import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Removing in two steps: eviction, `rm`, and a corrupt file found by verify.
extension ObjectTable {
  /// Evicts those of `entries` that are still evictable as they were
  /// chosen — last access unchanged, no unexpired pin — in two steps:
  /// one index transaction deletes their rows and records the removals;
  /// a second unlinks the files of those whose removal still stands (a
  /// dedup hit, a read or a pin in between keeps the object) and removes
  /// their keys. Unlinks run from several threads when there are many: an
  /// unlink that frees blocks can wait on the device. A crash between or
  /// within the steps leaves files whose row is gone — adopted again by the
  /// next read or reconcile — never a row whose file is gone. A file that
  /// cannot be unlinked (an immutable file: EPERM) keeps its object, and
  /// the others go all the same. Returns which were evicted, and why each
  /// object that was not could not be removed.
  ///
  /// A reader that already opened an object keeps reading correct bytes;
  /// clones, copies and hard links made from it earlier are not touched.
  func evict(_ entries: [StoreEntry], now: Int64)
    throws(TroveError) -> (evicted: [Bool], failures: [TroveError])
  {
    guard !entries.isEmpty else { return ([], []) }
    // The first step is on disk before any file goes: a power loss cannot
    // bring back a row whose file was unlinked.
    var evicted = try index().write("evict \(entries.count) entries", durable: true) {
      (tx) throws(TroveError) -> [Bool] in
      let deleted = try tx.deleteIfEvictable(entries, now: now)
      var removals: [Removal] = []
      for (entry, gone) in zip(entries, deleted) where gone {
        removals.append(try removal(of: entry.digest, explicit: false))
      }
      try tx.insertRemovals(removals, now: now)
      return deleted
    }
    let victims = entries.indices.filter { evicted[$0] }
    let (removed, _, failures) = try finishRemovals(victims.map { entries[$0].digest })
    for (i, position) in victims.enumerated() where !removed[i] { evicted[position] = false }
    // What was evicted stays evicted; the files that could not be unlinked
    // are the caller's to report.
    return (evicted, failures)
  }

  /// How many unlinks a removal has in flight at once (8000 files: 0.81 s
  /// one by one, 0.32 s from 8 threads, on a `discard` mount).
  static let unlinkWidth = 8

  /// Removes `digest`'s object whatever its state — row, pins and keys,
  /// then its files — in the two steps ``evict(_:now:)`` takes. Only a put
  /// of the same bytes in between calls it off (the put stores them
  /// again); a read, a pin or a key finds the object gone. Whether there
  /// was anything.
  func drop(_ digest: BlobDigest) throws(TroveError) -> Bool {
    let (present, failures) = try drop([digest])
    if let failure = failures.first { throw failure }
    return present[0]
  }

  /// ``drop(_:)`` of many objects (`digests`, each once) in the same two
  /// steps, each one index transaction for all of them — the first on
  /// disk before any file goes — and the unlinks from several threads.
  /// Returns, for each, whether there was anything, and why the objects
  /// whose files could not be unlinked were kept.
  func drop(_ digests: [BlobDigest]) throws(TroveError) -> (
    present: [Bool], failures: [TroveError]
  ) {
    guard !digests.isEmpty else { return ([], []) }
    let hadRows: [Bool]
    do throws(TroveError) {
      hadRows = try index().write("remove \(digests.count) objects", durable: true) {
        (tx) throws(TroveError) -> [Bool] in
        var had: [Bool] = []
        var removals: [Removal] = []
        for digest in digests {
          had.append(try tx.deleteObject(digest))
          removals.append(try removal(of: digest, explicit: true))
        }
        journalDrops(digests, tx)
        try tx.insertRemovals(removals, now: currentTimeNanoseconds())
        return had
      }
    } catch {
      journalAsIs(digests: digests)
      throw error
    }
    let (_, unlinked, failures) = try finishRemovals(digests)
    return (zip(hadRows, unlinked).map { $0 || $1 }, failures)
  }

  /// The removal of `digest`'s object files as they are now: each regular
  /// file's identity, so that only that file is ever unlinked for it.
  func removal(of digest: BlobDigest, explicit: Bool) throws(TroveError) -> Removal {
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

  /// Finishes removals recorded more than `age` nanoseconds ago, whose
  /// removers stopped between the two steps (killed, or failed): their
  /// rows are gone, and their files would otherwise wait for a repair or
  /// for the sweep that reconciles their folder. Finishing a removal its
  /// remover is still making is harmless: one of them takes the record.
  /// Returns how many removals were finished (one per object, whatever
  /// forms it had), and the first failure to unlink a file (that object
  /// is adopted back; the others are finished all the same).
  func finishStaleRemovals(olderThan age: Int64)
    throws(TroveError) -> (finished: Int, failure: TroveError?)
  {
    let before = currentTimeNanoseconds().subtractingSaturated(age)
    let stale = try index().read("look up stale removals") { (tx) throws(TroveError) in
      try tx.removals(recordedBefore: before, limit: 1000)
    }
    let (removed, _, failures) = try finishRemovals(stale)
    return (removed.filter { $0 }.count, failures.first)
  }

  /// The second step of a removal, in one index transaction: for each
  /// digest whose removal record is still there, takes the record and
  /// unlinks the files it names, if they are still those files; returns
  /// which were removed, which had a file to unlink, and each failure (in
  /// the order of `digests`). A file that could not be unlinked is adopted
  /// back.
  func finishRemovals(_ digests: [BlobDigest])
    throws(TroveError) -> (removed: [Bool], unlinked: [Bool], failures: [TroveError])
  {
    guard !digests.isEmpty else { return ([], [], []) }
    do throws(TroveError) {
      return try finishRemovalsOnce(digests)
    } catch {
      journalAsIs(digests: digests)
      throw error
    }
  }

  private func finishRemovalsOnce(_ digests: [BlobDigest])
    throws(TroveError) -> (removed: [Bool], unlinked: [Bool], failures: [TroveError])
  {
    try index().write("remove \(digests.count) files") {
      (tx) throws(TroveError) -> ([Bool], [Bool], [TroveError]) in
      let records = try tx.takeRemovals(digests)
      var removed = records.map { $0 != nil }
      let claimed = digests.indices.filter { removed[$0] }
      let failures = Mutex<[Int: TroveError]>([:])
      let unlinked = Mutex([Bool](repeating: false, count: digests.count))
      Parallel.forEach(claimed.count, width: claimed.count < 16 ? 1 : Self.unlinkWidth) {
        [self] (i) throws(Never) in
        guard let record = records[claimed[i]] else { return }
        do throws(TroveError) {
          let found = try unlinkFiles(of: record)
          unlinked.withLock { $0[claimed[i]] = found }
        } catch {
          failures.withLock { $0[claimed[i]] = error }
        }
      }
      let failed = failures.withLock { $0 }.sorted { $0.key < $1.key }
      for (position, _) in failed {
        // Its file is still there: so is its object.
        var unmeasured: [BlobDigest] = []  // an orphan then, adopted later
        _ = try reconcile(tx, digests[position], repair: true, deferred: &unmeasured)
        removed[position] = false
      }
      let gone = digests.indices.filter { removed[$0] }.map { digests[$0] }
      try tx.deleteReferences(to: gone)
      journalDrops(gone, tx)
      return (removed, unlinked.withLock { $0 }, failed.map(\.value))
    }
  }

  /// Unlinks the files `removal` names, each only if the file under that
  /// name is still the one it names; whether one was unlinked. Call
  /// inside a write transaction.
  func unlinkFiles(of removal: Removal) throws(TroveError) -> Bool {
    var removed = false
    for (compressed, identity) in [(false, removal.raw), (true, removal.compressed)] {
      guard let identity, let now = try status(removal.digest, compressed: compressed),
        FileIdentity(now) == identity
      else { continue }
      do throws(SystemCallError) {
        try unlinkObject(removal.digest, compressed: compressed)
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
}
