import Foundation
import Synchronization
import Trove

/// Many small objects: one `trove put` of thousands of 4 KiB files beside a
/// bare create+write+rename loop (without and with an fsync per file), on
/// the work folder (ext4 here) and the reflink XFS; blobs of 4–64 KiB beside
/// `git hash-object -w --stdin-paths`; and the library's `put(bytes:)` of
/// 4 KiB in a loop (1 and 8 threads) beside the same bare loop in process.
func smallSuite(_ b: Bench) throws {
  print("small")
  let count = b.size(10_000, quick: 500)
  var folders = [("work folder", b.work)]
  if let xfs = b.xfs { folders.append(("xfs", xfs)) } else { b.skip("small on xfs", b.xfsMissing) }
  for (filesystem, folder) in folders {
    try smallPuts(b, count: count, folder: folder, filesystem: filesystem)
  }
  try smallBlobsBesideGit(b, count: b.size(5_000, quick: 300))
  try smallLibraryPuts(b)
}

/// The library rows of the small suite alone (`--suite small-library`).
func smallLibrarySuite(_ b: Bench) throws {
  print("small-library")
  try smallLibraryPuts(b)
}

/// Writes `count` files of pseudo-random bytes into `folder` (made fresh),
/// the n-th `size(n)` bytes long; returns their paths.
private func makeSmallFiles(_ folder: String, count: Int, size: (Int) -> Int) throws -> [String] {
  remove(folder)
  try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
  var state: UInt64 = 0x5EED
  var paths: [String] = []
  for n in 0..<count {
    let length = size(n)
    var words = [UInt64](repeating: 0, count: (length + 7) / 8)
    for i in words.indices {
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      words[i] = z ^ (z >> 31)
    }
    let path = folder + "/f\(n)"
    let data = words.withUnsafeBytes { Data($0.prefix(length)) }
    guard FileManager.default.createFile(atPath: path, contents: data) else {
      throw Spawn.Failure(command: ["create", path], detail: "cannot create")
    }
    paths.append(path)
  }
  return paths
}

/// The bare loop a put of many files is measured against: for each file,
/// read it, create a temp file beside the destination, write, (fsync,)
/// rename into place.
private let rawLoop = """
  import os, sys
  dest, sync = sys.argv[1], sys.argv[2] == "1"
  os.makedirs(dest, exist_ok=True)
  for i, p in enumerate(sys.stdin.read().split("\\n")):
      if not p:
          continue
      with open(p, "rb") as f:
          data = f.read()
      tmp = os.path.join(dest, ".tmp%d" % i)
      fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
      os.write(fd, data)
      if sync:
          os.fsync(fd)
      os.close(fd)
      os.rename(tmp, os.path.join(dest, "o%d" % i))
  """

private func smallPuts(_ b: Bench, count: Int, folder: String, filesystem: String) throws {
  let sources = folder + "/small-sources"
  let store = folder + "/small-store"
  let dest = folder + "/small-raw"
  let list = b.work + "/small-list.txt"
  let script = b.work + "/small-loop.py"
  defer {
    remove(sources)
    remove(store)
    remove(dest)
    remove(list)
    remove(script)
  }
  let paths = try makeSmallFiles(sources, count: count) { _ in 4096 }
  try (paths.joined(separator: "\n") + "\n").write(toFile: list, atomically: true, encoding: .utf8)
  try rawLoop.write(toFile: script, atomically: true, encoding: .utf8)
  let timed = try b.timeCommands([
    [b.trove, "--store", store, "put"] + paths,
    ["sh", "-c", "python3 \"$0\" \"$1\" 0 < \"$2\"", script, dest, list],
    ["sh", "-c", "python3 \"$0\" \"$1\" 1 < \"$2\"", script, dest, list],
  ]) {
    remove(store)
    remove(dest)
  }
  let params = ["files": "\(count)", "size": "4096", "filesystem": filesystem]
  let name = "put \(count) × 4 KiB files (\(filesystem))"
  b.add(
    Result(
      suite: "small", name: name, parameters: params, unit: .seconds, trove: timed[0],
      referenceName: "python create+write+rename", reference: timed[1],
      note: "the loop neither hashes nor syncs: nothing it wrote is durable when it exits"))
  b.add(
    Result(
      suite: "small", name: name, parameters: params, unit: .seconds, trove: timed[0],
      referenceName: "the same loop + fsync per file", reference: timed[2],
      note: "durable data, but not its names: no folder is synced"))
}

private func smallBlobsBesideGit(_ b: Bench, count: Int) throws {
  let sources = b.work + "/small-blobs"
  let store = b.work + "/small-blob-store"
  let repository = b.work + "/small-git"
  let list = b.work + "/small-blob-list.txt"
  defer {
    remove(sources)
    remove(store)
    remove(repository)
    remove(list)
  }
  // 4 KiB to 64 KiB, spread evenly, in steps of 1 KiB plus a few bytes.
  let paths = try makeSmallFiles(sources, count: count) { n in 4096 + (n * 1031) % (60 << 10) }
  try (paths.joined(separator: "\n") + "\n").write(toFile: list, atomically: true, encoding: .utf8)
  let timed = try b.timeCommands([
    [b.trove, "--store", store, "put"] + paths,
    [
      "sh", "-c", "git init -q \"$0\" && git -C \"$0\" hash-object -w --stdin-paths < \"$1\"",
      repository, list,
    ],
  ]) {
    remove(store)
    remove(repository)
  }
  b.add(
    Result(
      suite: "small", name: "put \(count) blobs of 4–64 KiB (work folder)",
      parameters: ["files": "\(count)", "filesystem": "work folder"], unit: .seconds,
      trove: timed[0], referenceName: "git hash-object -w --stdin-paths", reference: timed[1],
      note: "git with its defaults: zlib, no fsync"))
}

/// `put(bytes:)` of distinct 4 KiB buffers in a loop, on 1 and 8 threads,
/// in objects per second, beside the bare create+write+rename loop in
/// process (no hash, no sync, no index).
private func smallLibraryPuts(_ b: Bench) throws {
  let count = b.size(4_000, quick: 400)
  let folder = b.xfs ?? b.work
  let filesystem = b.xfs == nil ? "work folder" : "xfs"
  let store = folder + "/small-library-store"
  let dest = folder + "/small-library-raw"
  defer {
    remove(store)
    remove(dest)
  }
  for threads in [1, 8] {
    let perThread = count / threads
    let round = Atomic<Int>(0)
    let putAll = {
      let library = try Store(StoreConfiguration(root: store))
      let salt = round.add(1, ordering: .relaxed).newValue
      try runThreads(threads) { t in
        var bytes = [UInt64](repeating: 0, count: 512)
        for i in 0..<perThread {
          bytes[0] = UInt64(salt)
          bytes[1] = UInt64(t)
          bytes[2] = UInt64(i)
          _ = try library.put(bytes: bytes.withUnsafeBytes { Data($0) })
        }
      }
    }
    let rawAll = {
      try FileManager.default.createDirectory(atPath: dest, withIntermediateDirectories: true)
      try runThreads(threads) { t in
        var bytes = [UInt64](repeating: 0, count: 512)
        for i in 0..<perThread {
          bytes[2] = UInt64(i)
          let temp = dest + "/.t\(t)-\(i)"
          let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o444)
          guard fd >= 0 else { throw Spawn.Failure(command: ["open", temp], detail: "failed") }
          _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, 4096) }
          close(fd)
          guard rename(temp, dest + "/o\(t)-\(i)") == 0 else {
            throw Spawn.Failure(command: ["rename", temp], detail: "failed")
          }
        }
      }
    }
    let timed = try b.time([putAll, rawAll]) {
      remove(store)
      remove(dest)
      sync()
    }
    let total = Double(perThread * threads)
    let rate = { (s: Series) in Series(samples: s.samples.map { total / $0 }) }
    b.add(
      Result(
        suite: "small", name: "library put(bytes:) 4 KiB, \(threads) thread(s) (\(filesystem))",
        parameters: [
          "objects": "\(Int(total))", "threads": "\(threads)", "filesystem": filesystem,
        ],
        unit: .objectsPerSecond, trove: rate(timed[0]), referenceName: "open+write+rename loop",
        reference: rate(timed[1]),
        note: "each put is durable and indexed when it returns; the loop is neither"))
  }
}

/// Runs `body(t)` on `count` threads at once and waits; the first error wins.
private func runThreads(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws {
  let failure = Mutex<(any Error)?>(nil)
  let group = DispatchGroup()
  for t in 0..<count {
    group.enter()
    Thread.detachNewThread {
      defer { group.leave() }
      do { try body(t) } catch { failure.withLock { $0 = $0 ?? error } }
    }
  }
  group.wait()
  if let error = failure.withLock({ $0 }) { throw error }
}
