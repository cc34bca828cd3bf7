import Foundation
import Testing

@testable import Trove

/// Export and import through the real CLI: a record's objects and keys
/// round-trip through a folder or a tar, every member checked; limits before
/// the first byte, keys never silently repointed, an export folder that is a
/// link refused, no store left by a failed import.
@Suite("export and import")
struct ExportImportTests {
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
  @Test("a failed import or remote pull leaves no new store behind")
  func failedImportMakesNoStore() throws {
    let scratch = try Scratch()
    let store = scratch["new/store"]
    try FileManager.default.createDirectory(
      atPath: scratch["empty"], withIntermediateDirectories: true)
    let junk = try scratch.write("junk.tar", Bytes.random(3000, seed: 12))
    for source in [scratch["empty"], junk, scratch["missing"]] {
      let run = try CLI.run(["--store", store, "import", source])
      #expect(run.status != 0 && run.errorLines.count == 1, "\(source): \(run.stderr)")
      #expect(!FileManager.default.fileExists(atPath: scratch["new"]), "\(source)")
    }
    // An empty folder named as the store is left empty.
    try FileManager.default.createDirectory(
      atPath: scratch["folder"], withIntermediateDirectories: true)
    let intoFolder = try CLI.run(["--store", scratch["folder"], "import", junk])
    #expect(intoFolder.status == 65 && scratch.list("folder").isEmpty, "\(scratch.list("folder"))")
    // A cut-short archive on stdin.
    let source = scratch["src"]
    let file = try scratch.write("f", Bytes.random(5000, seed: 13))
    #expect(try CLI.run(["--store", source, "record", "start", "r"]).status == 0)
    let second = try scratch.write("g", Bytes.random(7000, seed: 14))
    for input in [file, second] {
      let put = try CLI.run(["--store", source, "put", input], environment: ["TROVE_RECORD": "r"])
      #expect(put.status == 0)
    }
    let tar = scratch["set.tar"]
    #expect(try CLI.run(["--store", source, "export", "--record", "r", tar]).status == 0)
    let cut = Array(try contents(tar).prefix(1200))
    let piped = try CLI.run(["--store", store, "import", "-"], stdin: cut)
    #expect(piped.status == 65 && piped.stderr.contains("'<stdin>'"), "\(piped.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["new"]))
    // Cut short after the first object: that one is stored, and the store stays.
    let set = try contents(tar)
    let manifestSize = Int(
      String(decoding: set[124..<135], as: UTF8.self).filter { $0 != " " && $0 != "\0" }, radix: 8)!
    let firstEnd = 512 + (manifestSize + 511) / 512 * 512 + 512 + (5000 + 511) / 512 * 512
    let partial = try CLI.run(
      ["--store", store, "import", "-"], stdin: Array(set.prefix(firstEnd + 100)))
    #expect(partial.status == 65, "\(partial.stderr)")
    #expect(FileManager.default.fileExists(atPath: store + "/config.json"))
    try FileManager.default.removeItem(atPath: scratch["new"])
    // The whole archive imports (and makes the store).
    let whole = try CLI.run(["--store", store, "import", tar])
    #expect(whole.status == 0, "\(whole.stderr)")
    #expect(FileManager.default.fileExists(atPath: store + "/config.json"))
    let pull = try CLI.run([
      "--store", scratch["other"], "remote", "pull", XXH3Hasher.digest([1]).description,
    ])
    #expect(pull.status == 66 && pull.stderr.contains("no store at"), "\(pull.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["other"]))
  }

  @Test("import prints the numbers its --json gives")
  func importCountsAgree() throws {
    let scratch = try Scratch()
    let source = scratch["src"]
    let a = try scratch.write("a", Bytes.random(1000, seed: 1))
    let b = try scratch.write("b", Bytes.random(3000, seed: 2))
    #expect(try CLI.run(["--store", source, "record", "start", "r"]).status == 0)
    for (file, key) in [(a, "ka"), (b, "kb")] {
      let put = try CLI.run(
        ["--store", source, "put", "--key", key, file], environment: ["TROVE_RECORD": "r"])
      #expect(put.status == 0, "\(put.stderr)")
    }
    #expect(
      try CLI.run(["--store", source, "export", "--record", "r", scratch["set"]]).status == 0)
    let target = scratch["target"]
    #expect(try CLI.run(["--store", target, "put", a]).status == 0)
    let text = try CLI.run(["--store", target, "import", scratch["set"]])
    #expect(
      text.out == "imported 1 object, 1 already there (3.9 KiB), 2 keys from '\(scratch["set"])'\n",
      "\(text.out)")
    let json = try CLI.run(["--store", scratch["target2"], "import", "--json", scratch["set"]])
    let record = try #require(
      try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [String: Any])
    #expect(record["objects"] as? Int == 2 && record["duplicates"] as? Int == 0)
    #expect(record["bytes"] as? Int == 4000 && record["keys"] as? Int == 2)
    let again = try CLI.run(["--store", scratch["target2"], "import", scratch["set"]])
    #expect(again.out.hasPrefix("imported 0 objects, 2 already there (3.9 KiB), 2 keys"))
  }

  @Test(
    "export - to a terminal is refused, as tar refuses",
    .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script"), "needs script(1)")
  )
  func exportToTerminal() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "record", "start", "r"]).status == 0)
    // script(1) gives trove a terminal for stdout and stderr.
    let run = try CLI.run(
      ["--store", store, "export", "--record", "r", "-"],
      prefix: [
        "/bin/bash", "-c", #"exec script -qfec "$(printf '%q ' "$0" "$@")" /dev/null"#,
      ])
    #expect(run.status == 64, "\(run.out)")
    #expect(run.out.contains("Error: refusing to write an archive to a terminal"), "\(run.out)")
    #expect(!run.out.contains("trove-export.json"))
  }

  /// A store at `scratch["store"]` with a record "set" of two objects (one
  /// with a key) and one object outside it; returns the set's bytes.
  func recordedStore(_ scratch: Scratch) throws -> [BlobDigest: [UInt8]] {
    let store = scratch["store"]
    _ = try put(scratch, "outside", Bytes.random(7000, seed: 70))
    try trove(store, ["record", "start", "set"])
    let a = Bytes.random(300_000, seed: 71)
    let b = Bytes.pattern(12345)
    let da = try put(scratch, "a", a, key: "https://example.com/a.tar")
    let db = try put(scratch, "b", b)
    try trove(store, ["record", "stop", "set"])
    return [da: a, db: b]
  }

  /// `store` holds exactly `set`, byte for byte, verify finds it clean,
  /// and the key names `a`.
  func expectHolds(
    _ scratch: Scratch, _ store: String, _ set: [BlobDigest: [UInt8]],
    sourceLocation: SourceLocation = #_sourceLocation
  ) throws {
    let audit = try StoreAudit(store: store, context: "export", io: scratch["io"])
    #expect(try audit.digestsOnDisk() == Set(set.keys), sourceLocation: sourceLocation)
    for (digest, bytes) in set {
      let got = try CLI.run(["--store", store, "get", digest.description, "-"])
      #expect(got.status == 0 && got.stdout == bytes, sourceLocation: sourceLocation)
      #expect(XXH3Hasher.digest(got.stdout) == digest, sourceLocation: sourceLocation)
    }
    try audit.expectVerifyClean(allowingRepair: false, sourceLocation: sourceLocation)
    let keys = try trove(store, ["keys"]).out
    let a = try #require(set.first { $0.value.count == 300_000 }?.key)
    #expect(keys.contains("\(a)") && keys.contains("https://example.com/a.tar"), "\(keys)")
  }

  @Test("export --record writes a store holding only the set with its keys; import reads it back")
  func exportImportFolder() throws {
    let scratch = try Scratch()
    let set = try recordedStore(scratch)
    let export = try trove(scratch["store"], ["export", "--record", "set", scratch["exported"]])
    #expect(export.out.hasPrefix("exported 2 objects"), "\(export.out)")
    try expectHolds(scratch, scratch["exported"], set)
    let fresh = scratch["fresh"]
    let imported = try trove(fresh, ["import", scratch["exported"], "--json"])
    let report = try #require(
      JSONSerialization.jsonObject(with: Data(imported.stdout)) as? [String: Any])
    #expect(report["objects"] as? Int == 2 && report["keys"] as? Int == 1, "\(imported.out)")
    try expectHolds(scratch, fresh, set)
    // Again: nothing new.
    let again = try trove(fresh, ["import", scratch["exported"]])
    #expect(again.out.contains("2 already there"), "\(again.out)")
    // A folder that is not empty is refused, and left as it was.
    let refused = try CLI.run(
      ["--store", scratch["store"], "export", "--record", "set", scratch["exported"]])
    #expect(refused.status == 73 && refused.stderr.contains("not empty"), "\(refused.stderr)")
    // Nothing at the path: exit 66, and the store importing is not made.
    let nothing = try CLI.run(["--store", scratch["never"], "import", scratch["nothing"]])
    #expect(
      nothing.status == 66 && nothing.stderr.contains(scratch["nothing"]), "\(nothing.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["never"]))
  }

  @Test("import hashes every object: one whose bytes do not match its name is refused, exit 65")
  func importTampered() throws {
    let scratch = try Scratch()
    let set = try recordedStore(scratch)
    let exported = scratch["exported"]
    try trove(scratch["store"], ["export", "--record", "set", exported])
    let (victim, bytes) = try #require(set.first { $0.value.count == 12345 })
    let path = exported + "/objects/" + StoreLayout.objectPath(victim)
    var tampered = bytes
    tampered[100] ^= 1
    chmod(path, 0o644)
    try Data(tampered).write(to: URL(fileURLWithPath: path))
    let fresh = scratch["fresh"]
    let run = try CLI.run(["--store", fresh, "import", exported])
    #expect(run.status == 65 && run.stderr.contains(victim.description), "\(run.stderr)")
    // The store the import made stays only when it stored something.
    if FileManager.default.fileExists(atPath: fresh) {
      let audit = try StoreAudit(store: fresh, context: "tampered", io: scratch["io"])
      #expect(try !audit.digestsOnDisk().isEmpty)
      #expect(try !audit.digestsOnDisk().contains(victim))
      #expect(try !audit.digestsOnDisk().contains(XXH3Hasher.digest(tampered)))
      #expect(scratch.temporaries("fresh").isEmpty)
    }
  }

  @Test("export to FILE.tar: tar -tf lists it, tar -xf extracts it, import reads it back")
  func tarRoundTrip() throws {
    let scratch = try Scratch()
    let set = try recordedStore(scratch)
    let archive = scratch["set.tar"]
    try trove(scratch["store"], ["export", "--record", "set", archive])
    let list = try CLI.run([], prefix: ["/bin/bash", "-c", "tar -tf '\(archive)'"])
    let expected =
      ["trove-export.json"] + set.keys.map { "objects/" + StoreLayout.objectPath($0) }
    #expect(
      list.status == 0 && Set(list.out.split(separator: "\n").map(String.init)) == Set(expected))
    #expect(list.out.hasPrefix("trove-export.json\n"), "\(list.out)")
    try FileManager.default.createDirectory(
      atPath: scratch["x"], withIntermediateDirectories: false)
    let extract = try CLI.run(
      [], prefix: ["/bin/bash", "-c", "tar -xf '\(archive)' -C '\(scratch["x"])'"])
    #expect(extract.status == 0, "\(extract.stderr)")
    for (digest, bytes) in set {
      #expect(try contents(scratch["x"] + "/objects/" + StoreLayout.objectPath(digest)) == bytes)
    }
    try trove(scratch["fresh"], ["import", archive])
    try expectHolds(scratch, scratch["fresh"], set)
    // Through a pipe: export - | import -.
    let piped = try CLI.run(
      [],
      prefix: [
        "/bin/bash", "-c",
        "\"$0\" --store '\(scratch["store"])' export --record set - | \"$0\" --store '\(scratch["piped"])' import -",
        CLI.executable,
      ])
    #expect(piped.status == 0 && piped.out.hasPrefix("imported 2 objects"), "\(piped.stderr)")
    try expectHolds(scratch, scratch["piped"], set)
  }

  @Test("a tampered or cut-short archive stores nothing of the bad member, exit 65 naming it")
  func tarTampered() throws {
    let scratch = try Scratch()
    let set = try recordedStore(scratch)
    let archive = scratch["set.tar"]
    try trove(scratch["store"], ["export", "--record", "set", archive])
    let good = try contents(archive)
    // The manifest lists the objects in the order the record noted them:
    // the large one first, so its bytes start at block 2 + manifest blocks.
    let (large, _) = try #require(set.first { $0.value.count == 300_000 })
    let (small, _) = try #require(set.first { $0.value.count == 12345 })
    let manifestSize = Int(
      String(decoding: good[124..<135], as: UTF8.self), radix: 8)!
    let firstData = 512 + (manifestSize + 511) / 512 * 512 + 512
    var flipped = good
    flipped[firstData + 1000] ^= 0x01
    let bad = try scratch.write("bad.tar", flipped)
    let run = try CLI.run(["--store", scratch["fresh"], "import", bad])
    #expect(run.status == 65, "\(run.stderr)")
    #expect(run.stderr.contains(bad) && run.stderr.contains(large.hex), "\(run.stderr)")
    // Nothing stored: the store the import made is removed again.
    #expect(!FileManager.default.fileExists(atPath: scratch["fresh"]))
    // Cut short in the second object: the first is stored, the second not.
    let cut = try scratch.write("cut.tar", Array(good[..<(firstData + 300_000 + 512 + 100)]))
    let short = try CLI.run(["--store", scratch["cut"], "import", cut])
    #expect(short.status == 65 && short.stderr.contains("cut short"), "\(short.stderr)")
    let cutAudit = try StoreAudit(store: scratch["cut"], context: "cut", io: scratch["io"])
    #expect(try cutAudit.digestsOnDisk() == [large])
    #expect(!(try cutAudit.digestsOnDisk()).contains(small))
  }

  @Test("an archive member outside the folder, a link, or not in the manifest is refused")
  func tarHostileMembers() throws {
    let scratch = try Scratch()
    let bytes: [UInt8] = Array("evil\n".utf8)
    let digest = XXH3Hasher.digest(bytes)
    let manifest = Array(
      """
      {"format":"trove-export","version":1,"objects":[{"digest":"\(digest)","size":5,"keys":[]}]}
      """.utf8)
    func archive(_ member: String, type: UInt8 = UInt8(ascii: "0")) -> [UInt8] {
      var header = Ustar.header(name: member, size: 5, time: 0)
      if type != UInt8(ascii: "0") {
        header[156] = type
        for i in 148..<156 { header[i] = 0x20 }
        let sum = String(header.reduce(0) { $0 + Int($1) }, radix: 8)
        for (i, byte) in (String(repeating: "0", count: 6 - sum.count) + sum).utf8.enumerated() {
          header[148 + i] = byte
        }
        header[154] = 0
      }
      return Ustar.header(name: "trove-export.json", size: Int64(manifest.count), time: 0)
        + manifest + [UInt8](repeating: 0, count: Ustar.padding(Int64(manifest.count)))
        + header + bytes + [UInt8](repeating: 0, count: 507 + 1024)
    }
    let objectPath = "objects/" + StoreLayout.objectPath(digest)
    for (member, type, cause) in [
      ("../evil", UInt8(ascii: "0"), "outside the folder"),
      ("objects/../../evil", UInt8(ascii: "0"), "outside the folder"),
      ("/tmp/evil", UInt8(ascii: "0"), "outside the folder"),
      (objectPath, UInt8(ascii: "2"), "link"),
      (objectPath, UInt8(ascii: "1"), "link"),
      ("objects/00/" + digest.hex, UInt8(ascii: "0"), "unexpected member"),
    ] {
      let file = try scratch.write("hostile.tar", archive(member, type: type))
      let run = try CLI.run(["--store", scratch["store"], "import", file])
      #expect(run.status == 65 && run.stderr.contains(cause), "\(member): \(run.stderr)")
      #expect(!FileManager.default.fileExists(atPath: scratch["evil"]))
      #expect(!FileManager.default.fileExists(atPath: "/tmp/evil"))
      // Nothing stored: the store the import made is removed again.
      #expect(!FileManager.default.fileExists(atPath: scratch["store"]), "\(member)")
    }
    // The same archive with an honest member is taken.
    let honest = try scratch.write("honest.tar", archive(objectPath))
    try trove(scratch["store"], ["import", honest])
    #expect(try trove(scratch["store"], ["get", digest.description, "-"]).stdout == bytes)
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
