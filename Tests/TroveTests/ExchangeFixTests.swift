import Foundation
import Testing

@testable import Trove

/// Export and import: limits before the first byte,
/// keys bound in the put's transaction and never silently repointed, an
/// export folder that is a link refused; through the real CLI.
@Suite("export and import fixes")
struct ExchangeFixTests {
  /// Runs `trove --store STORE ARGS`, expecting exit 0.
  @discardableResult
  func trove(
    _ store: String, _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation
  ) throws -> CLI.Result {
    let run = try CLI.run(["--store", store] + arguments)
    #expect(
      run.status == 0, "\(arguments): \(run.status) \(run.stderr)", sourceLocation: sourceLocation)
    return run
  }

  /// A store at `scratch["store"]` whose record `set` holds `bytes` under
  /// `key`; returns its digest.
  func recorded(_ scratch: Scratch, _ bytes: [UInt8], key: String) throws -> BlobDigest {
    let store = scratch["store"]
    try trove(store, ["record", "start", "set"])
    try trove(store, ["put", "--key", key, try scratch.write("input", bytes)])
    try trove(store, ["record", "stop", "set"])
    return XXH3Hasher.digest(bytes)
  }

  @Test("an archive member above max-object-size is refused before it is written: too large")
  func importTooLarge() throws {
    let scratch = try Scratch()
    let digest = try recorded(scratch, Bytes.random(3 << 20, seed: 90), key: "big")
    try trove(scratch["store"], ["export", "--record", "set", scratch["set.tar"]])
    let fresh = scratch["fresh"]
    try trove(fresh, ["config", "set", "max-object-size", "1M"])
    let run = try CLI.run(["--store", fresh, "import", scratch["set.tar"]])
    #expect(run.status == 65 && run.stderr.contains("max-object-size"), "\(run.stderr)")
    #expect(!run.stderr.contains("hash"), "\(run.stderr)")
    #expect(scratch.temporaries("fresh").isEmpty)
    let audit = try StoreAudit(store: fresh, context: "too large", io: scratch["io"])
    #expect(try !audit.digestsOnDisk().contains(digest))
  }

  @Test(
    "import keeps a key bound to another object, one warning line each; --replace-keys repoints")
  func importKeepsKeys() throws {
    let scratch = try Scratch()
    let theirs = Bytes.random(20_000, seed: 91)
    try recorded(scratch, theirs, key: "k")
    try trove(scratch["store"], ["export", "--record", "set", scratch["set.tar"]])
    try trove(scratch["store"], ["export", "--record", "set", scratch["set-dir"]])
    for source in [scratch["set.tar"], scratch["set-dir"]] {
      let mine = scratch["mine-" + (source.hasSuffix(".tar") ? "tar" : "dir")]
      let ours = Bytes.pattern(5000)
      try trove(mine, ["put", "--key", "k", try scratch.write("ours", ours)])
      let kept = try trove(mine, ["import", source, "--json"])
      let warnings = kept.stderr.split(separator: "\n").filter { $0.contains("'k'") }
      #expect(warnings.count == 1, "\(kept.stderr)")
      let report = try #require(
        JSONSerialization.jsonObject(with: Data(kept.stdout)) as? [String: Any])
      #expect(report["keptKeys"] as? [String] == ["k"] && report["keys"] as? Int == 0)
      #expect(try trove(mine, ["get", "k", "-"]).stdout == ours)
      try trove(mine, ["import", "--replace-keys", source])
      #expect(try trove(mine, ["get", "k", "-"]).stdout == theirs)
    }
  }

  @Test("export to a symbolic link to an empty folder is refused (exit 73); the folder stays empty")
  func exportThroughLinkRefused() throws {
    let scratch = try Scratch()
    try recorded(scratch, Bytes.random(10_000, seed: 92), key: "x")
    try FileManager.default.createDirectory(
      atPath: scratch["empty"], withIntermediateDirectories: false)
    try FileManager.default.createSymbolicLink(
      atPath: scratch["link"], withDestinationPath: scratch["empty"])
    let run = try CLI.run([
      "--store", scratch["store"], "export", "--record", "set", scratch["link"],
    ])
    #expect(run.status == 73 && run.stderr.contains("symbolic link"), "\(run.stderr)")
    #expect(scratch.list("empty").isEmpty)
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

/// Export while a sweep evicts: each object is exported
/// whole or reported missing, never part of one or other bytes.
@Suite("export during eviction")
struct ExportDuringEvictionTests {
  @Test("an export racing a sweep --budget 0: every exported object verifies; the rest are missing")
  func exportRacingSweep() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    var objects: [RecordedObject] = []
    var bytesOf: [BlobDigest: [UInt8]] = [:]
    for i in 0..<300 {
      let bytes = Bytes.random(3000 + i * 37, seed: UInt64(2000 + i))
      let digest = try store.put(bytes: bytes, key: "k\(i)").digest
      bytesOf[digest] = bytes
      objects.append(RecordedObject(digest: digest, keys: ["k\(i)"], firstUsed: 0, lastUsed: 0))
    }
    for round in 0..<3 {
      // Refill what the last round's sweep evicted.
      for (digest, bytes) in bytesOf where try !store.contains(digest) {
        _ = try store.put(bytes: bytes)
      }
      let destination = scratch["export-\(round)"]
      let sweeper = Thread {
        _ = try? store.sweep(SweepOptions(budget: 0))
      }
      sweeper.start()
      let report = try store.export(objects, to: destination)
      while !sweeper.isFinished { usleep(1000) }
      let exported = try Store(StoreConfiguration(root: destination, createIfMissing: false))
      let entries = try exported.entries()
      #expect(entries.count + report.missing.count == objects.count)
      #expect(report.objects == entries.count)
      #expect(try exported.verify().corrupt.isEmpty)
      for entry in entries {
        #expect(try exported.bytes(for: entry.digest) == bytesOf[entry.digest])
      }
      #expect(Set(report.missing).isDisjoint(with: entries.map(\.digest)))
      print("export round \(round): \(entries.count) exported, \(report.missing.count) missing")
    }
  }
}
