#if canImport(Glibc)
  import Glibc
#endif

/// A file opened for appending (`O_APPEND`), kept open for the life of
/// the process: each ``append(_:)`` is one `write(2)`, which the kernel
/// places at the file's end whole, so several processes appending lines
/// to one file never interleave them.
final class AppendOnlyFile: Sendable {
  private let descriptor: FileDescriptor

  /// Opens `path` for appending, creating it (mode 0600) when missing.
  /// `open(2)`.
  init(_ path: String) throws(SystemCallError) {
    descriptor = try FileDescriptor.open(
      path, [.writeOnly, .append, .create], permissions: 0o600)
  }

  deinit { descriptor.close() }

  /// Writes `text` at the file's end in one `write(2)`; a failure or a
  /// short write is not reported (the caller keeps no record to repair).
  /// Not a call of the fault seam's `write`: a trace does not change
  /// which writes an injected fault hits.
  func append(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
      _ = try? Sys.call("write(trace)") {
        Glibc.write(descriptor.rawValue, bytes.baseAddress, bytes.count)
      }
    }
  }
}
