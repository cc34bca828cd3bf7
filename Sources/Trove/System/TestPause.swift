#if canImport(Glibc)
  import Glibc
#endif

extension Sys {
  /// A seam where a test acts on the store at one exact point of a
  /// command, such as another user swapping a staged file between staging
  /// and publishing. In debug builds (`TROVE_FAULTS`, as for
  /// `TROVE_INJECT_FAULT`), when `TROVE_TEST_PAUSE` names a folder, the
  /// process writes `detail` to `FOLDER/POINT` and waits until
  /// `FOLDER/POINT.go` exists (at most a minute). A release build has no
  /// such path: the variable is never read.
  @inline(__always)
  static func pauseForTest(_ point: String, _ detail: @autoclosure () -> String) {
    #if TROVE_FAULTS
      guard let folder = testPauseFolder else { return }
      let note = folder + "/" + point
      // Written aside and renamed: the test never reads half a note.
      let fd = Glibc.open(note + ".new", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
      if fd >= 0 {
        let bytes = Array(detail().utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        _ = Glibc.close(fd)
        _ = Glibc.rename(note + ".new", note)
      }
      var waits = 0
      while waits < 6000, access(note + ".go", F_OK) != 0 {
        _ = usleep(10_000)
        waits += 1
      }
    #endif
  }

  #if TROVE_FAULTS
    private static let testPauseFolder: String? = getenv("TROVE_TEST_PAUSE").map {
      String(cString: $0)
    }
  #endif
}
