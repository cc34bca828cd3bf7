import Foundation
import Trove

/// How cost grows with the store: stores of 10k, 100k and 1M objects (mostly
/// 1–8 KiB, one of 4 MiB in every 10,000), built with the library's group
/// put, and per size the one-process latency of `has`, `get`, `put` and a
/// fresh-hit `fetch`, `stats`, a sweep evicting 1%, `ls` of everything to a
/// pipe, `verify` beside `xxhsum -c` over the same files, `reindex`, the
/// index's bytes per object, and the peak RSS of each. A larger store's row
/// takes the smallest store's figure from the same run as its reference: a
/// ratio of 1 means the cost did not grow (per object, for the work that is
/// proportional to the objects).
func scaleSuite(_ b: Bench) throws {
  print("scale")
  let sizes = (b.scaleObjects ?? (b.quick ? [10_000] : [10_000, 100_000])).sorted()
  let script = FileManager.default.currentDirectoryPath + "/scripts/nginx.sh"
  var server: (script: String, state: String, www: String, base: String)?
  if FileManager.default.isExecutableFile(atPath: script) {
    let www = b.work + "/scale-www"
    let state = b.work + "/scale-nginx"
    try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
    let port = try Spawn.capture([script, "start", www, state])
      .trimmingCharacters(in: .whitespacesAndNewlines)
    server = (script, state, www, "http://127.0.0.1:\(port)")
  } else {
    b.skip("scale: fetch", "run from the repository's root: scripts/nginx.sh starts the server")
  }
  defer {
    if let server {
      _ = try? Spawn.run([server.script, "stop", server.state])
      remove(server.www)
      remove(server.state)
    }
  }
  if let server { try makeRandomFile(server.www + "/fresh-4k.bin", bytes: 4096) }

  // Every store first, so each one-process latency is timed for all sizes
  // in turn (a noisy neighbour hits them alike); then the whole-store
  // commands, one store at a time, each store removed after.
  let scratch = b.work + "/scale-scratch"
  try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
  var stores: [ScaleStore] = []
  defer {
    for store in stores { remove(store.root) }
    remove(scratch)
  }
  for count in sizes {
    stores.append(try buildScaleStore(root: b.work + "/scale-\(count)", count: count))
  }
  sync()
  // Each store's rows are printed as soon as they are measured; a larger
  // store's take the smallest's as their reference.
  var smallest: [String: Series] = [:]
  func report(_ figure: Figure, _ i: Int) {
    var result = Result(
      suite: "scale", name: "\(figure.name), \(countName(sizes[i])) objects",
      parameters: ["objects": "\(sizes[i])"], unit: figure.unit, trove: figure.series,
      note: figure.note)
    if let reference = figure.reference {
      result.referenceName = reference.name
      result.reference = reference.series
    } else if i == 0 {
      smallest[figure.name] = figure.series
    } else if let reference = smallest[figure.name] {
      result.referenceName = "the same, \(countName(sizes[0])) objects"
      result.reference = reference
    }
    b.add(result)
  }
  for (i, store) in stores.enumerated() {
    report(
      Figure(
        name: "build: library put(files:)", unit: .objectsPerSecond,
        series: Series(samples: [Double(store.count) / store.putSeconds]),
        note: "group put of sources written in batches of 10,000 (to a tmpfs when there is one)"),
      i)
  }
  for (name, series) in try measureLatency(
    b, stores: stores, scratch: scratch,
    fetchURL: server.map { $0.base + "/fresh/fresh-4k.bin" })
  {
    for i in stores.indices {
      report(
        Figure(
          name: name, unit: .seconds, series: series[i],
          note: "one process per call; goal: within 1.2× of the smallest store"), i)
    }
  }
  for (i, store) in stores.enumerated() {
    try measureWhole(b, store, scratch: scratch) { report($0, i) }
    remove(store.root)
  }
}

/// A store built for the suite.
private struct ScaleStore {
  var root: String
  var count: Int
  var digests: [String]
  var putSeconds: Double
}

/// One figure of one store size; its name without the size.
private struct Figure {
  var name: String
  var unit: Unit
  var series: Series
  var note: String?
  /// A reference measured beside it, instead of the smallest store's figure.
  var reference: (name: String, series: Series)?
}

/// 10k, 100k, 1M.
private func countName(_ count: Int) -> String {
  if count >= 1_000_000 && count % 1_000_000 == 0 { return "\(count / 1_000_000)M" }
  if count >= 1_000 && count % 1_000 == 0 { return "\(count / 1_000)k" }
  return "\(count)"
}

/// The one-process latency of `has`, `get`, `put` and a fresh-hit `fetch`
/// in each store, timed in turn across the stores; per call.
private func measureLatency(
  _ b: Bench, stores: [ScaleStore], scratch: String, fetchURL: String?
) throws -> [(String, [Series])] {
  let calls = b.quick ? 10 : 40
  var rows: [(String, [Series])] = []
  func perCall(
    _ command: @escaping (ScaleStore) -> [String],
    setup: @escaping (ScaleStore) throws -> Void = { _ in }
  )
    throws -> [Series]
  {
    let bodies: [() throws -> Void] = stores.map { store in
      {
        for _ in 0..<calls {
          try setup(store)
          try Spawn.check(command(store))
        }
      }
    }
    return try b.time(bodies).map { Series(samples: $0.samples.map { $0 / Double(calls) }) }
  }
  let trove = { (store: ScaleStore) in [b.trove, "--store", store.root] }
  rows.append(
    ("has (hit), one process", try perCall { trove($0) + ["has", $0.digests[$0.count / 2]] }))
  let out = scratch + "/get-out"
  rows.append(
    (
      "get 1–8 KiB by copy, one process",
      try perCall({ trove($0) + ["get", "--mode", "copy", $0.digests[$0.count / 3], out] }) { _ in
        remove(out)
      }
    ))
  let newInput = scratch + "/put-new.bin"
  var serial: UInt64 = 0
  rows.append(
    (
      "put 4 KiB new, one process",
      try perCall({ trove($0) + ["put", newInput] }) { _ in
        serial += 1
        var bytes = [UInt8](repeating: 0xA5, count: 4096)
        withUnsafeBytes(of: serial) { bytes.replaceSubrange(0..<8, with: $0) }
        _ = FileManager.default.createFile(atPath: newInput, contents: Data(bytes))
      }
    ))
  if let fetchURL {
    for store in stores {
      remove(out)
      try Spawn.check(trove(store) + ["fetch", "-q", "-o", out, fetchURL])
    }
    rows.append(
      (
        "fetch fresh hit, one process",
        try perCall({ trove($0) + ["fetch", "-q", "-o", out, fetchURL] }) { _ in remove(out) }
      ))
  }
  remove(out)
  remove(newInput)
  return rows
}

/// The whole-store commands in one store, each timed with its peak RSS.
private func measureWhole(
  _ b: Bench, _ scale: ScaleStore, scratch: String, report: (Figure) -> Void
) throws {
  let root = scale.root
  let count = scale.count
  let probe = scale.digests[count / 2]
  let trove = [b.trove, "--store", root]
  report(
    Figure(
      name: "has: peak RSS", unit: .mebibytes,
      series: Series(samples: [
        Double(try Spawn.peakResidentBytes(trove + ["has", probe])) / Double(1 << 20)
      ])))
  let store = try Store(StoreConfiguration(root: root))

  // Whole-store commands, each timed and its peak RSS taken from one run.
  func whole(_ command: [String], repetitions: Int) throws -> (Series, Double) {
    var seconds: [Double] = []
    var peak: Int64 = 0
    for _ in 0..<repetitions {
      sync()
      let run = try Spawn.timedPeakResidentBytes(command)
      seconds.append(run.seconds)
      peak = max(peak, run.bytes)
    }
    return (Series(samples: seconds), Double(peak) / Double(1 << 20))
  }
  let heavy = b.quick || count >= 1_000_000 ? 1 : 3
  let perObject = { (s: Series) in Series(samples: s.samples.map { $0 / Double(count) }) }

  let (stats, statsRSS) = try whole(trove + ["stats"], repetitions: heavy * 5)
  report(Figure(name: "stats", unit: .seconds, series: stats, note: "goal: O(1)"))
  report(
    Figure(name: "stats: peak RSS", unit: .mebibytes, series: Series(samples: [statsRSS])))

  // `ls` of everything into a pipe; the reference lists the files.
  let ls = ["sh", "-c", "\"$0\" --store \"$1\" ls | wc -l >/dev/null", b.trove, root]
  let (lsTime, lsRSS) = try whole(ls, repetitions: heavy)
  report(
    Figure(
      name: "ls of every object to a pipe, per object", unit: .seconds, series: perObject(lsTime),
      note: "streams: peak RSS should not grow with the store"))
  let find = try whole(
    ["sh", "-c", "find \"$0\"/objects -type f | wc -l >/dev/null", root], repetitions: heavy)
  report(
    Figure(
      name: "ls of every object to a pipe", unit: .seconds, series: lsTime,
      note: "ls reads the index; find reads the fan-out folders",
      reference: ("find objects -type f | wc -l", find.0)))
  report(Figure(name: "ls: peak RSS", unit: .mebibytes, series: Series(samples: [lsRSS])))

  // `verify` beside `xxhsum -c` of the same files (listed by `ls --format
  // xxhsum`), both one thread, both from the page cache after a first read.
  let list = scratch + "/xxhsum.txt"
  try Spawn.check(trove + ["ls", "--format", "xxhsum"], output: list)
  // Read once untimed, so both read from the page cache — where a store
  // this size fits in it.
  if count < 1_000_000 { try Spawn.check(["xxhsum", "-q", "-c", list]) }
  let (verify, verifyRSS) = try whole(trove + ["verify"], repetitions: heavy)
  let xxhsum = try whole(["xxhsum", "-q", "-c", list], repetitions: heavy)
  report(
    Figure(
      name: "verify, per object", unit: .seconds, series: perObject(verify),
      note: "hashes every object and compares the index with objects/"))
  report(
    Figure(
      name: "verify", unit: .seconds, series: verify,
      note: "one thread each; verify also compares the index with objects/",
      reference: ("xxhsum -c, same files", xxhsum.0)))
  report(
    Figure(name: "verify: peak RSS", unit: .mebibytes, series: Series(samples: [verifyRSS])))

  let (reindex, reindexRSS) = try whole(trove + ["-q", "reindex"], repetitions: heavy)
  report(
    Figure(
      name: "reindex, per object", unit: .seconds, series: perObject(reindex),
      note: "reads objects/ and compares every file with its row"))
  report(
    Figure(name: "reindex: peak RSS", unit: .mebibytes, series: Series(samples: [reindexRSS])))

  var indexBytes: Int64 = 0
  for suffix in ["", "-wal"] {
    let path = root + "/index.sqlite" + suffix
    indexBytes += ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int64) ?? 0
  }
  report(
    Figure(
      name: "index bytes per object", unit: .bytesPerObject,
      series: Series(samples: [Double(indexBytes) / Double(count)]),
      note: "index.sqlite and its WAL"))

  // A sweep evicting 1% of the bytes: proportional to what it evicts. (A
  // low-water mark of 100%: the sweep stops at the budget.)
  try store.updatePolicy { $0.lowWater = 1 }
  let total = try store.statistics().allocatedBytes
  let sweepOut = scratch + "/sweep.json"
  let sweepRun = try Spawn.timedPeakResidentBytes(
    [
      "sh", "-c", "\"$0\" --store \"$1\" sweep --json --budget \"$2\" > \"$3\"", b.trove, root,
      "\(total - total / 100)", sweepOut,
    ])
  let outcome =
    (try? JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: sweepOut))))
    as? [String: Any]
  let evicted = (outcome?["removedEntries"] as? Int) ?? 0
  report(
    Figure(
      name: "sweep evicting 1% of the bytes, per evicted object", unit: .seconds,
      series: Series(samples: [sweepRun.seconds / Double(max(evicted, 1))]),
      note: "\(evicted) objects evicted in \(Unit.seconds.format(sweepRun.seconds))"))
  report(
    Figure(
      name: "sweep: peak RSS", unit: .mebibytes,
      series: Series(samples: [Double(sweepRun.bytes) / Double(1 << 20)])))
}

/// Writes the `count` objects of a scale store (the n-th from its own seed:
/// 1–8 KiB, 4 MiB every 10,000th) as source files in batches and puts each
/// batch with `put(files:)`; the put alone is timed.
private func buildScaleStore(root: String, count: Int) throws -> ScaleStore {
  remove(root)
  let store = try Store(StoreConfiguration(root: root))
  let shm = "/dev/shm"
  let sources =
    (FileManager.default.isWritableFile(atPath: shm) ? shm : root + "-sources")
    + "/trove-scale-\(getpid())"
  defer { remove(sources) }
  var digests: [String] = []
  digests.reserveCapacity(count)
  var seconds = 0.0
  let batch = 10_000
  var first = 0
  while first < count {
    remove(sources)
    try FileManager.default.createDirectory(atPath: sources, withIntermediateDirectories: true)
    var paths: [String] = []
    for n in first..<min(first + batch, count) {
      var state = UInt64(n) &* 0x9E37_79B9_7F4A_7C15 ^ 0x5CA1E
      func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
      }
      let length = n % 10_000 == 5_000 ? 4 << 20 : 1024 + Int(next() % 7169)
      var words = [UInt64](repeating: 0, count: (length + 7) / 8)
      for i in words.indices { words[i] = next() }
      let path = sources + "/\(n)"
      let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
      guard fd >= 0 else { throw Spawn.Failure(command: ["open", path], detail: "failed") }
      _ = words.withUnsafeBytes { write(fd, $0.baseAddress, length) }
      close(fd)
      paths.append(path)
    }
    let start = now()
    let results = try store.put(files: paths)
    seconds += now() - start
    for result in results { digests.append(try result.get().digest.description) }
    first += batch
  }
  return ScaleStore(root: root, count: count, digests: digests, putSeconds: seconds)
}
