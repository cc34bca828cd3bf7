import CSQLite

#if canImport(Glibc)
  import Glibc
#endif

/// A SQLite connection: open, execute, prepare. Not thread-safe by itself;
/// ``Index`` guards it with a mutex, which is what makes the unchecked
/// `Sendable` true.
final class SQLiteConnection: @unchecked Sendable {
  private let handle: OpaquePointer
  let path: String

  /// Run as root, SQLite gives every WAL, journal and shared-memory file it
  /// opens to the database's owner (`fchown`), which changes the file's
  /// change time even when it has that owner already: once per process,
  /// before the first open, that call is made only when it changes the
  /// owner, so a read writes nothing, not even an inode.
  private static let ownerChangesSkipped: Void = {
    let fchownWhenNeeded: @convention(c) (Int32, uid_t, gid_t) -> Int32 = { fd, uid, gid in
      var status = stat()
      if fstat(fd, &status) == 0, status.st_uid == uid, status.st_gid == gid { return 0 }
      return fchown(fd, uid, gid)
    }
    guard let vfs = sqlite3_vfs_find(nil), let set = vfs.pointee.xSetSystemCall else { return }
    _ = set(vfs, "fchown", unsafeBitCast(fchownWhenNeeded, to: sqlite3_syscall_ptr.self))
  }()

  /// An error from SQLite, with its message.
  struct Failure: Error, CustomStringConvertible {
    let code: Int32
    let message: String
    /// The errno of the system call that failed underneath, if one did.
    var systemErrno: Int32 = 0
    var description: String { "\(message) (sqlite \(code))" }
    /// The database is locked by another connection past the busy timeout.
    var isBusy: Bool { code & 0xFF == SQLITE_BUSY || code & 0xFF == SQLITE_LOCKED }
    /// The volume (or the user's quota) is full.
    var isFull: Bool {
      code & 0xFF == SQLITE_FULL || systemErrno == ENOSPC || systemErrno == EDQUOT
    }
    /// The database cannot be written (opened read-only, or on a
    /// read-only volume).
    var isReadOnly: Bool { code & 0xFF == SQLITE_READONLY }
    /// The file is not a database, or a damaged one, or a symbolic link.
    var isDamage: Bool {
      code & 0xFF == SQLITE_CORRUPT || code & 0xFF == SQLITE_NOTADB
        || code == SQLITE_CANTOPEN | (6 << 8)  // SQLITE_CANTOPEN_SYMLINK
    }
  }

  /// Opens (creating if needed) the database at `path`, which must not
  /// be reached through a symbolic link (`SQLITE_OPEN_NOFOLLOW`: SQLite
  /// refuses one anywhere in the path, so pass a resolved one).
  ///
  /// With `readOnly`, opens it `SQLITE_OPEN_READONLY` (never creating it);
  /// with `immutable` as well, as a file nothing changes (the `immutable=1`
  /// URI parameter: no locks, no journal or WAL read); with
  /// `sharedMemoryReadOnly` instead, its WAL's shared memory is opened
  /// read-only (`readonly_shm=1`), so the first connection to the file
  /// reads the WAL into private memory rather than rewrite the `-shm`
  /// file: such a connection writes no file at all.
  /// Without `create`, a missing file is not made (`SQLITE_CANTOPEN`).
  init(
    path: String, busyTimeoutMilliseconds: Int32, readOnly: Bool = false, immutable: Bool = false,
    sharedMemoryReadOnly: Bool = false, create: Bool = true
  ) throws(Failure) {
    var db: OpaquePointer?
    var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW
    flags |=
      readOnly
      ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0)
    var name = path
    if immutable || sharedMemoryReadOnly {
      flags |= SQLITE_OPEN_URI
      name = "file:" + Self.uriEscaped(path) + (immutable ? "?immutable=1" : "?readonly_shm=1")
    }
    Self.ownerChangesSkipped
    let rc = sqlite3_open_v2(name, &db, flags, nil)
    guard rc == SQLITE_OK, let db else {
      let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
      let code = db.map { sqlite3_extended_errcode($0) } ?? rc
      let systemErrno = db.map { sqlite3_system_errno($0) } ?? 0
      sqlite3_close_v2(db)
      let symlink = SQLITE_CANTOPEN | (6 << 8)  // SQLITE_CANTOPEN_SYMLINK
      throw Failure(
        code: code, message: code == symlink ? "it is a symbolic link" : message,
        systemErrno: systemErrno)
    }
    handle = db
    self.path = path
    sqlite3_busy_timeout(db, busyTimeoutMilliseconds)
    sqlite3_extended_result_codes(db, 1)
  }

  deinit {
    for statement in statements.values { sqlite3_finalize(statement) }
    if let limit = checkpointsOnCloseFrom {
      // Decided now, whoever grew the WAL: only the last close checkpoints.
      let wal = try? FileDescriptor(rawValue: AT_FDCWD).status(of: path + "-wal").size
      _ = trove_sqlite_checkpoint_on_close(handle, (wal ?? limit) >= limit ? 1 : 0)
    }
    sqlite3_close_v2(handle)
  }

  /// Statements of ``query(_:_:row:)`` kept prepared, by their text: a
  /// put runs the same few statements for every object, and preparing one
  /// costs more than running it. At most ``statementCacheLimit``.
  private var statements: [String: OpaquePointer] = [:]
  private static let statementCacheLimit = 64

  /// `path` with the characters a `file:` URI gives a meaning to
  /// (`%`, `?`, `#`) and controls percent-escaped.
  private static func uriEscaped(_ path: String) -> String {
    var out = ""
    for byte in path.utf8 {
      if byte == UInt8(ascii: "%") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "#")
        || byte < 0x20 || byte == 0x7F
      {
        out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
      } else {
        out += String(decoding: [byte], as: UTF8.self)
      }
    }
    return out
  }

  fileprivate func failure(_ rc: Int32) -> Failure {
    Failure(
      code: rc, message: String(cString: sqlite3_errmsg(handle)),
      systemErrno: sqlite3_system_errno(handle))
  }

  /// Whether a transaction is open (`sqlite3_get_autocommit` is 0): after
  /// a failed COMMIT, whether it can be tried again.
  var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

  /// Keeps the WAL and shared-memory files when the last connection
  /// closes (`SQLITE_FCNTL_PERSIST_WAL`): they exist when the volume fills.
  func persistWAL() {
    var on: Int32 = 1
    _ = sqlite3_file_control(handle, "main", SQLITE_FCNTL_PERSIST_WAL, &on)
  }

  /// With a size, closing this connection checkpoints the WAL (when it is
  /// the last one) only if the `-wal` file holds at least that many bytes
  /// then; below, the frames stay for a later close. A checkpoint costs two
  /// syncs and the next writer's new WAL two more; skipping it loses
  /// nothing, as a durable commit's frames are synced in the WAL already.
  /// Nil: SQLite's default, a checkpoint at every last close.
  var checkpointsOnCloseFrom: Int64?

  /// Whether the database file this connection has open is no longer the
  /// one at its path: renamed over or unlinked since the open
  /// (`SQLITE_FCNTL_HAS_MOVED`, one `stat`).
  var fileHasMoved: Bool {
    var moved: Int32 = 0
    return sqlite3_file_control(handle, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK
      && moved != 0
  }

  /// Runs one or more statements that take no parameters.
  func execute(_ sql: String) throws(Failure) {
    var error: UnsafeMutablePointer<CChar>?
    let rc = sqlite3_exec(handle, sql, nil, nil, &error)
    if rc != SQLITE_OK {
      let message = error.map { String(cString: $0) } ?? "error"
      sqlite3_free(error)
      throw Failure(code: rc, message: message, systemErrno: sqlite3_system_errno(handle))
    }
  }

  /// Runs `body` with this connection's triggers off
  /// (`SQLITE_DBCONFIG_ENABLE_TRIGGER`), for this connection only: other
  /// connections, and other processes, fire them as ever. Prepared
  /// statements are prepared again when the setting changes (SQLite does
  /// it by itself, on their next run). Triggers are on again when this
  /// returns or throws (turning them on fails only for a misused handle,
  /// and is then this call's error): not to be nested. Every prepared
  /// statement of the connection is prepared again after each change, so
  /// this is for bulk work.
  func withoutTriggers<T>(_ body: () throws(Failure) -> T) throws(Failure) -> T {
    var rc = trove_sqlite_enable_triggers(handle, 0)
    let result: Result<T, Failure>
    if rc == SQLITE_OK {
      do throws(Failure) {
        result = .success(try body())
      } catch {
        result = .failure(error)
      }
    } else {
      result = .failure(failure(rc))
    }
    rc = trove_sqlite_enable_triggers(handle, 1)
    guard rc == SQLITE_OK else { throw failure(rc) }
    return try result.get()
  }

  /// Rows changed by the last statement.
  var changes: Int { Int(sqlite3_changes(handle)) }

  /// Prepares `sql` (or takes it prepared from the cache), binds `values`
  /// (Int64, String, bytes, or nil) and calls `row` for each result row. The
  /// statement is reset when this returns, so it holds no read lock.
  func query(
    _ sql: String, _ values: [SQLiteValue] = [], row: (Row) throws(Failure) -> Void = { _ in }
  )
    throws(Failure)
  {
    try prepared(sql) { (statement) throws(Failure) in try statement.run(values, row: row) }
  }

  /// Prepares `sql` (or takes it prepared from the cache) and gives it to
  /// `body`, which may run it many times: a loop of one statement looks
  /// it up once, not once a row. Taken out of the cache meanwhile (a
  /// query of the same text from inside `body` prepares its own), put
  /// back after.
  func prepared<T>(_ sql: String, _ body: (Statement) throws(Failure) -> T) throws(Failure) -> T {
    let handle: OpaquePointer
    if let cached = statements.removeValue(forKey: sql) {
      handle = cached
    } else {
      var prepared: OpaquePointer?
      let rc = sqlite3_prepare_v2(self.handle, sql, -1, &prepared, nil)
      guard rc == SQLITE_OK, let prepared else { throw failure(rc) }
      handle = prepared
    }
    defer {
      sqlite3_reset(handle)
      sqlite3_clear_bindings(handle)
      if statements[sql] == nil && statements.count < Self.statementCacheLimit {
        statements[sql] = handle
      } else {
        sqlite3_finalize(handle)
      }
    }
    return try body(Statement(handle: handle, connection: self))
  }

  /// A prepared statement, lent by ``prepared(_:_:)``.
  struct Statement {
    fileprivate let handle: OpaquePointer
    fileprivate let connection: SQLiteConnection

    /// Binds `values` and calls `row` for each result row; resets the
    /// statement after, so it holds no read lock and can run again.
    func run(_ values: [SQLiteValue], row: (Row) throws(Failure) -> Void = { _ in })
      throws(Failure)
    {
      defer {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
      }
      try connection.bind(values, to: handle)
      while true {
        let rc = sqlite3_step(handle)
        if rc == SQLITE_DONE { return }
        guard rc == SQLITE_ROW else { throw connection.failure(rc) }
        try row(Row(statement: handle))
      }
    }
  }

  /// Prepares `sql` once and runs it for each set of `rows` of values,
  /// returning the rows each run changed. For batches inside a transaction.
  func repeated(_ sql: String, _ rows: [[SQLiteValue]]) throws(Failure) -> [Int] {
    try prepared(sql) { (statement) throws(Failure) in
      var changed: [Int] = []
      changed.reserveCapacity(rows.count)
      for values in rows {
        try statement.run(values)
        changed.append(changes)
      }
      return changed
    }
  }

  /// Binds `values` to a prepared statement's parameters, in order.
  fileprivate func bind(_ values: [SQLiteValue], to statement: OpaquePointer) throws(Failure) {
    for (i, value) in values.enumerated() {
      let index = Int32(i + 1)
      let rc: Int32
      switch value {
      case .integer(let v): rc = sqlite3_bind_int64(statement, index, v)
      case .text(let v): rc = sqlite3_bind_text(statement, index, v, -1, trove_sqlite_transient())
      case .null: rc = sqlite3_bind_null(statement, index)
      case .blob(let v):
        rc = v.withUnsafeBytes {
          sqlite3_bind_blob64(
            statement, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), UInt64($0.count),
            trove_sqlite_transient())
        }
      }
      guard rc == SQLITE_OK else { throw failure(rc) }
    }
  }

  /// Runs `body` in a `BEGIN IMMEDIATE` transaction (the write lock is
  /// taken up front, so two writers never deadlock upgrading), committing
  /// if it returns and rolling back if it throws.
  func transaction<T>(_ body: () throws(Failure) -> T) throws(Failure) -> T {
    try execute("BEGIN IMMEDIATE")
    do {
      let result = try body()
      try execute("COMMIT")
      return result
    } catch {
      try? execute("ROLLBACK")
      throw error
    }
  }

  /// One result row.
  struct Row {
    let statement: OpaquePointer
    func integer(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
    func text(_ column: Int32) -> String {
      guard let p = sqlite3_column_text(statement, column) else { return "" }
      return String(cString: p)
    }
    func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }
    /// The bytes of a blob column (empty for NULL or an empty blob).
    func blob(_ column: Int32) -> [UInt8] {
      // The pointer first, then the size (SQLite's order: asking for the
      // size first could convert the value).
      guard let p = sqlite3_column_blob(statement, column) else { return [] }
      let count = Int(sqlite3_column_bytes(statement, column))
      return [UInt8](UnsafeRawBufferPointer(start: p, count: count))
    }
  }
}

/// A value bound to a statement parameter.
enum SQLiteValue {
  case integer(Int64)
  case text(String)
  case blob([UInt8])
  case null
}
