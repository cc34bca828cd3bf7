import Foundation
import Trove

/// Sweeps of stores of many small entries: deciding there is nothing to
/// evict, and evicting 10%, beside a plain unlink loop over the same files
/// and the seeds' CacheJanitor (enumerate, stat every file, sort by date,
/// delete the oldest until under budget); and evicting every entry
/// (a budget of 0) beside `find -delete` and an unlink loop. On the work
/// folder (ext4 here) and on the reflink XFS.
func sweepSuite(_ b: Bench) throws {
  print("sweep")
  var folders = [("work folder", b.work)]
  if let xfs = b.xfs { folders.append(("xfs", xfs)) } else { b.skip("sweep on xfs", b.xfsMissing) }
  for (filesystem, folder) in folders {
    try sweepSuite(b, folder: folder, filesystem: filesystem)
  }
}

private func sweepSuite(_ b: Bench, folder: String, filesystem: String) throws {
  let sizes = b.sweepEntries ?? (b.quick ? [1_000] : [10_000, 100_000])
  // The work folder's rows keep the names they always had.
  let on = filesystem == "work folder" ? "" : " on \(filesystem)"
  for count in sizes {
    let root = folder + "/sweep-\(count)"
    let params = ["entries": "\(count)", "entry size": "200", "filesystem": filesystem]
    let repetitions = b.quick || count >= 1_000_000 ? 1 : (count >= 100_000 ? 2 : 3)
    var sweepIdle: [Double] = []
    var janitorIdle: [Double] = []
    var sweepEvict: [Double] = []
    var unlinkEvict: [Double] = []
    var rmEvict: [Double] = []
    var janitorEvict: [Double] = []
    var sweepAll: [Double] = []
    var findAll: [Double] = []
    var unlinkAll: [Double] = []
    var rmAll: [Double] = []
    var evicted = 0
    for _ in 0..<repetitions {
      // A store of `count` entries, written straight into objects/ and
      // indexed the way a lost index is rebuilt (untimed).
      remove(root)
      var files = try populate(root, count: count)
      let store = try Store(StoreConfiguration(root: root))
      try store.rebuildIndex()
      let total = try store.statistics().allocatedBytes
      try store.updatePolicy {
        $0.lowWater = 1
        $0.budget = total
      }
      // Every timing starts with nothing dirty: the files just written
      // would otherwise be written back while the next step runs, and an
      // unlink of an inode under writeback waits for it.
      sync()

      let idleStart = now()
      let idle = try store.sweep()
      sweepIdle.append(now() - idleStart)
      precondition(idle.removedEntries == 0)
      let janitorStart = now()
      let nothing = try cacheJanitor(root + "/objects", budget: total)
      janitorIdle.append(now() - janitorStart)
      precondition(nothing == 0)

      // Which entries an eviction of 10% removes: found by a first,
      // untimed sweep. Every contender then deletes those same files,
      // each time freshly rewritten (dated an hour back, so they are the
      // least recently used to the index and the oldest to the janitor)
      // and synced: on a filesystem mounted with `discard`, as this VM's
      // root is, freeing old, scattered blocks costs more than freeing
      // new ones, and no contender may get the cheaper files.
      let before = Set(try store.entries().map(\.digest))
      let planned = try store.sweep(SweepOptions(budget: total * 9 / 10))
      let gone = before.subtracting(try store.entries().map(\.digest))
      let paths = gone.map { root + "/objects/\($0.hex.prefix(2))/\($0.hex)" }
      precondition(planned.removedEntries == paths.count)

      try restore(paths, from: &files)
      try store.rebuildIndex()
      sync()
      var start = now()
      let report = try store.sweep(SweepOptions(budget: total * 9 / 10))
      sweepEvict.append(now() - start)
      evicted = report.removedEntries
      let left = Set(try store.entries().map(\.digest))
      precondition(
        left == before.subtracting(gone), "the timed sweep must remove the planned entries")

      // The same files again, removed by a loop of unlink.
      try restore(paths, from: &files)
      sync()
      start = now()
      for path in paths { unlink(path) }
      unlinkEvict.append(now() - start)

      // And by `rm` given their paths (through xargs: 100k paths exceed ARG_MAX).
      try restore(paths, from: &files)
      sync()
      let list = b.work + "/sweep-paths"
      try Data(paths.joined(separator: "\0").utf8).write(to: URL(fileURLWithPath: list))
      rmEvict.append(try Spawn.check(["xargs", "-0", "rm", "-f"], input: list).seconds)
      remove(list)

      // And by the CacheJanitor algorithm, which must find them itself.
      try restore(paths, from: &files)
      sync()
      start = now()
      let removed = try cacheJanitor(root + "/objects", budget: total * 9 / 10)
      janitorEvict.append(now() - start)
      precondition(abs(removed - paths.count) <= paths.count / 10 + 1)

      // Every entry: a sweep to a budget of 0 (`trove sweep --budget 0`),
      // then `find objects -type f -delete` and an unlink loop, each over
      // all the files freshly rewritten as above.
      let all = Array(files.keys)
      try restore(all, from: &files)
      try store.rebuildIndex()
      sync()
      start = now()
      let emptied = try store.sweep(SweepOptions(budget: 0))
      sweepAll.append(now() - start)
      precondition(emptied.removedEntries == count, "a budget of 0 evicts every entry")
      let rowsLeft = try store.entries().count
      precondition(rowsLeft == 0 && leftFiles(root + "/objects") == 0)

      try restore(all, from: &files)
      sync()
      findAll.append(
        try Spawn.check(["find", root + "/objects", "-type", "f", "-delete"]).seconds)
      precondition(leftFiles(root + "/objects") == 0)

      try restore(all, from: &files)
      sync()
      start = now()
      for path in all { unlink(path) }
      unlinkAll.append(now() - start)

      // And `trove rm` of every digest, one process (up to 20,000: the
      // digests are its arguments), over the same files rewritten.
      if count <= 20_000 {
        try restore(all, from: &files)
        try store.rebuildIndex()
        sync()
        let digests = all.map { "xxh128:" + ($0.split(separator: "/").last ?? "") }
        rmAll.append(try Spawn.check([b.trove, "--store", root, "-q", "rm"] + digests).seconds)
        let rowsAfterRm = try store.entries().count
        precondition(rowsAfterRm == 0 && leftFiles(root + "/objects") == 0)
      }
      remove(root)
    }
    let idleName = "sweep \(count)\(on), nothing to evict"
    let evictName = "sweep \(count)\(on), evict 10% (\(evicted))"
    let allName = "sweep \(count)\(on), evict all"
    b.add(
      Result(
        suite: "sweep", name: idleName, parameters: params, unit: .seconds,
        trove: Series(samples: sweepIdle), referenceName: "CacheJanitor (walk+sort)",
        reference: Series(samples: janitorIdle),
        note: "Trove reads its running total; the janitor stats every file"))
    for (reference, samples) in [
      ("unlink loop, same files", unlinkEvict), ("xargs rm -f, same files", rmEvict),
      ("CacheJanitor (walk+sort)", janitorEvict),
    ] {
      b.add(
        Result(
          suite: "sweep", name: evictName, parameters: params, unit: .seconds,
          trove: Series(samples: sweepEvict), referenceName: reference,
          reference: Series(samples: samples),
          note: "Trove also re-checks and deletes each entry's index row"))
    }
    for (reference, samples) in [
      ("find -type f -delete, same files", findAll), ("unlink loop, same files", unlinkAll),
    ] {
      b.add(
        Result(
          suite: "sweep", name: allName, parameters: params, unit: .seconds,
          trove: Series(samples: sweepAll), referenceName: reference,
          reference: Series(samples: samples),
          note: "a budget of 0; Trove also deletes every index row"))
    }
    if !rmAll.isEmpty {
      b.add(
        Result(
          suite: "sweep", name: "trove rm of \(count) digests\(on)", parameters: params,
          unit: .seconds, trove: Series(samples: rmAll), referenceName: "unlink loop, same files",
          reference: Series(samples: unlinkAll),
          note: "one process: its start, the index's rows, then the files"))
    }
  }
}

/// How many files are left under `folder`'s fan-out folders.
func leftFiles(_ folder: String) -> Int {
  var left = 0
  for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] {
    left += (try? FileManager.default.contentsOfDirectory(atPath: folder + "/" + name))?.count ?? 0
  }
  return left
}

/// Writes `count` distinct 200-byte objects into `root/objects/xx/<hex>`;
/// returns their contents by path.
func populate(_ root: String, count: Int) throws -> [String: [UInt8]] {
  var files: [String: [UInt8]] = [:]
  files.reserveCapacity(count)
  // A store first (its marker, objects/, tmp/): Trove adopts no folder
  // that holds anything else.
  _ = try Store(StoreConfiguration(root: root))
  let objects = root + "/objects"
  for i in 0..<count {
    var bytes = [UInt8](repeating: 0, count: 200)
    withUnsafeBytes(of: UInt64(i).littleEndian) { raw in
      for (j, byte) in raw.enumerated() { bytes[j] = byte }
    }
    let digest = XXH3Hasher.digest(bytes)
    let folder = objects + "/" + digest.hex.prefix(2)
    if i < 256 || !FileManager.default.fileExists(atPath: folder) {
      mkdir(folder, 0o700)
    }
    let path = folder + "/" + digest.hex
    try write(bytes, to: path)
    files[path] = bytes
  }
  return files
}

/// Writes `paths` again as new files, dated an hour back.
func restore(_ paths: [String], from files: inout [String: [UInt8]]) throws {
  var old = timespec()
  clock_gettime(CLOCK_REALTIME, &old)
  old.tv_sec -= 3600
  let times = [old, old]
  for path in paths {
    unlink(path)
    try write(files[path]!, to: path)
    utimensat(AT_FDCWD, path, times, 0)
  }
}

private func write(_ bytes: [UInt8], to path: String) throws {
  let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o444)
  guard fd >= 0 else {
    throw Spawn.Failure(command: ["open", path], detail: String(cString: strerror(errno)))
  }
  _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
  close(fd)
}

/// The seeds' CacheJanitor: enumerate the folder, stat every file, sort by
/// modification date, delete the oldest until the total is within
/// `budget`. Returns how many it deleted.
func cacheJanitor(_ folder: String, budget: Int64) throws -> Int {
  var files: [(path: String, date: Int64, size: Int64)] = []
  var total: Int64 = 0
  guard let fanouts = opendir(folder) else { return 0 }
  defer { closedir(fanouts) }
  while let entry = readdir(fanouts) {
    let name = withUnsafeBytes(of: entry.pointee.d_name) {
      String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
    }
    if name.hasPrefix(".") { continue }
    let sub = folder + "/" + name
    guard let dir = opendir(sub) else { continue }
    while let file = readdir(dir) {
      let fileName = withUnsafeBytes(of: file.pointee.d_name) {
        String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
      }
      if fileName.hasPrefix(".") { continue }
      let path = sub + "/" + fileName
      var s = stat()
      guard stat(path, &s) == 0 else { continue }
      let size = Int64(s.st_blocks) * 512
      files.append((path, Int64(s.st_mtim.tv_sec) * 1_000_000_000 + Int64(s.st_mtim.tv_nsec), size))
      total += size
    }
    closedir(dir)
  }
  files.sort { $0.date < $1.date }
  var removed = 0
  for file in files where total > budget {
    unlink(file.path)
    total -= file.size
    removed += 1
  }
  return removed
}
