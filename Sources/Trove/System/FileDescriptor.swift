import CLinux

#if canImport(Glibc)
  import Glibc
#endif

/// An open file or directory: a thin, typed face over a raw descriptor.
///
/// A value type with no ownership: whoever opens it closes it (`defer`).
/// Every method is one system call through ``Sys``; the doc comment names it.
struct FileDescriptor: Sendable, Hashable {
  /// The raw descriptor.
  let rawValue: Int32

  /// Standard output.
  static let standardOutput = FileDescriptor(rawValue: 1)
  /// Standard input.
  static let standardInput = FileDescriptor(rawValue: 0)

  /// Access modes and flags for `open`.
  struct Options: OptionSet, Sendable {
    let rawValue: Int32
    static let readOnly = Options([])
    static let writeOnly = Options(rawValue: O_WRONLY)
    static let readWrite = Options(rawValue: O_RDWR)
    static let create = Options(rawValue: O_CREAT)
    static let exclusive = Options(rawValue: O_EXCL)
    static let truncate = Options(rawValue: O_TRUNC)
    static let directory = Options(rawValue: O_DIRECTORY)
    static let noFollow = Options(rawValue: O_NOFOLLOW)
    static let append = Options(rawValue: O_APPEND)
    static let nonBlocking = Options(rawValue: O_NONBLOCK)
    /// A handle for `*at` calls only: needs no permission to read it.
    static let pathOnly = Options(rawValue: trove_o_path)
  }

  /// Opens `path`, relative to `directory` when given. `openat(2)` with O_CLOEXEC.
  static func open(
    _ path: String, in directory: FileDescriptor? = nil, _ options: Options = .readOnly,
    permissions: mode_t = 0o644
  ) throws(SystemCallError) -> FileDescriptor {
    let dirfd = directory?.rawValue ?? AT_FDCWD
    let fd = try Sys.call("open") {
      openat(dirfd, path, options.rawValue | O_CLOEXEC, permissions)
    }
    return FileDescriptor(rawValue: fd)
  }

  /// Closes the descriptor. `close(2)`; errors are ignored (the descriptor
  /// is gone either way, and data errors are caught by `sync`).
  func close() { _ = Glibc.close(rawValue) }

  /// Reads up to `buffer.count` bytes at the current offset; 0 at end of
  /// file. `read(2)`.
  func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Int {
    try Sys.call("read") { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
  }

  /// Reads until `buffer` is full or the file ends; returns the bytes read.
  /// With `enough`, stops as well once that many bytes are in (a regular
  /// file's remaining length, as its status gave it: its end is then known
  /// without one more read).
  func readFully(into buffer: UnsafeMutableRawBufferPointer, enough: Int? = nil)
    throws(SystemCallError) -> Int
  {
    var filled = 0
    while filled < buffer.count {
      let n = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
      if n == 0 { break }
      filled += n
      if filled == enough { break }
    }
    return filled
  }

  /// Writes some of `buffer`; returns how much (a short write is not an
  /// error). `write(2)`.
  func write(_ buffer: UnsafeRawBufferPointer) throws(SystemCallError) -> Int {
    try Sys.call("write") { Glibc.write(rawValue, buffer.baseAddress, buffer.count) }
  }

  /// Writes all of `buffer`, continuing after short writes. `write(2)`.
  func writeAll(_ buffer: UnsafeRawBufferPointer) throws(SystemCallError) {
    var offset = 0
    while offset < buffer.count {
      offset += try write(UnsafeRawBufferPointer(rebasing: buffer[offset...]))
    }
  }

  /// The file's status. `fstat(2)`.
  func status() throws(SystemCallError) -> FileStatus {
    var s = stat()
    _ = try Sys.call("fstat") { fstat(rawValue, &s) }
    return FileStatus(s)
  }

  /// The status of `name` inside this directory, without following a
  /// final symlink when `followSymlinks` is false. `fstatat(2)`.
  func status(of name: String, followSymlinks: Bool = true) throws(SystemCallError) -> FileStatus {
    var s = stat()
    let flags = followSymlinks ? 0 : AT_SYMLINK_NOFOLLOW
    _ = try Sys.call("fstatat") { fstatat(rawValue, name, &s, flags) }
    return FileStatus(s)
  }

  /// Flushes data and metadata to stable storage. `fsync(2)`.
  func sync() throws(SystemCallError) {
    _ = try Sys.call("fsync") { fsync(rawValue) }
  }

  /// Flushes every dirty file and the journal of the filesystem holding
  /// this descriptor: one call makes a whole batch of written files
  /// durable. `syncfs(2)`. It reports a write-back error of any file of
  /// that filesystem since this descriptor was opened (Linux 5.8 and
  /// later: see ``Sys/syncfsReportsErrors``), not which file.
  func syncFilesystem() throws(SystemCallError) {
    _ = try Sys.call("syncfs") { trove_syncfs(rawValue) }
  }

  /// Sets the permission bits. `fchmod(2)`.
  func setPermissions(_ mode: mode_t) throws(SystemCallError) {
    _ = try Sys.call("fchmod") { fchmod(rawValue, mode) }
  }

  /// Tells the kernel the file will be read sequentially. `posix_fadvise(2)`;
  /// advisory, so failures are ignored.
  func adviseSequential() {
    _ = posix_fadvise(rawValue, 0, 0, POSIX_FADV_SEQUENTIAL)
  }

  /// Asks for a pipe buffer of `bytes` (the default is 64 KiB); returns
  /// the size granted. `fcntl(F_SETPIPE_SZ)`; EPERM above
  /// /proc/sys/fs/pipe-max-size for unprivileged users, EBADF on
  /// anything but a pipe.
  @discardableResult
  func setPipeBuffer(_ bytes: Int32) throws(SystemCallError) -> Int32 {
    try Sys.call("fcntl(F_SETPIPE_SZ)") { trove_set_pipe_size(rawValue, bytes) }
  }

  /// Where XFS puts inodes, asked through any file of the filesystem: the
  /// number of allocation groups, and how many low bits of an inode
  /// number count within its group (`inode >> bits` is the group).
  /// `ioctl(XFS_IOC_FSGEOMETRY_V1)`; ENOTTY on other filesystems.
  func xfsAllocationGroups() throws(SystemCallError) -> (count: Int, inodeBits: Int) {
    var groups: UInt32 = 0
    let bits = try Sys.call("ioctl(XFS_IOC_FSGEOMETRY)") { trove_xfs_group_bits(rawValue, &groups) }
    return (Int(groups), Int(bits))
  }

  /// Makes this file share all of `source`'s extents, copy-on-write.
  /// `ioctl(FICLONE)`; EOPNOTSUPP, EXDEV or EINVAL where the filesystem
  /// cannot clone.
  func cloneContents(from source: FileDescriptor) throws(SystemCallError) {
    _ = try Sys.call("ioctl(FICLONE)") { trove_ficlone(rawValue, source.rawValue) }
  }

  /// Makes `length` bytes of this file at `offset` share `source`'s
  /// extents at `sourceOffset`, copy-on-write; the file grows to take them
  /// where they end past its end. Offsets and length must be multiples of
  /// the filesystem's block size. `ioctl(FICLONERANGE)`; EOPNOTSUPP, EXDEV
  /// or EINVAL where the filesystem cannot clone (or the range is not
  /// aligned).
  func cloneRange(
    _ length: Int64, at offset: Int64, from source: FileDescriptor, at sourceOffset: Int64
  ) throws(SystemCallError) {
    _ = try Sys.call("ioctl(FICLONERANGE)") {
      trove_clone_range(
        rawValue, source.rawValue, UInt64(sourceOffset), UInt64(length), UInt64(offset))
    }
  }

  /// Makes `length` bytes of `destination` at `destinationOffset` share
  /// this file's blocks at `offset`, when they hold the same bytes: the
  /// kernel compares them itself, under both files' locks, so no belief of
  /// the caller's can change a byte. Returns the bytes now shared: all of
  /// `length` (whole blocks: the ranges must be block-aligned, but for a
  /// range ending at the end of both files), or fewer where a piece
  /// differed — pieces the kernel found different are left as they are.
  /// `ioctl(FIDEDUPERANGE)`; EOPNOTSUPP or EINVAL where the filesystem
  /// cannot share blocks.
  func shareBlocks(
    _ length: Int64, at offset: Int64, with destination: FileDescriptor,
    at destinationOffset: Int64
  ) throws(SystemCallError) -> Int64 {
    // The kernel may take less than asked at a time (16 MiB on some
    // filesystems): go on from where it stopped.
    let piece: Int64 = 16 << 20
    var done: Int64 = 0
    var shared: Int64 = 0
    while done < length {
      let want = min(piece, length - done)
      var deduped: UInt64 = 0
      var status: Int32 = 0
      _ = try Sys.call("ioctl(FIDEDUPERANGE)") {
        trove_dedupe_range(
          rawValue, UInt64(offset + done), UInt64(want), destination.rawValue,
          UInt64(destinationOffset + done), &deduped, &status)
      }
      if status < 0 { throw SystemCallError("ioctl(FIDEDUPERANGE)", Errno(rawValue: -status)) }
      if status == 0 {
        let took = Int64(deduped)
        guard took > 0 else { break }
        shared += took
        done += took
      } else {
        // This piece differs somewhere: nothing of it was shared.
        done += want
      }
    }
    return shared
  }

  /// Starts writing back the dirty pages of `length` bytes at `offset`
  /// without waiting, so that a later `sync` has less to wait for.
  /// `sync_file_range(2)` with SYNC_FILE_RANGE_WRITE; a hint, errors ignored.
  func startWriteback(at offset: Int64, length: Int64) {
    _ = trove_start_writeback(rawValue, offset, length)
  }

  /// Copies up to `count` bytes from `source` in the kernel, from both
  /// files' current offsets; 0 at the end of `source`. `copy_file_range(2)`.
  func copyFileRange(from source: FileDescriptor, count: Int) throws(SystemCallError) -> Int {
    try Sys.call("copy_file_range") {
      trove_copy_file_range(source.rawValue, rawValue, count)
    }
  }

  /// The kind of filesystem this file lives on. `fstatfs(2)`.
  func filesystemKind() throws(SystemCallError) -> FilesystemKind {
    var err: Int32 = 0
    let magic = trove_fs_type(rawValue, &err)
    if magic == -1 { throw SystemCallError("fstatfs", Errno(rawValue: err)) }
    return FilesystemKind(rawValue: magic)
  }

  /// Whether this process may write `name` (in this folder; `"."` for the
  /// folder itself), as its effective ids: nil when it may, else the errno
  /// saying why not — `EROFS` on a read-only mount, `EACCES` when the mode
  /// refuses. `faccessat(2)` with `W_OK` and `AT_EACCESS`.
  func writeRefusal(_ name: String) -> Errno? {
    do throws(SystemCallError) {
      _ = try Sys.call("faccessat") { faccessat(rawValue, name, W_OK, AT_EACCESS) }
      return nil
    } catch {
      return error.errno
    }
  }

  /// Whether the filesystem holding this file is mounted read-only
  /// (`ST_RDONLY`). `fstatvfs(2)`.
  func isOnReadOnlyMount() throws(SystemCallError) -> Bool {
    var s = statvfs()
    _ = try Sys.call("fstatvfs") { fstatvfs(rawValue, &s) }
    return s.f_flag & UInt(ST_RDONLY) != 0
  }

  /// The filesystem's block size (`f_bsize`): the unit blocks are shared
  /// in. `fstatvfs(2)`.
  func filesystemBlockSize() throws(SystemCallError) -> Int64 {
    var s = statvfs()
    _ = try Sys.call("fstatvfs") { fstatvfs(rawValue, &s) }
    return max(512, Int64(s.f_bsize))
  }

  /// Extent counts from the kernel, shared extents included.
  /// `ioctl(FS_IOC_FIEMAP)` with FIEMAP_FLAG_SYNC.
  func extentSummary() throws(SystemCallError) -> ExtentSummary {
    var summary = trove_extent_summary()
    _ = try Sys.call("ioctl(FS_IOC_FIEMAP)") { trove_fiemap_summary(rawValue, &summary) }
    return ExtentSummary(summary)
  }

  /// Every extent of the file, in file order, as the kernel maps it now.
  /// `ioctl(FS_IOC_FIEMAP)`; with `sync`, FIEMAP_FLAG_SYNC: the file's
  /// dirty pages are written back first (on XFS under the file's I/O lock,
  /// and waiting for copy-on-write to be remapped). EOPNOTSUPP where the
  /// filesystem has no FIEMAP (tmpfs).
  func extentMap(sync: Bool) throws(SystemCallError) -> [Extent] {
    let batch: UInt32 = 256
    let buffer = UnsafeMutableBufferPointer<trove_extent>.allocate(capacity: Int(batch))
    defer { buffer.deallocate() }
    var extents: [Extent] = []
    var start: UInt64 = 0
    // Synced once, by the first call: the walk goes on from a written-back file.
    var first = true
    while true {
      var count: UInt32 = 0
      _ = try Sys.call("ioctl(FS_IOC_FIEMAP)") {
        trove_fiemap_extents(
          rawValue, start, sync && first ? 1 : 0, buffer.baseAddress, batch, &count)
      }
      first = false
      if count == 0 { return extents }
      for e in buffer[..<Int(count)] {
        extents.append(
          Extent(logical: e.logical, physical: e.physical, length: e.length, flags: e.flags))
      }
      let last = extents[extents.count - 1]
      if last.flags & UInt32(FIEMAP_EXTENT_LAST) != 0 { return extents }
      start = last.logical + last.length
    }
  }

  // MARK: Directory operations (this descriptor is a directory)

  /// Creates directory `name`. `mkdirat(2)`.
  func makeDirectory(_ name: String, permissions: mode_t = 0o700) throws(SystemCallError) {
    _ = try Sys.call("mkdirat") { mkdirat(rawValue, name, permissions) }
  }

  /// Removes file `name`. `unlinkat(2)`.
  func removeFile(_ name: String) throws(SystemCallError) {
    _ = try Sys.call("unlinkat") { unlinkat(rawValue, name, 0) }
  }

  /// Moves `name` to `newName` in `directory`, replacing what is there.
  /// `renameat(2)`.
  func rename(_ name: String, to newName: String, in directory: FileDescriptor)
    throws(SystemCallError)
  {
    _ = try Sys.call("renameat") { renameat(rawValue, name, directory.rawValue, newName) }
  }

  /// Moves `name` to `newName` in `directory` only if nothing is there:
  /// EEXIST otherwise. `renameat2(2)` with RENAME_NOREPLACE; where the
  /// filesystem lacks it (EINVAL), `linkat(2)` then `unlinkat(2)`, which
  /// also refuses to replace.
  func renameWithoutReplacing(_ name: String, to newName: String, in directory: FileDescriptor)
    throws(SystemCallError)
  {
    do {
      _ = try Sys.call("renameat2") {
        trove_rename_noreplace(rawValue, name, directory.rawValue, newName)
      }
    } catch  where error.errno == .invalidArgument || error.errno == .notImplemented {
      try link(name, to: newName, in: directory)
      try? removeFile(name)
    }
  }

  /// Makes `newName` in `directory` a hard link to `name`. `linkat(2)`.
  func link(_ name: String, to newName: String, in directory: FileDescriptor)
    throws(SystemCallError)
  {
    _ = try Sys.call("linkat") { linkat(rawValue, name, directory.rawValue, newName, 0) }
  }

  /// The names in this directory, without `.` and `..`. Opens the
  /// directory anew (`openat(fd, ".")`), so listings never share an offset,
  /// and reports a failing `readdir`. `fdopendir(3)`, `readdir(3)`. O(entries).
  func entries() throws(SystemCallError) -> [String] {
    let own = try FileDescriptor.open(".", in: self, [.directory])
    guard let dir = fdopendir(own.rawValue) else {
      let e = Errno.current
      own.close()
      throw SystemCallError("fdopendir", e)
    }
    defer { closedir(dir) }
    var names: [String] = []
    while true {
      errno = 0
      guard let entry = readdir(dir) else {
        if errno != 0 { throw SystemCallError("readdir", Errno.current) }
        return names
      }
      let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
        String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
      }
      if name != "." && name != ".." { names.append(name) }
    }
  }
}

/// Extent counts of one file, as the kernel reports them through FIEMAP.
public struct ExtentSummary: Sendable, Equatable {
  /// Extents mapped.
  public var extents: UInt64
  /// Extents flagged FIEMAP_EXTENT_SHARED (shared with another file: a clone).
  public var sharedExtents: UInt64
  /// Bytes in shared extents.
  public var sharedBytes: UInt64
  /// Bytes in all extents.
  public var mappedBytes: UInt64

  init(_ s: trove_extent_summary) {
    extents = s.extents
    sharedExtents = s.shared_extents
    sharedBytes = s.shared_bytes
    mappedBytes = s.mapped_bytes
  }

  /// Whether every mapped byte is shared with another file.
  public var isFullyShared: Bool { mappedBytes > 0 && sharedBytes == mappedBytes }
}

/// One extent of a file, as FIEMAP reports it: `length` bytes at
/// `logical` in the file, stored at `physical` on the device.
struct Extent: Sendable, Hashable {
  var logical: UInt64
  var physical: UInt64
  var length: UInt64
  /// FIEMAP_EXTENT_* bits.
  var flags: UInt32

  /// FIEMAP_EXTENT_SHARED: the blocks are shared with another file (a clone).
  var isShared: Bool { flags & UInt32(FIEMAP_EXTENT_SHARED) != 0 }
  /// Not FIEMAP_EXTENT_UNKNOWN: the blocks have a place on disk (delayed
  /// allocation has none yet), so ``physical`` means something.
  var isPlaced: Bool { flags & UInt32(FIEMAP_EXTENT_UNKNOWN) == 0 }
}

extension FileDescriptor {
  /// Moves the file offset to `offset` from the start. `lseek(2)`.
  func seek(to offset: Int64) throws(SystemCallError) {
    _ = try Sys.call("lseek") { lseek(rawValue, off_t(offset), SEEK_SET) }
  }

  /// Cuts or extends the file to `length` bytes. `ftruncate(2)`.
  func truncate(to length: Int64) throws(SystemCallError) {
    _ = try Sys.call("ftruncate") { ftruncate(rawValue, off_t(length)) }
  }
}

extension FileDescriptor {
  /// Writes all of `bytes`. `write(2)`.
  func writeAll(_ bytes: [UInt8]) throws(SystemCallError) {
    let result: Result<Void, SystemCallError> = bytes.withUnsafeBytes { raw in
      do throws(SystemCallError) { return .success(try writeAll(raw)) } catch {
        return .failure(error)
      }
    }
    try result.get()
  }

  /// Reads the rest of the file, up to `limit` bytes. `read(2)`.
  func readAll(limit: Int) throws(SystemCallError) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: limit)
    let result: Result<Int, SystemCallError> = bytes.withUnsafeMutableBytes { raw in
      do throws(SystemCallError) { return .success(try readFully(into: raw)) } catch {
        return .failure(error)
      }
    }
    bytes.removeSubrange(try result.get()...)
    return bytes
  }
}

extension FileDescriptor {
  /// The current file offset. `lseek(2)` with SEEK_CUR.
  func offset() throws(SystemCallError) -> Int64 {
    Int64(try Sys.call("lseek") { lseek(rawValue, 0, SEEK_CUR) })
  }
}

extension FileDescriptor {
  /// Takes an advisory whole-file lock: exclusive or shared; when `wait` is
  /// false, returns false at once if another holds it. `flock(2)`.
  ///
  /// Locks are advisory and some network filesystems grant them silently to
  /// everyone: Trove uses them to save work, never for correctness.
  func lock(exclusive: Bool = true, wait: Bool = true) throws(SystemCallError) -> Bool {
    let operation = (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB)
    do {
      _ = try Sys.call("flock") { flock(rawValue, operation) }
      return true
    } catch  where error.errno == Errno(rawValue: EWOULDBLOCK) {
      return false
    }
  }

  /// Releases a lock taken with `lock`. `flock(2)` with LOCK_UN.
  func unlock() {
    _ = flock(rawValue, LOCK_UN)
  }

  /// Takes an open-file-description byte-range lock on the whole file
  /// (what SQLite's POSIX locks are, per descriptor rather than per
  /// process), without waiting: returns false at once if another holds a
  /// conflicting one. `fcntl(2)` with `F_OFD_SETLK`.
  func lockRange(exclusive: Bool) throws(SystemCallError) -> Bool {
    do {
      _ = try Sys.call("fcntl(F_OFD_SETLK)") { trove_ofd_lock(rawValue, exclusive ? 1 : 0, 0) }
      return true
    } catch  where error.errno == Errno(rawValue: EAGAIN) || error.errno == Errno(rawValue: EACCES)
    {
      return false
    }
  }

  /// Releases a lock taken with `lockRange`. `fcntl(2)` with `F_UNLCK`.
  func unlockRange() {
    _ = trove_ofd_lock(rawValue, 0, 1)
  }

  /// Takes an exclusive open-file-description lock on the byte at
  /// `offset`: waiting for it (a signal's interruption is retried), or,
  /// when `wait` is false, returning false at once if another holds it.
  /// `fcntl(2)` with `F_OFD_SETLKW` or `F_OFD_SETLK`.
  func lockByte(at offset: Int64, wait: Bool) throws(SystemCallError) -> Bool {
    do {
      _ = try Sys.call(wait ? "fcntl(F_OFD_SETLKW)" : "fcntl(F_OFD_SETLK)") {
        trove_ofd_lock_byte(rawValue, offset, wait ? 1 : 0, 0)
      }
      return true
    } catch
      where !wait
      && (error.errno == Errno(rawValue: EAGAIN) || error.errno == Errno(rawValue: EACCES))
    {
      return false
    }
  }

  /// Whether another open file description holds a lock on the byte at
  /// `offset`; a read-only descriptor can ask. `fcntl(2)` with
  /// `F_OFD_GETLK`.
  func byteIsLocked(at offset: Int64) throws(SystemCallError) -> Bool {
    try Sys.call("fcntl(F_OFD_GETLK)") { trove_ofd_byte_is_locked(rawValue, offset) } == 1
  }

  /// Releases a lock taken with `lockByte`. `fcntl(2)` with `F_UNLCK`.
  func unlockByte(at offset: Int64) {
    _ = trove_ofd_lock_byte(rawValue, offset, 0, 1)
  }
}

extension FileDescriptor {
  /// Allocates `length` bytes of disk for the file, as zeros.
  /// `posix_fallocate(3)`; where the filesystem cannot, writes zeros.
  func allocate(_ length: Int64) throws(SystemCallError) {
    let rc = posix_fallocate(rawValue, 0, off_t(length))
    if rc == 0 { return }
    let error = Errno(rawValue: rc)
    guard error.meansUnsupported else { throw SystemCallError("posix_fallocate", error) }
    try writeAll([UInt8](repeating: 0, count: Int(length)))
  }
}

extension FileDescriptor {
  /// Reads up to `buffer.count` bytes at `offset` without moving the file
  /// offset; fewer only at the end of the file. `pread(2)`.
  func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemCallError)
    -> Int
  {
    var filled = 0
    while filled < buffer.count {
      let n = try Sys.call("pread") {
        pread(
          rawValue, buffer.baseAddress! + filled, buffer.count - filled,
          off_t(offset) + off_t(filled))
      }
      if n == 0 { break }
      filled += n
    }
    return filled
  }
}

extension FileDescriptor {
  /// The path the kernel has for this open file or folder, with every
  /// symbolic link resolved: `readlink(2)` of `/proc/self/fd/N`.
  func resolvedPath() throws(SystemCallError) -> String {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let n = try Sys.call("readlink") {
      readlink("/proc/self/fd/\(rawValue)", &buffer, buffer.count - 1)
    }
    return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}

extension FileDescriptor {
  /// Removes the empty directory `name` in this directory (ENOTEMPTY if it
  /// is not empty). `unlinkat(2)` with AT_REMOVEDIR.
  func removeDirectory(_ name: String) throws(SystemCallError) {
    _ = try Sys.call("unlinkat(AT_REMOVEDIR)") { unlinkat(rawValue, name, AT_REMOVEDIR) }
  }
}
