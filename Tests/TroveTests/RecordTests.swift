import Foundation
import Testing

@testable import Trove

/// Recording what runs used: `trove record`,
/// `TROVE_RECORD`, `pin --record`, `sweep --keep-record`, through the
/// real CLI.
@Suite("records")
struct RecordTests {
  /// `record show NAME --json`, decoded.
  func shown(_ store: String, _ name: String) throws -> [[String: Any]] {
    let run = try trove(store, ["record", "show", name, "--json"])
    return try #require(
      JSONSerialization.jsonObject(with: Data(run.stdout)) as? [[String: Any]], "\(run.out)")
  }

  /// The digests `record show NAME --json` lists, in order.
  func recorded(_ store: String, _ name: String) throws -> [String] {
    try shown(store, name).compactMap { $0["digest"] as? String }
  }

  /// Lines of `records/NAME.log` that are not `DIGEST TAB TIME [TAB KEY]`.
  func tornLines(_ store: String, _ name: String) throws -> [String] {
    let text = String(decoding: try contents(store + "/records/\(name).log"), as: UTF8.self)
    #expect(text.hasSuffix("\n"))
    return text.split(separator: "\n").map(String.init).filter { line in
      let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
      return
        !((2...3).contains(fields.count) && (try? BlobDigest(parsing: String(fields[0]))) != nil
        && Int64(fields[1]) != nil)
    }
  }

  @Test("start records every process's get, put and path until stop; show lists each once")
  func startStop() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let before = try put(scratch, "before", [1, 2, 3])
    try trove(store, ["record", "start", "bench"])
    let a = try put(scratch, "a", Bytes.pattern(5000), key: "https://example.com/a")
    try trove(store, ["get", before.description, scratch["out1"]])
    try trove(store, ["get", "https://example.com/a", scratch["out2"]])
    let b = try put(scratch, "b", Bytes.random(3000, seed: 1))
    try trove(store, ["path", b.description])
    try trove(store, ["record", "stop", "bench"])
    let after = try put(scratch, "after", Bytes.random(100, seed: 2))
    try trove(store, ["get", after.description, scratch["out3"]])

    let rows = try shown(store, "bench")
    #expect(rows.compactMap { $0["digest"] as? String } == [a, before, b].map(\.description))
    let first = try #require(rows.first)
    #expect(first["keys"] as? [String] == ["https://example.com/a"])
    #expect(first["size"] as? Int == 5000 && first["stored"] as? Bool == true)
    #expect((first["firstUsed"] as? String)?.hasSuffix("Z") == true)
    let text = try trove(store, ["record", "show", "bench"]).out
    #expect(text.contains("\(a)  4.9 KiB  https://example.com/a\n"), "\(text)")
    let ls = try trove(store, ["record", "ls"]).out
    #expect(ls == "bench  off  3 objects\n", "\(ls)")
    #expect(try tornLines(store, "bench").isEmpty)
  }

  @Test(
    "a log of 800,000 lines is read in pieces: every line counted, an overlong one skipped, show's memory bounded",
    .enabled(
      if: FileManager.default.isExecutableFile(atPath: "/usr/bin/time"),
      "peak RSS is measured with GNU time (/usr/bin/time), not installed")
  )
  func largeLog() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    try trove(store, ["record", "start", "big"])
    try trove(store, ["record", "start", "small"])
    let a = try put(scratch, "a", [1, 2, 3])
    let b = try put(scratch, "b", [4, 5, 6])
    // Lines of a and b alternating, times falling then rising; one line of
    // 2 MiB (damaged, skipped), one of garbage, and a last line with a key
    // and no newline. Lines straddle every 64 KiB piece boundary.
    let lines = 800_000
    var log = [UInt8]()
    log.reserveCapacity(lines * 64)
    for i in 0..<lines {
      let time = 5_000_000 + abs(i - lines / 2)
      log += Array("\(i % 2 == 0 ? a : b)\t\(time)\n".utf8)
      if i == lines / 3 { log += [UInt8](repeating: 0x41, count: 2 << 20) + [0x0A] }
      if i == lines / 4 { log += Array("not a line\n".utf8) }
    }
    log += Array("\(b)\t7\thttps://example.com/b".utf8)
    try scratch.write("store/records/big.log", log)

    let record = try scratch.store().record(named: "big")
    #expect(record.damagedLines == 2)
    #expect(record.objects.map(\.digest) == [a, b])
    #expect(record.objects.first?.firstUsed == 5_000_000)
    #expect(record.objects.first?.lastUsed == Int64(5_000_000 + lines / 2))
    #expect(record.objects.last?.firstUsed == 7)
    #expect(record.objects.last?.keys == ["https://example.com/b"])

    // Peak RSS of `record show`, the big log against an empty one: the
    // 40 MB log must not be held whole, nor all its lines at once.
    func peak(_ name: String) throws -> Int {
      let out = scratch["rss-" + name]
      let run = try CLI.run(
        ["--store", store, "record", "show", name, "--json"],
        prefix: ["/usr/bin/time", "-f", "%M", "-o", out])
      #expect(run.status == 0, "\(run.stderr)")
      let text = String(decoding: try contents(out), as: UTF8.self)
      return try #require(Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), "\(text)")
    }
    let small = try peak("small")
    let big = try peak("big")
    #expect(log.count > 40_000_000)
    #expect(big - small < 16 << 10, "peak RSS \(big) KiB against \(small) KiB")
  }

  @Test("a removed object shows as missing (size null); rm removes the record, not the objects")
  func missingAndRemoved() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    try trove(store, ["record", "start", "r"])
    let a = try put(scratch, "a", [9, 9, 9])
    try trove(store, ["rm", a.description])
    let rows = try shown(store, "r")
    #expect(rows.count == 1 && rows[0]["size"] is NSNull && rows[0]["stored"] as? Bool == false)
    #expect(try trove(store, ["record", "show", "r"]).out == "\(a)  missing\n")
    let b = try put(scratch, "b", [1])
    try trove(store, ["record", "rm", "r"])
    #expect(try trove(store, ["record", "ls"]).out.isEmpty)
    #expect(try trove(store, ["has", b.description]).status == 0)
    let gone = try CLI.run(["--store", store, "record", "show", "r"])
    #expect(gone.status == 1 && gone.stderr.contains("no record 'r'"), "\(gone.stderr)")
  }

  @Test("TROVE_RECORD records that process only, making the record")
  func environment() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let a = try scratch.write("a", [1, 2])
    let b = try scratch.write("b", [3, 4])
    try trove(store, ["put", a], environment: ["TROVE_RECORD": "ci-1"])
    try trove(store, ["put", b])
    #expect(try recorded(store, "ci-1") == [XXH3Hasher.digest([1, 2]).description])
    #expect(try trove(store, ["record", "ls"]).out == "ci-1  off  1 object\n")
    let bad = try CLI.run(["--store", store, "put", a], environment: ["TROVE_RECORD": "../x"])
    #expect(bad.status == 64 && bad.stderr.contains("TROVE_RECORD"), "\(bad.stderr)")
  }

  @Test("a record that cannot be written to warns once and never fails the command")
  func unwritableRecord() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let a = try put(scratch, "a", [1, 2, 3])
    try trove(store, ["record", "start", "r"])
    try FileManager.default.removeItem(atPath: store + "/records/r.log")
    try FileManager.default.createDirectory(
      atPath: store + "/records/r.log", withIntermediateDirectories: false)
    let get = try trove(store, ["get", a.description, scratch["out"]])
    #expect(get.errorLines.filter { $0.contains("records/r.log") }.count == 1, "\(get.stderr)")
    #expect(try contents(scratch["out"]) == [1, 2, 3])
    let quiet = try trove(store, ["-q", "has", a.description])
    #expect(quiet.stderr.isEmpty, "\(quiet.stderr)")
  }

  @Test("bad names and actions are usage errors naming them")
  func badInput() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    for arguments in [
      ["record", "start", ".hidden"], ["record", "start", "a/b"],
      ["record", "start", String(repeating: "x", count: 65)], ["record", "frob", "x"],
      ["record", "start"], ["pin", "--record", "a b"], ["sweep", "--keep-record", ""],
    ] {
      let run = try CLI.run(["--store", store] + arguments)
      #expect(run.status == 64, "\(arguments): \(run.status) \(run.stderr)")
    }
    #expect(!FileManager.default.fileExists(atPath: store))
    let missing = try CLI.run(["--store", store, "record", "show", "x"])
    #expect(missing.status == 66, "\(missing.stderr)")
  }

  @Test("concurrent processes append whole lines: none torn, every use noted")
  func concurrentAppenders() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    try trove(store, ["record", "start", "many"])
    var script = ""
    var digests = Set<String>()
    for i in 0..<12 {
      let bytes = Bytes.random(1000 + i, seed: UInt64(100 + i))
      digests.insert(XXH3Hasher.digest(bytes).description)
      let file = try scratch.write("f\(i)", bytes)
      // Long keys: lines of about 3 KiB, still one write each.
      let key = "k\(i)-" + String(repeating: "\(i % 10)", count: 3000)
      script += "\"$0\" --store '\(store)' put --key '\(key)' '\(file)' >/dev/null &\n"
    }
    script += "wait\n"
    let run = try CLI.run([], prefix: ["/bin/bash", "-c", script])
    #expect(run.status == 0, "\(run.stderr)")
    #expect(try tornLines(store, "many").isEmpty)
    let rows = try shown(store, "many")
    #expect(Set(rows.compactMap { $0["digest"] as? String }) == digests)
    #expect(rows.allSatisfy { ($0["keys"] as? [String])?.count == 1 })
  }

  @Test("pin --record pins exactly the set; one no longer stored is named, exit 1")
  func pinRecord() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let outside = try put(scratch, "o", [0])
    try trove(store, ["record", "start", "set"])
    let a = try put(scratch, "a", [1])
    let b = try put(scratch, "b", [2])
    try trove(store, ["record", "stop", "set"])
    try trove(store, ["pin", "--record", "set", "--for", "6h", "--name", "bench"])
    let pins = try trove(store, ["pins"]).out
    #expect(pins.contains("\(a)  bench") && pins.contains("\(b)  bench"), "\(pins)")
    #expect(!pins.contains(outside.description))
    try trove(store, ["rm", a.description])
    let run = try CLI.run(["--store", store, "pin", "--record", "set"])
    #expect(run.status == 1 && run.errorLines.count == 1, "\(run.stderr)")
    #expect(run.stderr.contains("\(a) of record 'set' is no longer in store"))
    #expect(try trove(store, ["pins"]).out.contains("\(b)  default"))
    let none = try CLI.run(["--store", store, "pin", "--record", "nope"])
    #expect(none.status == 1 && none.stderr.contains("no record 'nope'"), "\(none.stderr)")
  }

  @Test("sweep --keep-record --budget 0 keeps exactly the records' objects")
  func sweepKeepRecord() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    var others: [BlobDigest] = []
    for i in 0..<5 { others.append(try put(scratch, "o\(i)", Bytes.random(4096, seed: UInt64(i)))) }
    let x = try put(scratch, "x", Bytes.random(8192, seed: 50), key: "x")
    try trove(
      store, ["get", others[0].description, scratch["g"]], environment: ["TROVE_RECORD": "one"])
    try trove(store, ["get", "x", scratch["h"]], environment: ["TROVE_RECORD": "two"])
    try trove(store, ["sweep", "--budget", "0", "--keep-record", "one", "--keep-record", "two"])
    let audit = try StoreAudit(store: store, context: "keep-record", io: scratch["io"])
    #expect(try audit.digestsOnDisk() == [others[0], x])
    try trove(store, ["sweep", "--budget", "0", "--keep-record", "two"])
    #expect(try audit.digestsOnDisk() == [x])
    #expect(try trove(store, ["keys"]).out.contains("x"))
  }

  @Test("show, pin and unpin by key are not uses: the record stays empty; get by key is noted")
  func lookingIsNotUsing() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let digest = try put(scratch, "a.txt", Array("looked at\n".utf8), key: "ka")
    try trove(store, ["record", "start", "R"])
    try trove(store, ["show", "ka"])
    try trove(store, ["pin", "ka"])
    try trove(store, ["unpin", "ka"])
    try trove(store, ["show", String(digest.hex.prefix(10))])
    #expect(try recorded(store, "R").isEmpty)
    try trove(store, ["get", "ka", scratch["out.txt"]])
    let shown = try shown(store, "R")
    #expect(shown.count == 1 && shown.first?["digest"] as? String == digest.description)
    #expect((shown.first?["keys"] as? [String]) == ["ka"], "\(shown)")
  }
  @Test("an invalid TROVE_RECORD is refused by every command, also dir and hash")
  func invalidRecordEverywhere() throws {
    let scratch = try Scratch()
    let file = try scratch.write("f", [1])
    for arguments in [["dir"], ["hash", file], ["ls"], ["put", file]] {
      let run = try CLI.run(
        ["--store", scratch["store"]] + arguments, environment: ["TROVE_RECORD": "../x"])
      #expect(run.status == 64 && run.stderr.contains("TROVE_RECORD"), "\(arguments)")
      #expect(run.out.isEmpty)
    }
    #expect(!FileManager.default.fileExists(atPath: scratch["store"]))
  }

}

@Suite("record lines")
struct RecordLineTests {
  @Test("a key field holding a raw tab or newline (two lines merged) is damaged, not a key")
  func rawTabRejected() {
    #expect(RecordKeeper.unescaped("https://a\t1234") == nil)
    #expect(RecordKeeper.unescaped("a\nb") == nil)
    #expect(RecordKeeper.unescaped("a\\tb") == "a\tb")
    #expect(RecordKeeper.unescaped(Substring(RecordKeeper.escaped("x\ty\\"))) == "x\ty\\")
  }
}
