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
    // An empty folder named as the store is left empty.
    try FileManager.default.createDirectory(
      atPath: scratch["folder"], withIntermediateDirectories: true)
    let intoFolder = try CLI.run(["--store", scratch["folder"], "import", junk])
    #expect(intoFolder.status == 65 && scratch.list("folder").isEmpty, "\(scratch.list("folder"))")
    // A cut-short archive on stdin.
    let source = scratch["src"]
    let file = try scratch.write("f", Bytes.random(5000, seed: 13))
    #expect(try CLI.run(["--store", source, "record", "start", "r"]).status == 0)
    let second = try scratch.write("g", Bytes.random(7000, seed: 14))
    for input in [file, second] {
      let put = try CLI.run(["--store", source, "put", input], environment: ["TROVE_RECORD": "r"])
      #expect(put.status == 0)
    }
    let tar = scratch["set.tar"]
    #expect(try CLI.run(["--store", source, "export", "--record", "r", tar]).status == 0)
    let cut = Array(try contents(tar).prefix(1200))
    let piped = try CLI.run(["--store", store, "import", "-"], stdin: cut)
    #expect(piped.status == 65 && piped.stderr.contains("'<stdin>'"), "\(piped.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["new"]))
    // Cut short after the first object: that one is stored, and the store stays.
    let set = try contents(tar)
    let manifestSize = Int(
      String(decoding: set[124..<135], as: UTF8.self).filter { $0 != " " && $0 != "\0" }, radix: 8)!
    let firstEnd = 512 + (manifestSize + 511) / 512 * 512 + 512 + (5000 + 511) / 512 * 512
    let partial = try CLI.run(
      ["--store", store, "import", "-"], stdin: Array(set.prefix(firstEnd + 100)))
    #expect(partial.status == 65, "\(partial.stderr)")
    #expect(FileManager.default.fileExists(atPath: store + "/config.json"))
    try FileManager.default.removeItem(atPath: scratch["new"])
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
    let stats = try CLI.run(["--store", scratch.path + "//a/./b//", "stats"])
    #expect(
      stats.stderr == "Error: no store at '\(scratch["a/b"])': nothing was ever stored there\n")
    let path = try CLI.run(["--store", scratch.path + "//a/./b//", "path", "some-key"])
    #expect(
      path.stderr
        == "Error: no object or key 'some-key': no store exists at '\(scratch["a/b"])' yet\n")
  }

  @Test("a size setting given in decimal units is echoed in them wherever it is shown")
  func decimalSettingsEchoed() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    for (key, value) in [("min-free", "1.5MB"), ("max-object-size", "1.5KB")] {
      #expect(try CLI.run(["--store", store, "config", "set", key, value]).status == 0)
    }
    let stats = try CLI.run(["--store", store, "stats"])
    #expect(stats.out.contains("(keeps 1.5 MB free"), "\(stats.out)")
    let doctor = try CLI.run(["--store", store, "doctor"])
    #expect(doctor.out.contains("min-free keeps 1.5 MB"), "\(doctor.out)")
    let big = try scratch.write("big", Bytes.random(2000, seed: 3))
    let put = try CLI.run(["--store", store, "put", big])
    #expect(put.status == 65 && put.stderr.contains("more than max-object-size 1.5 KB (1500 bytes"))
    let add = try CLI.run([
      "--store", store, "remote", "add", "r", "http://127.0.0.1:9/x", "--max-object-size", "1.5GB",
    ])
    #expect(add.out == "added remote 'r' (http://127.0.0.1:9/x, max-object-size 1.5 GB)\n")
    let ls = try CLI.run(["--store", store, "remote", "ls"])
    #expect(ls.out.contains("max-object-size 1.5 GB"), "\(ls.out)")
  }

  @Test("a failure of one of many gets names its destination; get --from a missing list says why")
  func getManyNamesDestination() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", Bytes.random(5000, seed: 4))
    let digest = XXH3Hasher.digest(try contents(file))
    #expect(try CLI.run(["--store", store, "put", file]).status == 0)
    try FileManager.default.createDirectory(
      atPath: scratch["out"], withIntermediateDirectories: true)
    // The object cannot be read: the message names the file not made.
    let run = try CLI.run(
      ["--store", store, "get", "--mode", "copy", digest.description, "-C", scratch["out"]],
      environment: ["TROVE_INJECT_FAULT": "read:5:2"])
    #expect(run.status == 74, "\(run.stderr)")
    #expect(
      run.errorLines.count == 1
        && run.stderr.hasPrefix("Error: cannot write '\(scratch["out"])/\(digest.hex)': "),
      "\(run.stderr)")
    let missing = try CLI.run(["--store", store, "get", "--from", scratch["nofile"]])
    #expect(missing.status == 66, "\(missing.stderr)")
    #expect(
      missing.stderr == "Error: cannot read '\(scratch["nofile"])': No such file or directory\n")
    let folder = try CLI.run(["--store", store, "get", "--from", scratch["out"]])
    #expect(folder.status == 66 && folder.stderr.contains("Is a directory"), "\(folder.stderr)")
  }

  @Test("hash of a folder is exit 66, in put's words")
  func hashFolder() throws {
    let scratch = try Scratch()
    let run = try CLI.run(["hash", scratch.path])
    #expect(run.status == 66)
    #expect(run.stderr == "Error: cannot hash '\(scratch.path)': it is a directory\n")
    let put = try CLI.run(["--store", scratch["store"], "put", scratch.path])
    #expect(
      put.status == 66 && put.stderr == "Error: cannot put '\(scratch.path)': it is a directory\n")
  }

  @Test("config unset access says why it cannot; unset or reset of an overridden setting warns")
  func configUnset() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let access = try CLI.run(["--store", store, "config", "unset", "access"])
    #expect(
      access.status == 64 && access.errorLines.first?.contains("access has no default") == true)
    let env = ["TROVE_BUDGET": "5G"]
    #expect(try CLI.run(["--store", store, "config", "set", "budget", "1G"]).status == 0)
    let unset = try CLI.run(["--store", store, "config", "unset", "budget"], environment: env)
    #expect(unset.status == 0)
    #expect(
      unset.stderr
        == "trove: warning: TROVE_BUDGET still overrides budget in this environment: unset it to use the default\n"
    )
    let quiet = try CLI.run(["--store", store, "config", "unset", "max-age"], environment: env)
    #expect(quiet.status == 0 && quiet.stderr.isEmpty, "\(quiet.stderr)")
    let reset = try CLI.run(["--store", store, "config", "reset"], environment: env)
    #expect(reset.status == 0 && reset.stderr.contains("TROVE_BUDGET still overrides budget"))
    let plain = try CLI.run(["--store", store, "config", "reset"])
    #expect(plain.status == 0 && plain.stderr.isEmpty)
  }

  @Test("--json with --format is refused; keys rm --json is refused")
  func jsonAndFormat() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", [1, 2, 3])
    for arguments in [
      ["put", "--json", "--format", "xxhsum", file], ["ls", "--json", "--format", "xxhsum"],
      ["put", "--format=trove", "--json", file], ["keys", "rm", "--json", "k"],
    ] {
      let run = try CLI.run(["--store", store] + arguments)
      #expect(
        run.status == 64 && run.errorLines.first?.hasPrefix("Error: ") == true, "\(arguments)")
      #expect(run.out.isEmpty)
    }
    #expect(!FileManager.default.fileExists(atPath: store))
  }

  @Test("verify counts a corrupt file the index does not know once: as corrupt")
  func corruptOrphanCountedOnce() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", [1, 2, 3])
    #expect(try CLI.run(["--store", store, "put", file]).status == 0)
    let hex = String(repeating: "ab", count: 16)
    try FileManager.default.createDirectory(
      atPath: store + "/objects/ab", withIntermediateDirectories: true)
    try scratch.write("store/objects/ab/" + hex, Array("junk".utf8))
    for repair in [false, true] {
      let run = try CLI.run(["--store", store, "verify", "--json"] + (repair ? ["--repair"] : []))
      let report = try #require(
        try JSONSerialization.jsonObject(with: Data(run.stdout)) as? [String: Any])
      #expect((report["corrupt"] as? [String]) == ["xxh128:" + hex], "repair \(repair)")
      #expect(report["orphanFiles"] as? Int == 0, "repair \(repair): \(run.out)")
    }
    // An orphan that is intact is still one orphan.
    try FileManager.default.removeItem(atPath: store + "/index.sqlite")
    let rebuilt = try CLI.run(["--store", store, "verify"])
    #expect(
      rebuilt.stderr.contains("rebuilt from the objects: 1 object, 0 pins and 0 keys restored"),
      "\(rebuilt.stderr)")
  }

  @Test("standard input is <stdin> in every message")
  func stdinName() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let put = try CLI.run(["--store", store, "put", "--expect-size", "9", "-"], stdin: [1, 2, 3])
    #expect(put.stderr == "Error: '<stdin>' is 3 bytes, expected 9 (--expect-size)\n")
    let list = try CLI.run(["--store", store, "get", "--from", "-"], stdin: Array("bad\n".utf8))
    #expect(list.status == 64 && list.stderr.hasPrefix("Error: <stdin>:1: "), "\(list.stderr)")
    let urls = try CLI.run(
      ["--store", store, "fetch", "-i", "-"], stdin: Array("http://x/ sha256:zz\n".utf8))
    #expect(urls.status == 64 && urls.stderr.hasPrefix("Error: <stdin>:1: "), "\(urls.stderr)")
    let archive = try CLI.run(["--store", store, "import", "-"], stdin: [1, 2, 3])
    #expect(archive.status == 65 && archive.stderr.contains("'<stdin>'"), "\(archive.stderr)")
    // And standard output, <output>.
    let full = try CLI.run(
      [], prefix: ["/bin/bash", "-c", "\"$0\" --store '\(store)' dir >/dev/full", CLI.executable])
    #expect(full.status == 74)
    #expect(full.stderr == "Error: cannot write '<output>': No space left on device\n")
  }

  @Test(
    "keys --json gives Last-Modified as ISO 8601",
    .enabled(if: Nginx.executable != nil, Nginx.missing))
  func lastModifiedISO() throws {
    let nginx = try Nginx()
    let served = try nginx.files.write("a.bin", Bytes.random(1000, seed: 7))
    try FileManager.default.setAttributes(
      [.modificationDate: Date(timeIntervalSince1970: 1_577_934_245)], ofItemAtPath: served)
    let scratch = try Scratch()
    let store = scratch["store"]
    let fetch = try CLI.run(["--store", store, "fetch", nginx.url("/a.bin")])
    #expect(fetch.status == 0, "\(fetch.stderr)")
    let keys = try CLI.run(["--store", store, "keys", "--json"])
    let records = try #require(
      try JSONSerialization.jsonObject(with: Data(keys.stdout)) as? [[String: Any]])
    #expect(records.first?["lastModified"] as? String == "2020-01-02T03:04:05Z", "\(keys.out)")
  }

  @Test("an invalid TROVE_RECORD is refused by every command, also dir and hash")
  func invalidRecordEverywhere() throws {
    let scratch = try Scratch()
    let file = try scratch.write("f", [1])
    for arguments in [["dir"], ["hash", file], ["ls"], ["put", file]] {
      let run = try CLI.run(
        ["--store", scratch["store"]] + arguments, environment: ["TROVE_RECORD": "../x"])
      #expect(run.status == 64 && run.stderr.contains("TROVE_RECORD"), "\(arguments)")
      #expect(run.out.isEmpty)
    }
    #expect(!FileManager.default.fileExists(atPath: scratch["store"]))
  }

  @Test("pin --for 0 and put --key '' are usage errors; reindex -q says nothing")
  func refusedValues() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", [1, 2, 3])
    #expect(try CLI.run(["--store", store, "put", file]).status == 0)
    let digest = XXH3Hasher.digest([1, 2, 3]).description
    for lease in ["0", "0s", "0d"] {
      let pin = try CLI.run(["--store", store, "pin", "--for", lease, digest])
      #expect(pin.status == 64, "\(lease): \(pin.stderr)")
      #expect(
        pin.errorLines.first
          == "Error: invalid --for '\(lease)': duration must be positive (without --for a pin has no lease)"
      )
    }
    #expect(try CLI.run(["--store", store, "pins"]).out.isEmpty)
    let key = try CLI.run(["--store", store, "put", "--key", "", file])
    #expect(
      key.status == 64 && key.errorLines.first == "Error: invalid --key '': a key is not empty")
    #expect(try CLI.run(["--store", store, "keys"]).out.isEmpty)
    let quiet = try CLI.run(["--store", store, "reindex", "-q"])
    #expect(quiet.status == 0 && quiet.stderr.isEmpty, "\(quiet.stderr)")
    let said = try CLI.run(["--store", store, "reindex", "-v"])
    #expect(said.stderr.hasPrefix("trove: index rebuilt: 0 added"), "\(said.stderr)")
  }

  @Test(
    "export - to a terminal is refused, as tar refuses",
    .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script"), "needs script(1)")
  )
  func exportToTerminal() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "record", "start", "r"]).status == 0)
    // script(1) gives trove a terminal for stdout and stderr.
    let run = try CLI.run(
      ["--store", store, "export", "--record", "r", "-"],
      prefix: [
        "/bin/bash", "-c", #"exec script -qfec "$(printf '%q ' "$0" "$@")" /dev/null"#,
      ])
    #expect(run.status == 64, "\(run.out)")
    #expect(run.out.contains("Error: refusing to write an archive to a terminal"), "\(run.out)")
    #expect(!run.out.contains("trove-export.json"))
  }

  @Test("trove alone is a usage error on stderr; missing actions are named alike")
  func bareAndActions() throws {
    let bare = try CLI.run([])
    #expect(bare.status == 64 && bare.out.isEmpty)
    #expect(bare.errorLines.first == "Error: Missing expected argument '<subcommand>'")
    #expect(bare.errorLines.dropFirst().first?.hasPrefix("Usage: trove") == true)
    let help = try CLI.run(["--help"])
    #expect(help.status == 0 && help.out.hasPrefix("OVERVIEW"))
    let scratch = try Scratch()
    for command in ["remote", "record"] {
      let run = try CLI.run(["--store", scratch["s"], command])
      #expect(run.status == 64)
      #expect(
        run.errorLines.first?.hasPrefix("Error: Missing expected argument '<action>': one of ")
          == true, "\(command): \(run.stderr)")
    }
  }

  @Test("bare hex too short for a prefix that is no key is a usage error with the usage line")
  func shortHex() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "put", try scratch.write("f", [9])]).status == 0)
    let run = try CLI.run(["--store", store, "get", "abc", scratch["out"]])
    #expect(run.status == 64 && run.errorLines.count == 3, "\(run.stderr)")
    #expect(run.errorLines[1].hasPrefix("Usage: trove [--store <dir>] get "))
  }
}
