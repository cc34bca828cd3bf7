/// What the files of an index looked like, for an index read without
/// locks (`immutable=1`: how a read-only store's index is opened when
/// SQLite cannot open it otherwise, see ``Index``).
///
/// SQLite trusts an immutable database never to change and reads the
/// database file alone, ignoring its write-ahead log and rollback journal.
/// That is sound only when those hold nothing the file lacks, and while
/// nobody writes: so an immutable open is refused when the WAL is not empty
/// or a hot journal is present (the database needs recovery, which takes
/// writing), and every read through such a connection is checked against
/// the look taken at the open — a change in between (a writer with write
/// access to a store this process may only read) fails the read rather
/// than let it return rows from a file that changed under it.
struct UnlockedIndexLook: Sendable, Equatable {
  /// Inode, size, change and modification times of the database file.
  var database: [Int64]
  /// The database header's file change counter (bytes 24–27), which a
  /// rollback-journal commit increments.
  var changeCounter: [UInt8]
  /// The size of the `-wal` file, nil when there is none.
  var walBytes: Int64?
  /// The `-wal` file's inode, size and times, nil when there is none.
  var wal: [Int64]?
  /// Whether a `-journal` file starts with a journal header (a hot
  /// journal: a transaction that never finished, to be rolled back).
  var hasHotJournal: Bool

  /// The magic number that starts a rollback journal's header; a
  /// committed persistent journal has it zeroed.
  static let journalMagic: [UInt8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7]

  /// Looks at the database file at `path` (named `shown` in messages) and
  /// its `-wal` and `-journal` companions; a FIFO under one of their names
  /// fails the read, never blocks it.
  static func take(_ path: String, shown: String) throws(TroveError) -> Self {
    func status(_ file: String) throws(TroveError) -> FileStatus? {
      do throws(SystemCallError) {
        let fd = try FileDescriptor.open(file, [.readOnly, .nonBlocking])
        defer { fd.close() }
        return try fd.status()
      } catch  where error.errno == .noSuchFileOrDirectory {
        return nil
      } catch {
        throw TroveError.system(error, "read", path: file)
      }
    }
    func prefix(_ file: String, at offset: Int64, count: Int) throws(TroveError) -> [UInt8] {
      do throws(SystemCallError) {
        let fd = try FileDescriptor.open(file, [.readOnly, .nonBlocking])
        defer { fd.close() }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 8)
        defer { buffer.deallocate() }
        let n = try fd.read(into: buffer, at: offset)
        return Array(buffer[..<n])
      } catch  where error.errno == .noSuchFileOrDirectory {
        return []
      } catch {
        throw TroveError.system(error, "read", path: file)
      }
    }
    guard let database = try status(path) else {
      throw TroveError(.indexFailure, "cannot read index '\(shown)': it is gone", path: shown)
    }
    let wal = try status(path + "-wal")
    return UnlockedIndexLook(
      database: database.identity + [database.modificationTimeNanoseconds],
      changeCounter: try prefix(path, at: 24, count: 4),
      walBytes: wal?.size, wal: wal.map { $0.identity + [$0.modificationTimeNanoseconds] },
      hasHotJournal: try prefix(path + "-journal", at: 0, count: 8) == journalMagic)
  }

  /// Why reading the database file alone would miss committed changes or
  /// read a half-done transaction; nil when it would not.
  func recoveryNeeded(_ shown: String) -> String? {
    if let bytes = walBytes, bytes > 0 {
      return
        "its write-ahead log '\(shown)-wal' holds \(bytes) bytes not yet in the database"
    }
    if hasHotJournal {
      return "its journal '\(shown)-journal' holds a transaction that never finished"
    }
    return nil
  }

  /// The error for an index that needs recovery (`reason`) in a store this
  /// process may not write.
  static func needsRecovery(_ shown: String, _ reason: String) -> TroveError {
    TroveError(
      .readOnlyStore,
      "cannot read index '\(shown)': \(reason), and recovering it takes writing, which this read-only store does not allow",
      path: shown, remedy: .openWritable)
  }

  /// The error for an index that changed while it was read without locks.
  static func changed(_ shown: String) -> TroveError {
    TroveError(
      .busy,
      "index '\(shown)' changed while this process read it without locks (a read-only store whose '-shm' file is missing, written by someone else); run the command again",
      path: shown)
  }
}
