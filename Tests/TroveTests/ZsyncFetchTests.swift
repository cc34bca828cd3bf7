import Foundation
import Testing

@testable import Trove

/// `trove fetch --zsync`: a new version of a URL rebuilt from the cached
/// one and the ranges it lacks, as a control file made by Debian's
/// `zsyncmake` describes, against a real nginx.
@Suite(.enabled(if: Nginx.executable != nil, Nginx.missing))
struct ZsyncFetchTests {
  static let zsyncmake = ["/usr/bin/zsyncmake", "/usr/local/bin/zsyncmake"].first {
    FileManager.default.isExecutableFile(atPath: $0)
  }

  /// Writes `bytes` as `name` into nginx's folder, with `name.zsync` made
  /// by zsyncmake (`blockSize` bytes a block when given).
  static func publish(_ nginx: Nginx, _ name: String, _ bytes: [UInt8], blockSize: Int? = nil)
    throws
  {
    let path = try nginx.files.write(name, bytes)
    guard let zsyncmake else { throw TestFailure("zsyncmake is not installed") }
    let io = try Scratch()
    let run = try Spawned(
      executable: zsyncmake,
      ["-u", name, "-o", path + ".zsync"] + (blockSize.map { ["-b", "\($0)"] } ?? []) + [path],
      io: io["zsyncmake"]
    ).wait()
    guard run.status == 0 else { throw TestFailure("zsyncmake: \(run.stderr)") }
  }

  /// `old` with 5,000 bytes rewritten at each of `at` and `inserted`
  /// bytes inserted at `insert`. (Versions of different lengths: nginx's
  /// ETag is the file's length and mtime, in seconds.)
  static func edited(_ old: [UInt8], at: [Int], insert: Int, inserted: Int = 100) -> [UInt8] {
    var new = old
    for (n, start) in at.enumerated() {
      new.replaceSubrange(start..<(start + 5000), with: Bytes.random(5000, seed: 3900 + UInt64(n)))
    }
    new.insert(contentsOf: Bytes.random(inserted, seed: 3950), at: insert)
    return new
  }

  @Test(
    "with --zsync a new version is rebuilt from the cached one: only ranges around the changes are downloaded, the object is the new file, and the URL is bound with its validators",
    .enabled(
      if: zsyncmake != nil, "zsyncmake is not installed: scripts/deps.sh test installs zsync")
  )
  func rebuildsFromCachedVersion() throws {
    let nginx = try Nginx()
    let old = Bytes.random(8 << 20, seed: 3901)
    _ = try nginx.files.write("model.bin", old)
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try FetchTests.fetch(store, [nginx.url("/model.bin")]).status == 0)

    let new = Self.edited(old, at: [1_000_000, 5_000_000], insert: 3_000_000)
    try Self.publish(nginx, "model.bin", new)
    let run = try FetchTests.fetch(store, ["--zsync", "--json", nginx.url("/model.bin")])
    #expect(run.status == 0, "\(run.stderr)")
    #expect(run.errorLines.isEmpty, "\(run.stderr)")
    let record = try FetchTests.record(run)
    #expect(record["source"] as? String == "delta", "\(record)")
    #expect(record["digest"] as? String == XXH3Hasher.digest(new).description)
    // The control file (about 4 KiB) and, around each change, a few blocks.
    let transferred = record["bytesTransferred"] as? Int ?? .max
    #expect(transferred < 200 << 10, "\(record)")
    let ranged = nginx.requests("/model.bin").dropFirst()
    #expect(!ranged.isEmpty && ranged.allSatisfy { $0.contains(" 206 ") }, "\(ranged)")
    #expect(
      ranged.dropFirst().allSatisfy { Nginx.quoted($0)[1] != "-" }, "no If-Range: \(ranged)")
    #expect(try CLI.run(["--store", store, "verify"]).status == 0)
    // The object's file holds the new version's bytes.
    let stored = try contents(objectFilePath(store, XXH3Hasher.digest(new))) == new
    #expect(stored)

    // Its validators were recorded: the next fetch is a 304, with no body.
    let again = try FetchTests.record(
      try FetchTests.fetch(store, ["--zsync", "--json", nginx.url("/model.bin")]))
    #expect(again["source"] as? String == "revalidated", "\(again)")
  }

  @Test(
    "a control file that does not describe the file (its digest or its blocks) is a warning, and the body is downloaded whole and right",
    .enabled(
      if: zsyncmake != nil, "zsyncmake is not installed: scripts/deps.sh test installs zsync")
  )
  func lyingControlFileFallsBack() throws {
    let nginx = try Nginx()
    let old = Bytes.random(4 << 20, seed: 3902)
    _ = try nginx.files.write("data.bin", old)
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try FetchTests.fetch(store, [nginx.url("/data.bin")]).status == 0)

    // The control file describes another version than the one served.
    let described = Self.edited(old, at: [2_000_000], insert: 100_000)
    try Self.publish(nginx, "data.bin", described)
    let served = Self.edited(old, at: [3_000_000], insert: 200_000, inserted: 300)
    _ = try nginx.files.write("data.bin", served)
    let run = try FetchTests.fetch(store, ["--zsync", "--json", nginx.url("/data.bin")])
    #expect(run.status == 0, "\(run.stderr)")
    let record = try FetchTests.record(run)
    #expect(record["source"] as? String == "network", "\(record)")
    #expect(record["digest"] as? String == XXH3Hasher.digest(served).description)
    #expect(run.errorLines.count == 1, "\(run.stderr)")
    #expect(run.stderr.contains("downloading it whole"), "\(run.stderr)")
    #expect(try CLI.run(["--store", store, "verify"]).status == 0)
    #expect(storeTemporaries(store).isEmpty)
  }

  @Test(
    "a stale control file that rebuilds the cached body is not bound to the server's new validators: a warning, and the new body downloaded whole",
    .enabled(
      if: zsyncmake != nil, "zsyncmake is not installed: scripts/deps.sh test installs zsync")
  )
  func staleControlFileIsNotBound() throws {
    let nginx = try Nginx()
    let old = Bytes.random(2 << 20, seed: 3904)
    // The control file describes the version the store holds.
    try Self.publish(nginx, "same.bin", old)
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try FetchTests.fetch(store, [nginx.url("/same.bin")]).status == 0)
    // A new version of the same length; its control file was not remade.
    var new = old
    new.replaceSubrange(1_000_000..<1_004_000, with: Bytes.random(4000, seed: 3905))
    Thread.sleep(forTimeInterval: 1.1)  // a new mtime, so a new ETag
    _ = try nginx.files.write("same.bin", new)
    let run = try FetchTests.fetch(store, ["--zsync", "--json", nginx.url("/same.bin")])
    let record = try FetchTests.record(run)
    #expect(record["source"] as? String == "network", "\(record)")
    #expect(record["digest"] as? String == XXH3Hasher.digest(new).description)
    #expect(run.errorLines.count == 1, "\(run.stderr)")
    #expect(
      run.stderr.contains("not the control file's")
        || run.stderr.contains("describes the cached body"), "\(run.stderr)")
  }

  @Test(
    "a missing, oversized or malformed control file is one warning line naming it, and the body is downloaded whole"
  )
  func unusableControlFileFallsBack() throws {
    let nginx = try Nginx()
    let old = Bytes.random(1 << 20, seed: 3903)
    _ = try nginx.files.write("lib.tar", old)
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try FetchTests.fetch(store, [nginx.url("/lib.tar")]).status == 0)
    var version: UInt64 = 0
    for (control, expected) in [
      (nil, "answered HTTP 404"),
      (Array("zsync: 0.6.2\nBlocksize: 3000\nLength: 10\n\n".utf8), "Blocksize '3000'"),
      (
        Array(
          "zsync: 0.6.2\nBlocksize: 2048\nLength: 1048576\nSHA-1: \(String(repeating: "0", count: 40))\n\nshort"
            .utf8), "bytes of block checksums"
      ),
      (Array("not a control file\n\n".utf8), "does not start with 'zsync:'"),
      // Well formed, for a file of another length than the server's.
      (ZsyncControlTests.control(Bytes.random(3 << 20, seed: 3906)), "gives a length of 3145728"),
    ] as [([UInt8]?, String)] {
      version += 1
      let new = Self.edited(
        old, at: [500_000], insert: Int(version) * 1000, inserted: Int(version) * 100)
      _ = try nginx.files.write("lib.tar", new)
      if let control {
        _ = try nginx.files.write("lib.tar.zsync", control)
      }
      let run = try FetchTests.fetch(store, ["--zsync", "--json", nginx.url("/lib.tar")])
      #expect(run.status == 0, "\(run.stderr)")
      #expect(try FetchTests.record(run)["digest"] as? String == XXH3Hasher.digest(new).description)
      #expect(run.errorLines.count == 1, "\(run.stderr)")
      let line = run.errorLines.first ?? ""
      #expect(line.contains("lib.tar.zsync") && line.contains(expected), "\(line)")
    }
  }

  @Test("--zsync-url: one URL, http or https, and never with --zsync; its login is not printed")
  func zsyncURLIsChecked() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    for (arguments, expected) in [
      (["--zsync-url", "http://a/x.zsync", "http://a/x", "http://a/y"], "exactly one <url>"),
      (["--zsync-url", "ftp://user:secret@a/x.zsync", "http://a/x"], "'ftp://a/x.zsync'"),
      (["--zsync", "--zsync-url", "http://a/x.zsync", "http://a/x"], "give one"),
    ] {
      let run = try FetchTests.fetch(store, arguments)
      #expect(run.status == 64, "\(arguments): \(run.stderr)")
      #expect(run.stderr.contains(expected), "\(arguments): \(run.stderr)")
      #expect(!run.stderr.contains("secret"), "\(run.stderr)")
    }
  }
}

/// The control file's parser and the search, on files made here.
@Suite("zsync control files and block search")
struct ZsyncControlTests {
  /// A control file for `bytes` as zsyncmake writes one, with
  /// `sequence`, `rolling` and `strong` as its Hash-Lengths.
  static func control(
    _ bytes: [UInt8], blockSize: Int = 1024, sequence: Int = 2, rolling: Int = 3, strong: Int = 5
  ) -> [UInt8] {
    var out = Array(
      "zsync: 0.6.2\nFilename: f\nBlocksize: \(blockSize)\nLength: \(bytes.count)\nHash-Lengths: \(sequence),\(rolling),\(strong)\nURL: f\nSHA-1: \(hex(bytes, "SHA1"))\n\n"
        .utf8)
    for start in stride(from: 0, to: bytes.count, by: blockSize) {
      var block = Array(bytes[start..<min(bytes.count, start + blockSize)])
      block += [UInt8](repeating: 0, count: blockSize - block.count)
      var a: UInt32 = 0
      var b: UInt32 = 0
      for (k, byte) in block.enumerated() {
        a &+= UInt32(byte)
        b &+= UInt32(blockSize - k) &* UInt32(byte)
      }
      let sum = (a & 0xFFFF) << 16 | (b & 0xFFFF)
      out += (0..<rolling).reversed().map { UInt8(truncatingIfNeeded: sum >> (8 * UInt32($0))) }
      out += block.withUnsafeBytes { EVPHasher.digest("MD4", of: $0)! }.prefix(strong)
    }
    return out
  }

  static func hex(_ bytes: [UInt8], _ algorithm: String) -> String {
    bytes.withUnsafeBytes { EVPHasher.digest(algorithm, of: $0)! }
      .map { String(format: "%02x", $0) }.joined()
  }

  @Test("MD4 is libcrypto's: the RFC 1320 test vectors")
  func md4Vectors() {
    for (text, digest) in [
      ("", "31d6cfe0d16ae931b73c59d7e0c089c0"), ("abc", "a448017aaf21d8525fc10ae87aa6729d"),
    ] {
      #expect(Self.hex(Array(text.utf8), "MD4") == digest)
    }
  }

  @Test(
    "the search finds blocks shifted by an insertion, pairs of blocks with short sums, and not a changed block"
  )
  func searchFindsShiftedBlocks() throws {
    let old = Bytes.random(256 << 10, seed: 3910)
    var new = old
    new.insert(contentsOf: Bytes.random(100, seed: 3911), at: 50_000)
    new[150_000] ^= 0xFF
    let control = try ZsyncControl(Self.control(new))
    let scratch = try Scratch()
    let path = try scratch.write("old", old)
    let file = try FileDescriptor.open(path)
    defer { file.close() }
    let found = try ZsyncSearch.locate(control, in: file, size: Int64(old.count))
    for k in 0..<control.blockCount {
      let block = k * 1024..<min(new.count, (k + 1) * 1024)
      let changed =
        block.overlaps(50_000..<50_100) || block.contains(150_000) || block.count < 1024
      if changed {
        #expect(found[k] == nil, "block \(k) holds a change and was found at \(found[k] ?? -1)")
      } else {
        let shift = block.lowerBound >= 50_100 ? 100 : 0
        // Next to a changed block, a pair of blocks may not match.
        let neighbour =
          (block.lowerBound - 1024..<block.upperBound + 1024).overlaps(50_000..<50_100)
          || (block.lowerBound - 1024..<block.upperBound + 1024).contains(150_000)
        if !neighbour {
          #expect(found[k] == Int64(block.lowerBound - shift), "block \(k)")
        }
      }
      if let at = found[k] {
        #expect(Array(old[Int(at)..<(Int(at) + block.count)]) == Array(new[block]), "block \(k)")
      }
    }
  }

  @Test("a file of identical blocks is found in one pass, each block once")
  func identicalBlocksAreFoundOnce() throws {
    let zeros = [UInt8](repeating: 0, count: 4 << 20)
    let control = try ZsyncControl(Self.control(zeros, blockSize: 512))
    let scratch = try Scratch()
    let path = try scratch.write("zeros", zeros + [1, 2, 3])
    let file = try FileDescriptor.open(path)
    defer { file.close() }
    let found = try ZsyncSearch.locate(control, in: file, size: Int64(zeros.count + 3))
    #expect(found.allSatisfy { $0 != nil })
  }

  @Test("the default control file is the URL's path with .zsync, before a query or fragment")
  func controlURLBesideFile() {
    #expect(Fetcher.controlURL(beside: "http://h/a/f.iso") == "http://h/a/f.iso.zsync")
    #expect(Fetcher.controlURL(beside: "http://h/f.iso?sig=x") == "http://h/f.iso.zsync?sig=x")
    #expect(Fetcher.controlURL(beside: "http://h/f.iso#top") == "http://h/f.iso.zsync#top")
  }

  @Test("malformed control files are refused with the reason")
  func malformedControlFilesAreRefused() {
    let good = Self.control(Bytes.random(10_000, seed: 3912))
    #expect((try? ZsyncControl(good)) != nil)
    for (bytes, reason) in [
      (Array(good.dropLast()), "bytes of block checksums"),
      (good + [0], "bytes of block checksums"),
      (Array("zsync: 1\nBlocksize: 1024\nLength: -5\n\n".utf8), "Length '-5'"),
      (Array("zsync: 1\nBlocksize: 1024\nLength: 5\nHash-Lengths: 3,2,4\n\n".utf8), "Hash-Lengths"),
      (Array("zsync: 1\nBlocksize: 1024\nLength: 5\nHash-Lengths: 2,1,4\n\n".utf8), "Hash-Lengths"),
      (
        Array(
          "zsync: 1\nBlocksize: 64\nLength: 1099511627776\nSHA-1: \(String(repeating: "0", count: 40))\n\n"
            .utf8),
        "blocks, over"
      ),
      (Array("zsync: 1\nX-\u{1B}[31m: 1\nX-\u{1B}[31m: 2\n\n".utf8), "\\x1b"),
      (Array("zsync: 1\nBlocksize: 1024\nLength: 5\nZ-Map2: 3\n\n".utf8), "compressed"),
      (Array("zsync: 1\nBlocksize: 1024\nLength: 0\n\n".utf8), "no SHA-1"),
      (Array("zsync: 1\nBlocksize: 1024\nBlocksize: 1024\n\n".utf8), "repeated"),
      (Array("zsync: 1\nBlocksize: 1024".utf8), "blank line"),
    ] as [([UInt8], String)] {
      do {
        _ = try ZsyncControl(bytes)
        Issue.record("accepted: \(reason)")
      } catch {
        #expect(error.reason.contains(reason), "\(error.reason)")
      }
    }
  }
}
