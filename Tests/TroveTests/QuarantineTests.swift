import Foundation
import Testing

@testable import Trove

/// A flipped byte in a stored object: `get --verify`
/// keeps it from the destination, `get -` from standard output, and any
/// detection moves the object to `quarantine/`, where it is never served.
@Suite("corrupt objects and quarantine")
struct QuarantineTests {
  /// Stores `data` in a new store under `scratch`, then flips one byte
  /// of its object file. Returns the store and the digest.
  func corruptedStore(_ scratch: Scratch, _ data: [UInt8]) throws -> (String, BlobDigest) {
    let store = scratch["store"]
    let put = try CLI.run(["--store", store, "put", "-"], stdin: data)
    #expect(put.status == 0, "\(put.stderr)")
    let digest = XXH3Hasher.digest(data)
    let object = objectFilePath(store, digest)
    #expect(chmod(object, 0o644) == 0)
    let handle = try #require(FileHandle(forUpdatingAtPath: object))
    try handle.seek(toOffset: UInt64(data.count / 2))
    try handle.write(contentsOf: Data([data[data.count / 2] ^ 0x01]))
    try handle.close()
    #expect(chmod(object, 0o444) == 0)
    return (store, digest)
  }

  func quarantined(_ store: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: store + "/quarantine")) ?? []).sorted()
  }

  /// After a detection: the object is in quarantine, not served, reported
  /// by stats; a put of the right bytes stores them again.
  func expectQuarantined(
    _ store: String, _ digest: BlobDigest, _ data: [UInt8],
    sourceLocation: SourceLocation = #_sourceLocation
  ) throws {
    #expect(quarantined(store).count == 1, sourceLocation: sourceLocation)
    #expect(
      try CLI.run(["--store", store, "has", digest.description]).status == 1,
      sourceLocation: sourceLocation)
    let stats = try CLI.run(["--store", store, "stats", "--json"])
    #expect(
      stats.out.contains("\"quarantinedEntries\" : 1"), "\(stats.out)",
      sourceLocation: sourceLocation)
    #expect(stats.out.contains("\"entries\" : 0"), sourceLocation: sourceLocation)
    #expect(try CLI.run(["--store", store, "put", "-"], stdin: data).status == 0)
    let again = try CLI.run(["--store", store, "get", digest.description, "-"])
    let same = again.stdout == data
    #expect(again.status == 0 && same, sourceLocation: sourceLocation)
  }

  @Test(
    "get --verify of a clone: the flipped byte never reaches the destination; the object is quarantined",
    .enabled(if: TestFilesystems.xfs != nil, TestFilesystems.xfsMissing))
  func verifiedClone() throws {
    let scratch = try Scratch(under: TestFilesystems.xfs)
    let data = Bytes.random(3 << 20, seed: 400)
    let (store, digest) = try corruptedStore(scratch, data)
    // Without --verify a clone is the object as it is on disk.
    let plain = try CLI.run([
      "--store", store, "get", "--mode", "clone", digest.description, scratch["plain"],
    ])
    #expect(plain.status == 0)
    #expect(try contents(scratch["plain"]) != data)
    let checked = try CLI.run([
      "--store", store, "get", "--mode", "clone", "--verify", digest.description, scratch["out"],
    ])
    #expect(checked.status == 65, "\(checked.stderr)")
    #expect(
      checked.errorLines.count == 1 && checked.stderr.contains("quarantine"), "\(checked.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["out"]))
    #expect(scratch.list("").filter { $0.hasPrefix(".trove-") }.isEmpty, "no temporary file left")
    try expectQuarantined(store, digest, data)
  }

  @Test("get --verify of a hard link fails and quarantines; a plain copy always checks")
  func verifiedHardLinkAndCopy() throws {
    let data = Bytes.random(200_000, seed: 401)
    for mode in ["hardlink", "copy"] {
      let scratch = try Scratch()
      let (store, digest) = try corruptedStore(scratch, data)
      let arguments =
        ["--store", store, "get", "--mode", mode] + (mode == "hardlink" ? ["--verify"] : [])
      let get = try CLI.run(arguments + [digest.description, scratch["out"]])
      #expect(get.status == 65, "\(mode): \(get.stderr)")
      #expect(!FileManager.default.fileExists(atPath: scratch["out"]), "\(mode)")
      try expectQuarantined(store, digest, data)
    }
  }

  @Test("get - of a small corrupt object writes nothing to standard output")
  func stdoutChecksFirst() throws {
    let scratch = try Scratch()
    let data = Bytes.random(1 << 20, seed: 402)
    let (store, digest) = try corruptedStore(scratch, data)
    let get = try CLI.run(["--store", store, "get", digest.description, "-"])
    #expect(get.status == 65, "\(get.stderr)")
    #expect(get.stdout.isEmpty, "\(get.stdout.count) bytes written before the failure")
    try expectQuarantined(store, digest, data)
  }

  @Test("verify --repair moves a corrupt object to quarantine instead of deleting it")
  func verifyQuarantines() throws {
    let scratch = try Scratch()
    let data = Bytes.random(100_000, seed: 403)
    let (store, digest) = try corruptedStore(scratch, data)
    let verify = try CLI.run(["--store", store, "verify"])
    #expect(verify.status == 65 && verify.out.contains("corrupt: \(digest)"))
    #expect(quarantined(store).isEmpty, "verify alone changes nothing")
    let repair = try CLI.run(["--store", store, "verify", "--repair"])
    #expect(repair.status == 0 && repair.out.contains("(moved to quarantine/)"), "\(repair.out)")
    let kept = try #require(quarantined(store).first)
    let bytes = try contents(store + "/quarantine/" + kept)
    #expect(bytes.count == data.count && bytes != data, "the bad bytes are kept for inspection")
    try expectQuarantined(store, digest, data)
    #expect(try CLI.run(["--store", store, "verify"]).status == 0)
  }

  @Test("sweeps remove a quarantined entry 30 days after it was moved there, not before")
  func quarantineExpires() throws {
    let scratch = try Scratch()
    let data = Bytes.random(50_000, seed: 404)
    let (store, digest) = try corruptedStore(scratch, data)
    #expect(try CLI.run(["--store", store, "get", digest.description, "-"]).status == 65)
    #expect(quarantined(store).count == 1)
    let opened = try Store(StoreConfiguration(root: store))
    let day: Int64 = 86_400 * 1_000_000_000
    let now = currentTimeNanoseconds()
    _ = opened.removeStaleTemporaries(olderThan: 3600, dryRun: false, now: now + 29 * day)
    #expect(quarantined(store).count == 1, "kept for 30 days")
    let swept = opened.removeStaleTemporaries(olderThan: 3600, dryRun: false, now: now + 31 * day)
    #expect(quarantined(store).isEmpty && swept.count == 1 && swept.failures == 0)
    #expect(try opened.statistics().quarantinedEntries == 0)
  }
  @Test("verify counts a corrupt file the index does not know once: as corrupt")
  func corruptOrphanCountedOnce() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", [1, 2, 3])
    #expect(try CLI.run(["--store", store, "put", file]).status == 0)
    let hex = String(repeating: "ab", count: 16)
    try FileManager.default.createDirectory(
      atPath: store + "/objects/ab", withIntermediateDirectories: true)
    try scratch.write("store/objects/ab/" + hex, Array("junk".utf8))
    for repair in [false, true] {
      let run = try CLI.run(["--store", store, "verify", "--json"] + (repair ? ["--repair"] : []))
      let report = try #require(
        try JSONSerialization.jsonObject(with: Data(run.stdout)) as? [String: Any])
      #expect((report["corrupt"] as? [String]) == ["xxh128:" + hex], "repair \(repair)")
      #expect(report["orphanFiles"] as? Int == 0, "repair \(repair): \(run.out)")
    }
    // An orphan that is intact is still one orphan.
    try FileManager.default.removeItem(atPath: store + "/index.sqlite")
    let rebuilt = try CLI.run(["--store", store, "verify"])
    #expect(
      rebuilt.stderr.contains("rebuilt from the objects: 1 object, 0 pins and 0 keys restored"),
      "\(rebuilt.stderr)")
  }

}
