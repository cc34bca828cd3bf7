import CLinux
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The one place every system call passes through.
///
/// `Sys.call` retries on EINTR and turns `-1` into a ``SystemCallError``
/// naming the call. In debug builds (`TROVE_FAULTS`, which the tests use)
/// it is also the seam where tests inject faults: set
/// `TROVE_INJECT_FAULT=CALL:ERRNO[:SKIP[:TIMES]]` (e.g. `write:5:3` makes
/// the fourth `write` and every later one fail with EIO; `fsync:5:3:1` only
/// the fourth `fsync`) in the environment of a process to make that call
/// fail as the kernel would; several, separated by commas
/// (`syncfs:5,fsync:5:2:1`), fail each their call. A release build has no
/// such path: the variable is never read.
enum Sys {
  #if TROVE_FAULTS
    /// Whether this build reads `TROVE_INJECT_FAULT`.
    static let injectsFaults = true

    /// The faults requested through the environment; none almost always.
    private static let faults: [Fault] = {
      guard let value = getenv("TROVE_INJECT_FAULT") else { return [] }
      return String(cString: value).split(separator: ",").compactMap { Fault(String($0)) }
    }()

    private final class Fault: Sendable {
      let call: String
      let errno: Errno
      let remainingSkips: Atomic<Int>
      /// How many failures are left after the skips (`Int.max`: no end).
      let remainingFailures: Atomic<Int>

      init?(_ value: String) {
        let parts = value.split(separator: ":")
        guard parts.count >= 2, let number = Int32(parts[1]) else { return nil }
        call = String(parts[0])
        errno = Errno(rawValue: number)
        remainingSkips = Atomic(parts.count > 2 ? Int(parts[2]) ?? 0 : 0)
        remainingFailures = Atomic(parts.count > 3 ? Int(parts[3]) ?? Int.max : Int.max)
      }

      func shouldFail(_ name: String) -> Bool {
        guard name == call else { return false }
        guard remainingSkips.subtract(1, ordering: .relaxed).newValue < 0 else { return false }
        return remainingFailures.subtract(1, ordering: .relaxed).newValue >= 0
      }
    }
  #else
    static let injectsFaults = false
  #endif

  /// Runs `body`, retrying on EINTR; a result of -1 becomes a thrown error.
  @inline(__always)
  static func call<T: FixedWidthInteger>(
    _ name: String, retryOnInterrupt: Bool = true, _ body: () -> T
  ) throws(SystemCallError) -> T {
    #if TROVE_FAULTS
      if !faults.isEmpty, let fault = faults.first(where: { $0.shouldFail(name) }) {
        throw SystemCallError(name, fault.errno)
      }
    #endif
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

  /// Whether `syncfs(2)` reports write-back errors: since Linux 5.8 it
  /// returns an error recorded on the filesystem since the last `syncfs`
  /// through the same open file description reported one (or since it was
  /// opened); before, it always returned 0, so a batch synced that way
  /// could not learn that a write was lost.
  static let syncfsReportsErrors: Bool = {
    var names = utsname()
    guard uname(&names) == 0 else { return false }
    let release = withUnsafeBytes(of: names.release) {
      String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
    }
    let parts = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
    guard parts.count == 2 else { return false }
    return (parts[0], parts[1]) >= (5, 8)
  }()

  /// The soft limit on this process's open descriptors (`RLIMIT_NOFILE`),
  /// nil when it cannot be read. `getrlimit(2)`.
  static var openFileLimit: UInt64? {
    var limit = rlimit()
    guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
    return UInt64(limit.rlim_cur)
  }

  /// Grows this process's descriptor table, in one step, to hold `count`
  /// descriptors (at most its `RLIMIT_NOFILE`): the kernel grows it by
  /// doubling as descriptors are opened, and in a process with threads
  /// each growth waits for an RCU grace period — milliseconds, during
  /// which every thread opening a file waits too. A batch that will hold
  /// many files open asks first. `fcntl(F_DUPFD_CLOEXEC)` of a descriptor
  /// onto the first free number at or above `count - 1`, closed at once.
  static func reserveDescriptors(_ count: Int) {
    let limit = openFileLimit.map { Int(clamping: $0) } ?? 1024
    let top = min(count, limit) - 1
    guard top > reservedDescriptors.load(ordering: .relaxed) else { return }
    let probe = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard probe >= 0 else { return }
    defer { close(probe) }
    let far = fcntl(probe, F_DUPFD_CLOEXEC, Int32(clamping: top))
    guard far >= 0 else { return }
    close(far)
    _ = reservedDescriptors.max(top, ordering: .relaxed)
  }

  /// The highest descriptor number ``reserveDescriptors(_:)`` made room
  /// for: the table never shrinks.
  private static let reservedDescriptors = Atomic<Int>(0)

  /// The effective user id of this process. The corresponding C function
  /// is `geteuid`.
  static var effectiveUserID: UInt32 { geteuid() }

  /// Sleeps the calling thread for `microseconds` (a back-off between
  /// tries of a busy database). The corresponding C function is `usleep`.
  static func sleep(microseconds: UInt32) {
    _ = usleep(microseconds)
  }
}
