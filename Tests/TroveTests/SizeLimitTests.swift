import Foundation
import Testing

@testable import Trove

/// `max-object-size` and `put --expect-size`: inputs are bounded while they
/// stream, fail with one line naming the limit, and leave nothing behind.
@Suite("bounded inputs: max-object-size and --expect-size")
struct SizeLimitTests {
  /// The object files under `objects/`.
  static func objectFiles(_ scratch: Scratch) throws -> [String] {
    try FileManager.default.subpathsOfDirectory(atPath: scratch["store/objects"])
      .filter { $0.contains("/") }
  }

  /// The store holds nothing, and no temporary or partial file is left.
  static func expectNothingStored(
    _ scratch: Scratch, sourceLocation: SourceLocation = #_sourceLocation
  ) throws {
    #expect(try objectFiles(scratch).isEmpty, sourceLocation: sourceLocation)
    #expect(scratch.temporaries("store").isEmpty, sourceLocation: sourceLocation)
    #expect(scratch.list("store/partial").isEmpty, sourceLocation: sourceLocation)
    #expect(try scratch.store().entries().isEmpty, sourceLocation: sourceLocation)
  }

  static let limitLine =
    "more than max-object-size 1.0 MiB (1048576 bytes, config.json); raise it with 'trove config set max-object-size SIZE'"

  @Test(
    "a stream or file larger than max-object-size fails naming the limit; tmp/ is left empty",
    arguments: ["none", "zstd:3"])
  func overLimit(compression: String) throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    for (key, value) in [("max-object-size", "1Mi"), ("compression", compression)] {
      #expect(try CLI.run(["--store", store, "config", "set", key, value]).status == 0)
    }
    #expect(try CLI.run(["--store", store, "config", "get", "max-object-size"]).out == "1.0 MiB\n")
    let big = Bytes.pattern(3 << 20)
    let stream = try CLI.run(["--store", store, "put", "-"], stdin: big)
    #expect(stream.status == 65, "\(stream.stderr)")
    #expect(
      stream.errorLines == [
        "Error: cannot store '<stdin>': it is \(big.count) bytes, \(Self.limitLine)"
      ])
    let piped = try Spawned(
      ["--store", store, "put", "-"], streaming: try scratch.write("big", big), io: scratch["io"]
    ).wait()
    #expect(piped.status == 65, "\(piped)")
    #expect(piped.errorLines == ["Error: cannot store '<stdin>': \(Self.limitLine)"])
    let file = try CLI.run(["--store", store, "put", scratch["big"]])
    #expect(file.status == 65)
    #expect(
      file.errorLines == [
        "Error: cannot store '\(scratch["big"])': it is \(big.count) bytes, \(Self.limitLine)"
      ])
    try Self.expectNothingStored(scratch)

    // At the limit exactly: stored.
    let fits = try CLI.run(["--store", store, "put", "-"], stdin: Array(big.prefix(1 << 20)))
    #expect(fits.status == 0, "\(fits.stderr)")
    #expect(scratch.temporaries("store").isEmpty)
    let library = try scratch.store()
    #expect { try library.put(bytes: big) } throws: { ($0 as? TroveError)?.code == .tooLarge }
    #expect { try library.makeWriter(expectedSize: 2 << 20) } throws: {
      ($0 as? TroveError)?.code == .tooLarge
    }
    let writer = try library.makeWriter()
    try writer.write(Array(big.prefix(1 << 20)))
    #expect { try writer.write([1]) } throws: { ($0 as? TroveError)?.code == .tooLarge }
    #expect(scratch.temporaries("store").isEmpty)
  }

  @Test(
    "put /dev/zero ends promptly under max-object-size or --expect-size, with zstd on",
    .timeLimit(.minutes(1)))
  func devZero() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "config", "set", "compression", "zstd:3"]).status == 0)
    func putZeros(_ options: [String]) throws -> Outcome {
      let put = try Spawned(
        ["--store", store, "put"] + options + ["/dev/zero"], io: scratch["zero"])
      let deadline = ContinuousClock.now + .seconds(30)
      while put.process.isRunning && ContinuousClock.now < deadline {
        Thread.sleep(forTimeInterval: 0.05)
      }
      put.kill()
      return try put.wait()
    }
    let expected = try putZeros(["--expect-size", "10M"])
    #expect(expected.exitedByItself, "still reading /dev/zero after 30 s")
    #expect(
      expected.status == 65
        && expected.errorLines == [
          "Error: '/dev/zero' is longer than 10000000 bytes (--expect-size)"
        ], "\(expected)")
    #expect(try CLI.run(["--store", store, "config", "set", "max-object-size", "20M"]).status == 0)
    let limited = try putZeros([])
    #expect(limited.exitedByItself, "still reading /dev/zero after 30 s")
    #expect(limited.status == 65, "\(limited)")
    #expect(limited.stderr.contains("cannot store '/dev/zero': more than max-object-size"))
    try Self.expectNothingStored(scratch)
  }

  @Test(
    "put --expect-size: another length is exit 65 and stores nothing; the right one is stored")
  func expectSize() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let data = Bytes.random(300_000, seed: 5)
    let file = try scratch.write("in.bin", data)
    for (input, size, line) in [
      (file, "299999", "'\(file)' is 300000 bytes, expected 299999 (--expect-size)"),
      (file, "300001", "'\(file)' is 300000 bytes, expected 300001 (--expect-size)"),
      ("-", "1000", "'<stdin>' is 300000 bytes, expected 1000 (--expect-size)"),
      ("-", "300001", "'<stdin>' is 300000 bytes, expected 300001 (--expect-size)"),
    ] {
      let run = try CLI.run(["--store", store, "put", "--expect-size", size, input], stdin: data)
      #expect(run.status == 65, "\(input) \(size): \(run.stderr)")
      #expect(run.errorLines == ["Error: " + line])
      try Self.expectNothingStored(scratch)
    }
    // Through a pipe, a stream of unknown length.
    let piped = try Spawned(
      ["--store", store, "put", "--expect-size", "1000", "-"], streaming: file, io: scratch["io"]
    ).wait()
    #expect(piped.status == 65, "\(piped)")
    #expect(piped.errorLines == ["Error: '<stdin>' is longer than 1000 bytes (--expect-size)"])
    try Self.expectNothingStored(scratch)

    let bad = try CLI.run(["--store", store, "put", "--expect-size", "lots", file])
    #expect(bad.status == 64)
    let two = try CLI.run(["--store", store, "put", "--expect-size", "300000", file, file])
    #expect(two.status == 64)
    for input in [file, "-"] {
      let run = try CLI.run(
        ["--store", store, "put", "--expect-size", "300000", input], stdin: data)
      #expect(run.status == 0 && run.out.hasPrefix(XXH3Hasher.digest(data).description))
    }
    // Already stored: still checked, never taken as a dedup hit.
    let again = try CLI.run(["--store", store, "put", "--expect-size", "300001", file])
    #expect(again.status == 65, "\(again.stderr)")
    #expect {
      try scratch.store().put(file: file, expectedSize: 12)
    } throws: { ($0 as? TroveError)?.code == .checksumMismatch }
  }

  @Test(
    "a fetch of a body larger than max-object-size fails at its Content-Length; nothing kept",
    .enabled(if: Nginx.executable != nil, Nginx.missing))
  func fetchOverLimit() throws {
    let nginx = try Nginx()
    try nginx.files.write("big.bin", Bytes.random(6 << 20, seed: 9))
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "config", "set", "max-object-size", "1Mi"]).status == 0)
    let url = nginx.url("/big.bin")
    let fetch = try CLI.run(["--store", store, "fetch", url, "-o", scratch["out"]])
    #expect(fetch.status == 65, "\(fetch.stderr)")
    #expect(
      fetch.errorLines == [
        "Error: cannot store '\(url)': it is \(6 << 20) bytes, \(Self.limitLine)"
      ])
    #expect(!FileManager.default.fileExists(atPath: scratch["out"]))
    try Self.expectNothingStored(scratch)
    #expect(try scratch.store().keys().isEmpty)
  }

  @Test(
    "a fetch of a chunked body (no length) stops as it passes max-object-size; nothing kept",
    .enabled(if: FaultServer.python != nil, FaultServer.missing))
  func fetchStreamOverLimit() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "config", "set", "max-object-size", "1Mi"]).status == 0)
    let url = server.url("/chunked/g?size=\(6 << 20)")
    let fetch = try CLI.run(["--store", store, "fetch", url])
    #expect(fetch.status == 65, "\(fetch.stderr)")
    #expect(fetch.errorLines == ["Error: cannot store '\(url)': \(Self.limitLine)"])
    try Self.expectNothingStored(scratch)
    #expect(try scratch.store().keys().isEmpty)
  }
}
