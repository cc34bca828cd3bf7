/// The XXH3-128 digest that names a blob.
///
/// Text form: `xxh128:` followed by 32 hex digits, high 64 bits first — the
/// same hex that `xxhsum -H2 FILE` prints for the same bytes.
///
/// XXH3 is fast, not cryptographic: it detects accidents (truncation, bit
/// rot, the wrong file) but an adversary can forge collisions. Keep a
/// publisher's sha256 beside it where content comes from untrusted parties.
public struct BlobDigest: Hashable, Sendable, Comparable, CustomStringConvertible, Codable {
  /// The high 64 bits (printed first).
  public let high: UInt64
  /// The low 64 bits.
  public let low: UInt64

  /// The text form's prefix.
  public static let prefix = "xxh128:"

  /// Makes a digest from its two halves.
  public init(high: UInt64, low: UInt64) {
    self.high = high
    self.low = low
  }

  /// Parses the text form, `xxh128:` and 32 hex digits (either case).
  ///
  /// - Throws: ``TroveError`` with code ``TroveError/Code/invalidDigest``,
  ///   quoting `text` and saying what is wrong with it.
  public init(parsing text: String) throws(TroveError) {
    func invalid(_ why: String) -> TroveError {
      TroveError(.invalidDigest, "invalid digest '\(text)': \(why)", value: text)
    }
    guard text.hasPrefix(Self.prefix) else {
      throw invalid("expected '\(Self.prefix)' followed by 32 hex digits")
    }
    let hex = text.utf8.dropFirst(Self.prefix.utf8.count)
    guard hex.count == 32 else {
      throw invalid("expected 32 hex digits after '\(Self.prefix)', found \(hex.count)")
    }
    guard let parsed = Self(hex: Substring(text.dropFirst(Self.prefix.count))) else {
      throw invalid("'\(String(text.dropFirst(Self.prefix.count)))' is not hexadecimal")
    }
    self = parsed
  }

  /// Parses exactly 32 hex digits (no prefix); `nil` for anything else.
  /// No allocation: listings and index rows parse one per entry.
  init?(hex: Substring) {
    var high: UInt64 = 0
    var low: UInt64 = 0
    var i = 0
    for c in hex.utf8 {
      guard i < 32 else { return nil }
      let v: UInt64
      switch c {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): v = UInt64(c - UInt8(ascii: "0"))
      case UInt8(ascii: "a")...UInt8(ascii: "f"): v = UInt64(c - UInt8(ascii: "a") + 10)
      case UInt8(ascii: "A")...UInt8(ascii: "F"): v = UInt64(c - UInt8(ascii: "A") + 10)
      default: return nil
      }
      if i < 16 { high = high << 4 | v } else { low = low << 4 | v }
      i += 1
    }
    guard i == 32 else { return nil }
    self.init(high: high, low: low)
  }

  /// The 32 lowercase hex digits, high half first (no prefix). One
  /// allocation: every object path is built from it.
  public var hex: String {
    String(unsafeUninitializedCapacity: 32) { out in
      for i in 0..<16 {
        out[i] = Self.digits[Int((high >> UInt64(60 - 4 * i)) & 0xF)]
        out[16 + i] = Self.digits[Int((low >> UInt64(60 - 4 * i)) & 0xF)]
      }
      return 32
    }
  }

  private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

  /// The text form: `xxh128:` and 32 lowercase hex digits.
  public var description: String { Self.prefix + hex }

  public static func < (a: BlobDigest, b: BlobDigest) -> Bool {
    (a.high, a.low) < (b.high, b.low)
  }

  public init(from decoder: any Decoder) throws {
    let text = try decoder.singleValueContainer().decode(String.self)
    self = try BlobDigest(parsing: text)
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    try container.encode(description)
  }
}
