import Foundation

extension Store {
  /// Makes a file at `destination` holding `digest`'s bytes.
  ///
  /// The destination appears whole or not at all: the file is made beside
  /// it under a temporary name, then renamed into place, so no process ever
  /// sees it partly written. An existing destination is refused unless
  /// `replacing` is true. With `durable`, the file is also synced before the
  /// rename, so it is whole after a system crash too; that costs a flush
  /// of every copied byte (cp does not do it, and neither does the default).
  ///
  /// In `.auto` mode a clone (FICLONE) is tried first — it costs
  /// microseconds whatever the size and shares the object's extents
  /// copy-on-write — then `copy_file_range` onto NFS or SMB (a server-side
  /// copy), else a read/write copy verified against the digest; it falls
  /// back only when the filesystems say "not supported" (EXDEV, EOPNOTSUPP,
  /// EINVAL, …) and stops on real failures (EIO, ENOSPC, EDQUOT). Whether
  /// clones work is learnt once per pair of filesystems. The result says
  /// which way it went and why a clone was not made.
  ///
  /// An object the store does not hold is read through its remotes first
  /// (see ``remoteStatus()``): pulled, rehashed, from the first that holds
  /// it; a remote that fails is a warning (``StoreConfiguration/onWarning``).
  ///
  /// - Throws: `.notFound` (neither the store nor a remote holds it), `.destinationExists`,
  ///   `.destinationDirectoryMissing`, `.cloneUnsupported` (`.clone` mode),
  ///   `.linkUnsupported` (`.hardlink` mode across filesystems),
  ///   `.corruptObject` (a copy whose bytes do not match the digest),
  ///   `.noSpace`, `.permissionDenied`, `.ioError`. Nothing is left at the
  ///   destination when it throws.
  ///
  /// A clone or a hard link hands out the object as it is on disk; with
  /// `verify`, the new file is hashed before it is renamed into place (a
  /// read of every byte: the cost of a copy, without its disk space), so
  /// a flipped bit in the store never reaches the destination. Copies and
  /// decompressions are always verified. An object found corrupt by any
  /// of them is moved to the store's `quarantine/` and never served again.
  @discardableResult
  public func materialize(
    _ digest: BlobDigest, at destination: String, mode: LinkMode = .auto, replacing: Bool = false,
    durable: Bool = false, verify: Bool = false
  ) throws(TroveError) -> Materialization {
    let (object, isCompressed) = try openObject(digest, readingThrough: true)
    defer { object.close() }
    var size = try attempt("read", objectFilePath(digest, compressed: isCompressed)) {
      () throws(SystemCallError) in try object.status().size
    }
    if isCompressed && (mode == .clone || mode == .hardlink) {
      throw TroveError(
        mode == .clone ? .cloneUnsupported : .linkUnsupported,
        "cannot \(mode == .clone ? "clone" : "hard-link") '\(destination)': object \(digest) is stored compressed (zstd); get it with mode auto or copy, or store it raw (recompress)",
        path: destination, value: digest.description)
    }

    let (parent, name) = try openDestinationFolder(destination, replacing: replacing)
    defer { parent.close() }

    let temp = ".trove-" + StoreLayout.temporaryName("get")
    var method = MaterializeMethod.hardlink
    var reason: String?
    do throws(TroveError) {
      if mode == .hardlink {
        do throws(SystemCallError) {
          try linkObject(digest, opened: object, to: temp, in: parent)
        } catch  where error.errno == .crossDevice || error.errno.meansUnsupported {
          throw TroveError(
            .linkUnsupported,
            "cannot hard-link '\(destination)' to the store: they are on different filesystems",
            path: destination, cause: error)
        } catch {
          throw TroveError.system(error, "write", path: destination)
        }
      } else {
        let out = try attempt("write", destination) { () throws(SystemCallError) in
          try FileDescriptor.open(
            temp, in: parent, [verify ? .readWrite : .writeOnly, .create, .exclusive],
            permissions: 0o666)
        }
        defer { out.close() }
        if isCompressed {
          size = try decompressVerified(
            object, to: out, digest: digest,
            objectPath: objectFilePath(digest, compressed: true), destination: destination)
          method = .decompress
        } else {
          (method, reason) = try fill(
            out, from: object, digest: digest, size: size, mode: mode, destination: destination)
        }
        if durable {
          try attempt("write", destination) { () throws(SystemCallError) in try out.sync() }
        }
        if verify && (method == .clone || method == .copyFileRange) {
          try checkMaterialized(out, digest: digest, destination: destination)
        }
      }
      if verify && mode == .hardlink {
        try checkMaterialized(object, digest: digest, destination: destination)
      }
      try attempt("write", destination) { () throws(SystemCallError) in
        if replacing {
          try parent.rename(temp, to: name, in: parent)
          // Renaming a hard link onto another link of the same inode (a
          // second hardlink get of one object) does nothing and leaves
          // the temporary name: remove it.
          if mode == .hardlink { try? parent.removeFile(temp) }
        } else {
          try parent.renameWithoutReplacing(temp, to: name, in: parent)
        }
      }
    } catch {
      try? parent.removeFile(temp)
      let error = quarantining(error, digest, object: object, compressed: isCompressed)
      if error.cause?.errno == .fileExists && error.code != .destinationExists {
        throw TroveError(
          .destinationExists, "cannot write '\(destination)': it already exists",
          path: destination)
      }
      throw error
    }
    recordRead(digest)
    countHit(digest)
    return Materialization(
      digest: digest, destination: destination, method: method, size: size,
      fallbackReason: reason)
  }

  /// Opens the folder `destination` is to be made in, after checking it
  /// names a file there that is not taken (unless `replacing`, and then
  /// not by a folder); returns the folder and the file's name in it.
  ///
  /// - Throws: `.invalidArgument`, `.destinationDirectoryMissing`,
  ///   `.destinationExists`.
  func openDestinationFolder(_ destination: String, replacing: Bool) throws(TroveError) -> (
    FileDescriptor, name: String
  ) {
    let (parentPath, name) = Self.split(destination)
    guard !name.isEmpty, name != ".", name != ".." else {
      throw TroveError(
        .invalidArgument, "invalid destination '\(destination)': not a file name",
        path: destination)
    }
    let parent: FileDescriptor
    do throws(SystemCallError) {
      parent = try FileDescriptor.open(parentPath, .directory)
    } catch  where error.errno == .noSuchFileOrDirectory || error.errno == .notDirectory {
      throw TroveError(
        .destinationDirectoryMissing,
        "cannot write '\(destination)': folder '\(parentPath)' does not exist", path: destination,
        cause: error)
    } catch {
      throw TroveError.system(error, "write", path: destination)
    }
    if let existing = try? parent.status(of: name, followSymlinks: false) {
      guard replacing else {
        parent.close()
        throw TroveError(
          .destinationExists, "cannot write '\(destination)': it already exists",
          path: destination)
      }
      if existing.isDirectory {
        parent.close()
        throw TroveError(
          .destinationExists, "cannot write '\(destination)': it is a directory", path: destination)
      }
    }
    return (parent, name)
  }

  /// Hashes a file made from `digest`'s object (a clone, or the object
  /// itself for a hard link) from its start; throws `.corruptObject` when
  /// its bytes are not the digest's.
  private func checkMaterialized(_ file: FileDescriptor, digest: BlobDigest, destination: String)
    throws(TroveError)
  {
    var hasher = XXH3Hasher()
    try attempt("read", destination) { () throws(SystemCallError) in
      try file.seek(to: 0)
      _ = try Transfer.hash(from: file, into: &hasher)
    }
    let actual = hasher.finalize()
    if actual != digest { throw corrupt(digest, actual: actual) }
  }

  /// Hard-links `digest`'s raw object file as `temp` in `parent`, then
  /// checks that the new name is the very file `opened` (the object opened
  /// with `O_NOFOLLOW` and checked to be a regular file): whatever was
  /// swapped in under the object's name meanwhile — a symbolic link, some
  /// other file — is unlinked again and refused (ESTALE), never handed out.
  private func linkObject(
    _ digest: BlobDigest, opened: FileDescriptor, to temp: String, in parent: FileDescriptor
  ) throws(SystemCallError) {
    let folder = try FileDescriptor.open(
      StoreLayout.fanout(digest), in: objectsDirectory, [.directory, .noFollow])
    defer { folder.close() }
    try folder.link(StoreLayout.objectName(digest), to: temp, in: parent)
    let linked = try? parent.status(of: temp, followSymlinks: false)
    let object = try opened.status()
    guard let linked, linked.isRegular, linked.inode == object.inode,
      linked.device == object.device
    else {
      try? parent.removeFile(temp)
      throw SystemCallError("linkat", Errno(rawValue: ESTALE))
    }
  }

  /// Writes `digest`'s bytes to `handle` (standard output, a pipe, a
  /// socket), verifying them against the digest as they pass. Returns the
  /// byte count. A mismatch throws `.corruptObject` after the bytes were
  /// written, so a reader must check the outcome (the CLI exits non-zero).
  @discardableResult
  public func write(_ digest: BlobDigest, to handle: FileHandle) throws(TroveError) -> Int64 {
    let (object, isCompressed) = try openObject(digest, readingThrough: true)
    defer { object.close() }
    let count = try write(
      digest, from: object, isCompressed: isCompressed,
      to: FileDescriptor(rawValue: handle.fileDescriptor), destination: "<output>")
    countHit(digest)
    return count
  }

  /// Writes the bytes of `object`, `digest`'s object opened already, to
  /// `output` (`destination` in messages), verifying them as
  /// ``write(_:to:)`` does. An open descriptor keeps its bytes when the
  /// object is removed meanwhile.
  func write(
    _ digest: BlobDigest, from object: FileDescriptor, isCompressed: Bool,
    to output: FileDescriptor, destination: String
  ) throws(TroveError) -> Int64 {
    object.adviseSequential()
    let count: Int64
    do throws(TroveError) {
      if let small = try smallObject(object, digest: digest, isCompressed: isCompressed) {
        // Small enough to check before a byte goes out: a corrupt object
        // writes nothing.
        try attempt("write", destination) { () throws(SystemCallError) in
          try output.writeAll(small)
        }
        count = Int64(small.count)
      } else {
        count =
          isCompressed
          ? try decompressVerified(
            object, to: output, digest: digest,
            objectPath: objectFilePath(digest, compressed: true), destination: destination)
          : try verifiedCopy(from: object, to: output, digest: digest, destination: destination)
      }
    } catch {
      throw quarantining(error, digest, object: object, compressed: isCompressed)
    }
    recordRead(digest)
    return count
  }

  /// Objects up to this size are read and checked whole before
  /// ``write(_:to:)`` writes any of their bytes.
  static let checkedBeforeWriting: Int64 = 16 << 20

  /// The object's bytes, verified, when they are at most
  /// ``checkedBeforeWriting`` (a compressed object: when its frame says
  /// so); nil for larger ones, which are streamed.
  private func smallObject(_ object: FileDescriptor, digest: BlobDigest, isCompressed: Bool)
    throws(TroveError) -> [UInt8]?
  {
    let path = objectFilePath(digest, compressed: isCompressed)
    let stored = try attempt("read", path) { () throws(SystemCallError) in
      try object.status().size
    }
    if isCompressed {
      let header = UnsafeMutableRawBufferPointer.allocate(byteCount: 18, alignment: 8)
      defer { header.deallocate() }
      let n = try attempt("read", path) { () throws(SystemCallError) -> Int in
        try object.read(into: header, at: 0)
      }
      let size = Zstd.contentSize(ofFrameStart: UnsafeRawBufferPointer(rebasing: header[..<n]))
      guard let size, size <= Self.checkedBeforeWriting else { return nil }
      var out: [UInt8] = []
      out.reserveCapacity(Int(size))
      let tooLong = Errno(rawValue: EFBIG)
      do throws(TroveError) {
        _ = try decompressVerified(
          object, digest: digest, objectPath: path, destination: "<output>"
        ) { (chunk) throws(SystemCallError) in
          // A frame that says less than it holds is corrupt: never more
          // than it said is kept.
          guard out.count + chunk.count <= size else { throw SystemCallError("read", tooLong) }
          out.append(contentsOf: chunk)
        }
      } catch  where error.cause?.errno == tooLong {
        throw TroveError(
          .corruptObject,
          "object '\(path)' is corrupt: its zstd frame holds more than the \(size) bytes its header declares",
          path: path, value: digest.description, remedy: .removeAndStoreAgain)
      }
      return out
    }
    guard stored <= Self.checkedBeforeWriting else { return nil }
    let bytes = try attempt("read", path) { () throws(SystemCallError) in
      try object.readAll(limit: Int(stored) + 1)
    }
    let actual = XXH3Hasher.digest(bytes)
    guard bytes.count == stored, actual == digest else { throw corrupt(digest, actual: actual) }
    return bytes
  }

  /// `digest`'s bytes in memory, verified. For small objects; use
  /// `materialize(_:at:mode:replacing:durable:verify:)` or ``path(for:decompressing:)`` for large ones.
  public func bytes(for digest: BlobDigest) throws(TroveError) -> [UInt8] {
    let (object, isCompressed) = try openObject(digest, readingThrough: true)
    defer { object.close() }
    do throws(TroveError) {
      let bytes = try bytes(of: object, digest: digest, isCompressed: isCompressed)
      countHit(digest)
      return bytes
    } catch {
      throw quarantining(error, digest, object: object, compressed: isCompressed)
    }
  }

  private func bytes(of object: FileDescriptor, digest: BlobDigest, isCompressed: Bool)
    throws(TroveError) -> [UInt8]
  {
    let path = objectFilePath(digest, compressed: isCompressed)
    if isCompressed {
      // Decompression hashes and checks the bytes as they pass.
      var out: [UInt8] = []
      _ = try decompressVerified(
        object, digest: digest, objectPath: path, destination: "<memory>"
      ) {
        (chunk) throws(SystemCallError) in out.append(contentsOf: chunk)
      }
      recordRead(digest)
      return out
    }
    let size = try attempt("read", path) { () throws(SystemCallError) in
      try object.status().size
    }
    let bytes = try attempt("read", path) { () throws(SystemCallError) in
      try object.readAll(limit: Int(size) + 1)
    }
    let actual = XXH3Hasher.digest(bytes)
    guard bytes.count == size else { throw corrupt(digest, actual: actual) }
    guard actual == digest else { throw corrupt(digest, actual: actual) }
    recordRead(digest)
    return bytes
  }

  // MARK: Pieces

  /// Opens `digest`'s object, raw if there is one (it can be cloned),
  /// else compressed; says which. With `readingThrough` (a read served to a
  /// caller), an object the store does not hold is read through its remotes
  /// (``readThrough(_:)``), and one nobody holds counts a miss
  /// (``PendingAccessCounts``).
  ///
  /// - Throws: `.notFound` when there is none.
  func openObject(_ digest: BlobDigest, readingThrough: Bool = false) throws(TroveError) -> (
    FileDescriptor, isCompressed: Bool
  ) {
    if let opened = try objects.open(digest, confirmingMiss: true) { return opened }
    if readingThrough {
      if readThrough(digest), let opened = try objects.open(digest, confirmingMiss: true) {
        return opened
      }
      countMiss(digest)
    }
    throw notFound(digest)
  }

  /// After a read through `object` (one form of `digest`'s object) found
  /// its bytes corrupt (`error`): moves that file to `quarantine/`, so it
  /// is never served again and a put of the bytes stores them afresh, and
  /// returns the error to throw, saying where it went. Errors of any
  /// other kind pass through.
  func quarantining(
    _ error: TroveError, _ digest: BlobDigest, object: FileDescriptor, compressed: Bool
  ) -> TroveError {
    guard error.code == .corruptObject, let inode = try? object.status().inode,
      let moved = try? objects.quarantineCorrupt(digest, compressed: compressed, inode: inode)
    else { return error }
    return TroveError(
      .corruptObject, error.message + "; moved it to '\(moved)'", path: error.path,
      value: error.value, cause: error.cause, remedy: .storeAgain)
  }

  func corrupt(_ digest: BlobDigest, actual: BlobDigest) -> TroveError {
    TroveError(
      .corruptObject,
      "object '\(objectFilePath(digest))' is corrupt: its bytes hash to \(actual), not \(digest)",
      path: objectFilePath(digest), value: digest.description, remedy: .removeAndStoreAgain)
  }

  /// Splits a path into its folder and last component.
  static func split(_ path: String) -> (folder: String, name: String) {
    guard let slash = path.lastIndex(of: "/") else { return (".", path) }
    let folder = String(path[..<slash])
    return (folder.isEmpty ? "/" : folder, String(path[path.index(after: slash)...]))
  }

  /// Fills the empty file `out` with the object's bytes per `mode`; returns
  /// how, and why a clone was not made.
  private func fill(
    _ out: FileDescriptor, from object: FileDescriptor, digest: BlobDigest, size: Int64,
    mode: LinkMode, destination: String
  ) throws(TroveError) -> (MaterializeMethod, String?) {
    var reason: String?
    func copyVerified() throws(TroveError) -> (MaterializeMethod, String?) {
      object.adviseSequential()
      let copied = try verifiedCopy(
        from: object, to: out, digest: digest, destination: destination)
      guard copied == size else {
        throw TroveError(
          .ioError, "cannot copy into '\(destination)': object changed size while copying",
          path: destination)
      }
      return (.copy, reason)
    }
    if mode == .auto || mode == .clone {
      let destinationDevice = try attempt("write", destination) { () throws(SystemCallError) in
        try out.status().device
      }
      var verdict = cloneProbe.verdict(from: device, to: destinationDevice)
      if verdict == nil || verdict == .supported {
        do throws(SystemCallError) {
          try out.cloneContents(from: object)
          cloneProbe.record(.supported, from: device, to: destinationDevice)
          return (.clone, nil)
        } catch  where error.errno.meansUnsupported {
          verdict = .unsupported(error)
          cloneProbe.record(verdict!, from: device, to: destinationDevice)
        } catch {
          throw TroveError.system(error, "clone into", path: destination)
        }
      }
      if case .unsupported(let error) = verdict {
        let kinds = "store on \(kind(object)), destination on \(kind(out))"
        if mode == .clone {
          throw TroveError(
            .cloneUnsupported, "cannot clone into '\(destination)': \(kinds)", path: destination,
            cause: error)
        }
        // The reason alone, with the failed call, as a warning says it.
        reason = TroveError(.cloneUnsupported, kinds, cause: error).description
      }
      // copy_file_range only where it offloads the copy to a server (NFS,
      // SMB); on local filesystems it is slower than read/write and skips
      // the digest check the copy below makes.
      if try !offloadsCopies(out, destination) { return try copyVerified() }
      do throws(SystemCallError) {
        let copied = try Transfer.copyInKernel(from: object, to: out)
        if copied == size { return (.copyFileRange, reason) }
        throw SystemCallError("copy_file_range", .ioError)
      } catch  where error.errno.meansUnsupported {
        // No in-kernel copy here: start again through user space.
        try attempt("write", destination) { () throws(SystemCallError) in
          try out.truncate(to: 0)
          try out.seek(to: 0)
          try object.seek(to: 0)
        }
      } catch {
        throw TroveError.system(error, "copy into", path: destination)
      }
    }
    return try copyVerified()
  }

  private func kind(_ fd: FileDescriptor) -> String {
    (try? fd.filesystemKind().description) ?? "unknown filesystem"
  }

  /// Whether `copy_file_range` into `out` is done by a server (NFS, SMB)
  /// rather than by this machine's CPU.
  private func offloadsCopies(_ out: FileDescriptor, _ destination: String) throws(TroveError)
    -> Bool
  {
    let kind = try attempt("write", destination) { () throws(SystemCallError) in
      try out.filesystemKind()
    }
    return kind == .nfs || kind == .cifs || kind == .smb2
  }

  /// Copies through user space, hashing; throws `.corruptObject` on mismatch.
  private func verifiedCopy(
    from object: FileDescriptor, to out: FileDescriptor, digest: BlobDigest, destination: String
  ) throws(TroveError) -> Int64 {
    var hasher = XXH3Hasher()
    let copied: Int64
    do throws(Transfer.PumpError) {
      copied = try Transfer.pump(from: object, to: out, hasher: &hasher)
    } catch {
      switch error {
      case .reading(let e): throw TroveError.system(e, "read", path: objectFilePath(digest))
      case .writing(let e): throw TroveError.system(e, "write", path: destination)
      }
    }
    let actual = hasher.finalize()
    guard actual == digest else { throw corrupt(digest, actual: actual) }
    return copied
  }
}
