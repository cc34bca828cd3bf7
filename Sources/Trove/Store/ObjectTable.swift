import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// An object file found on disk.
struct StoredObject {
  var status: FileStatus
  var isCompressed: Bool
}

/// A finished temp file in `tmp/` holding an object's bytes in the form
/// they will be stored in (raw or a zstd frame), not yet published.
struct StagedObject {
  /// Its name in `tmp/`.
  var name: String
  /// Open for reading and writing.
  var file: FileDescriptor
  /// The digest of the (uncompressed) bytes.
  var digest: Digest
  /// Their length.
  var size: Int64
  /// Whether the file is a zstd frame.
  var isCompressed: Bool
  /// The file's length.
  var storedBytes: Int64
  /// Why it is raw although compression was on, if it is.
  var skipped: CompressionSkip?
}

/// What ``ObjectTable/publish(_:)`` did.
enum PublishOutcome {
  /// The staged file is now the object.
  case stored(Entry)
  /// The store already held the bytes: the staged file was dropped and the
  /// put counted as a dedup hit.
  case duplicate(Entry)
}

/// What reconciling the index with `objects/` found (and, when repairing,
/// fixed): see ``Store/rebuildIndex()``.
public struct ReconcileReport: Sendable, Hashable, Codable {
  /// Object files without a row (adopted).
  public var added = 0
  /// Rows whose file is missing (dropped, with their pins and keys).
  public var dropped = 0
  /// Rows that disagreed with their file's form or size (corrected).
  public var corrected = 0
  /// Digests present in both forms (the compressed copy removed).
  public var twins = 0
  /// Removals found between their two steps (their remover may have
  /// died), finished.
  public var removalsFinished = 0
  /// Paths under `objects/` that are not objects (left alone).
  public var unexpected: [String] = []

  /// Whether the index and the folder agreed.
  public var isClean: Bool { added == 0 && dropped == 0 && corrected == 0 && twins == 0 }

  mutating func add(_ other: ReconcileReport) {
    added += other.added
    dropped += other.dropped
    corrected += other.corrected
    twins += other.twins
    removalsFinished += other.removalsFinished
    unexpected += other.unexpected
  }
}

/// The one owner of every state change of a stored object: publishing a
/// staged file, recording a dedup hit, adopting a file the index does not
/// know, evicting an entry if it is still evictable, converting its form,
/// dropping it, reconciling its row with its file, and pinning or naming
/// it. Ingest, eviction policy, recompress, rebuild and verify are its
/// clients: they decide, it acts, and they cannot reorder its steps.
///
/// **One durability sequence** (``publish(_:)``): the staged file's data is
/// synced; its fan-out folder exists durably (a folder created now is
/// synced into `objects/`); then, in one index write transaction, the file
/// is renamed into place without replacing, its row is written and the
/// fan-out folder is synced, so the name is durable before the row can be.
/// Nothing is acknowledged before all of it has succeeded; a failure after
/// the rename undoes it.
///
/// **One exclusion rule**: every change to `objects/` happens inside an
/// index write transaction that records it. A dedup hit checks that the
/// file exists inside the transaction that refreshes its row. A removal
/// (eviction, `rm`) takes two: the first deletes the row — for an
/// eviction, only if it is still as it was chosen — and records the
/// removal durably; the second unlinks the file only if that record still
/// stands. Anything that writes a row in between (a dedup hit; for an
/// eviction also a read that adopts the file, a pin, a key) calls the
/// removal off. A pin or key is added in a transaction that confirms the
/// object is there. So a put that reports a duplicate, a pin that succeeds
/// or a key that is bound always finds the object in place, and an object
/// chosen for eviction whose access was recorded, or that was stored again
/// or pinned, meanwhile stays.
///
/// The exclusion relies on the index's write lock (SQLite's, which the
/// kernel enforces on local filesystems). The content invariant does not:
/// objects are published by a rename that never replaces, from files only
/// one writer ever wrote, so whatever the locks do, the file named by a
/// digest holds those bytes. A kill or a power loss can leave a file
/// without a row — adopted by the next read, or by a sweep's reconcile of
/// its folder, which also finishes removals cut between their steps —
/// never a row without a file.
final class ObjectTable: Sendable {
  let root: String
  let objectsDirectory: FileDescriptor
  let tmpDirectory: FileDescriptor
  /// The kind of filesystem the store is on (for the index's journal mode).
  let filesystem: FilesystemKind
  private let opened = Mutex<Index?>(nil)

  var objectsPath: String { root + "/" + StoreLayout.objects }
  var tmpPath: String { root + "/" + StoreLayout.tmp }
  var indexPath: String { root + "/" + StoreLayout.index }

  init(
    root: String, objects: FileDescriptor, tmp: FileDescriptor, filesystem: FilesystemKind
  ) {
    self.root = root
    objectsDirectory = objects
    tmpDirectory = tmp
    self.filesystem = filesystem
  }

  /// The absolute path of `digest`'s object file in one form (whether or not it exists).
  func path(_ digest: Digest, compressed: Bool = false) -> String {
    objectsPath + "/" + StoreLayout.objectPath(digest, compressed: compressed)
  }

  /// The index, opened on first use. A new index beside existing objects
  /// (first use, or the index was deleted or lost) is rebuilt from them.
  func index() throws(TroveError) -> Index {
    let opened: Result<(Index, Bool), TroveError> = self.opened.withLock { slot in
      if let index = slot { return .success((index, false)) }
      do throws(TroveError) {
        let index = try Index(path: indexPath, filesystem: filesystem)
        slot = index
        return .success((index, index.isFresh))
      } catch {
        return .failure(error)
      }
    }
    let (index, isNew) = try opened.get()
    if isNew { _ = try reconcileAll(repair: true) }
    return index
  }

  // MARK: Finding objects (no state change)

  /// `digest`'s object file, raw (preferred: it can be cloned) or
  /// compressed, or nil when there is neither. Symbolic links are not
  /// followed. One `fstatat` for a raw object, two for a compressed one or
  /// a miss.
  func locate(_ digest: Digest) throws(TroveError) -> StoredObject? {
    for compressed in [false, true] {
      if let status = try status(digest, compressed: compressed) {
        return StoredObject(status: status, isCompressed: compressed)
      }
    }
    return nil
  }

  /// The status of one form of `digest`'s object file, nil when absent.
  private func status(_ digest: Digest, compressed: Bool) throws(TroveError) -> FileStatus? {
    do throws(SystemCallError) {
      return try objectsDirectory.status(
        of: StoreLayout.objectPath(digest, compressed: compressed), followSymlinks: false)
    } catch  where error.errno == .noSuchFileOrDirectory || error.errno == .notDirectory {
      return nil
    } catch {
      throw TroveError.system(error, "look up", path: path(digest, compressed: compressed))
    }
  }

  /// Whether `digest` has a file in both forms (a crash during a conversion).
  func isStoredTwice(_ digest: Digest) throws(TroveError) -> Bool {
    guard try status(digest, compressed: false) != nil else { return false }
    return try status(digest, compressed: true) != nil
  }

  /// Opens `digest`'s object for reading, raw if there is one (it can be
  /// cloned), else compressed; says which. Never follows a symbolic link or
  /// blocks on a FIFO; anything but a regular file is a corrupt entry.
  /// Nil when there is no object.
  func open(_ digest: Digest) throws(TroveError) -> (FileDescriptor, isCompressed: Bool)? {
    for compressed in [false, true] {
      if let fd = try open(digest, compressed: compressed) { return (fd, compressed) }
    }
    return nil
  }

  /// Opens one form of `digest`'s object for reading, as ``open(_:)``
  /// does; nil when that file does not exist.
  func open(_ digest: Digest, compressed: Bool) throws(TroveError) -> FileDescriptor? {
    let fd: FileDescriptor
    do throws(SystemCallError) {
      fd = try FileDescriptor.open(
        StoreLayout.objectPath(digest, compressed: compressed), in: objectsDirectory,
        [.readOnly, .noFollow, .nonBlocking])
    } catch  where error.errno == .noSuchFileOrDirectory || error.errno == .notDirectory {
      return nil
    } catch  where error.errno == .tooManySymbolicLinks {
      throw notAFile(digest, compressed: compressed, what: "a symbolic link")
    } catch {
      throw TroveError.system(error, "read", path: path(digest, compressed: compressed))
    }
    guard (try? fd.status().isRegular) == true else {
      fd.close()
      throw notAFile(digest, compressed: compressed, what: "not a regular file")
    }
    return fd
  }

  /// The names of the object files in fan-out folder `folder` (0–255),
  /// with the digests they name; other names are skipped.
  func objectFiles(inFolder folder: Int) throws(TroveError) -> [(
    name: String, digest: Digest, isCompressed: Bool
  )] {
    let name = String(folder, radix: 16).leftPadded(to: 2)
    return try listing(name).compactMap { file in
      let compressed = file.hasSuffix(StoreLayout.compressedSuffix)
      let hex = compressed ? String(file.dropLast(StoreLayout.compressedSuffix.count)) : file
      guard let digest = Digest(hex: Substring(hex)), hex == digest.hex, hex.hasPrefix(name)
      else { return nil }
      return (file, digest, compressed)
    }
  }

  private func notAFile(_ digest: Digest, compressed: Bool, what: String) -> TroveError {
    let objectPath = path(digest, compressed: compressed)
    return TroveError(
      .corruptObject,
      "object '\(objectPath)' is corrupt: it is \(what); run 'trove verify --repair'",
      path: objectPath, value: digest.description)
  }

  // MARK: Publishing and dedup hits

  /// Publishes `staged` as its digest's object, or — when the store
  /// already holds those bytes — drops it and counts a dedup hit. The
  /// staged file is gone from `tmp/` when this returns or throws.
  ///
  /// The durability sequence: data sync, fan-out folder, then in one index
  /// transaction a rename that never replaces, the row, and a sync of the
  /// folder. A failure after the rename undoes it: the put throws and
  /// leaves nothing.
  func publish(_ staged: StagedObject) throws(TroveError) -> PublishOutcome {
    let digest = staged.digest
    let objectPath = path(digest, compressed: staged.isCompressed)
    let temp = staged.name
    var renamed = false
    defer { if !renamed { try? tmpDirectory.removeFile(temp) } }

    // Known content: drop the copy before paying for a sync.
    if try locate(digest) != nil, let entry = try recordHit(digest, size: staged.size) {
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
    let entry = Entry(
      digest: digest, size: staged.size, allocatedBytes: allocated, created: now, lastAccess: now,
      isCompressed: staged.isCompressed, storedBytes: staged.storedBytes)
    let outcome = try index().write("store \(digest)") {
      (tx) throws(TroveError) -> PublishOutcome in
      if let hit = try hit(tx, digest, size: staged.size, now: now) { return .duplicate(hit) }
      do throws(SystemCallError) {
        try tmpDirectory.renameWithoutReplacing(
          temp, to: StoreLayout.objectPath(digest, compressed: staged.isCompressed),
          in: objectsDirectory)
      } catch  where error.errno == .fileExists {
        // Only a lock that was not honoured gets here: a file appeared
        // between the look above and the rename. It holds these bytes
        // if it is an object at all.
        if let hit = try hit(tx, digest, size: staged.size, now: now) { return .duplicate(hit) }
        throw notAFile(digest, compressed: staged.isCompressed, what: "not a regular file")
      } catch {
        throw TroveError.system(error, "store", path: objectPath)
      }
      renamed = true
      do throws(TroveError) {
        try tx.upsert(entry)
        if let skip = staged.skipped { try tx.countSkip(skip) }
        // The new name is durable before the row can be: whatever survives
        // a power loss, no row names a file that did not.
        try attempt("store", objectPath) { () throws(SystemCallError) in try folder.sync() }
      } catch {
        // Not published after all: no other writer can have counted on
        // the file (they wait for this transaction), so it goes.
        try? objectsDirectory.removeFile(
          StoreLayout.objectPath(digest, compressed: staged.isCompressed))
        throw error
      }
      return .stored(entry)
    }
    return outcome
  }

  /// Counts a put of bytes the store may already hold: if `digest`'s
  /// object is there, refreshes its last access (adopting it if the index
  /// lost its row) and counts the hit, all in one transaction. Nil when
  /// the object is not there — it may have just been evicted — and the
  /// caller must store its own copy.
  func recordHit(_ digest: Digest, size: Int64) throws(TroveError) -> Entry? {
    let now = currentTimeNanoseconds()
    return try index().write("record duplicate \(digest)") { (tx) throws(TroveError) in
      try hit(tx, digest, size: size, now: now)
    }
  }

  /// The dedup hit inside a write transaction.
  private func hit(_ tx: IndexSession, _ digest: Digest, size: Int64, now: Int64)
    throws(TroveError) -> Entry?
  {
    guard let object = try locate(digest), object.status.isRegular else { return nil }
    if try !tx.refreshAccess(digest, to: now) {
      try tx.upsert(
        Entry(
          digest: digest, size: size, allocatedBytes: object.status.contentBytes, created: now,
          lastAccess: now, isCompressed: object.isCompressed, storedBytes: object.status.size))
    }
    try tx.countDuplicate(size: size)
    return try tx.entry(for: digest)
  }

  /// Opens `digest`'s fan-out folder, creating it when missing; a folder
  /// created here is made durable in `objects/` before anything is put in it.
  private func fanoutFolder(_ digest: Digest) throws(TroveError) -> FileDescriptor {
    let name = StoreLayout.fanout(digest)
    return try attempt("create folder", objectsPath + "/" + name) {
      () throws(SystemCallError) -> FileDescriptor in
      var created = false
      do throws(SystemCallError) {
        try objectsDirectory.makeDirectory(name)
        created = true
      } catch  where error.errno == .fileExists {}
      if created { try objectsDirectory.sync() }
      return try FileDescriptor.open(name, in: objectsDirectory, [.directory, .noFollow])
    }
  }

  // MARK: Removing

  /// Evicts those of `entries` that are still evictable as they were
  /// chosen — last access unchanged, no unexpired pin — in two steps:
  /// one index transaction deletes their rows and records the removals;
  /// a second unlinks the files of those whose removal still stands (a
  /// dedup hit, a read or a pin in between keeps the object) and removes
  /// their keys. Unlinks run from several threads when there are many: an
  /// unlink that frees blocks can wait on the device. A crash between or
  /// within the steps leaves files whose row is gone — adopted again by the
  /// next read or reconcile — never a row whose file is gone. A file that
  /// cannot be unlinked keeps its object. Returns which were evicted.
  ///
  /// A reader that already opened an object keeps reading correct bytes;
  /// clones, copies and hard links made from it earlier are not touched.
  func evict(_ entries: [Entry], now: Int64) throws(TroveError) -> [Bool] {
    guard !entries.isEmpty else { return [] }
    // The first step is on disk before any file goes: a power loss cannot
    // bring back a row whose file was unlinked.
    var evicted = try index().write("evict \(entries.count) entries", durable: true) {
      (tx) throws(TroveError) -> [Bool] in
      let deleted = try tx.deleteIfEvictable(entries, now: now)
      try tx.insertRemovals(
        entries.indices.filter { deleted[$0] }.map { entries[$0].digest }, now: now)
      return deleted
    }
    let victims = entries.indices.filter { evicted[$0] }
    let (removed, _, failure) = try finishRemovals(
      victims.map { (entries[$0].digest, entries[$0].isCompressed) })
    for (i, position) in victims.enumerated() where !removed[i] { evicted[position] = false }
    // What was evicted stays evicted; the first file that could not be
    // unlinked is reported.
    if let failure { throw failure }
    return evicted
  }

  /// How many unlinks a removal has in flight at once (8000 files: 0.81 s
  /// one by one, 0.32 s from 8 threads, on a `discard` mount).
  static let unlinkWidth = 8

  /// Removes `digest`'s object whatever its state — row, pins and keys,
  /// then its files — in the two steps ``evict(_:now:)`` takes. Only a put
  /// of the same bytes in between calls it off (the put stores them
  /// again); a read, a pin or a key finds the object gone. Whether there
  /// was anything.
  func drop(_ digest: Digest) throws(TroveError) -> Bool {
    let hadRow = try index().write("remove \(digest)", durable: true) {
      (tx) throws(TroveError) -> Bool in
      let hadRow = try tx.deleteObject(digest)
      try tx.insertRemovals([digest], now: currentTimeNanoseconds(), explicit: true)
      return hadRow
    }
    let (_, unlinked, failure) = try finishRemovals([(digest, nil)])
    if let failure { throw failure }
    return unlinked[0] || hadRow
  }

  /// The second step of a removal, in one index transaction: for each
  /// digest whose removal record is still there, takes the record and
  /// unlinks the files (the `recorded` form first); returns which were
  /// removed, which had a file to unlink, and the first failure. A file
  /// that could not be unlinked is adopted back.
  private func finishRemovals(_ victims: [(digest: Digest, recorded: Bool?)])
    throws(TroveError) -> (removed: [Bool], unlinked: [Bool], failure: TroveError?)
  {
    guard !victims.isEmpty else { return ([], [], nil) }
    return try index().write("remove \(victims.count) files") {
      (tx) throws(TroveError) -> ([Bool], [Bool], TroveError?) in
      var removed = try tx.deleteRemovals(victims.map(\.digest))
      let claimed = victims.indices.filter { removed[$0] }
      let failures = Mutex<[Int: TroveError]>([:])
      let unlinked = Mutex([Bool](repeating: false, count: victims.count))
      Parallel.forEach(claimed.count, width: claimed.count < 16 ? 1 : Self.unlinkWidth) {
        [self] (i) throws(Never) in
        let victim = victims[claimed[i]]
        do throws(TroveError) {
          let found = try removeFiles(victim.digest, recorded: victim.recorded)
          unlinked.withLock { $0[claimed[i]] = found }
        } catch {
          failures.withLock { $0[claimed[i]] = error }
        }
      }
      let failed = failures.withLock { $0 }.sorted { $0.key < $1.key }
      for (position, _) in failed {
        // Its file is still there: so is its object.
        var unmeasured: [Digest] = []  // an orphan then, adopted later
        _ = try reconcile(tx, victims[position].digest, repair: true, deferred: &unmeasured)
        removed[position] = false
      }
      try tx.deleteReferences(to: victims.indices.filter { removed[$0] }.map { victims[$0].digest })
      return (removed, unlinked.withLock { $0 }, failed.first?.value)
    }
  }

  /// Removes one form of `digest`'s object file — a corrupt one, found by
  /// verify — if it is still the file verify read (`inode`): one that
  /// was evicted and stored again meanwhile is another file. When the
  /// other form is there too, the row is made to name it, in the
  /// transaction that unlinks the bad file; otherwise the object goes as
  /// ``drop(_:)`` removes it.
  func drop(_ digest: Digest, compressed: Bool, inode: UInt64) throws(TroveError) {
    let other = try status(digest, compressed: !compressed)?.isRegular == true
    let proceed = try index().write("remove \(digest)", durable: !other) {
      (tx) throws(TroveError) -> Bool in
      guard try status(digest, compressed: compressed)?.inode == inode else { return false }
      if other {
        do throws(SystemCallError) {
          try objectsDirectory.removeFile(StoreLayout.objectPath(digest, compressed: compressed))
        } catch  where error.errno == .noSuchFileOrDirectory {
        } catch {
          throw TroveError.system(error, "remove", path: path(digest, compressed: compressed))
        }
        var unmeasured: [Digest] = []
        _ = try reconcile(tx, digest, repair: true, deferred: &unmeasured)
        return false
      }
      _ = try tx.deleteObject(digest)
      try tx.insertRemovals([digest], now: currentTimeNanoseconds(), explicit: true)
      return true
    }
    if proceed {
      let (_, _, failure) = try finishRemovals([(digest, compressed)])
      if let failure { throw failure }
    }
  }

  /// Unlinks `digest`'s object files, `recorded` form (the one the index
  /// knew) first, then the other, which a crashed conversion may have
  /// left; whether there was one. Call inside a write transaction.
  private func removeFiles(_ digest: Digest, recorded: Bool? = nil) throws(TroveError) -> Bool {
    var removed = false
    for compressed in [recorded ?? false, !(recorded ?? false)] {
      do throws(SystemCallError) {
        try objectsDirectory.removeFile(StoreLayout.objectPath(digest, compressed: compressed))
        removed = true
      } catch  where error.errno == .noSuchFileOrDirectory {
        continue
      } catch {
        throw TroveError.system(error, "remove", path: path(digest, compressed: compressed))
      }
    }
    return removed
  }

  // MARK: Converting form

  /// Replaces `old` (the object file of `staged.digest` as it was when the
  /// conversion started) with `staged`, the same bytes in the other form:
  /// in one transaction, publishes `staged` beside it, records the new
  /// form, and unlinks the old file. Abandoned (nil) when the object was
  /// removed, evicted or replaced meanwhile. The staged file is gone from
  /// `tmp/` when this returns or throws.
  func replaceForm(of old: StoredObject, with staged: StagedObject) throws(TroveError) -> Entry? {
    let digest = staged.digest
    let newPath = path(digest, compressed: staged.isCompressed)
    var renamed = false
    defer { if !renamed { try? tmpDirectory.removeFile(staged.name) } }
    let allocated = try attempt("store", newPath) { () throws(SystemCallError) -> Int64 in
      try staged.file.setPermissions(StoreLayout.objectPermissions)
      try staged.file.sync()
      return try staged.file.status().contentBytes
    }
    let folder = try fanoutFolder(digest)
    defer { folder.close() }
    let entry = try index().write("convert \(digest)") { (tx) throws(TroveError) -> Entry? in
      guard let current = try status(digest, compressed: old.isCompressed),
        current.inode == old.status.inode, current.isRegular
      else { return nil }
      // No row: being removed (or never indexed): the conversion is dropped.
      guard let row = try tx.entry(for: digest) else { return nil }
      do throws(SystemCallError) {
        try tmpDirectory.renameWithoutReplacing(
          staged.name, to: StoreLayout.objectPath(digest, compressed: staged.isCompressed),
          in: objectsDirectory)
        renamed = true
      } catch  where error.errno == .fileExists {
        // A twin left by a crash: it is published, so it holds the bytes.
      } catch {
        throw TroveError.system(error, "store", path: newPath)
      }
      guard let published = try status(digest, compressed: staged.isCompressed),
        published.isRegular
      else { return nil }
      let entry = Entry(
        digest: digest, size: staged.size,
        allocatedBytes: renamed ? allocated : published.contentBytes,
        created: row.created, lastAccess: row.lastAccess,
        isCompressed: staged.isCompressed, storedBytes: published.size)
      try tx.upsert(entry)
      do throws(SystemCallError) {
        try objectsDirectory.removeFile(
          StoreLayout.objectPath(digest, compressed: old.isCompressed))
      } catch  where error.errno == .noSuchFileOrDirectory {
      } catch {
        throw TroveError.system(error, "remove", path: path(digest, compressed: old.isCompressed))
      }
      if renamed {
        try attempt("store", newPath) { () throws(SystemCallError) in try folder.sync() }
      }
      return entry
    }
    return entry
  }

  // MARK: Pins and keys

  /// Pins `digest` under `name` until `expires`, in the transaction that
  /// confirms the object is there: a pin either protects its object or fails.
  ///
  /// - Throws: `.notFound` when the store does not hold `digest`.
  func pin(_ digest: Digest, name: String, expires: Int64?) throws(TroveError) {
    let now = currentTimeNanoseconds()
    try withPresent(digest, "pin \(digest)") { (tx) throws(TroveError) in
      try tx.insertPin(digest, name: name, expires: expires, now: now)
    }
  }

  /// Points `key` at `digest`, in the transaction that confirms the object
  /// is there.
  ///
  /// - Throws: `.notFound` when the store does not hold `digest`.
  func bind(key: String, to digest: Digest) throws(TroveError) {
    let now = currentTimeNanoseconds()
    try withPresent(digest, "bind key '\(key)'") { (tx) throws(TroveError) in
      try tx.insertKey(key, digest: digest, at: now)
    }
  }

  /// Runs `body` in a write transaction in which `digest`'s object is
  /// there, with its row (adopted if it was missing); or throws
  /// `.notFound` (dropping a row left without its file).
  private func withPresent(
    _ digest: Digest, _ action: String, _ body: (IndexSession) throws(TroveError) -> Void
  ) throws(TroveError) {
    var measured: [Digest: Measured] = [:]
    for _ in 0..<2 {
      let done = try index().write(action) { (tx) throws(TroveError) -> Bool in
        var deferred: [Digest] = []
        _ = try reconcile(tx, digest, repair: true, measured: measured, deferred: &deferred)
        if !deferred.isEmpty { return false }
        guard try tx.entry(for: digest) != nil else { throw notFound(digest) }
        try body(tx)
        return true
      }
      if done { return }
      measured = measure([digest])
    }
    throw notFound(digest)
  }

  /// The error for a digest the store does not hold.
  func notFound(_ digest: Digest) -> TroveError {
    TroveError(
      .notFound, "no object \(digest) in store '\(root)'", path: path(digest),
      value: digest.description)
  }

  // MARK: Reconciling

  /// Makes `digest`'s row agree with its files, in one transaction: adopts
  /// a file without a row, drops a row without a file (with its pins and
  /// keys), corrects a row whose form or size is wrong, and removes the
  /// compressed copy of a digest present in both forms. A compressed file
  /// whose frame does not record its length is measured outside the
  /// transaction, then reconciled in a second one.
  @discardableResult
  func reconcile(_ digest: Digest) throws(TroveError) -> ReconcileReport {
    var report = ReconcileReport()
    var measured: [Digest: Measured] = [:]
    for _ in 0..<2 {
      var deferred: [Digest] = []
      report.add(
        try index().write("reconcile \(digest)") { (tx) throws(TroveError) in
          try reconcile(tx, digest, repair: true, measured: measured, deferred: &deferred)
        })
      if deferred.isEmpty { break }
      measured = measure(deferred)
    }
    return report
  }

  /// Reconciles every digest of fan-out folder `folder` (0–255) — its
  /// files and its rows — in one transaction. O(objects in the folder).
  func reconcile(folder: Int, repair: Bool) throws(TroveError) -> ReconcileReport {
    var deferred: [Digest] = []
    var report = try index().write("reconcile a folder") { (tx) throws(TroveError) in
      try reconcile(tx, folder: folder, repair: repair, deferred: &deferred)
    }
    report.add(try reconcile(deferred, repair: repair))
    return report
  }

  /// Reconciles the next fan-out folder in turn (the index's cursor), so
  /// that sweeps, one folder each, reconcile every folder once in 256.
  func reconcileNextFolder() throws(TroveError) -> ReconcileReport {
    var deferred: [Digest] = []
    var report = try index().write("reconcile a folder") { (tx) throws(TroveError) in
      try reconcile(tx, folder: try tx.nextReconcileFolder(), repair: true, deferred: &deferred)
    }
    report.add(try reconcile(deferred, repair: true))
    return report
  }

  /// Reconciles `digests`, whose compressed files needed measuring: each
  /// is measured first, then reconciled in a transaction of its own.
  private func reconcile(_ digests: [Digest], repair: Bool) throws(TroveError)
    -> ReconcileReport
  {
    var report = ReconcileReport()
    for digest in digests {
      let measured = measure([digest])
      var again: [Digest] = []
      report.add(
        try index().write("reconcile \(digest)") { (tx) throws(TroveError) in
          try reconcile(tx, digest, repair: repair, measured: measured, deferred: &again)
        })
    }
    return report
  }

  private func reconcile(
    _ tx: IndexSession, folder: Int, repair: Bool, deferred: inout [Digest]
  ) throws(TroveError) -> ReconcileReport {
    let name = String(folder, radix: 16).leftPadded(to: 2)
    do {
      var report = ReconcileReport()
      var rows: [Digest: Entry] = [:]
      for entry in try tx.entries(withPrefix: name) { rows[entry.digest] = entry }
      // A removal between its two steps is finished here when repairing
      // (its remover meant it, and may have died), and is no problem to
      // report otherwise.
      let removals = try tx.removals(withPrefix: name)
      if repair {
        for digest in removals.keys {
          _ = try tx.deleteRemovals([digest])
          if rows[digest] == nil {
            if try removeFiles(digest) { report.removalsFinished += 1 }
            _ = try tx.deleteObject(digest)  // pins and keys a crash left
          }
        }
      }
      let inProgress: Set<Digest> = repair ? [] : Set(removals.keys)
      var forms: [Digest: [Bool]] = [:]
      for file in try listing(name) {
        let compressed = file.hasSuffix(StoreLayout.compressedSuffix)
        let hex = compressed ? String(file.dropLast(StoreLayout.compressedSuffix.count)) : file
        guard let digest = Digest(hex: Substring(hex)), hex == digest.hex, hex.hasPrefix(name)
        else {
          report.unexpected.append(objectsPath + "/" + name + "/" + file)
          continue
        }
        forms[digest, default: []].append(compressed)
      }
      let digests = Set(rows.keys).union(forms.keys).subtracting(inProgress)
      for digest in digests.sorted(by: { $0.hex < $1.hex }) {
        // What the listing and the rows already say, both read in this
        // transaction: one `fstatat` per file, no query per digest.
        let known = Known(row: rows[digest], forms: forms[digest] ?? [])
        report.add(
          try reconcile(tx, digest, repair: repair, known: known, deferred: &deferred))
      }
      return report
    }
  }

  /// Reconciles every fan-out folder; reports names under `objects/` that
  /// are not fan-out folders. O(objects).
  func reconcileAll(repair: Bool) throws(TroveError) -> ReconcileReport {
    var report = ReconcileReport()
    for name in try listing(nil).sorted() {
      let isFolder = (try? objectsDirectory.status(of: name, followSymlinks: false))?.isDirectory
      guard name.utf8.count == 2, UInt8(name, radix: 16) != nil, name == name.lowercased(),
        isFolder == true
      else {
        report.unexpected.append(objectsPath + "/" + name)
        continue
      }
    }
    for folder in 0..<256 {
      report.add(try reconcile(folder: folder, repair: repair))
    }
    return report
  }

  /// The names in fan-out folder `name` (or in `objects/` itself when nil);
  /// empty when the folder does not exist.
  private func listing(_ name: String?) throws(TroveError) -> [String] {
    let folderPath = objectsPath + (name.map { "/" + $0 } ?? "")
    do throws(SystemCallError) {
      guard let name else { return try objectsDirectory.entries() }
      let folder = try FileDescriptor.open(
        name, in: objectsDirectory, [.directory, .noFollow])
      defer { folder.close() }
      return try folder.entries()
    } catch  where error.errno == .noSuchFileOrDirectory {
      return []
    } catch {
      throw TroveError.system(error, "list", path: folderPath)
    }
  }

  /// Reconciles one digest inside a write transaction.
  private func reconcile(
    _ tx: IndexSession, _ digest: Digest, repair: Bool, known: Known? = nil,
    measured: [Digest: Measured] = [:], deferred: inout [Digest]
  ) throws(TroveError) -> ReconcileReport {
    var report = ReconcileReport()
    var raw: FileStatus? = nil
    var zst: FileStatus? = nil
    if known?.forms.contains(false) ?? true { raw = try status(digest, compressed: false) }
    if known?.forms.contains(true) ?? true { zst = try status(digest, compressed: true) }
    for (form, status) in [(false, raw), (true, zst)] where status.map({ !$0.isRegular }) == true {
      report.unexpected.append(path(digest, compressed: form))
    }
    if raw?.isRegular == false { raw = nil }
    if zst?.isRegular == false { zst = nil }
    let row: Entry?
    if let known { row = known.row } else { row = try tx.entry(for: digest) }
    // A removal in progress is settled (a folder's reconcile settled its
    // own already). An eviction is called off: a read, a pin or a key
    // wants the object, or its remover died. An explicit `rm` is
    // finished: nothing but a put brings the object back.
    if repair && known == nil, let explicit = try tx.removal(of: digest) {
      _ = try tx.deleteRemovals([digest])
      if explicit && row == nil {
        if try removeFiles(digest) { report.removalsFinished += 1 }
        _ = try tx.deleteObject(digest)
        return report
      }
    }
    if raw != nil && zst != nil {
      // Both forms (a crash during a conversion): both hold the bytes;
      // readers prefer the raw one, so the compressed one goes.
      report.twins += 1
      if repair {
        try attempt("remove", path(digest, compressed: true)) { () throws(SystemCallError) in
          do throws(SystemCallError) {
            try objectsDirectory.removeFile(StoreLayout.objectPath(digest, compressed: true))
          } catch  where error.errno == .noSuchFileOrDirectory {}
        }
        zst = nil
      }
    }
    guard let file = raw ?? zst else {
      if row != nil { report.dropped += 1 }
      // The row, and any pins and keys a crash left without it.
      if repair { _ = try tx.deleteObject(digest) }
      return report
    }
    let isCompressed = raw == nil
    if let row, row.isCompressed == isCompressed, row.storedBytes == file.size,
      isCompressed || row.size == file.size
    {
      return report
    }
    var size = file.size
    if isCompressed {
      if let content = contentSize(ofCompressed: digest) {
        size = content
      } else if let known = measured[digest], known.inode == file.inode,
        known.storedBytes == file.size
      {
        size = known.size
      } else {
        // A stream's frame does not record its length: it is measured by
        // decompressing it, outside this transaction, and done again.
        deferred.append(digest)
        return report
      }
    }
    let time = file.modificationTime.multipliedSaturated(by: 1_000_000_000)
    if row == nil { report.added += 1 } else { report.corrected += 1 }
    if repair {
      try tx.upsert(
        Entry(
          digest: digest, size: size, allocatedBytes: file.contentBytes,
          created: row?.created ?? time, lastAccess: row?.lastAccess ?? time,
          isCompressed: isCompressed, storedBytes: file.size))
    }
    return report
  }

  /// What a folder's listing and rows say of one digest.
  private struct Known {
    var row: Entry?
    /// The forms its listing holds (`true`: compressed).
    var forms: [Bool]
  }

  /// The length a compressed object's frame header records, if it does
  /// (a stream's frame does not). Nil when it cannot be read.
  private func contentSize(ofCompressed digest: Digest) -> Int64? {
    guard let fd = try? open(digest, compressed: true) else { return nil }
    defer { fd.close() }
    let header = UnsafeMutableRawBufferPointer.allocate(byteCount: 18, alignment: 8)
    defer { header.deallocate() }
    guard let n = try? fd.read(into: header, at: 0) else { return nil }
    return Zstd.contentSize(ofFrameStart: UnsafeRawBufferPointer(rebasing: header[..<n]))
  }

  /// A compressed object's length, measured by decompressing (and
  /// verifying) the file, and which file that was.
  struct Measured {
    var inode: UInt64
    var storedBytes: Int64
    var size: Int64
  }

  /// Measures the compressed objects of `digests` outside any transaction;
  /// unreadable or corrupt ones are left out (verify reports them).
  private func measure(_ digests: [Digest]) -> [Digest: Measured] {
    var found: [Digest: Measured] = [:]
    for digest in digests {
      guard let fd = try? open(digest, compressed: true), let status = try? fd.status() else {
        continue
      }
      defer { fd.close() }
      guard
        let size = try? decompressVerified(
          fd, digest: digest, objectPath: path(digest, compressed: true), destination: "<count>",
          sink: { _ in })
      else { continue }
      found[digest] = Measured(inode: status.inode, storedBytes: status.size, size: size)
    }
    return found
  }
}

extension String {
  /// The string with `"0"`s in front up to `width` characters.
  func leftPadded(to width: Int) -> String {
    String(repeating: "0", count: max(0, width - count)) + self
  }
}
