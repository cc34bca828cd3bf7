/// Cuts a stream of bytes into content-defined chunks (FastCDC with
/// normalised chunking): a chunk ends where a gear hash of the bytes just
/// before meets a mask, so cut points depend on the content near them, and
/// an edit moves only the cuts close to it; versions of a file that differ
/// in a few places share every chunk away from those places.
///
/// The gear hash shifts left one bit a byte, so its top bits depend on the
/// last 64 bytes only; the masks test top bits. Between ``minimumSize`` and
/// ``averageSize`` the mask is harder (more bits), after it easier, which
/// draws chunk lengths towards the average; ``maximumSize`` cuts
/// regardless. The parameters and the table are part of the on-disk
/// format: two stores share chunks only if they cut alike.
public struct ChunkCutter: Sendable {
  /// No chunk but a stream's last is shorter.
  public static let minimumSize = 16 << 10
  /// The length chunks are drawn towards.
  public static let averageSize = 64 << 10
  /// No chunk is longer.
  public static let maximumSize = 256 << 10

  /// Before ``averageSize``: two bits more than the average's log2.
  static let smallMask = topBits(18)
  /// From ``averageSize``: two bits fewer.
  static let largeMask = topBits(14)

  static func topBits(_ n: Int) -> UInt64 { ~(UInt64.max >> UInt64(n)) }

  /// A random value for each byte: SplitMix64 from a fixed seed, so every
  /// Trove has the same table.
  static let gear: [UInt64] = {
    var state: UInt64 = 0x7472_6F76_6563_6463  // "trovecdc"
    return (0..<256).map { _ in
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      return z ^ (z >> 31)
    }
  }()

  /// The gear hash since the current chunk's ``minimumSize``-th byte.
  private var fingerprint: UInt64 = 0
  /// Bytes of the current chunk fed so far.
  private var length = 0

  public init() {}

  /// Feeds the next `bytes` of the stream. Returns where in `bytes` chunks
  /// end (the index just past each chunk's last byte), in order.
  public mutating func cuts(in bytes: UnsafeRawBufferPointer) -> [Int] {
    var cuts: [Int] = []
    guard let base = bytes.baseAddress else { return cuts }
    let p = base.assumingMemoryBound(to: UInt8.self)
    let n = bytes.count
    var i = 0
    Self.gear.withUnsafeBufferPointer { gear in
      while i < n {
        if length < Self.minimumSize {
          // The first bytes of a chunk cannot end it: not hashed.
          let skip = min(Self.minimumSize - length, n - i)
          i += skip
          length += skip
          fingerprint = 0
          continue
        }
        let small = length < Self.averageSize
        let mask = small ? Self.smallMask : Self.largeMask
        let end = min(n, i + (small ? Self.averageSize : Self.maximumSize) - length)
        var fp = fingerprint
        var j = i
        var found = false
        // Two bytes a turn: the second byte's fingerprint is computed from
        // the one before the pair, not from the first's, which halves the
        // chain of dependent shifts and adds each byte waits on.
        while j + 2 <= end {
          let g1 = gear[Int(p[j])]
          let g2 = gear[Int(p[j + 1])]
          let f1 = (fp << 1) &+ g1
          let f2 = (fp << 2) &+ ((g1 << 1) &+ g2)
          if f1 & mask == 0 {
            fp = f1
            j += 1
            found = true
            break
          }
          fp = f2
          j += 2
          if f2 & mask == 0 {
            found = true
            break
          }
        }
        if !found && j < end {
          fp = (fp << 1) &+ gear[Int(p[j])]
          j += 1
          found = fp & mask == 0
        }
        length += j - i
        i = j
        fingerprint = fp
        if found || length == Self.maximumSize {
          cuts.append(i)
          length = 0
          fingerprint = 0
        }
      }
    }
    return cuts
  }
}
