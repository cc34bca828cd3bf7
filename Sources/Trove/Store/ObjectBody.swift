#if canImport(Glibc)
  import Glibc
#endif

/// An object opened to be served over the network (`trove serve`): its
/// stored file, open, with what a response needs to know of it — its
/// length, whether it is a zstd frame, the frame's length. The bytes go
/// out as they are stored (the sender hashes nothing: a peer rehashes what
/// it receives, as every remote read does); a compressed object is read
/// decompressed through ``DecompressedReader``, or sent as its frame.
///
/// The descriptor stays valid when the object is evicted meanwhile, so a
/// response started is finished with the bytes it started with.
@_spi(Serving)
public final class ObjectBody: @unchecked Sendable {
  /// The object's digest.
  public let digest: BlobDigest
  /// Its length: the bytes a reader gets, decompressed.
  public let size: Int64
  /// Whether the file is a zstd frame.
  public let isCompressed: Bool
  /// The file's length: ``size`` when raw, the frame's when compressed.
  public let storedSize: Int64
  private let path: String
  private var file: FileDescriptor?

  init(
    digest: BlobDigest, file: FileDescriptor, path: String, size: Int64, isCompressed: Bool,
    storedSize: Int64
  ) {
    self.digest = digest
    self.file = file
    self.path = path
    self.size = size
    self.isCompressed = isCompressed
    self.storedSize = storedSize
  }

  deinit { file?.close() }

  /// Hands the open file over to the caller, who closes it (a server that
  /// sends it with `sendfile` and closes it when the response is done);
  /// nil once it was handed over.
  public func takeDescriptor() -> Int32? {
    defer { file = nil }
    return file?.rawValue
  }

  /// A reader of the decompressed bytes from `offset` on (a compressed
  /// object's; a raw object's file is read as it is). Reading from the
  /// middle decompresses and drops what comes before. The reader owns the
  /// file: this body has none afterwards.
  ///
  /// - Throws: `.corruptObject` when the frame is damaged before `offset`.
  public func decompressedReader(from offset: Int64) throws(TroveError) -> DecompressedReader {
    guard let file else {
      throw TroveError(.invalidArgument, "the file of \(digest) was handed over already")
    }
    self.file = nil
    let reader = try DecompressedReader(file: file, digest: digest, path: path)
    if offset > 0 { try reader.skip(offset) }
    return reader
  }
}

/// A compressed object's bytes, decompressed as they are asked for.
@_spi(Serving)
public final class DecompressedReader: @unchecked Sendable {
  private let file: FileDescriptor
  private let reader: ZstdReader
  private let digest: BlobDigest
  private let path: String

  init(file: FileDescriptor, digest: BlobDigest, path: String) throws(TroveError) {
    do throws(Zstd.StreamError) {
      reader = try ZstdReader(file)
    } catch {
      file.close()
      throw TroveError(.ioError, "cannot decompress '\(path)': out of memory", path: path)
    }
    self.file = file
    self.digest = digest
    self.path = path
  }

  deinit { file.close() }

  /// Fills `buffer` with the next bytes; 0 at the end.
  ///
  /// - Throws: `.corruptObject` for a damaged frame, `.ioError` when the
  ///   file cannot be read.
  public func read(into buffer: UnsafeMutableRawBufferPointer) throws(TroveError) -> Int {
    do throws(Zstd.StreamError) {
      return try reader.read(into: buffer)
    } catch {
      throw failure(error)
    }
  }

  fileprivate func skip(_ count: Int64) throws(TroveError) {
    do throws(Zstd.StreamError) {
      try reader.skip(count)
    } catch {
      throw failure(error)
    }
  }

  private func failure(_ error: Zstd.StreamError) -> TroveError {
    switch error {
    case .reading(let cause), .writing(let cause):
      return TroveError.system(cause, "read", path: path)
    case .codec(let failure):
      return TroveError(
        .corruptObject, "object '\(path)' is corrupt: \(failure)", path: path,
        value: digest.description, remedy: .removeAndStoreAgain)
    }
  }
}

extension Store {
  /// Opens `digest`'s object to serve it: raw if there is a raw file,
  /// else its zstd frame. With `recordingRead` (a body is going out) the
  /// read counts as a hit and refreshes the object's place in the LRU
  /// order, as any read does; a look (HEAD, a 304) records nothing. The
  /// remotes are not asked: a server answers from its own store.
  ///
  /// - Returns: nil when the store does not hold it.
  /// - Throws: `.corruptObject` when a frame does not declare its length
  ///   and the index has none; `.ioError` when the file cannot be read.
  @_spi(Serving)
  public func openBody(_ digest: BlobDigest, recordingRead: Bool) throws(TroveError)
    -> ObjectBody?
  {
    guard let (file, isCompressed) = try objects.open(digest, confirmingMiss: true) else {
      return nil
    }
    let path = objectFilePath(digest, compressed: isCompressed)
    do throws(TroveError) {
      let stored = try attempt("read", path) { () throws(SystemCallError) in
        try file.status().size
      }
      var size = stored
      if isCompressed {
        let header = UnsafeMutableRawBufferPointer.allocate(byteCount: 18, alignment: 8)
        defer { header.deallocate() }
        let n = try attempt("read", path) { () throws(SystemCallError) -> Int in
          try file.read(into: header, at: 0)
        }
        if let declared = Zstd.contentSize(
          ofFrameStart: UnsafeRawBufferPointer(rebasing: header[..<n]))
        {
          size = declared
        } else if let entry = try entry(for: digest) {
          size = entry.size
        } else {
          throw TroveError(
            .corruptObject,
            "object '\(path)' is corrupt: its zstd frame declares no length", path: path,
            value: digest.description, remedy: .removeAndStoreAgain)
        }
      }
      if recordingRead {
        guard recordRead(digest) == .kept else {
          file.close()
          return nil
        }
        countHit(digest)
      }
      return ObjectBody(
        digest: digest, file: file, path: path, size: size, isCompressed: isCompressed,
        storedSize: stored)
    } catch {
      file.close()
      throw error
    }
  }

  /// Writes the access counts not written yet (hits and misses are
  /// written a second after the first, on the next read): a server
  /// stopping calls it, so its last reads are counted.
  @_spi(Serving)
  public func flushAccessCounts() { writeAccessCounts() }
}
