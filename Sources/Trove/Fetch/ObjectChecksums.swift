/// Publishers' checksums of stored objects: recorded when a fetch verified
/// them, computed from the object when first asked for.
extension Store {
  /// The checksums of `digest`'s bytes in `algorithms` (XXH3-128 is the
  /// digest itself): those recorded in the index, the others computed by
  /// reading the object once — verified against its digest as it passes —
  /// and recorded.
  ///
  /// - Throws: `.notFound`, `.corruptObject`, `.ioError`.
  func checksums(of digest: BlobDigest, _ algorithms: Set<ChecksumAlgorithm>) throws(TroveError)
    -> [ChecksumAlgorithm: Checksum]
  {
    var found: [ChecksumAlgorithm: Checksum] = [:]
    if algorithms.contains(.xxh128) { found[.xxh128] = Checksum(digest) }
    let recorded = try index().read("look up checksums of \(digest)") {
      (tx) throws(TroveError) in try tx.checksums(of: digest)
    }
    for checksum in recorded where algorithms.contains(checksum.algorithm) {
      found[checksum.algorithm] = checksum
    }
    let missing = algorithms.subtracting(found.keys)
    guard !missing.isEmpty else { return found }
    let hashers = missing.sorted { $0.rawValue < $1.rawValue }.map { SHA2Hasher($0) }
    _ = try hashBytes(of: digest, into: hashers)
    let computed = hashers.map { $0.finalize() }
    try objects.bind(key: nil, to: digest, checksums: computed)
    for checksum in computed { found[checksum.algorithm] = checksum }
    return found
  }

  /// Feeds `digest`'s bytes (decompressed when stored compressed) to
  /// `hashers`, in one read verified against the digest as it passes;
  /// returns how many there were. Nothing the index says is used.
  ///
  /// - Throws: `.notFound`, `.corruptObject` (the object is quarantined),
  ///   `.ioError`.
  func hashBytes(of digest: BlobDigest, into hashers: [SHA2Hasher]) throws(TroveError) -> Int64 {
    let (object, isCompressed) = try openObject(digest)
    defer { object.close() }
    object.adviseSequential()
    let path = objectFilePath(digest, compressed: isCompressed)
    do throws(TroveError) {
      if isCompressed {
        return try decompressVerified(
          object, digest: digest, objectPath: path, destination: "<hash>"
        ) { (chunk) throws(SystemCallError) in
          for hasher in hashers { hasher.update(chunk) }
        }
      }
      var xxh = XXH3Hasher()
      let size = try attempt("read", path) { () throws(SystemCallError) in
        try Transfer.read(from: object) { chunk in
          xxh.update(chunk)
          for hasher in hashers { hasher.update(chunk) }
        }
      }
      let actual = xxh.finalize()
      if actual != digest { throw corrupt(digest, actual: actual) }
      return size
    } catch {
      throw quarantining(error, digest, object: object, compressed: isCompressed)
    }
  }
}
