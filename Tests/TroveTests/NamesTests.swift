import Foundation
import Testing

@testable import Trove

/// Objects by what they were: `ls` with keys, sizes,
/// stored form, pins and last use, its orders and filters; `show`; short
/// digest prefixes wherever a digest is taken; lapsed leases marked.
@Suite("names, not just digests")
struct NamesTests {
  /// A store of three objects, as `ls` sees them:
  /// - a: 100 000 random bytes (raw), keys `a-alias` and
  ///   `https://e.org/a.tgz`, last used 3 days ago;
  /// - b: 300 000 compressible bytes (zstd), key `b.txt`, pinned for good
  ///   and by a lapsed lease;
  /// - c: 5 bytes (raw), no key, last used 2 hours ago, only a lapsed lease.
  /// Stored in that order, so c is the newest.
  struct Fixture {
    let scratch: Scratch
    let store: String
    let a: BlobDigest
    let b: BlobDigest
    let c: BlobDigest

    init(under base: String? = nil) throws {
      scratch = try Scratch(under: base)
      store = scratch["store"]
      let aBytes = Bytes.random(100_000, seed: 1201)
      let bBytes = [UInt8](repeating: UInt8(ascii: "x"), count: 300_000)
      let cBytes: [UInt8] = Array("tiny\n".utf8)
      a = XXH3Hasher.digest(aBytes)
      b = XXH3Hasher.digest(bBytes)
      c = XXH3Hasher.digest(cBytes)
      for (name, bytes, key) in [
        ("a", aBytes, "https://e.org/a.tgz"), ("b", bBytes, "b.txt"), ("c", cBytes, nil),
      ] {
        let file = try scratch.write(name, bytes)
        let put = try CLI.run(
          ["--store", store, "put"] + (key.map { ["--key", $0] } ?? []) + [file])
        #expect(put.status == 0, "\(put.stderr)")
      }
      let bind = try CLI.run(["--store", store, "put", "--key", "a-alias", scratch["a"]])
      #expect(bind.status == 0, "\(bind.stderr)")
      #expect(try CLI.run(["--store", store, "config", "set", "compression", "zstd"]).status == 0)
      #expect(try CLI.run(["--store", store, "recompress"]).status == 0)
      #expect(try CLI.run(["--store", store, "pin", b.description]).status == 0)
      let opened = try Store(StoreConfiguration(root: store))
      try lapsedLease(b, name: "ci", in: opened)
      try lapsedLease(c, name: "ci", in: opened)
      try age(a, by: 3 * 86400, in: opened)
      try age(c, by: 2 * 3600, in: opened)
    }

    func run(_ arguments: [String]) throws -> CLI.Result {
      try CLI.run(["--store", store] + arguments)
    }

    /// The digests `ls ARGS` lists, in its order.
    func listed(_ arguments: [String] = []) throws -> [BlobDigest] {
      let ls = try run(["ls"] + arguments)
      #expect(ls.status == 0, "\(arguments): \(ls.stderr)")
      return try ls.out.split(separator: "\n").map {
        try BlobDigest(parsing: String($0.prefix(39)))
      }
    }
  }

  /// A pin of `digest` by `name` whose lease lapsed an hour ago, as one
  /// given `--for 1h` an hour ago would be (a lease cannot be given in the past).
  static func lapsedLease(_ digest: BlobDigest, name: String, in store: Store) throws {
    let now = currentTimeNanoseconds()
    try store.index().write("test: a lapsed lease") { (tx) throws(TroveError) in
      try tx.insertPin(digest, name: name, expires: now - 3_600_000_000_000, now: now)
    }
  }

  /// The JSON `trove ARGS --json` prints.
  static func json(_ result: CLI.Result) throws -> Any {
    #expect(result.status == 0, "\(result.stderr)")
    return try JSONSerialization.jsonObject(with: Data(result.stdout))
  }

  @Test("ls: one aligned line per object with its size, form, pins, last use and keys")
  func listing() throws {
    let f = try Fixture()
    let ls = try f.run(["ls"])
    #expect(ls.status == 0 && ls.stderr.isEmpty, "\(ls.stderr)")
    let lines = ls.out.split(separator: "\n").map(String.init)
    // By digest by default.
    #expect(lines.map { String($0.prefix(39)) } == [f.a, f.b, f.c].map(\.description).sorted())
    func words(_ digest: BlobDigest) -> [String] {
      let line = lines.first { $0.hasPrefix(digest.description) } ?? ""
      return line.split(separator: " ").map(String.init)
    }
    #expect(
      words(f.a) == [
        f.a.description, "97.7", "KiB", "raw", "-", "3", "days", "ago", "a-alias", "(+1", "more)",
      ])
    // b's lapsed lease does not count; its pin for good does.
    #expect(
      words(f.b) == [f.b.description, "293.0", "KiB", "zstd", "1", "pin", "just", "now", "b.txt"])
    #expect(words(f.c) == [f.c.description, "5", "B", "raw", "-", "2", "hours", "ago", "-"])
    // Aligned: every column starts at the same place on every line.
    for column in ["raw", "zstd"] {
      let starts = Set(
        lines.compactMap { line in
          line.range(of: "  \(column)  ").map {
            line.distance(from: line.startIndex, to: $0.lowerBound)
          }
        })
      #expect(starts.count == 1, "\(lines)")
    }
    // The keys, last, after the last double space (no key here holds one).
    let keyColumn = Set(
      lines.map { line in
        line.distance(
          from: line.startIndex, to: line.range(of: "  ", options: .backwards)!.upperBound)
      })
    #expect(keyColumn.count == 1, "\(lines)")
  }

  @Test("ls --sort orders by size, last use or creation, newest or largest first; --limit cuts")
  func orders() throws {
    let f = try Fixture()
    #expect(try f.listed(["--sort", "digest"]) == [f.a, f.b, f.c].sorted())
    #expect(try f.listed(["--sort", "size"]) == [f.b, f.a, f.c])
    #expect(try f.listed(["--sort", "access"]) == [f.b, f.c, f.a])
    #expect(try f.listed(["--sort", "created"]) == [f.c, f.b, f.a])
    #expect(try f.listed(["--sort", "size", "--limit", "1"]) == [f.b])
    #expect(try f.listed(["--sort", "access", "--limit", "2"]) == [f.b, f.c])
    #expect(try f.listed(["--limit", "0"]) == [])
    let bad = try f.run(["ls", "--sort", "name"])
    #expect(bad.status == 64 && bad.stderr.contains("invalid --sort 'name'"), "\(bad.stderr)")
    let badLimit = try f.run(["ls", "--limit", "-1"])
    #expect(badLimit.status == 64, "\(badLimit.stderr)")
  }

  @Test("ls filters: --older-than, --larger-than, --pinned, --key GLOB, and together")
  func filters() throws {
    let f = try Fixture()
    #expect(try f.listed(["--older-than", "1h", "--sort", "access"]) == [f.c, f.a])
    #expect(try f.listed(["--older-than", "1d"]) == [f.a])
    #expect(try f.listed(["--older-than", "30d"]) == [])
    // Strictly larger: a has exactly 100000 bytes.
    #expect(try f.listed(["--larger-than", "100000"]) == [f.b])
    #expect(try f.listed(["--larger-than", "50K", "--sort", "size"]) == [f.b, f.a])
    #expect(try f.listed(["--larger-than", "0", "--sort", "size"]) == [f.b, f.a, f.c])
    // A lapsed lease holds nothing: c is not pinned.
    #expect(try f.listed(["--pinned"]) == [f.b])
    #expect(try f.listed(["--key", "https://*"]) == [f.a])
    #expect(try f.listed(["--key", "*.txt"]) == [f.b])
    #expect(try f.listed(["--key", "[ab]*", "--sort", "size"]) == [f.b, f.a])
    #expect(try f.listed(["--key", "nothing*"]) == [])
    #expect(try f.listed(["--key", "*", "--older-than", "1d"]) == [f.a])
    #expect(try f.listed(["--pinned", "--older-than", "1h"]) == [])
    for (option, value) in [("--older-than", "soon"), ("--larger-than", "big")] {
      let bad = try f.run(["ls", option, value])
      #expect(
        bad.status == 64 && bad.stderr.contains("invalid \(option) '\(value)'"), "\(bad.stderr)")
    }
    // --format xxhsum lists the selected raw objects.
    let xxhsum = try f.run(["ls", "--format", "xxhsum", "--key", "*"])
    #expect(xxhsum.out == "\(f.a.hex)  \(objectFilePath(f.store, f.a))\n")
  }

  @Test("ls --json: every field of every object, times in ISO 8601 UTC")
  func listingJSON() throws {
    let f = try Fixture()
    let all = try #require(try Self.json(try f.run(["ls", "--json"])) as? [[String: Any]])
    #expect(all.count == 3)
    let fields: Set<String> = [
      "digest", "size", "allocatedBytes", "storedBytes", "compressed", "created", "lastAccess",
      "keys", "pinned", "pins",
    ]
    for object in all { #expect(Set(object.keys) == fields, "\(object)") }
    let a = try #require(all.first { $0["digest"] as? String == f.a.description })
    #expect(a["size"] as? Int == 100_000 && a["storedBytes"] as? Int == 100_000)
    #expect(a["compressed"] as? Bool == false && a["pinned"] as? Bool == false)
    #expect(a["keys"] as? [String] == ["a-alias", "https://e.org/a.tgz"])
    #expect((a["pins"] as? [Any])?.isEmpty == true)
    let lastAccess = try #require(a["lastAccess"] as? String)
    let parsed = try #require(ISO8601DateFormatter().date(from: lastAccess))
    #expect(lastAccess.hasSuffix("Z") && Date().timeIntervalSince(parsed) > 3 * 86400 - 60)
    let b = try #require(all.first { $0["digest"] as? String == f.b.description })
    #expect(b["compressed"] as? Bool == true && b["pinned"] as? Bool == true)
    #expect((b["storedBytes"] as? Int ?? .max) < 300_000 && b["size"] as? Int == 300_000)
    let pins = try #require(b["pins"] as? [[String: Any]])
    #expect(pins.map { $0["name"] as? String } == ["ci", "default"])
    #expect(pins.map { $0["expired"] as? Bool } == [true, false])
    #expect(pins[0]["expires"] is String && pins[1]["expires"] is NSNull, "\(pins)")
    let c = try #require(all.first { $0["digest"] as? String == f.c.description })
    #expect(c["keys"] as? [String] == [] && c["pinned"] as? Bool == false)
  }

  @Test("show DIGEST|KEY: labelled lines of the whole record; --json has every field")
  func show() throws {
    let f = try Fixture()
    let byKey = try f.run(["show", "https://e.org/a.tgz"])
    #expect(byKey.status == 0, "\(byKey.stderr)")
    let lines = byKey.out.split(separator: "\n").map { line in
      let label = line.prefix(13).trimmingCharacters(in: .whitespaces)
      return (label, String(line.dropFirst(13)))
    }
    #expect(
      lines.map(\.0) == [
        "digest", "size", "stored", "allocated", "created", "last access", "key", "key", "pins",
        "shared",
      ])
    let values = Dictionary(lines, uniquingKeysWith: { $0 + "|" + $1 })
    #expect(values["digest"] == f.a.description)
    #expect(values["size"] == "97.7 KiB (100000 bytes)")
    #expect(values["stored"] == "raw, 97.7 KiB (100000 bytes)")
    #expect(values["key"] == "a-alias|https://e.org/a.tgz")
    #expect(values["last access"]?.hasSuffix("(3 days ago)") == true, "\(byKey.out)")
    #expect(values["pins"] == "none")
    // By a digest prefix, with pins and a lapsed lease marked.
    let b = try f.run(["show", String(f.b.hex.prefix(10))])
    #expect(b.status == 0, "\(b.stderr)")
    #expect(b.out.contains("\nstored       zstd, "), "\(b.out)")
    #expect(b.out.contains("\npin          ci, expired: lease lapsed "), "\(b.out)")
    #expect(b.out.contains("\npin          default, no lease\n"), "\(b.out)")
    #expect(b.out.contains("\nkey          b.txt\n"), "\(b.out)")
    // JSON: ls's fields and the checksums and extents, null where unknown.
    let json = try #require(
      try Self.json(try f.run(["show", "--json", f.c.description])) as? [String: Any])
    #expect(
      Set(json.keys) == [
        "digest", "size", "allocatedBytes", "storedBytes", "compressed", "created", "lastAccess",
        "keys", "pinned", "pins", "checksums", "extents", "sharedBytes",
      ])
    #expect(json["digest"] as? String == f.c.description && json["size"] as? Int == 5)
    #expect(json["keys"] as? [String] == [] && json["checksums"] as? [String] == [])
    #expect(json["sharedBytes"] is Int && json["extents"] is Int, "\(json)")
    // Not there: exit 1, naming it.
    let missing = try f.run(["show", "no-such-key"])
    #expect(missing.status == 1)
    #expect(missing.errorLines == ["Error: no key 'no-such-key' in store '\(f.store)'"])
    #expect(try f.run(["show"]).status == 64)
  }

  @Test(
    "show: on tmpfs, which has no FIEMAP, the shared extents are null",
    .enabled(if: TestFilesystems.small != nil, TestFilesystems.smallMissing))
  func showWithoutExtents() throws {
    let scratch = try Scratch(under: TestFilesystems.small!)
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "put", "-"], stdin: [1, 2, 3]).status == 0)
    let digest = XXH3Hasher.digest([1, 2, 3] as [UInt8])
    let json = try #require(
      try Self.json(try CLI.run(["--store", store, "show", "--json", digest.description]))
        as? [String: Any])
    #expect(json["sharedBytes"] is NSNull && json["extents"] is NSNull, "\(json)")
    let human = try CLI.run(["--store", store, "show", digest.description])
    #expect(human.out.hasSuffix("\nshared       unknown (the filesystem cannot say)\n"))
  }

  @Test(
    "show: a clone made by get shares the object's extents, and show says how much",
    .enabled(if: TestFilesystems.xfs != nil, TestFilesystems.xfsMissing))
  func showSharedExtents() throws {
    let scratch = try Scratch(under: TestFilesystems.xfs!)
    let store = scratch["store"]
    let data = Bytes.random(1 << 20, seed: 1202)
    let digest = XXH3Hasher.digest(data)
    #expect(try CLI.run(["--store", store, "put", try scratch.write("in", data)]).status == 0)
    // put cloned its input here: with the input gone, nothing shares the object's extents
    // (once XFS has finished with the unlinked inode, which a sync of the filesystem waits for).
    try FileManager.default.removeItem(atPath: scratch["in"])
    let folder = try FileDescriptor.open(scratch["store"], [.readOnly, .directory])
    defer { folder.close() }
    try folder.syncFilesystem()
    let before = try #require(
      try Self.json(try CLI.run(["--store", store, "show", "--json", digest.description]))
        as? [String: Any])
    #expect(before["sharedBytes"] as? Int == 0, "\(before)")
    let get = try CLI.run(["--store", store, "get", digest.description, scratch["out"]])
    #expect(get.status == 0, "\(get.stderr)")
    let after = try #require(
      try Self.json(try CLI.run(["--store", store, "show", "--json", digest.description]))
        as? [String: Any])
    #expect(after["sharedBytes"] as? Int == 1 << 20, "\(after)")
  }

  /// Two byte strings whose digests share their first 8 hex digits, found
  /// by trying 8-byte counters (a birthday search over 32 bits: about
  /// 2^16 digests).
  static func twins() -> ([UInt8], [UInt8]) {
    var seen: [UInt64: UInt64] = [:]
    var i: UInt64 = 0
    while true {
      let bytes = withUnsafeBytes(of: i.littleEndian) { Array($0) }
      let top = XXH3Hasher.digest(bytes).high >> 32
      if let j = seen[top] { return (withUnsafeBytes(of: j.littleEndian) { Array($0) }, bytes) }
      seen[top] = i
      i += 1
    }
  }

  @Test("digests as unique prefixes of 8+ hex digits, bare or xxh128:, any case, everywhere")
  func prefixes() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    func run(_ arguments: [String], stdin: [UInt8] = []) throws -> CLI.Result {
      try CLI.run(["--store", store] + arguments, stdin: stdin)
    }
    let (x, y) = Self.twins()
    let dx = XXH3Hasher.digest(x)
    let dy = XXH3Hasher.digest(y)
    #expect(dx.hex.prefix(8) == dy.hex.prefix(8) && dx != dy)
    #expect(try run(["put", "-"], stdin: x).status == 0)
    #expect(try run(["put", "-"], stdin: y).status == 0)
    // Ambiguous: exit 64, the error, then each candidate on a hint line.
    let shared = String(dx.hex.prefix(8))
    let ambiguous = try run(["get", shared, scratch["out"]])
    #expect(ambiguous.status == 64)
    #expect(
      ambiguous.errorLines == [
        "Error: digest prefix '\(shared)' is ambiguous: 2 objects in store '\(store)' start with it",
        "hint: \(min(dx, dy))", "hint: \(max(dx, dy))",
      ], "\(ambiguous.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["out"]))
    // The shortest unique prefix of each (at least 8 digits).
    let differ = zip(dx.hex, dy.hex).prefix { $0 == $1 }.count
    let length = max(8, differ + 1)
    let ux = String(dx.hex.prefix(length))
    for text in [ux, ux.uppercased(), "xxh128:" + ux, "XXH128:" + ux.uppercased()] {
      let path = try run(["path", text])
      #expect(
        path.status == 0 && path.out.hasSuffix("/" + dx.hex + "\n"), "\(text): \(path.stderr)")
    }
    let got = try run(["get", ux, "-"])
    #expect(got.status == 0 && got.stdout == x)
    #expect(try run(["has", ux]).status == 0)
    #expect(try run(["show", ux]).out.hasPrefix("digest       \(dx)\n"))
    #expect(try run(["pin", ux]).status == 0)
    #expect(try run(["ls", "--pinned"]).out.hasPrefix(dx.description))
    #expect(try run(["unpin", ux]).status == 0)
    // A full digest, bare.
    #expect(try run(["has", dy.hex.uppercased()]).status == 0)
    // Fewer than 8 digits: a usage error that says so, with or without xxh128:.
    let short = String(dx.hex.prefix(7))
    let bare = try run(["has", short])
    #expect(bare.status == 64)
    #expect(
      bare.errorLines.first
        == "Error: no key '\(short)' in store '\(store)', and '\(short)' is too short for a digest prefix: give at least 8 hex digits"
    )
    #expect(bare.errorLines.count == 3 && bare.errorLines[1].hasPrefix("Usage: trove"))
    let prefixed = try run(["get", "xxh128:" + short, "-"])
    #expect(prefixed.status == 64)
    #expect(
      prefixed.errorLines.first
        == "Error: digest prefix 'xxh128:\(short)' is too short: give at least 8 hex digits")
    // A prefix nothing starts with: not found.
    let none = String(repeating: dx.hex.first == "0" ? "1" : "0", count: 8)
    let miss = try run(["has", "-v", none])
    #expect(miss.status == 1)
    let missing = try run(["path", none])
    #expect(
      missing.status == 1
        && missing.errorLines == [
          "Error: no object whose digest starts with '\(none)' in store '\(store)'"
        ])
    // rm goes on past an ambiguous prefix, listing its candidates.
    let rm = try run(["rm", shared, ux])
    #expect(rm.status == 1 && rm.errorLines.count == 3, "\(rm.stderr)")
    #expect(try run(["has", dx.description]).status == 1)
    #expect(try run(["has", shared]).status == 0)  // unique now
    // A key that is bare hex wins over the digest it would prefix (as a
    // branch shadows a short SHA in git).
    #expect(try run(["put", "--key", shared, "-"], stdin: x).status == 0)
    #expect(try run(["get", shared, "-"]).stdout == x)
  }

  @Test("pins marks a lapsed lease expired, in text and JSON")
  func expiredLeases() throws {
    let f = try Fixture()
    let pins = try f.run(["pins"])
    #expect(pins.status == 0)
    let lines = pins.out.split(separator: "\n").map(String.init)
    let expired = lines.filter { $0.hasSuffix(" (expired)") }
    #expect(expired.count == 2, "\(lines)")
    #expect(
      Set(expired.map { String($0.prefix(39)) }) == [f.b.description, f.c.description])
    #expect(lines.contains("\(f.b)  default  never"))
    let json = try #require(try Self.json(try f.run(["pins", "--json"])) as? [[String: Any]])
    #expect(json.count == 3)
    for pin in json {
      #expect(Set(pin.keys) == ["digest", "name", "expires", "expired", "created"], "\(pin)")
      #expect((pin["expired"] as? Bool) == (pin["name"] as? String == "ci"))
      #expect((pin["expires"] is NSNull) == (pin["name"] as? String == "default"))
    }
  }
  @Test("bare hex too short for a prefix that is no key is a usage error with the usage line")
  func shortHex() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "put", try scratch.write("f", [9])]).status == 0)
    let run = try CLI.run(["--store", store, "get", "abc", scratch["out"]])
    #expect(run.status == 64 && run.errorLines.count == 3, "\(run.stderr)")
    #expect(run.errorLines[1].hasPrefix("Usage: trove [--store <dir>] get "))
  }
}
