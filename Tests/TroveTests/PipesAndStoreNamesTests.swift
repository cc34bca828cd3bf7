import Foundation
import Testing

@testable import Trove

/// The command line as Unix tools behave: a closed
/// pipe ends a command quietly, a store that is not there is never made
/// by a command that only reads, and store paths are expanded and
/// absolute.
@Suite("pipes and store names")
struct PipesAndStoreNamesTests {
  /// Runs `script` in bash with `$0` the trove executable; returns what
  /// it printed and wrote on stderr.
  func bash(_ script: String) throws -> CLI.Result {
    try CLI.run([], prefix: ["/bin/bash", "-c", script])
  }

  @Test("a closed stdout ends get - with 141 and a listing with 0, both without a word")
  func closedPipes() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let big = try scratch.write("big", Bytes.random(2 << 20, seed: 600))
    #expect(try CLI.run(["--store", store, "put", big]).status == 0)
    let digest = XXH3Hasher.digest(try contents(big))
    let get = try bash(
      "\"$0\" --store '\(store)' get \(digest) - | head -c 10 >/dev/null; echo ${PIPESTATUS[0]}")
    #expect(get.out == "141\n" && get.stderr.isEmpty, "\(get.out) \(get.stderr)")
    // More lines than a pipe holds, so the listing outlives its reader.
    var files: [String] = []
    for i in 0..<1500 { files.append(try scratch.write("f\(i)", Array("file \(i)\n".utf8))) }
    #expect(try CLI.run(["--store", store, "put"] + files).status == 0)
    for listing in ["ls", "keys", "pins"] {
      let run = try bash(
        "set -o pipefail; \"$0\" --store '\(store)' \(listing) | head -1 >/dev/null; echo $?")
      #expect(run.out == "0\n" && run.stderr.isEmpty, "\(listing): \(run.out) \(run.stderr)")
    }
  }

  @Test("put - - is refused: standard input can be read once")
  func stdinTwice() throws {
    let scratch = try Scratch()
    let put = try CLI.run(["--store", scratch["store"], "put", "-", "-"], stdin: [1, 2, 3])
    #expect(put.status == 64 && put.stderr.contains("read once"), "\(put.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["store/objects"]))
  }

  @Test(
    "commands that do not store never create a store: a missing one is a miss, an empty listing, or exit 66"
  )
  func missingStore() throws {
    let scratch = try Scratch()
    let typo = scratch["typo"]
    let digest = XXH3Hasher.digest([1]).description
    for arguments in [
      ["has", digest], ["get", digest, scratch["out"]], ["path", digest], ["ls"], ["stats"],
      ["pins"], ["keys"], ["verify"], ["rm", digest], ["pin", digest], ["dir"],
    ] {
      let run = try CLI.run(["--store", typo] + arguments)
      if arguments == ["dir"] {
        #expect(run.status == 0 && run.out == typo + "\n")
      } else if ["has", "get", "path"].contains(arguments[0]) {
        // An empty cache (MissingStoreTests): a miss.
        #expect(run.status == 1, "\(arguments): \(run.status) \(run.stderr)")
      } else if ["ls", "pins", "keys"].contains(arguments[0]) {
        #expect(run.status == 0 && run.out == "", "\(arguments): \(run.status) \(run.stderr)")
      } else {
        #expect(run.status == 66, "\(arguments): \(run.status) \(run.stderr)")
        #expect(
          run.errorLines == ["Error: no store at '\(typo)': nothing was ever stored there"],
          "\(arguments): \(run.stderr)")
      }
      #expect(!FileManager.default.fileExists(atPath: typo), "\(arguments) made the store")
    }
    // An empty folder is not a store yet either, and stays empty.
    try FileManager.default.createDirectory(atPath: typo, withIntermediateDirectories: false)
    #expect(try CLI.run(["--store", typo, "verify"]).status == 66)
    #expect(scratch.list("typo").isEmpty)
    // Storing makes it.
    #expect(try CLI.run(["--store", typo, "put", "-"], stdin: [1]).status == 0)
    #expect(try CLI.run(["--store", typo, "has", digest]).status == 0)
  }

  @Test("~ in --store is expanded as a shell would; a relative store prints absolute paths")
  func storeNames() throws {
    let scratch = try Scratch()
    let home = ["HOME": scratch.path]
    let dir = try CLI.run(["--store", "~/cache", "dir"], environment: home)
    #expect(dir.out == scratch["cache"] + "\n", "\(dir.out)")
    #expect(
      try CLI.run(["--store", "~/cache", "put", "-"], stdin: [7], environment: home).status == 0)
    #expect(FileManager.default.fileExists(atPath: scratch["cache/config.json"]))
    #expect(
      !FileManager.default.fileExists(atPath: FileManager.default.currentDirectoryPath + "/~"))
    let root = try CLI.run(["--store", "~root/x", "dir"])
    #expect(root.out == "/root/x\n", "\(root.out)")
    // Relative to where trove runs: `path` prints the whole path.
    let digest = XXH3Hasher.digest([7])
    let relative = try CLI.run(
      [],
      prefix: ["/bin/sh", "-c", "cd '\(scratch.path)' && exec \"$0\" --store cache path \(digest)"])
    let object = objectFilePath(scratch["cache"], digest)
    #expect(
      relative.out == URL(fileURLWithPath: object).standardizedFileURL.path + "\n",
      "\(relative.out) \(relative.stderr)")
  }

  @Test(
    "-q silences warnings (copied, not cloned), before or after the subcommand; errors still print",
    .enabled(
      if: !TestFilesystems.tempCanClone,
      "the temp folder's filesystem clones: no fallback to warn of"
    ))
  func quiet() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "put", "-"], stdin: [1, 2, 3]).status == 0)
    let digest = XXH3Hasher.digest([1, 2, 3]).description
    let loud = try CLI.run(["--store", store, "get", digest, scratch["a"]])
    #expect(loud.status == 0 && loud.stderr.contains("trove: warning: copied"), "\(loud.stderr)")
    let quietAfter = try CLI.run(["--store", store, "get", "-q", digest, scratch["b"]])
    let quietBefore = try CLI.run(["-q", "--store", store, "get", digest, scratch["c"]])
    #expect(quietAfter.status == 0 && quietAfter.stderr.isEmpty, "\(quietAfter.stderr)")
    #expect(quietBefore.status == 0 && quietBefore.stderr.isEmpty, "\(quietBefore.stderr)")
    let failing = try CLI.run(["--store", store, "get", "--quiet", digest, scratch["c"]])
    #expect(failing.status == 73 && failing.stderr.hasPrefix("Error: "), "\(failing.stderr)")
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

}

/// `trove hash` and `--format xxhsum`: lines that
/// `xxhsum -c` checks.
@Suite("hash and xxhsum lines")
struct XXHsumFormatTests {
  @Test(
    "hash prints put's digest without storing; --format xxhsum lines pass xxhsum -c",
    .enabled(if: TestFilesystems.xxhsum != nil, "xxhsum is not installed"))
  func xxhsumLines() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let a = try scratch.write("a", Bytes.random(300_000, seed: 700))
    let b = try scratch.write("b", Bytes.random(5, seed: 701))
    let hash = try CLI.run(["hash", a, b])
    #expect(hash.status == 0)
    #expect(
      hash.out
        == "\(XXH3Hasher.digest(try contents(a)))  \(a)\n\(XXH3Hasher.digest(try contents(b)))  \(b)\n"
    )
    #expect(!FileManager.default.fileExists(atPath: store), "hash opens no store")
    let piped = try CLI.run(["hash", "-"], stdin: try contents(a))
    #expect(piped.out == "\(XXH3Hasher.digest(try contents(a)))  -\n")
    let missing = try CLI.run(["hash", scratch["missing"]])
    #expect(missing.status == 66 && missing.errorLines.count == 1, "\(missing.stderr)")
    // Each form of lines, checked by xxhsum itself.
    let forms = [
      try CLI.run(["hash", "--format", "xxhsum", a, b]),
      try CLI.run(["--store", store, "put", "--format", "xxhsum", a, b]),
      try CLI.run(["--store", store, "ls", "--format", "xxhsum"]),
    ]
    for (i, lines) in forms.enumerated() {
      #expect(
        lines.status == 0 && lines.out.split(separator: "\n").count == 2, "\(i): \(lines.out)")
      let list = try scratch.write("sums-\(i)", lines.stdout)
      let check = Process()
      check.executableURL = URL(fileURLWithPath: TestFilesystems.xxhsum!)
      check.arguments = ["-c", list]
      check.standardOutput = FileHandle.nullDevice
      check.standardError = FileHandle.nullDevice
      try check.run()
      check.waitUntilExit()
      #expect(check.terminationStatus == 0, "\(i): xxhsum -c rejected \(lines.out)")
    }
    let bad = try CLI.run(["hash", "--format", "md5", a])
    #expect(bad.status == 64)
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

}

/// `trove clean`, as `ccache -C` and `uv cache clean`.
@Suite("clean")
struct CleanTests {
  @Test(
    "clean empties the store, or keeps the pinned; it asks, or needs --yes; damaged settings do not stop it"
  )
  func clean() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    var digests: [BlobDigest] = []
    for i in 0..<4 {
      let data = Bytes.random(20_000, seed: UInt64(800 + i))
      #expect(try CLI.run(["--store", store, "put", "-"], stdin: data).status == 0)
      digests.append(XXH3Hasher.digest(data))
    }
    #expect(try CLI.run(["--store", store, "pin", digests[0].description]).status == 0)
    let dry = try CLI.run(["--store", store, "clean", "--dry-run"])
    #expect(dry.status == 0 && dry.out.hasPrefix("would remove 4 objects"), "\(dry.out)")
    let unasked = try CLI.run(["--store", store, "clean"])
    #expect(unasked.status == 64 && unasked.stderr.contains("--yes"), "\(unasked.stderr)")
    #expect(try CLI.run(["--store", store, "ls"]).out.split(separator: "\n").count == 4)
    let keep = try CLI.run(["--store", store, "clean", "--keep-pinned", "--yes"])
    #expect(
      keep.status == 0 && keep.out.hasPrefix("removed 3 objects"), "\(keep.out) \(keep.stderr)")
    #expect(try CLI.run(["--store", store, "has", digests[0].description]).status == 0)
    // Settings written by hand that no command may act on: clean still empties.
    try scratch.write("store/config.json", Array("{ not json".utf8))
    let all = try CLI.run(["--store", store, "clean", "-y"])
    #expect(all.status == 0 && all.out.hasPrefix("removed 1 object "), "\(all.out) \(all.stderr)")
    #expect(try CLI.run(["--store", store, "ls"]).out.isEmpty)
    #expect(try CLI.run(["--store", store, "pins"]).out.isEmpty)
  }
}
