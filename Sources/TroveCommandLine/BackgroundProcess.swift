#if canImport(Glibc)
  import Glibc
#endif

/// A process started to outlive this one (the background upload after a
/// put or fetch): posix_spawn, not Foundation's `Process`, which sets up
/// a monitor for a child this command never waits for.
enum BackgroundProcess {
  /// glibc's POSIX_SPAWN_SETSID (since 2.26), which Swift's Glibc module
  /// does not export: the child starts a session of its own, so a hangup
  /// or an interrupt aimed at this command's terminal or job is not its.
  private static let newSession: Int32 = 0x80

  /// Starts `path` with `arguments` in a session of its own, with
  /// /dev/null for its standard files, no other descriptor of this
  /// process, no signal blocked and the usual handling of the signals
  /// this process may ignore; not waited for. Returns nil, or the errno
  /// that kept it from starting.
  static func start(_ path: String, _ arguments: [String]) -> Int32? {
    var actions = posix_spawn_file_actions_t()
    var attributes = posix_spawnattr_t()
    if let error = nonZero(posix_spawn_file_actions_init(&actions)) { return error }
    defer { posix_spawn_file_actions_destroy(&actions) }
    if let error = nonZero(posix_spawnattr_init(&attributes)) { return error }
    defer { posix_spawnattr_destroy(&attributes) }
    for fd: Int32 in 0...2 {
      let error = posix_spawn_file_actions_addopen(
        &actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
      if error != 0 { return error }
    }
    // Every descriptor of ours the exec would not close (most are opened
    // close-on-exec; a library's may not be) is closed in the child.
    for fd in inheritable() {
      if let error = nonZero(posix_spawn_file_actions_addclose(&actions, fd)) { return error }
    }
    var none = sigset_t()
    sigemptyset(&none)
    var usual = sigset_t()
    sigemptyset(&usual)
    for signal in [SIGPIPE, SIGINT, SIGHUP, SIGTERM, SIGQUIT] { sigaddset(&usual, signal) }
    if let error = nonZero(posix_spawnattr_setsigmask(&attributes, &none)) { return error }
    if let error = nonZero(posix_spawnattr_setsigdefault(&attributes, &usual)) { return error }
    let flags = Int32(POSIX_SPAWN_SETSIGMASK) | Int32(POSIX_SPAWN_SETSIGDEF) | newSession
    if let error = nonZero(posix_spawnattr_setflags(&attributes, Int16(flags))) { return error }
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for arg in argv { free(arg) } }
    var pid = pid_t()
    return nonZero(posix_spawn(&pid, path, &actions, &attributes, argv, environ))
  }

  private static func nonZero(_ result: Int32) -> Int32? { result == 0 ? nil : result }

  /// This process's descriptors above 2 without close-on-exec.
  private static func inheritable() -> [Int32] {
    guard let folder = opendir("/proc/self/fd") else { return [] }
    defer { closedir(folder) }
    let own = dirfd(folder)
    var found: [Int32] = []
    while let entry = readdir(folder) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
        String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
      }
      guard let fd = Int32(name), fd > 2, fd != own else { continue }
      let flags = fcntl(fd, F_GETFD)
      if flags >= 0 && flags & FD_CLOEXEC == 0 { found.append(fd) }
    }
    return found
  }
}
