import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// zstd objects: round trips, interop with the zstd command, skips,
/// mixed stores, recompress, corruption.
@Suite("Compression (zstd)")
struct CompressionTests {
  /// Runs the zstd command; its exit status and standard output.
  static func zstd(_ arguments: [String]) throws -> (status: Int32, out: [UInt8]) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/zstd")
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let out = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, Array(out))
  }

  func store(_ scratch: Scratch, _ compression: String, minimum: Int64 = 64 * 1024) throws -> Store
  {
    let store = try scratch.store()
    try store.updatePolicy { (policy) throws(TroveError) in
      try CachePolicy.Key.compression.set(compression, in: &policy)
      policy.compressionMinimumSize = minimum
    }
    return store
  }

  @Test(
    "round trips at several levels and sizes",
    arguments: [("zstd:1", 1), ("zstd:3", 3), ("zstd:19", 19), ("zstd:-5", -5)])
  func roundTrip(setting: String, level: Int) throws {
    let scratch = try Scratch()
    let store = try store(scratch, setting, minimum: 1000)
    for size in [0, 1, 999, 1000, 70_000, 3 << 20] {
      let data = Bytes.text(size, seed: UInt64(size))
      let put = try store.put(bytes: data)
      #expect(put.digest == XXH3Hasher.digest(data))
      let object = try #require(try store.objects.find(put.digest))
      #expect(object.isCompressed == (size >= 1000), "size \(size)")
      #expect(try store.bytes(for: put.digest) == data)
      let got = try store.materialize(put.digest, at: scratch["out-\(size)"])
      #expect(got.method == (size >= 1000 ? .decompress : got.method))
      #expect(try contents(scratch["out-\(size)"]) == data)
    }
    #expect(scratch.temporaries("store").isEmpty)
  }

  @Test(
    "a compressed object is a standard zstd frame: zstd -d gives the bytes back",
    .enabled(
      if: FileManager.default.isExecutableFile(atPath: "/usr/bin/zstd"),
      "the zstd command is not installed"))
  func interop() throws {
    let scratch = try Scratch()
    let store = try store(scratch, "zstd:3")
    let data = Bytes.text(2 << 20, seed: 7)
    let digest = try store.put(bytes: data).digest
    let object = objectFilePath(scratch["store"], digest, compressed: true)
    #expect(try contents(object).prefix(4) == [0x28, 0xB5, 0x2F, 0xFD])
    let decompressed = try Self.zstd(["-d", "-q", "-c", object])
    #expect(decompressed.status == 0 && decompressed.out == data)
    // The frame records the content size and a checksum.
    let text = String(decoding: try Self.zstd(["-lv", object]).out, as: UTF8.self)
    #expect(text.contains("Check: XXH64"))
    #expect(text.contains("Decompressed Size: 2.00 MiB (2097152 B)"))
  }

  @Test("a file is hashed and compressed in one pass; a re-put of it is a dedup hit")
  func filePut() throws {
    let scratch = try Scratch()
    let store = try store(scratch, "zstd:3")
    let data = Bytes.text(3 << 20, seed: 16)
    let file = try scratch.write("in.txt", data)
    let put = try store.put(file: file)
    #expect(put.digest == XXH3Hasher.digest(data) && !put.isDuplicate)
    #expect(try store.objects.find(put.digest)?.isCompressed == true)
    #expect(scratch.temporaries("store").isEmpty)
    let again = try store.put(file: try scratch.write("again.txt", data))
    #expect(again.isDuplicate && again.digest == put.digest)
    let stats = try store.statistics()
    #expect(stats.entries == 1 && stats.compressedEntries == 1 && stats.dedupHits == 1)
    #expect(
      stats.storedBytes
        == Int64(
          try fileStatus(objectFilePath(scratch["store"], put.digest, compressed: true))
            .size))
    let piped = try CLI.run(["--store", scratch["store"], "put", "-"], stdin: data)
    #expect(piped.out == "\(put.digest)  -\n")
    try store.materialize(put.digest, at: scratch["out.txt"])
    #expect(try contents(scratch["out.txt"]) == data)
  }

  @Test(
    "a stream is compressed as it arrives: no raw copy, zstd reads it, a lost index recovers its size",
    .enabled(
      if: FileManager.default.isExecutableFile(atPath: "/usr/bin/zstd"),
      "the zstd command is not installed"))
  func streamPut() throws {
    let scratch = try Scratch()
    let data = Bytes.text(4 << 20, seed: 17)
    var digest: BlobDigest
    do {
      let store = try store(scratch, "zstd:3")
      // Unknown length, arriving in 64 KiB pieces.
      let writer = try store.makeWriter()
      for start in stride(from: 0, to: 3 << 20, by: 64 << 10) {
        try writer.write(Array(data[start..<start + (64 << 10)]))
      }
      // Mid-stream, the temp file holds a frame, not 3 MiB of raw bytes.
      let temps = scratch.temporaries("store")
      #expect(temps.count == 1)
      let tempSize = try fileStatus(scratch["store/tmp/" + temps[0]]).size
      #expect(tempSize > 0 && tempSize < 2 << 20, "temp file of \(tempSize) bytes")
      try writer.write(Array(data[(3 << 20)...]))
      let put = try writer.commit()
      digest = put.digest
      #expect(put.digest == XXH3Hasher.digest(data) && put.size == Int64(data.count))
      #expect(try store.objects.find(put.digest)?.isCompressed == true)
      #expect(scratch.temporaries("store").isEmpty)
      #expect(try store.bytes(for: put.digest) == data)
      let stats = try store.statistics()
      #expect(stats.logicalBytes == Int64(data.count) && stats.storedBytes < Int64(data.count) / 2)
      // The same bytes from a file: a dedup hit on the stream's object.
      #expect(try store.put(file: try scratch.write("same.txt", data)).isDuplicate)
    }
    let object = objectFilePath(scratch["store"], digest, compressed: true)
    let decompressed = try Self.zstd(["-d", "-q", "-c", object])
    #expect(decompressed.status == 0 && decompressed.out == data)
    // The frame has no content size (the length was not known when it
    // began); a rebuilt index counts it by decompressing.
    let text = String(decoding: try Self.zstd(["-lv", object]).out, as: UTF8.self)
    #expect(text.contains("Check: XXH64") && !text.contains("Decompressed Size"))
    for suffix in ["", "-wal", "-shm"] {
      try? FileManager.default.removeItem(atPath: scratch["store/index.sqlite" + suffix])
    }
    let reopened = try scratch.store()
    let entry = try #require(try reopened.entries().first { $0.digest == digest })
    #expect(entry.size == Int64(data.count) && entry.isCompressed)
  }

  @Test("streams that do not compress, or end within the sample, are judged like files")
  func streamSkips() throws {
    let scratch = try Scratch()
    let store = try store(scratch, "zstd:3")
    func stream(_ data: [UInt8], expected: Int64? = nil) throws -> BlobDigest {
      let writer = try store.makeWriter(expectedSize: expected)
      for start in stride(from: 0, to: data.count, by: 100_000) {
        try writer.write(Array(data[start..<min(start + 100_000, data.count)]))
      }
      return try writer.commit().digest
    }
    let random = try stream(Bytes.random(1 << 20, seed: 18))
    let short = try stream(Bytes.text(150_000, seed: 19))  // within the 256 KiB sample
    let tiny = try stream(Bytes.text(10_000, seed: 20))  // below compression-min-size
    // A wrong Content-Length is only a hint: the bytes are stored as they came.
    let hinted = Bytes.text(1 << 20, seed: 21)
    let wrong = try stream(hinted, expected: 3 << 20)
    #expect(try store.objects.find(random)?.isCompressed == false)
    #expect(try store.objects.find(short)?.isCompressed == true)
    #expect(try store.objects.find(tiny)?.isCompressed == false)
    #expect(try store.objects.find(wrong)?.isCompressed == true)
    #expect(try store.bytes(for: wrong) == hinted)
    let stats = try store.statistics()
    #expect(stats.skippedIncompressible == 1 && stats.skippedSmall == 1)
    #expect(stats.compressedEntries == 2)
    #expect(scratch.temporaries("store").isEmpty)
  }

  @Test("incompressible and small objects are stored raw (and clonable), and counted")
  func skips() throws {
    let scratch = try Scratch()
    let store = try store(scratch, "zstd:3")
    let random = try store.put(bytes: Bytes.random(1 << 20, seed: 8)).digest
    let small = try store.put(bytes: Bytes.text(10_000, seed: 9)).digest
    let text = try store.put(bytes: Bytes.text(1 << 20, seed: 10)).digest
    #expect(try store.objects.find(random)?.isCompressed == false)
    #expect(try store.objects.find(small)?.isCompressed == false)
    #expect(try store.objects.find(text)?.isCompressed == true)
    let stats = try store.statistics()
    #expect(stats.skippedIncompressible == 1 && stats.skippedSmall == 1)
    #expect(stats.compressedEntries == 1)
    #expect(stats.storedBytes < stats.logicalBytes)
    #expect(stats.compressionRatio > 1.2)
    #expect(try store.path(for: random).hasSuffix(random.hex))
  }

  @Test("a compressed object cannot be cloned, linked or read in place; --decompress stores it raw")
  func inPlace() throws {
    let scratch = try Scratch()
    let store = try store(scratch, "zstd:3")
    let data = Bytes.text(500_000, seed: 11)
    let digest = try store.put(bytes: data).digest
    #expect {
      try store.path(for: digest)
    } throws: {
      ($0 as? TroveError)?.code == .storedCompressed && "\($0)".contains("compressed (zstd)")
    }
    #expect {
      try store.materialize(digest, at: scratch["c"], mode: .clone)
    } throws: { ($0 as? TroveError)?.code == .cloneUnsupported }
    #expect {
      try store.materialize(digest, at: scratch["h"], mode: .hardlink)
    } throws: { ($0 as? TroveError)?.code == .linkUnsupported }
    #expect(scratch.list("").sorted() == ["store"])
    let cli = try CLI.run(["--store", scratch["store"], "path", digest.description])
    #expect(cli.status == 69 && cli.errorLines.count == 1)
    let path = try store.path(for: digest, decompressing: true)
    #expect(try contents(path) == data)
    #expect(try store.objects.find(digest)?.isCompressed == false)
    #expect(scratch.list("store/objects/\(digest.hex.prefix(2))") == [digest.hex])
    #expect(try store.statistics().compressedEntries == 0)
  }

  @Test("a mixed store works after the policy changes, and recompress converts both ways")
  func mixedAndRecompress() throws {
    let scratch = try Scratch()
    let store = try store(scratch, "none")
    let a = Bytes.text(300_000, seed: 12)
    let b = Bytes.text(400_000, seed: 13)
    let da = try store.put(bytes: a).digest
    try store.updatePolicy { $0.compression = .zstd(level: 3) }
    let db = try store.put(bytes: b).digest
    #expect(try store.objects.find(da)?.isCompressed == false)
    #expect(try store.objects.find(db)?.isCompressed == true)
    #expect(try store.bytes(for: da) == a && store.bytes(for: db) == b)

    let up = try store.recompress()
    #expect(up.compressed == 1 && up.decompressed == 0)
    #expect(try store.objects.find(da)?.isCompressed == true)
    #expect(up.storedBytesAfter < up.storedBytesBefore)
    #expect(try store.statistics().compressedEntries == 2)

    try store.updatePolicy { $0.compression = .none }
    let down = try store.recompress()
    #expect(down.decompressed == 2)
    #expect(try store.objects.find(da)?.isCompressed == false)
    #expect(try store.objects.find(db)?.isCompressed == false)
    let stats = try store.statistics()
    #expect(stats.compressedEntries == 0 && stats.storedBytes == stats.logicalBytes)
    #expect(try store.bytes(for: db) == b)
    #expect(try store.verify().isClean)
    #expect(scratch.temporaries("store").isEmpty)
  }

  @Test("a damaged frame or a wrong payload is an error, never wrong bytes at the destination")
  func corruption() throws {
    let scratch = try Scratch()
    let store = try store(scratch, "zstd:3")
    let data = Bytes.text(1 << 20, seed: 14)
    let digest = try store.put(bytes: data).digest
    let object = objectFilePath(scratch["store"], digest, compressed: true)
    chmod(object, 0o644)
    var bytes = try contents(object)
    bytes[bytes.count / 2] ^= 0xFF
    try Data(bytes).write(to: URL(fileURLWithPath: object))
    #expect {
      try store.materialize(digest, at: scratch["out"])
    } throws: { ($0 as? TroveError)?.code == .corruptObject && "\($0)".contains("zstd") }
    #expect(!FileManager.default.fileExists(atPath: scratch["out"]))
    #expect(scratch.list("").sorted() == ["store"])
    // Found corrupt, the object went to quarantine/: never served again.
    #expect(scratch.list("store/quarantine").count == 1)
    #expect(try store.contains(digest) == false)
    #expect(throws: TroveError.self) { try store.bytes(for: digest) }
    let cli = try CLI.run(["--store", scratch["store"], "get", digest.description, scratch["cli"]])
    #expect(cli.status == 1 && cli.errorLines.count == 1)
    // Stored again, then a valid frame of other bytes under its name:
    // caught by the digest, by the CLI as by the library.
    #expect(try store.put(bytes: data).digest == digest)
    let other = try store.put(bytes: Bytes.text(1 << 20, seed: 15)).digest
    try FileManager.default.removeItem(atPath: object)
    try FileManager.default.copyItem(
      atPath: objectFilePath(scratch["store"], other, compressed: true), toPath: object)
    let swapped = try CLI.run([
      "--store", scratch["store"], "get", digest.description, scratch["cli"],
    ])
    #expect(swapped.status == 65 && swapped.errorLines.count == 1, "\(swapped.stderr)")
    #expect(swapped.stderr.contains("hash to \(other)"), "\(swapped.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["cli"]))
    #expect(scratch.list("store/quarantine").count == 2)
    #expect(try store.contains(digest) == false)
    #expect(try store.verify(repair: true).isClean)
  }

  @Test("compression settings are validated with the accepted forms")
  func settings() throws {
    var policy = CachePolicy.default
    for good in ["none", "zstd", "zstd:1", "zstd:19", "zstd:-3"] {
      try CachePolicy.Key.compression.set(good, in: &policy)
    }
    #expect(policy.compression == .zstd(level: -3))
    for bad in ["gzip", "zstd:0", "zstd:23", "zstd:x", "zstd3"] {
      #expect {
        try CachePolicy.Key.compression.set(bad, in: &policy)
      } throws: { "\($0)".contains("'\(bad)'") && "\($0)".contains("zstd:LEVEL") }
    }
  }
}
