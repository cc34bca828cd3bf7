import CXXHash
import Foundation
import Trove

/// XXH3-128 in memory and over a file, beside the C library it wraps and
/// the xxhsum command.
func hashSuite(_ b: Bench) throws {
  print("hash")
  let perSample = b.quick ? 64 << 20 : 1 << 30
  for size in [4 << 10, 64 << 10, 1 << 20, b.size(64 << 20, quick: 4 << 20)] {
    let buffer = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) }
    let iterations = max(1, perSample / size)
    let bytes = Double(size * iterations)
    let trove = try buffer.withUnsafeBytes { raw in
      try b.time { for _ in 0..<iterations { blackHole(XXH3Hasher.digest(raw)) } }
    }
    let reference = try buffer.withUnsafeBytes { raw in
      try b.time {
        for _ in 0..<iterations { blackHole(XXH3_128bits_dispatch(raw.baseAddress, raw.count)) }
      }
    }
    b.add(
      Result(
        suite: "hash", name: "one-shot, \(sizeName(size)) in memory",
        parameters: ["size": "\(size)", "iterations": "\(iterations)"], unit: .gigabytesPerSecond,
        trove: rate(trove, bytes), referenceName: "C XXH3_128bits_dispatch",
        reference: rate(reference, bytes)))
  }

  // Streaming in small chunks against one shot over the same buffer.
  let streamSize = b.size(64 << 20, quick: 8 << 20)
  let buffer = [UInt8](repeating: 0xA5, count: streamSize)
  let oneShot = try buffer.withUnsafeBytes { raw in try b.time { blackHole(XXH3Hasher.digest(raw)) }
  }
  for chunk in [4 << 10, 64 << 10, 1 << 20] {
    let streamed = try buffer.withUnsafeBytes { raw in
      try b.time {
        var hasher = XXH3Hasher()
        var offset = 0
        while offset < raw.count {
          hasher.update(
            UnsafeRawBufferPointer(rebasing: raw[offset..<min(offset + chunk, raw.count)]))
          offset += chunk
        }
        blackHole(hasher.finalize())
      }
    }
    b.add(
      Result(
        suite: "hash", name: "streaming in \(sizeName(chunk)) updates",
        parameters: ["size": "\(streamSize)", "chunk": "\(chunk)"], unit: .gigabytesPerSecond,
        trove: rate(streamed, Double(streamSize)), referenceName: "one-shot, same buffer",
        reference: rate(oneShot, Double(streamSize))))
  }

  // xxhsum's own in-memory benchmark (100 KB sample) against the same-sized one-shot.
  if let line = try? Spawn.capture(["xxhsum", "-b11", "-i3", "-q"], stderr: true),
    let rateText = line.components(separatedBy: "(").last?.components(separatedBy: " MB/s").first,
    let mbps = Double(rateText.trimmingCharacters(in: .whitespaces))
  {
    let sample = [UInt8](repeating: 7, count: 102_400)
    let iterations = perSample / sample.count
    let trove = try sample.withUnsafeBytes { raw in
      try b.time { for _ in 0..<iterations { blackHole(XXH3Hasher.digest(raw)) } }
    }
    b.add(
      Result(
        suite: "hash", name: "one-shot, 100 KB in memory",
        parameters: ["size": "102400"], unit: .gigabytesPerSecond,
        trove: rate(trove, Double(iterations * sample.count)),
        referenceName: "xxhsum -b11 (XXH128)", reference: Series(samples: [mbps / 1000])))
  } else {
    b.skip("xxhsum -b", "xxhsum is not installed or printed no XXH128 rate")
  }

  // A file in the page cache: the library's file hash against xxhsum.
  let fileSize = b.size(1 << 30, quick: 64 << 20)
  let file = b.work + "/hash-\(fileSize).bin"
  try makeRandomFile(file, bytes: fileSize)
  _ = try XXH3Hasher.digest(ofFile: file)  // warm the page cache
  let trove = try b.time { blackHole(try XXH3Hasher.digest(ofFile: file)) }
  let xxhsum = try b.timeCommand(["xxhsum", "-H2", file])
  b.add(
    Result(
      suite: "hash", name: "file, \(sizeName(fileSize)), page cache",
      parameters: ["size": "\(fileSize)"], unit: .gigabytesPerSecond,
      trove: rate(trove, Double(fileSize)), referenceName: "xxhsum -H2 FILE",
      reference: rate(xxhsum, Double(fileSize))))
}

/// Times (seconds) for `bytes` as rates (GB/s).
func rate(_ times: Series, _ bytes: Double) -> Series {
  Series(samples: times.samples.map { bytes / $0 / 1e9 })
}
