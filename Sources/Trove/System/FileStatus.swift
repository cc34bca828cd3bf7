#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What `stat(2)` says about a file, reduced to what Trove uses.
struct FileStatus: Sendable, Equatable {
  /// `st_size`: the logical length in bytes.
  var size: Int64
  /// `st_blocks * 512`: bytes allocated on disk (what `du` reports).
  ///
  /// Not Foundation's `totalFileAllocatedSize`, which multiplies by
  /// `st_blksize` on Linux and is 8× too large.
  var allocatedBytes: Int64
  /// `st_mode`.
  var mode: UInt32
  /// `st_dev`: the filesystem holding the file.
  var device: UInt64
  /// `st_ino`.
  var inode: UInt64
  /// `st_nlink`.
  var linkCount: UInt64
  /// `st_mtime` in seconds since the epoch.
  var modificationTime: Int64
  /// `st_mtime` in nanoseconds: set when the content was last written.
  var modificationTimeNanoseconds: Int64
  /// `st_blksize`: the filesystem's preferred I/O size.
  var blockSize: Int64
  /// `st_uid`: the owner.
  var owner: UInt32
  /// `st_gid`: the group.
  var group: UInt32

  init(_ s: stat) {
    size = Int64(s.st_size)
    allocatedBytes = Int64(s.st_blocks) * 512
    mode = UInt32(s.st_mode)
    device = UInt64(s.st_dev)
    inode = UInt64(s.st_ino)
    linkCount = UInt64(s.st_nlink)
    modificationTime = Int64(s.st_mtim.tv_sec)
    modificationTimeNanoseconds = Int64(s.st_mtim.tv_sec) * 1_000_000_000 + Int64(s.st_mtim.tv_nsec)
    blockSize = max(512, Int64(s.st_blksize))
    owner = UInt32(s.st_uid)
    group = UInt32(s.st_gid)
    changeTime = Int64(s.st_ctim.tv_sec) * 1_000_000_000 + Int64(s.st_ctim.tv_nsec)
  }

  /// The bytes the file's content takes: ``allocatedBytes``, but never more
  /// than its length rounded up to whole blocks. XFS counts speculative
  /// preallocation beyond the end of a file just written (twice its size
  /// for a 2 MiB stream) until the file is closed and trimmed; budgets and
  /// evictions for space must not count it.
  var contentBytes: Int64 {
    let blocks = size / blockSize + (size % blockSize == 0 ? 0 : 1)
    return min(allocatedBytes, blocks.multipliedSaturated(by: blockSize))
  }

  /// `st_ctime` in nanoseconds: changes whenever the file does.
  var changeTime: Int64
  /// `st_ctime` in seconds since the epoch: when its name, mode or owner last changed.
  var changeTimeSeconds: Int64 { changeTime / 1_000_000_000 }

  /// Identifies this version of a file: a replaced or rewritten file
  /// differs in one of inode, size, or change time.
  var identity: [Int64] { [Int64(bitPattern: inode), size, changeTime, modificationTime] }

  /// The file type bits of `mode`.
  private var type: UInt32 { mode & UInt32(S_IFMT) }
  /// A regular file.
  var isRegular: Bool { type == UInt32(S_IFREG) }
  /// A directory.
  var isDirectory: Bool { type == UInt32(S_IFDIR) }
  /// A pipe (or FIFO).
  var isFIFO: Bool { type == UInt32(S_IFIFO) }
}
