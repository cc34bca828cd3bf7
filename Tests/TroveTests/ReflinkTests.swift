import Foundation
import Testing

@testable import Trove

/// Clones proved from the kernel (FIEMAP shared extents) on a loop-mounted
/// XFS made with reflink=1 by scripts/testfs.sh.
@Suite(
  "Reflinks on XFS", .serialized,  // free-space readings must not see another test's writes
  .enabled(if: TestFilesystems.xfs != nil, TestFilesystems.xfsMissing))
struct ReflinkTests {
  let scratch: Scratch
  let store: Store

  init() throws {
    scratch = try Scratch(under: TestFilesystems.xfs!)
    store = try scratch.store()
  }

  @Test("the store reports that its filesystem clones")
  func capability() throws {
    let stats = try store.statistics()
    #expect(stats.filesystem == "xfs")
    #expect(stats.cloneSupported)
  }

  @Test(
    "put of a file on the store's filesystem clones it in: the object shares the source's extents")
  func putClones() throws {
    let data = Bytes.random(8 * 1024 * 1024, seed: 20)
    let source = try scratch.write("source.bin", data)
    let put = try store.put(file: source)
    #expect(put.method == .clone)
    #expect(put.digest == XXH3Hasher.digest(data))
    let object = try extents(store.path(for: put.digest))
    #expect(object.isFullyShared, "object extents: \(object)")
    #expect(try extents(source).isFullyShared)
    #expect(scratch.temporaries("store").isEmpty)
  }

  @Test("a second put of the same content allocates no new blocks")
  func dedupAllocatesNothing() throws {
    let data = Bytes.random(16 * 1024 * 1024, seed: 21)
    let first = try store.put(file: try scratch.write("first.bin", data))
    // Same bytes in a separate, unshared file.
    let secondPath = try scratch.write("second.bin", data)
    #expect(try extents(secondPath).sharedExtents == 0)
    let before = try freeBytes(scratch.path)
    let second = try store.put(file: secondPath)
    let after = try freeBytes(scratch.path)
    #expect(second.isDuplicate && second.digest == first.digest)
    // 16 MiB of content: a copy would take all of it. Allow metadata (the
    // index's WAL, XFS's speculative preallocation being trimmed) but far
    // less than the content.
    #expect(before - after < 2 * 1024 * 1024, "free space fell by \(before - after) bytes")
    #expect(scratch.temporaries("store").isEmpty)
    #expect(try store.entries().count == 1)
  }

  @Test("get in auto mode clones: the destination shares every extent and bytes match")
  func getClones() throws {
    let data = Bytes.random(4 * 1024 * 1024 + 5, seed: 22)
    let digest = try store.put(bytes: data).digest
    let got = try store.materialize(digest, at: scratch["out.bin"])
    #expect(got.method == .clone)
    #expect(got.fallbackReason == nil)
    let summary = try extents(scratch["out.bin"])
    #expect(summary.isFullyShared, "destination extents: \(summary)")
    #expect(try contents(scratch["out.bin"]) == data)
    // The clone is the user's, writable, and copy-on-write: editing it leaves the object intact.
    #expect(try fileStatus(scratch["out.bin"]).mode & 0o200 != 0)
    let handle = try #require(FileHandle(forWritingAtPath: scratch["out.bin"]))
    handle.write(Data([0, 0, 0, 0]))
    try handle.close()
    #expect(try store.bytes(for: digest) == data)
  }

  @Test("clone mode clones; copy mode shares nothing")
  func explicitModes() throws {
    let data = Bytes.random(2 * 1024 * 1024, seed: 23)
    let digest = try store.put(bytes: data).digest
    #expect(try store.materialize(digest, at: scratch["c"], mode: .clone).method == .clone)
    #expect(try extents(scratch["c"]).isFullyShared)
    #expect(try store.materialize(digest, at: scratch["p"], mode: .copy).method == .copy)
    #expect(try extents(scratch["p"]).sharedExtents == 0)
    #expect(try contents(scratch["p"]) == data)
  }

  @Test(
    "export to a folder on the same XFS clones each object (shared extents); an import from it clones them back"
  )
  func exportClones() throws {
    let data = [
      Bytes.random(4 * 1024 * 1024, seed: 24), Bytes.random(1024 * 1024 + 3, seed: 25),
    ]
    let digests = try data.map { try store.put(bytes: $0).digest }
    for digest in digests {
      #expect(try extents(store.path(for: digest)).sharedExtents == 0)
    }
    let objects = digests.map {
      RecordedObject(digest: $0, keys: [], firstUsed: 1, lastUsed: 1)
    }
    let report = try store.export(objects, to: scratch["export"])
    #expect(report.objects == 2 && report.missing.isEmpty)
    let exported = try Store(StoreConfiguration(root: scratch["export"]))
    for (digest, bytes) in zip(digests, data) {
      let summary = try extents(exported.path(for: digest))
      #expect(summary.isFullyShared, "exported object extents: \(summary)")
      #expect(try exported.bytes(for: digest) == bytes)
    }
    #expect(scratch.temporaries("export").isEmpty)
    let verify = try CLI.run(["--store", scratch["export"], "verify"])
    #expect(verify.status == 0, "\(verify.stderr)")

    let other = try Store(StoreConfiguration(root: scratch["other"]))
    let imported = try other.importStore(at: scratch["export"])
    #expect(imported.objects == 2)
    for digest in digests {
      #expect(try extents(other.path(for: digest)).isFullyShared)
    }
  }

  @Test("across filesystems: clone mode fails naming both, auto mode copies and says why")
  func acrossFilesystems() throws {
    let other = try Scratch()  // the root filesystem
    let data = Bytes.random(1024 * 1024, seed: 24)
    let digest = try store.put(bytes: data).digest
    #expect {
      try store.materialize(digest, at: other["clone"], mode: .clone)
    } throws: { error in
      guard let error = error as? TroveError else { return false }
      return error.code == .cloneUnsupported && "\(error)".contains("store on xfs")
    }
    #expect(other.list("").isEmpty)
    let got = try store.materialize(digest, at: other["auto"])
    #expect(got.method != .clone)
    #expect(got.fallbackReason?.contains("store on xfs") == true)
    #expect(try contents(other["auto"]) == data)
    // Hard links cannot cross filesystems either.
    #expect {
      try store.materialize(digest, at: other["link"], mode: .hardlink)
    } throws: { ($0 as? TroveError)?.code == .linkUnsupported }
  }
}
