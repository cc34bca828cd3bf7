#if canImport(Glibc)
  import Glibc
#endif

extension Sys {
  /// The real user id of this process. The corresponding C function is
  /// `getuid`.
  static var realUserID: UInt32 { getuid() }

  /// The home folder the user database gives user `uid`, or nil when it
  /// has no entry for `uid` or the entry's home is empty. The
  /// corresponding C function is `getpwuid_r`.
  /// - Throws: the lookup's failure (a damaged or unreachable user
  ///   database), other than "no such user".
  static func homeDirectory(ofUser uid: UInt32) throws(SystemCallError) -> String? {
    var size = 1024
    while true {
      var entry = passwd()
      var found: UnsafeMutablePointer<passwd>? = nil
      var buffer = [CChar](repeating: 0, count: size)
      do throws(SystemCallError) {
        _ = try call("getpwuid_r") { () -> Int32 in
          let result = getpwuid_r(uid, &entry, &buffer, buffer.count, &found)
          guard result == 0 else {
            errno = result
            return -1
          }
          return 0
        }
      } catch  where error.errno.rawValue == ERANGE && size < 1 << 20 {
        size *= 4
        continue
      }
      guard found != nil, let home = entry.pw_dir, home.pointee != 0 else { return nil }
      return String(cString: home)
    }
  }
}
