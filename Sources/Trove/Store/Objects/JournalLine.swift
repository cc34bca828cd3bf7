/// A ``JournalRecord`` as one line of `references.log`, written directly:
/// the bytes `JSONEncoder` makes with sorted keys and unescaped slashes (a
/// test holds the two to the same bytes), without its per-call cost, paid
/// for every key a fetch binds. Reading stays with `JSONDecoder`.
struct JournalLine {
  private(set) var bytes: [UInt8] = []
  private static let hex = Array("0123456789abcdef".utf8)

  /// Appends `record` and its newline.
  mutating func append(_ record: JournalRecord) {
    // Keys in the order `.sortedKeys` gives: byte order of their names.
    var opened = false
    if let checksums = record.checksums {
      key("checksums", &opened)
      bytes.append(UInt8(ascii: "["))
      for (i, checksum) in checksums.enumerated() {
        if i > 0 { bytes.append(UInt8(ascii: ",")) }
        string(checksum.description)
      }
      bytes.append(UInt8(ascii: "]"))
    }
    field("digest", record.digest?.description, &opened)
    field("expires", record.expires, &opened)
    field("key", record.key, &opened)
    field("name", record.name, &opened)
    field("op", record.op.rawValue, &opened)
    if let origin = record.origin {
      key("origin", &opened)
      append(origin)
    }
    field("pulled", record.pulled, &opened)
    close(opened)
    bytes.append(0x0A)
  }

  private mutating func append(_ origin: KeyOrigin) {
    var opened = false
    field("contentType", origin.contentType, &opened)
    field("etag", origin.etag, &opened)
    field("expires", origin.expiresNanoseconds, &opened)
    field("fetched", origin.fetchedNanoseconds, &opened)
    field("finalURL", origin.finalURL, &opened)
    field("isImmutable", origin.isImmutable, &opened)
    field("lastModified", origin.lastModified, &opened)
    field("servedBy", origin.servedBy, &opened)
    field("size", origin.size, &opened)
    close(opened)
  }

  /// An object's next key: `{` before its first, `,` before the others.
  private mutating func key(_ name: StaticString, _ opened: inout Bool) {
    bytes.append(opened ? UInt8(ascii: ",") : UInt8(ascii: "{"))
    opened = true
    bytes.append(UInt8(ascii: "\""))
    name.withUTF8Buffer { bytes.append(contentsOf: $0) }
    bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
  }

  private mutating func close(_ opened: Bool) {
    if !opened { bytes.append(UInt8(ascii: "{")) }
    bytes.append(UInt8(ascii: "}"))
  }

  // A nil value is left out, as `encodeIfPresent` leaves it.
  private mutating func field(_ name: StaticString, _ value: String?, _ opened: inout Bool) {
    guard let value else { return }
    key(name, &opened)
    string(value)
  }

  private mutating func field(_ name: StaticString, _ value: Int64?, _ opened: inout Bool) {
    guard let value else { return }
    key(name, &opened)
    bytes.append(contentsOf: String(value).utf8)
  }

  private mutating func field(_ name: StaticString, _ value: Bool?, _ opened: inout Bool) {
    guard let value else { return }
    key(name, &opened)
    bytes.append(contentsOf: (value ? "true" : "false").utf8)
  }

  /// `text` quoted as JSON: `"` and `\` escaped, control characters as
  /// `\b \t \n \f \r` or `\u00XX`; everything else, slashes included, as
  /// its UTF-8.
  private mutating func string(_ text: String) {
    bytes.append(UInt8(ascii: "\""))
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "\""): bytes.append(contentsOf: [0x5C, byte])
      case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, byte])
      case 0x08: bytes.append(contentsOf: [0x5C, UInt8(ascii: "b")])
      case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
      case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
      case 0x0C: bytes.append(contentsOf: [0x5C, UInt8(ascii: "f")])
      case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
      case 0..<0x20:
        bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
        bytes.append(contentsOf: [Self.hex[Int(byte >> 4)], Self.hex[Int(byte & 0xF)]])
      default: bytes.append(byte)
      }
    }
    bytes.append(UInt8(ascii: "\""))
  }
}
