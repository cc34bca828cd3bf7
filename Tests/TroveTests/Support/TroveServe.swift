import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// `trove serve` on 127.0.0.1: port 0, so the kernel picks a free one and
/// the URL the server prints says which. Started by the initializer, which
/// waits (up to 5 s) for that line; killed when dropped if still running.
final class TroveServe {
  let process: Spawned
  let state: Scratch
  /// `http://127.0.0.1:PORT/`.
  let url: String
  /// The access log (`--access-log`), when the arguments do not name one.
  var accessLogPath: String { state["access.log"] }

  /// Starts `trove --store STORE serve --listen 127.0.0.1:0 --access-log
  /// LOG ARGS`; `arguments` may name other addresses or another log;
  /// `environment` is added to the server's (`HOME`).
  init(
    store: String, _ arguments: [String] = [], listen: [String] = ["127.0.0.1:0"],
    environment: [String: String] = [:]
  ) throws {
    state = try Scratch()
    var all = ["--store", store, "serve"]
    for address in listen { all += ["--listen", address] }
    if !arguments.contains("--access-log") { all += ["--access-log", state["access.log"]] }
    let process = try Spawned(all + arguments, io: state["serve"], environment: environment)
    self.process = process
    let io = state["serve.err"]
    let started = { () -> String? in
      guard let text = try? String(contentsOfFile: io, encoding: .utf8),
        let range = text.range(of: "on http://")
      else { return nil }
      let rest = text[range.upperBound...]
      guard let end = rest.firstIndex(of: "\n") else { return nil }
      return "http://" + rest[..<end]
    }
    let found = poll(times: 250, while: { process.process.isRunning }, started)
    guard let found else {
      process.kill()
      throw TestFailure("trove serve did not start: \((try? process.wait())?.description ?? "")")
    }
    url = found
  }

  deinit { process.kill() }

  /// The URL of `path` (no leading slash).
  func url(_ path: String) -> String { url + path }

  /// Sends `signal` (SIGTERM) and waits for the process to end.
  func stop(_ signal: Int32 = SIGTERM) throws -> Outcome {
    if process.process.isRunning { kill(process.pid, signal) }
    return try process.wait()
  }

  /// The access log's lines.
  func accessLog() -> [String] {
    let text = (try? String(contentsOfFile: accessLogPath, encoding: .utf8)) ?? ""
    return text.split(separator: "\n").map(String.init)
  }
}

/// What curl got: the status, the last response's headers (names in lower
/// case), the body and curl's exit status.
struct CurlResult {
  var status: Int
  var headers: [String: String]
  var body: [UInt8]
  var exitStatus: Int32
}

/// Runs `curl -s ARGS` and reads what it got; `environment` is added to
/// curl's (`http_proxy`).
func curl(_ arguments: [String], environment: [String: String] = [:]) throws -> CurlResult {
  let io = try Scratch()
  let outcome = try Spawned(
    executable: "/usr/bin/curl",
    ["-s", "-D", io["headers"], "-o", io["body"], "-w", "%{http_code}"] + arguments,
    io: io["curl"], environment: environment
  ).wait()
  var headers: [String: String] = [:]
  let text = (try? String(contentsOfFile: io["headers"], encoding: .utf8)) ?? ""
  for line in text.split(separator: "\r\n") {
    if line.hasPrefix("HTTP/") {
      headers = [:]
      continue
    }
    guard let colon = line.firstIndex(of: ":") else { continue }
    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...]
      .trimmingCharacters(in: .whitespaces)
  }
  return CurlResult(
    status: Int(String(decoding: outcome.stdout, as: UTF8.self)) ?? 0, headers: headers,
    body: (try? contents(io["body"])) ?? [], exitStatus: outcome.status)
}
