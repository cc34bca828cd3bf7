#if canImport(Glibc)
  import Glibc
#endif

extension Errno {
  /// ENXIO: what ``FileDescriptor/openRegularFile(_:in:_:permissions:)``
  /// reports for a name that is not a regular file (a FIFO, a socket, a
  /// device, a folder). The kernel gives it for a FIFO opened to write
  /// with `O_NONBLOCK` and no reader, and for a socket.
  static let notARegularFile = Errno(rawValue: ENXIO)
}

extension FileDescriptor {
  /// Opens `name` in `directory` only if it is a regular file: never
  /// through a symbolic link (`O_NOFOLLOW`: ELOOP), and never blocking on
  /// a FIFO planted under the name (`O_NONBLOCK`); anything but a regular
  /// file is closed at once and refused with ``Errno/notARegularFile``.
  /// `O_NONBLOCK` stays set: reads and writes of a regular file ignore
  /// it. `openat(2)`, `fstat(2)`.
  static func openRegularFile(
    _ name: String, in directory: FileDescriptor, _ options: Options = .readOnly,
    permissions: mode_t = 0o600
  ) throws(SystemCallError) -> FileDescriptor {
    let fd: FileDescriptor
    do throws(SystemCallError) {
      fd = try open(
        name, in: directory, options.union([.noFollow, .nonBlocking]), permissions: permissions)
    } catch  where error.errno == .isDirectory {
      throw SystemCallError("open", .notARegularFile)
    }
    let status: FileStatus
    do throws(SystemCallError) {
      status = try fd.status()
    } catch {
      fd.close()
      throw error
    }
    guard status.isRegular else {
      fd.close()
      throw SystemCallError("open", .notARegularFile)
    }
    return fd
  }
}
