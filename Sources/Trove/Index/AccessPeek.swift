extension Index {
  /// When the index at `resolvedPath` says `digest` was last read, looked
  /// up through a connection that writes nothing: read-only, its shared
  /// memory read-only too, no journal mode set, no schema made, no
  /// checkpoint at close. A read whose access is recent enough needs no
  /// record, so it is answered without opening the index for writing,
  /// which rewrites the WAL's shared memory when no other process has it
  /// open. Nil when the index cannot be read so (missing, another schema,
  /// a rebuild pending, busy, damaged, no row): the caller then opens it
  /// as usual, which finds out why.
  static func peekLastAccess(of digest: BlobDigest, resolvedPath: String) -> Int64? {
    // As every open: not while the file is being replaced (``lockForOpening(_:)``).
    let guarded = lockForOpening(resolvedPath)
    defer {
      guarded?.unlock()
      guarded?.close()
    }
    guard
      let db = try? SQLiteConnection(
        path: resolvedPath, busyTimeoutMilliseconds: 0, readOnly: true,
        sharedMemoryReadOnly: true)
    else { return nil }
    var version: Int64 = -1
    var pending: Int64 = 0
    var recorded: Int64?
    do throws(SQLiteConnection.Failure) {
      try db.execute("BEGIN")
      defer { try? db.execute("ROLLBACK") }
      try db.query("PRAGMA user_version") { row in version = row.integer(0) }
      guard version == Schema.version else { return nil }
      try db.query("SELECT value FROM counters WHERE name = 'rebuild_pending'") { row in
        pending = row.integer(0)
      }
      guard pending == 0 else { return nil }
      try db.query("SELECT last_access FROM objects WHERE digest = ?", [.text(digest.hex)]) {
        row in recorded = row.integer(0)
      }
    } catch {
      return nil
    }
    return recorded
  }
}
