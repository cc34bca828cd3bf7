import Foundation

/// What ``Store/pull(_:from:)`` did.
public struct RemotePull: Sendable, Hashable, Codable {
  /// The object's digest.
  public var digest: BlobDigest
  /// Its length.
  public var size: Int64
  /// False when the store held it already (nothing was asked of the remote).
  public var downloaded: Bool
}

/// One-shot transfers between a store and one of its remotes. Every byte
/// that comes from a remote goes through the store's ``BlobWriter``, which
/// hashes it, and is committed only when it matches the digest it was
/// asked for: a remote is a trust boundary.
extension Store {
  /// The backend for `spec`, after its layout record was read: a remote
  /// laid out in a way this build cannot use is refused. With `writing`,
  /// a remote with no record gets this build's.
  func openRemote(_ spec: RemoteSpec, writing: Bool) throws(TroveError) -> any RemoteBackend {
    let backend = try spec.backend()
    if try backend.readLayout() == nil, writing {
      try backend.writeLayout(.current)
    }
    return backend
  }

  /// Copies `digest`'s blob from the remote named `remote` into the store,
  /// unless the store holds it already.
  ///
  /// - Throws: `.notFound` when the remote does not hold it;
  ///   `.checksumMismatch` when the remote's bytes are not `digest`'s
  ///   (nothing is stored); `.unavailable` or `.transferFailed` when the
  ///   remote cannot be reached or the transfer breaks (nothing is stored).
  @discardableResult
  public func pull(_ digest: BlobDigest, from remote: String) throws(TroveError) -> RemotePull {
    let spec = try self.remote(named: remote)
    if let entry = try entry(for: digest) {
      return RemotePull(digest: digest, size: entry.size, downloaded: false)
    }
    let backend = try openRemote(spec, writing: false)
    return try pull(digest, from: backend, spec: spec)
  }

  func pull(_ digest: BlobDigest, from backend: any RemoteBackend, spec: RemoteSpec)
    throws(TroveError) -> RemotePull
  {
    guard let size = try backend.size(digest) else {
      throw TroveError(
        .notFound, "remote '\(spec.name)' does not hold \(digest)", value: digest.description)
    }
    let writer = try makeWriter(
      expectedSize: size, priority: .important, source: "remote '\(spec.name)'", exact: true)
    do throws(TroveError) {
      guard try backend.download(digest, from: 0, into: writer) != nil else {
        throw TroveError(
          .notFound, "remote '\(spec.name)' does not hold \(digest)", value: digest.description)
      }
      let result = try writer.commit(expecting: digest, size: size)
      noteHolding(spec.name, digest, .held)
      return RemotePull(digest: digest, size: result.size, downloaded: true)
    } catch  where error.code == .checksumMismatch {
      writer.cancel()
      throw TroveError(
        .checksumMismatch,
        "remote '\(spec.name)' sent bytes that are not \(digest) (\(error.message)); nothing stored",
        value: digest.description)
    } catch {
      writer.cancel()
      throw error
    }
  }

  /// Uploads `digest`'s object to the remote named `remote`, unless the
  /// remote holds it already or it is longer than the remote's
  /// `max-object-size`. The object is verified against its digest first
  /// (a corrupt local copy is never shared).
  ///
  /// - Throws: `.notFound` when the store does not hold it;
  ///   `.permissionDenied` when the remote is read-only; `.corruptObject`
  ///   when the local copy is damaged; `.unavailable` or
  ///   `.transferFailed` when the remote fails.
  @discardableResult
  public func push(_ digest: BlobDigest, to remote: String) throws(TroveError) -> RemoteUpload {
    let spec = try self.remote(named: remote)
    guard !spec.readOnly else {
      throw TroveError(
        .permissionDenied,
        "remote '\(spec.name)' is read-only: this store does not upload to it", value: spec.name)
    }
    guard let entry = try entry(for: digest) else { throw notFound(digest) }
    if let limit = spec.sizeLimit, entry.size > limit {
      noteHolding(spec.name, digest, .tooLarge)
      return .tooLarge
    }
    let backend = try openRemote(spec, writing: true)
    let upload = try push(digest, to: backend)
    noteHolding(spec.name, digest, .held)
    return upload
  }

  func push(_ digest: BlobDigest, to backend: any RemoteBackend) throws(TroveError) -> RemoteUpload
  {
    let upload = try withVerifiedCopy(of: digest) { (file, size) throws(TroveError) in
      try backend.upload(digest, from: file, size: size)
    }
    // Then the keys that name it (never before: a reader that finds a key
    // finds its blob), with what fetches learnt and the checksums.
    let (keys, checksums) = try index().read("read the keys of \(digest)") {
      (tx) throws(TroveError) in (try tx.keys(of: digest), try tx.checksums(of: digest))
    }
    for binding in keys {
      try backend.writeKeyRecord(
        RemoteKeyRecord(
          key: binding.key, digest: digest.description, origin: binding.origin,
          checksums: checksums.map(\.description)))
    }
    return upload
  }

  /// Gives `body` a descriptor of `digest`'s bytes, checked against the
  /// digest: the object file itself when it is stored raw (hashed first),
  /// else a temp file in `tmp/` it is decompressed into (removed after).
  private func withVerifiedCopy<T>(
    of digest: BlobDigest, _ body: (FileDescriptor, Int64) throws(TroveError) -> T
  ) throws(TroveError) -> T {
    let (object, isCompressed) = try openObject(digest)
    defer { object.close() }
    let path = objectFilePath(digest, compressed: isCompressed)
    if !isCompressed {
      let size = try attempt("read", path) { () throws(SystemCallError) in try object.status().size
      }
      var hasher = XXH3Hasher()
      let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 8)
      defer { buffer.deallocate() }
      var offset: Int64 = 0
      while true {
        let n = try attempt("read", path) { () throws(SystemCallError) in
          try object.read(into: buffer, at: offset)
        }
        if n == 0 { break }
        hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        offset += Int64(n)
      }
      guard hasher.finalize() == digest, offset == size else {
        throw TroveError(
          .corruptObject,
          "object \(digest) in store '\(root)' is corrupt (its bytes do not match its digest); not uploaded; run 'trove verify --repair'",
          path: path, value: digest.description)
      }
      return try body(object, size)
    }
    let temp = StoreLayout.temporaryName("push")
    let file = try attempt("create temporary file in", tmpPath) { () throws(SystemCallError) in
      try FileDescriptor.open(temp, in: tmpDirectory, [.readWrite, .create, .exclusive])
    }
    defer {
      file.close()
      try? tmpDirectory.removeFile(temp)
    }
    let size = try write(
      digest, to: FileHandle(fileDescriptor: file.rawValue, closeOnDealloc: false))
    return try body(file, size)
  }
}
