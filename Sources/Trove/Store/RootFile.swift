/// Writing a small file of the store's root (`config.json`,
/// `remotes.json`) whole: readers see the old file (or none) or the new
/// one, never a torn one, and a crash leaves one of the two.
extension Store {
  /// Writes `bytes` to a new file in `tmp/`, syncs it, renames it over
  /// `name` in the root and syncs the root (``writeRootFile(_:through:in:publish:)``).
  /// On failure the temporary file is removed and the old file stays.
  ///
  /// The caller holds the root's lock when writers must be serialized.
  /// - Throws: `TroveError` naming the file's path and the failed call.
  func replaceRootFile(_ name: String, with bytes: [UInt8]) throws(TroveError) {
    let temp = StoreLayout.temporaryName("meta")
    try attempt("write", root + "/" + name) { () throws(SystemCallError) in
      try Self.writeRootFile(bytes, through: temp, in: tmpDirectory) {
        () throws(SystemCallError) in
        try tmpDirectory.rename(temp, to: name, in: rootDirectory)
        try rootDirectory.sync()
      }
    }
  }

  /// Writes `bytes` to the new file `temp` in `tempFolder` with mode 0644
  /// whatever the umask (every user of the store reads it), syncs it, and
  /// has `publish` give it its name (a rename, which replaces or not).
  /// When a step fails, the temporary file is removed and the error thrown.
  static func writeRootFile(
    _ bytes: [UInt8], through temp: String, in tempFolder: FileDescriptor,
    publish: () throws(SystemCallError) -> Void
  ) throws(SystemCallError) {
    let fd = try FileDescriptor.open(
      temp, in: tempFolder, [.writeOnly, .create, .exclusive], permissions: 0o644)
    defer { fd.close() }
    do throws(SystemCallError) {
      try fd.setPermissions(0o644)
      try fd.writeAll(bytes)
      try fd.sync()
      try publish()
    } catch {
      try? tempFolder.removeFile(temp)
      throw error
    }
  }
}
