import Foundation
import Synchronization
import Testing

@testable import Trove

/// The trace (`TROVE_DEBUG=FILE`, ``StoreConfiguration/trace``): one line
/// per decision at the store's seams, saying what and why, so a user can
/// tell why an object was evicted or a URL downloaded again.
@Suite("trace of the store's decisions")
struct TraceTests {
  /// The lines of the trace file at `path`, split into their fields.
  static func lines(_ path: String) throws -> [[String]] {
    let text = try String(contentsOfFile: path, encoding: .utf8)
    #expect(text.hasSuffix("\n"))
    return text.split(separator: "\n").map {
      $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
    }
  }

  /// The digest `trove put` printed for `file`.
  static func digest(_ put: CLI.Result, _ file: String) throws -> String {
    let line = try #require(put.out.split(separator: "\n").first { $0.hasSuffix("  " + file) })
    return String(line.prefix { $0 != " " })
  }

  @Test("TROVE_DEBUG=FILE: a put over the budget traces the eviction, saying why, one line each")
  func evictionSaysWhy() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let log = scratch["trace.log"]
    #expect(try CLI.run(["--store", store, "config", "set", "budget", "250K"]).status == 0)
    var digests: [String] = []
    for i in 0..<3 {
      let file = try scratch.write("in-\(i)", Bytes.random(100_000, seed: UInt64(4100 + i)))
      let put = try CLI.run(["--store", store, "put", file], environment: ["TROVE_DEBUG": log])
      #expect(put.status == 0, "\(put.stderr)")
      digests.append(try Self.digest(put, file))
      usleep(20_000)  // distinct last accesses: the first is the least recently used
    }
    let lines = try Self.lines(log)
    for fields in lines {
      #expect(fields.count == 6, "\(fields)")
      #expect(Int32(fields[1]) != nil && TraceEvent.Seam(rawValue: fields[2]) != nil, "\(fields)")
    }
    let evicted = try #require(
      lines.first { $0[2] == "remove" && $0[3].hasPrefix("evicted \(digests[0]) (") })
    #expect(evicted[4].contains("least recently used"), "\(evicted)")
    #expect(evicted[4].contains("over the budget of"), "\(evicted)")
    #expect(evicted[4].contains("after a put"), "\(evicted)")
    #expect(!lines.contains { $0[3].hasPrefix("evicted \(digests[2])") })
    #expect(lines.contains { $0[2] == "remove" && $0[3].hasPrefix("sweep (over-budget) removed") })
    // rm says it was asked.
    let rm = try CLI.run(["--store", store, "rm", digests[2]], environment: ["TROVE_DEBUG": log])
    #expect(rm.status == 0, "\(rm.stderr)")
    let removed = try #require(try Self.lines(log).first { $0[3] == "removed \(digests[2])" })
    #expect(removed[2] == "remove" && removed[4] == "asked to remove it")
  }

  @Test(
    "TROVE_DEBUG=FILE: a fetch that downloads again says the cached copy was stale and changed",
    .enabled(if: Nginx.executable != nil, Nginx.missing))
  func fetchAgainSaysWhy() throws {
    let nginx = try Nginx()
    let scratch = try Scratch()
    let store = scratch["store"]
    let log = scratch["trace.log"]
    _ = try nginx.files.write("tool.tgz", Bytes.random(20_000, seed: 4201))
    let url = nginx.url("/tool.tgz")
    let first = try CLI.run(["--store", store, "fetch", url], environment: ["TROVE_DEBUG": log])
    #expect(first.status == 0, "\(first.stderr)")
    // The publisher replaces the file; nginx gave no max-age: stale at once.
    _ = try nginx.files.write("tool.tgz", Bytes.random(30_000, seed: 4202))
    let second = try CLI.run(["--store", store, "fetch", url], environment: ["TROVE_DEBUG": log])
    #expect(second.status == 0, "\(second.stderr)")
    let fetches = try Self.lines(log).filter { $0[2] == "fetch" }
    #expect(fetches.count == 2, "\(fetches)")
    #expect(fetches.allSatisfy { $0[3].hasPrefix("downloaded \(url) as xxh128:") }, "\(fetches)")
    #expect(fetches.first?[4].hasPrefix("not in the store") == true, "\(fetches)")
    let again = try #require(fetches.last)
    #expect(again[4].contains("stale: the server gave it no max-age or Expires"), "\(again)")
    #expect(again[4].contains("asked with its validator"), "\(again)")
    #expect(again[4].contains("the server sent a new body"), "\(again)")
    #expect(again[5].hasSuffix("ms"), "\(again)")
    // Unchanged, the next one is revalidated, and says so.
    let third = try CLI.run(["--store", store, "fetch", url], environment: ["TROVE_DEBUG": log])
    #expect(third.status == 0, "\(third.stderr)")
    let last = try #require(try Self.lines(log).last { $0[2] == "fetch" })
    #expect(last[3].hasPrefix("revalidated \(url)"), "\(last)")
    #expect(last[4].hasSuffix("the server answered 304 Not Modified"), "\(last)")
  }

  @Test("without TROVE_DEBUG nothing is traced; a file that cannot be opened is a warning")
  func offByDefault() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("in", Bytes.random(1000, seed: 4301))
    let before = try FileManager.default.contentsOfDirectory(atPath: scratch.path).sorted()
    #expect(try CLI.run(["--store", store, "put", file]).status == 0)
    let empty = try CLI.run(["--store", store, "ls"], environment: ["TROVE_DEBUG": ""])
    #expect(empty.stderr == "", "\(empty.stderr)")
    let after = try FileManager.default.contentsOfDirectory(atPath: scratch.path).sorted()
    #expect(after == (before + ["store"]).sorted())
    let bad = scratch["no-such-folder/trace.log"]
    let put = try CLI.run(["--store", store, "put", file], environment: ["TROVE_DEBUG": bad])
    #expect(put.status == 0, "\(put.stderr)")
    #expect(
      put.stderr.contains("trove: warning: TROVE_DEBUG: cannot open trace file '\(bad)'"),
      "\(put.stderr)")
    #expect(!FileManager.default.fileExists(atPath: bad))
    // The library: no hook, nothing enabled.
    #expect(try !Store(StoreConfiguration(root: store)).trace.isEnabled)
  }

  @Test("processes tracing to one file at once each add whole lines")
  func processesAppendWholeLines() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let log = scratch["trace.log"]
    #expect(try CLI.run(["--store", store, "put", "-"], stdin: [1]).status == 0)
    let names = (0..<300).map {
      XXH3Hasher.digest([UInt8($0 % 256), UInt8($0 / 256), 7]).description
    }
    let running = try (0..<4).map { i in
      try Spawned(
        executable: "/usr/bin/env",
        ["TROVE_DEBUG=\(log)", CLI.executable, "--store", store, "rm"] + names,
        io: scratch["rm-\(i)"])
    }
    for process in running { #expect(try process.wait().status == 1) }
    let lines = try Self.lines(log)
    #expect(lines.count == 4 * (names.count + 1))
    #expect(lines.allSatisfy { $0.count == 6 && $0[2] == "remove" }, "\(lines.prefix(3))")
    #expect(Set(lines.map(\.[1])).count == 4)
  }

  @Test("the library's hook receives each decision as an event: removal, eviction and why")
  func libraryHook() throws {
    let scratch = try Scratch()
    let events = Mutex<[TraceEvent]>([])
    let store = try Store(
      StoreConfiguration(
        root: scratch["store"], trace: { event in events.withLock { $0.append(event) } }))
    let kept = try store.put(bytes: Bytes.random(10_000, seed: 4401)).digest
    let gone = try store.put(bytes: Bytes.random(10_000, seed: 4402)).digest
    #expect(try store.remove(gone))
    let report = try store.sweep(SweepOptions(budget: 0))
    #expect(report.evictedEntries == 1)
    let seen = events.withLock { $0 }
    let removed = try #require(seen.first { $0.what == "removed \(gone)" })
    #expect(removed.seam == .remove && removed.why == "asked to remove it")
    #expect(removed.processID == getpid() && removed.duration != nil)
    let evicted = try #require(seen.first { $0.what.hasPrefix("evicted \(kept) (") })
    #expect(evicted.seam == .remove && evicted.why.contains("over the budget of 0 B"))
    let line = evicted.description.split(separator: "\t", omittingEmptySubsequences: false)
    #expect(line.count == 6 && line[2] == "remove" && line[5] == "-")
  }

  @Test("the publish seam: each object stored or found stored, alone or in a group, and why")
  func publishSaysWhy() throws {
    let scratch = try Scratch()
    let events = Mutex<[TraceEvent]>([])
    let store = try Store(
      StoreConfiguration(
        root: scratch["store"], trace: { event in events.withLock { $0.append(event) } }))
    let bytes = Bytes.random(10_000, seed: 4403)
    let first = try store.put(bytes: bytes, key: "k").digest
    _ = try store.put(bytes: bytes)
    let files = try (0..<2).map { try scratch.write("same\($0)", Bytes.random(9_000, seed: 4404)) }
    _ = try store.put(files: files)
    let published = events.withLock { $0 }.filter { $0.seam == .publish }
    #expect(published.count == 4, "\(published)")
    let stored = try #require(published.first { $0.what.hasPrefix("stored \(first) (9.8 KiB") })
    #expect(stored.why == "new bytes, published alone, key 'k' bound" && stored.duration != nil)
    #expect(published[1].what == "dedup hit on \(first)")
    #expect(published[1].why == "hashed first: the store holds these bytes already")
    #expect(published[2].why == "new bytes, published in a group of 2")
    #expect(published[3].why == "same bytes as an earlier input of the group")
  }
}
