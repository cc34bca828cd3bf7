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
    writeBack.run(self)
    return result
  }

  /// Stores everything `handle` yields until its end (standard input, a
  /// pipe, a socket): one pass, bounded memory. A regular file (`< FILE`)
  /// is stored the way `put(file:key:expectedSize:priority:onProgress:)` stores it,
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
    writeBack.run(self)
    return result
  }

  /// Stores `bytes`. Up to 1 MiB, or when an object of their size is
  /// stored, they are hashed first, and bytes the store holds cost nothing
  /// more: no write, and no eviction to make room for them. `key` is bound as
  /// `put(file:key:expectedSize:priority:onProgress:)` binds it.
  ///
  /// - Throws: `.tooLarge` for more than the policy's
  ///   ``CachePolicy/maximumObjectSize``, and the errors of
  ///   `put(file:key:expectedSize:priority:onProgress:)`.
  public func put(
    bytes: some ContiguousBytes, key: String? = nil, priority: PutPriority = .important
  ) throws(TroveError) -> PutResult {
    try put(bytes: bytes, binding: key.map { KeyRequest(key: $0) }, priority: priority)
  }

  /// Bytes in memory up to this size are hashed before anything else, and
  /// looked for in `objects/` (no index read): hashing them costs less than
  /// a look-up that waits for the index a commit may be holding.
  static let bytesHashedFirst: Int64 = 1 << 20

  /// ``put(bytes:key:priority:)`` binding `binding` (a key, or a fetch's
  /// key with its origin) in the transaction that publishes the bytes or
  /// counts their hit.
  func put(bytes: some ContiguousBytes, binding: KeyRequest?, priority: PutPriority)
    throws(TroveError) -> PutResult
  {
    try requireWritable()
    let count = bytes.withUnsafeBytes { Int64($0.count) }
    let admission = try Admission(store: self)
    let limit = admission.sizeLimit(for: "<bytes>", expected: nil)
    try limit.checkAnnounced(count)
    var hashFirst = count > 0 && count <= Self.bytesHashedFirst
    if count > Self.bytesHashedFirst {
      hashFirst = try index().read("look up size") { (tx) throws(TroveError) in
        try tx.hasObject(ofSize: count)
      }
    }
    if hashFirst {
      let digest = bytes.withUnsafeBytes { XXH3Hasher.digest($0) }
      if try objects.find(digest) != nil,
        try objects.recordHit(digest, size: count, binding: binding) != nil
      {
        let keys = binding?.keys ?? []
        if keys.isEmpty { records.note(digest) }
        for key in keys { records.note(digest, key: key) }
        return PutResult(digest: digest, size: count, isDuplicate: true, method: .stream)
      }
    }
    let sweeps = try admission.admit(size: count, priority: priority, input: "<bytes>")
    let writer = try BlobWriter(
      store: self, admission: admission, expectedSize: count, sizeIsExact: true,
      mayCompress: true, priority: priority, sweeps: sweeps, limit: limit, binding: binding)
    try writer.write(bytes)
    let result = try writer.commit(method: .stream)
    writeBack.run(self)
    return result
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
    return try makeWriter(
      expectedSize: expectedSize, priority: priority, source: "<stream>",
      binding: key.map { KeyRequest(key: $0) })
  }

  /// A writer for bytes from `source` (a URL, for messages), admitted
  /// for `expectedSize`. With `exact`, `expectedSize` is the length the
  /// bytes must have: one more fails the write (a server that said how
  /// long a blob is and sends more is cut off there). `binding` is bound
  /// in the transaction that publishes the bytes. Admitted by `sharing`'s
  /// admission when given, else by one of its own.
  func makeWriter(
    expectedSize: Int64?, priority: PutPriority, source: String, exact: Bool = false,
    binding: KeyRequest? = nil, sharing: AdmissionSharing? = nil
  ) throws(TroveError) -> BlobWriter {
    let admission = try AdmissionSharing.admission(sharing, store: self)
    let limit = admission.sizeLimit(for: source, expected: exact ? expectedSize : nil)
    if let expectedSize { try limit.checkAnnounced(expectedSize, isExact: false) }
    let sweeps = try admission.admit(size: expectedSize, priority: priority, input: source)
    return try BlobWriter(
      store: self, admission: admission, expectedSize: expectedSize, mayCompress: true,
      priority: priority, sweeps: sweeps, limit: limit, binding: binding)
  }
}
