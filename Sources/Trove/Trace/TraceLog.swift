/// A trace kept in a file, one line per event (``TraceEvent/description``),
/// as the CLI keeps one when `TROVE_DEBUG=FILE` is set.
public enum TraceLog {
  /// A hook for ``StoreConfiguration/trace`` that appends each event to
  /// the file at `path` (made, mode 0600, when missing). Several processes
  /// may append to one file: each line is written whole by one `write(2)`
  /// to a file opened for appending, so lines never interleave. A line
  /// that cannot be written is dropped: tracing never fails the store.
  ///
  /// - Throws: ``TroveError`` `.invalidArgument` naming the path and the
  ///   cause when the file cannot be opened for appending.
  public static func appending(to path: String) throws(TroveError)
    -> @Sendable (TraceEvent) -> Void
  {
    let file: AppendOnlyFile
    do throws(SystemCallError) {
      file = try AppendOnlyFile(path)
    } catch {
      throw TroveError.system(error, "open trace file", path: path, code: .invalidArgument)
    }
    return { event in file.append(event.description + "\n") }
  }
}
