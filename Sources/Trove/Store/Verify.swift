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
        guard let digest = Digest(hex: Substring(name)), name.hasPrefix(fanout), name == digest.hex
        else {
          report.unexpectedFiles.append(folder + "/" + name)
          continue
        }
        let path = objectFilePath(digest)
        var hasher = XXH3Hasher()
        let size = try attempt("read", path) { () throws(SystemCallError) -> Int64 in
          let fd = try FileDescriptor.open(StoreLayout.objectPath(digest), in: objectsDirectory)
          defer { fd.close() }
          fd.adviseSequential()
          return try Transfer.hash(from: fd, into: &hasher)
        }
        report.checkedObjects += 1
        report.checkedBytes += size
        if hasher.finalize() == digest {
          onDisk.insert(digest)
        } else {
          report.corrupt.append(digest)
          if repair { _ = try remove(digest) }
        }
      }
    }
    let rows = Set(try index().entries().map(\.digest))
    let corrupt = Set(report.corrupt)
    report.orphanFiles = onDisk.subtracting(rows).count
    report.danglingRows = rows.subtracting(onDisk).subtracting(corrupt).count
    if repair && (report.orphanFiles > 0 || report.danglingRows > 0) {
      _ = try rebuildIndex()
    }
    let elapsed = clock.now - start
    report.seconds =
      Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return report
  }
}
