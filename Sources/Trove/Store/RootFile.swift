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

  /// The mode every root file Trove writes has (``writeRootFile(_:through:in:publish:)``).
  static let rootFileMode: UInt32 = 0o644

  /// Why the choices a root file holds (`signing-key`, credential
  /// bindings) are not this user's, from the status of the descriptor they
  /// were read from: another user (not root) owns it; another user could
  /// write it (group or other write permission); or it has the mode of a
  /// file Trove wrote with bytes from elsewhere — read-only to its owner
  /// as every object is, or private to its owner as every part file and
  /// staged put is — which another member can rename over it from a folder
  /// they own; or it has other names. Nil when they are this user's.
  static func rootFileRefusal(_ status: FileStatus) -> String? {
    let owner = status.owner
    if owner != Sys.effectiveUserID && owner != 0 {
      return "is owned by uid \(owner), not by this user (uid \(Sys.effectiveUserID)) or root"
    }
    let mode = status.mode & 0o7777
    let shown = String(mode, radix: 8)
    if mode & 0o022 != 0 {
      return "is writable by users other than its owner (mode \(shown))"
    }
    if mode & 0o200 == 0 || mode & 0o044 == 0 || status.linkCount != 1 {
      return
        "is not a file trove wrote (mode \(shown), \(status.linkCount) links: read-only, private or linked, as an object, a part file or a staged put can be; remove it and set what it held again)"
    }
    return nil
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
      temp, in: tempFolder, [.writeOnly, .create, .exclusive], permissions: rootFileMode)
    defer { fd.close() }
    do throws(SystemCallError) {
      try fd.setPermissions(rootFileMode)
      try fd.writeAll(bytes)
      try fd.sync()
      try publish()
    } catch {
      try? tempFolder.removeFile(temp)
      throw error
    }
  }
}
