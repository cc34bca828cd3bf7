import CCrypto

/// Something that takes the bytes of a stream as they pass, for a second
/// digest beside the object's (``BlobWriter/companion``).
protocol ByteHashing: AnyObject {
  func update(_ bytes: UnsafeRawBufferPointer)
}

/// A streaming hasher over one of libcrypto's digests by its name (`SHA1`,
/// `SHA256`, `MD5`, `SHA224`): the digests other formats name, such as a
/// zsync control file's, not the checksums Trove records.
final class EVPHasher: ByteHashing {
  private let context: OpaquePointer

  /// A hasher for `md`, or nil when libcrypto cannot start it (a digest
  /// of a provider not loaded).
  private init?(md: OpaquePointer?) {
    guard let md, let context = EVP_MD_CTX_new() else { return nil }
    guard EVP_DigestInit_ex(context, md, nil) == 1 else {
      EVP_MD_CTX_free(context)
      return nil
    }
    self.context = context
  }

  /// A hasher for `name`, or nil when libcrypto offers no digest of it.
  convenience init?(name: String) {
    self.init(md: EVP_get_digestbyname(name))
  }

  /// A hasher for one of libcrypto's built-in digests (`EVP_sha256()`).
  convenience init(digest md: OpaquePointer?) {
    self.init(md: md)!
  }

  deinit { EVP_MD_CTX_free(context) }

  func update(_ bytes: UnsafeRawBufferPointer) {
    guard let base = bytes.baseAddress, bytes.count > 0 else { return }
    _ = EVP_DigestUpdate(context, base, bytes.count)
  }

  /// The digest of everything fed; call once.
  func finalize() -> [UInt8] {
    var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
    var length: UInt32 = 0
    _ = out.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &length) }
    return Array(out[..<Int(length)])
  }

  /// The digest of `bytes` by `name`, or nil when libcrypto has none.
  static func digest(_ name: String, of bytes: UnsafeRawBufferPointer) -> [UInt8]? {
    if name == "MD4" {
      var out = [UInt8](repeating: 0, count: 16)
      out.withUnsafeMutableBufferPointer {
        trove_md4(bytes.baseAddress, bytes.count, $0.baseAddress)
      }
      return out
    }
    guard let hasher = EVPHasher(name: name) else { return nil }
    hasher.update(bytes)
    return hasher.finalize()
  }
}
