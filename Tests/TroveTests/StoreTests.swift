import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// The store on the root filesystem (ext4 here: no clones), through the library.
@Suite("Store: put, get, layout, index")
struct StoreTests {
  @Test("a new store has the documented layout, modes and cache tag")
  func layout() throws {
    let scratch = try Scratch()
    let store = try scratch.store("a/b/store")
    let root = scratch["a/b/store"]
    #expect(!scratch.list("a/b/store").contains("index.sqlite"))  // opened on first need
    _ = try store.statistics()
    let names = Set(scratch.list("a/b/store"))
    let expected: Set = [
      "CACHEDIR.TAG", "config.json", "index.sqlite", "objects", "tmp", "reserve", "sweep.lock",
      "index.lock",
    ]
    #expect(names.subtracting(["index.sqlite-wal", "index.sqlite-shm"]) == expected)
    #expect(try fileStatus(root + "/reserve").allocatedBytes >= 1 << 20)
    #expect(try fileStatus(root).mode & 0o777 == 0o700)
    let tag = try contents(root + "/CACHEDIR.TAG")
    #expect(
      String(decoding: tag.prefix(43), as: UTF8.self)
        == "Signature: 8a477f597d28d172789f06886806bc55")
    let config =
      try JSONSerialization.jsonObject(with: Data(try contents(root + "/config.json")))
      as? [String: Any]
    #expect(config?["format"] as? Int == 1)
  }

  @Test("put then get returns the same bytes; the object is read-only and named by its digest")
  func roundTrip() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let data = Bytes.random(3 * 1024 * 1024 + 17, seed: 1)
    let source = try scratch.write("in.bin", data)
    let put = try store.put(file: source)
    #expect(put.digest == XXH3Hasher.digest(data))
    #expect(put.size == Int64(data.count))
    #expect(put.isDuplicate == false)
    #expect(put.method == .copy)
    let objectPath = try store.path(for: put.digest)
    #expect(objectPath == objectFilePath(scratch["store"], put.digest))
    #expect(try fileStatus(objectPath).mode & 0o777 == 0o444)
    #expect(try store.bytes(for: put.digest) == data)
    let got = try store.materialize(put.digest, at: scratch["out.bin"])
    #expect(try contents(scratch["out.bin"]) == data)
    #expect(got.size == Int64(data.count))
    #expect(scratch.temporaries("store").isEmpty)
  }

  @Test("bytes and streams are stored like files", arguments: [0, 1, 240, 1 << 20, (1 << 20) + 1])
  func bytesAndStreams(size: Int) throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let data = Bytes.random(size, seed: UInt64(size))
    let fromBytes = try store.put(bytes: data)
    let writer = try store.makeWriter()
    var offset = 0
    while offset < data.count {
      let end = min(offset + 100_000, data.count)
      try writer.write(Array(data[offset..<end]))
      offset = end
    }
    let fromWriter = try writer.commit()
    #expect(fromBytes.digest == XXH3Hasher.digest(data))
    #expect(fromWriter.digest == fromBytes.digest)
    #expect(fromWriter.isDuplicate)
    #expect(try store.bytes(for: fromBytes.digest) == data)
  }

  @Test(
    "a second put of the same content is a dedup hit: one object, counted, nothing left in tmp/")
  func dedup() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let data = Bytes.random(100_000, seed: 2)
    let first = try store.put(file: try scratch.write("a", data))
    let second = try store.put(file: try scratch.write("b", data))
    #expect(first.digest == second.digest)
    #expect(!first.isDuplicate && second.isDuplicate)
    let stats = try store.statistics()
    #expect(stats.entries == 1)
    #expect(stats.logicalBytes == 100_000)
    #expect(stats.dedupHits == 1)
    #expect(stats.dedupSavedBytes == 100_000)
    #expect(scratch.temporaries("store").isEmpty)
    #expect(scratch.list("store/objects/\(first.digest.hex.prefix(2))").count == 1)
  }

  @Test("a file whose size matches an object is hashed first: a re-put writes nothing")
  func rePutHashesFirst() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let data = Bytes.random(1_000_000, seed: 11)
    let first = try store.put(file: try scratch.write("a", data))
    let again = try store.put(file: try scratch.write("b", data))
    #expect(again.isDuplicate && again.method == .existing && again.digest == first.digest)
    // Same size, other bytes: hashed first, then stored by the usual path.
    let other = Bytes.random(1_000_000, seed: 12)
    let third = try store.put(file: try scratch.write("c", other))
    #expect(!third.isDuplicate && third.method == .copy)
    #expect(try store.bytes(for: third.digest) == other)
    #expect(try store.statistics().dedupHits == 1)
    #expect(scratch.temporaries("store").isEmpty)
  }

  @Test("a cancelled or dropped writer leaves nothing behind")
  func cancelledWriter() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    do {
      let writer = try store.makeWriter()
      try writer.write([1, 2, 3])
      #expect(scratch.temporaries("store").count == 1)
    }
    #expect(scratch.temporaries("store").isEmpty)
    let writer = try store.makeWriter()
    try writer.write([1, 2, 3])
    writer.cancel()
    #expect(scratch.temporaries("store").isEmpty)
    #expect(try store.entries().isEmpty)
  }

  @Test("eight threads putting the same bytes end with one object and one digest")
  func concurrentPuts() async throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let data = Bytes.random(2_000_000, seed: 3)
    let path = try scratch.write("same.bin", data)
    let results = try await withThrowingTaskGroup(of: PutResult.self) { group in
      for i in 0..<8 {
        group.addTask { i % 2 == 0 ? try store.put(file: path) : try store.put(bytes: data) }
      }
      return try await group.reduce(into: []) { $0.append($1) }
    }
    #expect(Set(results.map(\.digest)).count == 1)
    #expect(results.filter { !$0.isDuplicate }.count == 1)
    #expect(try store.entries().count == 1)
    #expect(try store.statistics().dedupHits == 7)
    #expect(scratch.temporaries("store").isEmpty)
    #expect(try store.bytes(for: results[0].digest) == data)
  }

  @Test(
    "auto mode on a filesystem without clones copies and says why",
    .enabled(if: !TestFilesystems.tempCanClone, "the temp folder's filesystem can clone"))
  func autoFallsBack() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let data = Bytes.random(300_000, seed: 4)
    let digest = try store.put(bytes: data).digest
    let got = try store.materialize(digest, at: scratch["out"])
    #expect(got.method != .clone)
    #expect(got.fallbackReason?.contains("ioctl(FICLONE)") == true)
    #expect(try contents(scratch["out"]) == data)
    // The verdict is remembered for the pair of filesystems.
    let again = try store.materialize(digest, at: scratch["out2"])
    #expect(again.fallbackReason == got.fallbackReason)
  }

  @Test(
    "clone mode fails clearly where clones are impossible, leaving nothing",
    .enabled(if: !TestFilesystems.tempCanClone, "the temp folder's filesystem can clone"))
  func cloneModeFails() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let digest = try store.put(bytes: Bytes.random(10_000, seed: 5)).digest
    #expect {
      try store.materialize(digest, at: scratch["out"], mode: .clone)
    } throws: { error in
      (error as? TroveError)?.code == .cloneUnsupported
        && "\(error)".contains("cannot clone into '\(scratch["out"])'")
    }
    #expect(scratch.list("").filter { $0 != "store" }.isEmpty)
  }

  @Test("copy mode makes an independent verified copy; hardlink mode links the read-only object")
  func copyAndHardlink() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let data = Bytes.random(70_000, seed: 6)
    let digest = try store.put(bytes: data).digest
    let copy = try store.materialize(digest, at: scratch["copy"], mode: .copy)
    #expect(copy.method == .copy)
    #expect(try fileStatus(scratch["copy"]).linkCount == 1)
    let link = try store.materialize(digest, at: scratch["link"], mode: .hardlink)
    #expect(link.method == .hardlink)
    let linked = try fileStatus(scratch["link"])
    #expect(linked.linkCount == 2)
    #expect(linked.inode == (try fileStatus(store.path(for: digest))).inode)
    #expect(linked.mode & 0o777 == 0o444)
    #expect(try contents(scratch["link"]) == data)
  }

  @Test("an existing destination is refused unless replacing; a missing folder is named")
  func destinations() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let digest = try store.put(bytes: Bytes.random(1000, seed: 7)).digest
    try scratch.write("exists", [1, 2, 3])
    #expect {
      try store.materialize(digest, at: scratch["exists"])
    } throws: { ($0 as? TroveError)?.code == .destinationExists }
    #expect(try contents(scratch["exists"]) == [1, 2, 3])
    try store.materialize(digest, at: scratch["exists"], replacing: true)
    #expect(try contents(scratch["exists"]).count == 1000)
    #expect {
      try store.materialize(digest, at: scratch["missing/out"])
    } throws: { error in
      (error as? TroveError)?.code == .destinationDirectoryMissing
        && "\(error)".contains("folder '\(scratch["missing"])' does not exist")
    }
    #expect(scratch.list("").sorted() == ["exists", "store"])
  }

  @Test("unknown digests are misses, not errors of another kind")
  func unknown() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let digest = XXH3Hasher.digest([9, 9, 9])
    #expect(try store.contains(digest) == false)
    #expect(try store.entry(for: digest) == nil)
    #expect(throws: TroveError.self) { try store.path(for: digest) }
    #expect {
      try store.materialize(digest, at: scratch["out"])
    } throws: { ($0 as? TroveError)?.code == .notFound && "\($0)".contains(digest.description) }
    #expect(try store.remove(digest) == false)
  }

  @Test("remove deletes the object and its row; totals follow")
  func remove() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let a = try store.put(bytes: Bytes.random(5000, seed: 8)).digest
    let b = try store.put(bytes: Bytes.random(7000, seed: 9)).digest
    #expect(try store.statistics().logicalBytes == 12000)
    #expect(try store.remove(a))
    #expect(try store.contains(a) == false)
    #expect(try store.entries().map(\.digest) == [b])
    let stats = try store.statistics()
    #expect(stats.entries == 1 && stats.logicalBytes == 7000)
  }

  @Test("the index is rebuilt from the objects when it is lost, and repaired when it lags")
  func rebuild() throws {
    let scratch = try Scratch()
    var digests: [BlobDigest] = []
    do {
      let store = try scratch.store()
      for i in 0..<5 {
        digests.append(try store.put(bytes: Bytes.random(1000 + i, seed: UInt64(i))).digest)
      }
    }
    for suffix in ["", "-wal", "-shm"] {
      try? FileManager.default.removeItem(atPath: scratch["store/index.sqlite" + suffix])
    }
    let store = try scratch.store()
    #expect(Set(try store.entries().map(\.digest)) == Set(digests))
    #expect(try store.statistics().logicalBytes == Int64((0..<5).map { 1000 + $0 }.reduce(0, +)))
    // A file removed behind the index's back: a miss, and the row goes.
    try FileManager.default.removeItem(atPath: try store.path(for: digests[0]))
    #expect(try store.contains(digests[0]) == false)
    #expect(throws: TroveError.self) { try store.materialize(digests[0], at: scratch["x"]) }
    #expect(try store.entries().count == 4)
    #expect(try store.rebuildIndex().isClean)
  }

  @Test("verify finds corrupt objects, orphan files and dangling rows; --repair fixes them")
  func verify() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let good = try store.put(bytes: Bytes.random(10_000, seed: 20)).digest
    let bad = try store.put(bytes: Bytes.random(10_000, seed: 21)).digest
    let orphan = try store.put(bytes: Bytes.random(10_000, seed: 22)).digest
    let dangling = try store.put(bytes: Bytes.random(10_000, seed: 23)).digest
    let badPath = try store.path(for: bad)
    chmod(badPath, 0o644)
    let handle = try #require(FileHandle(forWritingAtPath: badPath))
    handle.write(Data([0, 1, 2]))
    try handle.close()
    try dropRow(orphan, in: store)
    try FileManager.default.removeItem(atPath: try store.path(for: dangling))
    try scratch.write("store/objects/zz-junk", [1])

    let found = try store.verify()
    #expect(found.checkedObjects == 3)
    #expect(found.corrupt == [bad])
    #expect(found.orphanFiles == 1 && found.danglingRows == 1)
    #expect(found.unexpectedFiles == [scratch["store/objects/zz-junk"]])
    #expect(!found.isClean)
    let cli = try CLI.run(["--store", scratch["store"], "verify"])
    #expect(cli.status == 65)
    #expect(cli.out.contains("corrupt: \(bad)"))

    let fixed = try store.verify(repair: true)
    #expect(fixed.repaired && fixed.corrupt == [bad])
    #expect(Set(try store.entries().map(\.digest)) == [good, orphan])
    let again = try store.verify()
    #expect(again.isClean && again.checkedObjects == 2)
    #expect(try CLI.run(["--store", scratch["store"], "verify"]).status == 0)
  }

  @Test("named keys point at digests")
  func keys() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let digest = try store.put(bytes: [1, 2, 3]).digest
    try store.bind(key: "https://example.org/a.tar", to: digest)
    #expect(try store.digest(forKey: "https://example.org/a.tar") == digest)
    #expect(try store.digest(forKey: "other") == nil)
    #expect(try store.unbind(key: "https://example.org/a.tar"))
    #expect(try store.digest(forKey: "https://example.org/a.tar") == nil)
    #expect(throws: TroveError.self) { try store.bind(key: "k", to: XXH3Hasher.digest([7])) }
  }

  @Test("put refuses a missing file and a directory with errors naming them")
  func badSources() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    #expect {
      try store.put(file: scratch["nope"])
    } throws: { error in
      (error as? TroveError)?.code == .sourceMissing
        && "\(error)"
          == "cannot read '\(scratch["nope"])': No such file or directory (open, errno 2)"
    }
    #expect {
      try store.put(file: scratch.path)
    } throws: { ($0 as? TroveError)?.code == .sourceNotFile && "\($0)".contains("is a directory") }
    #expect(scratch.temporaries("store").isEmpty)
  }

  @Test("a corrupted object is never handed out as a copy")
  func corruption() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let digest = try store.put(bytes: Bytes.random(50_000, seed: 10)).digest
    let path = try store.path(for: digest)
    chmod(path, 0o644)
    let handle = try #require(FileHandle(forWritingAtPath: path))
    try handle.seek(toOffset: 1234)
    handle.write(Data([0xFF, 0x00, 0xFF]))
    try handle.close()
    #expect {
      try store.materialize(digest, at: scratch["out"], mode: .copy)
    } throws: { ($0 as? TroveError)?.code == .corruptObject }
    #expect(!FileManager.default.fileExists(atPath: scratch["out"]))
    #expect(scratch.list("").filter { $0.hasPrefix(".trove") }.isEmpty)
    #expect(throws: TroveError.self) { try store.bytes(for: digest) }
  }

  @Test("a store written by a newer format is refused")
  func newerFormat() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    try scratch.write("store/config.json", Array("{\"format\": 99}".utf8))
    #expect {
      try scratch.store()
    } throws: { ($0 as? TroveError)?.code == .unsupportedFormat && "\($0)".contains("format 99") }
  }

  @Test("an index of a newer schema version is refused in one line naming it and both versions")
  func newerIndexSchema() throws {
    let scratch = try Scratch()
    _ = try scratch.store().put(bytes: Bytes.random(500, seed: 3))
    let index = scratch["store/index.sqlite"]
    try SQLiteConnection(path: index, busyTimeoutMilliseconds: 1000).execute(
      "PRAGMA user_version = \(Schema.version + 1)")
    #expect {
      _ = try scratch.store().entries()
    } throws: {
      ($0 as? TroveError)?.code == .unsupportedFormat
        && "\($0)".contains(
          "index '\(index)' has schema version \(Schema.version + 1); this trove understands up to \(Schema.version)"
        )
    }
    // Left as it is, for the newer trove: not set aside, not rebuilt.
    var version: Int64 = 0
    try SQLiteConnection(path: index, busyTimeoutMilliseconds: 1000).query("PRAGMA user_version") {
      version = $0.integer(0)
    }
    #expect(version == Schema.version + 1)
  }

  @Test("an index whose schema version is below 1 is made anew and filled from the objects")
  func indexBelowFirstSchema() throws {
    let scratch = try Scratch()
    let digest = try scratch.store().put(bytes: Bytes.random(500, seed: 4)).digest
    let index = scratch["store/index.sqlite"]
    try SQLiteConnection(path: index, busyTimeoutMilliseconds: 1000).execute(
      "DELETE FROM objects; PRAGMA user_version = -1")
    let store = try scratch.store()
    #expect(try store.entries().map(\.digest) == [digest])
    #expect(try store.statistics().entries == 1)
  }

  @Test(
    "an index made before its version gained a column in place gets it; its keys count as pulled")
  func indexWithoutColumnAddedInPlace() throws {
    let scratch = try Scratch()
    let digest = try scratch.store().put(bytes: Bytes.random(500, seed: 5), key: "k").digest
    let index = scratch["store/index.sqlite"]
    try SQLiteConnection(path: index, busyTimeoutMilliseconds: 1000).execute(
      "ALTER TABLE keys DROP COLUMN pulled")
    let store = try scratch.store()
    #expect(try store.digest(forKey: "k") == digest)
    // A key bound before the column existed is not taken for this store's own.
    #expect(try store.binding(forKey: "k")?.isPulled == true)
    try store.bind(key: "k2", to: digest)
    #expect(try store.digest(forKey: "k2") == digest)
    #expect(try store.binding(forKey: "k2")?.isPulled == false)
  }

  @Test(
    "an index made before keys gained served_by, or before both columns, gets them in place; its keys read as served by themselves",
    arguments: [["served_by"], ["pulled", "served_by"]])
  func indexWithoutServedByAddedInPlace(_ dropped: [String]) throws {
    let scratch = try Scratch()
    let digest = try scratch.store().put(bytes: Bytes.random(500, seed: 6), key: "k").digest
    let index = scratch["store/index.sqlite"]
    let db = try SQLiteConnection(path: index, busyTimeoutMilliseconds: 1000)
    for column in dropped { try db.execute("ALTER TABLE keys DROP COLUMN \(column)") }
    let store = try scratch.store()
    let binding = try #require(try store.binding(forKey: "k"))
    #expect(binding.digest == digest)
    #expect(binding.origin?.servedBy == nil)
    try store.bind(key: "k2", to: digest)
    #expect(try store.digest(forKey: "k2") == digest)
    var columns: Set<String> = []
    try SQLiteConnection(path: index, busyTimeoutMilliseconds: 1000).query(
      "PRAGMA table_info(keys)"
    ) { row in columns.insert(row.text(1)) }
    #expect(columns.isSuperset(of: ["pulled", "served_by"]), "\(columns)")
  }

  @Test(
    "the default location: TROVE_STORE, else XDG_CACHE_HOME if absolute, else HOME, else passwd")
  func defaultLocation() throws {
    #expect(try StoreConfiguration.defaultRoot(environment: ["TROVE_STORE": "/x/y"]) == "/x/y")
    #expect(
      try StoreConfiguration.defaultRoot(environment: ["XDG_CACHE_HOME": "/c/", "HOME": "/h"])
        == "/c/trove")
    // A relative XDG_CACHE_HOME is ignored, as the XDG specification asks.
    #expect(
      try StoreConfiguration.defaultRoot(environment: ["XDG_CACHE_HOME": "c", "HOME": "/h/"])
        == "/h/.cache/trove")
    let home = try #require(getpwuid(getuid())).pointee.pw_dir.map { String(cString: $0) }
    #expect(
      try StoreConfiguration.defaultRoot(environment: ["HOME": ""]) == home! + "/.cache/trove")
    #expect(try StoreConfiguration.defaultRoot(environment: [:]) == home! + "/.cache/trove")
  }
}
