import Foundation
@_spi(Measuring) import Trove

/// The removal engine's optimisations, each against its absence, in one
/// process: the same store of many small entries evicted by 10%, evicted
/// whole (a budget of 0) and removed by digest (`trove rm`'s path), by a
/// store that makes every optimisation and by one that makes all but one,
/// in turn. Trove's column is the tuned engine; the reference is the
/// engine without the switch the row names; above 1, the switch pays.
func removalSuite(_ b: Bench) throws {
  print("removal")
  // On the reflink XFS when there is one: unlink lanes exist only there,
  // and the work folder here is ext4 mounted `discard`, where rewriting
  // the files between timings takes minutes.
  if let xfs = b.xfs {
    try removalSuite(b, folder: xfs, filesystem: "xfs")
  } else {
    b.skip("removal on xfs", b.xfsMissing)
    try removalSuite(b, folder: b.work, filesystem: "work folder")
  }
}

private let variants: [(name: String, tuning: RemovalTuning)] = {
  let tuned = RemovalTuning.tuned
  func without(_ change: (inout RemovalTuning) -> Void) -> RemovalTuning {
    var tuning = tuned
    change(&tuning)
    return tuning
  }
  return [
    ("every optimisation", tuned),
    ("a row per removal record", without { $0.recordsPerRow = 1 }),
    ("triggers left on", without { $0.bulkRemovalMinimum = .max }),
    ("SQLite's checkpoint interval", without { $0.checkpointPages = 1000 }),
    ("one unlink thread", without { $0.unlinkLanes = false }),
    ("parts that do not grow", without { $0.partGrowth = 1 }),
  ]
}()

private func removalSuite(_ b: Bench, folder: String, filesystem: String) throws {
  let count = b.sweepEntries?.max() ?? (b.quick ? 1_000 : 100_000)
  let on = filesystem == "work folder" ? "" : " on \(filesystem)"
  let root = folder + "/removal-\(count)"
  let params = ["entries": "\(count)", "entry size": "200", "filesystem": filesystem]
  let repetitions = b.quick ? 1 : 3
  let operations = ["evict 10%", "evict all", "remove every digest"]
  var samples = [[[Double]]](
    repeating: [[Double]](repeating: [], count: operations.count), count: variants.count)

  remove(root)
  var files = try populate(root, count: count)
  let all = Array(files.keys)
  let digests = try all.map { path in
    try BlobDigest(parsing: "xxh128:" + (path.split(separator: "/").last ?? ""))
  }
  precondition(digests.count == count)
  for round in 0..<repetitions {
    for v in Bench.order(variants.count, round: round) {
      var configuration = StoreConfiguration(root: root)
      configuration.removalTuning = variants[v].tuning
      let store = try Store(configuration)
      // Every timing starts from files freshly rewritten, dated an hour
      // back, synced, and an index rebuilt from them: no variant gets
      // cheaper files or a warmer index (untimed).
      func fresh(_ paths: [String]) throws -> Int64 {
        try restore(paths.filter { access($0, F_OK) != 0 }, from: &files)
        try store.rebuildIndex()
        sync()
        return try store.statistics().allocatedBytes
      }
      let total = try fresh(all)
      try store.updatePolicy {
        $0.lowWater = 1
        $0.budget = total
      }
      var start = now()
      let tenth = try store.sweep(SweepOptions(budget: total * 9 / 10))
      samples[v][0].append(now() - start)
      precondition(tenth.removedEntries > 0)

      _ = try fresh(all)
      start = now()
      let emptied = try store.sweep(SweepOptions(budget: 0))
      samples[v][1].append(now() - start)
      precondition(emptied.removedEntries == count && leftFiles(root + "/objects") == 0)

      _ = try fresh(all)
      start = now()
      let present = try store.remove(digests)
      samples[v][2].append(now() - start)
      precondition(present.allSatisfy { $0 } && leftFiles(root + "/objects") == 0)
    }
  }
  remove(root)
  for (o, operation) in operations.enumerated() {
    for v in variants.indices.dropFirst() {
      b.add(
        Result(
          suite: "removal", name: "\(operation), \(count)\(on): \(variants[v].name)",
          parameters: params, unit: .seconds, trove: Series(samples: samples[0][o]),
          referenceName: "without: \(variants[v].name)", reference: Series(samples: samples[v][o]),
          note: "every optimisation against all but one, same store, same process"))
    }
  }
}
