import Foundation
import Testing

@testable import Trove

/// Chunk manifests encoded and decoded: what a store keeps and a peer
/// sends; anything from a peer is checked before it is believed.
@Suite("chunk manifests")
struct ChunkManifestTests {
  static let bytes = Bytes.random(3 << 20 + 777, seed: 3401)
  static let manifest = ChunkManifest(
    size: Int64(bytes.count), chunks: ChunkingTests.chunks(bytes))

  @Test("a manifest decodes to itself, with its size given or not")
  func roundTrip() throws {
    let encoded = Self.manifest.encoded
    #expect(encoded.count == 8 + 12 + Self.manifest.chunks.count * 20)
    #expect(try ChunkManifest(decoding: encoded, source: "m") == Self.manifest)
    #expect(
      try ChunkManifest(decoding: encoded, expectedSize: Int64(Self.bytes.count), source: "m")
        == Self.manifest)
    let empty = ChunkManifest(size: 0, chunks: [])
    #expect(try ChunkManifest(decoding: empty.encoded, source: "m") == empty)
  }

  @Test("a damaged or lying manifest is refused with a line naming it and what is wrong")
  func hostileManifestsAreRefused() {
    let good = Self.manifest.encoded
    let header = 20
    func patched(_ edit: (inout [UInt8]) -> Void) -> [UInt8] {
      var bytes = good
      edit(&bytes)
      return bytes
    }
    func lengthField(_ i: Int) -> Range<Int> { header + i * 20..<header + i * 20 + 4 }
    let cases: [(String, [UInt8], Int64?, String)] = [
      ("wrong magic", patched { $0[0] = UInt8(ascii: "X") }, nil, "does not start with TRVCHNK1"),
      ("truncated", Array(good.dropLast(3)), nil, "chunks take"),
      ("too short for a header", Array(good.prefix(10)), nil, "does not start with"),
      ("other size", good, Int64(Self.bytes.count + 1), "the object of"),
      (
        "a tiny chunk",
        patched { b in
          let a = lengthField(0)
          let b0 = lengthField(1)
          let first =
            Int(b[a.lowerBound]) | Int(b[a.lowerBound + 1]) << 8 | Int(b[a.lowerBound + 2]) << 16
          let second =
            Int(b[b0.lowerBound]) | Int(b[b0.lowerBound + 1]) << 8 | Int(b[b0.lowerBound + 2]) << 16
          // 100 bytes moved from the first chunk to the second: the sum holds.
          let (x, y) = (100, first + second - 100)
          for k in 0..<3 {
            b[a.lowerBound + k] = UInt8(truncatingIfNeeded: x >> (8 * k))
            b[b0.lowerBound + k] = UInt8(truncatingIfNeeded: y >> (8 * k))
          }
        }, nil, "chunk 1 is 100 bytes long"
      ),
      (
        "lengths that do not add up",
        patched { $0[lengthField(0).lowerBound] &+= 1 }, nil, "add up to"
      ),
      (
        "too many chunks for its size",
        patched {
          $0[16] = 0xFF
          $0[17] = 0xFF
        }, nil, "cannot tile"
      ),
    ]
    for (name, bytes, expected, said) in cases {
      do {
        _ = try ChunkManifest(decoding: bytes, expectedSize: expected, source: "manifest M")
        Issue.record("\(name): decoded")
      } catch {
        #expect(error.code == .unsupportedFormat, "\(name)")
        #expect(error.message.hasPrefix("manifest M is not a chunk manifest: "), "\(name)")
        #expect(error.message.contains(said), "\(name): \(error.message)")
        #expect(!error.message.contains("\n"))
      }
    }
  }
}
