import Foundation
import Testing

@testable import Trove

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
  /// nginx.conf, the logs and the temp folders (`client-body/`).
  let state: Scratch
  private(set) var port = 0
  private var running = false
  /// Whether it serves WebDAV (`scripts/nginx.sh start --webdav`).
  private let webDAV: Bool

  /// Starts nginx serving a new, empty folder (`files`); with `webDAV`,
  /// read-write (PUT, DELETE, MKCOL, COPY, MOVE).
  init(webDAV: Bool = false) throws {
    files = try Scratch()
    state = try Scratch()
    self.webDAV = webDAV
    try start()
  }

  func start() throws {
    // Started again after a stop: on the same port, as a restarted server is.
    let port = running || self.port == 0 ? [] : ["--port", "\(self.port)"]
    let out = try script(
      ["start"] + (webDAV ? ["--webdav"] : []) + port + [files.path, state.path])
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
    (process, port) = try startPython(
      "the fault server",
      [repositoryRoot + "/Tests/Servers/fault_server.py", state["requests.log"], state["port"]],
      state: state)
  }

  deinit {
    process.kill()
    _ = try? process.wait()
  }

  func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

  /// The folder `/tree/` serves from.
  var tree: String { state["requests.log.tree"] }

  /// Logged requests: `GET PATH "Range" "If-Range" "If-None-Match"`.
  func requests() -> [String] {
    let text = (try? String(contentsOfFile: state["requests.log"], encoding: .utf8)) ?? ""
    return text.split(separator: "\n").map(String.init)
  }

  /// The most `/tree/` requests waiting (`.late`, `.soon`) at once.
  func busiest() -> Int {
    let text = (try? String(contentsOfFile: state["requests.log.busiest"], encoding: .utf8)) ?? ""
    return Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
  }

  /// Every request's `METHOD PATH`, a tab, and its header lines joined
  /// by ` | `, in order.
  func headerLog() -> [String] {
    let text = (try? String(contentsOfFile: state["requests.log.headers"], encoding: .utf8)) ?? ""
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

/// `Tests/Servers/resp_server.py` on 127.0.0.1 at a free port: a hostile
/// Redis that answers `command` (`GET` or `GETRANGE`) with `mode`'s reply
/// (an overflowing length, arrays nested two million deep, an escape in an
/// error line…). Stopped when dropped.
final class HostileRedis {
  private let process: Spawned
  private let state: Scratch
  let port: Int

  init(_ mode: String, answering command: String) throws {
    state = try Scratch()
    (process, port) = try startPython(
      "the hostile Redis",
      [repositoryRoot + "/Tests/Servers/resp_server.py", mode, command, state["port"]],
      state: state)
  }

  deinit {
    process.kill()
    _ = try? process.wait()
  }

  /// `redis://127.0.0.1:PORT`.
  var url: String { "redis://127.0.0.1:\(port)" }
}

/// A real redis-server on 127.0.0.1 at a free port, in the foreground
/// (never a system service), saving nothing (`--save ''`, `--appendonly
/// no`, `--dir` a scratch folder); killed when dropped.
final class RedisServer {
  static let executable = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].first {
    FileManager.default.isExecutableFile(atPath: $0)
  }
  static let missing = Comment(
    rawValue: "redis-server is not installed: scripts/deps.sh test installs Debian's redis-server")

  private let state: Scratch
  private var process: Spawned?
  private(set) var port = 0

  init() throws {
    state = try Scratch()
    for _ in 0..<5 where try start(port: deadPort()) { return }
    throw TestFailure("redis-server did not start")
  }

  /// Stops the server (as a crash would: its data is gone).
  func stop() {
    process?.kill()
    _ = try? process?.wait()
    process = nil
  }

  /// Starts it again, empty, on the same port.
  func restart() throws {
    stop()
    guard try start(port: port) else { throw TestFailure("redis-server did not start again") }
  }

  /// Starts redis-server on `port`; false when it did not come up.
  private func start(port: Int) throws -> Bool {
    do {
      let process = try Spawned(
        executable: Self.executable ?? "/usr/bin/redis-server",
        [
          "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
          "--dir", state.path, "--daemonize", "no",
        ], io: state["server-\(port)"])
      let listening = poll(
        times: 250, while: { process.process.isRunning },
        { (try? connection(port: port)).map { _ in true } })
      if listening == true {
        self.port = port
        self.process = process
        return true
      }
      process.kill()
      _ = try? process.wait()
      return false
    }
  }

  deinit {
    process?.kill()
    _ = try? process?.wait()
  }

  /// `redis://127.0.0.1:PORT/DB`.
  func url(database: Int) -> String { "redis://127.0.0.1:\(port)/\(database)" }

  private func connection(port: Int) throws(TroveError) -> RESPConnection {
    // Replies read whole here include blobs (GET of a 9 MiB value).
    try RESPConnection(
      host: "127.0.0.1", port: port, limits: RemoteLimits(connectTimeout: 1, stallTimeout: 30),
      label: "test redis", replyLimit: RESPConnection.bulkLimit)
  }

  /// Runs one command in database `database` and returns its reply.
  @discardableResult
  func command(_ arguments: [String], database: Int, payload: [UInt8]? = nil) throws
    -> RESPConnection.Reply
  {
    let c = try connection(port: port)
    try c.call(["SELECT", "\(database)"])
    guard let payload else { return try c.call(arguments) }
    return try payload.withUnsafeBytes { (bytes) throws(TroveError) in
      try c.call(arguments, payload: bytes)
    }
  }

  /// The keys of database `database` matching `pattern`, sorted.
  func keys(_ pattern: String, database: Int) throws -> [String] {
    guard case .array(let items?) = try command(["KEYS", pattern], database: database) else {
      return []
    }
    return items.compactMap {
      if case .bulk(let bytes?) = $0 { return String(decoding: bytes, as: UTF8.self) }
      return nil
    }.sorted()
  }

  /// The value of `key`, or nil.
  func value(_ key: String, database: Int) throws -> [UInt8]? {
    guard case .bulk(let bytes) = try command(["GET", key], database: database) else { return nil }
    return bytes
  }
}

/// Calls `attempt` up to `times` times, 20 ms apart, while `going` holds,
/// until it gives a value; nil if it never did.
func poll<T>(times: Int, while going: () -> Bool = { true }, _ attempt: () -> T?) -> T? {
  for round in 0..<times where going() {
    if round > 0 { usleep(20_000) }
    if let value = attempt() { return value }
  }
  return nil
}

/// Starts a test server of `Tests/Servers` (python3 `arguments`) that
/// writes the port it listens on, then a newline, to `state["port"]`, and
/// waits up to 4 s for it. A server that wrote no port is killed, and the
/// error names `what` with its output.
func startPython(_ what: String, _ arguments: [String], state: Scratch) throws -> (Spawned, Int) {
  let process = try Spawned(
    executable: FaultServer.python ?? "/usr/bin/python3", arguments, io: state["server"])
  let port = poll(times: 200) {
    (try? String(contentsOfFile: state["port"], encoding: .utf8))
      .flatMap { $0.hasSuffix("\n") ? Int($0.dropLast()) : nil }
  }
  guard let port else {
    _ = process.kill()
    throw TestFailure("\(what) did not start: \((try? process.wait())?.description ?? "")")
  }
  return (process, port)
}

/// A port nothing listens on (bound, then closed).
func deadPort() -> Int {
  let (fd, port) = loopbackSocket()
  close(fd)
  return port
}

/// A TCP socket bound to a free port on 127.0.0.1, and that port.
func loopbackSocket() -> (socket: Int32, port: Int) {
  let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
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
  return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

struct TestFailure: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}
