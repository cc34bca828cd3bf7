import Foundation

/// A zsync control file (`FILE.zsync`, made by `zsyncmake`): the length
/// of a file a server publishes, the rolling and strong checksums of each
/// of its blocks, and a digest of the whole file. It comes from the
/// network: every field is checked before anything is read by it.
struct ZsyncControl {
  /// Bytes a block (a power of two); the last block is padded with zeros.
  let blockSize: Int
  /// The file's length.
  let length: Int64
  /// Consecutive blocks that must match together (1 or 2): with short
  /// checksums, one block's match is too likely by chance.
  let sequenceMatches: Int
  /// Bytes of each block's rolling checksum kept (2–4): the low bytes of
  /// `A << 16 | B`.
  let rollingBytes: Int
  /// Bytes of each block's strong hash kept (1–16 for MD4 and MD5).
  let strongBytes: Int
  /// libcrypto's name of the block hash: `MD4` unless the file names another.
  let strongAlgorithm: String
  /// The whole file's digest: libcrypto's name of the algorithm and the
  /// digest in lowercase hex.
  let fileHash: (algorithm: String, hex: String)
  /// Each block's rolling checksum, `A << 16 | B` masked by ``rollingMask``.
  let rolling: [UInt32]
  /// The blocks' strong hashes, ``strongBytes`` each, one after the other.
  let strong: [UInt8]

  /// Control files larger than this are refused: at 4 to 20 bytes a block,
  /// it describes files of terabytes.
  static let maximumSize = 64 << 20
  /// Blocks a control file may describe (16 GiB in zsyncmake's 4 KiB
  /// blocks): the search indexes each.
  static let maximumBlocks = 1 << 22
  /// Bytes of the header section, at most.
  static let maximumHeaderBytes = 64 << 10

  var blockCount: Int { rolling.count }
  var rollingMask: UInt32 { rollingBytes == 4 ? .max : (1 << UInt32(8 * rollingBytes)) - 1 }

  /// Why a control file was refused.
  struct Refusal: Error, Equatable {
    let reason: String
  }

  /// Parses `bytes`.
  /// - Throws: ``Refusal`` naming the first thing wrong.
  init(_ bytes: [UInt8]) throws(Refusal) {
    guard bytes.count <= Self.maximumSize else {
      throw Refusal(reason: "it is over \(Self.maximumSize) bytes")
    }
    var fields: [String: String] = [:]
    var at = 0
    while true {
      guard let end = bytes[at..<min(bytes.count, Self.maximumHeaderBytes)].firstIndex(of: 0x0A)
      else {
        throw Refusal(
          reason: "its headers do not end in a blank line within \(Self.maximumHeaderBytes) bytes")
      }
      var line = bytes[at..<end]
      if line.last == 0x0D { line = line.dropLast() }
      at = end + 1
      if line.isEmpty { break }
      if fields.isEmpty, !line.starts(with: "zsync:".utf8) {
        throw Refusal(reason: "it does not start with 'zsync:'")
      }
      guard let text = String(validating: line, as: UTF8.self),
        let colon = text.firstIndex(of: ":")
      else {
        throw Refusal(reason: "a header line is not 'Name: value'")
      }
      let name = String(text[..<colon])
      let value = text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
      // Z-Map2 describes a gzip file and breaks the header format.
      if name == "Z-Map2" || name == "Z-URL" || name == "Recompress" {
        throw Refusal(reason: "it describes a compressed file (\(name)), which is not supported")
      }
      // URL may repeat; the file's own URL is used, so its values are not kept.
      if fields[name] != nil, name != "URL" {
        throw Refusal(reason: "its header '\(ServerText.excerpt(name))' is repeated")
      }
      fields[name] = value
    }
    guard let blockText = fields["Blocksize"], let blockSize = Int(blockText),
      blockSize >= 64, blockSize <= 1 << 20, blockSize & (blockSize - 1) == 0
    else {
      throw Refusal(
        reason:
          "its Blocksize '\(ServerText.excerpt(fields["Blocksize"] ?? ""))' is not a power of two from 64 to 1 MiB"
      )
    }
    guard let lengthText = fields["Length"], let length = Int64(lengthText), length >= 0 else {
      throw Refusal(
        reason: "its Length '\(ServerText.excerpt(fields["Length"] ?? ""))' is not a byte count")
    }
    var sequence = 1
    var rollingBytes = 4
    var strongBytes = 16
    if let lengths = fields["Hash-Lengths"] {
      let parts = lengths.split(separator: ",", omittingEmptySubsequences: false).map { Int($0) }
      guard parts.count == 3, let s = parts[0], let r = parts[1], let h = parts[2],
        (1...2).contains(s), (2...4).contains(r), (1...16).contains(h)
      else {
        throw Refusal(
          reason: "its Hash-Lengths '\(ServerText.excerpt(lengths))' is not 1-2,2-4,1-16")
      }
      (sequence, rollingBytes, strongBytes) = (s, r, h)
    }
    let strongAlgorithm: String
    switch fields["Strong-Hash-Algorithm"]?.uppercased() {
    case nil, "MD4": strongAlgorithm = "MD4"
    case "MD5": strongAlgorithm = "MD5"
    case let other?:
      throw Refusal(
        reason: "its Strong-Hash-Algorithm '\(ServerText.excerpt(other))' is not MD4 or MD5")
    }
    guard let fileHash = Self.fileHash(fields) else {
      throw Refusal(reason: "it has no SHA-1 or File-Hash of SHA-1 or SHA-256 in hex")
    }
    let count = length == 0 ? 0 : Int((length - 1) / Int64(blockSize)) + 1
    guard count <= Self.maximumBlocks else {
      throw Refusal(reason: "it describes \(count) blocks, over \(Self.maximumBlocks)")
    }
    let record = rollingBytes + strongBytes
    guard bytes.count - at == count * record else {
      throw Refusal(
        reason:
          "it holds \(bytes.count - at) bytes of block checksums, not the \(count * record) its Length and Hash-Lengths make"
      )
    }
    var rolling: [UInt32] = []
    rolling.reserveCapacity(count)
    var strong: [UInt8] = []
    strong.reserveCapacity(count * strongBytes)
    for start in stride(from: at, to: bytes.count, by: record) {
      var value: UInt32 = 0
      for byte in bytes[start..<(start + rollingBytes)] { value = value << 8 | UInt32(byte) }
      rolling.append(value)
      strong += bytes[(start + rollingBytes)..<(start + record)]
    }
    self.blockSize = blockSize
    self.length = length
    self.sequenceMatches = sequence
    self.rollingBytes = rollingBytes
    self.strongBytes = strongBytes
    self.strongAlgorithm = strongAlgorithm
    self.fileHash = fileHash
    self.rolling = rolling
    self.strong = strong
  }

  /// `File-Hash: SHA-256:hex` (or SHA-1), else the legacy `SHA-1: hex`.
  private static func fileHash(_ fields: [String: String]) -> (String, String)? {
    var named: (String, String)?
    if let value = fields["File-Hash"], let colon = value.firstIndex(of: ":") {
      switch value[..<colon].uppercased() {
      case "SHA-1", "SHA1": named = ("SHA1", String(value[value.index(after: colon)...]))
      case "SHA-256", "SHA256": named = ("SHA256", String(value[value.index(after: colon)...]))
      default: break
      }
    }
    if named == nil, let value = fields["SHA-1"] { named = ("SHA1", value) }
    guard let (algorithm, text) = named else { return nil }
    let hex = text.lowercased()
    guard hex.utf8.count == (algorithm == "SHA1" ? 40 : 64),
      hex.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) })
    else { return nil }
    return (algorithm, hex)
  }

  /// Block `k`'s strong hash, as the control file keeps it.
  func strong(of k: Int) -> ArraySlice<UInt8> {
    strong[(k * strongBytes)..<((k + 1) * strongBytes)]
  }

  /// The length of block `k` in the file (the last may be short).
  func length(of k: Int) -> Int {
    Int(min(Int64(blockSize), length - Int64(k) * Int64(blockSize)))
  }
}
