import Foundation
import Testing

@testable import Trove

/// Content-defined chunking: the cuts depend on the bytes alone (not on how
/// they are fed), stay within their bounds, agree with a reference written
/// from the on-disk format's description, and move only near an edit.
@Suite("content-defined chunks")
struct ChunkingTests {
  static func chunks(_ bytes: [UInt8], feeding sizes: [Int] = [1 << 20]) -> [Chunk] {
    var hasher = ChunkHasher()
    var at = 0
    var k = 0
    bytes.withUnsafeBytes { all in
      while at < all.count {
        let n = min(sizes[k % sizes.count], all.count - at)
        hasher.update(UnsafeRawBufferPointer(rebasing: all[at..<at + n]))
        at += n
        k += 1
      }
    }
    return hasher.finish()
  }

  @Test("the same bytes fed in any pieces cut alike; chunks tile the stream, within their bounds")
  func cutsDependOnTheBytesAlone() {
    let bytes = Bytes.random(3 << 20 + 12_345, seed: 3201)
    let whole = Self.chunks(bytes, feeding: [bytes.count])
    #expect(whole.count > 20)
    for sizes in [[1 << 20], [4096], [7, 65_536, 1, 300_000], [16_384]] {
      #expect(Self.chunks(bytes, feeding: sizes) == whole, "\(sizes)")
    }
    var offset: Int64 = 0
    for (i, chunk) in whole.enumerated() {
      #expect(chunk.offset == offset)
      if i < whole.count - 1 {
        #expect(
          (Int64(ChunkCutter.minimumSize)...Int64(ChunkCutter.maximumSize)).contains(chunk.length))
      }
      let slice = bytes[Int(chunk.offset)..<Int(chunk.offset + chunk.length)]
      #expect(chunk.digest == XXH3Hasher.digest(Array(slice)))
      offset += chunk.length
    }
    #expect(offset == Int64(bytes.count))
  }

  @Test("the cuts are those of the reference written from Docs/OnDiskFormat.md")
  func cutsMatchTheReference() throws {
    let python = try #require(FaultServer.python, FaultServer.missing)
    let scratch = try Scratch()
    // Random bytes, then a run of zeros (cut at the maximum), then a short tail.
    let bytes =
      Bytes.random(2 << 20, seed: 3202) + [UInt8](repeating: 0, count: 600_000)
      + Bytes.random(5000, seed: 3203)
    try Data(bytes).write(to: URL(fileURLWithPath: scratch["data"]))
    let run = try Spawned(
      executable: python, [repositoryRoot + "/Tests/Reference/chunk_cuts.py", scratch["data"]],
      io: scratch["run"]
    ).wait()
    #expect(run.status == 0, "\(run.stderr)")
    let reference = String(decoding: run.stdout, as: UTF8.self).split(separator: "\n").map {
      Int64($0)!
    }
    #expect(Self.chunks(bytes).map(\.length) == reference)
    #expect(reference.contains(Int64(ChunkCutter.maximumSize)))
  }

  @Test("chunk lengths gather around the average; zeros cut at the maximum")
  func lengthsAroundTheAverage() {
    let chunks = Self.chunks(Bytes.random(16 << 20, seed: 3204))
    let mean = Double(16 << 20) / Double(chunks.count)
    #expect(
      (Double(ChunkCutter.averageSize) * 0.6...Double(ChunkCutter.averageSize) * 1.4)
        .contains(mean), "\(mean)")
    let zeros = Self.chunks([UInt8](repeating: 0, count: 1 << 20))
    #expect(zeros.map(\.length) == Array(repeating: Int64(ChunkCutter.maximumSize), count: 4))
  }

  @Test("an insertion near the start moves only the cuts near it: every later chunk is shared")
  func anEditMovesOnlyNearbyCuts() {
    let old = Bytes.random(16 << 20, seed: 3205)
    var new = old
    new.insert(contentsOf: Bytes.random(100, seed: 3206), at: 1000)
    new.replaceSubrange(9_000_000..<9_000_010, with: Bytes.random(10, seed: 3207))
    let before = Self.chunks(old)
    let after = Self.chunks(new)
    let shared = Set(before.map(\.digest)).intersection(after.map(\.digest))
    // Each edit changes the chunk it falls in, and at most the next.
    #expect(shared.count >= after.count - 4, "\(shared.count) of \(after.count)")
    #expect(after.count - shared.count >= 2)
  }

  @Test("the gear table is the one the on-disk format names (SplitMix64 from \"trovecdc\")")
  func gearTableIsFixed() {
    #expect(ChunkCutter.gear.count == 256)
    #expect(ChunkCutter.gear[0] == 0x81a3_cb1d_fa85_0f69)
    #expect(ChunkCutter.gear[1] == 0x4304_f95e_35f9_4bce)
    #expect(ChunkCutter.gear[255] == 0x0873_35f1_0211_5993)
  }
}
