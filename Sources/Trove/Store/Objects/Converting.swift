/// Converting an object between its raw and zstd forms.
extension ObjectTable {
  /// Replaces `old` (the object file of `staged.digest` as it was when the
  /// conversion started) with `staged`, the same bytes in the other form:
  /// in one transaction, publishes `staged` beside it, records the new
  /// form, and unlinks the old file. Abandoned (nil) when the object was
  /// removed, evicted or replaced meanwhile. The staged file is gone from
  /// `tmp/` when this returns or throws.
  func replaceForm(of old: StoredObject, with staged: StagedObject) throws(TroveError)
    -> StoreEntry?
  {
    let digest = staged.digest
    let newPath = path(digest, compressed: staged.isCompressed)
    var renamed = false
    defer { if !renamed { try? tmpDirectory.removeFile(staged.name) } }
    let allocated = try attempt("store", newPath) { () throws(SystemCallError) -> Int64 in
      try staged.file.setPermissions(StoreLayout.objectPermissions)
      try staged.file.sync()
      return try staged.file.status().contentBytes
    }
    let folder = try fanoutFolder(digest)
    defer { folder.close() }
    let entry = try index().write("convert \(digest)") { (tx) throws(TroveError) -> StoreEntry? in
      guard let current = try status(digest, compressed: old.isCompressed),
        current.inode == old.status.inode, current.isRegular
      else { return nil }
      // No row: being removed (or never indexed): the conversion is dropped.
      guard let row = try tx.entry(for: digest) else { return nil }
      var replaced = false
      do throws(SystemCallError) {
        renamed = try moveStaged(
          staged, to: StoreLayout.objectName(digest, compressed: staged.isCompressed), in: folder)
        replaced = !renamed
      } catch  where error.errno == .fileExists {
        // A twin left by a crash: it is published, so it holds the bytes.
      } catch {
        throw TroveError.system(error, "store", path: newPath)
      }
      if replaced { throw stagedFileReplaced(staged) }
      guard let published = try status(digest, compressed: staged.isCompressed),
        published.isRegular
      else { return nil }
      let entry = StoreEntry(
        digest: digest, size: staged.size,
        allocatedBytes: renamed ? allocated : published.contentBytes,
        created: row.created, lastAccess: row.lastAccess,
        isCompressed: staged.isCompressed, storedBytes: published.size)
      try tx.upsert(entry)
      // A new file shares no blocks; a frame has no chunks to share.
      try tx.forgetChunks(of: digest, keepingManifest: !staged.isCompressed)
      do throws(SystemCallError) {
        try folder.removeFile(StoreLayout.objectName(digest, compressed: old.isCompressed))
      } catch  where error.errno == .noSuchFileOrDirectory {
      } catch {
        throw TroveError.system(error, "remove", path: path(digest, compressed: old.isCompressed))
      }
      if renamed {
        try attempt("store", newPath) { () throws(SystemCallError) in try folder.sync() }
      }
      return entry
    }
    return entry
  }
}
