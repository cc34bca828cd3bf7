/// The content-defined chunks of one object (``ChunkCutter``): what two
/// versions have in common, kept beside the object and sent between
/// Troves so that a store holding one version fetches only the chunks of
/// the next it lacks. A manifest is a hint, never trusted over the bytes:
/// blocks are shared only where the kernel finds them equal, and a pulled
/// object is checked whole.
public struct ChunkManifest: Sendable, Equatable {
  /// The object's length.
  public let size: Int64
  /// Its chunks, in order, tiling `0..<size`.
  public let chunks: [Chunk]

  /// The first bytes of an encoded manifest, its format's version in them.
  static let magic = Array("TRVCHNK1".utf8)
  /// Bytes of one encoded chunk: its length (UInt32, little-endian) and
  /// digest (high then low half, big-endian: the digest's hex order).
  static let entrySize = 4 + 16

  /// The manifest of the chunks ``ChunkHasher`` cut from an object of
  /// `size` bytes.
  public init(size: Int64, chunks: [Chunk]) {
    self.size = size
    self.chunks = chunks
  }

  /// The encoded form: `TRVCHNK1`, the size (UInt64, little-endian), the
  /// count (UInt32, little-endian), then each chunk (20 bytes);
  /// offsets follow from the lengths.
  public var encoded: [UInt8] {
    var out = Self.magic
    out.reserveCapacity(Self.magic.count + 12 + chunks.count * Self.entrySize)
    withUnsafeBytes(of: UInt64(size).littleEndian) { out += $0 }
    withUnsafeBytes(of: UInt32(chunks.count).littleEndian) { out += $0 }
    for chunk in chunks {
      withUnsafeBytes(of: UInt32(chunk.length).littleEndian) { out += $0 }
      withUnsafeBytes(of: chunk.digest.high.bigEndian) { out += $0 }
      withUnsafeBytes(of: chunk.digest.low.bigEndian) { out += $0 }
    }
    return out
  }

  /// Decodes `bytes`, which may come from anyone: the manifest must be
  /// whole and self-consistent — its chunks tile exactly `size` bytes
  /// (`expectedSize`, when the object's length is known) and each is as
  /// long as ``ChunkCutter`` could cut it, so a manifest cannot ask for
  /// more requests than the object has chunks of honest length.
  ///
  /// - Throws: `.unsupportedFormat` naming `source` and what is wrong.
  public init(decoding bytes: [UInt8], expectedSize: Int64? = nil, source: String)
    throws(TroveError)
  {
    func bad(_ why: String) -> TroveError {
      TroveError(.unsupportedFormat, "\(source) is not a chunk manifest: \(why)", value: source)
    }
    let header = Self.magic.count + 12
    guard bytes.count >= header, Array(bytes.prefix(Self.magic.count)) == Self.magic else {
      throw bad("it does not start with \(String(decoding: Self.magic, as: UTF8.self))")
    }
    func integer<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
      var value: T = 0
      for k in 0..<MemoryLayout<T>.size { value |= T(bytes[offset + k]) << (8 * k) }
      return value
    }
    func bigEndian(at offset: Int) -> UInt64 {
      var value: UInt64 = 0
      for k in 0..<8 { value = value << 8 | UInt64(bytes[offset + k]) }
      return value
    }
    let rawSize = integer(UInt64.self, at: Self.magic.count)
    let count = Int(integer(UInt32.self, at: Self.magic.count + 8))
    guard rawSize <= UInt64(Int64.max) else { throw bad("its size \(rawSize) is too large") }
    let size = Int64(rawSize)
    if let expectedSize, size != expectedSize {
      throw bad("it is of \(size) bytes, the object of \(expectedSize)")
    }
    let least = (size + Int64(ChunkCutter.maximumSize) - 1) / Int64(ChunkCutter.maximumSize)
    let most = size / Int64(ChunkCutter.minimumSize) + 1
    guard Int64(count) >= least, Int64(count) <= most, size > 0 || count == 0 else {
      throw bad("\(count) chunks cannot tile \(size) bytes")
    }
    guard bytes.count == header + count * Self.entrySize else {
      throw bad(
        "it is \(bytes.count) bytes long, \(count) chunks take \(header + count * Self.entrySize)")
    }
    var chunks: [Chunk] = []
    chunks.reserveCapacity(count)
    var offset: Int64 = 0
    for i in 0..<count {
      let at = header + i * Self.entrySize
      let length = Int64(integer(UInt32.self, at: at))
      let last = i == count - 1
      guard length <= Int64(ChunkCutter.maximumSize),
        length >= (last ? 1 : Int64(ChunkCutter.minimumSize))
      else { throw bad("chunk \(i + 1) is \(length) bytes long") }
      let digest = BlobDigest(high: bigEndian(at: at + 4), low: bigEndian(at: at + 12))
      chunks.append(Chunk(offset: offset, length: length, digest: digest))
      offset += length
    }
    guard offset == size else { throw bad("its chunks add up to \(offset) bytes, not \(size)") }
    self.size = size
    self.chunks = chunks
  }
}
