import Foundation
import Testing

@testable import Trove

/// Pulling a new version of a large blob from another Trove or a remote
/// that keeps chunk manifests, when the store holds an earlier version:
/// only the missing chunks cross the network, the whole object is checked,
/// and anything wrong leaves nothing (the blob is pulled whole, or not at
/// all).
@Suite("chunked pulls between Troves")
struct ChunkedPullTests {
  static let old = Bytes.random(12 << 20, seed: 3601)
  static let new = BlockSharingTests.edited(
    old, at: [2_000_000, 7_000_000], count: 500, seed: 3602)

  /// `remote pull --json` of `digest` into `store`: the one record.
  static func pull(_ store: String, _ digest: BlobDigest) throws -> [String: Any] {
    let run = try CLI.run(["--store", store, "remote", "pull", "--json", digest.description])
    let records = try JSONSerialization.jsonObject(with: Data(run.stdout)) as? [[String: Any]]
    return records?.first ?? ["status": run.status, "stderr": run.stderr]
  }

  /// Puts `bytes` into `store` through a pipe (the stream path, which
  /// records the manifest).
  static func put(_ store: String, _ bytes: [UInt8]) throws {
    let run = try CLI.run(["--store", store, "put", "-"], stdin: bytes)
    #expect(run.status == 0, "\(run.stderr)")
  }

  @Test(
    "from a trove serve peer, a store holding the old version pulls only the new one's changed chunks, and shares the rest's blocks"
  )
  func pullFromAServePeer() throws {
    let scratch = try Scratch(under: TestFilesystems.xfs)
    let peer = scratch["peer"]
    let local = scratch["local"]
    try Self.put(peer, Self.old)
    // The peer's new version came by a clone put: it has no manifest until
    // one is asked for, when the server cuts it from the bytes.
    let file = try scratch.write("new.bin", Self.new)
    try trove(peer, ["put", file])
    try Self.put(local, Self.old)
    let server = try TroveServe(store: peer)
    try trove(local, ["remote", "add", "peer", server.url, "--read-only"])
    let digest = XXH3Hasher.digest(Self.new)
    let pulled = try Self.pull(local, digest)
    #expect(pulled["outcome"] as? String == "pulled", "\(pulled)")
    let transferred = pulled["transferredBytes"] as? Int ?? Int.max
    // The manifest, the signatures of the two edited chunks' blocks, and
    // the blocks the edits touched: not a chunk.
    #expect(transferred > 0 && transferred <= 48 << 10, "\(pulled)")
    #expect(try contents(objectFilePath(local, digest)) == Self.new)
    let log = server.accessLog()
    #expect(log.contains { $0.contains(".sums ") && $0.contains(" 200 ") }, "\(log)")
    #expect(log.contains { $0.contains(".bytes ") && $0.contains(" 200 ") }, "\(log)")
    if TestFilesystems.xfs != nil {
      // The unchanged chunks lie at the same offsets: cloned, not written.
      let cloned = pulled["clonedBytes"] as? Int ?? -1
      #expect(cloned >= Self.new.count - (1 << 20), "\(pulled)")
      #expect(
        try Int(extents(objectFilePath(local, digest)).sharedBytes) >= Self.new.count - (1 << 20))
    }
    let verify = try trove(local, ["verify"])
    #expect(verify.status == 0)
  }

  @Test(
    "from a trove serve peer, chunks changed by an insertion and a few bytes in place move only the blocks around the changes: the rest found in the old chunks, shifted or not"
  )
  func pullsOnlyTheChangedBlocks() throws {
    let scratch = try Scratch()
    let (peer, local) = (scratch["peer"], scratch["local"])
    var new = Self.old
    new.replaceSubrange(9_000_000..<9_000_007, with: Bytes.random(7, seed: 3604))
    new.insert(contentsOf: Bytes.random(100, seed: 3603), at: 5_000_000)
    try Self.put(peer, new)
    try Self.put(local, Self.old)
    let server = try TroveServe(store: peer)
    try trove(local, ["remote", "add", "peer", server.url, "--read-only"])
    let digest = XXH3Hasher.digest(new)
    let pulled = try Self.pull(local, digest)
    #expect(pulled["outcome"] as? String == "pulled", "\(pulled)")
    // The manifest (4 KiB), the changed chunks' signatures (12 bytes a KiB)
    // and two or three blocks at each change.
    let transferred = pulled["transferredBytes"] as? Int ?? Int.max
    #expect(transferred > 0 && transferred <= 24 << 10, "\(pulled)")
    #expect(try contents(objectFilePath(local, digest)) == new)
    #expect(try trove(local, ["verify"]).status == 0)
  }

  @Test(
    "a trove serve peer refuses lists of blocks or ranges that are malformed, out of order or beyond the object, in one line"
  )
  func servedListsAreChecked() throws {
    let scratch = try Scratch()
    let peer = scratch["peer"]
    try Self.put(peer, Self.old)
    let server = try TroveServe(store: peer)
    let digest = XXH3Hasher.digest(Self.old)
    let base = server.url(RemoteNames.manifestPath(digest))
    let sums = try curl([base + ".sums?blocks=0-1,5-5"])
    let block = BlockSums.blockSize
    let expected = Self.old.withUnsafeBytes {
      BlockSums.encode(
        BlockSums.entries(ofBlocksIn: UnsafeRawBufferPointer(rebasing: $0[0..<(2 * block)]))
          + BlockSums.entries(
            ofBlocksIn: UnsafeRawBufferPointer(rebasing: $0[(5 * block)..<(6 * block)])))
    }
    #expect(
      sums.status == 200 && sums.body == expected,
      "\(sums.status) \(String(decoding: sums.body.prefix(200), as: UTF8.self))")
    let bytes = try curl([base + ".bytes?ranges=10-19,100-104"])
    #expect(bytes.status == 200 && bytes.body == Array(Self.old[10..<20] + Self.old[100..<105]))
    for query in [
      ".sums?blocks=5-3", ".sums?blocks=0-1,1-2",
      ".sums?blocks=\(Self.old.count / block)-\(Self.old.count / block)",
      ".sums?blocks=x-1", ".bytes?ranges=\(Self.old.count - 10)-\(Self.old.count)",
      ".bytes?ranges=0-\(BlockSums.maximumRangeBytes)", ".bytes?ranges=-5",
      ".bytes",
    ] {
      let run = try curl([base + query])
      let answer = String(decoding: run.body, as: UTF8.self)
      #expect(run.status == 404 || run.status == 400, "\(query): \(run.status) \(answer)")
      #expect(answer.split(separator: "\n").count == 1, "\(query): \(answer)")
    }
  }

  @Test(
    "on XFS an earlier version changed on disk passes its changed blocks into the clone: the whole-object check refuses it and the blob is pulled whole",
    .enabled(if: TestFilesystems.xfs != nil, TestFilesystems.xfsMissing))
  func aTamperedVersionIsNotCloned() throws {
    let scratch = try Scratch(under: TestFilesystems.xfs)
    let peer = scratch["peer"]
    let local = scratch["local"]
    try Self.put(peer, Self.new)
    try Self.put(local, Self.old)
    // Someone changes a block of the stored old version, inside a chunk
    // the new one shares, keeping its length and its place in the index.
    let oldPath = objectFilePath(local, XXH3Hasher.digest(Self.old))
    let handle = try #require(FileHandle(forUpdatingAtPath: oldPath), "\(oldPath)")
    try handle.seek(toOffset: 4_000_000)
    try handle.write(contentsOf: Data(repeating: 0x5A, count: 8192))
    try handle.close()
    let server = try TroveServe(store: peer)
    try trove(local, ["remote", "add", "peer", server.url, "--read-only"])
    let digest = XXH3Hasher.digest(Self.new)
    let pulled = try Self.pull(local, digest)
    #expect(pulled["outcome"] as? String == "pulled", "\(pulled)")
    // The chunked attempt asked for ranges, failed the check, and the
    // whole blob came after it.
    #expect(pulled["transferredBytes"] as? Int == Self.new.count, "\(pulled)")
    #expect(server.accessLog().contains { $0.contains(".bytes ") && $0.contains(" 200 ") })
    #expect(try contents(objectFilePath(local, digest)) == Self.new)
    #expect(scratch.temporaries("local").isEmpty, "\(scratch.temporaries("local"))")
  }

  @Test("a remote without manifests, or a store with no earlier version, pulls the blob whole")
  func pullsWholeWithoutManifestsOrVersions() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let writer = scratch["writer"]
    let local = scratch["local"]
    let fresh = scratch["fresh"]
    for store in [writer, local, fresh] {
      try trove(store, ["remote", "add", "team", nginx.url("/team"), "--write", "off"])
    }
    try Self.put(writer, Self.new)
    let digest = XXH3Hasher.digest(Self.new)
    try trove(writer, ["remote", "push", digest.description])
    let manifest = nginx.files["team/" + RemoteNames.manifestPath(digest)]
    #expect(FileManager.default.fileExists(atPath: manifest), "the push wrote no manifest")
    // A store with no earlier version: whole.
    let whole = try Self.pull(fresh, digest)
    #expect(whole["transferredBytes"] as? Int == Self.new.count, "\(whole)")
    // The manifest gone (a remote written by an older Trove): whole.
    try FileManager.default.removeItem(atPath: manifest)
    try Self.put(local, Self.old)
    let fallback = try Self.pull(local, digest)
    #expect(fallback["transferredBytes"] as? Int == Self.new.count, "\(fallback)")
    #expect(try contents(objectFilePath(local, digest)) == Self.new)
  }

  @Test(
    "a remote whose blob lies in a chunk fails the whole-object check: nothing stored, no leftovers, exit 65"
  )
  func aLyingRemoteLeavesNothing() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let writer = scratch["writer"]
    let local = scratch["local"]
    for store in [writer, local] {
      try trove(store, ["remote", "add", "team", nginx.url("/team"), "--write", "off"])
    }
    try Self.put(writer, Self.new)
    let digest = XXH3Hasher.digest(Self.new)
    try trove(writer, ["remote", "push", digest.description])
    // Someone with write access to the remote changes bytes the local
    // store lacks (inside the first edit), keeping the blob's length.
    let blob = nginx.files["team/" + remoteBlobPath(digest)]
    var tampered = try contents(blob)
    for i in 2_000_100..<2_000_200 { tampered[i] ^= 0xFF }
    try Data(tampered).write(to: URL(fileURLWithPath: blob))
    try Self.put(local, Self.old)
    let run = try CLI.run(["--store", local, "remote", "pull", digest.description])
    #expect(run.status == 65, "\(run.status) \(run.stderr)")
    #expect(run.stderr.contains("not \(digest)"), "\(run.stderr)")
    #expect(!FileManager.default.fileExists(atPath: objectFilePath(local, digest)))
    #expect(scratch.temporaries("local").isEmpty, "\(scratch.temporaries("local"))")
    // The chunked pull asked for ranges, then the whole blob was tried.
    let gets = nginx.accessLog().filter { $0.hasPrefix("GET /team/cas/") }
    #expect(
      gets.contains { $0.contains(" 206 ") } && gets.contains { $0.contains(" 200 ") }, "\(gets)")
  }

  @Test(
    "a remote that answers a range with other bytes, saying so in its Content-Range, is refused at that range and the blob pulled whole"
  )
  func aShiftedRangeIsRefused() throws {
    let nginx = try Nginx(webDAV: true)
    let server = try FaultServer()
    let scratch = try Scratch()
    let writer = scratch["writer"]
    let local = scratch["local"]
    try trove(writer, ["remote", "add", "team", nginx.url("/team"), "--write", "off"])
    try Self.put(writer, Self.new)
    let digest = XXH3Hasher.digest(Self.new)
    try trove(writer, ["remote", "push", digest.description])
    // The same layout from the fault server, whose ranges of the blob are
    // the bytes 4 KiB further on (its Content-Range says which).
    try FileManager.default.copyItem(atPath: nginx.files["team"], toPath: server.tree)
    let blob = server.tree + "/" + remoteBlobPath(digest)
    FileManager.default.createFile(atPath: blob + ".shifted", contents: nil)
    try Self.put(local, Self.old)
    try trove(local, ["remote", "add", "team", server.url("/tree"), "--read-only"])
    let pulled = try Self.pull(local, digest)
    #expect(pulled["outcome"] as? String == "pulled", "\(pulled)")
    #expect(pulled["transferredBytes"] as? Int == Self.new.count, "\(pulled)")
    #expect(try contents(objectFilePath(local, digest)) == Self.new)
    // Refused at the first range (the new version has two), then whole.
    let ranges = server.requests().filter { $0.contains("/cas/") && $0.contains("\"bytes=") }
    #expect(ranges.count == 1, "\(server.requests())")
    #expect(scratch.temporaries("local").isEmpty)
  }

  @Test("a hostile manifest on the remote is refused and the blob pulled whole")
  func aHostileManifestIsRefused() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let writer = scratch["writer"]
    let local = scratch["local"]
    for store in [writer, local] {
      try trove(store, ["remote", "add", "team", nginx.url("/team"), "--write", "off"])
    }
    try Self.put(writer, Self.new)
    let digest = XXH3Hasher.digest(Self.new)
    try trove(writer, ["remote", "push", digest.description])
    let manifest = nginx.files["team/" + RemoteNames.manifestPath(digest)]
    // Chunks that do not tile the blob: refused before any range is asked.
    try Data(Array("TRVCHNK1".utf8) + [UInt8](repeating: 0xFF, count: 40)).write(
      to: URL(fileURLWithPath: manifest))
    try Self.put(local, Self.old)
    let pulled = try Self.pull(local, digest)
    #expect(pulled["transferredBytes"] as? Int == Self.new.count, "\(pulled)")
    #expect(try contents(objectFilePath(local, digest)) == Self.new)
    #expect(!nginx.accessLog().contains { $0.contains(" 206 ") })
  }

  @Test(
    "S3 on Ceph: a push writes the manifest beside the blob, and a store holding the old version pulls the changed chunks only",
    .enabled(if: CephS3.isInstalled, CephS3.missing))
  func pullFromS3InChunks() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let (writer, local) = (scratch["writer"], scratch["local"])
    for store in [writer, local] { try S3RemoteTests.add(s3, store, bucket, ["--write", "off"]) }
    let piped = try CLI.run(
      ["--store", writer, "put", "-"], stdin: Self.new, environment: s3.environment)
    #expect(piped.status == 0, "\(piped.stderr)")
    let digest = XXH3Hasher.digest(Self.new)
    let push = try S3RemoteTests.remote(s3, writer, ["push", digest.description])
    #expect(push.status == 0, "\(push.stderr)")
    let manifest = try s3.object(bucket, "team/" + RemoteNames.manifestPath(digest))
    #expect(
      manifest.flatMap {
        try? ChunkManifest(decoding: $0, expectedSize: Int64(Self.new.count), source: "s3")
      }
        == ChunkManifest(size: Int64(Self.new.count), chunks: ChunkingTests.chunks(Self.new)))
    try Self.put(local, Self.old)
    let pulled = try S3RemoteTests.remote(s3, local, ["pull", "--json", digest.description])
    let record =
      (try JSONSerialization.jsonObject(with: Data(pulled.stdout)) as? [[String: Any]])?.first
      ?? [:]
    let transferred = record["transferredBytes"] as? Int ?? Int.max
    #expect(transferred > 0 && transferred <= 1 << 20, "\(record) \(pulled.stderr)")
    if !TestFilesystems.tempCanClone {
      // Here the local chunks could not be cloned: they were copied.
      #expect(record["clonedBytes"] as? Int == 0, "\(record)")
    }
    #expect(try contents(objectFilePath(local, digest)) == Self.new)
  }
}
