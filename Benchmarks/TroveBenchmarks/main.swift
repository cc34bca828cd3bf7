import Foundation

/// trove-bench: how fast Trove is beside the tools users would otherwise use.
/// Every figure is printed beside a reference measured in the same run.
///
///   trove-bench [--quick] [--suite hash|put|get|sweep|compression|memory|fetch|process|small|small-library|fetch-many|remote|remote-s3|remote-redis|removal|serve|scale|chunks]...
///               [--json PATH] [--markdown PATH] [--work DIR] [--xfs DIR]
///               [--trove PATH] [--sweep-entries N[,N...]] [--scale-objects N[,N...]]

let suites: [(String, (Bench) throws -> Void)] = [
  ("hash", hashSuite), ("put", putSuite), ("get", getSuite), ("sweep", sweepSuite),
  ("compression", compressionSuite), ("memory", memorySuite), ("fetch", fetchSuite),
  ("process", processSuite), ("small", smallSuite), ("remote", remoteSuite),
  ("removal", removalSuite), ("serve", serveSuite), ("remote-s3", remoteS3Suite),
  ("small-library", smallLibrarySuite), ("fetch-many", fetchManySuite), ("scale", scaleSuite),
  ("chunks", chunksSuite),
  ("remote-redis", remoteRedisSuite),
]

/// Prints the usage: on stdout with status 0 when asked for (`--help`),
/// on stderr with status 64 after a wrong argument.
@MainActor func usage(asked: Bool = false) -> Never {
  (asked ? FileHandle.standardOutput : FileHandle.standardError).write(
    Data(
      """
      usage: trove-bench [--quick] [--suite NAME]... [--json PATH] [--markdown PATH] [--work DIR]
                         [--xfs DIR] [--trove PATH] [--sweep-entries N[,N...]] [--scale-objects N[,N...]]
        suites: \(suites.map(\.0).joined(separator: ", ")) (all but removal, remote-s3, remote-redis,
                 small-library and fetch-many by default; those four are rows of remote, small and fetch alone)
        --xfs DIR   a folder on a reflink filesystem (default: $TROVE_BENCH_XFS) for the clone figures
        --sweep-entries  store sizes for the sweep suite (default 10000,100000; quick 1000);
                         the largest for the removal suite (default 100000)
        --scale-objects  store sizes for the scale suite (default 10000,100000; quick 10000)
        --markdown PATH  also write the results as a Markdown table (as in Docs/Benchmarks.md)

      """.utf8))
  exit(asked ? 0 : 64)
}

var quick = false
var chosen: [String] = []
var jsonPath = ".build/benchmarks/latest.json"
var markdownPath: String?
var work: String?
var xfs = ProcessInfo.processInfo.environment["TROVE_BENCH_XFS"]
var sweepEntries: [Int]?
var scaleObjects: [Int]?
var trovePath = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
  .appendingPathComponent("trove").path
var args = CommandLine.arguments.dropFirst()
@MainActor func value() -> String {
  guard let next = args.popFirst() else { usage() }
  return next
}
/// The next argument as a list of positive counts (`10000,100000`).
@MainActor func counts(_ option: String) -> [Int] {
  let text = value()
  let parts = text.split(separator: ",", omittingEmptySubsequences: false)
  let counts = parts.compactMap { Int($0) }.filter { $0 > 0 }
  guard !counts.isEmpty, counts.count == parts.count else {
    FileHandle.standardError.write(Data("trove-bench: invalid \(option) '\(text)'\n".utf8))
    usage()
  }
  return counts
}
while let arg = args.popFirst() {
  switch arg {
  case "--quick": quick = true
  case "--suite": chosen.append(value())
  case "--json": jsonPath = value()
  case "--markdown": markdownPath = value()
  case "--work": work = value()
  case "--xfs": xfs = value()
  case "--trove": trovePath = value()
  case "--sweep-entries": sweepEntries = counts("--sweep-entries")
  case "--scale-objects": scaleObjects = counts("--scale-objects")
  case "-h", "--help": usage(asked: true)
  default:
    FileHandle.standardError.write(Data("trove-bench: unknown argument '\(arg)'\n".utf8))
    usage()
  }
}
for name in chosen where !suites.contains(where: { $0.0 == name }) {
  FileHandle.standardError.write(Data("trove-bench: unknown suite '\(name)'\n".utf8))
  usage()
}
guard FileManager.default.isExecutableFile(atPath: trovePath) else {
  FileHandle.standardError.write(
    Data("trove-bench: no trove executable at '\(trovePath)' (build it, or pass --trove)\n".utf8))
  exit(66)
}

let workDir = work ?? NSTemporaryDirectory() + "trove-bench-\(getpid())"
try? FileManager.default.createDirectory(atPath: workDir, withIntermediateDirectories: true)
var xfsDir: String?
if let xfs {
  xfsDir = xfs + "/trove-bench-\(getpid())"
  try? FileManager.default.createDirectory(atPath: xfsDir!, withIntermediateDirectories: true)
}
let bench = Bench(
  quick: quick, work: workDir, xfs: xfsDir,
  xfsMissing:
    "no reflink filesystem given (--xfs DIR or TROVE_BENCH_XFS; scripts/bench.sh mounts one)",
  trove: trovePath)
bench.sweepEntries = sweepEntries
bench.scaleObjects = scaleObjects

let cpu =
  (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
  .split(separator: "\n").first { $0.hasPrefix("model name") }?
  .split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "unknown"
var uts = utsname()
uname(&uts)
let kernel = withUnsafeBytes(of: uts.release) {
  String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
}
let date = Date().formatted(.iso8601)
print(
  "trove-bench \(quick ? "(quick) " : "")— \(date), \(cpu), \(ProcessInfo.processInfo.activeProcessorCount) cores, Linux \(kernel)"
)
print("  work folder: \(workDir); reflink folder: \(xfsDir ?? "none")")
let memory = HostMemory.reporting
print("  memory: \(memory)")
printRow("benchmark", "trove", "reference", "reference is", "ratio")

var failed = false
// The removal suite measures the engine against itself, not a reference
// users would pick instead: it runs only when asked for.
for (name, run) in suites
where chosen.isEmpty
  ? !["removal", "remote-s3", "remote-redis", "small-library", "fetch-many"].contains(name)
  : chosen.contains(name)
{
  do {
    try run(bench)
  } catch {
    FileHandle.standardError.write(Data("trove-bench: suite \(name) failed: \(error)\n".utf8))
    failed = true
  }
}
remove(workDir)
if let xfsDir { remove(xfsDir) }

struct Report: Encodable {
  var date: String
  var cpu: String
  var cores: Int
  var kernel: String
  var memory: String
  var quick: Bool
  var repetitions: Int
  var results: [Result]
  var skipped: [String]
}
let report = Report(
  date: date, cpu: cpu, cores: ProcessInfo.processInfo.activeProcessorCount, kernel: kernel,
  memory: memory, quick: quick, repetitions: bench.repetitions, results: bench.results,
  skipped: bench.skipped)
let encoder = JSONEncoder()
encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
if let data = try? encoder.encode(report) {
  try? FileManager.default.createDirectory(
    atPath: URL(fileURLWithPath: jsonPath).deletingLastPathComponent().path,
    withIntermediateDirectories: true)
  if FileManager.default.createFile(atPath: jsonPath, contents: data) {
    print("results: \(jsonPath)")
  }
}
if let markdownPath {
  if FileManager.default.createFile(
    atPath: markdownPath, contents: Data(markdownTable(bench.results).utf8))
  {
    print("table: \(markdownPath)")
  } else {
    FileHandle.standardError.write(Data("trove-bench: cannot write '\(markdownPath)'\n".utf8))
    failed = true
  }
}
print("ratio: above 1 means Trove is faster (or smaller) than the reference")
exit(failed ? 1 : 0)
