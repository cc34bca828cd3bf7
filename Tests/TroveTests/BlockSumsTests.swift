import Testing

@testable import Trove

/// Block signatures and the rolling search that finds a new version's
/// blocks among an old version's bytes, and the range lists a puller and
/// a `trove serve` peer exchange.
@Suite("block sums and range lists")
struct BlockSumsTests {
  static func sums(_ bytes: [UInt8]) -> [BlockSums.Entry] {
    bytes.withUnsafeBytes { BlockSums.entries(ofBlocksIn: $0) }
  }

  @Test("the rolling sum rolled a byte at a time equals the sum of each window")
  func rollingSumRolls() {
    let bytes = Bytes.random(3000, seed: 3701)
    let size = BlockSums.blockSize
    bytes.withUnsafeBytes { raw in
      var rolled = BlockSums.RollingSum(UnsafeRawBufferPointer(rebasing: raw[0..<size]))
      for start in 1...(bytes.count - size) {
        rolled.roll(out: bytes[start - 1], in: bytes[start + size - 1])
        let fresh = BlockSums.RollingSum(
          UnsafeRawBufferPointer(rebasing: raw[start..<(start + size)]))
        if rolled.value != fresh.value {
          Issue.record("window at \(start): rolled \(rolled.value), computed \(fresh.value)")
          return
        }
      }
    }
  }

  @Test("blocks are found in the old bytes shifted by an insertion; a changed block is not")
  func locateFindsShiftedBlocks() {
    let old = Bytes.random(64 << 10, seed: 3702)
    var new = old
    new.insert(contentsOf: Bytes.random(100, seed: 3703), at: 10_000)
    new[40_000] ^= 0xFF
    let wanted = Self.sums(Array(new.prefix(63 << 10)))
    let found = old.withUnsafeBytes { BlockSums.locate(wanted[...], in: $0) }
    let size = BlockSums.blockSize
    for (k, at) in found.enumerated() {
      let block = k * size..<(k + 1) * size
      let changed =
        block.contains(10_000) || block.contains(10_099) || block.contains(40_000)
        || block.overlaps(10_000..<10_100)
      if changed {
        #expect(at == nil, "block \(k) holds a change and was found at \(at ?? -1)")
      } else {
        let shift = block.lowerBound >= 10_100 ? 100 : 0
        #expect(at == block.lowerBound - shift, "block \(k)")
      }
    }
    let unrelated = Bytes.random(64 << 10, seed: 3704)
    #expect(
      unrelated.withUnsafeBytes { BlockSums.locate(wanted[...], in: $0) }.allSatisfy { $0 == nil })
  }

  @Test("signatures encode and decode; a wrong length is refused")
  func encodeDecode() {
    let entries = Self.sums(Bytes.random(5 * BlockSums.blockSize, seed: 3705))
    let encoded = BlockSums.encode(entries)
    #expect(encoded.count == 5 * BlockSums.entrySize)
    #expect(BlockSums.decode(encoded, count: 5) == entries)
    #expect(BlockSums.decode(Array(encoded.dropLast()), count: 5) == nil)
  }

  @Test("range lists round-trip; malformed, unordered, overlapping or oversized lists are refused")
  func rangeLists() {
    let ranges: [Range<Int64>] = [0..<10, 10..<11, 100..<200]
    #expect(RangeList.encode(ranges) == "0-9,10-10,100-199")
    #expect(
      RangeList.decode("0-9,10-10,100-199", below: 200, maximumCount: 8, maximumTotal: 1000)
        == ranges)
    for bad in [
      "", "0-9,", "-5", "5-", "5-3", "0-9,5-12", "0-200", "+1-2", "1-2-3", "a-b", "0x1-2",
      "0-0,1-1,2-2,3-3,4-4,5-5,6-6,7-7,8-8", "0-150,151-199", "99999999999999999999-1",
    ] {
      #expect(
        RangeList.decode(bad, below: 200, maximumCount: 8, maximumTotal: 150) == nil, "\(bad)")
    }
  }
}
