/// What reconciling the index with `objects/` found (and, when repairing,
/// fixed): see ``Store/rebuildIndex()``.
public struct ReconcileReport: Sendable, Hashable, Codable {
  /// Object files without a row (adopted).
  public var added = 0
  /// Rows whose file is missing (dropped, with their pins and keys).
  public var dropped = 0
  /// Rows that disagreed with their file's form or size (corrected).
  public var corrected = 0
  /// Digests present in both forms (the compressed copy removed).
  public var twins = 0
  /// Removals found between their two steps (their remover may have
  /// died), finished.
  public var removalsFinished = 0
  /// Paths under `objects/` that are not objects: symbolic links,
  /// folders or FIFOs under an object's name, stray names.
  public var unexpected: [String] = []
  /// Those of ``unexpected`` a repair moved to `quarantine/`.
  public var quarantined: [String] = []
  /// Pins a rebuilt index took back from `references.log`.
  public var pinsRestored = 0
  /// Keys a rebuilt index took back from `references.log`.
  public var keysRestored = 0
  /// Pins and keys of `references.log` a rebuilt index could not take
  /// back: their object is gone (or the lease ran out).
  public var referencesLost = 0

  /// Whether the index and the folder agreed.
  public var isClean: Bool { added == 0 && dropped == 0 && corrected == 0 && twins == 0 }

  mutating func add(_ other: ReconcileReport) {
    added += other.added
    dropped += other.dropped
    corrected += other.corrected
    twins += other.twins
    removalsFinished += other.removalsFinished
    unexpected += other.unexpected
    quarantined += other.quarantined
    pinsRestored += other.pinsRestored
    keysRestored += other.keysRestored
    referencesLost += other.referencesLost
  }
}

/// Reconciling the index with `objects/`: one digest, one fan-out folder,
/// or all of them.
extension ObjectTable {
  /// Makes `digest`'s row agree with its files, in one transaction: adopts
  /// a file without a row, drops a row without a file (with its pins and
  /// keys), corrects a row whose form or size is wrong, and removes the
  /// compressed copy of a digest present in both forms. A compressed file
  /// whose frame does not record its length is measured outside the
  /// transaction, then reconciled in a second one.
  @discardableResult
  func reconcile(_ digest: BlobDigest) throws(TroveError) -> ReconcileReport {
    var report = ReconcileReport()
    if isReadOnly { return report }  // nothing is repaired in a read-only store
    var measured: [BlobDigest: Measured] = [:]
    for _ in 0..<2 {
      var deferred: [BlobDigest] = []
      report.add(
        try index().write("reconcile \(digest)") { (tx) throws(TroveError) in
          try reconcile(tx, digest, repair: true, measured: measured, deferred: &deferred)
        })
      if deferred.isEmpty { break }
      measured = measure(deferred)
    }
    return report
  }

  /// Reconciles every digest of fan-out folder `folder` (0–255) — its
  /// files and its rows — in one transaction. O(objects in the folder).
  func reconcile(folder: Int, repair: Bool) throws(TroveError) -> ReconcileReport {
    var deferred: [BlobDigest] = []
    var report = try index().write("reconcile a folder") { (tx) throws(TroveError) in
      try reconcile(tx, folder: folder, repair: repair, deferred: &deferred)
    }
    report.add(try reconcile(deferred, repair: repair))
    return report
  }

  /// Reconciles the next fan-out folder in turn (the index's cursor), so
  /// that sweeps, one folder each, reconcile every folder once in 256.
  func reconcileNextFolder() throws(TroveError) -> ReconcileReport {
    var deferred: [BlobDigest] = []
    var report = try index().write("reconcile a folder") { (tx) throws(TroveError) in
      try reconcile(tx, folder: try tx.nextReconcileFolder(), repair: true, deferred: &deferred)
    }
    report.add(try reconcile(deferred, repair: true))
    return report
  }

  /// Reconciles `digests`, whose compressed files needed measuring: each
  /// is measured first, then reconciled in a transaction of its own.
  func reconcile(_ digests: [BlobDigest], repair: Bool) throws(TroveError)
    -> ReconcileReport
  {
    var report = ReconcileReport()
    for digest in digests {
      let measured = measure([digest])
      var again: [BlobDigest] = []
      report.add(
        try index().write("reconcile \(digest)") { (tx) throws(TroveError) in
          try reconcile(tx, digest, repair: repair, measured: measured, deferred: &again)
        })
    }
    return report
  }

  func reconcile(
    _ tx: IndexSession, folder: Int, repair: Bool, deferred: inout [BlobDigest]
  ) throws(TroveError) -> ReconcileReport {
    let name = String(folder, radix: 16).leftPadded(to: 2)
    do {
      var report = ReconcileReport()
      var rows: [BlobDigest: StoreEntry] = [:]
      for entry in try tx.entries(withPrefix: name) { rows[entry.digest] = entry }
      // A removal between its two steps is finished here when repairing
      // (its remover meant it, and may have died), and is no problem to
      // report otherwise.
      let underway = try removals.underway(withPrefix: name, tx)
      if repair {
        _ = try removals.callOff(Array(underway.keys), tx)
        for (digest, record) in underway {
          if rows[digest] == nil {
            if try removals.unlinkFiles(of: record) { report.removalsFinished += 1 }
            try forget([digest], tx)  // pins and keys a crash left
          }
        }
      }
      let inProgress: Set<BlobDigest> = repair ? [] : Set(underway.keys)
      var forms: [BlobDigest: [Bool]] = [:]
      for file in try listing(name) {
        let compressed = file.hasSuffix(StoreLayout.compressedSuffix)
        let hex = compressed ? String(file.dropLast(StoreLayout.compressedSuffix.count)) : file
        guard let digest = BlobDigest(hex: Substring(hex)), hex == digest.hex, hex.hasPrefix(name)
        else {
          try setAside(file, inFolder: name, repair: repair, into: &report)
          continue
        }
        forms[digest, default: []].append(compressed)
      }
      let digests = Set(rows.keys).union(forms.keys).subtracting(inProgress)
      for digest in digests.sorted() {
        // What the listing and the rows already say, both read in this
        // transaction: one `fstatat` per file, no query per digest.
        let known = Known(row: rows[digest], forms: forms[digest] ?? [])
        report.add(
          try reconcile(tx, digest, repair: repair, known: known, deferred: &deferred))
      }
      return report
    }
  }

  /// Reconciles every fan-out folder; reports names under `objects/` that
  /// are not fan-out folders. O(objects).
  func reconcileAll(repair: Bool) throws(TroveError) -> ReconcileReport {
    var report = ReconcileReport()
    var folders = Set<Int>()
    for name in try listing(nil).sorted() {
      let isFolder = (try? objectsDirectory.status(of: name, followSymlinks: false))?.isDirectory
      guard name.utf8.count == 2, UInt8(name, radix: 16) != nil, name == name.lowercased(),
        isFolder == true
      else {
        if repair {
          try index().write("quarantine \(name)") { (tx) throws(TroveError) in
            try setAside(name, inFolder: nil, repair: true, into: &report)
          }
        } else {
          report.unexpected.append(objectsPath + "/" + name)
        }
        continue
      }
      folders.insert(Int(name, radix: 16)!)
    }
    // Folders that were not there hold no files, only rows to drop: one
    // transaction for all of them (all 256 in a new store). Each is listed
    // again inside it, so one made meanwhile is reconciled as it is.
    var deferred: [BlobDigest] = []
    report.add(
      try index().write("reconcile the missing folders") { (tx) throws(TroveError) in
        var report = ReconcileReport()
        for folder in 0..<256 where !folders.contains(folder) {
          report.add(try reconcile(tx, folder: folder, repair: repair, deferred: &deferred))
        }
        return report
      })
    report.add(try reconcile(deferred, repair: repair))
    for folder in folders.sorted() {
      report.add(try reconcile(folder: folder, repair: repair))
    }
    return report
  }

  /// The names in fan-out folder `name` (or in `objects/` itself when nil);
  /// empty when the folder does not exist.
  func listing(_ name: String?) throws(TroveError) -> [String] {
    let folderPath = objectsPath + (name.map { "/" + $0 } ?? "")
    do throws(SystemCallError) {
      guard let name else { return try objectsDirectory.entries() }
      let folder = try FileDescriptor.open(
        name, in: objectsDirectory, [.directory, .noFollow])
      defer { folder.close() }
      return try folder.entries()
    } catch  where error.errno == .noSuchFileOrDirectory || error.errno.meansNotAFolder {
      // Not a folder (a link, a file): it holds no objects, and
      // ``reconcileAll(repair:)`` reports it.
      return []
    } catch {
      throw TroveError.system(error, "list", path: folderPath)
    }
  }

  /// Reconciles one digest inside a write transaction.
  func reconcile(
    _ tx: IndexSession, _ digest: BlobDigest, repair: Bool, known: Known? = nil,
    measured: [BlobDigest: Measured] = [:], deferred: inout [BlobDigest]
  ) throws(TroveError) -> ReconcileReport {
    var report = ReconcileReport()
    var raw: FileStatus? = nil
    var zst: FileStatus? = nil
    if known?.forms.contains(false) ?? true { raw = try status(digest, compressed: false) }
    if known?.forms.contains(true) ?? true { zst = try status(digest, compressed: true) }
    for (form, status) in [(false, raw), (true, zst)] where status.map({ !$0.isRegular }) == true {
      try setAside(
        StoreLayout.objectName(digest, compressed: form), inFolder: StoreLayout.fanout(digest),
        repair: repair, into: &report)
    }
    if raw?.isRegular == false { raw = nil }
    if zst?.isRegular == false { zst = nil }
    let row: StoreEntry?
    if let known { row = known.row } else { row = try tx.entry(for: digest) }
    // A removal in progress is settled (a folder's reconcile settled its
    // own already). An eviction is called off: a read, a pin or a key
    // wants the object, or its remover died. An explicit `rm` is
    // finished: nothing but a put brings the object back.
    if repair && known == nil, let record = try removals.underway(digest, tx) {
      if record.isExplicit && row == nil {
        _ = try removals.callOff([digest], tx)
        if try removals.unlinkFiles(of: record) {
          report.removalsFinished += 1
          try forget([digest], tx)
          return report
        }
        // Not the file the `rm` meant (one stored since): it stays, and
        // is reconciled below like any other.
        try forget([digest], tx)
        if let status = try status(digest, compressed: false), status.isRegular { raw = status }
        if let status = try status(digest, compressed: true), status.isRegular { zst = status }
      }
      // Calling a removal off must outlast a power loss, or the removal
      // would come back and take the object from whoever kept it.
      if raw != nil || zst != nil { try tx.requireDurable() }
      _ = try removals.callOff([digest], tx)
    }
    if raw != nil && zst != nil {
      // Both forms (a crash during a conversion): both hold the bytes;
      // readers prefer the raw one, so the compressed one goes.
      report.twins += 1
      if repair {
        try attempt("remove", path(digest, compressed: true)) { () throws(SystemCallError) in
          do throws(SystemCallError) {
            try unlinkObject(digest, compressed: true)
          } catch  where error.errno == .noSuchFileOrDirectory {}
        }
        zst = nil
      }
    }
    guard let file = raw ?? zst else {
      if row != nil { report.dropped += 1 }
      // The row, and any pins and keys a crash left without it.
      if repair { try forget([digest], tx) }
      return report
    }
    let isCompressed = raw == nil
    if let row, row.isCompressed == isCompressed, row.storedBytes == file.size,
      isCompressed || row.size == file.size
    {
      return report
    }
    var size = file.size
    if isCompressed {
      if let content = contentSize(ofCompressed: digest) {
        size = content
      } else if let known = measured[digest], known.inode == file.inode,
        known.storedBytes == file.size
      {
        size = known.size
      } else {
        // A stream's frame does not record its length: it is measured by
        // decompressing it, outside this transaction, and done again.
        deferred.append(digest)
        return report
      }
    }
    let time = file.modificationTime.multipliedSaturated(by: 1_000_000_000)
    if row == nil { report.added += 1 } else { report.corrected += 1 }
    if repair {
      try tx.upsert(
        StoreEntry(
          digest: digest, size: size, allocatedBytes: file.contentBytes,
          created: row?.createdNanoseconds ?? time, lastAccess: row?.lastAccessNanoseconds ?? time,
          isCompressed: isCompressed, storedBytes: file.size))
    }
    return report
  }

  /// What a folder's listing and rows say of one digest.
  struct Known {
    var row: StoreEntry?
    /// The forms its listing holds (`true`: compressed).
    var forms: [Bool]
  }

  /// The length a compressed object's frame header records, if it does
  /// (a stream's frame does not). Nil when it cannot be read.
  func contentSize(ofCompressed digest: BlobDigest) -> Int64? {
    guard let fd = try? open(digest, compressed: true) else { return nil }
    defer { fd.close() }
    let header = UnsafeMutableRawBufferPointer.allocate(byteCount: 18, alignment: 8)
    defer { header.deallocate() }
    guard let n = try? fd.read(into: header, at: 0) else { return nil }
    return Zstd.contentSize(ofFrameStart: UnsafeRawBufferPointer(rebasing: header[..<n]))
  }

  /// A compressed object's length, measured by decompressing (and
  /// verifying) the file, and which file that was.
  struct Measured {
    var inode: UInt64
    var storedBytes: Int64
    var size: Int64
  }

  /// Measures the compressed objects of `digests` outside any transaction;
  /// unreadable or corrupt ones are left out (verify reports them).
  func measure(_ digests: [BlobDigest]) -> [BlobDigest: Measured] {
    var found: [BlobDigest: Measured] = [:]
    for digest in digests {
      guard let fd = try? open(digest, compressed: true), let status = try? fd.status() else {
        continue
      }
      defer { fd.close() }
      guard
        let size = try? decompressVerified(
          fd, digest: digest, objectPath: path(digest, compressed: true), destination: "<count>",
          sink: { _ in })
      else { continue }
      found[digest] = Measured(inode: status.inode, storedBytes: status.size, size: size)
    }
    return found
  }
}
