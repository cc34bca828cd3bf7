import Foundation
import Synchronization
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// A clone-in put hashes the source's cached pages only when it can prove
/// the clone holds those bytes (``CachedHash``), and hashes the clone
/// otherwise: on the loop-mounted reflink XFS of scripts/testfs.sh, with
/// the source changed in the middle of the hash (from the put's progress
/// handler, which runs between blocks) by write(2), through a shared
/// mapping, and by a change of status alone.
@Suite(
  "Hashing clone-in puts from the page cache", .serialized,
  .enabled(if: TestFilesystems.xfs != nil, TestFilesystems.xfsMissing))
struct CachedHashTests {
  let scratch: Scratch
  let store: Store
  static let size = 8 << 20

  init() throws {
    scratch = try Scratch(under: TestFilesystems.xfs!)
    store = try scratch.store()
  }

  /// The stored object's bytes, read from its file, hash to its name, and
  /// the store verifies clean.
  func expectStoredExactly(_ put: PutResult, _ expected: [UInt8]) throws {
    let stored = try contents(store.path(for: put.digest))
    #expect(stored == expected)
    #expect(XXH3Hasher.digest(stored) == put.digest)
    let report = try store.verify()
    #expect(report.corrupt.isEmpty && report.checkedObjects >= 1)
  }

  var tally: CachedHash.Tally { store.cloneHashes.withLock { $0 } }

  /// Calls `change` once, when the put has hashed its first block (1 MiB of 8).
  func onFirstBlock(_ change: @escaping @Sendable () -> Void) -> ProgressHandler {
    let done = Mutex(false)
    return { report in
      guard report.completed > 0 else { return }
      if done.withLock({ d in
        defer { d = true }
        return d
      }) {
        return
      }
      change()
    }
  }

  @Test("a put of a cached file takes its digest from the source; the object shares its blocks")
  func cachedPath() throws {
    let data = Bytes.random(Self.size, seed: 70)
    let source = try scratch.write("source.bin", data)
    let put = try store.put(file: source)
    #expect(put.method == .clone)
    #expect(put.digest == XXH3Hasher.digest(data))
    #expect(
      tally.fromSource == 1 && tally.fromClone == 0, "\(String(describing: tally.lastRefusal))")
    #expect(try extents(store.path(for: put.digest)).isFullyShared)
    try expectStoredExactly(put, data)
  }

  @Test("a sparse source (holes between data) is proved too: the clone has the same holes")
  func sparseSource() throws {
    let path = scratch["sparse.bin"]
    let data = Bytes.random(1 << 20, seed: 71)
    let fd = open(path, O_RDWR | O_CREAT, 0o644)
    #expect(fd >= 0)
    for offset in [0, 4 << 20] {
      data.withUnsafeBytes { _ = pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
    }
    _ = ftruncate(fd, off_t(Self.size))
    close(fd)
    let expected = try contents(path)
    let put = try store.put(file: path)
    #expect(put.digest == XXH3Hasher.digest(expected))
    #expect(tally.fromSource == 1, "\(String(describing: tally.lastRefusal))")
    try expectStoredExactly(put, expected)
  }

  @Test(
    "a write(2) to the source during the hash: the clone is hashed, the digest names the bytes stored",
    arguments: [0, 6 << 20])
  func writeDuringHash(offset: Int) throws {
    let data = Bytes.random(Self.size, seed: 72)
    let source = try scratch.write("source.bin", data)
    let fd = open(source, O_RDWR)
    #expect(fd >= 0)
    defer { close(fd) }
    let put = try store.put(
      file: source,
      onProgress: onFirstBlock {
        let junk = [UInt8](repeating: 0xA5, count: 4096)
        junk.withUnsafeBytes { _ = pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
      })
    // The clone was made before the write: it holds the original bytes.
    #expect(put.digest == XXH3Hasher.digest(data))
    #expect(tally.fromSource == 0 && tally.fromClone == 1)
    // The write reached the disk by copy-on-write, moving the source's block.
    #expect(tally.lastRefusal == .extentsDiffer)
    try expectStoredExactly(put, data)
    #expect(try contents(source) != data, "the source did change")
  }

  @Test("a store through a shared mapping during the hash: the clone is hashed")
  func mmapDuringHash() throws {
    let data = Bytes.random(Self.size, seed: 73)
    let source = try scratch.write("source.bin", data)
    let fd = open(source, O_RDWR)
    #expect(fd >= 0)
    defer { close(fd) }
    let map = try #require(mmap(nil, Self.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0))
    #expect(map != UnsafeMutableRawPointer(bitPattern: -1))
    defer { munmap(map, Self.size) }
    let address = Int(bitPattern: map)
    let put = try store.put(
      file: source,
      onProgress: onFirstBlock {
        // Pages the hash has not read yet: it reads the new bytes.
        let bytes = UnsafeMutableRawPointer(bitPattern: address)!
        for page in stride(from: 6 << 20, to: 7 << 20, by: 4096) {
          bytes.storeBytes(of: 0x5A, toByteOffset: page, as: UInt8.self)
        }
      })
    #expect(put.digest == XXH3Hasher.digest(data))
    #expect(tally.fromSource == 0 && tally.fromClone == 1)
    #expect(tally.lastRefusal == .extentsDiffer)
    try expectStoredExactly(put, data)
    #expect(try contents(source) != data, "the source did change")
  }

  @Test("a direct (O_DIRECT) write to the source during the hash: the clone is hashed")
  func directWriteDuringHash() throws {
    let data = Bytes.random(Self.size, seed: 76)
    let source = try scratch.write("source.bin", data)
    let direct: Int32 = 0o40000  // O_DIRECT on Linux x86-64 and arm64 (Glibc hides it)
    let fd = open(source, O_RDWR | direct)
    #expect(fd >= 0)
    defer { close(fd) }
    let block = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
    defer { block.deallocate() }
    block.initializeMemory(as: UInt8.self, repeating: 0xC3)
    let address = Int(bitPattern: block.baseAddress)
    let put = try store.put(
      file: source,
      onProgress: onFirstBlock {
        // Past the point being read: the hash reads the new bytes.
        _ = pwrite(fd, UnsafeRawPointer(bitPattern: address), 1 << 20, off_t(6 << 20))
      })
    #expect(put.digest == XXH3Hasher.digest(data))
    #expect(tally.fromSource == 0 && tally.fromClone == 1)
    #expect(tally.lastRefusal == .extentsDiffer)
    try expectStoredExactly(put, data)
    #expect(try contents(source) != data, "the source did change")
  }

  @Test("FIEMAP failing (fault injected) falls back: trove put still stores the right digest")
  func fiemapFails() throws {
    let data = Bytes.random(Self.size, seed: 77)
    let source = try scratch.write("source.bin", data)
    let store = scratch["cli-store"]
    let put = try CLI.run(
      ["--store", store, "put", "--json", source],
      environment: ["TROVE_INJECT_FAULT": "ioctl(FS_IOC_FIEMAP):95"])
    #expect(put.status == 0, "\(put.stderr)")
    let records = try JSONSerialization.jsonObject(with: Data(put.stdout))
    let record = try #require((records as? [[String: Any]])?.first)
    #expect(record["digest"] as? String == XXH3Hasher.digest(data).description)
    #expect(record["ingest"] as? String == "clone")
    let verify = try CLI.run(["--store", store, "verify"])
    #expect(verify.status == 0, "\(verify.out)\(verify.stderr)")
  }

  @Test("a change of status alone during the hash (fchmod: a new ctime) falls back too")
  func statusChangeDuringHash() throws {
    let data = Bytes.random(Self.size, seed: 74)
    let source = try scratch.write("source.bin", data)
    let fd = open(source, O_RDONLY)
    #expect(fd >= 0)
    defer { close(fd) }
    let put = try store.put(file: source, onProgress: onFirstBlock { _ = fchmod(fd, 0o640) })
    #expect(put.digest == XXH3Hasher.digest(data))
    #expect(tally.lastRefusal == .sourceChanged("ctime"))
    try expectStoredExactly(put, data)
  }

  @Test("unwritten (preallocated) extents cannot be proved: the clone is hashed")
  func unwrittenExtents() throws {
    let path = scratch["prealloc.bin"]
    let fd = open(path, O_RDWR | O_CREAT, 0o644)
    #expect(fd >= 0)
    #expect(posix_fallocate(fd, 0, off_t(Self.size)) == 0)
    let data = Bytes.random(1 << 20, seed: 75)
    data.withUnsafeBytes { _ = pwrite(fd, $0.baseAddress, $0.count, 0) }
    close(fd)
    let expected = try contents(path)
    let put = try store.put(file: path)
    #expect(put.digest == XXH3Hasher.digest(expected))
    #expect(tally.fromClone == 1)
    guard case .unprovableExtent(let flags) = tally.lastRefusal else {
      Issue.record("refusal: \(String(describing: tally.lastRefusal))")
      return
    }
    let unwritten: UInt32 = 0x800  // FIEMAP_EXTENT_UNWRITTEN
    #expect(flags & unwritten != 0)
    try expectStoredExactly(put, expected)
  }

  @Test("extent maps compare by place: split records joined, cut at the length, flags kept")
  func normalizing() {
    let shared: UInt32 = 0x2000  // FIEMAP_EXTENT_SHARED
    let last: UInt32 = 0x1  // FIEMAP_EXTENT_LAST
    let split = [
      Extent(logical: 0, physical: 4096, length: 8192, flags: shared),
      Extent(logical: 8192, physical: 12288, length: 4096, flags: shared),
      Extent(logical: 16384, physical: 65536, length: 8192, flags: shared | last),
    ]
    let whole = [
      Extent(logical: 0, physical: 4096, length: 12288, flags: shared),
      Extent(logical: 16384, physical: 65536, length: 4096, flags: shared),
    ]
    #expect(CachedHash.normalized(split, length: 20480) == whole)
    // A neighbour elsewhere on the device is not joined.
    let moved = [split[0], Extent(logical: 8192, physical: 99 << 20, length: 4096, flags: shared)]
    #expect(CachedHash.normalized(moved, length: 12288).count == 2)
  }
}
