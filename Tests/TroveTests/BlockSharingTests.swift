import Foundation
import Testing

@testable import Trove

/// Sharing disk blocks between versions of a file: which ranges qualify
/// (chunks in common at congruent offsets), and the kernel sharing them
/// (FIDEDUPERANGE on the test XFS, proved with FIEMAP), bytes unchanged.
@Suite("shared blocks between versions")
struct BlockSharingTests {
  static let block: Int64 = 4096

  /// `bytes` with `count` bytes at each of `offsets` replaced.
  static func edited(_ bytes: [UInt8], at offsets: [Int], count: Int, seed: UInt64) -> [UInt8] {
    var out = bytes
    for (i, offset) in offsets.enumerated() {
      out.replaceSubrange(
        offset..<offset + count, with: Bytes.random(count, seed: seed + UInt64(i)))
    }
    return out
  }

  @Test(
    "edits in place: every chunk but the edited ones shares its whole blocks, at the same offsets")
  func editsInPlaceShareTheRest() {
    let old = Bytes.random(8 << 20, seed: 3301)
    let new = Self.edited(old, at: [1_000_000, 5_000_000], count: 100, seed: 3302)
    let (oldChunks, newChunks) = (ChunkingTests.chunks(old), ChunkingTests.chunks(new))
    let plan = BlockSharing(
      newChunks, size: Int64(new.count), from: oldChunks, sourceSize: Int64(old.count),
      blockSize: Self.block)
    let changed = newChunks.filter { c in !oldChunks.contains { $0.digest == c.digest } }
    #expect(changed.count >= 2 && changed.count <= 4)
    #expect(plan.ranges.allSatisfy { $0.offset == $0.sourceOffset })
    #expect(plan.ranges.allSatisfy { $0.offset % Self.block == 0 && $0.length % Self.block == 0 })
    // All but the changed chunks and the blocks they straddle.
    let lost = changed.reduce(0) { $0 + $1.length } + 2 * Int64(changed.count + 1) * Self.block
    #expect(plan.bytes >= Int64(new.count) - lost, "\(plan.bytes)")
    for range in plan.ranges {
      let a = old[Int(range.sourceOffset)..<Int(range.sourceOffset + range.length)]
      let b = new[Int(range.offset)..<Int(range.offset + range.length)]
      #expect(a.elementsEqual(b))
    }
  }

  @Test("an insertion shifts what follows: only chunks landing congruent to the block size qualify")
  func anInsertionSharesOnlyCongruentChunks() {
    let old = Bytes.random(8 << 20, seed: 3303)
    var new = old
    new.insert(contentsOf: Bytes.random(100, seed: 3304), at: 1000)
    let plan = BlockSharing(
      ChunkingTests.chunks(new), size: Int64(new.count), from: ChunkingTests.chunks(old),
      sourceSize: Int64(old.count), blockSize: Self.block)
    #expect(plan.ranges.isEmpty, "\(plan.ranges)")
    // Shifted by a whole block, everything after the first chunks qualifies.
    var blockShifted = old
    blockShifted.insert(contentsOf: Bytes.random(4096, seed: 3305), at: 1000)
    let shifted = BlockSharing(
      ChunkingTests.chunks(blockShifted), size: Int64(blockShifted.count),
      from: ChunkingTests.chunks(old), sourceSize: Int64(old.count), blockSize: Self.block)
    #expect(shifted.bytes >= Int64(old.count) - 1 << 20, "\(shifted.bytes)")
    #expect(shifted.ranges.allSatisfy { $0.offset == $0.sourceOffset + 4096 })
  }

  @Test(
    "on XFS the kernel shares the planned blocks (FIEMAP), both files keep their bytes",
    .enabled(if: TestFilesystems.xfs != nil, TestFilesystems.xfsMissing))
  func theKernelSharesThePlannedBlocks() throws {
    let scratch = try Scratch(under: TestFilesystems.xfs)
    let old = Bytes.random(8 << 20, seed: 3306)
    let new = Self.edited(old, at: [2_000_000, 6_000_000], count: 50, seed: 3307)
    try Data(old).write(to: URL(fileURLWithPath: scratch["old"]))
    try Data(new).write(to: URL(fileURLWithPath: scratch["new"]))
    #expect(try extents(scratch["new"]).sharedBytes == 0)
    let plan = BlockSharing(
      ChunkingTests.chunks(new), size: Int64(new.count), from: ChunkingTests.chunks(old),
      sourceSize: Int64(old.count), blockSize: Self.block)
    let source = try FileDescriptor.open(scratch["old"])
    defer { source.close() }
    let target = try FileDescriptor.open(scratch["new"], .readWrite)
    defer { target.close() }
    var shared: Int64 = 0
    for range in plan.ranges {
      shared += try source.shareBlocks(
        range.length, at: range.sourceOffset, with: target, at: range.offset)
    }
    #expect(shared == plan.bytes)
    let summary = try extents(scratch["new"])
    #expect(Int64(summary.sharedBytes) == plan.bytes, "\(summary)")
    #expect(plan.bytes >= Int64(new.count) - 1 << 20)
    #expect(try contents(scratch["old"]) == old)
    #expect(try contents(scratch["new"]) == new)

    // A range that differs is left alone: the kernel compares, whatever
    // the plan believed.
    let other = Bytes.random(1 << 20, seed: 3308)
    try Data(other).write(to: URL(fileURLWithPath: scratch["other"]))
    let unrelated = try FileDescriptor.open(scratch["other"], .readWrite)
    defer { unrelated.close() }
    #expect(try source.shareBlocks(1 << 20, at: 0, with: unrelated, at: 0) == 0)
    #expect(try extents(scratch["other"]).sharedBytes == 0)
    #expect(try contents(scratch["other"]) == other)
  }

  @Test("ext4 and tmpfs cannot share blocks: the call says so, and changes nothing")
  func filesystemsWithoutSharingSaySo() throws {
    let roots = [TestFilesystems.small] + TestFilesystems.full.prefix(1).map { Optional($0) }
    let available = roots.compactMap { $0 }
    try #require(!available.isEmpty, TestFilesystems.smallMissing)
    for root in available {
      let scratch = try Scratch(under: root)
      let bytes = Bytes.random(64 << 10, seed: 3309)
      for name in ["a", "b"] { try Data(bytes).write(to: URL(fileURLWithPath: scratch[name])) }
      let a = try FileDescriptor.open(scratch["a"])
      defer { a.close() }
      let b = try FileDescriptor.open(scratch["b"], .readWrite)
      defer { b.close() }
      #expect(throws: SystemCallError.self, "\(root)") {
        try a.shareBlocks(64 << 10, at: 0, with: b, at: 0)
      }
      #expect(try contents(scratch["b"]) == bytes)
    }
  }
}
