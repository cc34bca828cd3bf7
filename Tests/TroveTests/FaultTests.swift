import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// Full filesystems, refused permissions and failing system calls: a one-line
/// error naming the path and the cause, and nothing partial left behind.
@Suite("Faults: full disk, permissions, I/O errors", .serialized)
struct FaultTests {
  @Test(
    "ENOSPC during put: a clear error, nothing partial in the store, which stays usable",
    .enabled(if: TestFilesystems.small != nil, TestFilesystems.smallMissing))
  func putOnFullDisk() throws {
    let scratch = try Scratch()
    let small = try Scratch(under: TestFilesystems.small!)
    let store = try small.store()
    let big = try scratch.write("big.bin", Bytes.random(16 * 1024 * 1024, seed: 30))
    // Known sizes that cannot fit fail before a byte is written, naming the input.
    #expect {
      try store.put(file: big)
    } throws: { error in
      guard let error = error as? TroveError else { return false }
      return error.code == .noSpace && "\(error)".contains("cannot put '\(big)': it needs 16.0 MiB")
    }
    #expect {
      try store.put(bytes: Bytes.random(16 * 1024 * 1024, seed: 31))
    } throws: { ($0 as? TroveError)?.code == .noSpace }
    // A stream of unknown length finds out by writing.
    let writer = try store.makeWriter()
    #expect {
      for i in 0..<16 { try writer.write(Bytes.random(1 << 20, seed: UInt64(200 + i))) }
    } throws: { error in
      guard let error = error as? TroveError else { return false }
      return error.code == .noSpace && error.cause?.errno == .noSpace
        && "\(error)".contains("No space left on device")
    }
    #expect(throws: TroveError.self) { try writer.commit() }
    #expect(small.temporaries("store").isEmpty)
    #expect(small.list("store/objects").isEmpty)
    #expect(try store.entries().isEmpty)
    let ok = try store.put(bytes: Bytes.random(100_000, seed: 32))
    #expect(try store.bytes(for: ok.digest).count == 100_000)
  }

  @Test(
    "ENOSPC during get: nothing at the destination, no temp file beside it",
    .enabled(if: TestFilesystems.small != nil, TestFilesystems.smallMissing))
  func getOnFullDisk() throws {
    let scratch = try Scratch()
    let small = try Scratch(under: TestFilesystems.small!)
    let store = try scratch.store()
    let digest = try store.put(bytes: Bytes.random(16 * 1024 * 1024, seed: 33)).digest
    for mode in [LinkMode.auto, .copy] {
      #expect {
        try store.materialize(digest, at: small["out.bin"], mode: mode)
      } throws: { error in
        (error as? TroveError)?.code == .noSpace && "\(error)".contains(small["out.bin"])
      }
      #expect(small.list("").isEmpty)
    }
  }

  @Test(
    "the CLI on a full disk: exit 74, one line on stderr, nothing left",
    .enabled(if: TestFilesystems.small != nil, TestFilesystems.smallMissing))
  func cliFullDisk() throws {
    let scratch = try Scratch()
    let small = try Scratch(under: TestFilesystems.small!)
    let big = try scratch.write("big.bin", Bytes.random(16 * 1024 * 1024, seed: 34))
    let put = try CLI.run(["--store", small["store"], "put", big])
    #expect(put.status == 74)
    #expect(put.errorLines.count == 1)
    #expect(put.errorLines.first?.hasPrefix("Error: cannot ") == true)
    #expect(put.errorLines.first?.contains("cannot put '\(big)': it needs 16.0 MiB") == true)
    #expect(small.temporaries("store").isEmpty && small.list("store/objects").isEmpty)
  }

  @Test(
    "ENOSPC while streaming: least recently used entries are evicted and the write retried",
    .enabled(if: TestFilesystems.small != nil, TestFilesystems.smallMissing))
  func streamMakesRoom() throws {
    let small = try Scratch(under: TestFilesystems.small!)
    let store = try small.store()
    try store.updatePolicy { $0.minimumFree = .bytes(0) }
    var kept: [BlobDigest] = []
    for i in 0..<6 {
      kept.append(try store.put(bytes: Bytes.random(1 << 20, seed: UInt64(60 + i))).digest)
    }
    try store.pin(kept[5])
    // Unknown length: written until the disk is full, then room is made.
    let data = Bytes.random(3 << 20, seed: 70)
    let writer = try store.makeWriter()
    for start in stride(from: 0, to: data.count, by: 256 << 10) {
      try writer.write(Array(data[start..<min(start + (256 << 10), data.count)]))
    }
    let result = try writer.commit()
    #expect(try store.bytes(for: result.digest) == data)
    #expect(try store.contains(kept[5]))  // pinned: never evicted
    #expect(try store.contains(kept[0]) == false)  // the least recently used went first
    #expect(small.temporaries("store").isEmpty)
  }

  @Test(
    "ENOSPC while compressing a file: room is made as for raw bytes and the write retried",
    .enabled(if: TestFilesystems.small != nil, TestFilesystems.smallMissing))
  func compressedPutMakesRoom() throws {
    let scratch = try Scratch()
    let small = try Scratch(under: TestFilesystems.small!)
    let store = try small.store()
    try store.updatePolicy {
      $0.minimumFree = .bytes(0)
      $0.compression = .zstd(level: 1)
    }
    var kept: [BlobDigest] = []
    for i in 0..<6 {
      // Random bytes: sampled as incompressible, stored raw.
      kept.append(try store.put(bytes: Bytes.random(1 << 20, seed: UInt64(100 + i))).digest)
    }
    try store.pin(kept[5])
    // Zeros first, so the sample promises a tiny frame and no room is made
    // up front; the random rest fills the disk halfway through.
    let data = [UInt8](repeating: 0, count: 256 << 10) + Bytes.random(2 << 20, seed: 110)
    let file = try scratch.write("mixed.bin", data)
    let result = try store.put(file: file)
    #expect(try store.bytes(for: result.digest) == data)
    #expect(try store.entries().first { $0.digest == result.digest }?.isCompressed == true)
    #expect(try store.contains(kept[5]))  // pinned: never evicted
    #expect(try store.contains(kept[0]) == false)  // the least recently used went first
    #expect(small.temporaries("store").isEmpty)
  }

  @Test(
    "a put that cannot fit even if everything went fails at once, evicting nothing",
    .enabled(if: TestFilesystems.small != nil, TestFilesystems.smallMissing))
  func putTooLargeAfterEviction() throws {
    let scratch = try Scratch()
    let small = try Scratch(under: TestFilesystems.small!)
    let store = try small.store()
    let pinned = try store.put(bytes: Bytes.random(1 << 20, seed: 71)).digest
    try store.pin(pinned)
    let other = try store.put(bytes: Bytes.random(1 << 20, seed: 72)).digest
    let big = try scratch.write("big.bin", Bytes.random(12 << 20, seed: 73))
    #expect {
      try store.put(file: big)
    } throws: { error in
      (error as? TroveError)?.code == .noSpace
        && "\(error)".contains("cannot put '\(big)': it needs 12.0 MiB")
        && "\(error)".contains("1.0 MiB more if every unpinned entry were evicted")
    }
    #expect(small.temporaries("store").isEmpty)
    #expect(Set(try store.entries().map(\.digest)) == [pinned, other])
    #expect(try store.bytes(for: pinned).count == 1 << 20)
    let after = try store.put(bytes: Bytes.random(100_000, seed: 74))
    #expect(try store.contains(after.digest))
    let stats = try store.statistics()
    #expect(stats.entries == 3 && stats.pinnedEntries == 1)
  }

  @Test(
    "an optional put that fills the volume fails and evicts nothing",
    .enabled(if: TestFilesystems.small != nil, TestFilesystems.smallMissing))
  func optionalPutOnFullDiskEvictsNothing() throws {
    let small = try Scratch(under: TestFilesystems.small!)
    let store = try small.store()
    try store.updatePolicy { $0.minimumFree = .bytes(0) }
    var kept: [BlobDigest] = []
    for i in 0..<3 {
      kept.append(try store.put(bytes: Bytes.random(1 << 20, seed: UInt64(140 + i))).digest)
    }
    let writer = try store.makeWriter(priority: .opportunistic)
    #expect {
      for i in 0..<16 { try writer.write(Bytes.random(1 << 20, seed: UInt64(150 + i))) }
    } throws: { ($0 as? TroveError)?.code == .noSpace }
    for digest in kept { #expect(try store.contains(digest)) }
    #expect(small.temporaries("store").isEmpty)
  }

  @Test(
    "below min-free an optional put is skipped (exit 75) and an important one proceeds",
    .enabled(if: TestFilesystems.small != nil, TestFilesystems.smallMissing))
  func opportunisticPuts() throws {
    let scratch = try Scratch()
    let small = try Scratch(under: TestFilesystems.small!)
    let store = try small.store()
    try store.updatePolicy { $0.minimumFree = .percent(50) }
    for i in 0..<5 {
      try store.pin(try store.put(bytes: Bytes.random(1 << 20, seed: UInt64(80 + i))).digest)
    }
    #expect(try store.freeSpace().isLow)
    #expect {
      try store.put(bytes: Bytes.random(100_000, seed: 90), priority: .opportunistic)
    } throws: { error in
      (error as? TroveError)?.code == .lowOnSpace && "\(error)".contains("min-free")
    }
    #expect(small.temporaries("store").isEmpty)
    #expect(try store.entries().count == 5)
    let file = try scratch.write("f.bin", Bytes.random(100_000, seed: 91))
    let cli = try CLI.run(["--store", small["store"], "put", "--optional", file])
    #expect(cli.status == 75)
    #expect(
      cli.errorLines.count == 1 && cli.errorLines[0].hasPrefix("Error: skipped an optional put"))
    let important = try store.put(bytes: Bytes.random(100_000, seed: 92))
    #expect(try store.contains(important.digest))
  }

  @Test(
    "an unreadable file and an unwritable store are refused with exit 77 and the path",
    .enabled(
      if: TestFilesystems.isRoot && TestFilesystems.setprivAvailable,
      "needs root and setpriv to run trove as another user"))
  func permissions() throws {
    let scratch = try Scratch()
    chmod(scratch.path, 0o755)
    let secret = try scratch.write("secret.bin", [1, 2, 3])
    chmod(secret, 0o600)
    let storePath = scratch["nobody-store"]
    try FileManager.default.createDirectory(atPath: storePath, withIntermediateDirectories: false)
    chown(storePath, 65534, 65534)
    let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    let unreadable = try CLI.run(["--store", storePath, "put", secret], prefix: asNobody)
    #expect(unreadable.status == 77)
    #expect(
      unreadable.errorLines == [
        "Error: cannot read '\(secret)': Permission denied (open, errno 13)"
      ])
    #expect(scratch.temporaries("nobody-store").isEmpty)
    let readable = try scratch.write("public.bin", [4, 5, 6])
    chmod(readable, 0o644)
    let unwritable = try CLI.run(
      ["--store", scratch["root-owned/store"], "put", readable], prefix: asNobody)
    #expect(unwritable.status == 77, "\(unwritable.stderr)")
    #expect(unwritable.errorLines.count == 1)
    #expect(unwritable.errorLines.first?.contains("'\(scratch["root-owned/store"])'") == true)
    #expect(unwritable.errorLines.first?.contains("Permission denied") == true)
  }

  @Test("an I/O error while writing leaves nothing at the destination or in the store")
  func injectedIOErrors() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let data = Bytes.random(3 * 1024 * 1024, seed: 35)
    let source = try scratch.write("in.bin", data)
    let digest = try #require(
      try CLI.run(["--store", store, "put", source]).out.split(separator: " ").first)
    let get = try CLI.run(
      ["--store", store, "get", "--mode", "copy", String(digest), scratch["out.bin"]],
      environment: ["TROVE_INJECT_FAULT": "write:5:1"])
    #expect(get.status == 74)
    #expect(
      get.errorLines == [
        "Error: cannot write '\(scratch["out.bin"])': Input/output error (write, errno 5)"
      ])
    #expect(scratch.list("").sorted() == ["in.bin", "store"])
    let other = try scratch.write("other.bin", Bytes.random(100_000, seed: 36))
    let put = try CLI.run(
      ["--store", store, "put", other], environment: ["TROVE_INJECT_FAULT": "fsync:5"])
    #expect(put.status == 74)
    #expect(put.errorLines.count == 1 && put.errorLines[0].contains("(fsync, errno 5)"))
    #expect(scratch.temporaries("store").isEmpty)
    #expect(try CLI.run(["--store", store, "ls"]).out.split(separator: "\n").count == 1)
  }

  @Test(
    "trove serve on a full store volume: a mirror file that cannot fit, announced or found out mid-body, is 507 in one line and nothing stays; the server goes on serving",
    .enabled(if: TestFilesystems.small != nil, TestFilesystems.smallMissing),
    .enabled(if: FaultServer.python != nil, FaultServer.missing))
  func serveOnFullVolume() throws {
    let small = try Scratch(under: TestFilesystems.small!)
    _ = try small.store()
    let origin = try FaultServer()
    let server = try TroveServe(store: small["store"], ["--mirror", "up=" + origin.url("")])
    let size = 16 << 20
    // Announced (Content-Length), then found out by writing (chunked).
    for mode in ["plain", "chunked"] {
      let got = try curl([server.url("m/up/\(mode)/size=\(size)/big")])
      #expect(got.status == 507, "\(mode): \(got.status)")
      let text = String(decoding: got.body, as: UTF8.self)
      #expect(text.split(separator: "\n").count == 1 && text.contains("full"), "\(text)")
      #expect(small.temporaries("store").isEmpty, "\(mode)")
      #expect(small.list("store/objects").isEmpty, "\(mode)")
      // No part kept for a resume: it would hold the room that is lacking.
      #expect(small.list("store/partial").isEmpty, "\(mode)")
    }
    let log = try String(contentsOfFile: server.state["serve.err"], encoding: .utf8)
    #expect(log.contains("No space left on device") || log.contains("needs"), "\(log)")
    let fits = try curl([server.url("m/up/plain/size=100000/small")])
    #expect(fits.status == 200 && fits.body.count == 100_000, "\(fits.status)")
    #expect(fits.headers["x-trove-cache"] == "miss")
    #expect(try server.stop().status == 0)
    #expect(try CLI.run(["--store", small["store"], "verify"]).status == 0)
  }
}

/// The fault seam exists in the build the tests run (debug, `TROVE_FAULTS`):
/// were it compiled out, every test that injects a fault would pass
/// without injecting anything.
@Suite("the fault seam in test builds")
struct FaultSeamTests {
  @Test("the test build reads TROVE_INJECT_FAULT: the library's and the CLI process's calls fail")
  func faultsAreInjected() throws {
    #expect(Sys.injectsFaults)
    let scratch = try Scratch()
    let file = try scratch.write("in", Array("hello\n".utf8))
    let failed = try CLI.run(["hash", file], environment: ["TROVE_INJECT_FAULT": "open:5"])
    #expect(failed.status == 74, "\(failed.stderr)")
    #expect(failed.stderr.contains("Input/output error (open, errno 5)"), "\(failed.stderr)")
    #expect(try CLI.run(["hash", file]).status == 0)
  }
}
