import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// A volume filled by other data: the store stops growing, it never purges
/// itself; evictions for space are measured, bounded and said out loud.
/// On an XFS of its own (`TROVE_TEST_PRESSURE`), filled to the brim.
@Suite(
  "Storage pressure: a full volume never wipes the cache", .serialized,
  .enabled(if: TestFilesystems.pressure != nil, TestFilesystems.pressureMissing))
struct PressureTests {
  /// A store on the pressure volume with one 48 MiB object cloned out
  /// twice (its blocks shared) and four 2 MiB objects, then a filler file
  /// that leaves `free` bytes available. Returns the scratch folder, the
  /// store path and the digests (big one first).
  func crowded(free: Int64) throws -> (Scratch, String, [String]) {
    let scratch = try Scratch(under: TestFilesystems.pressure!)
    let store = scratch["store"]
    var digests: [String] = []
    let big = try scratch.write("big.bin", Bytes.random(48 << 20, seed: 900))
    let put = try CLI.run(["--store", store, "put", big])
    try #require(put.status == 0, "\(put.stderr)")
    digests.append(String(put.out.prefix(39)))
    try FileManager.default.removeItem(atPath: big)
    for copy in ["a", "b"] {
      let get = try CLI.run(["--store", store, "get", "--mode", "clone", digests[0], scratch[copy]])
      try #require(get.status == 0, "\(get.stderr)")
    }
    for i in 0..<4 {
      let put = try CLI.run(
        ["--store", store, "put", "-"], stdin: Bytes.random(2 << 20, seed: UInt64(901 + i)))
      digests.append(String(put.out.prefix(39)))
    }
    let filler = scratch["filler"]
    let available = try freeBytes(scratch.path)
    let fd = open(filler, O_WRONLY | O_CREAT, 0o600)
    defer { close(fd) }
    try #require(posix_fallocate(fd, 0, off_t(available - free)) == 0)
    return (scratch, store, digests)
  }

  @Test("an important put on a volume below min-free keeps every entry it does not need")
  func importantPutKeepsTheCache() throws {
    let (scratch, store, digests) = try crowded(free: 16 << 20)
    let before = try freeBytes(scratch.path)
    // From another filesystem: copied in, so it asks for room.
    let elsewhere = try Scratch()
    let tiny = try elsewhere.write("tiny.txt", Array("hello\n".utf8))
    let put = try CLI.run(["--store", store, "put", "-v", tiny])
    #expect(put.status == 0, "\(put.stderr)")
    for digest in digests {
      #expect(try CLI.run(["--store", store, "has", digest]).status == 0, "\(digest) was evicted")
    }
    // Said out loud, and logged.
    #expect(put.stderr.contains("volume below min-free before a put: removed 0 entries"))
    let stats =
      try JSONSerialization.jsonObject(
        with: Data(try CLI.run(["--store", store, "stats", "--json"]).stdout)) as? [String: Any]
    let pressure = stats?["lastPressureEviction"] as? [String: Any]
    #expect(pressure?["reason"] as? String == "low-space")
    #expect(abs(try freeBytes(scratch.path) - before) < 2 << 20)
  }

  @Test("a put below min-free evicts least recently used entries worth its size, none larger")
  func evictionsAreSizedToThePut() throws {
    let (scratch, store, digests) = try crowded(free: 16 << 20)
    _ = scratch
    let elsewhere = try Scratch()
    let file = try elsewhere.write("incoming.bin", Bytes.random(3 << 20, seed: 915))
    let put = try CLI.run(["--store", store, "put", "-v", file])
    #expect(put.status == 0, "\(put.stderr)")
    #expect(put.stderr.contains("volume below min-free before a put: removed 2 entries (4.0 MiB)"))
    // The 48 MiB object is older than all, but far larger than the put: kept.
    // The two least recently used of the 2 MiB ones made room.
    let present = try digests.map { try CLI.run(["--store", store, "has", $0]).status == 0 }
    #expect(present == [true, false, false, true, true], "\(put.stderr)")
  }

  @Test("an optional put below min-free is skipped and evicts nothing")
  func optionalPutEvictsNothing() throws {
    let (scratch, store, digests) = try crowded(free: 16 << 20)
    let file = try scratch.write("prefetch.bin", Bytes.random(1 << 20, seed: 910))
    let put = try CLI.run(["--store", store, "put", "--optional", file])
    #expect(put.status == 75)
    #expect(put.errorLines.count == 1 && put.stderr.contains("skipped an optional put of"))
    for digest in digests {
      #expect(try CLI.run(["--store", store, "has", digest]).status == 0, "\(digest) was evicted")
    }
  }

  @Test("evictions for space stop after a batch that freed nothing (blocks shared with clones)")
  func evictionStopsWhenNothingIsFreed() throws {
    let scratch = try Scratch(under: TestFilesystems.pressure!)
    let store = scratch["store"]
    // 40 objects cloned in from files that stay: evicting one frees nothing.
    var files: [String] = []
    for i in 0..<40 {
      files.append(try scratch.write("src\(i)", Bytes.random(1 << 20, seed: UInt64(920 + i))))
    }
    try #require(try CLI.run(["--store", store, "put"] + files).status == 0)
    let available = try freeBytes(scratch.path)
    _ = try CLI.run(["--store", store, "config", "set", "min-free", "\(available + (100 << 20))"])
    let elsewhere = try Scratch()
    let incoming = try elsewhere.write("incoming.bin", Bytes.random(20 << 20, seed: 960))
    let put = try CLI.run(["--store", store, "put", "-v", incoming])
    #expect(put.status == 0, "\(put.stderr)")
    let stats = try #require(
      try JSONSerialization.jsonObject(
        with: Data(try CLI.run(["--store", store, "stats", "--json"]).stdout)) as? [String: Any])
    let pressure = try #require(stats["lastPressureEviction"] as? [String: Any])
    // The first batch, one entry, went, measured nothing freed, and the
    // eviction stopped there.
    #expect(pressure["removedEntries"] as? Int == 1)
    #expect((pressure["freedBytes"] as? Int ?? .max) < 1 << 20)
    #expect(stats["entries"] as? Int == 40 - 1 + 1)
  }

  /// Fills the volume of `scratch` to 2 MiB free, then `trove put -` of 8 MiB
  /// into its store through a pipe: a length nobody knows until its end.
  func streamIntoFullVolume(_ scratch: Scratch, seed: UInt64) throws -> CLI.Result {
    let fd = open(scratch["filler"], O_WRONLY | O_CREAT, 0o600)
    defer { close(fd) }
    try #require(posix_fallocate(fd, 0, off_t(try freeBytes(scratch.path) - (2 << 20))) == 0)
    let elsewhere = try Scratch()
    let bytes = try elsewhere.write("stream.bin", Bytes.random(8 << 20, seed: seed))
    return try CLI.run(
      ["--store", scratch["store"], "put", "-v", "-"],
      prefix: ["/bin/sh", "-c", "cat '\(bytes)' | \"$0\" \"$@\""])
  }

  @Test(
    "a stream of unknown length on a full volume where eviction frees nothing: one entry goes, then it fails"
  )
  func streamStopsAfterTheFirstBatchThatFreedNothing() throws {
    let scratch = try Scratch(under: TestFilesystems.pressure!)
    let store = scratch["store"]
    _ = try CLI.run(["--store", store, "config", "set", "min-free", "0"])
    // Four 16 MiB objects cloned in from files that stay: evicting one frees nothing.
    var files: [String] = []
    for i in 0..<4 {
      files.append(try scratch.write("src\(i)", Bytes.random(16 << 20, seed: UInt64(1100 + i))))
    }
    let put = try CLI.run(["--store", store, "put"] + files)
    try #require(put.status == 0, "\(put.stderr)")
    let digests = put.out.split(separator: "\n").map { String($0.prefix(39)) }
    let stream = try streamIntoFullVolume(scratch, seed: 1110)
    let left = try freeBytes(scratch.path)
    #expect(stream.status != 0, "an 8 MiB stream fit, \(left) bytes free after: \(stream.stderr)")
    let present = try digests.filter { try CLI.run(["--store", store, "has", $0]).status == 0 }
    #expect(present.count == 3, "evicted \(4 - present.count) of 4 for a stream that could not fit")
    #expect(scratch.temporaries("store").isEmpty, "\(scratch.temporaries("store"))")
  }

  @Test(
    "a put that alone exceeds the budget is stored and warned about; the rest is trimmed, not wiped"
  )
  func oversizePutKeepsTheRest() throws {
    let scratch = try Scratch(under: TestFilesystems.pressure!)
    let store = scratch["store"]
    _ = try CLI.run(["--store", store, "config", "set", "budget", "1M"])
    // Just under the budget: above its low-water mark.
    var small: [String] = []
    for i in 0..<9 {
      let put = try CLI.run(
        ["--store", store, "put", "-"], stdin: Bytes.random(100_000, seed: UInt64(970 + i)))
      small.append(String(put.out.prefix(39)))
    }
    let elsewhere = try Scratch()
    let big = try elsewhere.write("big.bin", Bytes.random(3 << 20, seed: 980))
    let put = try CLI.run(["--store", store, "put", big])
    #expect(put.status == 0)
    #expect(put.stderr.contains("alone exceeds the store's 1 MB budget"))
    #expect(try CLI.run(["--store", store, "has", String(put.out.prefix(39))]).status == 0)
    // The rest went down to the low-water mark (900 KB) and no further.
    let kept = try small.filter { try CLI.run(["--store", store, "has", $0]).status == 0 }
    #expect(kept.count == 8, "kept \(kept.count) of 9")
    #expect(kept == Array(small.suffix(8)), "the least recently used went")
  }

  @Test("pinned entries above the budget are reported by sweep and stats")
  func pinnedOverBudgetIsSaid() throws {
    let scratch = try Scratch(under: TestFilesystems.pressure!)
    let store = scratch["store"]
    _ = try CLI.run(["--store", store, "config", "set", "budget", "1M"])
    for i in 0..<3 {
      let put = try CLI.run(
        ["--store", store, "put", "-"], stdin: Bytes.random(600_000, seed: UInt64(990 + i)))
      #expect(try CLI.run(["--store", store, "pin", String(put.out.prefix(39))]).status == 0)
    }
    let sweep = try CLI.run(["--store", store, "sweep"])
    #expect(sweep.out.contains("(over budget: 1.7 MiB pinned)"), "\(sweep.out)")
    let stats = try CLI.run(["--store", store, "stats"])
    #expect(stats.out.contains("over budget: 1.7 MiB pinned"), "\(stats.out)")
  }

  @Test("a stream on a full volume evicts past an empty least recently used object")
  func streamEvictsPastAnEmptyObject() throws {
    let scratch = try Scratch(under: TestFilesystems.pressure!)
    let store = scratch["store"]
    _ = try CLI.run(["--store", store, "config", "set", "min-free", "0"])
    // The oldest entry is empty: evicting it frees no block.
    let empty = try CLI.run(["--store", store, "put", "-"], stdin: [])
    try #require(empty.status == 0, "\(empty.stderr)")
    // Four 4 MiB objects written from a pipe: their blocks are their own.
    var digests: [String] = []
    for i in 0..<4 {
      let put = try CLI.run(
        ["--store", store, "put", "-"], stdin: Bytes.random(4 << 20, seed: UInt64(4100 + i)))
      try #require(put.status == 0, "\(put.stderr)")
      digests.append(String(put.out.prefix(39)))
    }
    let stream = try streamIntoFullVolume(scratch, seed: 4200)
    let present = try digests.filter { try CLI.run(["--store", store, "has", $0]).status == 0 }
    #expect(
      stream.status == 0,
      "the stream failed with \(4 - present.count) of 4 evictable objects evicted: \(stream.stderr)"
    )
  }
}
