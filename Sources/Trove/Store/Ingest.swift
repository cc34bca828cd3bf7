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
  public func put(file path: String, priority: PutPriority = .important) throws(TroveError)
    -> PutResult
  {
    let source: FileDescriptor
    do throws(SystemCallError) {
      source = try FileDescriptor.open(path)
    } catch  where error.errno == .noSuchFileOrDirectory || error.errno == .notDirectory {
      throw TroveError(.sourceMissing, "cannot read '\(path)'", path: path, cause: error)
    } catch {
      throw TroveError.system(error, "read", path: path)
    }
    defer { source.close() }
    return try ingest(source, path: path, priority: priority)
  }

  /// Stores everything `handle` yields until its end (standard input, a
  /// pipe, a socket): one pass, bounded memory. A regular file (`< FILE`)
  /// is stored the way ``put(file:priority:)`` stores it, from its current offset.
  public func put(reading handle: FileHandle, priority: PutPriority = .important)
    throws(TroveError) -> PutResult
  {
    try ingest(
      FileDescriptor(rawValue: handle.fileDescriptor), path: "<stream>", priority: priority)
  }

  /// Brings the bytes of `source`, from its current offset to its end, into
  /// the store by the cheapest exact way the filesystems allow.
  private func ingest(_ source: FileDescriptor, path: String, priority: PutPriority)
    throws(TroveError) -> PutResult
  {
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
    let size = status.isRegular ? status.size - start : nil
    if let size,
      case .zstd(let level, let workers, let ratio) = try compressionPlan(
        source, size, start)
    {
      // Compressed anyway: read once, hashing and compressing; no clone.
      // Room for the frame the sample predicts, not for the raw bytes.
      try admit(
        size: CachePolicy.expectedStoredSize(size, sampleRatio: ratio), priority: priority)
      source.adviseSequential()
      return try ingestCompressed(
        source, size: size, level: level, workers: workers, path: path)
    }
    let canClone = isWholeFile && status.device == device
    // A clone takes no data blocks; a copy takes `size`.
    try admit(size: canClone ? 0 : size, priority: priority)
    // A file's form was settled above (raw); a stream's is settled by the
    // writer from its first bytes.
    let writer = try BlobWriter(store: self, expectedSize: size, mayCompress: !status.isRegular)
    if canClone {
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
    if canClone { try admit(size: size, priority: priority) }
    // One pass through user space: read, hash, write. (An in-kernel
    // copy_file_range and a re-read measured 7× slower on ext4 here.)
    source.adviseSequential()
    if status.isFIFO {
      // A 1 MiB pipe instead of 64 KiB: 16× fewer sleeps and wake-ups
      // between the writer and us (`cat | trove put -` and zstd spent half
      // their kernel time there). Best effort: the limit may be lower.
      _ = try? source.setPipeBuffer(Int32(Transfer.bufferSize))
    }
    try writer.absorb(from: source, path: path)
    return try writer.commit(method: status.isRegular ? .copy : .stream)
  }

  /// The policy's decision for a regular file of `size` bytes from
  /// `start`, judged from a sample read without moving the file offset.
  private func compressionPlan(_ source: FileDescriptor, _ size: Int64, _ start: Int64)
    throws(TroveError) -> StorageDecision
  {
    let policy = try currentSettings().policy
    let sample = UnsafeMutableRawBufferPointer.allocate(
      byteCount: CachePolicy.sampleSize, alignment: 4096)
    defer { sample.deallocate() }
    return policy.storage(size: size) {
      guard let n = try? source.read(into: sample, at: start) else { return nil }
      return UnsafeRawBufferPointer(rebasing: sample[..<n])
    }
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
    if try objectStatus(digest) != nil {
      try recordDuplicate(digest, size: size)
      return PutResult(digest: digest, size: size, isDuplicate: true, method: .existing)
    }
    try attempt("read", path) { () throws(SystemCallError) in try source.seek(to: 0) }
    return nil
  }

  /// Stores `bytes`.
  public func put(bytes: some ContiguousBytes, priority: PutPriority = .important)
    throws(TroveError) -> PutResult
  {
    let count = bytes.withUnsafeBytes { Int64($0.count) }
    try admit(size: count, priority: priority)
    let writer = try BlobWriter(
      store: self, expectedSize: count, sizeIsExact: true, mayCompress: true)
    try writer.write(bytes)
    return try writer.commit(method: .stream)
  }

  /// A writer for bytes that arrive in pieces (a download body): write
  /// them, then ``BlobWriter/commit()``. Until then they are invisible.
  ///
  /// Give `expectedSize` when it is known (a Content-Length): room is made
  /// for it before the first byte, and a full disk is met by freeing that
  /// much. An `.opportunistic` writer is refused (`.lowOnSpace`) when the
  /// volume is below the policy's minimum free space.
  public func makeWriter(expectedSize: Int64? = nil, priority: PutPriority = .important)
    throws(TroveError) -> BlobWriter
  {
    try admit(size: expectedSize, priority: priority)
    return try BlobWriter(store: self, expectedSize: expectedSize, mayCompress: true)
  }

  /// Publishes the synced-or-not temp file `name` as `digest`'s object
  /// without ever replacing one. Returns whether it was a duplicate.
  func publish(temporary rawName: String, file rawFile: FileDescriptor, digest: Digest, size: Int64)
    throws(TroveError) -> Bool
  {
    let now = currentTimeNanoseconds()
    func duplicate() throws(TroveError) -> Bool {
      try? tmpDirectory.removeFile(rawName)
      try recordDuplicate(digest, size: size)
      return true
    }
    // Known content: drop the copy before paying for a sync.
    if try storedObject(digest) != nil { return try duplicate() }

    // The policy decides the form; the raw temp file is the input either way.
    let policy = try currentSettings().policy
    let sample = UnsafeMutableRawBufferPointer.allocate(
      byteCount: CachePolicy.sampleSize, alignment: 4096)
    defer { sample.deallocate() }
    let decision = policy.storage(size: size) {
      guard let n = try? rawFile.read(into: sample, at: 0) else { return nil }
      return UnsafeRawBufferPointer(rebasing: sample[..<n])
    }
    var entry = Entry(digest: digest, size: size, allocatedBytes: 0, created: now, lastAccess: now)
    switch decision {
    case .raw(let skip):
      return try install(temporary: rawName, file: rawFile, as: entry, skipped: skip)
    case .zstd(let level, let workers, _):
      let temp = try compressToTemporary(
        rawFile, size: size, level: level, workers: workers, path: tmpPath + "/" + rawName)
      defer { temp.file.close() }
      try? tmpDirectory.removeFile(rawName)
      entry.isCompressed = true
      entry.storedBytes = temp.storedBytes
      return try install(temporary: temp.name, file: temp.file, as: entry, skipped: nil)
    }
  }

  /// Publishes the finished temp file `name` as `entry`'s object (raw or
  /// compressed, as `entry` says) without ever replacing one: syncs it,
  /// renames it into `objects/`, syncs the folder, records the row.
  /// Returns whether another writer had published the bytes first.
  func install(
    temporary name: String, file: FileDescriptor, as entry: Entry, skipped: CompressionSkip?
  ) throws(TroveError) -> Bool {
    var entry = entry
    let digest = entry.digest
    func duplicate() throws(TroveError) -> Bool {
      try? tmpDirectory.removeFile(name)
      try recordDuplicate(digest, size: entry.size)
      return true
    }
    let relative = StoreLayout.objectPath(digest, compressed: entry.isCompressed)
    let objectPath = objectFilePath(digest, compressed: entry.isCompressed)
    do throws(SystemCallError) {
      try file.setPermissions(StoreLayout.objectPermissions)
      try file.sync()
      entry.allocatedBytes = try file.status().allocatedBytes
    } catch {
      try? tmpDirectory.removeFile(name)
      throw TroveError.system(error, "store", path: objectPath)
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
    try index().recordNew(entry, skipped: skipped)
    return false
  }

  /// Stores `size` bytes of the regular file `source` (from its current
  /// offset) as a zstd frame in one pass: each block read is hashed and
  /// compressed, so no raw copy is written.
  func ingestCompressed(
    _ source: FileDescriptor, size: Int64, level: Int32, workers: Int32, path: String
  ) throws(TroveError) -> PutResult {
    var hasher = XXH3Hasher()
    let temp = try compressToTemporary(
      source, size: size, level: level, workers: workers, path: path, rewind: false
    ) { hasher.update($0) }
    defer { temp.file.close() }
    let digest = hasher.finalize()
    let duplicate = try publishCompressed(
      temporary: temp.name, file: temp.file, digest: digest, size: size,
      storedBytes: temp.storedBytes)
    // The bytes are stored; a failing auto-sweep must not fail the put.
    if !duplicate { try? sweepIfOverBudget(protecting: digest) }
    return PutResult(digest: digest, size: size, isDuplicate: duplicate, method: .copy)
  }

  /// Publishes the finished zstd frame in the temp file `name` (of
  /// `storedBytes`, holding `size` bytes hashing to `digest`), or counts a
  /// dedup hit and drops it when the store already holds those bytes.
  /// Returns whether it was a duplicate.
  func publishCompressed(
    temporary name: String, file: FileDescriptor, digest: Digest, size: Int64,
    storedBytes: Int64
  ) throws(TroveError) -> Bool {
    if try storedObject(digest) != nil {
      try? tmpDirectory.removeFile(name)
      try recordDuplicate(digest, size: size)
      return true
    }
    let now = currentTimeNanoseconds()
    let entry = Entry(
      digest: digest, size: size, allocatedBytes: 0, created: now, lastAccess: now,
      isCompressed: true, storedBytes: storedBytes)
    return try install(temporary: name, file: file, as: entry, skipped: nil)
  }
}

/// Bytes on their way into a store: written to a private temp file in
/// `tmp/` and hashed as they pass; published under their digest by
/// ``commit()``, or discarded by ``cancel()`` (or when the writer is
/// dropped without committing).
///
/// One writer belongs to one task at a time.
///
/// With compression on, the first 256 KiB are held back and sampled: bytes
/// that compress go into a zstd frame as they arrive (one pass, no raw
/// copy); others are written raw. A stream of unknown length gets a frame
/// without a content size, as `zstd` gives a pipe.
///
/// A full filesystem (ENOSPC, EDQUOT) while writing is met once by evicting
/// least recently used entries — enough for the expected size when it is
/// known, all that can go when it is not — and retrying the failed write
/// from where it stopped; bytes already written are kept. If it fails
/// again, the writer is discarded and the error says so.
public final class BlobWriter {
  let store: Store
  let name: String
  let file: FileDescriptor
  /// The total the caller expects, if known (a file's size, Content-Length).
  let expectedSize: Int64?
  /// Whether `expectedSize` is certain (bytes in memory), so a frame may
  /// record it as its content size.
  private let sizeIsExact: Bool
  private var hasher = XXH3Hasher()
  /// Bytes written by the caller.
  private var size: Int64 = 0
  /// Of those, how many went on to the temp file (raw or into the frame).
  private var passedOn: Int64 = 0
  private var isOpen = true
  private var writes: PressuredWrites
  /// The first bytes, held back until there are enough to judge them;
  /// nil once the form is settled (or when compression is off).
  private var sample: UnsafeMutableRawBufferPointer?
  private var sampled = 0
  /// The frame being written, once the sample said to compress.
  private var compressor: Zstd.Compressor?
  private var storedBytes: Int64 = 0

  init(store: Store, expectedSize: Int64?, sizeIsExact: Bool = false, mayCompress: Bool = false)
    throws(TroveError)
  {
    let name = StoreLayout.temporaryName("put")
    file = try attempt("create temporary file in", store.tmpPath) { () throws(SystemCallError) in
      try FileDescriptor.open(
        name, in: store.tmpDirectory, [.readWrite, .create, .exclusive], permissions: 0o600)
    }
    self.store = store
    self.name = name
    self.expectedSize = expectedSize
    self.sizeIsExact = sizeIsExact && expectedSize != nil
    writes = PressuredWrites(store: store)
    if mayCompress, let policy = try? store.currentSettings().policy, policy.compression != .none {
      sample = UnsafeMutableRawBufferPointer.allocate(
        byteCount: CachePolicy.sampleSize, alignment: 4096)
    }
  }

  deinit {
    if isOpen { cancel() }
    sample?.deallocate()
  }

  private var path: String { store.tmpPath + "/" + name }

  /// Appends `bytes`.
  public func write(_ bytes: UnsafeRawBufferPointer) throws(TroveError) {
    precondition(isOpen, "write after commit or cancel")
    hasher.update(bytes)
    size += Int64(bytes.count)
    do throws(TroveError) {
      var rest = bytes
      if let held = sample {
        let n = min(rest.count, held.count - sampled)
        if n > 0 {
          UnsafeMutableRawBufferPointer(rebasing: held[sampled..<(sampled + n)])
            .copyMemory(from: UnsafeRawBufferPointer(rebasing: rest[..<n]))
        }
        sampled += n
        rest = UnsafeRawBufferPointer(rebasing: rest[n...])
        if sampled < held.count { return }
        try settle(compressing: true)
      }
      try passOn(rest, end: false)
    } catch {
      cancel()
      throw error
    }
  }

  /// Appends `bytes`.
  public func write(_ bytes: some ContiguousBytes) throws(TroveError) {
    var failure: TroveError?
    bytes.withUnsafeBytes { raw in
      do throws(TroveError) { try write(raw) } catch { failure = error }
    }
    if let failure { throw failure }
  }

  /// Decides the form from the held-back sample — compressed when the
  /// policy says so and `compressing` allows — and passes the sample on.
  private func settle(compressing: Bool) throws(TroveError) {
    guard let held = sample else { return }
    sample = nil
    defer { held.deallocate() }
    let bytes = UnsafeRawBufferPointer(rebasing: held[..<sampled])
    let policy = try store.currentSettings().policy
    // Unknown length: judged on what is known; a stream too short for the
    // policy's minimum is written raw and judged again when it ends.
    let decision = policy.storage(size: expectedSize ?? Int64(sampled)) { bytes }
    if compressing, case .zstd(let level, let workers, _) = decision {
      do throws(Zstd.StreamError) {
        compressor = try Zstd.Compressor(
          level: level, workers: workers, pledgedSize: sizeIsExact ? expectedSize : nil)
      } catch {
        throw streamError(error)
      }
    }
    try passOn(bytes, end: false)
  }

  /// Writes `bytes` to the temp file, raw or into the frame; `end`
  /// finishes the frame.
  private func passOn(_ bytes: UnsafeRawBufferPointer, end: Bool) throws(TroveError) {
    // What is still to come, as far as the caller told: room to make if
    // the disk fills. (A frame takes no more than its input, roughly.)
    let remaining = expectedSize.map { max(0, $0 - passedOn) }
    if let compressor {
      do throws(Zstd.StreamError) {
        storedBytes += try compressor.compress(bytes, end: end) {
          (frame) throws(SystemCallError) in
          try writes.writeAll(frame, to: file, remaining: remaining.map { $0 + Int64(frame.count) })
        }
      } catch {
        throw streamError(error)
      }
    } else if !bytes.isEmpty {
      do throws(SystemCallError) {
        try writes.writeAll(bytes, to: file, remaining: remaining)
      } catch {
        throw TroveError.system(error, "write", path: path)
      }
    }
    passedOn += Int64(bytes.count)
  }

  private func streamError(_ error: Zstd.StreamError) -> TroveError {
    switch error {
    case .reading(let e), .writing(let e): return TroveError.system(e, "write", path: path)
    case .codec(let e):
      return TroveError(.ioError, "cannot compress into '\(path)': \(e)", path: path)
    }
  }

  /// Reads `source` to its end into this writer: one 1 MiB buffer.
  func absorb(from source: FileDescriptor, path sourcePath: String) throws(TroveError) {
    let buffer = UnsafeMutableRawBufferPointer.allocate(
      byteCount: Transfer.bufferSize, alignment: 4096)
    defer { buffer.deallocate() }
    while true {
      let n: Int
      do throws(SystemCallError) {
        n = try source.readFully(into: buffer)
      } catch {
        cancel()
        throw TroveError.system(error, "read", path: sourcePath)
      }
      if n == 0 { return }
      try write(UnsafeRawBufferPointer(rebasing: buffer[..<n]))
      if n < buffer.count { return }
    }
  }

  /// Hashes what the kernel put into the temp file (a clone or an
  /// in-kernel copy): the bytes hashed are the bytes that will be stored.
  func absorbWritten() throws(TroveError) {
    precondition(sample == nil && compressor == nil, "a clone is stored raw")
    do throws(SystemCallError) {
      let reader = try FileDescriptor.open(name, in: store.tmpDirectory)
      defer { reader.close() }
      reader.adviseSequential()
      size = try Transfer.hash(from: reader, into: &hasher)
      passedOn = size
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
    do throws(TroveError) {
      // A stream that ended within the sample is written raw and judged
      // below with its real length.
      try settle(compressing: false)
      if compressor != nil { try passOn(UnsafeRawBufferPointer(start: nil, count: 0), end: true) }
    } catch {
      cancel()
      throw error
    }
    isOpen = false
    defer { file.close() }
    let digest = hasher.finalize()
    let duplicate: Bool
    do throws(TroveError) {
      duplicate =
        compressor != nil
        ? try store.publishCompressed(
          temporary: name, file: file, digest: digest, size: size, storedBytes: storedBytes)
        : try store.publish(temporary: name, file: file, digest: digest, size: size)
    } catch {
      try? store.tmpDirectory.removeFile(name)
      throw error
    }
    if !duplicate {
      // The bytes are stored; a failing auto-sweep must not fail the put.
      // `trove sweep` reports whatever it was.
      try? store.sweepIfOverBudget(protecting: digest)
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
