import Foundation
import Synchronization
import Testing

@testable import Trove

/// The progress line of long commands: drawn on a
/// terminal's stderr with a rate, erased at the end; never when stderr is
/// a file, with `-q` or with `--json`; and the library's reports behind it.
@Suite("progress")
struct ProgressTests {
  static let scriptAvailable = FileManager.default.isExecutableFile(atPath: "/usr/bin/script")

  /// Draw at every report: the line appears however quick the work is.
  static let everyReport = ["TROVE_PROGRESS_INTERVAL_MS": "0"]

  /// Runs `trove ARGS` under `script(1)`, its stdout and stderr a
  /// pseudo-terminal; returns everything the terminal received.
  func onTerminal(_ arguments: [String]) throws -> (status: Int32, screen: String) {
    let run = try CLI.run(
      arguments, environment: Self.everyReport,
      prefix: [
        "/bin/bash", "-c", #"exec script -qfec "$(printf '%q ' "$0" "$@")" /dev/null"#,
      ])
    return (run.status, run.out)
  }

  /// The progress lines drawn on `screen` (each after a `\r`, up to `ESC [K`).
  func drawnLines(_ screen: String) -> [String] {
    screen.components(separatedBy: "\r").dropFirst().compactMap { piece in
      guard piece.hasPrefix("trove: "), let end = piece.range(of: "\u{1B}[K") else { return nil }
      return String(piece[..<end.lowerBound])
    }
  }

  /// Whether the last line drawn on `screen` was erased (`\r ESC [K`) after it.
  func endsErased(_ screen: String) -> Bool {
    guard let last = screen.range(of: "\rtrove: ", options: .backwards) else { return false }
    return screen[last.upperBound...].contains("\r\u{1B}[K")
  }

  @Test(
    "put, verify, recompress and get -C draw a progress line with a rate on a terminal, erased at the end",
    .enabled(if: scriptAvailable, "script(1) (util-linux) is not installed"))
  func drawnOnTerminal() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let big = try scratch.write("big.bin", Bytes.random(5 << 20, seed: 1200))
    let put = try onTerminal(["--store", store, "put", big])
    #expect(put.status == 0, "\(put.screen)")
    let lines = drawnLines(put.screen)
    #expect(!lines.isEmpty, "\(put.screen.debugDescription)")
    #expect(lines.contains { $0.hasPrefix("trove: put big.bin  ") && $0.contains("/ 5.0 MiB") })
    #expect(lines.allSatisfy { $0.contains("/s") }, "\(lines)")
    #expect(lines.last?.contains("5.0 MiB / 5.0 MiB") ?? false, "\(lines)")
    #expect(endsErased(put.screen), "\(put.screen.debugDescription)")
    // The digest line comes after the erased progress line, whole.
    let digest = XXH3Hasher.digest(try contents(big))
    #expect(put.screen.contains("\u{1B}[K\(digest)  \(big)"), "\(put.screen.debugDescription)")

    let verify = try onTerminal(["--store", store, "verify"])
    #expect(verify.status == 0)
    #expect(
      drawnLines(verify.screen).contains { $0.hasPrefix("trove: verify  ") && $0.contains("/s") })
    #expect(endsErased(verify.screen))

    #expect(try CLI.run(["--store", store, "config", "set", "compression", "zstd"]).status == 0)
    let recompress = try onTerminal(["--store", store, "recompress"])
    #expect(recompress.status == 0, "\(recompress.screen)")
    #expect(
      drawnLines(recompress.screen).contains { $0.hasPrefix("trove: recompress  1 / 1 objects") })
    #expect(endsErased(recompress.screen))

    try FileManager.default.createDirectory(
      atPath: scratch["out"], withIntermediateDirectories: false)
    let get = try onTerminal([
      "--store", store, "get", "-q", digest.description, "-C", scratch["out"],
    ])
    #expect(get.status == 0)
    #expect(drawnLines(get.screen).isEmpty, "-q: \(get.screen.debugDescription)")
    let sweep = try onTerminal(["--store", store, "sweep", "--budget", "0"])
    #expect(sweep.status == 0, "\(sweep.screen)")
    #expect(
      drawnLines(sweep.screen).contains { $0.hasPrefix("trove: sweep  ") && $0.contains("/s") })
    #expect(endsErased(sweep.screen))
    #expect(try CLI.run(["--store", store, "put", big]).status == 0)
    let getShown = try onTerminal([
      "--store", store, "get", "--force", digest.description, "-C", scratch["out"],
    ])
    #expect(getShown.status == 0)
    #expect(drawnLines(getShown.screen).contains { $0.hasPrefix("trove: get  1 / 1 objects") })
    #expect(endsErased(getShown.screen))
  }

  @Test(
    "an error after a drawn line starts on a clean line",
    .enabled(if: scriptAvailable, "script(1) (util-linux) is not installed"))
  func messagesEraseTheLine() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let big = try scratch.write("big", Bytes.random(3 << 20, seed: 1201))
    // The second input fails after the first one's line was drawn.
    let put = try onTerminal(["--store", store, "put", big, scratch["missing"]])
    #expect(put.status == 66, "\(put.screen)")
    let error = try #require(put.screen.range(of: "Error: cannot read"))
    let before = put.screen[..<error.lowerBound]
    #expect(
      before.hasSuffix("\r\u{1B}[K") || before.utf8.last == UInt8(ascii: "\n"),
      "\(put.screen.debugDescription)")
    #expect(drawnLines(put.screen).contains { $0.hasPrefix("trove: put big (1/2)") })
  }

  @Test(
    "nothing progress-like with -q or --json on a terminal",
    .enabled(if: scriptAvailable, "script(1) (util-linux) is not installed"))
  func quietAndJSON() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let big = try scratch.write("big", Bytes.random(3 << 20, seed: 1202))
    for flags in [["-q"], ["--json"]] {
      let put = try onTerminal(["--store", store, "put"] + flags + [big])
      #expect(put.status == 0)
      #expect(!put.screen.contains("\u{1B}") && !put.screen.contains("trove: put"), "\(flags)")
      let verify = try onTerminal(["--store", store, "verify"] + flags)
      #expect(verify.status == 0)
      #expect(!verify.screen.contains("\u{1B}") && !verify.screen.contains("trove: verify"))
    }
  }

  @Test(
    "fetch draws its line through the same component, erased before the digest line; none with --json",
    .enabled(if: scriptAvailable, "script(1) (util-linux) is not installed"),
    .enabled(if: Nginx.executable != nil, Nginx.missing))
  func fetchOnTerminal() throws {
    let nginx = try Nginx()
    let body = Bytes.random(3 << 20, seed: 1205)
    try nginx.files.write("model.bin", body)
    let scratch = try Scratch()
    let url = nginx.url("/model.bin")
    let run = try onTerminal(["--store", scratch["store"], "fetch", url])
    #expect(run.status == 0, "\(run.screen)")
    #expect(
      drawnLines(run.screen).contains {
        $0.hasPrefix("trove: fetch model.bin  ") && $0.contains("/ 3.0 MiB") && $0.contains("/s")
      }, "\(run.screen.debugDescription)")
    #expect(endsErased(run.screen))
    #expect(run.screen.contains("\u{1B}[K\(XXH3Hasher.digest(body))  \(url)"))
    let json = try onTerminal(["--store", scratch["store"], "fetch", "--json", "--refresh", url])
    #expect(json.status == 0)
    #expect(!json.screen.contains("\u{1B}"), "\(json.screen.debugDescription)")
  }

  @Test("nothing progress-like when stderr is a file")
  func notOnAFile() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let big = try scratch.write("big", Bytes.random(3 << 20, seed: 1203))
    let put = try CLI.run(["--store", store, "put", big], environment: Self.everyReport)
    #expect(put.status == 0 && put.stderr.isEmpty, "\(put.stderr.debugDescription)")
    let verify = try CLI.run(["--store", store, "verify"], environment: Self.everyReport)
    #expect(verify.status == 0 && verify.stderr.isEmpty, "\(verify.stderr.debugDescription)")
  }

  @Test("the library reports a put's and a verify's bytes block by block, a recompress's objects")
  func libraryReports() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let file = try scratch.write("f", Bytes.random(3 << 20 + 5, seed: 1204))
    let reports = Mutex<[ProgressReport]>([])
    let record: ProgressHandler = { report in reports.withLock { $0.append(report) } }
    let put = try store.put(file: file, onProgress: record)
    let putReports = reports.withLock { all in
      defer { all = [] }
      return all
    }
    #expect(putReports.count >= 4, "\(putReports)")
    #expect(putReports.allSatisfy { $0.unit == .bytes && $0.total == put.size })
    #expect(putReports.last?.completed == put.size)
    #expect(zip(putReports, putReports.dropFirst()).allSatisfy { $0.completed < $1.completed })

    _ = try store.verify(onProgress: record)
    let verifyReports = reports.withLock { all in
      defer { all = [] }
      return all
    }
    #expect(
      verifyReports.last == ProgressReport(unit: .bytes, completed: put.size, total: put.size))

    _ = try store.put(bytes: Bytes.pattern(1000))
    _ = try store.recompress(onProgress: record)
    #expect(
      reports.withLock { $0 } == [
        ProgressReport(unit: .items, completed: 1, total: 2),
        ProgressReport(unit: .items, completed: 2, total: 2),
      ])

    reports.withLock { $0 = [] }
    let sweep = try store.sweep(SweepOptions(budget: 0, maxAge: nil), onProgress: record)
    #expect(sweep.removedBytes > 0)
    #expect(
      reports.withLock { $0 } == [
        ProgressReport(unit: .bytes, completed: sweep.removedBytes, total: sweep.removedBytes)
      ])
  }
}
