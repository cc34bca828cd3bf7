import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A `trove serve` running in the background for a benchmark, as a service
/// runs it: started on a free port of 127.0.0.1, stopped with SIGTERM.
final class ServeProcess {
  let process = Process()
  /// Its base URL, `http://127.0.0.1:PORT`.
  private(set) var url = ""
  private let log: String

  /// Starts `trove --store STORE serve` with `arguments` and waits until it
  /// prints the address it listens on; stderr goes to `log`.
  init(trove: String, store: String, arguments: [String], log: String) throws {
    self.log = log
    process.executableURL = URL(fileURLWithPath: trove)
    process.arguments = ["--store", store, "serve", "--listen", "127.0.0.1:0"] + arguments
    _ = FileManager.default.createFile(atPath: log, contents: nil)
    process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
    try process.run()
    for _ in 0..<250 where url.isEmpty {
      usleep(20_000)
      let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
      if let range = text.range(of: "on http://"),
        let end = text[range.upperBound...].firstIndex(of: "/")
      {
        url = "http://" + text[range.upperBound..<end]
      }
    }
    guard !url.isEmpty else {
      stop()
      throw Spawn.Failure(
        command: ["trove", "serve"],
        detail: "did not start: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
    }
  }

  /// The process's peak resident set so far, in bytes (`VmHWM` of
  /// /proc/PID/status): the server's own, not inherited from this process.
  var peakResidentBytes: Int64? {
    guard
      let text = try? String(
        contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
      let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
      let kib = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first
        .flatMap({ Int64($0) })
    else { return nil }
    return kib * 1024
  }

  /// Stops it (SIGTERM) and waits for it to exit.
  func stop() {
    if process.isRunning {
      kill(process.processIdentifier, SIGTERM)
      process.waitUntilExit()
    }
  }

  deinit { stop() }
}
