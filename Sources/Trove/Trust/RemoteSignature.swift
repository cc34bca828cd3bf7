import Foundation

/// One signature on a remote entry: the signer's public key, the name it
/// was given at `keygen` (a label, never trusted), and the Ed25519
/// signature of the entry's ``SignedText`` in base64.
struct RemoteSignature: Codable, Sendable, Hashable {
  var key: PublicSigningKey
  var name: String
  var signature: String

  enum CodingKeys: String, CodingKey {
    case key, name
    case signature = "sig"
  }

  /// Whether this is a valid signature of `text` by one of `trusted`.
  func verifies(_ text: SignedText, trusting trusted: Set<PublicSigningKey>) -> Bool {
    guard trusted.contains(key), let raw = Data(base64Encoded: signature) else { return false }
    return Ed25519.verify(Array(raw), of: text.bytes, by: key)
  }
}

/// What a signer says of an object it published: its length and SHA-256
/// beside its XXH3-128 name. On a remote at `sigs/<aa>/<hex>.json`
/// (WebDAV) or `trove:sig:<hex>` (Redis), written after the blob.
struct SignedObjectEntry: Codable, Sendable, Hashable {
  var format: Int
  var digest: String
  var size: Int64
  /// `sha256:HEX`.
  var sha256: String
  var signatures: [RemoteSignature]

  static let currentFormat = 1
  /// The largest entry read.
  static let sizeLimit = 64 * 1024
  /// The most signatures a signer keeps beside its own.
  static let keptSignatures = 15

  /// The error for an entry at `source` on `remote` longer than
  /// ``sizeLimit``: reading stops there, and the remote counts as failing
  /// (its breaker), as for a key record too long.
  static func tooLong(remote: String, source: String) -> TroveError {
    TroveError(
      .unavailable, "remote '\(remote)': \(source) is \(tooLongReason); not read", value: source)
  }

  /// Whether `error` is ``tooLong(remote:source:)``'s.
  static func isTooLong(_ error: TroveError) -> Bool {
    error.code == .unavailable && error.message.contains(tooLongReason)
  }

  private static let tooLongReason = "longer than 64 KiB, more than a signed entry can be"

  /// The fields this entry's signatures cover, when they parse.
  var signedText: SignedText? {
    guard format == Self.currentFormat, let digest = try? BlobDigest(parsing: digest),
      let sha = try? Checksum(parsing: sha256), sha.algorithm == .sha256, size >= 0
    else { return nil }
    return .object(digest: digest, size: size, sha256: sha)
  }

  func encoded() -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return Array((try? encoder.encode(self)) ?? Data()) + [0x0A]
  }

  /// The entry of `digest` in `bytes`; nil when they are not one.
  static func decode(_ bytes: [UInt8], digest: BlobDigest) -> SignedObjectEntry? {
    guard bytes.count <= sizeLimit,
      let entry = try? JSONDecoder().decode(Self.self, from: Data(bytes)),
      entry.digest == digest.description
    else { return nil }
    return entry
  }
}

/// The signed part of a key record (``RemoteKeyRecord/signed``): the
/// object's length and SHA-256, when it was signed, and the signatures
/// of the record's ``SignedText``.
struct KeyRecordSignatures: Codable, Sendable, Hashable {
  var format: Int
  var size: Int64
  /// `sha256:HEX`.
  var sha256: String
  /// Seconds since 1970.
  var time: Int64
  var signatures: [RemoteSignature]
}

/// What a trusted signer vouched for: the object's length and SHA-256.
struct SignedFacts: Sendable, Hashable {
  var size: Int64
  var sha256: Checksum
}
