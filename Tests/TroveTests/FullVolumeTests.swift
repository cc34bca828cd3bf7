import Foundation
import Testing

@testable import Trove

/// A volume filled to its last block: the store can still free
/// the space it holds. Run on 16 MiB ext4 volumes with 4 KiB blocks (the
/// index in WAL mode) and 1 KiB blocks (a persistent rollback journal).
@Suite(
  "full volumes", .serialized,
  .enabled(if: !TestFilesystems.full.isEmpty, TestFilesystems.fullMissing))
struct FullVolumeTests {
  /// Three 2 MiB objects in a new store on `volume`, then the volume
  /// filled with a file until the kernel says ENOSPC. Returns the store's
  /// path and the digests.
  func fullStore(on volume: String, _ scratch: Scratch) throws -> (String, [BlobDigest]) {
    let store = scratch["store"]
    let inputs = try Scratch()  // off the volume: only the store and the filler take room
    var digests: [BlobDigest] = []
    for i in 0..<3 {
      let data = Bytes.random(2 << 20, seed: UInt64(300 + i))
      let put = try CLI.run(["--store", store, "put", try inputs.write("in\(i)", data)])
      #expect(put.status == 0, "\(put.stderr)")
      digests.append(XXH3Hasher.digest(data))
    }
    #expect(try fileStatus(store + "/reserve").size == 1 << 20, "the ballast is there")
    try fill(volume)
    return (store, digests)
  }

  /// Writes zeros to `volume/fill` until the volume has no block left.
  /// Again after each pass: ext4 gives a file's unused preallocated blocks
  /// back when it is closed, and frees deleted files' blocks (the last
  /// test's) only when its journal commits, which `sync` forces.
  func fill(_ volume: String) throws {
    let block = [UInt8](repeating: 0, count: 4096)
    sync()
    for _ in 0..<20 {
      let fd = open(volume + "/fill", O_WRONLY | O_CREAT | O_APPEND, 0o644)
      #expect(fd >= 0)
      for size in [4096, 512] {
        while block.withUnsafeBytes({ write(fd, $0.baseAddress, size) }) > 0 {}
      }
      #expect(errno == ENOSPC)
      close(fd)
      sync()
      if try freeBytes(volume) < 4096 { break }
    }
    // Full: a write just failed with ENOSPC; what statfs still counts as
    // free (a block or two ext4 keeps for its own allocations) is no room.
    let left = try freeBytes(volume)
    #expect(left < 64 << 10, "the volume is full: \(left) bytes left")
  }

  /// Runs `body` on each volume with a fresh scratch folder, and empties
  /// the volume afterwards.
  func onEachVolume(_ body: (String, Scratch) throws -> Void) throws {
    for volume in TestFilesystems.full {
      let scratch = try Scratch(under: volume)
      defer { try? FileManager.default.removeItem(atPath: volume + "/fill") }
      try body(volume, scratch)
    }
  }

  @Test("rm on a 100% full volume succeeds and frees the object's blocks")
  func removeOnFullVolume() throws {
    try onEachVolume { volume, scratch in
      let (store, digests) = try fullStore(on: volume, scratch)
      let rm = try CLI.run(["--store", store, "rm", digests[0].description])
      #expect(rm.status == 0, "\(volume): \(rm.stderr)")
      #expect(try CLI.run(["--store", store, "has", digests[0].description]).status == 1)
      #expect(try freeBytes(volume) >= 1 << 20, "\(volume)")
      try auditStore(store)
    }
  }

  @Test("sweep --budget 0 on a 100% full volume succeeds and empties the store")
  func sweepOnFullVolume() throws {
    try onEachVolume { volume, scratch in
      let (store, digests) = try fullStore(on: volume, scratch)
      let sweep = try CLI.run(["--store", store, "sweep", "--budget", "0"])
      #expect(sweep.status == 0, "\(volume): \(sweep.stderr)")
      for digest in digests {
        #expect(try CLI.run(["--store", store, "has", digest.description]).status == 1)
      }
      try auditStore(store)
    }
  }

  @Test("an important put on a 100% full volume evicts and succeeds")
  func putOnFullVolume() throws {
    try onEachVolume { volume, scratch in
      let (store, _) = try fullStore(on: volume, scratch)
      let data = Bytes.random(300_000, seed: 310)
      let put = try CLI.run(["--store", store, "put", "-"], stdin: data)
      #expect(put.status == 0, "\(volume): \(put.stderr)")
      let digest = XXH3Hasher.digest(data)
      let get = try CLI.run(["--store", store, "get", digest.description, "-"])
      let same = get.stdout == data  // not in #expect: it would print 300 KB twice
      #expect(same, "\(volume)")
      try auditStore(store)
    }
  }

  @Test(
    "a put of many files that fills the volume partway: each object whole or absent, each failure named"
  )
  func batchFillsVolume() throws {
    try onEachVolume { volume, scratch in
      let store = scratch["store"]
      let inputs = try Scratch()  // off the volume
      // 19 MiB of distinct files into an empty store on a 16 MiB volume:
      // nothing to evict, so what finds no room fails, named, and leaves
      // nothing behind.
      var paths: [String] = []
      var contents: [String: [UInt8]] = [:]
      for i in 0..<30 {
        let data = Bytes.random(i % 2 == 0 ? 1 << 20 : 300_000, seed: UInt64(400 + i))
        let path = try inputs.write("in\(i)", data)
        paths.append(path)
        contents[path] = data
      }
      let put = try CLI.run(["--store", store, "put", "--json"] + paths)
      #expect(put.status != 0, "\(volume): the volume cannot hold every file")
      let records = try #require(
        try JSONSerialization.jsonObject(with: Data(put.stdout)) as? [[String: Any]])
      #expect(records.map { $0["name"] as? String } == paths, "one record per input, in order")
      var stored = 0
      for record in records {
        let path = try #require(record["name"] as? String)
        let digest = XXH3Hasher.digest(contents[path]!)
        if let error = record["error"] as? String {
          #expect(error.contains(path), "\(volume): a failure names its input: \(error)")
          #expect(put.stderr.contains(path), "\(volume): and says so on stderr")
          let has = try CLI.run(["--store", store, "has", digest.description])
          #expect(has.status == 1, "\(volume): a failed input's object is absent")
        } else {
          #expect(record["digest"] as? String == digest.description)
          let get = try CLI.run(["--store", store, "get", digest.description, "-"])
          let same = get.stdout == contents[path]!  // not in #expect: megabytes
          #expect(same, "\(volume): a stored object is whole")
          stored += 1
        }
      }
      #expect(stored < paths.count, "\(volume): \(stored) of \(paths.count) stored")
      #expect(scratch.temporaries("store").isEmpty, "\(volume): nothing partial left in tmp/")
      try auditStore(store)
    }
  }

  /// Fills `volume` to its last block, then gives `bytes` back by cutting
  /// the filler short: a volume with that much room left.
  func fill(_ volume: String, leaving bytes: Int64) throws {
    try fill(volume)
    let size = try fileStatus(volume + "/fill").size
    #expect(truncate(volume + "/fill", off_t(max(0, size - bytes))) == 0)
    sync()
  }

  @Test(
    "a put of many files onto a nearly full volume: the files that fit are stored, the others named, nothing partial"
  )
  func groupOnNearlyFullVolume() throws {
    try onEachVolume { volume, scratch in
      let store = scratch["store"]
      _ = try Store(StoreConfiguration(root: store))  // made, with its ballast
      let inputs = try Scratch()  // off the volume
      // 24 distinct files of 256 KiB (6 MiB), then 100 of 4 KiB, into an
      // empty store with 3 MiB left: one group, whose files fill the volume
      // to its last blocks as they are written (the small ones fill what
      // the large ones leave), and whose index transaction then finds no
      // room for its journal.
      var paths: [String] = []
      var contents: [String: [UInt8]] = [:]
      for i in 0..<124 {
        let data = Bytes.random(i < 24 ? 256 << 10 : 4096, seed: UInt64(600 + i))
        let path = try inputs.write("in\(i)", data)
        paths.append(path)
        contents[path] = data
      }
      try fill(volume, leaving: 3 << 20)
      let put = try CLI.run(["--store", store, "put"] + paths)
      #expect(put.status != 0, "\(volume): the volume cannot hold every file")
      let printed = Dictionary(
        put.out.split(separator: "\n").map { line in
          let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
          return (String(parts.last ?? ""), String(parts.first ?? ""))
        }, uniquingKeysWith: { a, _ in a })
      var stored: Set<String> = []
      for path in paths {
        let digest = XXH3Hasher.digest(contents[path]!)
        if let said = printed[path] {
          #expect(said == digest.description, "\(volume): \(path) printed \(said)")
          let get = try CLI.run(["--store", store, "get", digest.description, "-"])
          let same = get.stdout == contents[path]!  // not in #expect: 256 KiB
          #expect(same, "\(volume): a stored object is whole")
          stored.insert(digest.hex)
        } else {
          let lines = put.errorLines.filter { $0.contains("'\(path)'") }
          #expect(lines.count == 1, "\(volume): one line names \(path): \(put.stderr)")
          let has = try CLI.run(["--store", store, "has", digest.description])
          #expect(has.status == 1, "\(volume): a failed input's object is absent")
        }
      }
      #expect(put.errorLines.count == paths.count - stored.count, "\(volume): \(put.stderr)")
      // About 3 MiB of room: most of the large files that fit are stored,
      // not one or none.
      #expect(stored.count >= 8, "\(volume): only \(stored.count) of \(paths.count) stored")
      #expect(stored.count < paths.count, "\(volume): \(stored.count) of \(paths.count) stored")
      #expect(scratch.temporaries("store").isEmpty, "\(volume): nothing partial left in tmp/")
      let files = try FileManager.default.subpathsOfDirectory(atPath: store + "/objects")
        .filter { $0.contains("/") }
        .map { String($0.split(separator: "/").last!) }
      #expect(Set(files) == stored, "\(volume): objects/ holds exactly what was stored")
      try auditStore(store)
    }
  }

  /// Every object's bytes hash to its name, and the index agrees.
  func auditStore(_ store: String) throws {
    let verify = try CLI.run(["--store", store, "verify"])
    #expect(verify.status == 0, "\(verify.out) \(verify.stderr)")
  }
}
