import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// The background upload a put starts (`--write async`): a
/// process of its own session, holding nothing of the command's but
/// /dev/null, so neither the command's caller nor its terminal waits for
/// it or signals it.
@Suite("background upload process")
struct BackgroundUploadTests {
  /// A port on 127.0.0.1 that accepts connections (the kernel's backlog)
  /// and never answers, and the socket listening on it (close it after).
  static func silentPort() -> (port: Int, socket: Int32) {
    let (fd, port) = loopbackSocket()
    listen(fd, 16)
    return (port, fd)
  }

  /// The processes whose command line holds every one of `parts`.
  static func processes(with parts: [String]) -> [Int32] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return names.compactMap { Int32($0) }.filter { pid in
      guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else {
        return false
      }
      let line = String(decoding: data, as: UTF8.self).replacingOccurrences(of: "\0", with: " ")
      return parts.allSatisfy { line.contains($0) }
    }
  }

  @Test("a put's background push runs in a session of its own, its standard files /dev/null")
  func detached() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let (port, listener) = Self.silentPort()
    defer { close(listener) }
    #expect(
      try CLI.run(["--store", store, "remote", "add", "quiet", "http://127.0.0.1:\(port)/q"])
        .status == 0)
    let file = try scratch.write("in", Bytes.random(3000, seed: 3301))
    let put = try CLI.run(["--store", store, "put", file])
    #expect(put.status == 0, "\(put.stderr)")
    // The push waits on a server that never answers (until its stall limit).
    var found: [Int32] = []
    for _ in 0..<200 where found.isEmpty {
      found = Self.processes(with: ["--store", store, "remote", "push", "--if-idle"])
      if found.isEmpty { usleep(10_000) }
    }
    let pid = try #require(found.first, "no background push found")
    defer { kill(pid, SIGKILL) }
    // Field 6 of /proc/PID/stat (after the parenthesised name) is the session.
    let stat = String(
      decoding: try #require(FileManager.default.contents(atPath: "/proc/\(pid)/stat")),
      as: UTF8.self)
    let fields = stat[stat.range(of: ") ")!.upperBound...].split(separator: " ")
    #expect(Int32(fields[3]) == pid, "session \(fields[3]) is not its own (\(pid))")
    #expect(Int32(fields[3]) != getsid(0))
    for fd in ["0", "1", "2"] {
      let target = try FileManager.default.destinationOfSymbolicLink(
        atPath: "/proc/\(pid)/fd/\(fd)")
      #expect(target == "/dev/null", "fd \(fd) is \(target)")
    }
  }
}
