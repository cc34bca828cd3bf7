/// Signatures of an object's fixed-size blocks, for moving less than a
/// chunk. A chunk of a new version that no earlier version holds usually
/// differs from the chunk it replaced in a few bytes (a header's field, a
/// line added); its blocks are found among the old chunk's bytes, shifted
/// or not, by rsync's rolling checksum, and only the blocks found nowhere
/// are sent. A `trove serve` peer computes the signatures of the blocks a
/// puller asks for. What they match is a hint like the manifest: the
/// pulled object is checked whole.
public enum BlockSums {
  /// Bytes a block: blocks start at multiples of it in the new version.
  /// A tar's record: each changed header then costs its own block, not
  /// the file bytes beside it.
  public static let blockSize = 512
  /// Bytes of an encoded signature: the weak sum (UInt32) and the strong
  /// one (UInt64), little-endian.
  public static let entrySize = 12
  /// Blocks one request may ask the signatures of.
  public static let maximumBlocks: Int64 = 1 << 16
  /// Bytes one request for ranges of an object may ask for.
  public static let maximumRangeBytes: Int64 = 4 << 20
  /// Ranges one request may name.
  public static let maximumRanges = 1024

  /// One block's signature: rsync's rolling checksum, which finds candidate
  /// offsets in one pass, and the low half of the block's XXH3-128, which
  /// tells a real match from a collision.
  public struct Entry: Sendable, Equatable {
    public let weak: UInt32
    public let strong: UInt64

    /// The signature of `block`.
    public init(_ block: UnsafeRawBufferPointer) {
      weak = RollingSum(block).value
      strong = XXH3Hasher.digest(block).low
    }

    init(weak: UInt32, strong: UInt64) {
      self.weak = weak
      self.strong = strong
    }
  }

  /// rsync's weak checksum of a window, rolled one byte at a time:
  /// `a` is the sum of the bytes, `b` the sum of each byte times its
  /// distance from the window's end, both modulo 2¹⁶.
  struct RollingSum {
    private var a: UInt32 = 0
    private var b: UInt32 = 0
    private let length: UInt32

    init(_ window: UnsafeRawBufferPointer) {
      length = UInt32(window.count)
      var weight = length
      for byte in window {
        a &+= UInt32(byte)
        b &+= weight &* UInt32(byte)
        weight -= 1
      }
    }

    var value: UInt32 { (a & 0xFFFF) | (b << 16) }

    /// The window moved one byte on: `out` left it, `in` came in.
    mutating func roll(out: UInt8, in next: UInt8) {
      a = a &- UInt32(out) &+ UInt32(next)
      b = b &- length &* UInt32(out) &+ a
    }
  }

  /// `entries` encoded, one after the other.
  public static func encode(_ entries: [Entry]) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(entries.count * entrySize)
    for entry in entries {
      withUnsafeBytes(of: entry.weak.littleEndian) { out += $0 }
      withUnsafeBytes(of: entry.strong.littleEndian) { out += $0 }
    }
    return out
  }

  /// The entries `bytes` encodes; nil unless it holds exactly `count`.
  public static func decode(_ bytes: [UInt8], count: Int) -> [Entry]? {
    guard bytes.count == count * entrySize else { return nil }
    var entries: [Entry] = []
    entries.reserveCapacity(count)
    for start in stride(from: 0, to: bytes.count, by: entrySize) {
      var weak: UInt32 = 0
      var strong: UInt64 = 0
      for k in 0..<4 { weak |= UInt32(bytes[start + k]) << (8 * k) }
      for k in 0..<8 { strong |= UInt64(bytes[start + 4 + k]) << (8 * k) }
      entries.append(Entry(weak: weak, strong: strong))
    }
    return entries
  }

  /// The signatures of the whole blocks `bytes` holds, one after the other.
  static func entries(ofBlocksIn bytes: UnsafeRawBufferPointer) -> [Entry] {
    stride(from: 0, to: bytes.count - blockSize + 1, by: blockSize).map {
      Entry(UnsafeRawBufferPointer(rebasing: bytes[$0..<($0 + blockSize)]))
    }
  }

  /// For each of `sums`, an offset in `local` whose block has that
  /// signature, or nil. One pass over `local` (rsync's search): after a
  /// match the window jumps a block, else it rolls a byte.
  static func locate(_ sums: ArraySlice<Entry>, in local: UnsafeRawBufferPointer) -> [Int?] {
    var found = [Int?](repeating: nil, count: sums.count)
    guard local.count >= blockSize, !sums.isEmpty else { return found }
    var byWeak: [UInt32: [Int]] = [:]
    for (k, entry) in zip(0..., sums) { byWeak[entry.weak, default: []].append(k) }
    // A bit per hashed weak sum, about 64 bits an entry: nearly every
    // window that matches nothing is turned away by one load, not a
    // dictionary lookup.
    let bits = min(22, max(12, Int.bitWidth - (sums.count * 64).leadingZeroBitCount))
    var tags = [UInt64](repeating: 0, count: 1 << (bits - 6))
    func tag(_ weak: UInt32) -> Int { Int((weak &* 0x9E37_79B1) >> UInt32(32 - bits)) }
    for entry in sums { tags[tag(entry.weak) >> 6] |= 1 << UInt64(tag(entry.weak) & 63) }
    var left = sums.count
    var position = 0
    var sum = RollingSum(UnsafeRawBufferPointer(rebasing: local[0..<blockSize]))
    tags.withUnsafeBufferPointer { tags in
      while left > 0 {
        let t = tag(sum.value)
        if tags[t >> 6] & (1 << UInt64(t & 63)) != 0, let candidates = byWeak[sum.value] {
          let window = UnsafeRawBufferPointer(rebasing: local[position..<(position + blockSize)])
          let strong = XXH3Hasher.digest(window).low
          var matched = false
          for k in candidates where sums[sums.startIndex + k].strong == strong && found[k] == nil {
            found[k] = position
            left -= 1
            matched = true
          }
          if matched {
            position += blockSize
            guard position + blockSize <= local.count else { break }
            sum = RollingSum(
              UnsafeRawBufferPointer(rebasing: local[position..<(position + blockSize)]))
            continue
          }
        }
        guard position + blockSize < local.count else { break }
        sum.roll(out: local[position], in: local[position + blockSize])
        position += 1
      }
    }
    return found
  }
}

/// Lists of ranges in a request's query, `a-b,c-d`: each inclusive, as in
/// an HTTP `Range` header, ascending and disjoint.
enum RangeList {
  /// `ranges` (half-open, ascending, disjoint, none empty) as a query value.
  static func encode(_ ranges: [Range<Int64>]) -> String {
    ranges.map { "\($0.lowerBound)-\($0.upperBound - 1)" }.joined(separator: ",")
  }

  /// The half-open ranges `text` names, all below `bound`; nil when it is
  /// not such a list, names more than `maximumCount` ranges, or more than
  /// `maximumTotal` in all.
  static func decode(
    _ text: String, below bound: Int64, maximumCount: Int, maximumTotal: Int64
  ) -> [Range<Int64>]? {
    var ranges: [Range<Int64>] = []
    var total: Int64 = 0
    for item in text.split(separator: ",", omittingEmptySubsequences: false) {
      let ends = item.split(separator: "-", omittingEmptySubsequences: false)
      guard ranges.count < maximumCount, ends.count == 2,
        ends.allSatisfy({ (1...19).contains($0.utf8.count) && $0.utf8.allSatisfy(isDigit) }),
        let first = Int64(ends[0]), let last = Int64(ends[1]),
        first <= last, last < bound, first >= (ranges.last?.upperBound ?? 0)
      else { return nil }
      total += last - first + 1
      guard total <= maximumTotal else { return nil }
      ranges.append(first..<(last + 1))
    }
    return ranges
  }

  private static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
}
