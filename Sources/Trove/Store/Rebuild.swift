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
        guard let digest = Digest(hex: Substring(file)), file.hasPrefix(fanout),
          let status = try? objectsDirectory.status(of: fanout + "/" + file), status.isRegular
        else { continue }
        let time = status.modificationTime * 1_000_000_000
        found.append(
          Entry(
            digest: digest, size: status.size, allocatedBytes: status.allocatedBytes,
            created: time, lastAccess: time))
      }
    }
    return try index().reconcile(with: found)
  }
}
