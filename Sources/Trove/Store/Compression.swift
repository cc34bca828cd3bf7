/// The mechanism of compressed objects: writing a zstd frame into `tmp/` (a
/// staging folder),
/// reading one back verified, and staging an object in the other form for
/// ``ObjectTable/replaceForm(of:with:)``. Whether to compress is decided in
/// Policy/CompressionPolicy.swift.
extension Store {
  /// Compresses `source` (read from offset 0, `size` bytes) into a new temp
  /// file in `tmp/`; returns its name, descriptor (open, not yet synced),
  /// length, and the evictions a full disk on the way caused (it is met as
  /// a raw put meets it: ``PressuredWrites``). Nothing is left in `tmp/`
  /// when it throws.
  func compressToTemporary(
    _ source: FileDescriptor, size: Int64, level: Int32, workers: Int32, path: String,
    priority: PutPriority = .important, rewind: Bool = true,
    tap: (UnsafeRawBufferPointer) -> Void = { _ in }
  ) throws(TroveError) -> (
    name: String, file: FileDescriptor, storedBytes: Int64, reliefs: [SweepReport]
  ) {
    let (file, name) = try attempt("create temporary file in", tmpPath) {
      () throws(SystemCallError) in try objects.createStagingFile("zst")
    }
    let tempPath = tmpPath + "/" + name
    do throws(TroveError) {
      if rewind {
        try attempt("read", path) { () throws(SystemCallError) in try source.seek(to: 0) }
      }
      var writes = PressuredWrites(store: self, priority: priority)
      do throws(Zstd.StreamError) {
        // The frame still to come is taken as at most the input still to
        // come, plus a block: room enough if the disk fills on the way.
        let stored = try Zstd.compress(
          from: source, size: size, level: level, workers: workers, tap: tap
        ) { (bytes, inputLeft) throws(SystemCallError) in
          try writes.writeAll(bytes, to: file, remaining: Int64(bytes.count) + inputLeft)
        }
        return (name, file, stored, writes.reliefs)
      } catch {
        switch error {
        case .reading(let e): throw TroveError.system(e, "read", path: path)
        case .writing(let e): throw TroveError.system(e, "write", path: tempPath)
        case .codec(let e):
          throw TroveError(.ioError, "cannot compress '\(path)': \(e)", path: path)
        }
      }
    } catch {
      file.close()
      try? tmpDirectory.removeFile(name)
      throw error
    }
  }

  /// Rewrites `digest`'s object in the other form — compressed at
  /// `level` (with `workers`), or raw when `compressed` is false. The new
  /// file is written and checked against the digest in `tmp/`, then
  /// ``ObjectTable/replaceForm(of:with:)`` swaps it in: crash-safe (a crash
  /// leaves both forms, which reconciling tidies) and abandoned if the
  /// object is evicted meanwhile. Returns the entry as now stored, or nil
  /// if it already was in that form or went away.
  @discardableResult
  func convert(_ digest: BlobDigest, compressed: Bool, level: Int32 = 3, workers: Int32 = 0)
    throws(TroveError) -> StoreEntry?
  {
    guard let (source, isCompressed) = try objects.open(digest, confirmingMiss: true) else {
      throw objects.notFound(digest)
    }
    defer { source.close() }
    guard isCompressed != compressed else { return nil }
    let oldPath = objects.path(digest, compressed: isCompressed)
    let current = StoredObject(
      status: try attempt("read", oldPath) { () throws(SystemCallError) in try source.status() },
      isCompressed: isCompressed)
    var staged: StagedObject
    if compressed {
      var hasher = XXH3Hasher()
      let size = current.status.size
      let temp = try compressToTemporary(
        source, size: size, level: level, workers: workers, path: oldPath
      ) { hasher.update($0) }
      staged = StagedObject(
        name: temp.name, file: temp.file, digest: digest, size: size, isCompressed: true,
        storedBytes: temp.storedBytes)
      let actual = hasher.finalize()
      guard actual == digest else {
        temp.file.close()
        try? tmpDirectory.removeFile(temp.name)
        throw corrupt(digest, actual: actual)
      }
    } else {
      let (file, name) = try attempt("create temporary file in", tmpPath) {
        () throws(SystemCallError) in try objects.createStagingFile("raw")
      }
      do throws(TroveError) {
        let size = try decompressVerified(
          source, to: file, digest: digest, objectPath: oldPath, destination: tmpPath)
        staged = StagedObject(
          name: name, file: file, digest: digest, size: size, isCompressed: false,
          storedBytes: size)
      } catch {
        file.close()
        try? tmpDirectory.removeFile(name)
        throw error
      }
    }
    defer { staged.file.close() }
    return try objects.replaceForm(of: current, with: staged)
  }
}

/// Decompresses the object in `object` into `out` (when given), hashing
/// the bytes; a damaged frame, a checksum failure or a digest mismatch is
/// `.corruptObject` naming `objectPath`. Returns the decompressed length.
func decompressVerified(
  _ object: FileDescriptor, to out: FileDescriptor?, digest: BlobDigest, objectPath: String,
  destination: String
) throws(TroveError) -> Int64 {
  try decompressVerified(object, digest: digest, objectPath: objectPath, destination: destination) {
    (chunk) throws(SystemCallError) in try out?.writeAll(chunk)
  }
}

/// Decompresses the object in `object`, handing each chunk to `sink`;
/// verified as `decompressVerified(_:to:digest:objectPath:destination:)` is.
func decompressVerified(
  _ object: FileDescriptor, digest: BlobDigest, objectPath: String, destination: String,
  sink: (UnsafeRawBufferPointer) throws(SystemCallError) -> Void
) throws(TroveError) -> Int64 {
  var hasher = XXH3Hasher()
  var count: Int64 = 0
  do throws(Zstd.StreamError) {
    try Zstd.decompress(from: object) { (chunk) throws(Zstd.StreamError) in
      hasher.update(chunk)
      count += Int64(chunk.count)
      do throws(SystemCallError) { try sink(chunk) } catch { throw .writing(error) }
    }
  } catch {
    switch error {
    case .reading(let e): throw TroveError.system(e, "read", path: objectPath)
    case .writing(let e): throw TroveError.system(e, "write", path: destination)
    case .codec(let e):
      throw TroveError(
        .corruptObject,
        "object '\(objectPath)' is corrupt: \(e)",
        path: objectPath, value: digest.description, remedy: .removeAndStoreAgain)
    }
  }
  let actual = hasher.finalize()
  guard actual == digest else {
    throw TroveError(
      .corruptObject,
      "object '\(objectPath)' is corrupt: its bytes hash to \(actual), not \(digest)",
      path: objectPath, value: digest.description, remedy: .removeAndStoreAgain)
  }
  return count
}
