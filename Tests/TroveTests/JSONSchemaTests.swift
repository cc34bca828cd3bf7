import Foundation
import Testing

@testable import Trove

/// Every `--json` output of the CLI against the schema Docs/CLI.md gives
/// it: each documented key present (absent values are `null`, never a
/// missing key), each value of its type, every time an ISO 8601 UTC
/// string. Also the hit and miss counters `stats` shows.
@Suite("--json outputs keep their documented schema")
struct JSONSchemaTests {
  /// A value's documented type.
  indirect enum Kind: Sendable {
    case string, integer, number, bool, time, array, object
    case nullable(Kind)
    case record([String: Kind])
  }

  /// The problems of `value` against `kind`, each naming its path.
  static func check(_ value: Any?, _ kind: Kind, at path: String = "$") -> [String] {
    guard let value else { return ["\(path): missing"] }
    switch kind {
    case .nullable(let inner):
      return value is NSNull ? [] : check(value, inner, at: path)
    case .string:
      return value is String ? [] : ["\(path): \(value) is not a string"]
    case .integer:
      return numberType(value).map { $0 != "c" && $0 != "d" && $0 != "f" } == true
        ? [] : ["\(path): \(value) is not an integer"]
    case .number:
      return numberType(value).map { $0 != "c" } == true
        ? [] : ["\(path): \(value) is not a number"]
    case .bool:
      return numberType(value) == "c" ? [] : ["\(path): \(value) is not a bool"]
    case .time:
      guard let text = value as? String, text.hasSuffix("Z"),
        (try? Date(text, strategy: .iso8601)) != nil
      else { return ["\(path): \(value) is not an ISO 8601 UTC time"] }
      return []
    case .array:
      return value is [Any] ? [] : ["\(path): \(value) is not an array"]
    case .object:
      return value is [String: Any] ? [] : ["\(path): \(value) is not an object"]
    case .record(let fields):
      guard let object = value as? [String: Any] else {
        return ["\(path): \(value) is not an object"]
      }
      return fields.sorted { $0.key < $1.key }.flatMap { key, kind in
        check(object[key], kind, at: path + "." + key)
      }
    }
  }

  /// The C type JSONSerialization gave a number (`c` for true and false,
  /// `d` for a fraction, `i` or `q` for an integer); nil for a non-number.
  static func numberType(_ value: Any) -> String? {
    (value as? NSNumber).map { String(cString: $0.objCType) }
  }

  /// `trove ARGS` as JSON: one object, or each element of an array.
  static func json(_ arguments: [String], status: Int32 = 0) throws -> Any {
    let run = try CLI.run(arguments)
    #expect(run.status == status, "\(arguments): \(run.stderr)")
    return try JSONSerialization.jsonObject(with: Data(run.stdout), options: [.fragmentsAllowed])
  }

  /// Checks that `value` is an array of at least `minimum` records of `fields`.
  static func expectRecords(
    _ value: Any, _ fields: [String: Kind], minimum: Int = 1, _ what: String
  ) {
    let records = value as? [Any] ?? []
    #expect(records.count >= minimum, "\(what): \(value)")
    for (i, record) in records.enumerated() {
      let problems = check(record, .record(fields), at: "\(what)[\(i)]")
      #expect(problems.isEmpty, "\(problems)")
    }
  }

  static func expectRecord(_ value: Any, _ fields: [String: Kind], _ what: String) {
    let problems = check(value, .record(fields), at: what)
    #expect(problems.isEmpty, "\(problems)")
  }

  static let sweepRecord: Kind = .record([
    "time": .time, "reason": .string, "removedEntries": .integer, "removedBytes": .integer,
    "freedBytes": .nullable(.integer), "seconds": .number,
  ])

  static let pin: [String: Kind] = [
    "digest": .string, "name": .string, "expires": .nullable(.time), "expired": .bool,
    "created": .time,
  ]

  /// A record of `ls --json` (and the first fields of `show --json`).
  static let entry: [String: Kind] = [
    "digest": .string, "size": .integer, "allocatedBytes": .integer, "storedBytes": .integer,
    "compressed": .bool, "created": .time, "lastAccess": .time, "keys": .array, "pinned": .bool,
    "pins": .array,
  ]

  static let stats: [String: Kind] = [
    "root": .string, "entries": .integer, "logicalBytes": .integer, "allocatedBytes": .integer,
    "dedupHits": .integer, "dedupSavedBytes": .integer, "filesystem": .string,
    "cloneSupported": .bool, "availableBytes": .integer, "totalBytes": .integer,
    "minimumFreeBytes": .integer, "budget": .nullable(.integer), "maxAge": .nullable(.integer),
    "overBudget": .bool, "pinnedEntries": .integer, "pinnedBytes": .integer,
    "lastSweep": .nullable(sweepRecord), "lastPressureEviction": .nullable(sweepRecord),
    "keys": .integer, "compression": .string, "storedBytes": .integer,
    "compressedEntries": .integer, "compressionRatio": .number, "skippedIncompressible": .integer,
    "skippedSmall": .integer, "quarantinedEntries": .integer, "quarantinedBytes": .integer,
    "configProblems": .array, "hits": .record(["local": .integer, "remote": .integer]),
    "remoteBackedEntries": .integer, "remoteBackedBytes": .integer,
    "misses": .integer, "hitRate": .nullable(.number), "countedSince": .nullable(.time),
    "overrides": .array,
  ]

  @Test("put, get, ls, keys, pins, stats, sweep, verify, recompress and config: every key, typed")
  func everyCommand() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", Bytes.random(5000, seed: 7))
    let missing = scratch["missing"]

    // put: one record per input, the failed one with its error; exit non-zero.
    let put = try Self.json(["--store", store, "put", "--json", file, missing], status: 66)
    let putFields: [String: Kind] = [
      "name": .string, "digest": .nullable(.string), "size": .nullable(.integer),
      "duplicate": .nullable(.bool), "ingest": .nullable(.string), "stored": .nullable(.string),
      "storedBytes": .nullable(.integer), "error": .nullable(.string),
    ]
    Self.expectRecords(put, putFields, minimum: 2, "put")
    let records = try #require(put as? [[String: Any]])
    #expect(records.count == 2)
    #expect(records[0]["error"] is NSNull && records[0]["stored"] as? String == "raw")
    #expect(records[0]["method"] == nil, "the misleading 'method' is gone")
    #expect(records[1]["name"] as? String == missing)
    #expect(records[1]["digest"] is NSNull && records[1]["error"] as? String != nil)
    let digest = try #require(records[0]["digest"] as? String)

    // A compressed put says so.
    #expect(try CLI.run(["--store", store, "config", "set", "compression", "zstd"]).status == 0)
    let text = try scratch.write("t", Array(repeating: UInt8(ascii: "a"), count: 200_000))
    let zstd = try #require(
      try Self.json(["--store", store, "put", "--json", text]) as? [[String: Any]])
    #expect(zstd.first?["stored"] as? String == "zstd", "\(zstd)")
    #expect((zstd.first?["storedBytes"] as? Int ?? .max) < 200_000)

    Self.expectRecord(
      try Self.json(["--store", store, "get", "--json", digest, scratch["out"]]),
      [
        "digest": .string, "destination": .string, "method": .string, "size": .integer,
        "fallbackReason": .nullable(.string),
      ], "get")
    Self.expectRecords(
      try Self.json(["--store", store, "ls", "--json"]), Self.entry, minimum: 2, "ls")

    // keys: a put --key has no fetch fields, present as null.
    #expect(try CLI.run(["--store", store, "put", "--key", "k", file]).status == 0)
    Self.expectRecords(
      try Self.json(["--store", store, "keys", "--json"]),
      [
        "key": .string, "digest": .string, "size": .nullable(.integer), "updated": .time,
        "etag": .nullable(.string), "lastModified": .nullable(.time),
        "fetched": .nullable(.time), "freshUntil": .nullable(.time),
        "immutable": .nullable(.bool), "finalURL": .nullable(.string),
        "servedBy": .nullable(.string),
      ], "keys")
    let keys = try #require(
      try Self.json(["--store", store, "keys", "--json"]) as? [[String: Any]])
    #expect(keys.first?["etag"] is NSNull)

    // pins: a pin without a lease has expires null.
    #expect(try CLI.run(["--store", store, "pin", digest]).status == 0)
    Self.expectRecords(
      try Self.json(["--store", store, "pins", "--json"]),
      Self.pin, "pins")
    // ls and show carry the pins, and show the checksums and extents.
    let listed = try #require(
      try Self.json(["--store", store, "ls", "--json", "--pinned"]) as? [[String: Any]])
    Self.expectRecords(listed.first?["pins"] ?? [], Self.pin, "ls.pins")
    var shown = Self.entry
    shown["checksums"] = .array
    shown["extents"] = .nullable(.integer)
    shown["sharedBytes"] = .nullable(.integer)
    Self.expectRecord(try Self.json(["--store", store, "show", "--json", digest]), shown, "show")

    Self.expectRecord(
      try Self.json(["--store", store, "sweep", "--json"]),
      [
        "reason": .string, "dryRun": .bool, "removedEntries": .integer,
        "expiredEntries": .integer, "evictedEntries": .integer, "removedBytes": .integer,
        "freedBytes": .nullable(.integer), "skippedEntries": .integer,
        "temporaryFiles": .integer, "temporaryBytes": .integer, "temporaryFailures": .integer,
        "temporaryErrors": .array, "housekeepingErrors": .array, "reconciled": .object,
        "bytesAfter": .integer,
        "pinnedBytes": .integer, "budget": .nullable(.integer), "seconds": .number,
        "overBudget": .bool,
      ], "sweep")
    Self.expectRecord(
      try Self.json(["--store", store, "verify", "--json"]),
      [
        "checkedObjects": .integer, "checkedBytes": .integer, "corrupt": .array,
        "orphanFiles": .integer, "danglingRows": .integer, "wrongRows": .integer,
        "twins": .integer, "vanished": .integer, "unexpectedFiles": .array,
        "quarantined": .array, "repaired": .bool, "seconds": .number,
      ], "verify")
    Self.expectRecord(
      try Self.json(["--store", store, "recompress", "--json"]),
      [
        "compressed": .integer, "decompressed": .integer, "unchanged": .integer,
        "twinsRemoved": .integer, "storedBytesBefore": .integer, "storedBytesAfter": .integer,
        "seconds": .number,
      ], "recompress")

    // stats: the last sweep's time is an ISO string, not nanoseconds.
    let stats = try Self.json(["--store", store, "stats", "--json"])
    Self.expectRecord(stats, Self.stats, "stats")
    let lastSweep = try #require((stats as? [String: Any])?["lastSweep"] as? [String: Any])
    #expect(lastSweep["time"] is String)

    // config: every setting, sizes in bytes, the source of each.
    #expect(try CLI.run(["--store", store, "config", "set", "budget", "150M"]).status == 0)
    let config = try Self.json(["--store", store, "config", "--json"])
    Self.expectRecords(
      config,
      [
        "key": .string, "value": .string, "bytes": .nullable(.integer),
        "seconds": .nullable(.integer), "source": .string, "found": .nullable(.string),
      ], minimum: CachePolicy.Key.allCases.count + 1, "config")
    let settings = try #require(config as? [[String: Any]])
    let budget = try #require(settings.first { $0["key"] as? String == "budget" })
    #expect(budget["bytes"] as? Int == 150_000_000 && budget["source"] as? String == "config")
    #expect(budget["value"] as? String == "150 MB")
    let maxAge = try #require(settings.first { $0["key"] as? String == "max-age" })
    #expect(maxAge["source"] as? String == "default" && maxAge["seconds"] is NSNull)
  }

  @Test("doctor, record show and ls, export and import, remote ls and check: every key, typed")
  func moreCommands() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", Bytes.random(4000, seed: 21))
    #expect(try CLI.run(["--store", store, "record", "start", "r"]).status == 0)
    #expect(
      try CLI.run(
        ["--store", store, "put", "--key", "k", file], environment: ["TROVE_RECORD": "r"]
      )
      .status == 0)
    Self.expectRecord(
      try Self.json(["--store", store, "doctor", "--json", scratch.path]),
      [
        "store": .string, "destination": .string, "storeFilesystem": .string,
        "destinationFilesystem": .string, "sameFilesystem": .bool, "cloneSupported": .bool,
        "hardlinkSupported": .bool, "locksWork": .bool, "availableBytes": .integer,
        "totalBytes": .integer, "minimumFreeBytes": .integer, "journalMode": .nullable(.string),
        "readOnlyReason": .nullable(.string), "checks": .array,
      ], "doctor")
    let doctor = try #require(
      try Self.json(["--store", store, "doctor", "--json"]) as? [String: Any])
    Self.expectRecords(
      doctor["checks"] ?? [],
      ["name": .string, "status": .string, "detail": .string, "advice": .nullable(.string)],
      "doctor.checks")
    Self.expectRecords(
      try Self.json(["--store", store, "record", "show", "r", "--json"]),
      [
        "digest": .string, "keys": .array, "size": .nullable(.integer), "stored": .bool,
        "firstUsed": .time, "lastUsed": .time,
      ], "record show")
    Self.expectRecords(
      try Self.json(["--store", store, "record", "ls", "--json"]),
      ["name": .string, "active": .bool, "objects": .integer], "record ls")
    let exchange: [String: Kind] = [
      "place": .string, "objects": .integer, "duplicates": .integer, "bytes": .integer,
      "keys": .integer, "missing": .array, "keptKeys": .array,
    ]
    Self.expectRecord(
      try Self.json(["--store", store, "export", "--record", "r", "--json", scratch["set"]]),
      exchange, "export")
    Self.expectRecord(
      try Self.json(["--store", scratch["other"], "import", "--json", scratch["set"]]),
      exchange, "import")
    let url = "http://127.0.0.1:\(deadPort())/team"
    #expect(try CLI.run(["--store", store, "remote", "add", "dead", url]).status == 0)
    Self.expectRecords(
      try Self.json(["--store", store, "remote", "ls", "--json"]),
      [
        "name": .string, "url": .string, "readOnly": .bool, "maxObjectSize": .nullable(.integer),
        "authEnv": .nullable(.string), "write": .string, "trust": .array,
      ], "remote ls")
    Self.expectRecords(
      try Self.json(["--store", store, "remote", "status", "--json"]),
      [
        "name": .string, "url": .string, "readOnly": .bool, "state": .string,
        "consecutiveFailures": .integer, "retryAt": .nullable(.time), "hits": .integer,
        "misses": .integer, "corrupt": .integer, "bytesPulled": .integer, "errors": .integer,
        "skipped": .integer, "untrusted": .integer, "trust": .array, "write": .string,
        "queuedObjects": .nullable(.integer),
        "queuedBytes": .nullable(.integer), "tooLargeObjects": .nullable(.integer),
        "tooLargeBytes": .nullable(.integer),
      ], "remote status")
    Self.expectRecord(
      try Self.json(["--store", store, "remote", "check", "dead", "--json"], status: 69),
      [
        "name": .string, "url": .string, "kind": .string, "readOnly": .bool, "reachable": .bool,
        "writable": .nullable(.bool),
        "layout": .nullable(
          .record(["format": .integer, "hash": .string, "compression": .string])),
        "layoutWritten": .bool, "latencySeconds": .nullable(.number),
        "clockSkewSeconds": .nullable(.integer), "pendingUploads": .nullable(.integer),
        "abortedUploads": .nullable(.integer), "error": .nullable(.string),
      ], "remote check")
  }

  @Test(
    "remote push and pull --json: every key, typed",
    .enabled(if: Nginx.executable != nil, Nginx.missing))
  func remoteTransfers() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let file = try scratch.write("f", Bytes.random(4000, seed: 22))
    let digest = XXH3Hasher.digest(try contents(file)).description
    for store in [scratch["a"], scratch["b"]] {
      #expect(
        try CLI.run(["--store", store, "remote", "add", "team", nginx.url("/team")]).status == 0)
    }
    #expect(try CLI.run(["--store", scratch["a"], "put", file]).status == 0)
    Self.expectRecords(
      try Self.json(["--store", scratch["a"], "remote", "push", "--json", digest]),
      [
        "digest": .string, "remote": .string, "outcome": .nullable(.string),
        "error": .nullable(.string),
      ], "remote push")
    Self.expectRecords(
      try Self.json(["--store", scratch["b"], "remote", "pull", "--json", digest]),
      [
        "digest": .nullable(.string), "key": .nullable(.string), "remote": .nullable(.string),
        "size": .nullable(.integer), "transferredBytes": .nullable(.integer),
        "clonedBytes": .nullable(.integer), "outcome": .string, "error": .nullable(.string),
      ], "remote pull")
  }

  @Test("fetch --json: every key, typed; a download is a miss, a cached fetch a hit")
  func fetch() throws {
    guard Nginx.executable != nil else { return }
    let nginx = try Nginx()
    _ = try nginx.files.write("a.bin", Bytes.random(10_000, seed: 3))
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "config", "set", "access-resolution", "0"]).status == 0)
    let fields: [String: Kind] = [
      "url": .string, "digest": .nullable(.string), "size": .nullable(.integer),
      "source": .nullable(.string), "httpStatus": .nullable(.integer),
      "bytesTransferred": .nullable(.integer), "seconds": .nullable(.number), "verified": .array,
      "servedBy": .nullable(.string), "error": .nullable(.string),
    ]
    let url = nginx.url("/a.bin")
    Self.expectRecords(try Self.json(["--store", store, "fetch", "--json", url]), fields, "fetch")
    Self.expectRecords(
      try Self.json(["--store", store, "fetch", "--json", "--offline", url]), fields, "fetch")
    let stats = try #require(
      try Self.json(["--store", store, "stats", "--json"]) as? [String: Any])
    #expect((stats["hits"] as? [String: Any])?["local"] as? Int == 1, "\(stats)")
    #expect(stats["misses"] as? Int == 1)
    // A URL that fails has its record, with its error; the exit is not 0.
    let failed = try CLI.run(["--store", store, "fetch", "--json", url, nginx.url("/none")])
    #expect(failed.status != 0)
    let records = try #require(
      try JSONSerialization.jsonObject(with: Data(failed.stdout)) as? [[String: Any]])
    Self.expectRecords(records, fields, minimum: 2, "fetch")
    #expect(records.count == 2 && records[0]["error"] is NSNull)
    #expect(records[1]["digest"] is NSNull && records[1]["error"] as? String != nil)
  }

  @Test("hits and misses of get are counted, has counts nothing, stats --reset zeroes them")
  func counters() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", Bytes.random(3000, seed: 9))
    let digest = String(try CLI.run(["--store", store, "put", file]).out.prefix(39))
    func counts() throws -> (hits: Int?, misses: Int?, rate: Any?, since: Any?) {
      let s = try #require(try Self.json(["--store", store, "stats", "--json"]) as? [String: Any])
      return (
        (s["hits"] as? [String: Any])?["local"] as? Int, s["misses"] as? Int, s["hitRate"],
        s["countedSince"]
      )
    }
    // Before any read: zero, and no rate.
    var now = try counts()
    #expect(now.hits == 0 && now.misses == 0 && now.rate is NSNull && now.since is NSNull)

    // Every get is a hit, even right after the put recorded an access
    // (the default access-resolution, 60 s: no access written); has is a
    // probe; the store's own reads (verify) count nothing.
    #expect(try CLI.run(["--store", store, "get", digest, scratch["a"]]).status == 0)
    #expect(try CLI.run(["--store", store, "get", digest, "-"]).status == 0)
    #expect(try counts().hits == 2)
    #expect(try CLI.run(["--store", store, "has", digest]).status == 0)
    let absent = "xxh128:" + String(repeating: "0", count: 32)
    #expect(try CLI.run(["--store", store, "get", absent, scratch["c"]]).status == 1)
    #expect(try CLI.run(["--store", store, "has", absent]).status == 1)
    #expect(try CLI.run(["--store", store, "verify"]).status == 0)
    now = try counts()
    #expect(now.hits == 2 && now.misses == 1)
    #expect(now.rate as? Double == 2.0 / 3.0)
    let human = try CLI.run(["--store", store, "stats"])
    #expect(human.out.contains("hits        2 local, 1 miss (hit rate 66.7%)"), "\(human.out)")

    // --reset zeroes the counts, not the totals, and says so.
    let reset = try CLI.run(["--store", store, "stats", "--reset"])
    #expect(reset.status == 0 && reset.errorLines == ["trove: hit and miss counts reset to zero"])
    #expect(reset.out.contains("entries     1\n"))
    now = try counts()
    #expect(now.hits == 0 && now.misses == 0 && now.since is String)
  }

  @Test("config unset puts one setting back to its default; sizes read back as given")
  func configUnset() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    func get(_ key: String) throws -> String {
      try CLI.run(["--store", store, "config", "get", key]).out
    }
    for (given, shown) in [
      ("150M", "150 MB"), ("1G", "1 GB"), ("1.5G", "1.5 GB"), ("1.5GiB", "1.5 GiB"),
      ("64KiB", "64.0 KiB"), ("64K", "64 KB"), ("123456789", "117.7 MiB"),
    ] {
      #expect(try CLI.run(["--store", store, "config", "set", "budget", given]).status == 0)
      #expect(try get("budget") == shown + "\n", "\(given)")
      #expect(
        CachePolicy.Quantities.parseSize(shown) == CachePolicy.Quantities.parseSize(given)
          || given == "123456789")
    }
    #expect(try CLI.run(["--store", store, "config", "set", "max-age", "3d"]).status == 0)
    #expect(try CLI.run(["--store", store, "config", "unset", "budget"]).status == 0)
    #expect(try get("budget") == "none\n")
    #expect(try get("max-age") == "3d\n", "the other settings stay")
    let unknown = try CLI.run(["--store", store, "config", "unset", "colour"])
    #expect(unknown.status == 64 && unknown.errorLines.first?.contains("unknown setting") == true)
    let json = try CLI.run(["--store", store, "config", "get", "budget", "--json"])
    #expect(json.status == 64)
  }

  @Test("TROVE_BUDGET and the other variables override a setting for one process, shown as env")
  func environmentOverrides() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "config", "set", "budget", "1G"]).status == 0)
    let env = ["TROVE_BUDGET": "2G", "TROVE_MIN_FREE": "5%"]
    let get = try CLI.run(["--store", store, "config", "get", "budget"], environment: env)
    #expect(get.out == "2 GB\n")
    let json = try CLI.run(["--store", store, "config", "--json"], environment: env)
    let settings = try #require(
      try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [[String: Any]])
    let budget = try #require(settings.first { $0["key"] as? String == "budget" })
    #expect(budget["source"] as? String == "env" && budget["bytes"] as? Int == 2_000_000_000)
    let minFree = try #require(settings.first { $0["key"] as? String == "min-free" })
    #expect(minFree["source"] as? String == "env" && minFree["value"] as? String == "5%")
    let stats = try CLI.run(["--store", store, "stats"], environment: env)
    #expect(stats.out.contains("budget      2 GB (TROVE_BUDGET), "), "\(stats.out)")
    let statsJSON = try #require(
      try JSONSerialization.jsonObject(
        with: Data(try CLI.run(["--store", store, "stats", "--json"], environment: env).stdout))
        as? [String: Any])
    #expect(statsJSON["overrides"] as? [String] == ["TROVE_BUDGET", "TROVE_MIN_FREE"])
    #expect(statsJSON["budget"] as? Int == 2_000_000_000)
    // config.json is not changed: without the variable, its value is back.
    #expect(try CLI.run(["--store", store, "config", "get", "budget"]).out == "1 GB\n")

    // An invalid value: one line naming the variable, exit 78, for what
    // needs the settings; a read by digest still works.
    let file = try scratch.write("f", [1, 2, 3])
    let bad = ["TROVE_BUDGET": "lots"]
    let put = try CLI.run(["--store", store, "put", file], environment: bad)
    #expect(put.status == 78)
    #expect(
      put.errorLines == [
        "Error: invalid TROVE_BUDGET 'lots' in the environment: expected a size such as 500M, 10G, 1.5GiB or 0, or 'none'; unset it or correct it"
      ], "\(put.stderr)")
    #expect(try CLI.run(["--store", store, "stats"], environment: bad).status == 78)
  }
  @Test(
    "keys --json gives Last-Modified as ISO 8601",
    .enabled(if: Nginx.executable != nil, Nginx.missing))
  func lastModifiedISO() throws {
    let nginx = try Nginx()
    let served = try nginx.files.write("a.bin", Bytes.random(1000, seed: 7))
    try FileManager.default.setAttributes(
      [.modificationDate: Date(timeIntervalSince1970: 1_577_934_245)], ofItemAtPath: served)
    let scratch = try Scratch()
    let store = scratch["store"]
    let fetch = try CLI.run(["--store", store, "fetch", nginx.url("/a.bin")])
    #expect(fetch.status == 0, "\(fetch.stderr)")
    let keys = try CLI.run(["--store", store, "keys", "--json"])
    let records = try #require(
      try JSONSerialization.jsonObject(with: Data(keys.stdout)) as? [[String: Any]])
    #expect(records.first?["lastModified"] as? String == "2020-01-02T03:04:05Z", "\(keys.out)")
  }

}
