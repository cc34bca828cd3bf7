/// The mechanism of compressed objects: writing a zstd frame beside a raw
/// temp file, reading one back verified, and rewriting an object from one
/// form to the other. Whether to compress is decided in
/// Policy/CompressionPolicy.swift.
extension Store {
  /// Compresses `source` (read from offset 0, `size` bytes) into a new temp
  /// file in `tmp/`; returns its name, descriptor (open, not yet synced) and
  /// length. A full disk on the way is met as a raw put meets it
  /// (``PressuredWrites``). Nothing is left in `tmp/` when it throws.
  func compressToTemporary(
    _ source: FileDescriptor, size: Int64, level: Int32, workers: Int32, path: String,
    rewind: Bool = true, tap: (UnsafeRawBufferPointer) -> Void = { _ in }
  ) throws(TroveError) -> (name: String, file: FileDescriptor, storedBytes: Int64) {
    let name = StoreLayout.temporaryName("zst")
    let tempPath = tmpPath + "/" + name
    let file = try attempt("create temporary file in", tmpPath) { () throws(SystemCallError) in
      try FileDescriptor.open(
        name, in: tmpDirectory, [.readWrite, .create, .exclusive], permissions: 0o600)
    }
    do throws(TroveError) {
      if rewind {
        try attempt("read", path) { () throws(SystemCallError) in try source.seek(to: 0) }
      }
      var writes = PressuredWrites(store: self)
      do throws(Zstd.StreamError) {
        // The frame still to come is taken as at most the input still to
        // come, plus a block: room enough if the disk fills on the way.
        let stored = try Zstd.compress(
          from: source, size: size, level: level, workers: workers, tap: tap
        ) { (bytes, inputLeft) throws(SystemCallError) in
          try writes.writeAll(bytes, to: file, remaining: Int64(bytes.count) + inputLeft)
        }
        return (name, file, stored)
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

  /// Decompresses the object in `object` into `out` (when given), hashing
  /// the bytes; a damaged frame, a checksum failure or a digest mismatch is
  /// `.corruptObject`. Returns the decompressed length.
  func decompressVerified(
    _ object: FileDescriptor, to out: FileDescriptor?, digest: Digest, destination: String
  ) throws(TroveError) -> Int64 {
    try decompressVerified(object, digest: digest, destination: destination) {
      (chunk) throws(SystemCallError) in try out?.writeAll(chunk)
    }
  }

  /// Decompresses the object in `object`, handing each chunk to `sink`;
  /// verified as `decompressVerified(_:to:digest:destination:)` is.
  func decompressVerified(
    _ object: FileDescriptor, digest: Digest, destination: String,
    sink: (UnsafeRawBufferPointer) throws(SystemCallError) -> Void
  ) throws(TroveError) -> Int64 {
    var hasher = XXH3Hasher()
    var count: Int64 = 0
    let objectPath = objectFilePath(digest, compressed: true)
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
          "object '\(objectPath)' is corrupt: \(e); remove it and store it again",
          path: objectPath, value: digest.description)
      }
    }
    let actual = hasher.finalize()
    guard actual == digest else {
      throw TroveError(
        .corruptObject,
        "object '\(objectPath)' is corrupt: its bytes hash to \(actual), not \(digest); remove it and store it again",
        path: objectPath, value: digest.description)
    }
    return count
  }

  /// Rewrites `digest`'s object in the other form — compressed at
  /// `level` (with `workers`), or raw when `compressed` is false — crash-safe:
  /// the new file is written, synced and published beside the old one, the
  /// index is updated, and only then is the old file removed. A crash leaves
  /// both forms (same bytes), which the next recompress tidies. Returns the
  /// entry as now stored, or nil if it already was in that form.
  @discardableResult
  func restore(_ digest: Digest, compressed: Bool, level: Int32 = 3, workers: Int32 = 0)
    throws(TroveError) -> Entry?
  {
    guard let current = try storedObject(digest) else { throw notFound(digest) }
    guard current.isCompressed != compressed else { return nil }
    let oldPath = objectFilePath(digest, compressed: current.isCompressed)
    let source = try attempt("read", oldPath) { () throws(SystemCallError) in
      try FileDescriptor.open(
        StoreLayout.objectPath(digest, compressed: current.isCompressed), in: objectsDirectory)
    }
    defer { source.close() }
    let temp: (name: String, file: FileDescriptor, storedBytes: Int64)
    var size = current.status.size
    if compressed {
      temp = try compressToTemporary(
        source, size: size, level: level, workers: workers, path: oldPath)
    } else {
      let name = StoreLayout.temporaryName("raw")
      let file = try attempt("create temporary file in", tmpPath) {
        () throws(SystemCallError) in
        try FileDescriptor.open(
          name, in: tmpDirectory, [.readWrite, .create, .exclusive], permissions: 0o600)
      }
      do throws(TroveError) {
        size = try decompressVerified(source, to: file, digest: digest, destination: tmpPath)
      } catch {
        file.close()
        try? tmpDirectory.removeFile(name)
        throw error
      }
      temp = (name, file, size)
    }
    defer { temp.file.close() }
    let newRelative = StoreLayout.objectPath(digest, compressed: compressed)
    let newPath = objectFilePath(digest, compressed: compressed)
    let allocated = try attempt("store", newPath) { () throws(SystemCallError) -> Int64 in
      do throws(SystemCallError) {
        try temp.file.setPermissions(StoreLayout.objectPermissions)
        try temp.file.sync()
        try tmpDirectory.renameWithoutReplacing(temp.name, to: newRelative, in: objectsDirectory)
      } catch {
        try? tmpDirectory.removeFile(temp.name)
        if error.errno != .fileExists { throw error }
      }
      let dir = try FileDescriptor.open(
        StoreLayout.fanout(digest), in: objectsDirectory, .directory)
      defer { dir.close() }
      try dir.sync()
      return try objectsDirectory.status(of: newRelative).allocatedBytes
    }
    let now = currentTimeNanoseconds()
    let entry = Entry(
      digest: digest, size: size, allocatedBytes: allocated, created: now, lastAccess: now,
      isCompressed: compressed, storedBytes: temp.storedBytes)
    try index().recordStorage(entry)
    try attempt("remove", oldPath) { () throws(SystemCallError) in
      do throws(SystemCallError) {
        try objectsDirectory.removeFile(
          StoreLayout.objectPath(digest, compressed: current.isCompressed))
      } catch  where error.errno == .noSuchFileOrDirectory {}
    }
    return entry
  }
}
