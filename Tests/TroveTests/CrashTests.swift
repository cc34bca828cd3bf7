import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// Real `trove` processes run at once on one store, some SIGKILLed at
/// random moments, then the store audited object by object
/// (Support/Audit.swift). Choices (commands, files, which processes die and
/// when) come from a seed — `TROVE_STRESS_SEED` replays one — and the
/// timing from the machine. Every loop is bounded by a count and a deadline.
@Suite(
  "Crashes and concurrency: SIGKILL at random points, many processes, then an audit of every object",
  .serialized)
struct CrashTests {
  static let zstdInstalled = StoreAudit.zstd != nil

  @Test(
    "SIGKILL at random points, no evictions: every acknowledged digest stays, with its bytes",
    .enabled(
      if: zstdInstalled, "the zstd command is not installed: compressed objects cannot be audited"),
    .timeLimit(.minutes(2)))
  func killsWithoutEvictions() throws {
    let seed = StressSeed.value(default: 0xA001)
    let context = "seed \(seed): replay with TROVE_STRESS_SEED=\(seed)"
    let began = ContinuousClock.now
    let scratch = try Scratch()
    var harness = try KillHarness(
      scratch: scratch, seed: seed, context: context,
      jobs: [
        (.putFiles, 4), (.putStream, 2), (.recompress, 1), (.reindex, 1), (.sweep, 1),
        (.verifyRepair, 1),
      ])
    try harness.run(maxRounds: 150, maxKills: 150, seconds: 15)

    try Self.auditKeepingEverything(
      harness, "killsWithoutEvictions", context: context, scratch: scratch, since: began)
  }

  /// The audit of a run that evicts nothing: every object intact, verify
  /// clean, whatever a put printed (killed or not) still there, totals
  /// matching the disk, no leftovers but those of killed processes.
  fileprivate static func auditKeepingEverything(
    _ harness: KillHarness, _ name: String, context: String, scratch: Scratch,
    since began: ContinuousClock.Instant
  ) throws {
    let audit = try StoreAudit(store: harness.store, context: context, io: scratch["audit"])
    let contents = try audit.walk()
    audit.expectIntact(contents)
    let verify = try audit.expectVerifyClean(allowingRepair: true)
    try audit.expectPresent(harness.acknowledged, "acknowledged digest")
    // A repair may have adopted or removed files: count them again.
    try audit.expectTotalsMatchDisk(try audit.walk())
    audit.expectNoLeftovers(exceptFrom: harness.killedPIDs)
    harness.report(name, contents: contents, verify: verify, since: began)
  }

  @Test(
    "SIGKILL during group commits of many small files: every acknowledged digest stays, no object disagrees with its name",
    .enabled(
      if: zstdInstalled, "the zstd command is not installed: compressed objects cannot be audited"),
    .timeLimit(.minutes(2)))
  func killsDuringGroupCommits() throws {
    let seed = StressSeed.value(default: 0xD004)
    let context = "seed \(seed): replay with TROVE_STRESS_SEED=\(seed)"
    let began = ContinuousClock.now
    let scratch = try Scratch()
    var harness = try KillHarness(
      scratch: scratch, seed: seed, context: context,
      jobs: [(.putMany, 6), (.putFiles, 1), (.verifyRepair, 1)])
    try harness.run(maxRounds: 80, maxKills: 80, seconds: 12)

    try Self.auditKeepingEverything(
      harness, "killsDuringGroupCommits", context: context, scratch: scratch, since: began)
  }

  @Test(
    "SIGKILL during fetch -i of many small files: every printed digest stays, bound to its URL; every object whole; no leftovers but the killed processes'",
    .enabled(if: Nginx.executable != nil, Nginx.missing),
    .timeLimit(.minutes(2)))
  func killsDuringFetchBatches() throws {
    let seed = StressSeed.value(default: 0xF005)
    let context = "seed \(seed): replay with TROVE_STRESS_SEED=\(seed)"
    var rng = SeededGenerator(seed: seed)
    let nginx = try Nginx()
    let scratch = try Scratch()
    let store = scratch["store"]
    var urls: [String] = []
    var digestOf: [String: BlobDigest] = [:]
    var fileOf: [String: String] = [:]
    for i in 0..<120 {
      let body = StressData.noise(logUniform(4096...64 << 10, using: &rng), seed: rng.next())
      let file = try nginx.files.write("b\(i).bin", body)
      let url = nginx.url("/b\(i).bin")
      urls.append(url)
      digestOf[url] = XXH3Hasher.digest(body)
      fileOf[url] = file
    }
    var acknowledged: [BlobDigest: String] = [:]
    var boundBy: [String: BlobDigest] = [:]
    var killed: Set<Int32> = []
    let deadline = ContinuousClock.now + .seconds(12)
    var round = 0
    while round < 16 && ContinuousClock.now < deadline {
      round += 1
      // Two batches at once over overlapping lists (so both fetch some URLs).
      var started: [Spawned] = []
      for p in 0..<2 {
        let chosen = urls.shuffled(using: &rng).prefix(Int.random(in: 30...80, using: &rng))
        let list = try scratch.write(
          "list-\(round)-\(p).txt", Array(chosen.joined(separator: "\n").utf8))
        started.append(
          try Spawned(
            ["--store", store, "fetch", "-i", list, "--jobs", "8"], io: scratch["io-\(round)-\(p)"])
        )
      }
      pause(.milliseconds(Int(200 * pow(Double.random(in: 0...1, using: &rng), 2))))
      for process in started where Bool.random(using: &rng) { process.kill() }
      for process in started {
        let outcome = try process.wait()
        if outcome.killed {
          killed.insert(outcome.pid)
        } else {
          #expect(outcome.exitedCleanly, "round \(round): \(outcome) [\(context)]")
        }
        // Each line printed: `DIGEST  URL`, the fetch acknowledged.
        for (digest, url) in outcome.acknowledged {
          #expect(digestOf[url] == digest, "round \(round): \(digest) for \(url) [\(context)]")
          acknowledged[digest] = fileOf[url]
          boundBy[url] = digest
        }
      }
    }
    #expect(!acknowledged.isEmpty && !killed.isEmpty, "nothing was tested [\(context)]")
    let audit = try StoreAudit(store: store, context: context, io: scratch["audit"])
    // Before any repair: every object whole, and none acknowledged without its row.
    audit.expectIntact(try audit.walk())
    let rows = try audit.indexRows()
    for digest in Set(acknowledged.keys).subtracting(rows).sorted() {
      Issue.record("\(digest) was printed by a fetch, and the index has no row for it [\(context)]")
    }
    try audit.expectVerifyClean(allowingRepair: true)
    try audit.expectPresent(acknowledged, "fetched digest")
    let opened = try Store(StoreConfiguration(root: store))
    for (url, digest) in boundBy.sorted(by: { $0.key < $1.key }) {
      #expect(try opened.digest(forKey: url) == digest, "key \(url) [\(context)]")
    }
    audit.expectNoLeftovers(exceptFrom: killed)
  }

  @Test(
    "SIGKILL at random points among evicting sweeps: pinned digests stay, every object is intact",
    .enabled(
      if: zstdInstalled, "the zstd command is not installed: compressed objects cannot be audited"),
    .timeLimit(.minutes(2)))
  func killsWithEvictions() throws {
    let seed = StressSeed.value(default: 0xB002)
    let context = "seed \(seed): replay with TROVE_STRESS_SEED=\(seed)"
    let began = ContinuousClock.now
    let scratch = try Scratch()
    var harness = try KillHarness(
      scratch: scratch, seed: seed, context: context,
      jobs: [
        (.putFiles, 8), (.putStream, 4), (.recompress, 2), (.reindex, 2), (.sweep, 1),
        (.sweepAll, 3), (.sweepTo200K, 3), (.verifyRepair, 2),
      ])
    // Pinned before anything runs, with content no put of the loop stores.
    for (i, size) in [20_000, 300_000, 1_000_000].enumerated() {
      let data =
        i % 2 == 0
        ? StressData.text(size, seed: seed &+ UInt64(i)) : StressData.noise(size, seed: seed)
      let file = try scratch.write("pinned-\(i)", data)
      let digest = XXH3Hasher.digest(data)
      let put = try CLI.run(["--store", harness.store, "put", file])
      let pin = try CLI.run(["--store", harness.store, "pin", "--name", "keep", digest.description])
      try #require(put.status == 0 && pin.status == 0, "\(put.stderr)\(pin.stderr) [\(context)]")
      harness.pinned[digest] = file
    }
    try harness.run(maxRounds: 120, maxKills: 120, seconds: 12)

    let audit = try StoreAudit(store: harness.store, context: context, io: scratch["audit"])
    let contents = try audit.walk()
    audit.expectIntact(contents)
    let verify = try audit.expectVerifyClean(allowingRepair: true)
    try audit.expectPresent(harness.pinned, "pinned digest")
    let pins = try CLI.run(["--store", harness.store, "pins"])
    for digest in harness.pinned.keys {
      #expect(
        pins.out.contains("\(digest)  keep  never"),
        "trove pins does not list \(digest) under 'keep': \(pins.out) [\(context)]")
    }
    // A repair may have adopted or removed files: count them again.
    try audit.expectTotalsMatchDisk(try audit.walk())
    audit.expectNoLeftovers(exceptFrom: harness.killedPIDs)
    harness.report("killsWithEvictions", contents: contents, verify: verify, since: began)
  }

  @Test(
    "many processes at once, no kills: objects intact, verify clean without repair, totals match, every get right",
    .enabled(
      if: zstdInstalled, "the zstd command is not installed: compressed objects cannot be audited"),
    .timeLimit(.minutes(2)))
  func mixedWorkload() throws {
    let seed = StressSeed.value(default: 0xC003)
    let context = "seed \(seed): replay with TROVE_STRESS_SEED=\(seed)"
    let began = ContinuousClock.now
    let scratch = try Scratch()
    let store = scratch["store"]
    for folder in ["out", "io"] {
      try FileManager.default.createDirectory(
        atPath: scratch[folder], withIntermediateDirectories: true)
    }
    let setting = try CLI.run(["--store", store, "config", "set", "compression", "zstd:3"])
    try #require(setting.status == 0, "\(setting.stderr) [\(context)]")
    // ~30 distinct blobs: every digest is put, read, pinned, swept and
    // removed by several processes at once.
    let pool = try Pool(
      scratch, name: "blob", count: 30, sizes: 1_000...600_000, seed: seed)
    let keeper = (file: pool.files[0], digest: pool.digests[0])
    let put = try CLI.run(["--store", store, "put", keeper.file])
    let pin = try CLI.run(["--store", store, "pin", "--name", "keeper", keeper.digest.description])
    try #require(put.status == 0 && pin.status == 0, "\(put.stderr)\(pin.stderr) [\(context)]")

    // Six workers for 8 s, pausing together every 0.5 s: at each pause no
    // process runs and none was killed, so the index rows and the object
    // files must agree exactly (a sweep or a later put would otherwise
    // hide a transient disagreement before the end).
    let log = WorkloadLog()
    let workers = 6
    let pauses = 16
    let period = Duration.milliseconds(500)
    let start = ContinuousClock.now
    let meet = Barrier(parties: workers + 1)
    let done = DispatchSemaphore(value: 0)
    let folder = scratch.path
    for worker in 0..<workers {
      let thread = Thread {
        var rng = SeededGenerator(seed: seed ^ (UInt64(worker + 1) &* 0x2545_F491_4F6C_DD1D))
        var count = 0
        for epoch in 1...pauses {
          do {
            try Self.work(
              worker: worker, store: store, pool: pool, folder: folder,
              until: start + period * epoch, rng: &rng, count: &count, log: log)
          } catch {
            log.fail("worker \(worker): \(error)")
          }
          meet.wait()  // everyone stopped
          meet.wait()  // the store was checked
        }
        done.signal()
      }
      thread.start()
    }
    let audit = try StoreAudit(store: store, context: context, io: scratch["audit"])
    var reported = Set<BlobDigest>()
    for epoch in 1...pauses {
      meet.wait()
      let ran = log.takeRecent()
      do {
        let onDisk = try audit.digestsOnDisk()
        let rows = try audit.indexRows()
        let wrong = rows.symmetricDifference(onDisk).subtracting(reported)
        for digest in wrong.sorted() {
          reported.insert(digest)
          let name = pool.digests.firstIndex(of: digest).map { "blob-\($0)" } ?? "?"
          let touching = ran.filter {
            $0.contains(name + " ") || $0.contains(digest.hex) || $0.contains("trove sweep")
          }
          let what =
            onDisk.contains(digest)
            ? "has a file but no row in the index" : "has a row in the index but no file"
          Issue.record(
            "pause \(epoch), nothing killed: \(digest) (\(name)) \(what); since the last pause: \(touching.joined(separator: "; ")) [\(context)]"
          )
        }
        if !onDisk.contains(keeper.digest) && !reported.contains(keeper.digest) {
          reported.insert(keeper.digest)
          Issue.record("pause \(epoch): the keeper \(keeper.digest) is gone [\(context)]")
        }
      } catch {
        Issue.record("pause \(epoch): \(error) [\(context)]")
      }
      meet.wait()
    }
    for _ in 0..<workers { done.wait() }

    for failure in log.failures { Issue.record("\(failure) [\(context)]") }
    let contents = try audit.walk()
    audit.expectIntact(contents)
    // No process was killed: no orphan file, no row without a file.
    let verify = try audit.expectVerifyClean(allowingRepair: false)
    try audit.expectPresent([keeper.digest: keeper.file], "the digest pinned under 'keeper'")
    let pins = try CLI.run(["--store", store, "pins"])
    #expect(
      pins.out.contains("\(keeper.digest)  keeper  never"),
      "trove pins does not list the keeper: \(pins.out) [\(context)]")
    // A repair may have adopted or removed files: count them again.
    try audit.expectTotalsMatchDisk(try audit.walk())
    audit.expectNoLeftovers(exceptFrom: [])
    #expect(
      scratch.list("out").isEmpty,
      "gets left files beside their destinations: \(scratch.list("out")) [\(context)]")
    let seconds = (ContinuousClock.now - began).seconds
    print(
      "CrashTests.mixedWorkload: \(context); \(log.summary); verify: \(verify); "
        + "\(contents.intact.count) digests on disk; \(String(format: "%.1f", seconds)) s")
  }

  @Test(
    "a pin that succeeds while a sweep --budget 0 runs keeps its digest; a pin that fails says why in one line",
    .timeLimit(.minutes(2)))
  func pinRacingSweep() throws {
    let seed = StressSeed.value(default: 0xD004)
    let context = "seed \(seed): replay with TROVE_STRESS_SEED=\(seed)"
    var rng = SeededGenerator(seed: seed)
    let began = ContinuousClock.now
    let deadline = began + .seconds(15)
    let scratch = try Scratch()
    let store = scratch["store"]
    try FileManager.default.createDirectory(
      atPath: scratch["io"], withIntermediateDirectories: true)
    // Fillers give the sweep work besides the digest raced for.
    let fillers = try (0..<16).map { i in
      try scratch.write("filler-\(i)", StressData.noise(4096 + 512 * i, seed: seed &+ UInt64(i)))
    }
    var pinned = 0
    var refused = 0
    var lost: [Int] = []
    var round = 0
    while round < 40 && ContinuousClock.now < deadline {
      round += 1
      let data = StressData.noise(8192, seed: rng.next())
      let file = try scratch.write("raced-\(round)", data)
      let digest = XXH3Hasher.digest(data)
      let put = try CLI.run(["--store", store, "put"] + fillers + [file])
      try #require(put.status == 0, "round \(round): \(put.stderr) [\(context)]")
      let pinFirst = Bool.random(using: &rng)
      let gap = Duration.microseconds(Int.random(in: 0...8_000, using: &rng))
      let sweepArguments = ["--store", store, "sweep", "--budget", "0"]
      let pinArguments = ["--store", store, "pin", "--name", "race", digest.description]
      let first = try Spawned(
        pinFirst ? pinArguments : sweepArguments, io: scratch["io/first"])
      pause(gap)
      let second = try Spawned(
        pinFirst ? sweepArguments : pinArguments, io: scratch["io/second"])
      let outcomes = (try first.wait(), try second.wait())
      let (pin, sweep) = pinFirst ? outcomes : (outcomes.1, outcomes.0)
      #expect(sweep.exitedCleanly, "round \(round): \(sweep) [\(context)]")
      if pin.exitedCleanly {
        pinned += 1
        let has = try CLI.run(["--store", store, "has", digest.description])
        let pins = try CLI.run(["--store", store, "pins"])
        if has.status != 0 { lost.append(round) }
        #expect(
          has.status == 0,
          "round \(round): pin exited 0, yet the sweep removed \(digest) (trove has exits \(has.status)); pin \(pinFirst ? "started" : "followed") \(gap) \(pinFirst ? "before" : "after") the sweep [\(context)]"
        )
        #expect(
          pins.out.contains("\(digest)  race  never"),
          "round \(round): pin exited 0 but trove pins does not list \(digest): \(pins.out) [\(context)]"
        )
      } else {
        refused += 1
        // The sweep removed it first: "not found", said in one line.
        #expect(
          pin.exitedByItself && pin.status == 1 && pin.errorLines.count == 1
            && pin.errorLines.first?.hasPrefix("Error: ") == true,
          "round \(round): a pin that failed must exit 1 with a one-line error: \(pin) [\(context)]"
        )
      }
    }
    let seconds = (ContinuousClock.now - began).seconds
    print(
      "CrashTests.pinRacingSweep: \(context); \(round) rounds: \(pinned) pins succeeded, "
        + "\(refused) refused, \(lost.count) pinned digests swept (rounds \(lost)); "
        + "\(String(format: "%.1f", seconds)) s")
  }
}

// MARK: - Kill rounds

/// What a kill round may start.
private enum Job {
  /// `put FILE…`: 2–5 files of the pool, shared between processes (so
  /// dedup races happen), and every other time a fresh one (so publishes do).
  case putFiles
  /// `put` of 20–60 small files (one repeated, some new): a group commit.
  case putMany
  /// `put -` from a pipe that `cat` fills: a pool file, or fresh bytes.
  case putStream
  case recompress
  case reindex
  /// `sweep` with the store's settings (no budget: evicts nothing).
  case sweep
  /// `sweep --budget 0`: evicts every entry not pinned.
  case sweepAll
  /// `sweep --budget 200K`.
  case sweepTo200K
  case verifyRepair

  var evicts: Bool { self == .sweepAll || self == .sweepTo200K }
  var puts: Bool { self == .putFiles || self == .putStream || self == .putMany }
}

/// Rounds of 2–4 `trove` processes started at once, a random subset of
/// them SIGKILLed 0–80 ms after it started; between rounds the
/// compression setting is sometimes toggled, so `recompress` rewrites.
private struct KillHarness {
  let scratch: Scratch
  let store: String
  let context: String
  let jobs: [(Job, Int)]
  let pool: Pool
  /// Small files (4–32 KiB) for ``Job/putMany``.
  let smallPool: Pool
  var rng: SeededGenerator
  /// Digests that must survive every sweep, checked after every round.
  var pinned: [BlobDigest: String] = [:]
  /// Every digest a put printed (killed or not), and the file of its bytes.
  private(set) var acknowledged: [BlobDigest: String] = [:]
  /// Processes that died of the test's SIGKILL.
  private(set) var killedPIDs: Set<Int32> = []
  private(set) var rounds = 0
  private(set) var processes = 0
  private(set) var finishedAlone = 0
  private var digestOf: [String: BlobDigest] = [:]
  private var fresh = 0
  private var compression = false
  /// Rows without a file and lost pinned digests already reported.
  private var reported: Set<BlobDigest> = []
  private var orphansBefore: Set<BlobDigest> = []

  init(scratch: Scratch, seed: UInt64, context: String, jobs: [(Job, Int)]) throws {
    self.scratch = scratch
    store = scratch["store"]
    self.context = context
    self.jobs = jobs
    rng = SeededGenerator(seed: seed)
    pool = try Pool(scratch, name: "pool", count: 24, sizes: 4096...4 << 20, seed: rng.next())
    smallPool = try Pool(
      scratch, name: "small", count: 80, sizes: 4096...32 << 10, seed: seed ^ 0x5A11)
    for (file, digest) in zip(pool.files + smallPool.files, pool.digests + smallPool.digests) {
      digestOf[file] = digest
    }
    try FileManager.default.createDirectory(
      atPath: scratch["io"], withIntermediateDirectories: true)
  }

  var kills: Int { killedPIDs.count }

  /// Runs rounds until `maxRounds`, `maxKills` or `seconds` is reached.
  mutating func run(maxRounds: Int, maxKills: Int, seconds: Int) throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while rounds < maxRounds && kills < maxKills && ContinuousClock.now < deadline {
      try round()
    }
  }

  private mutating func pick() -> Job {
    var choice = Int.random(in: 0..<jobs.reduce(0) { $0 + $1.1 }, using: &rng)
    for (job, weight) in jobs {
      if choice < weight { return job }
      choice -= weight
    }
    return jobs[0].0
  }

  /// A new file no put stored before: 4 KiB–1 MiB, text or noise.
  private mutating func freshBlob() throws -> String {
    fresh += 1
    let size = logUniform(4096...1 << 20, using: &rng)
    let seed = rng.next()
    let data =
      seed % 2 == 0 ? StressData.text(size, seed: seed) : StressData.noise(size, seed: seed)
    let file = try scratch.write("fresh-\(fresh)", data)
    digestOf[file] = XXH3Hasher.digest(data)
    return file
  }

  /// A new small file (4–32 KiB) no put stored before.
  private mutating func freshSmallBlob() throws -> String {
    fresh += 1
    let data = StressData.noise(logUniform(4096...32 << 10, using: &rng), seed: rng.next())
    let file = try scratch.write("fresh-\(fresh)", data)
    digestOf[file] = XXH3Hasher.digest(data)
    return file
  }

  private mutating func round() throws {
    rounds += 1
    if Int.random(in: 0..<4, using: &rng) == 0 {
      compression.toggle()
      let set = try CLI.run([
        "--store", store, "config", "set", "compression", compression ? "zstd:3" : "none",
      ])
      #expect(set.status == 0, "round \(rounds): config set: \(set.stderr) [\(context)]")
    }
    // Every choice is drawn before anything runs: the seed alone decides them.
    var planned: [(job: Job, arguments: [String], stream: String?, killAfter: Int?)] = []
    for _ in 0..<Int.random(in: 2...4, using: &rng) {
      let job = pick()
      var stream: String?
      let command: [String]
      switch job {
      case .putFiles:
        var files = Array(
          pool.files.shuffled(using: &rng).prefix(Int.random(in: 2...5, using: &rng)))
        if Bool.random(using: &rng) {
          files.insert(try freshBlob(), at: Int.random(in: 0...files.count, using: &rng))
        }
        command = ["put"] + files
      case .putMany:
        var files = Array(
          smallPool.files.shuffled(using: &rng).prefix(Int.random(in: 20...60, using: &rng)))
        files.append(files[Int.random(in: 0..<files.count, using: &rng)])  // a duplicate inside
        for _ in 0..<Int.random(in: 0...8, using: &rng) {
          files.insert(try freshSmallBlob(), at: Int.random(in: 0...files.count, using: &rng))
        }
        command = ["put"] + files
      case .putStream:
        if Bool.random(using: &rng) {
          stream = try freshBlob()
        } else {
          stream = pool.files.randomElement(using: &rng)
        }
        command = ["put", "-"]
      case .recompress: command = ["recompress"]
      case .reindex: command = ["reindex"]
      case .sweep: command = ["sweep"]
      case .sweepAll: command = ["sweep", "--budget", "0"]
      case .sweepTo200K: command = ["sweep", "--budget", "200K"]
      case .verifyRepair: command = ["verify", "--repair"]
      }
      // 0–80 ms, skewed to the short end, where these short-lived
      // processes do their work.
      let killAfter =
        Bool.random(using: &rng) ? Int(80 * pow(Double.random(in: 0...1, using: &rng), 2)) : nil
      planned.append((job, ["--store", store] + command, stream, killAfter))
    }

    var started: [(process: Spawned, at: ContinuousClock.Instant)] = []
    for (i, plan) in planned.enumerated() {
      let process = try Spawned(plan.arguments, streaming: plan.stream, io: scratch["io/\(i)"])
      started.append((process, ContinuousClock.now))
    }
    let moments = planned.indices.compactMap { i in
      planned[i].killAfter.map { (i, started[i].at + .milliseconds($0)) }
    }.sorted { $0.1 < $1.1 }
    for (i, moment) in moments {
      pause(moment - ContinuousClock.now)
      started[i].process.kill()
    }

    var outcomes: [Outcome] = []
    var acknowledgedNow = Set<BlobDigest>()
    var acknowledgedByFinished = Set<BlobDigest>()
    for (i, plan) in planned.enumerated() {
      let outcome = try started[i].process.wait()
      outcomes.append(outcome)
      processes += 1
      if outcome.killed {
        killedPIDs.insert(outcome.pid)
      } else {
        finishedAlone += 1
        #expect(
          outcome.exitedCleanly,
          "round \(rounds): a process that was not killed failed: \(outcome) [\(context)]")
      }
      guard plan.job.puts else { continue }
      for (digest, name) in outcome.acknowledged {
        let source = name == "-" ? plan.stream ?? name : name
        #expect(
          digestOf[source] == digest,
          "round \(rounds): put printed \(digest) for \(source) [\(context)]")
        acknowledged[digest] = source
        acknowledgedNow.insert(digest)
        if !outcome.killed { acknowledgedByFinished.insert(digest) }
      }
    }
    try checkRound(
      outcomes, acknowledged: acknowledgedNow, byFinished: acknowledgedByFinished,
      evicting: planned.contains { $0.job.evicts })
  }

  /// What must hold after any round, with the store at rest.
  private mutating func checkRound(
    _ outcomes: [Outcome], acknowledged: Set<BlobDigest>, byFinished: Set<BlobDigest>,
    evicting: Bool
  ) throws {
    let audit = try StoreAudit(store: store, context: context, io: scratch["io"])
    let said = outcomes.map(\.description).joined(separator: "; ")
    let onDisk = try audit.digestsOnDisk()
    let rows = try audit.indexRows()
    // Removal deletes the row first, then the file: a crash leaves an
    // orphan file, never a row without a file (Docs/OnDiskFormat.md).
    for digest in rows.subtracting(onDisk).sorted() where !reported.contains(digest) {
      reported.insert(digest)
      Issue.record(
        "round \(rounds): the index has a row for \(digest) but objects/ has no file (a crash leaves orphan files, never this); the round ran \(said) [\(context)]"
      )
    }
    // Orphan files come from crashes only.
    let orphans = onDisk.subtracting(rows)
    var newOrphans = Set<BlobDigest>()
    if !outcomes.contains(where: \.killed) {
      newOrphans = orphans.subtracting(orphansBefore)
      for digest in newOrphans.sorted() {
        Issue.record(
          "round \(rounds), in which nothing was killed: \(digest) has a file but no row in the index; the round ran \(said) [\(context)]"
        )
      }
    }
    orphansBefore = orphans
    // Nothing evicts: what a put acknowledged, killed or not, has its file,
    // and what a put that ran to its end acknowledged has its row too.
    if !evicting {
      for digest in acknowledged.subtracting(onDisk).sorted() {
        Issue.record(
          "round \(rounds), which evicts nothing: \(digest) was acknowledged, then its file is gone; the round ran \(said) [\(context)]"
        )
      }
      let unrecorded = byFinished.subtracting(rows).subtracting(newOrphans)
      for digest in unrecorded.sorted() where onDisk.contains(digest) {
        Issue.record(
          "round \(rounds), which evicts nothing: \(digest) was acknowledged by a put that was not killed, then its row is gone from the index; the round ran \(said) [\(context)]"
        )
      }
    }
    for digest in pinned.keys.sorted() where !onDisk.contains(digest) && !reported.contains(digest)
    {
      reported.insert(digest)
      Issue.record(
        "round \(rounds): pinned \(digest) is gone; the round ran \(said) [\(context)]")
    }
  }

  /// One line for the test log: what ran, what was found.
  func report(
    _ name: String, contents: StoreAudit.Contents, verify: StoreAudit.VerifyRun,
    since began: ContinuousClock.Instant
  ) {
    let seconds = (ContinuousClock.now - began).seconds
    print(
      "CrashTests.\(name): \(context); \(rounds) rounds, \(processes) processes, "
        + "\(kills) killed, \(finishedAlone) ended by themselves; "
        + "\(acknowledged.count) digests acknowledged, \(contents.intact.count) on disk "
        + "(\(contents.files.filter(\.compressed).count) compressed files, "
        + "\(contents.twins.count) in both forms); first verify: \(verify); "
        + "\(String(format: "%.1f", seconds)) s")
  }
}

// MARK: - Mixed workload

extension CrashTests {
  /// One kind of operation of the mixed workload.
  fileprivate enum Operation: String, CaseIterable {
    case put, putStream, get, has, pin, unpin, sweep, rm

    var weight: Int {
      switch self {
      case .put: 5
      case .get: 4
      case .has, .pin, .unpin, .sweep: 2
      case .putStream, .rm: 1
      }
    }

    /// Exit statuses that need no explanation: 1 is "not there" (another
    /// process removed or swept it, or never put it, or no such pin).
    var allowed: Set<Int32> {
      switch self {
      case .put, .putStream, .sweep: [0]
      case .get, .has, .pin, .unpin, .rm: [0, 1]
      }
    }
  }

  /// One worker of the mixed workload: operations one after another until
  /// `end` (and at most 400 in all), each a `trove` process.
  fileprivate static func work(
    worker: Int, store: String, pool: Pool, folder: String, until end: ContinuousClock.Instant,
    rng: inout SeededGenerator, count n: inout Int, log: WorkloadLog
  ) throws {
    let total = Operation.allCases.reduce(0) { $0 + $1.weight }
    while n < 400 && ContinuousClock.now < end {
      n += 1
      var choice = Int.random(in: 0..<total, using: &rng)
      let operation = Operation.allCases.first { op in
        if choice < op.weight { return true }
        choice -= op.weight
        return false
      }!
      let i = Int.random(in: 0..<pool.files.count, using: &rng)
      let digest = pool.digests[i].description
      let destination = folder + "/out/w\(worker)-\(n)"
      var stream: String?
      var files: [String] = []
      let command: [String]
      switch operation {
      case .put:
        files = Array(pool.files.shuffled(using: &rng).prefix(Int.random(in: 1...4, using: &rng)))
        command = ["put"] + files
      case .putStream:
        stream = pool.files[i]
        command = ["put", "-"]
      case .get: command = ["get", digest, destination]
      case .has: command = ["has", digest]
      case .pin: command = ["pin", "--name", "w\(worker)", digest]
      case .unpin: command = ["unpin", "--name", "w\(worker)", digest]
      case .sweep:
        command = ["sweep", "--budget", Bool.random(using: &rng) ? "0" : "200K"]
      case .rm:
        // Never the keeper: rm takes a digest's pins with it.
        command = [
          "rm", pool.digests[Int.random(in: 1..<pool.files.count, using: &rng)].description,
        ]
      }
      let outcome = try Spawned(
        ["--store", store] + command, streaming: stream, io: folder + "/io/w\(worker)"
      ).wait()
      log.count(operation, outcome, worker: worker)
      guard outcome.exitedByItself, operation.allowed.contains(outcome.status) else {
        log.fail("worker \(worker), operation \(n): \(outcome)")
        continue
      }
      switch operation {
      case .put, .putStream:
        let expected = stream.map { [($0, pool.digests[i])] } ?? files.map { ($0, pool.digest($0)) }
        let printed = outcome.acknowledged.map {
          ($0.name == "-" ? stream ?? "-" : $0.name, $0.digest)
        }
        if printed.map(\.0) != expected.map(\.0) || printed.map(\.1) != expected.map(\.1) {
          log.fail("worker \(worker), operation \(n): \(outcome) printed \(outcome.out)")
        }
      case .get where outcome.status == 0:
        let got = try contents(destination)
        if got != (try contents(pool.files[i])) {
          log.fail(
            "worker \(worker), operation \(n): \(outcome) wrote \(got.count) bytes that are not \(digest)"
          )
        }
        try FileManager.default.removeItem(atPath: destination)
      default: break
      }
    }
  }
}

/// What the workers did and what went wrong, shared between their threads.
private final class WorkloadLog: @unchecked Sendable {
  private let lock = NSLock()
  private var failed: [String] = []
  private var counts: [String: Int] = [:]
  private var recent: [String] = []

  func fail(_ message: String) {
    lock.withLock { failed.append(message) }
  }

  func count(_ operation: CrashTests.Operation, _ outcome: Outcome, worker: Int) {
    let key = "\(operation.rawValue) \(outcome.signaled ? "signal" : "exit") \(outcome.status)"
    lock.withLock {
      counts[key, default: 0] += 1
      recent.append("worker \(worker): \(outcome)")
    }
  }

  /// What ran since the last call.
  func takeRecent() -> [String] {
    lock.withLock {
      defer { recent = [] }
      return recent
    }
  }

  var failures: [String] { lock.withLock { failed } }

  /// `get exit 0: 120, get exit 1: 30, …`
  var summary: String {
    lock.withLock {
      "\(counts.values.reduce(0, +)) operations ("
        + counts.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(
          separator: ", ") + ")"
    }
  }
}

/// Threads meeting: each `wait()` returns once all `parties` called it.
private final class Barrier: @unchecked Sendable {
  private let condition = NSCondition()
  private let parties: Int
  private var arrived = 0
  private var generation = 0

  init(parties: Int) { self.parties = parties }

  func wait() {
    condition.lock()
    defer { condition.unlock() }
    let current = generation
    arrived += 1
    if arrived == parties {
      arrived = 0
      generation += 1
      condition.broadcast()
    } else {
      while generation == current { condition.wait() }
    }
  }
}

// MARK: - Data

/// Files of a test, with their digests: sizes spread evenly on a log
/// scale over `sizes`, text-like (compressible) and noise in turn.
private final class Pool: Sendable {
  let files: [String]
  let digests: [BlobDigest]

  init(_ scratch: Scratch, name: String, count: Int, sizes: ClosedRange<Int>, seed: UInt64)
    throws
  {
    var rng = SeededGenerator(seed: seed)
    var files: [String] = []
    var digests: [BlobDigest] = []
    let low = log(Double(sizes.lowerBound))
    let high = log(Double(sizes.upperBound))
    for i in 0..<count {
      let position = (Double(i) + Double.random(in: 0..<1, using: &rng)) / Double(count)
      let size = min(sizes.upperBound, Int(exp(low + position * (high - low))))
      let data =
        i % 2 == 0
        ? StressData.text(size, seed: rng.next()) : StressData.noise(size, seed: rng.next())
      files.append(try scratch.write("\(name)-\(i)", data))
      digests.append(XXH3Hasher.digest(data))
    }
    self.files = files
    self.digests = digests
  }

  func digest(_ file: String) -> BlobDigest {
    digests[files.firstIndex(of: file)!]
  }
}

/// Bytes for stress tests, made fast enough in a debug build.
enum StressData {
  /// Text-like bytes: a 16 KiB block of words repeated under numbered
  /// headers; zstd shrinks it several times, so it is stored compressed.
  static func text(_ count: Int, seed: UInt64) -> [UInt8] {
    var rng = SeededGenerator(seed: seed)
    let words = [
      "trove", "cache", "digest", "clone", "zstd", "budget", "sweep", "entry", "object", "index",
      "pin", "lease", "verify", "repair", "orphan", "stream",
    ].map { Array($0.utf8) }
    var block: [UInt8] = []
    block.reserveCapacity(16_500)
    while block.count < 16_384 {
      block += words[Int(rng.next() % UInt64(words.count))]
      block.append(rng.next() % 8 == 0 ? 10 : 32)
    }
    var out: [UInt8] = []
    out.reserveCapacity(count + block.count + 64)
    var n = 0
    while out.count < count {
      out += Array("\(seed) block \(n)\n".utf8)
      out += block
      n += 1
    }
    return Array(out.prefix(count))
  }

  /// Incompressible bytes from `seed`.
  static func noise(_ count: Int, seed: UInt64) -> [UInt8] {
    var rng = SeededGenerator(seed: seed)
    var out = [UInt8](repeating: 0, count: count)
    out.withUnsafeMutableBytes { raw in
      var i = 0
      while i + 8 <= count {
        raw.storeBytes(of: rng.next(), toByteOffset: i, as: UInt64.self)
        i += 8
      }
      while i < count {
        raw[i] = UInt8(truncatingIfNeeded: rng.next())
        i += 1
      }
    }
    return out
  }
}

/// A size drawn evenly on a log scale.
private func logUniform(_ sizes: ClosedRange<Int>, using rng: inout SeededGenerator) -> Int {
  let low = log(Double(sizes.lowerBound))
  let high = log(Double(sizes.upperBound))
  return min(sizes.upperBound, Int(exp(Double.random(in: low...high, using: &rng))))
}

/// Sleeps for `duration` (nothing if it is not positive).
private func pause(_ duration: Duration) {
  guard duration > .zero else { return }
  let (seconds, attoseconds) = duration.components
  usleep(UInt32(seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
}
