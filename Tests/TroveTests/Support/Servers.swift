import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The repository's root, found from this file's path.
let repositoryRoot = URL(fileURLWithPath: #filePath)
  .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
  .deletingLastPathComponent().path

/// A real nginx (Debian nginx-light) serving a folder on 127.0.0.1 at a
/// free port, started by `scripts/nginx.sh` and stopped when dropped.
final class Nginx {
  static let executable = ["/usr/sbin/nginx", "/usr/bin/nginx"].first {
    FileManager.default.isExecutableFile(atPath: $0)
  }
  static let missing = Comment(
    rawValue: "nginx is not installed: scripts/deps.sh test installs Debian's nginx-light")

  let files: Scratch
  private let state: Scratch
  private(set) var port = 0
  private var running = false

  /// Starts nginx serving a new, empty folder (`files`).
  init() throws {
    files = try Scratch()
    state = try Scratch()
    try start()
  }

  func start() throws {
    let out = try script(["start", files.path, state.path])
    guard let port = Int(out.trimmingCharacters(in: .whitespacesAndNewlines)) else {
      throw TestFailure("nginx did not start: \(out)")
    }
    self.port = port
    running = true
  }

  func stop() {
    guard running else { return }
    running = false
    _ = try? script(["stop", state.path])
  }

  deinit { stop() }

  private func script(_ arguments: [String]) throws -> String {
    let outcome = try Spawned(
      executable: repositoryRoot + "/scripts/nginx.sh", arguments,
      io: state["script-\(UUID().uuidString)"]
    ).wait()
    return String(decoding: outcome.stdout, as: UTF8.self)
  }

  /// The URL of `path` (`/name`, `/fresh/name`, `/moved/name`).
  func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

  /// Access log lines: `METHOD URI STATUS BYTES "Range" "If-Range" "If-None-Match" "If-Modified-Since"`.
  func accessLog() -> [String] {
    let text = (try? String(contentsOfFile: state["access.log"], encoding: .utf8)) ?? ""
    return text.split(separator: "\n").map(String.init)
  }

  /// The quoted fields of a log line: Range, If-Range, If-None-Match,
  /// If-Modified-Since ("-" when absent).
  static func quoted(_ line: String) -> [String] {
    line.split(separator: "\"", omittingEmptySubsequences: false).enumerated()
      .filter { $0.offset % 2 == 1 }.map { String($0.element) }
  }

  /// The logged requests for `uri`.
  func requests(_ uri: String) -> [String] {
    accessLog().filter { $0.split(separator: " ").dropFirst().first.map(String.init) == uri }
  }
}

/// `Tests/Servers/fault_server.py` (Python's http.server) on 127.0.0.1 at a
/// free port: the faults nginx will not make. Stopped when dropped.
final class FaultServer {
  static let python = ["/usr/bin/python3", "/usr/local/bin/python3"].first {
    FileManager.default.isExecutableFile(atPath: $0)
  }
  static let missing = Comment(
    rawValue: "python3 is not installed: scripts/deps.sh test installs it")

  private let process: Spawned
  private let state: Scratch
  let port: Int

  init() throws {
    state = try Scratch()
    process = try Spawned(
      executable: Self.python ?? "/usr/bin/python3",
      [repositoryRoot + "/Tests/Servers/fault_server.py", state["requests.log"], state["port"]],
      io: state["server"])
    var port: Int?
    for _ in 0..<200 where port == nil {
      port = (try? String(contentsOfFile: state["port"], encoding: .utf8))
        .flatMap { $0.hasSuffix("\n") ? Int($0.dropLast()) : nil }
      if port == nil { usleep(20_000) }
    }
    guard let port else {
      process.kill()
      throw TestFailure(
        "the fault server did not start: \((try? process.wait())?.description ?? "")")
    }
    self.port = port
  }

  deinit {
    process.kill()
    _ = try? process.wait()
  }

  func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

  /// Logged requests: `GET PATH "Range" "If-Range" "If-None-Match"`.
  func requests() -> [String] {
    let text = (try? String(contentsOfFile: state["requests.log"], encoding: .utf8)) ?? ""
    return text.split(separator: "\n").map(String.init)
  }

  /// The body `/MODE/name?size=N` serves (version 2: `etagchange` after
  /// its first request), computed by the same Python code.
  func body(_ name: String, size: Int, version: Int = 1) throws -> [UInt8] {
    let outcome = try Spawned(
      executable: Self.python ?? "/usr/bin/python3",
      [
        "-c",
        "import random, sys; sys.stdout.buffer.write(random.Random(sys.argv[1]).randbytes(int(sys.argv[2])))",
        "\(name):\(version)", "\(size)",
      ], io: state["body-\(UUID().uuidString)"]
    ).wait()
    return outcome.stdout
  }
}

/// A port nothing listens on (bound, then closed).
func deadPort() -> Int {
  let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  defer { close(fd) }
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  var length = socklen_t(MemoryLayout<sockaddr_in>.size)
  _ = withUnsafeMutablePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
      bind(fd, $0, length)
      return getsockname(fd, $0, &length)
    }
  }
  return Int(UInt16(bigEndian: address.sin_port))
}

struct TestFailure: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}
