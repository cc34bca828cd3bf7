import CXXHash
import Foundation
import Trove

/// XXH3-128 in memory and over a file, beside the C library it wraps and
/// the xxhsum command.
func hashSuite(_ b: Bench) throws {
  print("hash")
  let perSample = b.quick ? 64 << 20 : 1 << 30
  for size in [4 << 10, 64 << 10, 1 << 20, b.size(64 << 20, quick: 4 << 20)] {
    // 64-byte aligned, as xxhsum's own buffers are: an Array's storage is
    // only 16-byte aligned, which slows the wide loads.
    let buffer = alignedBuffer(size)
    defer { buffer.deallocate() }
    let raw = UnsafeRawBufferPointer(buffer)
    let iterations = max(1, perSample / size)
    let bytes = Double(size * iterations)
    let timed = try b.time(
      [
        { for _ in 0..<iterations { blackHole(XXH3Hasher.digest(raw)) } },
        {
          for _ in 0..<iterations { blackHole(XXH3_128bits_dispatch(raw.baseAddress, raw.count)) }
        },
      ], repetitions: b.repetitions * 3)
    b.add(
      Result(
        suite: "hash", name: "one-shot, \(sizeName(size)) in memory",
        parameters: ["size": "\(size)", "iterations": "\(iterations)"], unit: .gigabytesPerSecond,
        trove: rate(timed[0], bytes), referenceName: "C XXH3_128bits_dispatch",
        reference: rate(timed[1], bytes)))
  }

  // Streaming in small chunks against one shot over the same buffer: 4 MiB,
  // within the caches, hashed over and over, so the figure is the cost of
  // the updates, not the machine's memory bandwidth (which can swing
  // several-fold from one second to the next).
  let streamSize = 4 << 20
  let stream = alignedBuffer(streamSize)
  defer { stream.deallocate() }
  let raw = UnsafeRawBufferPointer(stream)
  let passes = max(1, perSample / streamSize)
  for chunk in [4 << 10, 64 << 10, 1 << 20] {
    let timed = try b.time(
      [
        {
          for _ in 0..<passes {
            var hasher = XXH3Hasher()
            var offset = 0
            while offset < raw.count {
              hasher.update(
                UnsafeRawBufferPointer(rebasing: raw[offset..<min(offset + chunk, raw.count)]))
              offset += chunk
            }
            blackHole(hasher.finalize())
          }
        },
        { for _ in 0..<passes { blackHole(XXH3Hasher.digest(raw)) } },
      ], repetitions: b.repetitions * 3)
    let bytes = Double(streamSize * passes)
    b.add(
      Result(
        suite: "hash", name: "streaming in \(sizeName(chunk)) updates",
        parameters: ["size": "\(streamSize)", "chunk": "\(chunk)", "passes": "\(passes)"],
        unit: .gigabytesPerSecond, trove: rate(timed[0], bytes),
        referenceName: "one-shot, same buffer", reference: rate(timed[1], bytes)))
  }

  // xxhsum's own in-memory benchmark (100 KB sample) against the same-sized one-shot.
  if let line = try? Spawn.capture(["xxhsum", "-b11", "-i3", "-q"], stderr: true),
    let rateText = line.components(separatedBy: "(").last?.components(separatedBy: " MB/s").first,
    let mbps = Double(rateText.trimmingCharacters(in: .whitespaces))
  {
    // xxhsum hashes a 64-byte-aligned buffer and reports its fastest run;
    // so does this row (an Array's storage is only 16-byte aligned).
    let sample = alignedBuffer(102_400)
    defer { sample.deallocate() }
    let iterations = perSample / sample.count
    let raw = UnsafeRawBufferPointer(sample)
    let timed = try b.time([
      { for _ in 0..<iterations { blackHole(XXH3Hasher.digest(raw)) } },
      { for _ in 0..<iterations { blackHole(XXH3_128bits_dispatch(raw.baseAddress, raw.count)) } },
    ])
    let bytes = Double(iterations * sample.count)
    let fastest = { (series: Series) in Series(samples: [rate(series, bytes).max]) }
    b.add(
      Result(
        suite: "hash", name: "one-shot, 100 KB in memory, fastest run",
        parameters: ["size": "102400"], unit: .gigabytesPerSecond, trove: fastest(timed[0]),
        referenceName: "xxhsum -b11 (XXH128)", reference: Series(samples: [mbps / 1000]),
        note: "xxhsum reports its fastest run; so does this row"))
    b.add(
      Result(
        suite: "hash", name: "one-shot, 100 KB in memory, fastest run",
        parameters: ["size": "102400"], unit: .gigabytesPerSecond, trove: fastest(timed[0]),
        referenceName: "C XXH3_128bits_dispatch", reference: fastest(timed[1])))
  } else {
    b.skip("xxhsum -b", "xxhsum is not installed or printed no XXH128 rate")
  }

  // Content-defined chunks (the gear hash and each chunk's XXH3) over
  // random bytes in 1 MiB pieces, as a put would feed them, against the
  // XXH3 a put already computes over the same pieces: what chunking adds.
  let chunkSize = b.size(256 << 20, quick: 16 << 20)
  let random = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 64)
  defer { random.deallocate() }
  var generator = SystemRandomNumberGenerator()
  for i in stride(from: 0, to: chunkSize, by: 8) {
    random.storeBytes(of: generator.next() as UInt64, toByteOffset: i, as: UInt64.self)
  }
  let pieces = UnsafeRawBufferPointer(random)
  func feed(_ update: (UnsafeRawBufferPointer) -> Void) {
    var offset = 0
    while offset < pieces.count {
      update(
        UnsafeRawBufferPointer(rebasing: pieces[offset..<min(offset + (1 << 20), pieces.count)]))
      offset += 1 << 20
    }
  }
  let chunking = try b.time(
    [
      {
        var chunker = ChunkHasher()
        feed { chunker.update($0) }
        blackHole(chunker.finish().count)
      },
      {
        var hasher = XXH3Hasher()
        feed { hasher.update($0) }
        blackHole(hasher.finalize())
      },
    ], repetitions: b.repetitions)
  b.add(
    Result(
      suite: "hash", name: "content-defined chunks, \(sizeName(chunkSize)) in memory",
      parameters: ["size": "\(chunkSize)", "piece": "1 MiB"], unit: .gigabytesPerSecond,
      trove: rate(chunking[0], Double(chunkSize)), referenceName: "XXH3 streaming, same pieces",
      reference: rate(chunking[1], Double(chunkSize))))

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

/// A 64-byte aligned buffer of `size` pattern bytes; the caller deallocates it.
func alignedBuffer(_ size: Int) -> UnsafeMutableRawBufferPointer {
  let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 64)
  for i in 0..<size { buffer[i] = UInt8(truncatingIfNeeded: i &* 2_654_435_761 >> 7) }
  return buffer
}
