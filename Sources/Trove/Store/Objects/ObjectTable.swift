import Foundation
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
  var digest: BlobDigest
  /// Their length.
  var size: Int64
  /// Whether the file is a zstd frame.
  var isCompressed: Bool
  /// The file's length.
  var storedBytes: Int64
  /// Why it is raw although compression was on, if it is.
  var skipped: CompressionSkip?
  /// The key to bind in the transaction that publishes the object or
  /// counts its dedup hit.
  var binding: KeyRequest?
  /// Its content-defined chunks, cut as it was written (large raw objects
  /// only), recorded with its row.
  var manifest: ChunkManifest?
}

/// What ``ObjectTable/publish(group:)`` did to one object.
enum PublishOutcome {
  /// The staged file is now the object.
  case stored(StoreEntry)
  /// The store already held the bytes: the staged file was dropped and the
  /// put counted as a dedup hit.
  case duplicate(StoreEntry)
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
  /// The store's root folder (the table does not own it).
  let rootDirectory: FileDescriptor
  let objectsDirectory: FileDescriptor
  let tmpDirectory: FileDescriptor
  /// The kind of filesystem the store is on (for the index's journal mode).
  let filesystem: FilesystemKind
  /// On XFS, where it puts inodes (see
  /// ``FileDescriptor/xfsAllocationGroups()``): removals unlink the files
  /// of different allocation groups from different threads. Nil elsewhere.
  let allocationGroups: (count: Int, inodeBits: Int)?
  /// Who may read and write the store: the modes of what the table makes.
  let access: StoreAccess
  /// The store's root folder by a path with no symbolic link, for SQLite.
  let resolvedRoot: String
  /// Whether the store cannot be written by this process: the index is
  /// opened read-only and nothing is repaired.
  let isReadOnly: Bool
  /// Told, in one line, of what the store repaired on its own.
  let warn: @Sendable (String) -> Void
  /// Tells ``StoreConfiguration/trace`` of the table's decisions.
  let trace: Tracer
  /// Which of the removal engine's optimisations it makes.
  let removalTuning: RemovalTuning
  private let state = Mutex<IndexState>(.closed)
  /// Wakes the threads waiting for another's rebuild of the index: they
  /// sleep until it ends rather than poll, which on two cores would slow
  /// the rebuild they wait for.
  private let rebuildEnded = NSCondition()
  nonisolated(unsafe) private var rebuildsEnded = 0  // under rebuildEnded
  /// Whether a read has looked at the index without opening it
  /// (``peekLastAccess(_:)``): only the first does, as a process that reads
  /// more is better served by the index kept open.
  let hasPeeked = Atomic(false)
  /// The single puts of this process waiting to be published together.
  let commits = CommitQueue()
  /// Whether a `syncfs(2)` through ``tmpDirectory`` has reported a lost
  /// write (see ``syncFilesystem()``).
  let syncfsLostWrites = Mutex(false)
  /// The bytes the log's live lines took when this process last measured
  /// them (``journal(_:_:)``), to measure them again only once the log
  /// could be four times as long.
  let journalLive = Mutex<Int64?>(nil)
  private let rebuilt = Mutex<ReconcileReport?>(nil)

  var objectsPath: String { root + "/" + StoreLayout.objects }
  var tmpPath: String { root + "/" + StoreLayout.tmp }
  var indexPath: String { root + "/" + StoreLayout.index }

  init(
    root: String, rootDirectory: FileDescriptor, objects: FileDescriptor, tmp: FileDescriptor,
    filesystem: FilesystemKind, access: StoreAccess, resolvedRoot: String, isReadOnly: Bool,
    warn: @escaping @Sendable (String) -> Void, trace: Tracer = Tracer(nil),
    removalTuning: RemovalTuning = .tuned
  ) {
    self.removalTuning = removalTuning
    self.root = root
    self.isReadOnly = isReadOnly
    self.access = access
    self.resolvedRoot = resolvedRoot
    self.warn = warn
    self.trace = trace
    self.rootDirectory = rootDirectory
    objectsDirectory = objects
    tmpDirectory = tmp
    self.filesystem = filesystem
    allocationGroups = filesystem == .xfs ? try? objects.xfsAllocationGroups() : nil
  }

  /// The absolute path of `digest`'s object file in one form (whether or not it exists).
  func path(_ digest: BlobDigest, compressed: Bool = false) -> String {
    objectsPath + "/" + StoreLayout.objectPath(digest, compressed: compressed)
  }

  /// Whether this process has the index open (or is rebuilding it).
  var hasOpenIndex: Bool {
    state.withLock { state in
      if case .closed = state { return false }
      return true
    }
  }

  /// The index, opened on first use. A new index beside existing objects
  /// (first use, or the index was deleted, lost or set aside as damaged)
  /// is rebuilt from them and from `references.log` before any other
  /// thread of this process gets it (they wait), and by every process that
  /// opens it until a rebuild has finished: a sweep never runs on an index
  /// whose pins are not back yet.
  func index() throws(TroveError) -> Index {
    let me = ObjectIdentifier(Thread.current)
    while true {
      // Read before the state: a rebuild that ends after this changes it.
      let ended = endedRebuilds()
      let step: Result<IndexStep, TroveError> = state.withLock { state in
        switch state {
        case .ready(let index): return .success(.use(index))
        case .rebuilding(let index, let owner): return .success(owner == me ? .use(index) : .wait)
        case .closed:
          do throws(TroveError) {
            let index = try openIndex()
            guard index.needsRebuild else {
              state = .ready(index)
              return .success(.use(index))
            }
            guard !isReadOnly else {
              throw TroveError(
                .readOnlyStore,
                "read-only store '\(root)': its index '\(indexPath)' was never filled from the objects (a rebuild is pending), which needs writing it; open the store where it is writable once",
                path: indexPath)
            }
            // What the log holds now: later lines are changes made
            // through this index.
            let logged = try? rootDirectory.status(of: StoreLayout.journal, followSymlinks: false)
              .size
            state = .rebuilding(index, owner: me)
            return .success(.rebuild(index, journalLength: logged ?? 0))
          } catch {
            return .failure(error)
          }
        }
      }
      switch try step.get() {
      case .use(let index) where index.isStale:
        // A read-only store's index read without locks, which someone
        // with write access changed (that read failed `.busy`): open it
        // afresh, so a long-lived process goes on with what is there now.
        forgetIndex(index)
      case .use(let index): return index
      case .wait: waitForRebuild(after: ended)
      case .rebuild(let index, let logged):
        defer { rebuildEnd() }
        do throws(TroveError) {
          try rebuild(journalLength: logged)
        } catch {
          forgetIndex(index)
          throw error
        }
        state.withLock { state in
          if case .rebuilding(let current, _) = state, current === index { state = .ready(index) }
        }
        return index
      }
    }
  }

  /// How many rebuilds of this process have ended.
  private func endedRebuilds() -> Int {
    rebuildEnded.lock()
    defer { rebuildEnded.unlock() }
    return rebuildsEnded
  }

  /// Sleeps until a rebuild ends, unless one ended since `ended` was read;
  /// at most 100 ms, to look again whatever happened.
  private func waitForRebuild(after ended: Int) {
    rebuildEnded.lock()
    defer { rebuildEnded.unlock() }
    if rebuildsEnded == ended {
      _ = rebuildEnded.wait(until: Date(timeIntervalSinceNow: 0.1))
    }
  }

  private func rebuildEnd() {
    rebuildEnded.lock()
    rebuildsEnded += 1
    rebuildEnded.broadcast()
    rebuildEnded.unlock()
  }

  /// Where this process stands with the index.
  enum IndexState {
    case closed
    /// Being filled by thread `owner` (whose own calls get it).
    case rebuilding(Index, owner: ObjectIdentifier)
    case ready(Index)
  }

  private enum IndexStep {
    case use(Index)
    case wait
    case rebuild(Index, journalLength: Int64)
  }

  /// Forgets the open index (set aside as damaged, or its rebuild
  /// failed): the next ``index()`` opens, and rebuilds, one again.
  func forgetIndex(_ index: Index) {
    state.withLock { state in
      switch state {
      case .ready(let current) where current === index: state = .closed
      case .rebuilding(let current, _) where current === index: state = .closed
      default: break
      }
    }
  }

  /// Fills a new index: from `objects/`, then the pins and keys of the
  /// first `journalLength` bytes of `references.log`; says what it
  /// recovered when there was anything.
  private func rebuild(journalLength: Int64) throws(TroveError) {
    var report = try reconcileAll(repair: true)
    let replay = journalLength > 0 ? try replayJournal(length: journalLength) : nil
    try index().write("finish rebuilding the index") { (tx) throws(TroveError) in
      try tx.clearRebuildPending()
    }
    report.pinsRestored = replay?.pins ?? 0
    report.keysRestored = replay?.keys ?? 0
    report.referencesLost = replay?.lost ?? 0
    rebuilt.withLock { $0 = report }
    guard report.added > 0 || replay != nil else { return }
    warn(
      "index '\(indexPath)' rebuilt from the objects: \(MessageText.count(report.added, "object")), \(MessageText.count(report.pinsRestored, "pin")) and \(MessageText.count(report.keysRestored, "key")) restored from \(StoreLayout.journal)"
        + (report.referencesLost > 0
          ? "; \(report.referencesLost) pins or keys not restored (their objects are gone, or their lease ran out)"
          : ""))
  }

  /// What the last rebuild of a new index found, taken once (by
  /// ``Store/rebuildIndex()``, to report it).
  func takeRebuildReport() -> ReconcileReport? {
    rebuilt.withLock { report in
      defer { report = nil }
      return report
    }
  }

  // MARK: Finding objects (no state change)

  /// `digest`'s object file, raw (preferred: it can be cloned) or
  /// compressed, or nil when there is neither. Symbolic links are not
  /// followed. One `openat` of its fan-out folder, then one `fstatat` for
  /// a raw object, two for a compressed one, three for a miss.
  ///
  /// A miss is only a look unless `confirmingMiss`: then a miss of a digest
  /// the index records is looked at again inside an index write
  /// transaction, where no conversion or removal is half done (a reader
  /// preempted between its looks can otherwise miss both forms of an object
  /// being converted), and the row goes if the object really is gone.
  /// Misses of digests the index does not know cost one index read more.
  func find(_ digest: BlobDigest, confirmingMiss: Bool = false) throws(TroveError)
    -> StoredObject?
  {
    let look = { () throws(TroveError) -> StoredObject? in
      guard let folder = try self.openFolder(of: digest) else { return nil }
      defer { folder.close() }
      return try self.find(digest, in: folder)
    }
    if let found = try look() { return found }
    return confirmingMiss ? confirming(digest, look) : nil
  }

  /// ``find(_:confirmingMiss:)`` in `digest`'s fan-out folder, already
  /// open: one look.
  func find(_ digest: BlobDigest, in folder: FileDescriptor) throws(TroveError)
    -> StoredObject?
  {
    // Raw, compressed, then raw again: a conversion to raw publishes the
    // raw file before it unlinks the frame, so a look that missed both
    // between the two steps finds the raw one the second time.
    for compressed in [false, true, false] {
      if let status = try status(digest, compressed: compressed, in: folder) {
        return StoredObject(status: status, isCompressed: compressed)
      }
    }
    return nil
  }

  /// The status of one form of `digest`'s object file, nil when absent.
  func status(_ digest: BlobDigest, compressed: Bool) throws(TroveError) -> FileStatus? {
    guard let folder = try openFolder(of: digest) else { return nil }
    defer { folder.close() }
    return try status(digest, compressed: compressed, in: folder)
  }

  /// The status of one form of `digest`'s object file in its open fan-out
  /// `folder`, not following a symbolic link; nil when absent.
  func status(_ digest: BlobDigest, compressed: Bool, in folder: FileDescriptor)
    throws(TroveError) -> FileStatus?
  {
    do throws(SystemCallError) {
      return try folder.status(
        of: StoreLayout.objectName(digest, compressed: compressed), followSymlinks: false)
    } catch  where error.errno == .noSuchFileOrDirectory {
      return nil
    } catch {
      throw TroveError.system(error, "look up", path: path(digest, compressed: compressed))
    }
  }

  // MARK: Fan-out folders: every object file is one name in its folder

  /// Opens `digest`'s fan-out folder, as a folder and never through a
  /// symbolic link (`O_DIRECTORY|O_NOFOLLOW`), so each object file is then
  /// reached as one name relative to it: nothing in a store's layout can
  /// lead a look, a write or a removal outside it. Nil when the folder is
  /// missing or is not a folder (a link, a file: it holds no objects;
  /// `verify` reports it, `--repair` moves it to `quarantine/`).
  func openFolder(of digest: BlobDigest) throws(TroveError) -> FileDescriptor? {
    let name = StoreLayout.fanout(digest)
    do throws(SystemCallError) {
      return try FileDescriptor.open(name, in: objectsDirectory, [.directory, .noFollow])
    } catch  where error.errno == .noSuchFileOrDirectory || error.errno.meansNotAFolder {
      return nil
    } catch {
      throw TroveError.system(error, "look up", path: objectsPath + "/" + name)
    }
  }

  /// Unlinks one form of `digest`'s object file (whatever sits under that
  /// name: a link is removed, never followed). `unlinkat(2)` relative to
  /// its fan-out folder; ENOENT when there is no such file or folder.
  func unlinkObject(_ digest: BlobDigest, compressed: Bool) throws(SystemCallError) {
    let folder = try FileDescriptor.open(
      StoreLayout.fanout(digest), in: objectsDirectory, [.directory, .noFollow])
    defer { folder.close() }
    try folder.removeFile(StoreLayout.objectName(digest, compressed: compressed))
  }

  /// After a miss: when the index has a row for `digest`, looks again
  /// with `look` inside a write transaction, and drops the row there if
  /// the object really is gone. A store whose index cannot be written
  /// (read-only, busy past the timeout) keeps the first answer: a read
  /// never fails for that.
  private func confirming<T>(_ digest: BlobDigest, _ look: () throws(TroveError) -> T?) -> T? {
    guard
      !isReadOnly,
      let indexed = try? index().read(
        "look up \(digest)",
        { (tx) throws(TroveError) in
          try tx.entry(for: digest) != nil
        }), indexed
    else { return nil }
    return try? index().write("look up \(digest)") { (tx) throws(TroveError) -> T? in
      if let found = try look() { return found }
      var deferred: [BlobDigest] = []
      _ = try reconcile(tx, digest, repair: true, deferred: &deferred)
      return nil
    }
  }

  /// Whether `digest` has a file in both forms (a crash during a conversion).
  func isStoredTwice(_ digest: BlobDigest) throws(TroveError) -> Bool {
    guard try status(digest, compressed: false) != nil else { return false }
    return try status(digest, compressed: true) != nil
  }

  /// Opens `digest`'s object for reading, raw if there is one (it can be
  /// cloned), else compressed; says which. Never follows a symbolic link or
  /// blocks on a FIFO; anything but a regular file is a corrupt entry.
  /// Nil when there is no object; a miss is confirmed as
  /// ``find(_:confirmingMiss:)`` confirms one when `confirmingMiss`.
  func open(_ digest: BlobDigest, confirmingMiss: Bool = false) throws(TroveError) -> (
    FileDescriptor, isCompressed: Bool
  )? {
    let look = { () throws(TroveError) -> (FileDescriptor, isCompressed: Bool)? in
      guard let folder = try self.openFolder(of: digest) else { return nil }
      defer { folder.close() }
      for compressed in [false, true, false] {  // as ``find(_:in:)`` looks
        if let fd = try self.open(digest, compressed: compressed, in: folder) {
          return (fd, compressed)
        }
      }
      return nil
    }
    if let opened = try look() { return opened }
    return confirmingMiss ? confirming(digest, look) : nil
  }

  /// Opens one form of `digest`'s object for reading, as
  /// ``open(_:confirmingMiss:)`` does; nil when that file does not exist.
  func open(_ digest: BlobDigest, compressed: Bool) throws(TroveError) -> FileDescriptor? {
    guard let folder = try openFolder(of: digest) else { return nil }
    defer { folder.close() }
    return try open(digest, compressed: compressed, in: folder)
  }

  private func open(_ digest: BlobDigest, compressed: Bool, in folder: FileDescriptor)
    throws(TroveError) -> FileDescriptor?
  {
    let fd: FileDescriptor
    do throws(SystemCallError) {
      fd = try FileDescriptor.open(
        StoreLayout.objectName(digest, compressed: compressed), in: folder,
        [.readOnly, .noFollow, .nonBlocking])
    } catch  where error.errno == .noSuchFileOrDirectory {
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
    name: String, digest: BlobDigest, isCompressed: Bool
  )] {
    let name = String(folder, radix: 16).leftPadded(to: 2)
    return try listing(name).compactMap { file in
      let compressed = file.hasSuffix(StoreLayout.compressedSuffix)
      let hex = compressed ? String(file.dropLast(StoreLayout.compressedSuffix.count)) : file
      guard let digest = BlobDigest(hex: Substring(hex)), hex == digest.hex, hex.hasPrefix(name)
      else { return nil }
      return (file, digest, compressed)
    }
  }

  /// The error for something at an object's path that is not a regular
  /// file (a link, a folder, a FIFO): a corrupt entry, never followed.
  func notAFile(_ digest: BlobDigest, compressed: Bool, what: String) -> TroveError {
    let objectPath = path(digest, compressed: compressed)
    return TroveError(
      .corruptObject,
      "object '\(objectPath)' is corrupt: it is \(what)", path: objectPath,
      value: digest.description, remedy: .repairStore)
  }

  /// The error for a digest the store does not hold.
  func notFound(_ digest: BlobDigest) -> TroveError {
    TroveError(
      .notFound, "no object \(digest) in store '\(root)'", path: path(digest),
      value: digest.description)
  }
}

extension String {
  /// The string with `"0"`s in front up to `width` characters.
  func leftPadded(to width: Int) -> String {
    String(repeating: "0", count: max(0, width - count)) + self
  }
}
