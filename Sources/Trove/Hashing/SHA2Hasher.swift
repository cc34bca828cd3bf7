import CCrypto

/// A streaming SHA-256 or SHA-512 hasher over OpenSSL's libcrypto (EVP),
/// which uses SHA-NI or AVX2 where the CPU has them. Used only where a
/// publisher's checksum is asked for: XXH3-128 names objects.
final class SHA2Hasher {
  let algorithm: ChecksumAlgorithm
  private let context: OpaquePointer

  /// A hasher for `algorithm`, which must be `.sha256` or `.sha512`.
  init(_ algorithm: ChecksumAlgorithm) {
    precondition(algorithm != .xxh128, "XXH3-128 has its own hasher")
    guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
    let md = algorithm == .sha256 ? EVP_sha256() : EVP_sha512()
    guard EVP_DigestInit_ex(context, md, nil) == 1 else { fatalError("EVP_DigestInit_ex failed") }
    self.algorithm = algorithm
    self.context = context
  }

  deinit { EVP_MD_CTX_free(context) }

  func update(_ bytes: UnsafeRawBufferPointer) {
    guard let base = bytes.baseAddress, bytes.count > 0 else { return }
    _ = EVP_DigestUpdate(context, base, bytes.count)
  }

  /// The checksum of everything fed; call once.
  func finalize() -> Checksum {
    var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
    var length: UInt32 = 0
    _ = out.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &length) }
    return Checksum(algorithm, bytes: Array(out[..<Int(length)]))
  }
}
