import CCrypto
import Foundation

/// Ed25519 through OpenSSL's libcrypto (`EVP_PKEY_ED25519`, one-shot
/// `EVP_DigestSign`/`EVP_DigestVerify` with no digest, as RFC 8032 has it).
enum Ed25519 {
  /// A private key: its 32-byte seed, and the OpenSSL key made from it.
  final class PrivateKey: @unchecked Sendable {
    let seed: [UInt8]
    let publicKey: PublicSigningKey
    private let key: OpaquePointer

    /// A new key from OpenSSL's random generator.
    static func generate() -> PrivateKey? {
      guard let context = EVP_PKEY_CTX_new_id(trove_evp_pkey_ed25519(), nil) else { return nil }
      defer { EVP_PKEY_CTX_free(context) }
      var key: OpaquePointer?
      guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_keygen(context, &key) == 1, let key
      else { return nil }
      defer { EVP_PKEY_free(key) }
      var seed = [UInt8](repeating: 0, count: 32)
      var length = seed.count
      guard EVP_PKEY_get_raw_private_key(key, &seed, &length) == 1, length == 32 else {
        return nil
      }
      return PrivateKey(seed: seed)
    }

    /// The key whose seed is `seed` (32 bytes); nil for any other length.
    init?(seed: [UInt8]) {
      guard seed.count == 32,
        let key = EVP_PKEY_new_raw_private_key(trove_evp_pkey_ed25519(), nil, seed, seed.count)
      else { return nil }
      var raw = [UInt8](repeating: 0, count: 32)
      var length = raw.count
      guard EVP_PKEY_get_raw_public_key(key, &raw, &length) == 1, length == 32,
        let publicKey = PublicSigningKey(raw: raw)
      else {
        EVP_PKEY_free(key)
        return nil
      }
      self.seed = seed
      self.publicKey = publicKey
      self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    /// The 64-byte signature of `message`.
    func sign(_ message: [UInt8]) -> [UInt8] {
      guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
      defer { EVP_MD_CTX_free(context) }
      var signature = [UInt8](repeating: 0, count: 64)
      var length = signature.count
      guard EVP_DigestSignInit(context, nil, nil, nil, key) == 1,
        EVP_DigestSign(context, &signature, &length, message, message.count) == 1, length == 64
      else { fatalError("EVP_DigestSign failed for an Ed25519 key") }
      return signature
    }
  }

  /// Whether `signature` is `key`'s signature of `message`.
  static func verify(_ signature: [UInt8], of message: [UInt8], by key: PublicSigningKey) -> Bool {
    guard signature.count == 64,
      let pkey = EVP_PKEY_new_raw_public_key(trove_evp_pkey_ed25519(), nil, key.raw, key.raw.count)
    else { return false }
    defer { EVP_PKEY_free(pkey) }
    guard let context = EVP_MD_CTX_new() else { return false }
    defer { EVP_MD_CTX_free(context) }
    guard EVP_DigestVerifyInit(context, nil, nil, nil, pkey) == 1 else { return false }
    return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
  }
}

/// An Ed25519 public key, written `ed25519:BASE64` (the 32 raw bytes in
/// standard base64): what `trove keygen` prints and `remote add --trust`
/// takes.
public struct PublicSigningKey: Sendable, Hashable, Codable, CustomStringConvertible {
  /// The key's 32 bytes.
  let raw: [UInt8]

  init?(raw: [UInt8]) {
    guard raw.count == 32 else { return nil }
    self.raw = raw
  }

  /// Parses `ed25519:BASE64`.
  ///
  /// - Throws: `.invalidArgument` quoting `text`: another prefix, or base64
  ///   that is not 32 bytes.
  public init(parsing text: String) throws(TroveError) {
    let prefix = "ed25519:"
    guard text.hasPrefix(prefix),
      let bytes = Data(base64Encoded: String(text.dropFirst(prefix.count))),
      let key = PublicSigningKey(raw: Array(bytes))
    else {
      throw TroveError(
        .invalidArgument,
        "invalid public key '\(text)': expected ed25519: and the 32-byte key in base64, as 'trove keygen' prints it",
        value: text)
    }
    self = key
  }

  /// `ed25519:BASE64`.
  public var description: String { "ed25519:" + Data(raw).base64EncodedString() }

  public init(from decoder: any Decoder) throws {
    let text = try decoder.singleValueContainer().decode(String.self)
    do throws(TroveError) {
      self = try PublicSigningKey(parsing: text)
    } catch {
      throw DecodingError.dataCorrupted(
        DecodingError.Context(codingPath: decoder.codingPath, debugDescription: error.message))
    }
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    try container.encode(description)
  }
}
