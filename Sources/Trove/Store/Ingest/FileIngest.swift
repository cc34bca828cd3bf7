import Foundation

/// Staging an input read from a descriptor (a file, a pipe): the cheapest
/// exact way the filesystems allow — a clone hashed from the source's cached
/// pages, a hash-first look for bytes already stored, one pass that hashes
/// and compresses, or one that hashes and writes.
extension Store {
  /// Brings the bytes of `source`, from its current offset to its end, into
  /// the store by the cheapest exact way the filesystems allow, as a put
  /// alone. Settings that cannot be used stop it before it reads a byte,
  /// even one of bytes already stored: what a put does never depends on luck.
  func ingest(
    _ source: FileDescriptor, path: String, key: String?, expectedSize: Int64?,
    priority: PutPriority, onProgress: ProgressHandler?
  ) throws(TroveError) -> PutResult {
    switch try prepare(
      source, path: path, key: key, expectedSize: expectedSize, priority: priority,
      onProgress: onProgress, admission: Admission(store: self))
    {
    case .finished(let result): return result
    case .staged(let pending): return try pending.publish()
    }
  }

  /// Brings the bytes of `source` (from its current offset) as far as a
  /// staged object, synced and published by the caller, alone or in a
  /// group commit; or all the way, when the store already held them.
  ///
  /// `grouped` (a put of many files) changes two choices for small files,
  /// where the group commit does better: a file up to
  /// ``groupedHashFirstLimit`` is not hashed first to look for a stored
  /// copy (the group finds one before paying for a sync, and counts all
  /// its hits in one transaction instead of one each), and a file under
  /// ``groupedCloneMinimum`` is copied rather than cloned (one read of
  /// cached pages and a write, where a clone costs the FIEMAP calls of its
  /// proof, or a read of the fresh clone from the disk when that fails).
  /// `admission` holds the settings every decision here and in the writer
  /// takes (read once for a put, or for a group). `atStart` says `source` was
  /// just opened, so its offset is 0 without asking.
  func prepare(
    _ source: FileDescriptor, path: String, key: String?, expectedSize: Int64?,
    priority: PutPriority, onProgress: ProgressHandler?, grouped: Bool = false,
    admission: Admission, atStart: Bool = false
  ) throws(TroveError) -> Ingested {
    let binding = key.map { KeyRequest(key: $0) }
    let limit = admission.sizeLimit(for: path, expected: expectedSize)
    let status = try attempt("read", path) { () throws(SystemCallError) in try source.status() }
    if status.isDirectory {
      throw TroveError(.sourceNotFile, "cannot put '\(path)': it is a directory", path: path)
    }
    let start =
      status.isRegular && !atStart
      ? try attempt("read", path) { () throws(SystemCallError) in try source.offset() } : 0
    let size = status.isRegular ? status.size - start : nil
    if let size { try limit.checkAnnounced(size) }
    let isWholeFile = status.isRegular && start == 0
    let progress = onProgress.map { ByteProgress(total: size ?? expectedSize, handler: $0) }
    if isWholeFile, status.size > 0, !grouped || status.size > Self.groupedHashFirstLimit,
      try index().read(
        "look up size",
        { (tx) throws(TroveError) in
          try tx.hasObject(ofSize: status.size)
        }),
      let known = try existingObject(
        hashing: source, path: path, length: status.size, limit: limit, binding: binding,
        progress: progress)
    {
      return .finished(known)
    }
    if let size,
      case .zstd(let level, let workers, let ratio) = compressionPlan(
        source, size, start, admission: admission)
    {
      // Compressed anyway: read once, hashing and compressing; no clone.
      // Room for the frame the sample predicts, not for the raw bytes.
      let sweeps = try admission.admit(
        size: CachePolicy.expectedStoredSize(size, sampleRatio: ratio), priority: priority,
        input: path)
      source.adviseSequential()
      return .staged(
        try ingestCompressed(
          source, size: size, level: level, workers: workers, path: path, priority: priority,
          sweeps: sweeps, limit: limit, binding: binding, admission: admission,
          progress: progress))
    }
    let canClone =
      isWholeFile && status.device == device
      && (!grouped || status.size >= Self.groupedCloneMinimum)
    // A clone takes no data blocks; a copy takes `size`.
    var sweeps = try admission.admit(size: canClone ? 0 : size, priority: priority, input: path)
    // A file's form was settled above (raw); a stream's is settled by the
    // writer from its first bytes.
    let writer = try BlobWriter(
      store: self, admission: admission, expectedSize: size, mayCompress: !status.isRegular,
      priority: priority, sweeps: sweeps, limit: limit, binding: binding)
    if canClone {
      var cloned = false
      // The source as it was before the clone: the hash of its cached
      // pages counts only if it is the same after (see CachedHash).
      let before = try? source.status()
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
        let refusal = try writer.absorbClone(of: source, before: before, progress: progress)
        cloneHashes.withLock {
          if let refusal {
            $0.fromClone += 1
            $0.lastRefusal = refusal
          } else {
            $0.fromSource += 1
          }
        }
        return .staged(try writer.finish(method: .clone))
      }
      sweeps = try admission.admit(size: size, priority: priority, input: path)
      writer.sweeps += sweeps
    }
    // One pass through user space: read, hash, write. An in-kernel
    // copy_file_range would need a second read to hash, which costs more.
    // A file that one read takes whole needs no read-ahead advice.
    if !status.isRegular || (size ?? 0) >= Int64(Transfer.bufferSize) { source.adviseSequential() }
    if status.isFIFO {
      // A 1 MiB pipe, not the default 64 KiB: fewer sleeps and wake-ups
      // between the writer and us. Best effort: the limit may be lower.
      _ = try? source.setPipeBuffer(Int32(Transfer.bufferSize))
    }
    try writer.absorb(
      from: source, path: path, sizeHint: status.isRegular ? size : nil, progress: progress)
    return .staged(try writer.finish(method: status.isRegular ? .copy : .stream))
  }

  /// The policy's decision for a regular file of `size` bytes from
  /// `start`, judged from a sample read without moving the file offset.
  private func compressionPlan(
    _ source: FileDescriptor, _ size: Int64, _ start: Int64, admission: Admission
  ) -> StorageDecision {
    let policy = admission.policy
    // Allocated only when the policy reads a sample (compression on, a
    // size that qualifies): a put of raw bytes allocates nothing here.
    var sample: UnsafeMutableRawBufferPointer?
    defer { sample?.deallocate() }
    return policy.storage(size: size) {
      let buffer = UnsafeMutableRawBufferPointer.allocate(
        byteCount: CachePolicy.sampleSize, alignment: 4096)
      sample = buffer
      guard let n = try? source.read(into: buffer, at: start) else { return nil }
      return UnsafeRawBufferPointer(rebasing: buffer[..<n])
    }
  }

  /// Hashes `source` where it lies and, if the store holds those bytes,
  /// counts a dedup hit: one read, nothing written. Otherwise (or when the
  /// object was evicted meanwhile) rewinds `source` and returns nil. Taken
  /// only when an object of the file's size exists, so new content does
  /// not pay for a second read. A file that grew past `limit` meanwhile
  /// is read no further than one block past it, and refused.
  private func existingObject(
    hashing source: FileDescriptor, path: String, length: Int64, limit: SizeLimit,
    binding: KeyRequest?, progress: ByteProgress?
  ) throws(TroveError) -> PutResult? {
    source.adviseSequential()
    var hasher = XXH3Hasher()
    let size = try attempt("read", path) { () throws(SystemCallError) in
      try Transfer.read(from: source, stoppingAfter: limit.ceiling, sizeHint: length) {
        hasher.update($0)
        progress?.add($0.count)
      }
    }
    try limit.checkComplete(size)
    let digest = hasher.finalize()
    if try objects.find(digest) != nil,
      try objects.recordHit(digest, size: size, binding: binding) != nil
    {
      records.note(digest)
      return PutResult(digest: digest, size: size, isDuplicate: true, method: .existing)
    }
    try attempt("read", path) { () throws(SystemCallError) in try source.seek(to: 0) }
    progress?.restart()
    return nil
  }

  /// Stores `size` bytes of the regular file `source` (from its current
  /// offset) as a zstd frame in one pass: each block read is hashed and
  /// compressed, so no raw copy is written. A file that grows while it is
  /// read fails (the frame was pledged `size` bytes); one that grew past
  /// `limit` fails saying so.
  private func ingestCompressed(
    _ source: FileDescriptor, size: Int64, level: Int32, workers: Int32, path: String,
    priority: PutPriority, sweeps: [SweepReport], limit: SizeLimit, binding: KeyRequest?,
    admission: Admission, progress: ByteProgress?
  ) throws(TroveError) -> StagedPut {
    var hasher = XXH3Hasher()
    var read: Int64 = 0
    let temp: (name: String, file: FileDescriptor, storedBytes: Int64, reliefs: [SweepReport])
    do throws(TroveError) {
      temp = try compressToTemporary(
        source, size: size, level: level, workers: workers, path: path, priority: priority,
        rewind: false
      ) {
        hasher.update($0)
        read += Int64($0.count)
        progress?.add($0.count)
      }
    } catch {
      try limit.checkReceived(read)
      throw error
    }
    let staged = StagedObject(
      name: temp.name, file: temp.file, digest: hasher.finalize(), size: size,
      isCompressed: true, storedBytes: temp.storedBytes, binding: binding)
    return StagedPut(
      store: self, staged: staged, method: .copy, sweeps: sweeps + temp.reliefs,
      admission: admission)
  }
}
