import Foundation

/// Keeps the optimizer from deleting work whose result is unused.
@inline(never)
func blackHole<T>(_ value: T) {
  withExtendedLifetime(value) {}
}

/// Seconds since an arbitrary point.
func now() -> Double {
  var ts = timespec()
  clock_gettime(CLOCK_MONOTONIC, &ts)
  return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Repeated measurements of one quantity and their summary.
struct Series: Encodable {
  var samples: [Double]
  var median: Double {
    let s = samples.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
  }
  var min: Double { samples.min() ?? 0 }
  var max: Double { samples.max() ?? 0 }

  enum CodingKeys: String, CodingKey { case samples, median, min, max }
  func encode(to encoder: any Encoder) throws {
    var c = encoder.container(keyedBy: CodingKeys.self)
    try c.encode(samples, forKey: .samples)
    try c.encode(median, forKey: .median)
    try c.encode(min, forKey: .min)
    try c.encode(max, forKey: .max)
  }
}

/// What a figure measures and which way is better.
enum Unit: String, Encodable {
  case seconds = "s"
  case gigabytesPerSecond = "GB/s"
  case mebibytes = "MiB"
  case ratio = "×"
  case objectsPerSecond = "objects/s"
  case bytesPerObject = "B/object"

  var higherIsBetter: Bool {
    self == .gigabytesPerSecond || self == .ratio || self == .objectsPerSecond
  }

  func format(_ value: Double) -> String {
    switch self {
    case .seconds:
      if value < 1e-3 { return String(format: "%.1f µs", value * 1e6) }
      if value < 1 { return String(format: "%.2f ms", value * 1e3) }
      return String(format: "%.3f s", value)
    case .gigabytesPerSecond: return String(format: "%.2f GB/s", value)
    case .mebibytes: return String(format: "%.1f MiB", value)
    case .ratio: return String(format: "%.2f", value)
    case .objectsPerSecond: return String(format: "%.0f obj/s", value)
    case .bytesPerObject: return String(format: "%.0f B/obj", value)
    }
  }
}

/// One row of the report: Trove's figure beside a reference from the same run.
struct Result: Encodable {
  var suite: String
  var name: String
  var parameters: [String: String]
  var unit: Unit
  var trove: Series
  var referenceName: String?
  var reference: Series?
  /// How Trove compares: for times and sizes, reference ÷ Trove; for rates,
  /// Trove ÷ reference. Above 1 means Trove is better.
  var ratio: Double? {
    guard let reference, reference.median > 0, trove.median > 0 else { return nil }
    return unit.higherIsBetter ? trove.median / reference.median : reference.median / trove.median
  }
  var note: String?

  enum CodingKeys: String, CodingKey {
    case suite, name, parameters, unit, trove
    case referenceName = "reference_name"
    case reference, ratio, goal, note
  }
  func encode(to encoder: any Encoder) throws {
    var c = encoder.container(keyedBy: CodingKeys.self)
    try c.encode(suite, forKey: .suite)
    try c.encode(name, forKey: .name)
    try c.encode(parameters, forKey: .parameters)
    try c.encode(unit, forKey: .unit)
    try c.encode(trove, forKey: .trove)
    try c.encodeIfPresent(referenceName, forKey: .referenceName)
    try c.encodeIfPresent(reference, forKey: .reference)
    try c.encodeIfPresent(ratio, forKey: .ratio)
    try c.encodeIfPresent(Goals.ratio(for: self), forKey: .goal)
    try c.encodeIfPresent(note, forKey: .note)
  }
}

/// Settings of one run and the results gathered.
final class Bench {
  let quick: Bool
  let repetitions: Int
  let work: String
  let xfs: String?
  let xfsMissing: String
  let trove: String
  /// Store sizes for the sweep suite, when given on the command line.
  var sweepEntries: [Int]?
  /// Store sizes for the scale suite, when given on the command line.
  var scaleObjects: [Int]?
  /// How much backed free memory to provide before a series of timings
  /// (see ``HostMemory``): more than any one command writes.
  var warmBytes: Int
  private(set) var results: [Result] = []
  private(set) var skipped: [String] = []

  init(quick: Bool, work: String, xfs: String?, xfsMissing: String, trove: String) {
    self.quick = quick
    repetitions = quick ? 2 : 5
    self.work = work
    self.xfs = xfs
    self.xfsMissing = xfsMissing
    self.trove = trove
    warmBytes = quick ? 0 : 2 << 30
  }

  /// A size scaled down in quick mode.
  func size(_ full: Int, quick small: Int) -> Int { quick ? small : full }

  func add(_ result: Result) {
    results.append(result)
    let ratio = result.ratio.map { String(format: "%.2f×", $0) } ?? "—"
    let ref = result.reference.map { result.unit.format($0.median) } ?? "—"
    printRow(
      result.name, result.unit.format(result.trove.median), ref, result.referenceName ?? "", ratio)
  }

  func skip(_ what: String, _ why: String) {
    skipped.append("\(what): \(why)")
    print("  skipped \(what): \(why)")
  }

  /// Times `body` `repetitions` times after `setup` (untimed) each time.
  func time(_ body: () throws -> Void, setup: () throws -> Void = {}) throws -> Series {
    try withoutActuallyEscaping(body) { try time([$0], setup: setup)[0] }
  }

  /// Times several closures in turn, interleaved (a, b, a, b, …) so that a
  /// noisy neighbour hits them alike; `setup` runs untimed before each.
  func time(
    _ bodies: [() throws -> Void], setup: () throws -> Void = {}, repetitions: Int? = nil
  ) throws -> [Series] {
    var samples = [[Double]](repeating: [], count: bodies.count)
    HostMemory.warm(warmBytes)
    for round in 0..<(repetitions ?? self.repetitions) {
      for i in Self.order(bodies.count, round: round) {
        try setup()
        let start = now()
        try bodies[i]()
        samples[i].append(now() - start)
      }
    }
    return samples.map { Series(samples: $0) }
  }

  /// Times a command `repetitions` times after `setup` (untimed) each time.
  func timeCommand(
    _ command: [String], input: String? = nil, setup: () throws -> Void = {}
  ) throws -> Series {
    try timeCommands([command], input: input, setup: setup)[0]
  }

  /// Times several commands in turn, interleaved (a, b, a, b, …) so that a
  /// noisy neighbour or writeback hits them alike; `setup` runs untimed
  /// before each one, and the page cache's dirty data is flushed first so
  /// no command pays for another's writes.
  func timeCommands(
    _ commands: [[String]], input: String? = nil, setup: () throws -> Void = {}
  ) throws -> [Series] {
    var samples = [[Double]](repeating: [], count: commands.count)
    HostMemory.warm(warmBytes)
    for round in 0..<repetitions {
      for i in Self.order(commands.count, round: round) {
        try setup()
        sync()
        samples[i].append(try Spawn.check(commands[i], input: input).seconds)
      }
    }
    return samples.map { Series(samples: $0) }
  }

  /// The order of `count` contenders in a round: forwards in even rounds,
  /// backwards in odd ones. Costs that fall on whoever runs at a given
  /// position — on these VMs, the host re-backing guest memory that free
  /// page reporting returned to it, paid by the first process to write into
  /// it (Docs/Benchmarks.md, "Measuring on this VM") —
  /// then fall on every contender alike.
  static func order(_ count: Int, round: Int) -> [Int] {
    round % 2 == 0 ? Array(0..<count) : Array((0..<count).reversed())
  }
}

/// Prints one table row: name, Trove's median, the reference's, what the
/// reference is, and the ratio.
func printRow(_ name: String, _ trove: String, _ reference: String, _ what: String, _ ratio: String)
{
  func left(_ s: String, _ w: Int) -> String {
    s + String(repeating: " ", count: max(0, w - s.count))
  }
  func right(_ s: String, _ w: Int) -> String {
    String(repeating: " ", count: max(0, w - s.count)) + s
  }
  print(
    "  " + left(name, 48) + right(trove, 12) + right(reference, 12) + "  " + left(what, 26)
      + right(ratio, 8))
  fflush(nil)
}

/// Writes `bytes` pseudo-random bytes (incompressible, no repeats) to `path`.
func makeRandomFile(_ path: String, bytes: Int) throws {
  guard !FileManager.default.fileExists(atPath: path) else { return }
  let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
  guard fd >= 0 else {
    throw Spawn.Failure(command: ["open", path], detail: String(cString: strerror(errno)))
  }
  defer { close(fd) }
  var state: UInt64 = 0x1234_5678 &+ UInt64(bytes)
  let chunk = 1 << 20
  var buffer = [UInt64](repeating: 0, count: chunk / 8)
  var left = bytes
  while left > 0 {
    for i in 0..<buffer.count {
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      buffer[i] = z ^ (z >> 31)
    }
    let n = min(left, chunk)
    _ = buffer.withUnsafeBytes { write(fd, $0.baseAddress, n) }
    left -= n
  }
  fsync(fd)
}

/// Removes a path (file or folder) if present.
func remove(_ path: String) {
  try? FileManager.default.removeItem(atPath: path)
}

/// Moves `path` (if there) into the folder `graveyard` under a new name,
/// removed with the work folder at the end: on an ext4 without a journal
/// the inode allocator skips inodes freed moments ago (`recently_deleted`),
/// so files made right after thousands were removed cost more, whoever
/// makes them.
func setAside(_ path: String, in graveyard: String) {
  guard FileManager.default.fileExists(atPath: path) else { return }
  try? FileManager.default.createDirectory(atPath: graveyard, withIntermediateDirectories: true)
  try? FileManager.default.moveItem(atPath: path, toPath: graveyard + "/" + UUID().uuidString)
}

/// A human size: 1 MiB, 64 MiB, 1 GiB.
func sizeName(_ bytes: Int) -> String {
  if bytes >= 1 << 30 && bytes % (1 << 30) == 0 { return "\(bytes >> 30) GiB" }
  if bytes >= 1 << 20 && bytes % (1 << 20) == 0 { return "\(bytes >> 20) MiB" }
  if bytes >= 1 << 10 && bytes % (1 << 10) == 0 { return "\(bytes >> 10) KiB" }
  return "\(bytes) B"
}

/// The results as the Markdown table of Docs/Benchmarks.md: one row per
/// figure, Trove's median and spread beside the reference's median, the
/// ratio, and the goal the reference sets (``Goals``) with whether it is met.
func markdownTable(_ results: [Result]) -> String {
  var lines = [
    "| suite | benchmark | Trove (median) | spread | reference | reference (median) | ratio | goal |",
    "|---|---|---|---|---|---|---|---|",
  ]
  for r in results {
    let spread =
      r.trove.samples.count > 1
      ? "\(r.unit.format(r.trove.min)) – \(r.unit.format(r.trove.max))" : "—"
    var goalText = "—"
    if let goal = Goals.ratio(for: r) {
      let met = (r.ratio ?? 0) >= goal
      goalText = String(format: "≥ %.2g× ", goal) + (met ? "✔" : "✘")
    }
    let columns: [String] = [
      r.suite, r.name, r.unit.format(r.trove.median), spread, r.referenceName ?? "—",
      r.reference.map { r.unit.format($0.median) } ?? "—",
      r.ratio.map { String(format: "%.2f×", $0) } ?? "—", goalText,
    ]
    lines.append("| " + columns.joined(separator: " | ") + " |")
  }
  return lines.joined(separator: "\n") + "\n"
}
