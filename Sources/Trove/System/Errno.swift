#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// An error number reported by the operating system.
///
/// Constants carry readable names (`.noSpace`, not `ENOSPC`); `description`
/// is the C library's message for the number.
public struct Errno: RawRepresentable, Error, Hashable, Sendable, CustomStringConvertible {
  /// The raw C `errno` value.
  public let rawValue: Int32

  /// Wraps a raw `errno` value.
  public init(rawValue: Int32) { self.rawValue = rawValue }

  /// The current thread's `errno`.
  static var current: Errno { Errno(rawValue: errno) }

  /// The C library's text for this number, e.g. "No space left on device".
  public var description: String { String(cString: strerror(rawValue)) }

  /// ENOENT.
  public static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
  /// EEXIST.
  public static let fileExists = Errno(rawValue: EEXIST)
  /// EINTR.
  public static let interrupted = Errno(rawValue: EINTR)
  /// EACCES.
  public static let permissionDenied = Errno(rawValue: EACCES)
  /// EPERM.
  public static let notPermitted = Errno(rawValue: EPERM)
  /// EROFS.
  public static let readOnlyFileSystem = Errno(rawValue: EROFS)
  /// ENOSPC.
  public static let noSpace = Errno(rawValue: ENOSPC)
  /// EDQUOT.
  public static let diskQuotaExceeded = Errno(rawValue: EDQUOT)
  /// EIO.
  public static let ioError = Errno(rawValue: EIO)
  /// EISDIR.
  public static let isDirectory = Errno(rawValue: EISDIR)
  /// ENOTDIR.
  public static let notDirectory = Errno(rawValue: ENOTDIR)
  /// EXDEV.
  public static let crossDevice = Errno(rawValue: EXDEV)
  /// EOPNOTSUPP.
  public static let notSupported = Errno(rawValue: EOPNOTSUPP)
  /// ENOTTY: the ioctl is not known to this file's driver.
  public static let noTTY = Errno(rawValue: ENOTTY)
  /// EINVAL.
  public static let invalidArgument = Errno(rawValue: EINVAL)
  /// ENOSYS.
  public static let notImplemented = Errno(rawValue: ENOSYS)
  /// EBADF.
  public static let badFileDescriptor = Errno(rawValue: EBADF)
  /// EPIPE.
  public static let brokenPipe = Errno(rawValue: EPIPE)
  /// ENOKEY: an encrypted directory whose key is not loaded (fscrypt).
  public static let noKey = Errno(rawValue: 126)
  /// ELOOP: a symbolic link where `O_NOFOLLOW` forbade one (or too many links).
  public static let tooManySymbolicLinks = Errno(rawValue: ELOOP)

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
public struct SystemCallError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The system call's name, e.g. `"openat"`.
  public let call: String
  /// The error it returned.
  public let errno: Errno

  /// Makes an error for `call` failing with `errno`.
  public init(_ call: String, _ errno: Errno) {
    self.call = call
    self.errno = errno
  }

  public var description: String { "\(call): \(errno) (errno \(errno.rawValue))" }
}
