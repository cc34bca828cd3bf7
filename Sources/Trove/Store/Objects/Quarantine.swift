#if canImport(Glibc)
  import Glibc
#endif

/// `quarantine/`: where a repair moves what does not belong in `objects/`
/// (a symbolic link, a folder or a FIFO under an object's name, a fan-out
/// folder that is not a folder, a stray name), kept for inspection and
/// never served, counted or swept.
extension ObjectTable {
  /// Moves `name` from `folder` (whose path is `folderPath`) into
  /// `quarantine/`, under a name that says where it came from and never
  /// replaces another. A rename: nothing is followed, copied or opened.
  /// Call inside an index write transaction, like every change to
  /// `objects/`. Returns the new path.
  @discardableResult
  func quarantine(_ name: String, in folder: FileDescriptor, folderPath: String)
    throws(TroveError) -> String
  {
    let quarantinePath = root + "/" + StoreLayout.quarantine
    let relative = String(folderPath.dropFirst(root.count + 1)) + "/" + name
    let newName =
      relative.split(separator: "/").joined(separator: "-") + "."
      + String(UInt32.random(in: .min ... .max), radix: 16)
    return try attempt("quarantine", folderPath + "/" + name) { () throws(SystemCallError) in
      let quarantine = try rootDirectory.makeStoreFolder(StoreLayout.quarantine, access: access).0
      defer { quarantine.close() }
      try folder.renameWithoutReplacing(name, to: newName, in: quarantine)
      return quarantinePath + "/" + newName
    }
  }

  /// With `repair`, quarantines `name` in `objects/` (`folder` nil) or in
  /// fan-out folder `folder`, recording it in `report`; always reports it
  /// as unexpected. Call inside an index write transaction.
  func setAside(
    _ name: String, inFolder folder: String?, repair: Bool, into report: inout ReconcileReport
  )
    throws(TroveError)
  {
    let folderPath = objectsPath + (folder.map { "/" + $0 } ?? "")
    report.unexpected.append(folderPath + "/" + name)
    guard repair else { return }
    let fd: FileDescriptor
    if let folder {
      do throws(SystemCallError) {
        fd = try FileDescriptor.open(folder, in: objectsDirectory, [.directory, .noFollow])
      } catch {
        return  // gone meanwhile, or itself not a folder (quarantined as such)
      }
    } else {
      fd = objectsDirectory
    }
    defer { if folder != nil { fd.close() } }
    try quarantine(name, in: fd, folderPath: folderPath)
    report.quarantined.append(folderPath + "/" + name)
  }

  /// Moves one form of `digest`'s object file, found corrupt (its bytes
  /// do not hash to its name), to `quarantine/` — if it is still the file
  /// that was read (`inode`; the reader holds it open, so the number is
  /// not reused): one evicted and stored again meanwhile is another file.
  /// In one transaction: the rename, then the row made to agree — naming
  /// the other form if there is one, else gone with its pins and keys — so
  /// the bad bytes are never served again and a put stores good ones.
  /// Returns where the file went; nil when it was no longer that file.
  @discardableResult
  func quarantineCorrupt(_ digest: BlobDigest, compressed: Bool, inode: UInt64)
    throws(TroveError) -> String?
  {
    try index().write("quarantine \(digest)", durable: true) { (tx) throws(TroveError) -> String? in
      guard let bad = try status(digest, compressed: compressed), bad.isRegular,
        bad.inode == inode, let folder = try openFolder(of: digest)
      else { return nil }
      defer { folder.close() }
      let moved = try quarantine(
        StoreLayout.objectName(digest, compressed: compressed), in: folder,
        folderPath: objectsPath + "/" + StoreLayout.fanout(digest))
      var deferred: [BlobDigest] = []
      _ = try reconcile(tx, digest, repair: true, deferred: &deferred)
      return moved
    }
  }

  /// The entries in `quarantine/` and their allocated bytes (whole trees).
  func quarantineContents() -> (entries: Int, bytes: Int64) {
    guard
      let folder = try? FileDescriptor.open(
        StoreLayout.quarantine, in: rootDirectory, [.directory, .noFollow]),
      let names = try? folder.entries()
    else { return (0, 0) }
    defer { folder.close() }
    var bytes: Int64 = 0
    for name in names {
      bytes += folder.removeTree(name, dryRun: true).bytes
    }
    return (names.count, bytes)
  }
}
