#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// An error number reported by the operating system.
///
/// Constants carry readable names (`.noSpace`, not `ENOSPC`); `description`
/// is the C library's message for the number.
struct Errno: RawRepresentable, Error, Hashable, Sendable, CustomStringConvertible {
  /// The raw C `errno` value.
  let rawValue: Int32

  /// Wraps a raw `errno` value.
  init(rawValue: Int32) { self.rawValue = rawValue }

  /// The current thread's `errno`.
  static var current: Errno { Errno(rawValue: errno) }

  /// The C library's text for this number, e.g. "No space left on device".
  var description: String { String(cString: strerror(rawValue)) }

  /// ENOENT.
  static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
  /// EEXIST.
  static let fileExists = Errno(rawValue: EEXIST)
  /// EINTR.
  static let interrupted = Errno(rawValue: EINTR)
  /// EACCES.
  static let permissionDenied = Errno(rawValue: EACCES)
  /// EPERM.
  static let notPermitted = Errno(rawValue: EPERM)
  /// EROFS.
  static let readOnlyFileSystem = Errno(rawValue: EROFS)
  /// ENOSPC.
  static let noSpace = Errno(rawValue: ENOSPC)
  /// EDQUOT.
  static let diskQuotaExceeded = Errno(rawValue: EDQUOT)
  /// EIO.
  static let ioError = Errno(rawValue: EIO)
  /// EISDIR.
  static let isDirectory = Errno(rawValue: EISDIR)
  /// ENOTDIR.
  static let notDirectory = Errno(rawValue: ENOTDIR)
  /// EXDEV.
  static let crossDevice = Errno(rawValue: EXDEV)
  /// EOPNOTSUPP.
  static let notSupported = Errno(rawValue: EOPNOTSUPP)
  /// ENOTTY: the ioctl is not known to this file's driver.
  static let noTTY = Errno(rawValue: ENOTTY)
  /// EINVAL.
  static let invalidArgument = Errno(rawValue: EINVAL)
  /// ENOSYS.
  static let notImplemented = Errno(rawValue: ENOSYS)
  /// EBADF.
  static let badFileDescriptor = Errno(rawValue: EBADF)
  /// EPIPE.
  static let brokenPipe = Errno(rawValue: EPIPE)
  /// ENOKEY: an encrypted directory whose key is not loaded (fscrypt).
  static let noKey = Errno(rawValue: 126)
  /// ELOOP: a symbolic link where `O_NOFOLLOW` forbade one (or too many links).
  static let tooManySymbolicLinks = Errno(rawValue: ELOOP)

  /// Whether an `open` with `O_DIRECTORY|O_NOFOLLOW` found something
  /// other than a folder: a symbolic link (ELOOP) or a file (ENOTDIR).
  var meansNotAFolder: Bool { self == .tooManySymbolicLinks || self == .notDirectory }

  /// Whether the error says an operation is not available here (so a
  /// fallback is honest), as opposed to a real failure (EIO, ENOSPC, EDQUOT).
  ///
  /// This mirrors coreutils `cp`: fall back on EOPNOTSUPP, EXDEV, EINVAL,
  /// ENOTTY, ENOSYS and EPERM-like refusals of the operation, stop on I/O
  /// and space errors.
  var meansUnsupported: Bool {
    switch self {
    case .notSupported, .crossDevice, .invalidArgument, .noTTY, .notImplemented,
      .badFileDescriptor:
      return true
    default:
      return false
    }
  }
}

/// A failed system call: its name and the error number it returned.
///
/// Its description reads like NIO's: "'renameat2' failed: File exists (errno 17)".
struct SystemCallError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The system call's name, e.g. `"openat"`.
  let call: String
  /// The error it returned.
  let errno: Errno

  /// Makes an error for `call` failing with `errno`.
  init(_ call: String, _ errno: Errno) {
    self.call = call
    self.errno = errno
  }

  var description: String { "\(call): \(errno) (errno \(errno.rawValue))" }
}
