import Foundation
import Testing

@testable import Trove

@Suite("XXH3-128 digests")
struct DigestTests {
  /// Expected digests of `Bytes.pattern(n)`, produced by `xxhsum -H2` 0.8.1.
  static let knownAnswers: [(Int, String)] = [
    (0, "99aa06d3014798d86001c324468d497f"),
    (1, "495b62073ef70ca44c5cca45d0f4811f"),
    (3, "46f66cb93538156515f7093b173d005c"),
    (16, "da917c385cc874c00d463cb04ceffbaf"),
    (17, "d443578f2c4e2fb495c34448580e19c8"),
    (128, "22c34350373a38ae5b77925b2c683a12"),
    (129, "c4a7d8f7893f2090d6d9e73553568be1"),
    (239, "9a032056470c2a3686bba9345dc34ac3"),
    (240, "e29d70b8920fd24bc6ed4333f79384f8"),
    (241, "f91b3cb8ed0fa91a07525dbc14902c7f"),
    (1023, "0789e58514a0668bfe4f1eaedb87b59b"),
    (1024, "f53a1b1e9f1efedfe2898655db7bc9ee"),
    (1025, "a906cca0f6e772a7134c652ba3d6fb9e"),
    (4095, "c499a6f3211ca0bdb9ff40d72913fa0c"),
    (4096, "92c9e665ac5b016d04a1779c9e7ddcd7"),
    (4097, "22c91150c609c71b0e3fb0f184aa2f34"),
    (65536, "0906745d5eda3e1e804c62b879e03431"),
    (3_145_729, "8918577b5ed2deb9445d7c3bb133feb0"),
  ]

  @Test("one-shot digests match xxhsum -H2", arguments: knownAnswers)
  func oneShot(length: Int, expected: String) {
    #expect(XXH3Hasher.digest(Bytes.pattern(length)).hex == expected)
  }

  @Test(
    "streaming in odd chunk sizes gives the one-shot digest", arguments: [1, 7, 239, 4097, 65537])
  func streaming(chunk: Int) {
    let data = Bytes.pattern(3_145_729)
    var hasher = XXH3Hasher()
    var offset = 0
    while offset < data.count {
      let end = min(offset + chunk, data.count)
      data[offset..<end].withUnsafeBytes { hasher.update($0) }
      offset = end
    }
    #expect(hasher.finalize().hex == "8918577b5ed2deb9445d7c3bb133feb0")
  }

  @Test("text form round-trips and keeps leading zeros")
  func textForm() throws {
    let d = BlobDigest(high: 0x0000_0000_0000_0001, low: 0x00ff_0000_0000_0000)
    #expect(d.description == "xxh128:000000000000000100ff000000000000")
    #expect(try BlobDigest(parsing: d.description) == d)
    let mixed = try BlobDigest(parsing: "xxh128:99AA06d3014798d86001C324468d497f")
    #expect(mixed.hex == "99aa06d3014798d86001c324468d497f")
  }

  @Test(
    "parsing rejects malformed text with an error quoting it",
    arguments: [
      "", "99aa06d3014798d86001c324468d497f", "sha256:99aa06d3014798d86001c324468d497f",
      "xxh128:99aa06d3014798d86001c324468d497", "xxh128:99aa06d3014798d86001c324468d497f0",
      "xxh128:99aa06d3014798d86001c324468d497g", "XXH128:99aa06d3014798d86001c324468d497f",
      "xxh128: 99aa06d3014798d86001c324468d497f", "xxh128:99aa06d3014798d86001c324468d49é",
    ])
  func rejects(text: String) {
    #expect {
      _ = try BlobDigest(parsing: text)
    } throws: { error in
      guard let error = error as? TroveError else { return false }
      return error.code == .invalidDigest && error.description.contains("'\(text)'")
        && !error.description.contains("\n")
    }
  }

  @Test(
    "file digests match the xxhsum command on the same bytes",
    .enabled(
      if: TestFilesystems.xxhsum != nil,
      "xxhsum is not installed (scripts/deps.sh test installs it)"))
  func matchesCommand() throws {
    let scratch = try Scratch()
    let path = try scratch.write("random.bin", Bytes.random(5_000_001, seed: 42))
    let process = Process()
    process.executableURL = URL(fileURLWithPath: TestFilesystems.xxhsum!)
    process.arguments = ["-H2", path]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    let store = try scratch.store()
    let result = try store.put(file: path)
    #expect(out.hasPrefix(result.digest.hex + "  "))
  }
}

@Suite("HTTP dates and freshness")
struct FreshnessTests {
  @Test("the three HTTP date forms parse to the same instant; others are refused")
  func dates() {
    let expected = Int64(784_111_777) * 1_000_000_000
    #expect(Freshness.httpDate("Sun, 06 Nov 1994 08:49:37 GMT") == expected)
    #expect(Freshness.httpDate("Sunday, 06-Nov-94 08:49:37 GMT") == expected)
    #expect(Freshness.httpDate("Sun Nov  6 08:49:37 1994") == expected)
    for bad in [
      "", "0", "-1", "Sun, 06 Nov 1994 08:49:37 +0000", "Mon, 30 Nov 2026 17:51:04 -0500",
      "Sun, 06 Nov 99999999999999 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT",
      "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "tomorrow",
      "Sun, 06 Nov 1994 -1:-1:-1 GMT", "Sun, 06 Nov +994 08:49:37 GMT",
    ] {
      #expect(Freshness.httpDate(bad) == nil, "\(bad)")
    }
  }

  @Test("max-age less Age, Expires against Date, no-cache, immutable only while fresh")
  func lifetimes() {
    func head(_ fields: [(String, String)]) -> HTTPResponseHead {
      HTTPResponseHead(status: 200, fields: fields.map { (name: $0.0, value: $0.1) })
    }
    let s: Int64 = 1_000_000_000
    #expect(Freshness.lifetime(head([("cache-control", "public, max-age=600")])) == 600 * s)
    #expect(
      Freshness.lifetime(head([("cache-control", "max-age=\"600\""), ("age", "100")])) == 500 * s)
    #expect(Freshness.lifetime(head([("cache-control", "no-cache, max-age=600")])) == 0)
    #expect(Freshness.lifetime(head([("cache-control", "max-age=soon")])) == 0)
    #expect(Freshness.lifetime(head([])) == nil)
    #expect(
      Freshness.lifetime(
        head([
          ("date", "Sun, 06 Nov 1994 08:49:37 GMT"), ("expires", "Sun, 06 Nov 1994 09:49:37 GMT"),
          ("age", "60"),
        ])) == 3540 * s)
    #expect(Freshness.lifetime(head([("expires", "0")])) == 0)
    let now: Int64 = 2_000_000_000 * s
    let immutable = Freshness.origin(
      head([("cache-control", "max-age=60, immutable")]), size: 1, finalURL: nil, now: now)
    #expect(immutable.isImmutable && immutable.isFresh(at: now + 59 * s))
    #expect(!immutable.isFresh(at: now + 61 * s))
    let bare = Freshness.origin(
      head([("cache-control", "immutable")]), size: 1, finalURL: nil, now: now)
    #expect(!bare.isImmutable && !bare.isFresh(at: now))
  }
}
