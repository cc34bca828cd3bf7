import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// The built `trove` executable run as a process.
enum CLI {
  /// `.build/<config>/trove`, beside the test bundle.
  static let executable: String = {
    if let explicit = ProcessInfo.processInfo.environment["TROVE_BIN"] { return explicit }
    var dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
      let candidate = dir.appendingPathComponent("trove").path
      if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
      dir = dir.deletingLastPathComponent()
    }
    return URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
      .appendingPathComponent(".build/debug/trove").path
  }()

  /// A configuration folder (`XDG_CONFIG_HOME`) of `uid`'s for this test
  /// run: made once, that user's, mode 0700.
  static func configHome(for uid: UInt32) throws -> String {
    let base = NSTemporaryDirectory() + "trove-test-config-\(getpid())"
    let home = base + "/u\(uid)"
    configLock.lock()
    defer { configLock.unlock() }
    if !FileManager.default.fileExists(atPath: home) {
      _ = mkdir(base, 0o711)
      _ = chmod(base, 0o711)
      guard mkdir(home, 0o700) == 0 || errno == EEXIST,
        chown(home, uid, uid) == 0 || uid == geteuid()
      else { throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: home]) }
    }
    return home
  }
  private static let configLock = NSLock()

  struct Result {
    var status: Int32
    var stdout: [UInt8]
    var stderr: String
    var out: String { String(decoding: stdout, as: UTF8.self) }
    /// stderr split into lines, without the empty last one.
    var errorLines: [String] { stderr.split(separator: "\n").map(String.init) }
  }

  /// Runs `trove ARGS` (through `prefix`, e.g. setpriv, when given) with
  /// `stdin` as its input; extra environment in `environment`.
  static func run(
    _ arguments: [String], stdin: [UInt8] = [], environment: [String: String] = [:],
    prefix: [String] = []
  ) throws -> Result {
    let process = Process()
    let command = prefix + [executable] + arguments
    process.executableURL = URL(fileURLWithPath: command[0])
    process.arguments = Array(command.dropFirst())
    var env = ProcessInfo.processInfo.environment
    env.removeValue(forKey: "TROVE_STORE")
    env.removeValue(forKey: "TROVE_INJECT_FAULT")
    env.removeValue(forKey: "TROVE_DEBUG")
    // Each user's credential bindings in a folder of this test run's,
    // never in the home of whoever runs the tests.
    let uid = prefix.lazy.compactMap { $0.hasPrefix("--reuid=") ? UInt32($0.dropFirst(8)) : nil }
      .first
    env["XDG_CONFIG_HOME"] = try configHome(for: uid ?? geteuid())
    for (k, v) in environment { env[k] = v }
    process.environment = env
    // Files, not pipes: no reader threads, no deadlock on large output.
    let io = NSTemporaryDirectory() + "trove-cli-" + UUID().uuidString
    defer {
      for suffix in [".in", ".out", ".err"] {
        try? FileManager.default.removeItem(atPath: io + suffix)
      }
    }
    try Data(stdin).write(to: URL(fileURLWithPath: io + ".in"))
    _ = FileManager.default.createFile(atPath: io + ".out", contents: nil)
    _ = FileManager.default.createFile(atPath: io + ".err", contents: nil)
    let input = FileHandle(forReadingAtPath: io + ".in")!
    let output = FileHandle(forWritingAtPath: io + ".out")!
    let error = FileHandle(forWritingAtPath: io + ".err")!
    defer {
      try? input.close()
      try? output.close()
      try? error.close()
    }
    process.standardInput = input
    process.standardOutput = output
    process.standardError = error
    try process.run()
    process.waitUntilExit()
    return Result(
      status: process.terminationStatus,
      stdout: Array(try Data(contentsOf: URL(fileURLWithPath: io + ".out"))),
      stderr: String(
        decoding: try Data(contentsOf: URL(fileURLWithPath: io + ".err")), as: UTF8.self))
  }
}

/// Runs `trove --store STORE ARGS`, expecting exit 0.
@discardableResult
func trove(
  _ store: String, _ arguments: [String], environment: [String: String] = [:],
  sourceLocation: SourceLocation = #_sourceLocation
) throws -> CLI.Result {
  let run = try CLI.run(["--store", store] + arguments, environment: environment)
  #expect(
    run.status == 0, "\(arguments): \(run.status) \(run.stderr)", sourceLocation: sourceLocation)
  return run
}

/// `env -u NAME…` before trove: those variables unset.
func unsetting(_ names: [String], then prefix: [String] = []) -> [String] {
  ["/usr/bin/env"] + names.flatMap { ["-u", $0] } + prefix
}

/// Puts `bytes` (as file `name` in `scratch`) into `scratch["store"]` with
/// `trove put`, expecting exit 0; returns the digest.
func put(_ scratch: Scratch, _ name: String, _ bytes: [UInt8], key: String? = nil) throws
  -> BlobDigest
{
  let file = try scratch.write(name, bytes)
  try trove(scratch["store"], ["put"] + (key.map { ["--key", $0] } ?? []) + [file])
  return XXH3Hasher.digest(bytes)
}
