import CXXHash
import Foundation

/// A streaming XXH3-128 hasher over Debian's libxxhash, using the
/// runtime-dispatched (AVX2/AVX-512) update.
///
/// Feed it large buffers (64 KiB or more): small updates are dominated by
/// call overhead. Not copyable: it owns the C state and frees it.
public struct XXH3Hasher: ~Copyable {
  private let state: OpaquePointer

  /// A hasher with nothing fed yet.
  public init() {
    guard let state = XXH3_createState() else { fatalError("XXH3_createState: out of memory") }
    XXH3_128bits_reset(state)
    self.state = state
  }

  deinit { XXH3_freeState(state) }

  /// Feeds `bytes` to the hash.
  public mutating func update(_ bytes: UnsafeRawBufferPointer) {
    guard let base = bytes.baseAddress, bytes.count > 0 else { return }
    _ = XXH3_128bits_update_dispatch(state, base, bytes.count)
  }

  /// Feeds `bytes` to the hash.
  public mutating func update(_ bytes: some ContiguousBytes) {
    bytes.withUnsafeBytes { update($0) }
  }

  /// Forgets everything fed: the hasher is as new.
  public mutating func reset() {
    XXH3_128bits_reset(state)
  }

  /// The digest of everything fed so far (the hasher may be fed more).
  public func finalize() -> BlobDigest {
    let h = XXH3_128bits_digest(state)
    return BlobDigest(high: h.high64, low: h.low64)
  }

  /// The digest of `bytes` in one call.
  public static func digest(_ bytes: UnsafeRawBufferPointer) -> BlobDigest {
    let h = XXH3_128bits_dispatch(bytes.baseAddress, bytes.count)
    return BlobDigest(high: h.high64, low: h.low64)
  }

  /// The digest of `bytes` in one call.
  public static func digest(_ bytes: some ContiguousBytes) -> BlobDigest {
    bytes.withUnsafeBytes { digest($0) }
  }
}

extension XXH3Hasher {
  /// The digest of the file at `path`, read sequentially in 1 MiB blocks.
  ///
  /// - Throws: ``TroveError`` naming the path and the failing call;
  ///   `.sourceNotFile` for a folder.
  public static func digest(ofFile path: String) throws(TroveError) -> BlobDigest {
    var hasher = XXH3Hasher()
    let fd = try attempt("read", path) { () throws(SystemCallError) in
      try FileDescriptor.open(path)
    }
    defer { fd.close() }
    let status = try attempt("read", path) { () throws(SystemCallError) in try fd.status() }
    if status.isDirectory {
      throw TroveError(.sourceNotFile, "cannot hash '\(path)': it is a directory", path: path)
    }
    fd.adviseSequential()
    _ = try attempt("read", path) { () throws(SystemCallError) in
      try Transfer.hash(from: fd, into: &hasher)
    }
    return hasher.finalize()
  }
}
