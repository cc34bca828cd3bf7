import CLinux
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The one place every system call passes through.
///
/// `Sys.call` retries on EINTR and turns `-1` into a ``SystemCallError``
/// naming the call. It is also the seam where tests inject faults: set
/// `TROVE_INJECT_FAULT=CALL:ERRNO[:SKIP]` (e.g. `write:5:3` makes the fourth
/// `write` fail with EIO) in the environment of a process to make that call
/// fail as the kernel would.
enum Sys {
  /// A fault requested through the environment; `nil` almost always.
  private static let fault: Fault? = Fault(environment: getenv("TROVE_INJECT_FAULT"))

  private final class Fault: Sendable {
    let call: String
    let errno: Errno
    let remainingSkips: Atomic<Int>

    init?(environment value: UnsafeMutablePointer<CChar>?) {
      guard let value else { return nil }
      let parts = String(cString: value).split(separator: ":")
      guard parts.count >= 2, let number = Int32(parts[1]) else { return nil }
      call = String(parts[0])
      errno = Errno(rawValue: number)
      remainingSkips = Atomic(parts.count > 2 ? Int(parts[2]) ?? 0 : 0)
    }

    func shouldFail(_ name: String) -> Bool {
      guard name == call else { return false }
      return remainingSkips.subtract(1, ordering: .relaxed).newValue < 0
    }
  }

  /// Runs `body`, retrying on EINTR; a result of -1 becomes a thrown error.
  @inline(__always)
  static func call<T: FixedWidthInteger>(
    _ name: String, retryOnInterrupt: Bool = true, _ body: () -> T
  ) throws(SystemCallError) -> T {
    if let fault, fault.shouldFail(name) { throw SystemCallError(name, fault.errno) }
    while true {
      let result = body()
      if result != -1 { return result }
      let error = Errno.current
      if retryOnInterrupt && error == .interrupted { continue }
      throw SystemCallError(name, error)
    }
  }

  /// `statvfs(2)`: free and total bytes of the filesystem holding `path`.
  static func spaceAvailable(at path: String) throws(SystemCallError) -> (
    available: Int64, total: Int64
  ) {
    var s = statvfs()
    _ = try call("statvfs") { statvfs(path, &s) }
    let unit = Int64(s.f_frsize)
    return (Int64(s.f_bavail) * unit, Int64(s.f_blocks) * unit)
  }

  /// The effective user id of this process. The corresponding C function
  /// is `geteuid`.
  static var effectiveUserID: UInt32 { geteuid() }

  /// Sleeps the calling thread for `microseconds` (a back-off between
  /// tries of a busy database). The corresponding C function is `usleep`.
  static func sleep(microseconds: UInt32) {
    _ = usleep(microseconds)
  }
}
