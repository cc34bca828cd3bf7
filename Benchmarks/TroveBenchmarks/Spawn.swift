import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Runs a command as a child process with `posix_spawn` and `wait4`, so its
/// wall time and its own peak RSS are measured exactly.
enum Spawn {
  struct Outcome {
    var status: Int32
    var seconds: Double
    /// The child's peak resident set, in bytes (`ru_maxrss`).
    var peakResidentBytes: Int64
  }

  struct Failure: Error, CustomStringConvertible {
    let command: [String]
    let detail: String
    var description: String {
      let shown = command.prefix(6).joined(separator: " ") + (command.count > 6 ? " …" : "")
      return "'\(shown)' \(detail)"
    }
  }

  /// Runs `command` (a path or a name on PATH) with stdin from `input` and
  /// stdout to `output` (default /dev/null); stderr is inherited.
  @discardableResult
  static func run(
    _ command: [String], input: String? = nil, output: String? = nil, errors: String? = nil
  ) throws -> Outcome {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, input ?? "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(
      &actions, 1, output ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    if let errors {
      posix_spawn_file_actions_addopen(&actions, 2, errors, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    }
    let argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
    defer { for p in argv { free(p) } }
    var pid: pid_t = 0
    let clock = ContinuousClock()
    let start = clock.now
    let rc = posix_spawnp(&pid, command[0], &actions, nil, argv, environ)
    guard rc == 0 else {
      throw Failure(command: command, detail: "could not start: \(String(cString: strerror(rc)))")
    }
    var status: Int32 = 0
    var usage = rusage()
    while wait4(pid, &status, 0, &usage) == -1 && errno == EINTR {}
    let elapsed = clock.now - start
    let seconds =
      Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let exit = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    return Outcome(status: exit, seconds: seconds, peakResidentBytes: Int64(usage.ru_maxrss) * 1024)
  }

  /// Runs `command` and fails unless it exits 0; its stderr is kept out of
  /// the report and quoted in the failure.
  @discardableResult
  static func check(_ command: [String], input: String? = nil, output: String? = nil) throws
    -> Outcome
  {
    let errors = NSTemporaryDirectory() + "trove-bench-\(UUID().uuidString).err"
    defer { unlink(errors) }
    let outcome = try run(command, input: input, output: output, errors: errors)
    guard outcome.status == 0 else {
      let text = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
      throw Failure(
        command: command,
        detail:
          "exited with status \(outcome.status): \(text.trimmingCharacters(in: .whitespacesAndNewlines))"
      )
    }
    return outcome
  }

  /// Runs `command` and returns what it printed on stdout (or on stderr).
  static func capture(_ command: [String], stderr: Bool = false) throws -> String {
    let path = NSTemporaryDirectory() + "trove-bench-\(UUID().uuidString).out"
    defer { unlink(path) }
    let outcome = try run(command, output: stderr ? nil : path, errors: stderr ? path : nil)
    guard outcome.status == 0 else {
      throw Failure(command: command, detail: "exited with status \(outcome.status)")
    }
    return (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
  }

  /// The peak RSS in bytes of `command`, measured by GNU time in a process
  /// of its own: `wait4`'s `ru_maxrss` for a child of this (large) process
  /// would include this process's own footprint, inherited until `exec`.
  static func peakResidentBytes(_ command: [String]) throws -> Int64 {
    try timedPeakResidentBytes(command).bytes
  }

  /// ``peakResidentBytes(_:)`` and the seconds `command` took, from one run.
  static func timedPeakResidentBytes(_ command: [String]) throws -> (
    seconds: Double, bytes: Int64
  ) {
    let path = NSTemporaryDirectory() + "trove-bench-\(UUID().uuidString).rss"
    defer { unlink(path) }
    let seconds = try check(["/usr/bin/time", "-f", "%M", "-o", path] + command).seconds
    let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    guard let kib = Int64(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
      throw Failure(command: command, detail: "GNU time printed no peak RSS: '\(text)'")
    }
    return (seconds, kib * 1024)
  }
}
