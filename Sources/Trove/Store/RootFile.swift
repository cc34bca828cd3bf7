/// Replacing a small file of the store's root (`config.json`,
/// `remotes.json`) whole: readers see the old file or the new one, never
/// a torn one, and a crash leaves one of the two.
extension Store {
  /// Writes `bytes` to a new file in `tmp/`, with mode 0644 whatever the
  /// umask (every user of the store reads it), syncs it, renames it over
  /// `name` in the root and syncs the root. On failure the temporary file
  /// is removed and the old file stays.
  ///
  /// The caller holds the root's lock when writers must be serialized.
  /// - Throws: `TroveError` naming the file's path and the failed call.
  func replaceRootFile(_ name: String, with bytes: [UInt8]) throws(TroveError) {
    let temp = StoreLayout.temporaryName("meta")
    try attempt("write", root + "/" + name) { () throws(SystemCallError) in
      let fd = try FileDescriptor.open(
        temp, in: tmpDirectory, [.writeOnly, .create, .exclusive], permissions: 0o644)
      defer { fd.close() }
      do throws(SystemCallError) {
        try fd.setPermissions(0o644)
        try fd.writeAll(bytes)
        try fd.sync()
        try tmpDirectory.rename(temp, to: name, in: rootDirectory)
        try rootDirectory.sync()
      } catch {
        try? tmpDirectory.removeFile(temp)
        throw error
      }
    }
  }
}
