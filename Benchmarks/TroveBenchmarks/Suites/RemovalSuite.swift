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
    // The same engine again: how far two runs of one engine differ here,
    // beside which the other rows are read.
    ("nothing (the same engine again)", tuned),
    ("a row per removal record", without { $0.recordsPerRow = 1 }),
    ("triggers left on", without { $0.bulkRemovalMinimum = .max }),
    ("one unlink thread", without { $0.unlinkLanes = false }),
  ]
}()

private func removalSuite(_ b: Bench, folder: String, filesystem: String) throws {
  let count = b.sweepEntries?.max() ?? (b.quick ? 1_000 : 100_000)
  let on = filesystem == "work folder" ? "" : " on \(filesystem)"
  let root = folder + "/removal-\(count)"
  let params = ["entries": "\(count)", "entry size": "200", "filesystem": filesystem]
  let repetitions = b.quick ? 1 : 4
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
      // Every timing starts from files freshly rewritten, dated an hour
      // back, an index rebuilt from them and checkpointed (the store that
      // rebuilt it closed), and all of it synced: no variant gets cheaper
      // files, a warmer index or another's WAL to checkpoint (untimed).
      func fresh() throws -> Int64 {
        try restore(all.filter { access($0, F_OK) != 0 }, from: &files)
        let total = try {
          let store = try Store(configuration)
          try store.rebuildIndex()
          let total = try store.statistics().allocatedBytes
          try store.updatePolicy {
            $0.lowWater = 1
            $0.budget = total
          }
          return total
        }()
        sync()
        return total
      }
      // A timing ends when the store has closed, its WAL checkpointed, as
      // when a `trove` process ends.
      func timed<T>(_ operation: Int, _ body: (Store) throws -> T) throws -> T {
        var store: Store? = try Store(configuration)
        let start = now()
        let result = try body(store!)
        store = nil
        samples[v][operation].append(now() - start)
        return result
      }
      let total = try fresh()
      let tenth = try timed(0) { try $0.sweep(SweepOptions(budget: total * 9 / 10)) }
      precondition(tenth.removedEntries > 0)

      _ = try fresh()
      let emptied = try timed(1) { try $0.sweep(SweepOptions(budget: 0)) }
      precondition(emptied.removedEntries == count && leftFiles(root + "/objects") == 0)

      _ = try fresh()
      let present = try timed(2) { try $0.remove(digests) }
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
