/// An algorithm a publisher's checksum can be in.
public enum ChecksumAlgorithm: String, Sendable, Hashable, Codable, CaseIterable {
  /// XXH3-128: the digest that names objects.
  case xxh128
  /// SHA-256 (OpenSSL's libcrypto).
  case sha256
  /// SHA-512 (OpenSSL's libcrypto).
  case sha512

  /// Length of the hex text.
  var hexLength: Int {
    switch self {
    case .xxh128: 32
    case .sha256: 64
    case .sha512: 128
    }
  }
}

/// A checksum in text form, `sha256:HEX`, `sha512:HEX` or `xxh128:HEX`: what
/// a publisher gives beside a download (a lock file's hash, an index's
/// `cksum`). Hex is kept lowercase.
public struct Checksum: Sendable, Hashable, Codable, CustomStringConvertible {
  /// The algorithm.
  public let algorithm: ChecksumAlgorithm
  /// The value, as lowercase hex.
  public let hex: String

  /// Parses `algo:HEX` (either case).
  ///
  /// - Throws: `.invalidDigest` quoting `text` and what is wrong with it.
  public init(parsing text: String) throws(TroveError) {
    func invalid(_ why: String) -> TroveError {
      TroveError(.invalidDigest, "invalid checksum '\(text)': \(why)", value: text)
    }
    guard let colon = text.firstIndex(of: ":"),
      let algorithm = ChecksumAlgorithm(rawValue: text[..<colon].lowercased())
    else {
      throw invalid("expected sha256:, sha512: or xxh128: followed by hex digits")
    }
    let hex = text[text.index(after: colon)...].lowercased()
    guard hex.count == algorithm.hexLength else {
      throw invalid(
        "expected \(algorithm.hexLength) hex digits after '\(algorithm.rawValue):', found \(hex.count)"
      )
    }
    guard hex.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
      throw invalid("'\(hex)' is not hexadecimal")
    }
    self.algorithm = algorithm
    self.hex = hex
  }

  /// A checksum from lowercase hex already checked.
  init(_ algorithm: ChecksumAlgorithm, hex: String) {
    self.algorithm = algorithm
    self.hex = hex
  }

  /// The checksum of raw digest bytes.
  init(_ algorithm: ChecksumAlgorithm, bytes: [UInt8]) {
    self.algorithm = algorithm
    let digits = Array("0123456789abcdef".utf8)
    hex = String(
      decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
  }

  /// An object's own digest as a checksum.
  public init(_ digest: BlobDigest) {
    algorithm = .xxh128
    hex = digest.hex
  }

  /// The digest, when this is an XXH3-128 checksum.
  public var digest: BlobDigest? {
    algorithm == .xxh128 ? BlobDigest(hex: Substring(hex)) : nil
  }

  /// `algo:hex`.
  public var description: String { algorithm.rawValue + ":" + hex }

  public init(from decoder: any Decoder) throws {
    self = try Checksum(parsing: try decoder.singleValueContainer().decode(String.self))
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    try container.encode(description)
  }
}
