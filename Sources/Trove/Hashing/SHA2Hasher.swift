import CCrypto

/// A streaming SHA-256 or SHA-512 hasher over OpenSSL's libcrypto (EVP),
/// which uses SHA-NI or AVX2 where the CPU has them. Used only where a
/// publisher's checksum is asked for: XXH3-128 names objects.
final class SHA2Hasher: ByteHashing {
  let algorithm: ChecksumAlgorithm
  private let hasher: EVPHasher

  /// A hasher for `algorithm`, which must be `.sha256` or `.sha512`.
  init(_ algorithm: ChecksumAlgorithm) {
    precondition(algorithm != .xxh128, "XXH3-128 has its own hasher")
    hasher = EVPHasher(digest: algorithm == .sha256 ? EVP_sha256() : EVP_sha512())
    self.algorithm = algorithm
  }

  func update(_ bytes: UnsafeRawBufferPointer) { hasher.update(bytes) }

  /// The checksum of everything fed; call once.
  func finalize() -> Checksum { Checksum(algorithm, bytes: hasher.finalize()) }
}
