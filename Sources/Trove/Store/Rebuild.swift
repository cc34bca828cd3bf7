extension Store {
  /// Makes the index agree with the objects folder, which is the truth:
  /// adopts object files the index does not know (an interrupted put, a
  /// lost or deleted index) and drops rows whose file is gone. Runs by
  /// itself when a store is opened with a new index. O(objects).
  ///
  /// - Returns: how many rows were added and dropped.
  @discardableResult
  public func rebuildIndex() throws(TroveError) -> (added: Int, dropped: Int) {
    var found: [Entry] = []
    let names = try attempt("list", objectsPath) { () throws(SystemCallError) in
      try objectsDirectory.entries()
    }
    for fanout in names where fanout.utf8.count == 2 {
      let folder = objectsPath + "/" + fanout
      let files = try attempt("list", folder) { () throws(SystemCallError) -> [String] in
        let dir = try FileDescriptor.open(fanout, in: objectsDirectory, .directory)
        defer { dir.close() }
        return try dir.entries()
      }
      for file in files {
        let compressed = file.hasSuffix(StoreLayout.compressedSuffix)
        let hex = compressed ? String(file.dropLast(StoreLayout.compressedSuffix.count)) : file
        guard let digest = Digest(hex: Substring(hex)), hex == digest.hex, hex.hasPrefix(fanout),
          let status = try? objectsDirectory.status(of: fanout + "/" + file), status.isRegular
        else { continue }
        // A digest present in both forms (a crash mid-recompress) is
        // recorded once, as the raw file readers prefer.
        if compressed && (try? objectsDirectory.status(of: fanout + "/" + hex)) != nil { continue }
        var size = status.size
        if compressed {
          guard let content = logicalSize(ofCompressed: digest) else { continue }
          size = content
        }
        let time = status.modificationTime * 1_000_000_000
        found.append(
          Entry(
            digest: digest, size: size, allocatedBytes: status.allocatedBytes,
            created: time, lastAccess: time, isCompressed: compressed,
            storedBytes: status.size))
      }
    }
    return try index().reconcile(with: found)
  }

  /// The length of a compressed object's bytes: from its frame header,
  /// or — a stream's frame does not record it — by decompressing (and
  /// verifying) it. Nil when it cannot be read or is corrupt.
  func logicalSize(ofCompressed digest: Digest) -> Int64? {
    guard
      let fd = try? FileDescriptor.open(
        StoreLayout.objectPath(digest, compressed: true), in: objectsDirectory)
    else { return nil }
    defer { fd.close() }
    let header = UnsafeMutableRawBufferPointer.allocate(byteCount: 18, alignment: 8)
    defer { header.deallocate() }
    guard let n = try? fd.read(into: header, at: 0) else { return nil }
    if let size = Zstd.contentSize(ofFrameStart: UnsafeRawBufferPointer(rebasing: header[..<n])) {
      return size
    }
    return try? decompressVerified(fd, digest: digest, destination: "<count>") { _ in }
  }
}
