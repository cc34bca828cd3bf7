/// A ``JournalRecord`` as one line of `references.log`, written directly:
/// the bytes `JSONEncoder` makes with sorted keys and unescaped slashes (a
/// test holds the two to the same bytes), without its per-call cost, paid
/// for every key a fetch binds. Reading stays with `JSONDecoder`.
struct JournalLine {
  private(set) var bytes: [UInt8] = []

  /// Appends `record` and its newline.
  mutating func append(_ record: JournalRecord) {
    // Keys in the order `.sortedKeys` gives: byte order of their names.
    var object = ObjectWriter()
    if let checksums = record.checksums {
      object.key("checksums", &bytes)
      bytes.append(UInt8(ascii: "["))
      for (i, checksum) in checksums.enumerated() {
        if i > 0 { bytes.append(UInt8(ascii: ",")) }
        string(checksum.description)
      }
      bytes.append(UInt8(ascii: "]"))
    }
    if let digest = record.digest {
      object.key("digest", &bytes)
      string(digest.description)
    }
    if let expires = record.expires {
      object.key("expires", &bytes)
      integer(expires)
    }
    if let key = record.key {
      object.key("key", &bytes)
      string(key)
    }
    if let name = record.name {
      object.key("name", &bytes)
      string(name)
    }
    object.key("op", &bytes)
    string(record.op.rawValue)
    if let origin = record.origin {
      object.key("origin", &bytes)
      append(origin)
    }
    if let pulled = record.pulled {
      object.key("pulled", &bytes)
      boolean(pulled)
    }
    object.end(&bytes)
    bytes.append(0x0A)
  }

  private mutating func append(_ origin: KeyOrigin) {
    var object = ObjectWriter()
    if let contentType = origin.contentType {
      object.key("contentType", &bytes)
      string(contentType)
    }
    if let etag = origin.etag {
      object.key("etag", &bytes)
      string(etag)
    }
    if let expires = origin.expiresNanoseconds {
      object.key("expires", &bytes)
      integer(expires)
    }
    object.key("fetched", &bytes)
    integer(origin.fetchedNanoseconds)
    if let finalURL = origin.finalURL {
      object.key("finalURL", &bytes)
      string(finalURL)
    }
    object.key("isImmutable", &bytes)
    boolean(origin.isImmutable)
    if let lastModified = origin.lastModified {
      object.key("lastModified", &bytes)
      string(lastModified)
    }
    if let servedBy = origin.servedBy {
      object.key("servedBy", &bytes)
      string(servedBy)
    }
    object.key("size", &bytes)
    integer(origin.size)
    object.end(&bytes)
  }

  /// Opens an object at its first key, separates the others, closes it.
  private struct ObjectWriter {
    var opened = false
    mutating func key(_ name: StaticString, _ bytes: inout [UInt8]) {
      bytes.append(opened ? UInt8(ascii: ",") : UInt8(ascii: "{"))
      opened = true
      bytes.append(UInt8(ascii: "\""))
      name.withUTF8Buffer { bytes.append(contentsOf: $0) }
      bytes.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
    }
    func end(_ bytes: inout [UInt8]) {
      if !opened { bytes.append(UInt8(ascii: "{")) }
      bytes.append(UInt8(ascii: "}"))
    }
  }

  private mutating func integer(_ value: Int64) {
    bytes.append(contentsOf: String(value).utf8)
  }

  private mutating func boolean(_ value: Bool) {
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
        let hex = Array("0123456789abcdef".utf8)
        bytes.append(contentsOf: Array("\\u00".utf8))
        bytes.append(contentsOf: [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
      default: bytes.append(byte)
      }
    }
    bytes.append(UInt8(ascii: "\""))
  }
}
