#if canImport(Glibc)
  import Glibc
#endif

/// Moving bytes between descriptors: user-space pumps (which can hash what
/// passes) and the in-kernel `copy_file_range` loop.
enum Transfer {
  /// The buffer size for user-space copies and hashing: large enough that
  /// XXH3's per-call cost and syscall overhead vanish (≥ 64 KiB).
  static let bufferSize = 1 << 20

  /// The buffer for reading an input of `size` bytes (when known): no
  /// larger than the input and one page more, so a 4 KiB file costs 8 KiB
  /// from the heap instead of a 1 MiB mapping made and unmade, and one
  /// read (short) finds its end.
  static func bufferSize(for size: Int64?) -> Int {
    guard let size, size >= 0, size < Int64(bufferSize) else { return bufferSize }
    return min(bufferSize, (Int(size) / 4096 + 1) * 4096)
  }

  /// Reads `source` to its end, feeding every byte to `hasher` and, when
  /// `destination` is given, writing it there. Returns the bytes moved.
  /// Bounded memory: one buffer of ``bufferSize``.
  ///
  /// Errors are tagged with which side failed so callers can name the path.
  static func pump(
    from source: FileDescriptor, to destination: FileDescriptor?, hasher: inout XXH3Hasher
  ) throws(PumpError) -> Int64 {
    let buffer = UnsafeMutableRawBufferPointer.allocate(
      byteCount: bufferSize, alignment: 4096)
    defer { buffer.deallocate() }
    var total: Int64 = 0
    while true {
      let n: Int
      do throws(SystemCallError) {
        n = try source.readFully(into: buffer)
      } catch {
        throw .reading(error)
      }
      if n == 0 { return total }
      let chunk = UnsafeRawBufferPointer(rebasing: buffer[..<n])
      hasher.update(chunk)
      if let destination {
        do throws(SystemCallError) {
          try destination.writeAll(chunk)
        } catch {
          throw .writing(error)
        }
      }
      total += Int64(n)
      if n < buffer.count { return total }
    }
  }

  /// Reads `source` to its end, feeding every byte to `hasher` only.
  /// Returns the bytes read.
  static func hash(
    from source: FileDescriptor, into hasher: inout XXH3Hasher, stoppingAfter limit: Int64? = nil
  ) throws(SystemCallError) -> Int64 {
    try read(from: source, stoppingAfter: limit) { hasher.update($0) }
  }

  /// Reads `source` to its end — or, given a `limit`, only until more than
  /// `limit` bytes were read (a file growing without end) — handing each
  /// block to `body` (several hashers at once). Returns the bytes read. One
  /// buffer of ``bufferSize``, or of ``bufferSize(for:)`` the length the
  /// caller expects (`sizeHint`; a longer input is read all the same).
  static func read(
    from source: FileDescriptor, stoppingAfter limit: Int64? = nil, sizeHint: Int64? = nil,
    _ body: (UnsafeRawBufferPointer) -> Void
  ) throws(SystemCallError) -> Int64 {
    let buffer = UnsafeMutableRawBufferPointer.allocate(
      byteCount: bufferSize(for: sizeHint), alignment: 4096)
    defer { buffer.deallocate() }
    var total: Int64 = 0
    while true {
      let n = try source.readFully(into: buffer)
      if n == 0 { return total }
      body(UnsafeRawBufferPointer(rebasing: buffer[..<n]))
      total += Int64(n)
      if n < buffer.count || total > limit ?? .max { return total }
    }
  }

  /// Which side of a pump failed.
  enum PumpError: Error {
    case reading(SystemCallError)
    case writing(SystemCallError)
  }

  /// Copies all of `source` (from its current offset) to `destination` in
  /// the kernel with `copy_file_range`. Returns the bytes copied.
  ///
  /// Throws the first call's error unchanged, so a caller can tell "not
  /// supported here" (EXDEV, EOPNOTSUPP, ENOSYS, EINVAL) from a failure.
  static func copyInKernel(from source: FileDescriptor, to destination: FileDescriptor)
    throws(SystemCallError) -> Int64
  {
    var total: Int64 = 0
    while true {
      let n = try destination.copyFileRange(from: source, count: 1 << 30)
      if n == 0 { return total }
      total += Int64(n)
    }
  }
}
