/// What `Store.verify(repair:onProgress:)` found, and what it fixed.
public struct VerifyReport: Sendable, Hashable, Codable {
  /// Objects whose bytes were hashed.
  public var checkedObjects: Int
  /// Their bytes.
  public var checkedBytes: Int64
  /// Objects whose bytes do not hash to their name (moved to
  /// `quarantine/` by a repair).
  public var corrupt: [BlobDigest]
  /// Object files the index did not know (adopted by a repair).
  public var orphanFiles: Int
  /// Index rows whose file is missing (dropped by a repair).
  public var danglingRows: Int
  /// Index rows whose form or size disagrees with their file (corrected by a repair).
  public var wrongRows: Int
  /// Digests stored in both forms (the compressed copy removed by a repair).
  public var twins: Int
  /// Objects that went away while being checked (evicted or removed by
  /// another process): not a problem.
  public var vanished: Int
  /// Paths under `objects/` that are not objects (a symbolic link, a
  /// folder or a FIFO under an object's name, a stray name).
  public var unexpectedFiles: [String]
  /// Those a repair moved to `quarantine/` (kept for inspection).
  public var quarantined: [String] = []
  /// Whether the problems found were repaired.
  public var repaired: Bool
  /// How long it took, in seconds.
  public var seconds: Double

  /// Whether the store holds exactly what its names and index say.
  public var isClean: Bool {
    corrupt.isEmpty && orphanFiles == 0 && danglingRows == 0 && wrongRows == 0 && twins == 0
      && unexpectedFiles.isEmpty
  }
}

extension Store {
  /// Checks every object against its name by hashing all its bytes, then
  /// the index against the objects folder, one fan-out folder at a time
  /// (see ``rebuildIndex()``). With `repair`, removes corrupt object files
  /// (a good copy in the other form stays), adopts orphan files, drops rows
  /// whose file is gone and corrects wrong rows. An object evicted or
  /// removed by another process while verify runs is counted as vanished,
  /// never as a failure. O(stored bytes): it reads everything.
  ///
  /// `onProgress`, when given, hears of the bytes hashed so far (1 MiB
  /// blocks of raw objects, whole compressed ones), out of the index's
  /// total of object lengths: a guide (a damaged index may be wrong).
  public func verify(repair: Bool = false, onProgress: ProgressHandler? = nil)
    throws(TroveError) -> VerifyReport
  {
    let clock = ContinuousClock()
    let start = clock.now
    if repair {
      try requireWritable()
      try objects.checkIndex()
      makeStagingFoldersSticky()
    }
    var progress: ByteProgress?
    if let onProgress {
      let total = try index().read("read totals") { (tx) throws(TroveError) in
        try tx.totals().logicalBytes
      }
      progress = ByteProgress(total: total, handler: onProgress)
    }
    var report = VerifyReport(
      checkedObjects: 0, checkedBytes: 0, corrupt: [], orphanFiles: 0, danglingRows: 0,
      wrongRows: 0, twins: 0, vanished: 0, unexpectedFiles: [], repaired: repair, seconds: 0)
    // Corrupt files the index has no row for: the reconcile below counts
    // them as orphans too when not repairing (a repair quarantines them
    // first). One file is one problem: they are counted as corrupt only.
    var corruptOrphans = 0
    for folder in 0..<256 {
      for file in try objects.objectFiles(inFolder: folder) {
        let path = objectFilePath(file.digest, compressed: file.isCompressed)
        let fd: FileDescriptor
        do throws(TroveError) {
          guard let opened = try objects.open(file.digest, compressed: file.isCompressed) else {
            report.vanished += 1
            continue
          }
          fd = opened
        } catch  where error.code == .corruptObject {
          // Not a regular file (a link, a folder, a FIFO).
          report.unexpectedFiles.append(path)
          continue
        }
        defer { fd.close() }
        fd.adviseSequential()
        let status = try attempt("read", path) { () throws(SystemCallError) in
          try fd.status()
        }
        let inode = status.inode
        let (intact, count) = try check(
          fd, file.digest, file.isCompressed, path, progress, size: status.size)
        report.checkedBytes += count
        report.checkedObjects += 1
        if !intact {
          report.corrupt.append(file.digest)
          let row = try index().read("look up \(file.digest)") { (tx) throws(TroveError) in
            try tx.entry(for: file.digest)
          }
          if row == nil && !repair { corruptOrphans += 1 }
          if repair {
            try objects.quarantineCorrupt(file.digest, compressed: file.isCompressed, inode: inode)
          }
        }
      }
    }
    let index = try objects.reconcileAll(repair: repair)
    report.orphanFiles = max(0, index.added - corruptOrphans)
    report.danglingRows = index.dropped
    report.wrongRows = index.corrected
    report.twins = index.twins
    report.unexpectedFiles += index.unexpected.filter { !report.unexpectedFiles.contains($0) }
    report.quarantined = index.quarantined
    report.seconds = (clock.now - start).seconds
    return report
  }

  /// Hashes one object file; whether its bytes match `digest`, and how
  /// many there were.
  private func check(
    _ fd: FileDescriptor, _ digest: BlobDigest, _ compressed: Bool, _ path: String,
    _ progress: ByteProgress?, size: Int64
  ) throws(TroveError) -> (Bool, Int64) {
    if compressed {
      do throws(TroveError) {
        let count = try decompressVerified(
          fd, to: nil, digest: digest, objectPath: path, destination: path)
        progress?.add(Int(count))
        return (true, count)
      } catch  where error.code == .corruptObject {
        return (false, 0)
      }
    }
    var hasher = XXH3Hasher()
    let count = try attempt("read", path) { () throws(SystemCallError) in
      // A buffer the file's size: most objects are small, and a 1 MiB one
      // each would be a mapping made and unmade per object.
      try Transfer.read(from: fd, sizeHint: size) {
        hasher.update($0)
        progress?.add($0.count)
      }
    }
    return (hasher.finalize() == digest, count)
  }
}
