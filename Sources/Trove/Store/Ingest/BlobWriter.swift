import Foundation

/// Bytes on their way into a store: written to a private temp file in
/// `tmp/` and hashed as they pass; published under their digest by
/// ``commit(expecting:size:)``, or discarded by ``cancel()`` (or when the writer is
/// dropped without committing).
///
/// One writer belongs to one task at a time. A write that fails discards
/// the writer; later writes and ``commit(expecting:size:)`` throw that failure again.
///
/// A write that takes the bytes past the store's `max-object-size` fails
/// (`.tooLarge`) before any of its bytes are written, and discards the
/// writer: an endless stream stops there.
///
/// With compression on, the first 256 KiB are held back and sampled: bytes
/// that compress go into a zstd frame as they arrive (one pass, no raw
/// copy); others are written raw. A stream of unknown length gets a frame
/// without a content size, as `zstd` gives a pipe.
///
/// A full filesystem (ENOSPC, EDQUOT) while writing is met by evicting
/// least recently used entries — what is still to be written when the
/// expected size is known, 64 MiB worth when it is not — and retrying the
/// failed write from where it stopped; bytes already written are kept. It
/// gives up when an eviction freed nothing measurable, or after a bounded
/// number of rounds (see ``PutResult/sweeps``).
public final class BlobWriter {
  let store: Store
  let name: String
  let file: FileDescriptor
  /// The total the caller expects, if known (a file's size, Content-Length).
  let expectedSize: Int64?
  /// Whether `expectedSize` is certain (bytes in memory), so a frame may
  /// record it as its content size.
  private let sizeIsExact: Bool
  /// The lengths the bytes may have: checked as they arrive and at commit.
  let limit: SizeLimit
  private var hasher = XXH3Hasher()
  /// A second hash of the bytes written, fed in the same pass (a signed
  /// remote's SHA-256); read by its owner once the writes are done.
  var companion: (any ByteHashing)?
  /// Bytes written by the caller.
  private var size: Int64 = 0
  /// Of those, how many went on to the temp file (raw or into the frame).
  private var passedOn: Int64 = 0
  private var state = State.open
  private var writes: PressuredWrites
  /// Evictions made for this put before its first byte.
  var sweeps: [SweepReport]
  /// A key to bind in the transaction that publishes the bytes.
  let binding: KeyRequest?
  /// The first bytes, held back until there are enough to judge them;
  /// nil once the form is settled (or when compression is off).
  private var sample: UnsafeMutableRawBufferPointer?
  private var sampled = 0
  /// The frame being written, once the sample said to compress.
  private var compressor: Zstd.Compressor?
  private var storedBytes: Int64 = 0
  /// The admission the bytes came in by: its settings, read once, decide
  /// their form.
  private let admission: Admission
  /// The chunks of raw bytes being cut beside the writes, once the object
  /// is large enough for a manifest (``CachePolicy/chunkMinimumSize``).
  private var chunking: ChunkingPass?
  /// The block size ranges are cloned in: 0 until asked, nil once the
  /// filesystem refused a clone (the rest is copied).
  private var cloneBlockSize: Int64? = 0

  private enum State {
    case open
    case committed
    case cancelled
    case failed(TroveError)
  }

  init(
    store: Store, admission: Admission, expectedSize: Int64?, sizeIsExact: Bool = false,
    mayCompress: Bool = false, priority: PutPriority = .important, sweeps: [SweepReport] = [],
    limit: SizeLimit, binding: KeyRequest? = nil
  ) throws(TroveError) {
    let policy = admission.policy
    (file, name) = try attempt("create temporary file in", store.tmpPath) {
      () throws(SystemCallError) in try store.objects.createStagingFile("put")
    }
    self.store = store
    self.expectedSize = expectedSize
    self.sizeIsExact = sizeIsExact && expectedSize != nil
    self.sweeps = sweeps
    self.limit = limit
    self.admission = admission
    self.binding = binding
    writes = PressuredWrites(store: store, priority: priority)
    if mayCompress, policy.compression != .none {
      sample = UnsafeMutableRawBufferPointer.allocate(
        byteCount: CachePolicy.sampleSize, alignment: 4096)
    }
  }

  deinit {
    if case .open = state { cancel() }
    chunking?.cancel()
    sample?.deallocate()
  }

  private var path: String { store.tmpPath + "/" + name }

  /// Throws unless the writer is open: the failure that discarded it, or
  /// that it was committed or cancelled.
  private func requireOpen(_ action: String) throws(TroveError) {
    switch state {
    case .open: return
    case .failed(let error): throw error
    case .committed:
      throw TroveError(
        .invalidArgument, "cannot \(action): the writer was already committed", path: path)
    case .cancelled:
      throw TroveError(
        .invalidArgument, "cannot \(action): the writer was cancelled", path: path)
    }
  }

  /// Discards the writer after `error` and rethrows it.
  private func fail(_ error: TroveError) -> TroveError {
    cancel()
    state = .failed(error)
    return error
  }

  /// Appends `bytes`.
  public func write(_ bytes: UnsafeRawBufferPointer) throws(TroveError) {
    try requireOpen("write")
    do throws(TroveError) {
      try limit.checkReceived(size + Int64(bytes.count))
      hasher.update(bytes)
      companion?.update(bytes)
      size += Int64(bytes.count)
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
      throw fail(error)
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
    let policy = admission.policy
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
      chunking?.cancel()
      chunking = nil
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
        chunk(upTo: passedOn + Int64(bytes.count))
      } catch {
        throw TroveError.system(error, "write", path: path)
      }
    }
    passedOn += Int64(bytes.count)
  }

  /// Tells the chunking pass that the raw temp file is written up to
  /// `total`, starting it when the object becomes large enough for a
  /// manifest (or is known to be): it reads the bytes back itself.
  private func chunk(upTo total: Int64) {
    if chunking == nil {
      let policy = admission.policy
      guard policy.chunking, max(total, expectedSize ?? 0) >= policy.chunkMinimumSize else {
        return
      }
      chunking = ChunkingPass(reading: file)
    }
    chunking?.advance(to: total)
  }

  private func streamError(_ error: Zstd.StreamError) -> TroveError {
    switch error {
    case .reading(let e), .writing(let e): return TroveError.system(e, "write", path: path)
    case .codec(let e):
      return TroveError(.ioError, "cannot compress into '\(path)': \(e)", path: path)
    }
  }

  /// Reads `source` to its end into this writer: one 1 MiB buffer, or a
  /// smaller one for an input known to be smaller (`sizeHint`).
  ///
  /// With `sizeHint` (a regular file's length from its status), a read that
  /// brings the input to that length in a buffer it does not fill ends it:
  /// a 4 KiB file takes one `read(2)`, not a second one to find its end.
  /// The bytes stored are still exactly the bytes hashed; a file that grows
  /// at that moment is stored as it was when read, as if it had grown just
  /// after.
  func absorb(
    from source: FileDescriptor, path sourcePath: String, sizeHint: Int64? = nil,
    progress: ByteProgress? = nil
  ) throws(TroveError) {
    let buffer = UnsafeMutableRawBufferPointer.allocate(
      byteCount: Transfer.bufferSize(for: sizeHint), alignment: 4096)
    defer { buffer.deallocate() }
    var total: Int64 = 0
    while true {
      let n: Int
      do throws(SystemCallError) {
        let rest = sizeHint.map { $0 - total }
        let enough = rest.flatMap { $0 > 0 && $0 < Int64(buffer.count) ? Int($0) : nil }
        n = try source.readFully(into: buffer, enough: enough)
        total += Int64(n)
      } catch {
        throw fail(TroveError.system(error, "read", path: sourcePath))
      }
      if n == 0 { return }
      try write(UnsafeRawBufferPointer(rebasing: buffer[..<n]))
      progress?.add(n)
      if n < buffer.count { return }
    }
  }

  /// Appends `length` bytes of `source` (a stored object, at `path`) at
  /// `offset`. The whole blocks that lie at the same offset modulo the
  /// block size in both files are cloned in (FICLONERANGE: no data
  /// written, the blocks shared) and hashed from the temp file, so the
  /// digest is of the bytes it holds; the rest is copied through `buffer`,
  /// and so is everything when the bytes are not stored raw or the
  /// filesystem will not clone. Returns the bytes cloned.
  @discardableResult
  func append(
    _ length: Int64, at offset: Int64, of source: FileDescriptor, path: String,
    buffer: UnsafeMutableRawBufferPointer
  ) throws(TroveError) -> Int64 {
    try requireOpen("write")
    var done: Int64 = 0
    var cloned: Int64 = 0
    if sample == nil, compressor == nil, let block = blockSizeForClones(),
      (offset - passedOn) % block == 0
    {
      let head = (block - passedOn % block) % block
      let whole = max(0, length - head) / block * block
      if whole > 0 {
        try copy(head, at: offset, of: source, path: path, buffer: buffer)
        done = head
        if try cloneIn(whole, at: offset + head, of: source, path: path, buffer: buffer) {
          done += whole
          cloned = whole
        }
      }
    }
    try copy(length - done, at: offset + done, of: source, path: path, buffer: buffer)
    return cloned
  }

  /// The temp file's block size, when ranges may still be cloned into it.
  private func blockSizeForClones() -> Int64? {
    if cloneBlockSize == 0 {
      cloneBlockSize = try? file.filesystemBlockSize()
    }
    return cloneBlockSize
  }

  /// Clones `length` bytes (whole blocks) of `source` at `offset` onto the
  /// end of the temp file and hashes them from there. False, with nothing
  /// changed that the next write does not overwrite, when the filesystem
  /// refuses: no clone is tried again.
  private func cloneIn(
    _ length: Int64, at offset: Int64, of source: FileDescriptor, path: String,
    buffer: UnsafeMutableRawBufferPointer
  ) throws(TroveError) -> Bool {
    let start = passedOn
    do throws(TroveError) {
      try limit.checkReceived(size + length)
    } catch {
      throw fail(error)
    }
    do throws(SystemCallError) {
      try file.cloneRange(length, at: start, from: source, at: offset)
    } catch {
      // Not this filesystem, another one, a full volume: copied instead,
      // over whatever part the kernel took (the file offset stayed put).
      cloneBlockSize = nil
      return false
    }
    try readPieces(
      length, at: start, of: file, path: self.path, buffer: buffer,
      short: { held in
        TroveError(
          .ioError,
          "'\(self.path)' holds \(held) bytes after a clone that should have made it \(start + length)",
          path: self.path)
      },
      each: { (bytes) throws(TroveError) in
        hasher.update(bytes)
        companion?.update(bytes)
      })
    do throws(SystemCallError) {
      try file.seek(to: start + length)
    } catch {
      throw fail(TroveError.system(error, "write", path: self.path))
    }
    size += length
    passedOn += length
    chunk(upTo: passedOn)
    return true
  }

  /// Copies `length` bytes of `source` at `offset` in, as written bytes.
  private func copy(
    _ length: Int64, at offset: Int64, of source: FileDescriptor, path: String,
    buffer: UnsafeMutableRawBufferPointer
  ) throws(TroveError) {
    try readPieces(
      length, at: offset, of: source, path: path, buffer: buffer,
      short: { _ in
        TroveError(.corruptObject, "'\(path)' ends before byte \(offset + length)", path: path)
      },
      each: { (bytes) throws(TroveError) in try write(bytes) })
  }

  /// Reads `length` bytes of `file` (at `path`) at `offset` through
  /// `buffer` and hands them to `body` a buffer at a time; a file that
  /// ends first fails the writer with `short` of the offset it ended at.
  private func readPieces(
    _ length: Int64, at offset: Int64, of file: FileDescriptor, path: String,
    buffer: UnsafeMutableRawBufferPointer, short: (Int64) -> TroveError,
    each body: (UnsafeRawBufferPointer) throws(TroveError) -> Void
  ) throws(TroveError) {
    var done: Int64 = 0
    while done < length {
      let want = Int(min(Int64(buffer.count), length - done))
      let n: Int
      do throws(SystemCallError) {
        n = try file.read(
          into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<want]), at: offset + done)
      } catch {
        throw fail(TroveError.system(error, "read", path: path))
      }
      // A positioned read fills the buffer unless the file ends.
      guard n == want else { throw fail(short(offset + done + Int64(n))) }
      try body(UnsafeRawBufferPointer(rebasing: buffer[..<n]))
      done += Int64(n)
    }
  }

  /// Whether the kernel may fill the temp file instead (a clone, then
  /// ``absorbWritten(progress:)``): nothing written yet, and stored raw
  /// (the policy does not compress).
  var canTakeClone: Bool { sample == nil && compressor == nil && size == 0 }

  /// Takes the digest of a clone of `source` just made into the temp file:
  /// from the source's cached pages when ``CachedHash`` proves they are the
  /// clone's bytes, else from the clone (``absorbWritten(progress:)``).
  /// `before` is the source's status taken before the clone. Returns why
  /// the clone was hashed, or nil when the source's pages were.
  func absorbClone(of source: FileDescriptor, before: FileStatus?, progress: ByteProgress? = nil)
    throws(TroveError) -> CachedHash.Refusal?
  {
    precondition(canTakeClone, "a clone is stored raw, and nothing was written before it")
    let refusal: CachedHash.Refusal
    if let before {
      switch CachedHash.hash(
        source, clonedInto: file, before: before, into: &hasher, progress: progress)
      {
      case .success(let hashed):
        size = hashed
        passedOn = hashed
        do throws(TroveError) { try limit.checkReceived(size) } catch { throw fail(error) }
        return nil
      case .failure(let why):
        refusal = why
      }
    } else {
      refusal = .sourceChanged("status")
    }
    // Whatever the source's hash fed in is thrown away with the hasher.
    hasher = XXH3Hasher()
    progress?.restart()
    try absorbWritten(progress: progress)
    return refusal
  }

  /// Hashes what the kernel put into the temp file (a clone or an
  /// in-kernel copy): the bytes hashed are the bytes that will be stored.
  func absorbWritten(progress: ByteProgress? = nil) throws(TroveError) {
    precondition(sample == nil && compressor == nil, "a clone is stored raw")
    do throws(SystemCallError) {
      // A second descriptor of the same file (its own offset), checked to
      // be that file: a name swapped in tmp/ (a FIFO too) is never what
      // gets hashed, nor waited on.
      let reader = try FileDescriptor.openRegularFile(name, in: store.tmpDirectory)
      defer { reader.close() }
      guard try reader.status().inode == file.status().inode else {
        throw SystemCallError("open", Errno(rawValue: ESTALE))
      }
      reader.adviseSequential()
      size = try Transfer.read(from: reader) {
        hasher.update($0)
        progress?.add($0.count)
      }
      passedOn = size
    } catch {
      throw fail(TroveError.system(error, "read", path: path))
    }
    do throws(TroveError) { try limit.checkReceived(size) } catch { throw fail(error) }
  }

  /// Publishes the bytes written so far under their digest. If the store
  /// already holds them, the temp file is dropped and the result says
  /// `isDuplicate`. After a failed write, throws that failure.
  ///
  /// A caller that knows what it should get (a digest from a lock file, a
  /// length from a manifest) gives `digest` and `size`: bytes that are
  /// anything else are discarded and the commit fails
  /// (`.checksumMismatch`), so they are never published.
  public func commit(expecting digest: BlobDigest? = nil, size expectedSize: Int64? = nil)
    throws(TroveError) -> PutResult
  {
    let result = try commit(method: .stream, expecting: digest, size: expectedSize)
    store.writeBack.run(store)
    return result
  }

  func commit(
    method: IngestMethod, expecting expected: BlobDigest? = nil, size expectedSize: Int64? = nil
  )
    throws(TroveError) -> PutResult
  {
    try finish(method: method, expecting: expected, size: expectedSize).publish()
  }

  /// Finishes the bytes written so far — checked, hashed, put in the form
  /// the policy chooses — without publishing them: the caller publishes
  /// the staged object, alone (``StagedPut/publish()``) or with others in
  /// one group commit. After a failed write, throws that failure.
  func finish(
    method: IngestMethod, expecting expected: BlobDigest? = nil, size expectedSize: Int64? = nil
  )
    throws(TroveError) -> StagedPut
  {
    try requireOpen("commit")
    do throws(TroveError) {
      try limit.checkComplete(size)
      if let expectedSize, size != expectedSize {
        throw TroveError(
          .checksumMismatch,
          "the bytes written are \(size) bytes long, not the \(expectedSize) expected",
          value: String(expectedSize))
      }
      // A stream that ended within the sample is written raw and judged
      // below with its real length.
      try settle(compressing: false)
      if compressor != nil { try passOn(UnsafeRawBufferPointer(start: nil, count: 0), end: true) }
    } catch {
      throw fail(error)
    }
    let digest = hasher.finalize()
    if chunking != nil {
      // The disk starts on the data while the last chunks are cut: the
      // commit's sync then has less left to wait for.
      file.startWriteback(at: 0, length: 0)
    }
    let chunks = chunking?.finish() ?? nil
    chunking = nil
    if let expected, digest != expected {
      throw fail(
        TroveError(
          .checksumMismatch, "the bytes written hash to \(digest), not the expected \(expected)",
          value: expected.description))
    }
    state = .committed
    var staged =
      compressor != nil
      ? StagedObject(
        name: name, file: file, digest: digest, size: size, isCompressed: true,
        storedBytes: storedBytes)
      : try store.stage(
        raw: name, file: file, digest: digest, size: size, admission: admission,
        writes: &writes)
    staged.binding = binding
    if let chunks, !staged.isCompressed {
      staged.manifest = ChunkManifest(size: size, chunks: chunks)
    }
    return StagedPut(
      store: store, staged: staged, method: method, sweeps: sweeps + writes.reliefs,
      admission: admission)
  }

  /// Discards what was written. Safe to call more than once.
  public func cancel() {
    guard case .open = state else { return }
    state = .cancelled
    chunking?.cancel()
    chunking = nil
    file.close()
    try? store.tmpDirectory.removeFile(name)
  }
}
