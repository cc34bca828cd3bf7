import Foundation

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// SplitMix64: a seeded generator, so a stress test's choices (which
/// commands, which files, which processes to kill and when) are the same
/// for the same seed. Only the timing of the machine varies.
struct SeededGenerator: RandomNumberGenerator {
  private var state: UInt64

  init(seed: UInt64) { state = seed }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// The seed of a stress test: `TROVE_STRESS_SEED` (decimal or 0x hex) when
/// set, so a failure can be replayed; else the test's own fixed seed.
enum StressSeed {
  static func value(default fallback: UInt64) -> UInt64 {
    guard let text = ProcessInfo.processInfo.environment["TROVE_STRESS_SEED"] else {
      return fallback
    }
    if text.hasPrefix("0x") { return UInt64(text.dropFirst(2), radix: 16) ?? fallback }
    return UInt64(text) ?? fallback
  }
}

/// A process started in the background (`trove`, or a tool such as `zstd`),
/// with its output going to files, that the test may SIGKILL at any moment.
///
/// The process is reaped by Foundation; `kill()` signals it only while
/// `isRunning` says it has not been reaped, so the signal never reaches a
/// process id reused by someone else.
final class Spawned {
  let arguments: [String]
  /// The executable's name (`trove`, `zstd`).
  let program: String
  let process = Process()
  /// `cat FILE` feeding the process's standard input through a pipe.
  private let feeder: Process?
  private let io: String
  private let handles: [FileHandle]
  private(set) var killSent = false

  /// Starts `executable ARGS`. With `streaming`, standard input is a pipe
  /// that `cat` fills from that file (a real stream, not a regular file);
  /// otherwise it is /dev/null. stdout and stderr go to `io.out` and `io.err`.
  /// `environment` is added to this process's.
  init(
    executable: String = CLI.executable, _ arguments: [String], streaming: String? = nil,
    io: String, environment: [String: String] = [:]
  ) throws {
    self.arguments = arguments
    program = (executable as NSString).lastPathComponent
    self.io = io
    _ = FileManager.default.createFile(atPath: io + ".out", contents: nil)
    _ = FileManager.default.createFile(atPath: io + ".err", contents: nil)
    let output = try FileHandle(forWritingTo: URL(fileURLWithPath: io + ".out"))
    let error = try FileHandle(forWritingTo: URL(fileURLWithPath: io + ".err"))
    let null = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/dev/null"))
    handles = [output, error, null]
    var env = ProcessInfo.processInfo.environment
    env.removeValue(forKey: "TROVE_STORE")
    env.removeValue(forKey: "TROVE_INJECT_FAULT")
    env.removeValue(forKey: "TROVE_DEBUG")
    // The same credential bindings as a command run by `CLI.run`.
    env["XDG_CONFIG_HOME"] = try CLI.configHome(for: geteuid())
    env.merge(environment) { $1 }
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.environment = env
    process.standardOutput = output
    process.standardError = error
    if let streaming {
      // Foundation closes the parent's ends of a Pipe once each side runs.
      let pipe = Pipe()
      let cat = Process()
      cat.executableURL = URL(fileURLWithPath: "/bin/cat")
      cat.arguments = [streaming]
      cat.standardInput = null
      cat.standardOutput = pipe
      cat.standardError = null
      process.standardInput = pipe
      try cat.run()
      feeder = cat
    } else {
      process.standardInput = null
      feeder = nil
    }
    try process.run()
  }

  var pid: Int32 { process.processIdentifier }

  /// Sends SIGKILL if the process is still running; whether it was sent.
  @discardableResult
  func kill() -> Bool {
    guard process.isRunning else { return false }
    killSent = Glibc.kill(process.processIdentifier, SIGKILL) == 0
    return killSent
  }

  /// Waits for the process (and its feeder) to end and reads what it printed.
  func wait() throws -> Outcome {
    process.waitUntilExit()
    feeder?.waitUntilExit()
    for handle in handles { try? handle.close() }
    defer {
      try? FileManager.default.removeItem(atPath: io + ".out")
      try? FileManager.default.removeItem(atPath: io + ".err")
    }
    let signaled = process.terminationReason == .uncaughtSignal
    return Outcome(
      program: program, arguments: arguments, pid: process.processIdentifier,
      killed: signaled && killSent && process.terminationStatus == SIGKILL,
      signaled: signaled, status: process.terminationStatus,
      stdout: try contents(io + ".out"),
      stderr: String(decoding: try contents(io + ".err"), as: UTF8.self))
  }
}

/// How a spawned process ended and what it printed.
struct Outcome: CustomStringConvertible {
  var program: String
  var arguments: [String]
  var pid: Int32
  /// It died of the SIGKILL the test sent.
  var killed: Bool
  /// It died of a signal (`status` is then the signal's number).
  var signaled: Bool
  var status: Int32
  var stdout: [UInt8]
  var stderr: String

  /// It ran to its end by itself and exited 0.
  var exitedCleanly: Bool { !signaled && status == 0 }

  /// It ran to its end by itself (whatever its status).
  var exitedByItself: Bool { !signaled }

  var out: String { String(decoding: stdout, as: UTF8.self) }

  /// stderr split into lines, without the empty last one.
  var errorLines: [String] { stderr.split(separator: "\n").map(String.init) }

  /// The `DIGEST  NAME` lines a put printed in full (a line cut short by
  /// a kill is not an acknowledgement): what it told its caller is stored.
  var acknowledged: [(digest: BlobDigest, name: String)] {
    var lines = out.split(separator: "\n", omittingEmptySubsequences: false)
    lines.removeLast()  // after the last newline: empty, or a line cut short
    return lines.compactMap { line in
      guard let space = line.firstRange(of: "  "),
        let digest = try? BlobDigest(parsing: String(line[..<space.lowerBound]))
      else { return nil }
      return (digest, String(line[space.upperBound...]))
    }
  }

  /// `trove put a b (pid 123): killed`, or `…: exit 74, stderr: …`.
  var description: String {
    var shown: [String] = []
    var skip = false
    for argument in arguments {
      if skip {
        skip = false
      } else if argument == "--store" {
        skip = true
      } else {
        shown.append(argument.hasPrefix("/") ? (argument as NSString).lastPathComponent : argument)
      }
    }
    let command = ([program] + shown).joined(separator: " ")
    let end =
      killed
      ? "killed" : signaled ? "died of signal \(status)" : "exit \(status)"
    let error = stderr.isEmpty ? "" : ", stderr: " + stderr.trimmingCharacters(in: .newlines)
    return "\(command) (pid \(pid)): \(end)\(error)"
  }
}
