/// The POSIX ustar archive format, as much of it as an export needs:
/// 512-byte headers, regular files and folders, sizes in octal (or GNU's
/// base-256 above 8 GiB), two zero blocks at the end. What `tar -tf`
/// lists and `tar -xf` extracts. See Docs/OnDiskFormat.md.
enum Ustar {
  static let blockSize = 512

  /// What a header says about the member after it.
  struct Header: Equatable {
    /// The member's path: `prefix/name` as the header holds it.
    var name: String
    var size: Int64
    /// `0` (or NUL) a regular file, `5` a folder; anything else (links,
    /// devices, pax headers) an import refuses.
    var type: UInt8

    var isRegularFile: Bool { type == UInt8(ascii: "0") || type == 0 }
    var isFolder: Bool { type == UInt8(ascii: "5") }
  }

  /// The header block of a regular file `name` (at most 100 bytes) of
  /// `size` bytes, mode 0444, modified at `time` (seconds since 1970).
  static func header(name: String, size: Int64, time: Int64) -> [UInt8] {
    var block = [UInt8](repeating: 0, count: blockSize)
    func put(_ text: String, at offset: Int, width: Int) {
      for (i, byte) in text.utf8.prefix(width).enumerated() { block[offset + i] = byte }
    }
    func octal(_ value: Int64, at offset: Int, width: Int) {
      let digits = String(value, radix: 8)
      put(
        String(repeating: "0", count: max(0, width - 1 - digits.count)) + digits, at: offset,
        width: width - 1)
    }
    put(name, at: 0, width: 100)
    octal(0o444, at: 100, width: 8)
    octal(0, at: 108, width: 8)
    octal(0, at: 116, width: 8)
    if size < 0o77777777777 {
      octal(size, at: 124, width: 12)
    } else {
      // GNU base-256: a leading 0x80, then the size big-endian.
      block[124] = 0x80
      for i in 0..<8 { block[135 - i] = UInt8(truncatingIfNeeded: UInt64(size) >> (8 * UInt64(i))) }
    }
    octal(time, at: 136, width: 12)
    block[156] = UInt8(ascii: "0")
    put("ustar", at: 257, width: 6)
    put("00", at: 263, width: 2)
    put("root", at: 265, width: 32)
    put("root", at: 297, width: 32)
    // The checksum: the sum of the bytes with its own field as spaces.
    for i in 148..<156 { block[i] = UInt8(ascii: " ") }
    let sum = block.reduce(0) { $0 + Int($1) }
    let digits = String(sum, radix: 8)
    put(String(repeating: "0", count: 6 - digits.count) + digits, at: 148, width: 6)
    block[154] = 0
    block[155] = UInt8(ascii: " ")
    return block
  }

  /// Zero bytes that pad a member of `size` bytes to a whole block.
  static func padding(_ size: Int64) -> Int {
    let rest = Int(size % Int64(blockSize))
    return rest == 0 ? 0 : blockSize - rest
  }

  /// Why a header block cannot be read.
  struct Malformed: Error {
    var reason: String
  }

  /// Reads a header block: nil for a zero block (the end of the archive).
  static func parse(_ block: [UInt8]) throws(Malformed) -> Header? {
    precondition(block.count == blockSize)
    if block.allSatisfy({ $0 == 0 }) { return nil }
    var sum = 0
    for (i, byte) in block.enumerated() { sum += (148..<156).contains(i) ? 32 : Int(byte) }
    guard let recorded = octal(block[148..<156]), recorded == Int64(sum) else {
      throw Malformed(reason: "a header's checksum does not match (not a tar archive, or damaged)")
    }
    let magic = String(decoding: block[257..<262], as: UTF8.self)
    guard magic == "ustar" else {
      throw Malformed(reason: "a header is not a ustar header")
    }
    let size: Int64
    if block[124] & 0x80 != 0 {
      var value: UInt64 = 0
      for byte in block[125..<136] {
        guard value >> 56 == 0 else { throw Malformed(reason: "a member's size is too large") }
        value = value << 8 | UInt64(byte)
      }
      guard value <= UInt64(Int64.max) else {
        throw Malformed(reason: "a member's size is too large")
      }
      size = Int64(value)
    } else {
      guard let parsed = octal(block[124..<136]) else {
        throw Malformed(reason: "a member's size is not a number")
      }
      size = parsed
    }
    let name = text(block[0..<100])
    let prefix = text(block[345..<500])
    return Header(name: prefix.isEmpty ? name : prefix + "/" + name, size: size, type: block[156])
  }

  /// A NUL-terminated field as text.
  private static func text(_ field: ArraySlice<UInt8>) -> String {
    String(decoding: field.prefix { $0 != 0 }, as: UTF8.self)
  }

  /// An octal field (spaces and NULs around the digits); nil if not one.
  private static func octal(_ field: ArraySlice<UInt8>) -> Int64? {
    let digits = field.drop { $0 == 0x20 }.prefix { $0 != 0 && $0 != 0x20 }
    guard !digits.isEmpty, digits.count <= 21 else { return digits.isEmpty ? 0 : nil }
    var value: Int64 = 0
    for byte in digits {
      guard (0x30...0x37).contains(byte) else { return nil }
      value = value * 8 + Int64(byte - 0x30)
    }
    return value
  }
}
