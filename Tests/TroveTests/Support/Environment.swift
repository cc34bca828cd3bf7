import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// The filesystems scripts/testfs.sh made for the tests, or why not.
enum TestFilesystems {
  static let environment = ProcessInfo.processInfo.environment

  /// A loop-mounted XFS with reflink=1, if one was made.
  static let xfs: String? = environment["TROVE_TEST_XFS"]
  /// Why the XFS tests are skipped.
  static let xfsMissing = Comment(
    rawValue:
      "no reflink filesystem: \(environment["TROVE_TEST_XFS_UNAVAILABLE"] ?? "TROVE_TEST_XFS is not set; run scripts/test.sh as root to loop-mount an XFS with reflink=1")"
  )

  /// A 320 MiB XFS with reflink=1 for the storage-pressure tests alone, if one was made.
  static let pressure: String? = environment["TROVE_TEST_PRESSURE"]
  /// Why the storage-pressure tests are skipped.
  static let pressureMissing = Comment(
    rawValue:
      "no volume to fill: \(environment["TROVE_TEST_PRESSURE_UNAVAILABLE"] ?? "TROVE_TEST_PRESSURE is not set; run scripts/test.sh as root to loop-mount a small XFS")"
  )

  /// A small (8 MiB) tmpfs, if one was made.
  static let small: String? = environment["TROVE_TEST_SMALL"]
  /// Why the small-filesystem tests are skipped.
  static let smallMissing = Comment(
    rawValue:
      "no small filesystem: \(environment["TROVE_TEST_SMALL_UNAVAILABLE"] ?? "TROVE_TEST_SMALL is not set; run scripts/test.sh as root to mount an 8 MiB tmpfs")"
  )

  /// 16 MiB ext4 volumes with 4 KiB and 1 KiB blocks, to fill to the last block.
  static let full: [String] = ["TROVE_TEST_FULL4K", "TROVE_TEST_FULL1K"].compactMap {
    environment[$0]
  }
  /// Why the full-volume tests are skipped.
  static let fullMissing = Comment(
    rawValue:
      "no volume to fill: \(environment["TROVE_TEST_FULL4K_UNAVAILABLE"] ?? "TROVE_TEST_FULL4K is not set; run scripts/test.sh as root to loop-mount small ext4 volumes")"
  )

  /// Whether the system temp folder's filesystem clones (ext4 here: no).
  static let tempCanClone: Bool = {
    guard let scratch = try? Scratch(), let store = try? scratch.store() else { return false }
    return (try? store.cloneSupport().isSupported) ?? false
  }()

  static let isRoot = getuid() == 0
  static let setprivAvailable = FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
  static let xxhsum = ["/usr/bin/xxhsum", "/usr/local/bin/xxhsum"].first {
    FileManager.default.isExecutableFile(atPath: $0)
  }
}

/// A fresh folder for one test, removed when the value is dropped.
final class Scratch {
  let path: String

  /// A new folder under `base` (default: the system's temp folder, which is
  /// on the root filesystem: ext4 here, no clones).
  init(under base: String? = nil) throws {
    var parent = base ?? NSTemporaryDirectory()
    // `/tmp/` + `/trove-test-…` would be a path the CLI prints otherwise
    // (it drops repeated slashes).
    while parent.count > 1 && parent.hasSuffix("/") { parent.removeLast() }
    path = parent + "/trove-test-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
  }

  deinit { try? FileManager.default.removeItem(atPath: path) }

  subscript(name: String) -> String { path + "/" + name }

  /// Writes `bytes` to `name` and returns its path.
  @discardableResult
  func write(_ name: String, _ bytes: [UInt8]) throws -> String {
    try Data(bytes).write(to: URL(fileURLWithPath: self[name]))
    return self[name]
  }

  /// Opens (creating) a store at `name`.
  func store(_ name: String = "store") throws -> Store {
    try Store(StoreConfiguration(root: self[name]))
  }

  /// The names in `name` (a folder), sorted.
  func list(_ name: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: self[name])) ?? []).sorted()
  }

  /// The temp files of the store at `name` (see ``storeTemporaries(_:)``).
  func temporaries(_ name: String) -> [String] { storeTemporaries(self[name]) }
}

/// What is in the `tmp/` of the store at `root`, sorted: its entries, the
/// staging folders' own entries as `FOLDER/NAME` in their place (the
/// folders are the store's, made by its first put).
func storeTemporaries(_ root: String) -> [String] {
  let manager = FileManager.default
  var names: [String] = []
  for name in (try? manager.contentsOfDirectory(atPath: root + "/tmp")) ?? [] {
    // lstat: a link under a staging name is listed as itself.
    let type = (try? manager.attributesOfItem(atPath: root + "/tmp/" + name))?[.type]
    if StoreLayout.stagingFolders.contains(name), type as? FileAttributeType == .typeDirectory {
      let inside = (try? manager.contentsOfDirectory(atPath: root + "/tmp/" + name)) ?? []
      names += inside.map { name + "/" + $0 }
    } else {
      names.append(name)
    }
  }
  return names.sorted()
}

/// Deterministic bytes: `(i * 31 + 7) mod 251` (the known-answer pattern),
/// text-like words, or pseudo-random bytes, each from a seed.
enum Bytes {
  static func pattern(_ count: Int) -> [UInt8] {
    (0..<count).map { UInt8(($0 &* 31 &+ 7) % 251) }
  }

  /// Text-like bytes, words of a small vocabulary: they compress well.
  static func text(_ count: Int, seed: UInt64) -> [UInt8] {
    let words = ["trove", "cache", "digest", "clone", "zstd", "budget", "sweep", "entry", "\n"]
    var state = seed
    var out: [UInt8] = []
    out.reserveCapacity(count + 16)
    while out.count < count {
      state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      out.append(contentsOf: words[Int(state >> 33) % words.count].utf8)
      out.append(UInt8(ascii: " "))
    }
    return Array(out.prefix(count))
  }

  static func random(_ count: Int, seed: UInt64) -> [UInt8] {
    var state = seed
    var out = [UInt8](repeating: 0, count: count)
    var i = 0
    while i < count {
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      z ^= z >> 31
      for b in 0..<8 where i < count {
        out[i] = UInt8(truncatingIfNeeded: z >> (8 * UInt64(b)))
        i += 1
      }
    }
    return out
  }
}

/// Reads a whole file.
func contents(_ path: String) throws -> [UInt8] {
  Array(try Data(contentsOf: URL(fileURLWithPath: path)))
}

/// `stat` of a path.
func fileStatus(_ path: String) throws -> FileStatus {
  var s = stat()
  guard stat(path, &s) == 0 else { throw Errno(rawValue: errno) }
  return FileStatus(s)
}

/// FIEMAP extent summary of a file.
func extents(_ path: String) throws -> ExtentSummary {
  let fd = try FileDescriptor.open(path)
  defer { fd.close() }
  return try fd.extentSummary()
}

/// Free bytes on the filesystem holding `path`, after a sync.
func freeBytes(_ path: String) throws -> Int64 {
  sync()
  return try Sys.spaceAvailable(at: path).available
}

/// Deletes `digest`'s row (and pins and keys) from the index behind the
/// store's back, leaving its file: an orphan, as a crash would leave one.
func dropRow(_ digest: BlobDigest, in store: Store) throws {
  _ = try store.index().write("test: drop row") { (tx) throws(TroveError) in
    _ = try tx.deleteObjects([digest])
  }
}
