import Foundation
import Testing

@testable import Trove

/// `trove doctor [DIR]`: what the store and a work
/// folder are on, and what works between them, probed with real files on
/// the test volumes, through the real CLI.
@Suite(
  "doctor",
  .enabled(if: TestFilesystems.xfs != nil, TestFilesystems.xfsMissing))
struct DoctorTests {
  /// A store with one object on the XFS test volume.
  func xfsStore(_ scratch: Scratch) throws -> String {
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "put", "-"], stdin: [1, 2, 3]).status == 0)
    return store
  }

  /// The JSON `doctor --json` printed.
  func diagnosis(_ run: CLI.Result) throws -> [String: Any] {
    try #require(JSONSerialization.jsonObject(with: Data(run.stdout)) as? [String: Any])
  }

  /// The check named `name` of a diagnosis.
  func check(_ name: String, in json: [String: Any]) throws -> [String: Any] {
    let checks = try #require(json["checks"] as? [[String: Any]])
    return try #require(checks.first { $0["name"] as? String == name })
  }

  @Test("a store and a folder on one XFS: every check ok, clones work, the probes leave nothing")
  func sameXFS() throws {
    let scratch = try Scratch(under: TestFilesystems.xfs!)
    let store = try xfsStore(scratch)
    try FileManager.default.createDirectory(
      atPath: scratch["work"], withIntermediateDirectories: false)
    let before = scratch.temporaries("store")
    let run = try CLI.run(["--store", store, "doctor", scratch["work"]])
    #expect(run.status == 0, "\(run.stderr)")
    let lines = run.out.split(separator: "\n").map(String.init)
    let names = [
      "store-filesystem", "destination-filesystem", "writable", "clone", "shared-blocks",
      "hardlink", "locks",
      "free-space", "index-journal",
    ]
    #expect(lines.count == names.count, "\(run.out)")
    for (line, name) in zip(lines, names) {
      #expect(line.hasPrefix("ok    \(name) "), "\(line)")
    }
    #expect(run.out.contains("objects clone into '\(scratch["work"])' (xfs to xfs)"))
    #expect(!run.out.contains("advice:"))
    #expect(scratch.list("work").isEmpty)
    #expect(scratch.temporaries("store") == before)
  }

  @Test(
    "a store on XFS and a folder on tmpfs: clones and hard links warn, with advice to move the store"
  )
  func xfsToTmpfs() throws {
    let small = try #require(TestFilesystems.small, TestFilesystems.smallMissing)
    let scratch = try Scratch(under: TestFilesystems.xfs!)
    let store = try xfsStore(scratch)
    let work = try Scratch(under: small)
    let run = try CLI.run(["--store", store, "doctor", work.path])
    #expect(run.status == 0, "\(run.stderr)")
    let lines = run.out.split(separator: "\n").map(String.init)
    let clone = try #require(lines.firstIndex { $0.hasPrefix("warn  clone ") }, "\(run.out)")
    #expect(lines[clone].contains("Invalid cross-device link"), "\(lines[clone])")
    #expect(
      lines[clone + 1].contains(
        "advice: '\(work.path)' is on tmpfs, which cannot clone: move the store"),
      "\(lines[clone + 1])")
    #expect(lines.contains { $0.hasPrefix("warn  hardlink ") }, "\(run.out)")
    #expect(lines.contains { $0.hasPrefix("ok    locks ") }, "\(run.out)")
    #expect(work.list(".").isEmpty)
  }

  @Test("doctor --json: every field, absent ones null")
  func json() throws {
    let small = try #require(TestFilesystems.small, TestFilesystems.smallMissing)
    let scratch = try Scratch(under: TestFilesystems.xfs!)
    let store = try xfsStore(scratch)
    let work = try Scratch(under: small)
    let run = try CLI.run(["--store", store, "doctor", "--json", work.path])
    #expect(run.status == 0, "\(run.stderr)")
    let json = try diagnosis(run)
    #expect(
      Set(json.keys) == [
        "store", "destination", "storeFilesystem", "destinationFilesystem", "sameFilesystem",
        "cloneSupported", "hardlinkSupported", "locksWork", "availableBytes", "totalBytes",
        "minimumFreeBytes", "journalMode", "readOnlyReason", "checks",
      ])
    #expect(json["store"] as? String == store)
    #expect(json["destination"] as? String == work.path)
    #expect(json["storeFilesystem"] as? String == "xfs")
    #expect(json["destinationFilesystem"] as? String == "tmpfs")
    #expect(json["sameFilesystem"] as? Bool == false)
    #expect(json["cloneSupported"] as? Bool == false)
    #expect(json["hardlinkSupported"] as? Bool == false)
    #expect(json["locksWork"] as? Bool == true)
    #expect(json["journalMode"] as? String == "wal")
    #expect(json["readOnlyReason"] is NSNull)
    let total = try #require(json["totalBytes"] as? Int64)
    #expect(json["minimumFreeBytes"] as? Int64 == total / 10)
    #expect((json["availableBytes"] as? Int64 ?? 0) > 0)
    let clone = try check("clone", in: json)
    #expect(Set(clone.keys) == ["name", "status", "detail", "advice"])
    #expect(clone["status"] as? String == "warn")
    #expect((clone["advice"] as? String)?.contains("move the store") == true)
    let locks = try check("locks", in: json)
    #expect(locks["status"] as? String == "ok" && locks["advice"] is NSNull)
  }

  @Test("doctor with no store says so (66); a DIR that is not there is 73")
  func failures() throws {
    let scratch = try Scratch()
    let missing = try CLI.run(["--store", scratch["none"], "doctor"])
    #expect(missing.status == 66 && missing.errorLines.count == 1, "\(missing.stderr)")
    let store = try xfsStore(scratch)
    let run = try CLI.run(["--store", store, "doctor", scratch["nowhere"]])
    #expect(run.status == 73, "\(run.stderr)")
    #expect(
      run.errorLines == [
        "Error: cannot open '\(scratch["nowhere"])': No such file or directory (open, errno 2)"
      ])
  }
}
