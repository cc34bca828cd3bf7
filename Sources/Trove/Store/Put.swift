import Foundation

/// How a put brought bytes into the store.
public enum IngestMethod: String, Sendable, Codable {
  /// The source was cloned into `tmp/` (FICLONE) and hashed — from its own
  /// cached pages where the clone is proved to hold those bytes, else
  /// from the clone: no data was copied.
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
  public var digest: BlobDigest
  /// Their length.
  public var size: Int64
  /// True when the store already held these bytes: nothing new was kept.
  public var isDuplicate: Bool
  /// How the bytes came in.
  public var method: IngestMethod
  /// Evictions this put caused: to make room on a volume below `min-free`
  /// or full (``SweepReason/lowSpace``, ``SweepReason/diskFull``), and the
  /// sweep after it when it took the store over its budget
  /// (``SweepReason/overBudget``). Each is also in the sweep log.
  public var sweeps: [SweepReport] = []
  /// Whether the object alone takes more than the store's budget: it was
  /// stored, and the rest of the store trimmed only to its low-water mark.
  public var exceedsBudget = false
}

extension Store {
  /// Stores the contents of the file at `path`.
  ///
  /// On the store's own filesystem the file is first cloned into `tmp/`
  /// (FICLONE) and no data is copied. The digest is taken from the
  /// source's cached pages when the source is proved not to have changed
  /// from before the clone to the end of the hash (on XFS: the same
  /// status, and the same blocks as the clone), else from the clone
  /// itself — either way the bytes hashed are exactly the bytes stored,
  /// even if the source changes meanwhile. Elsewhere it is read once:
  /// hashed and written in one pass.
  /// When an object of the file's size is already stored, the file is
  /// hashed first, and a re-put of known bytes writes nothing.
  /// Memory is bounded (one 1 MiB buffer) whatever the size.
  ///
  /// Give `expectedSize` when you know how long the file must be (as
  /// `trove put --expect-size` does): a file of another length is refused,
  /// and one that grows past it while it is read is stopped there. A file
  /// larger than the policy's ``CachePolicy/maximumObjectSize`` is refused
  /// before anything is read, and stopped as soon as it passes it if it
  /// grows.
  ///
  /// Give `key` to bind it to the object in the transaction that publishes
  /// the object (or counts a put of bytes already stored): there is no
  /// moment when a sweep could remove the object before its key names it,
  /// as there is between a put and a later ``bind(key:to:)``.
  ///
  /// `onProgress`, when given, hears of the bytes read (or hashed after a
  /// clone) block by block, out of the file's length.
  ///
  /// - Throws: `.sourceMissing`, `.sourceNotFile` (a directory),
  ///   `.permissionDenied`, `.noSpace` (naming `path` when it cannot fit
  ///   even if every unpinned entry were evicted), `.lowOnSpace`
  ///   (`.opportunistic` below `min-free`), `.checksumMismatch` (not
  ///   `expectedSize` bytes), `.tooLarge` (more than `max-object-size`),
  ///   `.invalidConfig` (the store's settings cannot be used), `.ioError`;
  ///   nothing is left in the store when it throws.
  public func put(
    file path: String, key: String? = nil, expectedSize: Int64? = nil,
    priority: PutPriority = .important, onProgress: ProgressHandler? = nil
  ) throws(TroveError) -> PutResult {
    try requireWritable()
    let source = try openSource(path)
    defer { source.close() }
    let result = try ingest(
      source, path: path, key: key, expectedSize: expectedSize, priority: priority,
      onProgress: onProgress)
    if let key { records.note(result.digest, key: key) }
    return result
  }

  /// Stores everything `handle` yields until its end (standard input, a
  /// pipe, a socket): one pass, bounded memory. A regular file (`< FILE`)
  /// is stored the way ``put(file:key:expectedSize:priority:onProgress:)-87pwb`` stores it,
  /// from its current offset; `key` is bound as that method binds it.
  ///
  /// A stream is read only until it passes `expectedSize`, when given, or
  /// the policy's ``CachePolicy/maximumObjectSize``: then the put fails
  /// (`.checksumMismatch`, `.tooLarge`) and stores nothing, so an endless
  /// stream ends. `onProgress` hears of the bytes read, out of the file's
  /// length, else `expectedSize`, else an unknown total. Messages name
  /// standard input `<stdin>`, another handle `<stream>`.
  public func put(
    reading handle: FileHandle, key: String? = nil, expectedSize: Int64? = nil,
    priority: PutPriority = .important, onProgress: ProgressHandler? = nil
  ) throws(TroveError) -> PutResult {
    try requireWritable()
    let name = handle.fileDescriptor == 0 ? "<stdin>" : "<stream>"
    let result = try ingest(
      FileDescriptor(rawValue: handle.fileDescriptor), path: name, key: key,
      expectedSize: expectedSize, priority: priority, onProgress: onProgress)
    if let key { records.note(result.digest, key: key) }
    return result
  }

  /// Stores `bytes`. When an object of their size is stored, they are
  /// hashed first, and bytes the store holds cost nothing more: no write,
  /// and no eviction to make room for them. `key` is bound as
  /// ``put(file:key:expectedSize:priority:onProgress:)-87pwb`` binds it.
  ///
  /// - Throws: `.tooLarge` for more than the policy's
  ///   ``CachePolicy/maximumObjectSize``, and the errors of
  ///   ``put(file:key:expectedSize:priority:onProgress:)-87pwb``.
  public func put(
    bytes: some ContiguousBytes, key: String? = nil, priority: PutPriority = .important
  ) throws(TroveError) -> PutResult {
    let binding = key.map { KeyRequest(key: $0) }
    try requireWritable()
    let count = bytes.withUnsafeBytes { Int64($0.count) }
    let limit = try sizeLimit(for: "<bytes>", expected: nil)
    try limit.checkAnnounced(count)
    if count > 0,
      try index().read(
        "look up size",
        { (tx) throws(TroveError) in
          try tx.hasObject(ofSize: count)
        })
    {
      let digest = bytes.withUnsafeBytes { XXH3Hasher.digest($0) }
      if try objects.locate(digest) != nil,
        try objects.recordHit(digest, size: count, binding: binding) != nil
      {
        records.note(digest, key: key)
        return PutResult(digest: digest, size: count, isDuplicate: true, method: .stream)
      }
    }
    let sweeps = try admit(size: count, priority: priority, input: "<bytes>")
    let writer = try BlobWriter(
      store: self, expectedSize: count, sizeIsExact: true, mayCompress: true,
      priority: priority, sweeps: sweeps, limit: limit)
    writer.binding = binding
    try writer.write(bytes)
    return try writer.commit(method: .stream)
  }

  /// A writer for bytes that arrive in pieces (a download body): write
  /// them, then ``BlobWriter/commit(expecting:size:)``. Until then they are invisible.
  ///
  /// Give `expectedSize` when it is known (a Content-Length): room is made
  /// for it before the first byte, a put that cannot fit fails before it,
  /// and a full disk is met by evicting what is still to come. An
  /// `.opportunistic` writer is refused (`.lowOnSpace`) when the volume is
  /// below the policy's minimum free space.
  ///
  /// A write that takes the bytes past the policy's
  /// ``CachePolicy/maximumObjectSize`` fails (`.tooLarge`) and discards
  /// the writer; an `expectedSize` above it is refused here.
  ///
  /// `key`, when given, is bound to the object in the transaction that
  /// publishes it at ``BlobWriter/commit(expecting:size:)``.
  public func makeWriter(
    key: String? = nil, expectedSize: Int64? = nil, priority: PutPriority = .important
  ) throws(TroveError) -> BlobWriter {
    try requireWritable()
    let writer = try makeWriter(expectedSize: expectedSize, priority: priority, source: "<stream>")
    writer.binding = key.map { KeyRequest(key: $0) }
    return writer
  }

  /// A writer for bytes from `source` (a URL, for messages). With
  /// `exact`, `expectedSize` is the length the bytes must have: one more
  /// fails the write (a server that said how long a blob is and sends
  /// more is cut off there).
  func makeWriter(
    expectedSize: Int64?, priority: PutPriority, source: String, exact: Bool = false
  ) throws(TroveError) -> BlobWriter {
    let limit = try sizeLimit(for: source, expected: exact ? expectedSize : nil)
    if let expectedSize { try limit.checkAnnounced(expectedSize, isExact: false) }
    let sweeps = try admit(size: expectedSize, priority: priority, input: source)
    return try BlobWriter(
      store: self, expectedSize: expectedSize, mayCompress: true, priority: priority,
      sweeps: sweeps, limit: limit)
  }

  /// The lengths an input from `source` may have: `expected`, and the
  /// policy's `max-object-size`.
  ///
  /// - Throws: `.invalidConfig` when the store's settings cannot be used.
  func sizeLimit(for source: String, expected: Int64?, batch: PutBatch? = nil)
    throws(TroveError) -> SizeLimit
  {
    SizeLimit(
      source: source, expected: expected,
      maximum: try settings(for: batch).policy.maximumObjectSize)
  }

  /// Brings the bytes of `source`, from its current offset to its end, into
  /// the store by the cheapest exact way the filesystems allow.
  private func ingest(
    _ source: FileDescriptor, path: String, key: String?, expectedSize: Int64?,
    priority: PutPriority, onProgress: ProgressHandler?
  ) throws(TroveError) -> PutResult {
    switch try prepare(
      source, path: path, key: key, expectedSize: expectedSize, priority: priority,
      onProgress: onProgress)
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
  /// `batch`, when given, holds the settings every decision here and in
  /// the writer takes (read once for a group). `atStart` says `source` was
  /// just opened, so its offset is 0 without asking.
  func prepare(
    _ source: FileDescriptor, path: String, key: String?, expectedSize: Int64?,
    priority: PutPriority, onProgress: ProgressHandler?, grouped: Bool = false,
    batch: PutBatch? = nil, atStart: Bool = false
  ) throws(TroveError) -> Ingested {
    let binding = key.map { KeyRequest(key: $0) }
    // Settings that cannot be used stop a put before it reads a byte, even
    // one of bytes already stored: what a put does never depends on luck.
    let limit = try sizeLimit(for: path, expected: expectedSize, batch: batch)
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
      case .zstd(let level, let workers, let ratio) = try compressionPlan(
        source, size, start, batch: batch)
    {
      // Compressed anyway: read once, hashing and compressing; no clone.
      // Room for the frame the sample predicts, not for the raw bytes.
      let sweeps = try admit(
        size: CachePolicy.expectedStoredSize(size, sampleRatio: ratio), priority: priority,
        input: path, batch: batch)
      source.adviseSequential()
      return .staged(
        try ingestCompressed(
          source, size: size, level: level, workers: workers, path: path, priority: priority,
          sweeps: sweeps, limit: limit, binding: binding, progress: progress))
    }
    let canClone =
      isWholeFile && status.device == device
      && (!grouped || status.size >= Self.groupedCloneMinimum)
    // A clone takes no data blocks; a copy takes `size`.
    var sweeps = try admit(size: canClone ? 0 : size, priority: priority, input: path, batch: batch)
    // A file's form was settled above (raw); a stream's is settled by the
    // writer from its first bytes.
    let writer = try BlobWriter(
      store: self, expectedSize: size, mayCompress: !status.isRegular, priority: priority,
      sweeps: sweeps, limit: limit, batch: batch)
    writer.binding = binding
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
      sweeps = try admit(size: size, priority: priority, input: path, batch: batch)
      writer.sweeps += sweeps
    }
    // One pass through user space: read, hash, write. (An in-kernel
    // copy_file_range and a re-read measured 7× slower on ext4 here.)
    // A file that one read takes whole needs no read-ahead advice.
    if !status.isRegular || (size ?? 0) >= Int64(Transfer.bufferSize) { source.adviseSequential() }
    if status.isFIFO {
      // A 1 MiB pipe instead of 64 KiB: 16× fewer sleeps and wake-ups
      // between the writer and us (`cat | trove put -` and zstd spent half
      // their kernel time there). Best effort: the limit may be lower.
      _ = try? source.setPipeBuffer(Int32(Transfer.bufferSize))
    }
    try writer.absorb(
      from: source, path: path, sizeHint: status.isRegular ? size : nil, progress: progress)
    return .staged(try writer.finish(method: status.isRegular ? .copy : .stream))
  }

  /// The policy's decision for a regular file of `size` bytes from
  /// `start`, judged from a sample read without moving the file offset.
  private func compressionPlan(
    _ source: FileDescriptor, _ size: Int64, _ start: Int64, batch: PutBatch? = nil
  ) throws(TroveError) -> StorageDecision {
    let policy = try settings(for: batch).policy
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
    if try objects.locate(digest) != nil,
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
    progress: ByteProgress?
  ) throws(TroveError) -> PendingPut {
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
      isCompressed: true, storedBytes: temp.storedBytes)
    return PendingPut(
      store: self, staged: staged, method: .copy, sweeps: sweeps + temp.reliefs,
      binding: binding)
  }

  /// The result of a published put, after the sweep it may call for: if
  /// the object is new and the store is now over its budget, an auto-sweep
  /// that keeps it. The bytes are stored; a failing auto-sweep does not
  /// fail the put (`trove sweep` reports whatever it was). The budget is
  /// `batch`'s when there is one.
  func finishPut(
    _ outcome: PublishOutcome, method: IngestMethod, sweeps: [SweepReport],
    sweepingOverBudget: Bool = true, batch: PutBatch? = nil
  )
    -> PutResult
  {
    switch outcome {
    case .duplicate(let entry), .stored(let entry): records.note(entry.digest)
    }
    switch outcome {
    case .duplicate(let entry):
      return PutResult(
        digest: entry.digest, size: entry.size, isDuplicate: true, method: method,
        sweeps: sweeps)
    case .stored(let entry):
      var result = PutResult(
        digest: entry.digest, size: entry.size, isDuplicate: false, method: method,
        sweeps: sweeps)
      if let budget = try? settings(for: batch).policy.budget {
        result.exceedsBudget = entry.allocatedBytes > budget
      }
      if sweepingOverBudget, let sweep = try? sweepIfOverBudget(protecting: [entry.digest]) {
        result.sweeps.append(sweep)
      }
      return result
    }
  }

  /// Settles the form of a finished raw temp file (`name`, holding `size`
  /// bytes hashing to `digest`) by the policy — kept raw, or compressed
  /// into a new temp file — and returns it staged for publishing. The raw
  /// file is removed when it is replaced or when this throws; the caller
  /// closes a new staged file (one whose descriptor is not `file`).
  func stage(
    raw name: String, file: FileDescriptor, digest: BlobDigest, size: Int64, policy: CachePolicy,
    writes: inout PressuredWrites
  ) throws(TroveError) -> StagedObject {
    var sample: UnsafeMutableRawBufferPointer?
    defer { sample?.deallocate() }
    let decision = policy.storage(size: size) {
      let buffer = UnsafeMutableRawBufferPointer.allocate(
        byteCount: CachePolicy.sampleSize, alignment: 4096)
      sample = buffer
      guard let n = try? file.read(into: buffer, at: 0) else { return nil }
      return UnsafeRawBufferPointer(rebasing: buffer[..<n])
    }
    switch decision {
    case .raw(let skip):
      return StagedObject(
        name: name, file: file, digest: digest, size: size, isCompressed: false,
        storedBytes: size, skipped: skip)
    case .zstd(let level, let workers, _):
      defer { try? tmpDirectory.removeFile(name) }
      let temp = try compressToTemporary(
        file, size: size, level: level, workers: workers, path: tmpPath + "/" + name,
        priority: writes.priority)
      for relief in temp.reliefs { writes.record(relief) }
      return StagedObject(
        name: temp.name, file: temp.file, digest: digest, size: size, isCompressed: true,
        storedBytes: temp.storedBytes)
    }
  }
}
