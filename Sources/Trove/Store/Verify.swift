/// What ``Store/verify(repair:)`` found, and what it fixed.
public struct VerifyReport: Sendable, Hashable, Codable {
  /// Objects whose bytes were hashed.
  public var checkedObjects: Int
  /// Their bytes.
  public var checkedBytes: Int64
  /// Objects whose bytes do not hash to their name (removed by a repair).
  public var corrupt: [Digest]
  /// Object files the index did not know (adopted by a repair).
  public var orphanFiles: Int
  /// Index rows whose file is missing (dropped by a repair).
  public var danglingRows: Int
  /// Files under `objects/` that are not named like objects (left alone).
  public var unexpectedFiles: [String]
  /// Whether the problems found were repaired.
  public var repaired: Bool
  /// How long it took, in seconds.
  public var seconds: Double

  /// Whether the store holds exactly what its names and index say.
  public var isClean: Bool { corrupt.isEmpty && orphanFiles == 0 && danglingRows == 0 }
}

extension Store {
  /// Checks every object against its name by hashing all its bytes, and
  /// the index against the objects folder. With `repair`, removes corrupt
  /// objects (and their rows), adopts orphan files and drops rows whose
  /// file is gone. O(stored bytes): it reads everything.
  public func verify(repair: Bool = false) throws(TroveError) -> VerifyReport {
    let clock = ContinuousClock()
    let start = clock.now
    var report = VerifyReport(
      checkedObjects: 0, checkedBytes: 0, corrupt: [], orphanFiles: 0, danglingRows: 0,
      unexpectedFiles: [], repaired: repair, seconds: 0)
    var onDisk = Set<Digest>()
    let fanouts = try attempt("list", objectsPath) { () throws(SystemCallError) in
      try objectsDirectory.entries()
    }
    for fanout in fanouts.sorted() {
      let folder = objectsPath + "/" + fanout
      guard fanout.utf8.count == 2, (try? objectsDirectory.status(of: fanout))?.isDirectory == true
      else {
        report.unexpectedFiles.append(folder)
        continue
      }
      let names = try attempt("list", folder) { () throws(SystemCallError) -> [String] in
        let dir = try FileDescriptor.open(fanout, in: objectsDirectory, .directory)
        defer { dir.close() }
        return try dir.entries()
      }
      for name in names.sorted() {
        let compressed = name.hasSuffix(StoreLayout.compressedSuffix)
        let hex = compressed ? String(name.dropLast(StoreLayout.compressedSuffix.count)) : name
        guard let digest = Digest(hex: Substring(hex)), hex.hasPrefix(fanout), hex == digest.hex
        else {
          report.unexpectedFiles.append(folder + "/" + name)
          continue
        }
        let path = objectFilePath(digest, compressed: compressed)
        let fd = try attempt("read", path) { () throws(SystemCallError) in
          try FileDescriptor.open(
            StoreLayout.objectPath(digest, compressed: compressed), in: objectsDirectory)
        }
        defer { fd.close() }
        fd.adviseSequential()
        var intact = true
        if compressed {
          do throws(TroveError) {
            report.checkedBytes += try decompressVerified(
              fd, to: nil, digest: digest, destination: path)
          } catch  where error.code == .corruptObject {
            intact = false
          }
        } else {
          var hasher = XXH3Hasher()
          report.checkedBytes += try attempt("read", path) { () throws(SystemCallError) in
            try Transfer.hash(from: fd, into: &hasher)
          }
          intact = hasher.finalize() == digest
        }
        report.checkedObjects += 1
        if intact {
          onDisk.insert(digest)
        } else {
          report.corrupt.append(digest)
          if repair {
            // Only the damaged form goes; a good twin in the other form stays.
            try attempt("remove", path) { () throws(SystemCallError) in
              try objectsDirectory.removeFile(
                StoreLayout.objectPath(digest, compressed: compressed))
            }
          }
        }
      }
    }
    let rows = Set(try index().entries().map(\.digest))
    let corrupt = Set(report.corrupt).subtracting(onDisk)
    report.orphanFiles = onDisk.subtracting(rows).count
    report.danglingRows = rows.subtracting(onDisk).subtracting(corrupt).count
    if repair {
      for digest in corrupt { _ = try index().remove(digest) }
      if report.orphanFiles > 0 || report.danglingRows > 0 || !report.corrupt.isEmpty {
        _ = try rebuildIndex()
      }
    }
    report.seconds = (clock.now - start).seconds
    return report
  }
}
