import Foundation

/// How a put brought bytes into the store.
public enum IngestMethod: String, Sendable, Codable {
  /// The source was cloned into `tmp/` (FICLONE), then the clone was hashed:
  /// no data was copied.
  case clone
  /// The source was read once, hashed and written.
  case copy
  /// Bytes arrived as a stream or from memory, hashed as they were written.
  case stream
  /// The file was hashed where it lies and the store already held those
  /// bytes: nothing was cloned or written.
  case existing
}

/// What a put did.
public struct PutResult: Sendable, Hashable, Codable {
  /// The digest of the bytes.
  public var digest: Digest
  /// Their length.
  public var size: Int64
  /// True when the store already held these bytes: nothing new was kept.
  public var isDuplicate: Bool
  /// How the bytes came in.
  public var method: IngestMethod
}

extension Store {
  /// Stores the contents of the file at `path`.
  ///
  /// On the store's own filesystem the file is first cloned into `tmp/`
  /// (FICLONE) and the clone is hashed — the bytes hashed are exactly the
  /// bytes stored, even if the source changes meanwhile, and no data is
  /// copied. Elsewhere it is read once: hashed and written in one pass.
  /// When an object of the file's size is already stored, the file is
  /// hashed first, and a re-put of known bytes writes nothing.
  /// Memory is bounded (one 1 MiB buffer) whatever the size.
  ///
  /// - Throws: `.sourceMissing`, `.sourceNotFile` (a directory),
  ///   `.permissionDenied`, `.noSpace`, `.ioError`; nothing is left in
  ///   the store when it throws.
  public func put(file path: String) throws(TroveError) -> PutResult {
    let source: FileDescriptor
    do throws(SystemCallError) {
      source = try FileDescriptor.open(path)
    } catch  where error.errno == .noSuchFileOrDirectory || error.errno == .notDirectory {
      throw TroveError(.sourceMissing, "cannot read '\(path)'", path: path, cause: error)
    } catch {
      throw TroveError.system(error, "read", path: path)
    }
    defer { source.close() }
    return try ingest(source, path: path)
  }

  /// Stores everything `handle` yields until its end (standard input, a
  /// pipe, a socket): one pass, bounded memory. A regular file (`< FILE`)
  /// is stored the way ``put(file:)`` stores it, from its current offset.
  public func put(reading handle: FileHandle) throws(TroveError) -> PutResult {
    try ingest(FileDescriptor(rawValue: handle.fileDescriptor), path: "<stream>")
  }

  /// Brings the bytes of `source`, from its current offset to its end, into
  /// the store by the cheapest exact way the filesystems allow.
  private func ingest(_ source: FileDescriptor, path: String) throws(TroveError) -> PutResult {
    let status = try attempt("read", path) { () throws(SystemCallError) in try source.status() }
    if status.isDirectory {
      throw TroveError(.sourceNotFile, "cannot put '\(path)': it is a directory", path: path)
    }
    let start =
      status.isRegular
      ? try attempt("read", path) { () throws(SystemCallError) in try source.offset() } : 0
    let isWholeFile = status.isRegular && start == 0
    if isWholeFile, status.size > 0, try index().hasObject(ofSize: status.size),
      let known = try existingObject(hashing: source, path: path)
    {
      return known
    }
    let writer = try makeWriter()
    if isWholeFile && status.device == device {
      var cloned = false
      do throws(SystemCallError) {
        try writer.file.cloneContents(from: source)
        cloned = true
      } catch  where error.errno.meansUnsupported {
        // This filesystem cannot clone (ext4, tmpfs): copy instead.
      } catch {
        writer.cancel()
        throw TroveError.system(error, "clone", path: path)
      }
      if cloned {
        try writer.absorbWritten()
        return try writer.commit(method: .clone)
      }
    }
    // One pass through user space: read, hash, write. (An in-kernel
    // copy_file_range and a re-read measured 7× slower on ext4 here.)
    source.adviseSequential()
    try writer.absorb(from: source, path: path)
    return try writer.commit(method: status.isRegular ? .copy : .stream)
  }

  /// Hashes `source` where it lies and, if the store already holds those
  /// bytes, counts a dedup hit: one read, nothing written. Otherwise rewinds
  /// `source` and returns nil. Taken only when an object of the file's size
  /// exists, so new content does not pay for a second read.
  private func existingObject(hashing source: FileDescriptor, path: String) throws(TroveError)
    -> PutResult?
  {
    source.adviseSequential()
    var hasher = XXH3Hasher()
    let size = try attempt("read", path) { () throws(SystemCallError) in
      try Transfer.hash(from: source, into: &hasher)
    }
    let digest = hasher.finalize()
    if try contains(digest) {
      try recordDuplicate(digest, size: size)
      return PutResult(digest: digest, size: size, isDuplicate: true, method: .existing)
    }
    try attempt("read", path) { () throws(SystemCallError) in try source.seek(to: 0) }
    return nil
  }

  /// Stores `bytes`.
  public func put(bytes: some ContiguousBytes) throws(TroveError) -> PutResult {
    let writer = try makeWriter()
    try writer.write(bytes)
    return try writer.commit(method: .stream)
  }

  /// A writer for bytes that arrive in pieces (a download body): write
  /// them, then ``BlobWriter/commit()``. Until then they are invisible.
  public func makeWriter() throws(TroveError) -> BlobWriter {
    try BlobWriter(store: self)
  }

  /// Publishes the synced-or-not temp file `name` as `digest`'s object
  /// without ever replacing one. Returns whether it was a duplicate.
  func publish(temporary name: String, file: FileDescriptor, digest: Digest, size: Int64)
    throws(TroveError) -> Bool
  {
    let relative = StoreLayout.objectPath(digest)
    let objectPath = objectFilePath(digest)
    let now = currentTimeNanoseconds()
    var entry = Entry(digest: digest, size: size, allocatedBytes: 0, created: now, lastAccess: now)
    func duplicate() throws(TroveError) -> Bool {
      try? tmpDirectory.removeFile(name)
      try recordDuplicate(digest, size: size)
      return true
    }
    // Known content: drop the copy before paying for a sync.
    if try contains(digest) { return try duplicate() }
    try attempt("store", objectPath) { () throws(SystemCallError) in
      try file.setPermissions(StoreLayout.objectPermissions)
      try file.sync()
      entry.allocatedBytes = try file.status().allocatedBytes
    }
    let fanout = StoreLayout.fanout(digest)
    do throws(SystemCallError) {
      do {
        try objectsDirectory.makeDirectory(fanout)
      } catch  where error.errno == .fileExists {}
      try tmpDirectory.renameWithoutReplacing(name, to: relative, in: objectsDirectory)
      // Make the new name durable; the data already is.
      let dir = try FileDescriptor.open(fanout, in: objectsDirectory, .directory)
      defer { dir.close() }
      try dir.sync()
    } catch  where error.errno == .fileExists {
      // Another writer published the same bytes first.
      return try duplicate()
    } catch {
      try? tmpDirectory.removeFile(name)
      throw TroveError.system(error, "store", path: objectPath)
    }
    try index().recordNew(entry)
    return false
  }
}

/// Bytes on their way into a store: written to a private temp file in
/// `tmp/` and hashed as they pass; published under their digest by
/// ``commit()``, or discarded by ``cancel()`` (or when the writer is
/// dropped without committing).
///
/// One writer belongs to one task at a time.
public final class BlobWriter {
  let store: Store
  let name: String
  let file: FileDescriptor
  private var hasher = XXH3Hasher()
  private var size: Int64 = 0
  private var isOpen = true

  init(store: Store) throws(TroveError) {
    let name = StoreLayout.temporaryName("put")
    file = try attempt("create temporary file in", store.tmpPath) { () throws(SystemCallError) in
      try FileDescriptor.open(
        name, in: store.tmpDirectory, [.readWrite, .create, .exclusive], permissions: 0o600)
    }
    self.store = store
    self.name = name
  }

  deinit { if isOpen { cancel() } }

  private var path: String { store.tmpPath + "/" + name }

  /// Appends `bytes`.
  public func write(_ bytes: UnsafeRawBufferPointer) throws(TroveError) {
    precondition(isOpen, "write after commit or cancel")
    hasher.update(bytes)
    do throws(SystemCallError) {
      try file.writeAll(bytes)
    } catch {
      cancel()
      throw TroveError.system(error, "write", path: path)
    }
    size += Int64(bytes.count)
  }

  /// Appends `bytes`.
  public func write(_ bytes: some ContiguousBytes) throws(TroveError) {
    var failure: TroveError?
    bytes.withUnsafeBytes { raw in
      do throws(TroveError) { try write(raw) } catch { failure = error }
    }
    if let failure { throw failure }
  }

  /// Reads `source` to its end into this writer.
  func absorb(from source: FileDescriptor, path sourcePath: String) throws(TroveError) {
    do throws(Transfer.PumpError) {
      size += try Transfer.pump(from: source, to: file, hasher: &hasher)
    } catch {
      cancel()
      switch error {
      case .reading(let e): throw TroveError.system(e, "read", path: sourcePath)
      case .writing(let e): throw TroveError.system(e, "write", path: path)
      }
    }
  }

  /// Hashes what the kernel put into the temp file (a clone or an
  /// in-kernel copy): the bytes hashed are the bytes that will be stored.
  func absorbWritten() throws(TroveError) {
    do throws(SystemCallError) {
      let reader = try FileDescriptor.open(name, in: store.tmpDirectory)
      defer { reader.close() }
      reader.adviseSequential()
      size = try Transfer.hash(from: reader, into: &hasher)
    } catch {
      cancel()
      throw TroveError.system(error, "read", path: path)
    }
  }

  /// Publishes the bytes written so far under their digest. If the store
  /// already holds them, the temp file is dropped and the result says
  /// `isDuplicate`.
  public func commit() throws(TroveError) -> PutResult {
    try commit(method: .stream)
  }

  func commit(method: IngestMethod) throws(TroveError) -> PutResult {
    precondition(isOpen, "commit after commit or cancel")
    isOpen = false
    defer { file.close() }
    let digest = hasher.finalize()
    let duplicate: Bool
    do throws(TroveError) {
      duplicate = try store.publish(temporary: name, file: file, digest: digest, size: size)
    } catch {
      try? store.tmpDirectory.removeFile(name)
      throw error
    }
    return PutResult(digest: digest, size: size, isDuplicate: duplicate, method: method)
  }

  /// Discards what was written. Safe to call more than once.
  public func cancel() {
    guard isOpen else { return }
    isOpen = false
    file.close()
    try? store.tmpDirectory.removeFile(name)
  }
}
