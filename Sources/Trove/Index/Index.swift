import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The SQLite index beside the objects: one row per object, pins, named
/// keys, running totals kept by triggers (so totals are O(1), never a
/// walk), and a log of sweeps.
///
/// The objects folder is the truth for content; this index may lag it (an
/// orphan file, a row whose file is gone after a crash) and is reconciled
/// with it by ``ObjectTable``, the only component that changes object rows.
///
/// Every access runs in an ``IndexSession``: ``read(_:_:)`` for lookups
/// (autocommit), ``write(_:_:)`` for changes, in one `BEGIN IMMEDIATE`
/// transaction that takes the write lock up front. A write body may make
/// filesystem changes too: that is how ``ObjectTable`` makes a change to
/// `objects/` and the row that records it one step for every other
/// process that goes through the index.
///
/// On a local filesystem the index runs in WAL mode, so readers proceed
/// while one process writes. On a network or FUSE filesystem, where WAL's
/// shared memory cannot be shared between hosts, it uses a rollback journal
/// (see ``journalMode(on:)``).
final class Index: Sendable {
  private let connection: Mutex<SQLiteConnection>
  /// Idle connections for reads made while another thread holds
  /// `connection` (a group commit through its renames and syncs): in WAL
  /// mode a reader needs no lock a writer holds, so a lookup need not
  /// wait for the commit. Opened when first needed; a single-threaded
  /// command never opens one.
  private let readers = Mutex<[SQLiteConnection]>([])
  /// At most this many idle reader connections are kept: as many as
  /// threads read at once, up to this, so that none is opened per read.
  private static let idleReaders = 64
  /// The database file.
  let path: String
  /// Whether the index is new and not yet filled from the objects and
  /// `references.log` (created by this open, or by one that did not finish
  /// the rebuild).
  let needsRebuild: Bool
  /// The journal mode in force (`wal`, or `persist` on shared and
  /// small-block filesystems; in a read-only store, what SQLite reports:
  /// the mode it was written in, or `delete` when opened immutable).
  let journalMode: String
  /// WAL bytes from which the last connection to close checkpoints the
  /// WAL; below, its frames stay for a later close
  /// (``SQLiteConnection/checkpointsOnCloseFrom``).
  static let walCloseLimit: Int64 = 256 << 10
  /// Whether the index was opened read-only (a read-only store): a write
  /// transaction only reads, and a statement that would write fails with
  /// `.readOnlyStore`.
  let isReadOnly: Bool
  /// Whether SQLite was told the file cannot change (`immutable=1`): how a
  /// read-only index is opened when nothing else works (see
  /// ``init(path:resolvedPath:filesystem:blockSize:readOnly:)``).
  var isImmutable: Bool { unlockedLook != nil }
  /// For an index opened `immutable=1`: its files as they were at the
  /// open, which every read checks they still are.
  private let unlockedLook: UnlockedIndexLook?
  /// Set when a read found the files of an immutable index changed: this
  /// connection reads a file that is no longer the index, and the store
  /// opens the index afresh (``ObjectTable/index()``).
  private let changedUnderUs = Atomic<Bool>(false)
  /// Whether a read through this connection found the index changed since
  /// the open (only an index read without locks can be): every later read
  /// through it would fail too, so the next one opens it again.
  var isStale: Bool { changedUnderUs.load(ordering: .relaxed) }
  /// The database file's path without symbolic links.
  private let resolvedPath: String
  /// A new connection to the file now at the index's path, set up as the
  /// first was; nil for a read-only index.
  private let reopen: (@Sendable () throws(TroveError) -> SQLiteConnection)?

  /// `db`, or a new connection in its place when the file it has open is
  /// no longer the index (`config set access` put the index in a new
  /// file): what this process writes goes to the index every process
  /// reads, never to a file no one will open again.
  private func following(_ db: inout SQLiteConnection) throws(TroveError) {
    guard let reopen, db.fileHasMoved else { return }
    do throws(TroveError) {
      db = try reopen()
    } catch {
      // No index under the name: the store opens (makes, rebuilds) one.
      changedUnderUs.store(true, ordering: .relaxed)
      throw error
    }
  }
  private let damageHandler = Mutex<(@Sendable (TroveError) -> Void)?>(nil)

  /// Called (once) when a statement finds the database damaged.
  var onDamage: (@Sendable (TroveError) -> Void)? {
    get { damageHandler.withLock { $0 } }
    set { damageHandler.withLock { $0 = newValue } }
  }

  /// Passes a damage error to ``onDamage`` (once), and returns it.
  private func noticing(_ error: TroveError) -> TroveError {
    if error.code == .indexDamaged {
      let handler = damageHandler.withLock { handler in
        defer { handler = nil }
        return handler
      }
      handler?(error)
    }
    return error
  }

  /// The journal mode for an index on `filesystem`, whose blocks are
  /// `blockSize` bytes: `WAL` where the filesystem is local; a persistent
  /// rollback journal (`PERSIST`) on NFS, SMB, 9p and FUSE, where WAL's
  /// shared-memory file cannot coordinate processes on different hosts
  /// and a rollback journal relies on the server's byte-range locks — and
  /// on filesystems with blocks under 4 KiB (ext4 made smaller than
  /// 512 MiB), where SQLite reserves each 4 KiB page of the mapped
  /// shared-memory file by writing its last byte, which leaves the rest of
  /// the page unallocated: on a full volume, touching it kills the process
  /// (SIGBUS). The journal persists (its header zeroed at commit instead of
  /// the file deleted), so its blocks stay allocated for the next
  /// transaction on a full volume.
  static func journalMode(on filesystem: FilesystemKind, blockSize: Int64 = 4096) -> String {
    filesystem.isShared || blockSize < 4096 ? "PERSIST" : "WAL"
  }

  /// Called when a statement finds the volume full: frees some space
  /// (the store's ballast) and says whether it did, so the statement is
  /// tried once more.
  var onFull: (@Sendable () -> Bool)? {
    get { fullHandler.withLock { $0 } }
    set { fullHandler.withLock { $0 = newValue } }
  }
  private let fullHandler = Mutex<(@Sendable () -> Bool)?>(nil)

  /// Whether `result` failed for a full volume and ``onFull`` freed room.
  private func relieved<T>(_ result: Result<T, TroveError>) -> Bool {
    guard case .failure(let error) = result, error.code == .noSpace else { return false }
    return fullHandler.withLock { $0 }?() ?? false
  }

  /// Opens or creates the index at `path` (named so in messages; opened
  /// as `resolvedPath`, the same file by a path with no symbolic link),
  /// on a filesystem of `filesystem`'s kind.
  ///
  /// A database another process holds busy as this one opens it (creating
  /// it, recovering its WAL after a crash) is waited for, as every
  /// statement waits (30 s).
  ///
  /// With `readOnly` (a read-only store) the file is opened as it is
  /// (`SQLITE_OPEN_READONLY`), never created or switched to
  /// another journal mode. A WAL-mode index on a read-only volume is read
  /// through its persisted `-shm` and `-wal` files (SQLite reads a WAL it
  /// cannot write to its shared memory into private memory); when even that
  /// fails (`SQLITE_CANTOPEN`: the `-shm` file missing) it is opened
  /// `immutable=1`: no locks, no journal, the database file alone — when
  /// the WAL is empty, as a checkpoint at close leaves it (a close
  /// checkpoints once the WAL is large, ``walCloseLimit``). Not when the WAL holds frames or a
  /// hot journal is present: the file alone would miss committed changes
  /// or show a half-done transaction, and recovery takes writing, so that
  /// is `.readOnlyStore`. Each read of an immutable index checks its files
  /// did not change since the open (``UnlockedIndexLook``), or fails `.busy`.
  init(
    path: String, resolvedPath: String, filesystem: FilesystemKind, blockSize: Int64,
    readOnly: Bool
  )
    throws(TroveError)
  {
    self.path = path
    self.resolvedPath = resolvedPath
    isReadOnly = readOnly
    if readOnly {
      let opened = try Self.openReadOnly(path: path, resolvedPath: resolvedPath)
      journalMode = opened.mode
      needsRebuild = opened.needsRebuild
      unlockedLook = opened.unlockedLook
      connection = Mutex(opened.db)
      reopen = nil
      return
    }
    unlockedLook = nil
    let opened = try Self.connect(
      path: path, resolvedPath: resolvedPath, filesystem: filesystem, blockSize: blockSize)
    journalMode = opened.mode
    needsRebuild = opened.needsRebuild
    connection = Mutex(opened.db)
    // A reopen never makes a missing index: the store makes one (its mode,
    // its rebuild) when this index is forgotten as stale.
    reopen = { () throws(TroveError) in
      try Self.connect(
        path: path, resolvedPath: resolvedPath, filesystem: filesystem, blockSize: blockSize,
        create: false
      ).db
    }
  }

  /// A writable connection to the index at `resolvedPath`, set up as
  /// every one is (journal mode, pragmas, schema), with its journal mode
  /// and whether a rebuild is pending; a busy database is waited for.
  private static func connect(
    path: String, resolvedPath: String, filesystem: FilesystemKind, blockSize: Int64,
    create: Bool = true
  ) throws(TroveError) -> (db: SQLiteConnection, mode: String, needsRebuild: Bool) {
    // Until SQLite has the file and its WAL open, a shared lock on
    // `index.lock`: a move holds it exclusively from before it gives the
    // name a new file until the old file's WAL and shared memory are
    // gone, so no connection pairs the new file with them.
    let guarded = Self.lockForOpening(resolvedPath)
    defer {
      guarded?.unlock()
      guarded?.close()
    }
    var busy = BusyWait()
    while true {
      let db: SQLiteConnection
      var mode = ""
      let found: Int64
      var pending: Int64 = 0
      do throws(SQLiteConnection.Failure) {
        db = try SQLiteConnection(
          path: resolvedPath, busyTimeoutMilliseconds: 30_000, create: create)
        try db.query(
          "PRAGMA journal_mode=\(Self.journalMode(on: filesystem, blockSize: blockSize))"
        ) { row in
          mode = row.text(0).lowercased()
        }
        if mode == "wal" {
          // The WAL and shared-memory files stay when the last connection
          // closes (cut to zero bytes when it checkpoints): they exist for
          // a full volume.
          db.persistWAL()
          db.checkpointsOnCloseFrom = Self.walCloseLimit
          try db.execute("PRAGMA journal_size_limit=0;")
        }
        // Statement journals in memory: each execution of a statement that
        // fires a trigger journals the pages it changes, and a temp file
        // costs two writes per page. A page cache of up to 16 MiB (allocated
        // as used) holds the pages a removal batch changes, so they do not
        // spill into the WAL mid-transaction.
        try db.execute(
          "PRAGMA synchronous=NORMAL; PRAGMA cache_size=-16384; PRAGMA temp_store=MEMORY;")
        (found, _) = try Schema.create(db)
        if found <= Schema.version {
          try db.query("SELECT value FROM counters WHERE name = 'rebuild_pending'") { row in
            pending = row.integer(0)
          }
        }

      } catch  where busy.retries(after: error) {
        continue
      } catch {
        throw Self.error(error, "open index", path)
      }
      guard found <= Schema.version else {
        throw Self.newer(found, path)
      }
      return (db, mode, pending != 0)
    }
  }

  /// `index.lock` beside the index at `path`, open (made when missing)
  /// with a shared `flock` taken; nil when it cannot be (a read-only
  /// folder), and the open goes unguarded.
  static func lockForOpening(_ path: String) -> FileDescriptor? {
    let folder = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
    guard
      let fd = try? FileDescriptor.open(
        folder + "/" + StoreLayout.indexLock, [.readOnly, .create, .noFollow, .nonBlocking],
        permissions: 0o644)
    else { return nil }
    _ = try? fd.lock(exclusive: false)
    return fd
  }

  /// The error for an index a newer Trove wrote (schema `found`).
  private static func newer(_ found: Int64, _ path: String) -> TroveError {
    TroveError(
      .unsupportedFormat,
      "index '\(path)' has schema version \(found); this trove understands up to \(Schema.version)",
      path: path)
  }

  /// Opens an index read-only as it is: normally first, then, when that
  /// fails for anything but damage or a busy database, `immutable=1` —
  /// only when the database file alone holds every committed change (an
  /// empty or missing WAL, no hot journal: else `.readOnlyStore`, as
  /// recovering it takes writing), and returning the look of its files
  /// that every later read checks (``UnlockedIndexLook``).
  private static func openReadOnly(path: String, resolvedPath: String) throws(TroveError) -> (
    db: SQLiteConnection, mode: String, needsRebuild: Bool, unlockedLook: UnlockedIndexLook?
  ) {
    var busy = BusyWait()
    var look: UnlockedIndexLook?
    while true {
      var mode = ""
      var found: Int64 = 0
      var pending: Int64 = 0
      let db: SQLiteConnection
      do throws(SQLiteConnection.Failure) {
        db = try SQLiteConnection(
          path: resolvedPath, busyTimeoutMilliseconds: 30_000, readOnly: true,
          immutable: look != nil)
        try db.query("PRAGMA user_version") { row in found = row.integer(0) }
        try db.query("PRAGMA journal_mode") { row in mode = row.text(0).lowercased() }
        if found == Schema.version {
          try db.query("SELECT value FROM counters WHERE name = 'rebuild_pending'") { row in
            pending = row.integer(0)
          }
        }
      } catch  where look == nil && !error.isBusy && !error.isDamage {
        let taken = try UnlockedIndexLook.take(resolvedPath, shown: path)
        if let reason = taken.recoveryNeeded(path) {
          throw UnlockedIndexLook.needsRecovery(path, reason)
        }
        look = taken
        continue
      } catch  where busy.retries(after: error) {
        continue
      } catch {
        throw Self.error(error, "open index", path)
      }
      guard found <= Schema.version else { throw newer(found, path) }
      guard found == Schema.version else {
        throw TroveError(
          .readOnlyStore,
          "index '\(path)' has schema version \(found), not \(Schema.version), and the store is read-only: open it once where it is writable",
          path: path, value: "\(found)")
      }
      if let look, try UnlockedIndexLook.take(resolvedPath, shown: path) != look {
        throw UnlockedIndexLook.changed(path)
      }
      return (db, mode, pending != 0, look)
    }
  }

  /// An open's wait for a database another process holds busy (creating
  /// it, recovering its WAL after a crash): as long as a statement waits
  /// (30 s), in sleeps growing from 5 ms to 100 ms.
  private struct BusyWait {
    private let clock = ContinuousClock()
    private let deadline: ContinuousClock.Instant
    private var attempts: UInt32 = 0

    init() { deadline = clock.now + .seconds(30) }

    /// Whether to try again after `failure`: when the database was busy
    /// and there is time left, after a sleep.
    mutating func retries(after failure: SQLiteConnection.Failure) -> Bool {
      guard failure.isBusy, clock.now < deadline else { return false }
      attempts += 1
      Sys.sleep(microseconds: min(attempts, 20) * 5_000)
      return true
    }
  }

  static func error(_ failure: SQLiteConnection.Failure, _ action: String, _ path: String)
    -> TroveError
  {
    if failure.isFull {
      return TroveError(
        .noSpace, "cannot \(action): the volume holding index '\(path)' is full (\(failure))",
        path: path)
    }
    if failure.isReadOnly {
      return TroveError(
        .readOnlyStore, "cannot \(action): index '\(path)' is read-only (\(failure))",
        path: path)
    }
    if failure.isDamage {
      return TroveError(
        .indexDamaged,
        "cannot \(action): index '\(path)' is damaged (\(failure))",
        path: path, value: failure.description, remedy: .repairStore)
    }
    return TroveError(.indexFailure, "cannot \(action) '\(path)': \(failure)", path: path)
  }

  /// Runs `body` with the connection, outside any explicit transaction:
  /// each statement commits by itself. For lookups.
  func read<T>(_ action: String, _ body: (IndexSession) throws(TroveError) -> T)
    throws(TroveError) -> T
  {
    let result = readOnce(action, body)
    if relieved(result) { return try checked(readOnce(action, body)).get() }
    if case .failure(let error) = result { throw noticing(error) }
    return try checked(result).get()
  }

  /// `result`, unless the index is read without locks and its files
  /// changed since it was opened (``UnlockedIndexLook``): then the rows
  /// read may come from a file that changed under the read, and the
  /// result is a `.busy` failure instead.
  private func checked<T>(_ result: Result<T, TroveError>) -> Result<T, TroveError> {
    guard let unlockedLook, case .success = result else { return result }
    do throws(TroveError) {
      guard try UnlockedIndexLook.take(resolvedPath, shown: path) == unlockedLook else {
        changedUnderUs.store(true, ordering: .relaxed)
        return .failure(UnlockedIndexLook.changed(path))
      }
    } catch {
      return .failure(error)
    }
    return result
  }

  private func readOnce<T>(_ action: String, _ body: (IndexSession) throws(TroveError) -> T)
    -> Result<T, TroveError>
  {
    if let result = connection.withLockIfAvailable({ db in session(&db, action, body) }) {
      return result
    }
    guard var db = reader() else {
      return connection.withLock { db in session(&db, action, body) }
    }
    let result = session(&db, action, body)
    readers.withLock { idle in
      if idle.count < Self.idleReaders { idle.append(db) }
    }
    return result
  }

  /// `body` run with `db`, outside any transaction.
  private func session<T>(
    _ db: inout SQLiteConnection, _ action: String,
    _ body: (IndexSession) throws(TroveError) -> T
  ) -> sending Result<T, TroveError> {
    do throws(TroveError) {
      try following(&db)
      return .success(try body(IndexSession(db: db, path: path, action: action)))
    } catch {
      return .failure(error)
    }
  }

  /// An idle reader connection, or a new one; nil where reads share the
  /// one connection: a read-only index, a rollback journal (where a
  /// reader waits for the writer anyway), or when none can be opened.
  private func reader() -> SQLiteConnection? {
    guard let reopen, journalMode == "wal" else { return nil }
    if let idle = readers.withLock({ $0.popLast() }) { return idle }
    guard let db = try? reopen() else { return nil }
    // A lookup reads a few pages, which the kernel's page cache holds: a
    // reader's own cache stays small however many are kept idle.
    try? db.execute("PRAGMA cache_size=-512;")
    return db
  }

  /// Runs `body` in one `BEGIN IMMEDIATE` transaction: committed if it
  /// returns, rolled back if it throws. Filesystem steps in `body` happen
  /// while this process holds the index's write lock.
  ///
  /// With `durable`, the commit is on disk when this returns
  /// (`synchronous=FULL`: the WAL is synced); otherwise it may roll back
  /// after a power loss (`synchronous=NORMAL`), as every other write may.
  ///
  /// A body that finds it needs a durable commit (``IndexSession/requireDurable()``)
  /// is rolled back and run again with `durable`: it must make no change
  /// outside the index before it asks.
  func write<T>(
    _ action: String, durable: Bool = false, _ body: (IndexSession) throws(TroveError) -> T
  ) throws(TroveError) -> T {
    let result: Result<T, TroveError> = connection.withLock { db in
      // The file is checked once its write lock is held: whoever moves the
      // index holds the old file's while it copies and renames.
      var moves = 0
      while true {
        do throws(SQLiteConnection.Failure) {
          if durable { try db.execute("PRAGMA synchronous=FULL") }
          // A read-only index takes no write lock: its body only reads, and
          // a statement that would write fails (SQLITE_READONLY).
          try db.execute(isReadOnly ? "BEGIN" : "BEGIN IMMEDIATE")
        } catch {
          if durable { try? db.execute("PRAGMA synchronous=NORMAL") }
          return .failure(Self.error(error, action, path))
        }
        guard reopen != nil, db.fileHasMoved else { break }
        try? db.execute("ROLLBACK")
        moves += 1
        guard moves <= 3 else {
          if durable { try? db.execute("PRAGMA synchronous=NORMAL") }
          return .failure(
            TroveError(
              .busy, "cannot \(action): index '\(path)' was replaced again and again; try again",
              path: path))
        }
        do throws(TroveError) {
          try following(&db)
        } catch {
          return .failure(error)
        }
      }
      defer { if durable { try? db.execute("PRAGMA synchronous=NORMAL") } }
      do throws(TroveError) {
        let value = try body(
          IndexSession(
            db: db, path: path, action: action, isDurable: durable, inTransaction: true))
        do throws(SQLiteConnection.Failure) {
          try db.execute("COMMIT")
        } catch
          where error.isFull && db.isInTransaction
          && fullHandler.withLock({ $0 })?() == true
        {
          // The volume is full, the transaction still open, the ballast
          // released: the commit (only it: the body's steps are done)
          // is tried once more.
          do throws(SQLiteConnection.Failure) {
            try db.execute("COMMIT")
          } catch {
            throw Self.error(error, action, path)
          }
        } catch {
          throw Self.error(error, action, path)
        }
        return .success(value)
      } catch {
        try? db.execute("ROLLBACK")
        return .failure(error)
      }
    }
    if case .failure(let error) = result, error.code == .retryDurably, !durable {
      return try write(action, durable: true, body)
    }

    if case .failure(let error) = result { throw noticing(error) }
    return try checked(result).get()
  }
}

/// The index as one read or one write transaction sees it. Its methods,
/// spread over one file per table (ObjectRows and ListingRows for
/// `objects`, KeyRows for `keys` and `checksums`, PinRows, RemoteRows for
/// `remote_objects`, RemovalRows, Counters for `counters` and `sweeps`),
/// turn SQLite failures into ``TroveError``s naming the index.
struct IndexSession {
  let db: SQLiteConnection
  let path: String
  let action: String
  /// Whether this transaction's commit will be on disk when it returns.
  var isDurable = false
  /// Whether this session is a write transaction (``Index/write(_:durable:_:)``).
  var inTransaction = false

  /// Asks for this transaction to be committed durably: when it would not
  /// be, throws, and ``Index/write(_:durable:_:)`` runs it again so.
  func requireDurable() throws(TroveError) {
    guard !isDurable else { return }
    throw TroveError(.retryDurably, "\(action): retry with a durable commit", path: path)
  }

  /// Runs one step against the connection, naming `action` if it fails.
  ///
  /// In a write transaction, refuses to run once SQLite has rolled the
  /// transaction back by itself (an I/O error, a full volume, no memory
  /// can end it inside any statement): a step that went on would commit
  /// alone, and the write lock the caller counts on is gone.
  func run<T>(_ body: (SQLiteConnection) throws(SQLiteConnection.Failure) -> T)
    throws(TroveError) -> T
  {
    guard !inTransaction || db.isInTransaction else {
      throw TroveError(
        .indexFailure,
        "cannot \(action) '\(path)': the transaction was rolled back by an earlier failure",
        path: path)
    }
    do throws(SQLiteConnection.Failure) {
      return try body(db)
    } catch {
      throw Index.error(error, action, path)
    }
  }
}
