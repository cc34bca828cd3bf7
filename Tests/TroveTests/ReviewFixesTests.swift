import Foundation
import Testing

@testable import Trove

/// Defects a user-level review of the command line found (issue 12, the
/// remainder), each shown on the real `trove` process.
@Suite("CLI review fixes")
struct ReviewFixesTests {
  /// `env -u NAME…` before trove: those variables unset.
  func unsetting(_ names: [String], then prefix: [String] = []) -> [String] {
    ["/usr/bin/env"] + names.flatMap { ["-u", $0] } + prefix
  }

  @Test("with HOME unset the default store is in the user's passwd home, not /home/.cache")
  func defaultStoreWithoutHome() throws {
    let home = String(cString: try #require(getpwuid(getuid())?.pointee.pw_dir))
    let dir = try CLI.run(["dir"], prefix: unsetting(["HOME", "XDG_CACHE_HOME"]))
    #expect(dir.status == 0 && dir.out == home + "/.cache/trove\n", "\(dir.out) \(dir.stderr)")
    // A relative XDG_CACHE_HOME is ignored; an absolute one is used.
    let relative = try CLI.run(
      ["dir"], environment: ["XDG_CACHE_HOME": "relative", "HOME": "/h/"])
    #expect(relative.out == "/h/.cache/trove\n", "\(relative.out)")
    let absolute = try CLI.run(["dir"], environment: ["XDG_CACHE_HOME": "/x/c"])
    #expect(absolute.out == "/x/c/trove\n", "\(absolute.out)")
    // The user database failing: one line naming the call, exit 78.
    let failing = try CLI.run(
      ["dir"], environment: ["TROVE_INJECT_FAULT": "getpwuid_r:5"],
      prefix: unsetting(["HOME", "XDG_CACHE_HOME"]))
    #expect(failing.status == 78 && failing.errorLines.count == 1, "\(failing.stderr)")
    #expect(failing.stderr.contains("no store location") && failing.stderr.contains("getpwuid_r"))
  }

  @Test(
    "a user with neither HOME nor a passwd home gets one line and exit 78",
    .enabled(
      if: TestFilesystems.isRoot && TestFilesystems.setprivAvailable, "needs root and setpriv"))
  func noHomeAtAll() throws {
    let run = try CLI.run(
      ["ls"],
      prefix: [
        "/usr/bin/setpriv", "--reuid=54321", "--regid=54321", "--clear-groups",
      ] + unsetting(["HOME", "XDG_CACHE_HOME"]))
    #expect(run.status == 78 && run.errorLines.count == 1, "\(run.status) \(run.stderr)")
    #expect(
      run.stderr.contains("user 54321 has no home folder")
        && run.stderr.contains("--store DIR or set TROVE_STORE"), "\(run.stderr)")
  }

  @Test("a failed import or remote pull leaves no new store behind")
  func failedImportMakesNoStore() throws {
    let scratch = try Scratch()
    let store = scratch["new/store"]
    try FileManager.default.createDirectory(
      atPath: scratch["empty"], withIntermediateDirectories: true)
    let junk = try scratch.write("junk.tar", Bytes.random(3000, seed: 12))
    for source in [scratch["empty"], junk, scratch["missing"]] {
      let run = try CLI.run(["--store", store, "import", source])
      #expect(run.status != 0 && run.errorLines.count == 1, "\(source): \(run.stderr)")
      #expect(!FileManager.default.fileExists(atPath: scratch["new"]), "\(source)")
    }
    // A cut-short archive on stdin.
    let source = scratch["src"]
    let file = try scratch.write("f", Bytes.random(5000, seed: 13))
    #expect(try CLI.run(["--store", source, "record", "start", "r"]).status == 0)
    #expect(
      try CLI.run(["--store", source, "put", file], environment: ["TROVE_RECORD": "r"]).status
        == 0)
    let tar = scratch["set.tar"]
    #expect(try CLI.run(["--store", source, "export", "--record", "r", tar]).status == 0)
    let cut = Array(try contents(tar).prefix(1200))
    let piped = try CLI.run(["--store", store, "import", "-"], stdin: cut)
    #expect(piped.status == 65 && piped.stderr.contains("'<stdin>'"), "\(piped.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["new"]))
    // The whole archive imports (and makes the store).
    let whole = try CLI.run(["--store", store, "import", tar])
    #expect(whole.status == 0, "\(whole.stderr)")
    #expect(FileManager.default.fileExists(atPath: store + "/config.json"))
    let pull = try CLI.run([
      "--store", scratch["other"], "remote", "pull", XXH3Hasher.digest([1]).description,
    ])
    #expect(pull.status == 66 && pull.stderr.contains("no store at"), "\(pull.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["other"]))
  }

  @Test("import prints the numbers its --json gives")
  func importCountsAgree() throws {
    let scratch = try Scratch()
    let source = scratch["src"]
    let a = try scratch.write("a", Bytes.random(1000, seed: 1))
    let b = try scratch.write("b", Bytes.random(3000, seed: 2))
    #expect(try CLI.run(["--store", source, "record", "start", "r"]).status == 0)
    for (file, key) in [(a, "ka"), (b, "kb")] {
      let put = try CLI.run(
        ["--store", source, "put", "--key", key, file], environment: ["TROVE_RECORD": "r"])
      #expect(put.status == 0, "\(put.stderr)")
    }
    #expect(
      try CLI.run(["--store", source, "export", "--record", "r", scratch["set"]]).status == 0)
    let target = scratch["target"]
    #expect(try CLI.run(["--store", target, "put", a]).status == 0)
    let text = try CLI.run(["--store", target, "import", scratch["set"]])
    #expect(
      text.out == "imported 1 object, 1 already there (3.9 KiB), 2 keys from '\(scratch["set"])'\n",
      "\(text.out)")
    let json = try CLI.run(["--store", scratch["target2"], "import", "--json", scratch["set"]])
    let record = try #require(
      try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [String: Any])
    #expect(record["objects"] as? Int == 2 && record["duplicates"] as? Int == 0)
    #expect(record["bytes"] as? Int == 4000 && record["keys"] as? Int == 2)
    let again = try CLI.run(["--store", scratch["target2"], "import", scratch["set"]])
    #expect(again.out.hasPrefix("imported 0 objects, 2 already there (3.9 KiB), 2 keys"))
  }

  @Test("--store '' is refused, and store paths are printed normalized")
  func storePaths() throws {
    let scratch = try Scratch()
    let empty = try CLI.run(["--store", "", "ls"])
    #expect(empty.status == 64 && empty.stderr.contains("invalid --store ''"), "\(empty.stderr)")
    let after = try CLI.run(["ls", "--store="])
    #expect(after.status == 64)
    let dir = try CLI.run(["--store", scratch.path + "//a/./b//", "dir"])
    #expect(dir.out == scratch["a/b"] + "\n", "\(dir.out)")
    let ls = try CLI.run(["--store", scratch.path + "//a/./b//", "ls"])
    #expect(ls.stderr == "Error: no store at '\(scratch["a/b"])': nothing was ever stored there\n")
  }
}
