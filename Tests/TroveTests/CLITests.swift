import Foundation
import Testing

@testable import Trove

/// The built `trove` run as a process: output contracts, exit statuses, errors.
@Suite("trove command line")
struct CLITests {
  @Test("put prints 'DIGEST  NAME' with the hex xxhsum -H2 prints; get and has agree")
  func putGetHas() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let data = Bytes.random(1_500_000, seed: 40)
    let file = try scratch.write("in.bin", data)
    let put = try CLI.run(["--store", store, "put", file])
    #expect(put.status == 0)
    let digest = XXH3Hasher.digest(data)
    #expect(put.out == "\(digest)  \(file)\n")
    #expect(put.stderr.isEmpty)
    let get = try CLI.run(["get", digest.description, scratch["out.bin"], "--store", store])
    #expect(get.status == 0, "\(get.stderr)")
    #expect(try contents(scratch["out.bin"]) == data)
    #expect(try CLI.run(["--store", store, "has", digest.description]).status == 0)
    #expect(try CLI.run(["--store", store, "has", XXH3Hasher.digest([1]).description]).status == 1)
    let toStdout = try CLI.run(["--store", store, "get", digest.description, "-"])
    #expect(toStdout.status == 0 && toStdout.stdout == data)
    let path = try CLI.run(["--store", store, "path", digest.description])
    #expect(path.out == objectFilePath(scratch["store"], digest) + "\n")
  }

  @Test("put - reads standard input; several inputs print one line each")
  func stdinAndMany() throws {
    let scratch = try Scratch()
    let data = Bytes.random(200_000, seed: 41)
    let put = try CLI.run(["--store", scratch["store"], "put", "-"], stdin: data)
    #expect(put.out == "\(XXH3Hasher.digest(data))  -\n")
    let a = try scratch.write("a", [1])
    let b = try scratch.write("b", [2])
    let many = try CLI.run(["--store", scratch["store"], "put", a, scratch["missing"], b])
    #expect(many.status == 66)
    #expect(many.out == "\(XXH3Hasher.digest([1]))  \(a)\n\(XXH3Hasher.digest([2]))  \(b)\n")
    #expect(
      many.errorLines == [
        "Error: cannot read '\(scratch["missing"])': No such file or directory (open, errno 2)"
      ])
  }

  @Test("put - from a pipe streams; from a redirected file it reads from the offset")
  func pipes() throws {
    let scratch = try Scratch()
    let data = Bytes.random(3_000_000, seed: 44)
    let file = try scratch.write("in.bin", data)
    let shell = Process()
    shell.executableURL = URL(fileURLWithPath: "/bin/sh")
    shell.arguments = [
      "-c", "cat \"$0\" | \"$1\" --store \"$2\" put --json - > \"$3\"", file, CLI.executable,
      scratch["store"], scratch["out.json"],
    ]
    try shell.run()
    shell.waitUntilExit()
    #expect(shell.terminationStatus == 0)
    let records = try JSONSerialization.jsonObject(with: Data(try contents(scratch["out.json"])))
    let record = try #require((records as? [[String: Any]])?.first)
    #expect(record["digest"] as? String == XXH3Hasher.digest(data).description)
    #expect(record["ingest"] as? String == "stream")
    // A redirected file whose offset is not 0: only the rest is stored.
    let skip = Process()
    skip.executableURL = URL(fileURLWithPath: "/bin/sh")
    skip.arguments = [
      "-c", "{ head -c 1000 >/dev/null; \"$1\" --store \"$2\" put -; } < \"$0\" > \"$3\"", file,
      CLI.executable, scratch["store"], scratch["out.txt"],
    ]
    try skip.run()
    skip.waitUntilExit()
    let line = String(decoding: try contents(scratch["out.txt"]), as: UTF8.self)
    #expect(line == "\(XXH3Hasher.digest(Array(data[1000...])))  -\n")
  }

  @Test("TROVE_STORE names the store when --store is absent")
  func environmentStore() throws {
    let scratch = try Scratch()
    let file = try scratch.write("f", [7, 7])
    let put = try CLI.run(["put", file], environment: ["TROVE_STORE": scratch["env-store"]])
    #expect(put.status == 0)
    #expect(scratch.list("env-store").contains("objects"))
  }

  @Test("rm removes; removing again fails")
  func remove() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", [1, 2, 3])
    let digest = XXH3Hasher.digest([1, 2, 3]).description
    _ = try CLI.run(["--store", store, "put", file])
    #expect(try CLI.run(["--store", store, "rm", digest]).status == 0)
    #expect(try CLI.run(["--store", store, "has", digest]).status == 1)
    let again = try CLI.run(["--store", store, "rm", digest])
    #expect(again.status == 1)
    #expect(again.errorLines == ["Error: no object \(digest) in store '\(store)'"])
  }

  @Test("ls, stats, put and get speak JSON with exact numbers")
  func json() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", Bytes.random(5000, seed: 42))
    let put = try CLI.run(["--store", store, "put", "--json", file, file])
    let records = try #require(
      try JSONSerialization.jsonObject(with: Data(put.stdout)) as? [[String: Any]])
    #expect(records.count == 2)
    #expect(records[0]["duplicate"] as? Bool == false && records[1]["duplicate"] as? Bool == true)
    #expect(records[0]["size"] as? Int == 5000)
    let digest = try #require(records[0]["digest"] as? String)
    let ls = try CLI.run(["--store", store, "ls", "--json"])
    let entries = try #require(
      try JSONSerialization.jsonObject(with: Data(ls.stdout)) as? [[String: Any]])
    #expect(entries.count == 1 && entries[0]["digest"] as? String == digest)
    let stats = try CLI.run(["--store", store, "stats", "--json"])
    let s = try #require(
      try JSONSerialization.jsonObject(with: Data(stats.stdout)) as? [String: Any])
    #expect(s["entries"] as? Int == 1)
    #expect(s["logicalBytes"] as? Int == 5000)
    #expect(s["dedupHits"] as? Int == 1)
    #expect(s["dedupSavedBytes"] as? Int == 5000)
    #expect(s["cloneSupported"] is Bool)
    let get = try CLI.run(["--store", store, "get", "--json", digest, scratch["out"]])
    let g = try #require(try JSONSerialization.jsonObject(with: Data(get.stdout)) as? [String: Any])
    #expect(["clone", "copy_file_range", "copy"].contains(g["method"] as? String ?? ""))
    let human = try CLI.run(["--store", store, "stats"])
    #expect(human.out.contains("4.9 KiB (5000 bytes)"))
  }

  @Test("-h, --help and help CMD print help on stdout; --version prints the version")
  func help() throws {
    for args in [["--help"], ["-h"], ["help"]] {
      let r = try CLI.run(args)
      #expect(r.status == 0)
      #expect(r.out.contains("USAGE: trove") && r.out.contains("SUBCOMMANDS:"))
    }
    for args in [["help", "get"], ["get", "--help"], ["get", "-h"]] {
      let r = try CLI.run(args)
      #expect(r.status == 0)
      #expect(r.out.contains("USAGE: trove [--store <dir>] get") && r.out.contains("--mode <mode>"))
    }
    let version = try CLI.run(["--version"])
    #expect(version.status == 0 && !version.out.isEmpty)
  }

  @Test(
    "usage errors exit 64 with 'Error:' and the usage line on stderr",
    arguments: [
      (["frobnicate"], "Error: Unknown command 'frobnicate'"),
      (["put"], "Error: Missing expected argument '<file>'"),
      (["get", "--bogus"], "Error: Unknown option '--bogus'"),
      (["get", "xxh128:00"], "Error: Missing expected argument '<destination>'"),
      (
        ["get", "sha256:abc", "out"],
        "Error: invalid checksum 'sha256:abc': expected 64 hex digits after 'sha256:', found 3"
      ),
      (
        ["get", "--mode", "teleport", "xxh128:99aa06d3014798d86001c324468d497f", "x"],
        "Error: invalid mode 'teleport': expected auto, clone, copy or hardlink"
      ),
      (["has"], "Error: Missing expected argument '<digest-or-key>'"),
      (["ls", "extra"], "Error: Unexpected argument 'extra'"),
      (["get", "--mode"], "Error: Missing value for '--mode <mode>'"),
    ])
  func usageErrors(arguments: [String], message: String) throws {
    let scratch = try Scratch()
    let r = try CLI.run(["--store", scratch["store"]] + arguments)
    #expect(r.status == 64)
    #expect(r.out.isEmpty)
    #expect(r.errorLines.first == message)
    #expect(r.errorLines.count >= 2 && r.errorLines[1].hasPrefix("Usage: trove"))
  }

  @Test("runtime failures: one line naming the value or path, sysexits status, nothing left")
  func runtimeErrors() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", [1, 2, 3])
    let digest = XXH3Hasher.digest([1, 2, 3]).description
    _ = try CLI.run(["--store", store, "put", file])
    try scratch.write("exists", [9])
    let cases: [([String], Int32, String)] = [
      (["put", scratch.path], 66, "Error: cannot put '\(scratch.path)': it is a directory"),
      (
        ["get", digest, scratch["exists"]], 73,
        "Error: cannot write '\(scratch["exists"])': it already exists"
      ),
      (
        ["get", digest, scratch["no/dir/out"]], 73,
        "Error: cannot write '\(scratch["no/dir/out"])': folder '\(scratch["no/dir"])' does not exist: No such file or directory (open, errno 2)"
      ),
      (
        ["get", XXH3Hasher.digest([4]).description, scratch["x"]], 1,
        "Error: no object \(XXH3Hasher.digest([4])) in store '\(store)'"
      ),
      (
        ["path", XXH3Hasher.digest([4]).description], 1,
        "Error: no object \(XXH3Hasher.digest([4])) in store '\(store)'"
      ),
    ]
    for (args, status, line) in cases {
      let r = try CLI.run(["--store", store] + args)
      #expect(r.status == status, "\(args)")
      #expect(r.errorLines == [line])
    }
    #expect(try contents(scratch["exists"]) == [9])
    #expect(scratch.list("").sorted() == ["exists", "f", "store"])
    let forced = try CLI.run(["--store", store, "get", "--force", digest, scratch["exists"]])
    #expect(forced.status == 0)
    #expect(try contents(scratch["exists"]) == [1, 2, 3])
  }

  @Test("config lists, gets and sets settings; bad values exit 64 with the accepted forms")
  func config() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let list = try CLI.run(["--store", store, "config"])
    #expect(list.status == 0)
    #expect(
      list.out.split(separator: "\n").map { $0.split(separator: " ").first ?? "" } == [
        "access", "budget", "max-age", "low-water", "access-resolution", "min-free",
        "max-object-size",
        "tmp-max-age", "compression", "compression-workers", "compression-min-size", "checksums",
        "evict-remote-first", "signing-key", "rewrite", "mirror", "chunking",
        "chunk-min-object-size",
      ])
    #expect(try CLI.run(["--store", store, "config", "set", "budget", "1.5GiB"]).status == 0)
    #expect(try CLI.run(["--store", store, "config", "get", "budget"]).out == "1.5 GiB\n")
    #expect(try CLI.run(["--store", store, "config", "set", "max-age", "30d"]).status == 0)
    #expect(try CLI.run(["--store", store, "config", "get", "max-age"]).out == "30d\n")
    let bad = try CLI.run(["--store", store, "config", "set", "budget", "lots"])
    #expect(bad.status == 64)
    #expect(
      bad.errorLines.first
        == "Error: invalid budget 'lots': expected a size such as 500M, 10G, 1.5GiB or 0, or 'none'"
    )
    let unknown = try CLI.run(["--store", store, "config", "get", "colour"])
    #expect(
      unknown.status == 64 && unknown.errorLines.first?.contains("unknown setting 'colour'") == true
    )
    let json = try JSONSerialization.jsonObject(
      with: Data(try contents(scratch["store/config.json"])))
    let policy = (json as? [String: Any])?["policy"] as? [String: Any]
    #expect(policy?["budget"] as? Int == 1_610_612_736)
  }

  @Test("sweep, pin by key, pins and unpin through the command line")
  func sweepAndPins() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    var digests: [String] = []
    for i in 0..<5 {
      let file = try scratch.write("f\(i)", Bytes.random(20_000, seed: UInt64(50 + i)))
      let key = i == 0 ? ["--key", "https://example.org/f0"] : []
      let put = try CLI.run(["--store", store, "put"] + key + [file])
      digests.append(String(put.out.split(separator: " ")[0]))
    }
    #expect(
      try CLI.run([
        "--store", store, "pin", "--name", "ci", "--for", "2h", "https://example.org/f0",
      ]).status == 0)
    let pins = try CLI.run(["--store", store, "pins"])
    #expect(pins.out.hasPrefix("\(digests[0])  ci  "))
    let plan = try CLI.run(["--store", store, "sweep", "--budget", "0", "--dry-run"])
    #expect(plan.out.hasPrefix("would remove 4 entries"))
    #expect(try CLI.run(["--store", store, "ls"]).out.split(separator: "\n").count == 5)
    let sweep = try CLI.run(["--store", store, "sweep", "--budget", "0", "--json"])
    let report = try #require(
      try JSONSerialization.jsonObject(with: Data(sweep.stdout)) as? [String: Any])
    #expect(report["evictedEntries"] as? Int == 4)
    #expect(try CLI.run(["--store", store, "ls"]).out.hasPrefix(digests[0]))
    #expect(try CLI.run(["--store", store, "unpin", "--name", "ci", digests[0]]).status == 0)
    let again = try CLI.run(["--store", store, "unpin", "--name", "ci", digests[0]])
    #expect(
      again.status == 1
        && again.errorLines == ["Error: \(digests[0]) has no pin named 'ci' in store '\(store)'"])
    let missingKey = try CLI.run(["--store", store, "pin", "nosuchkey"])
    #expect(
      missingKey.status == 1
        && missingKey.errorLines == ["Error: no key 'nosuchkey' in store '\(store)'"])
    let badAge = try CLI.run(["--store", store, "sweep", "--max-age", "soon"])
    #expect(badAge.status == 64)
    let stats = try CLI.run(["--store", store, "stats", "--json"])
    let s = try #require(
      try JSONSerialization.jsonObject(with: Data(stats.stdout)) as? [String: Any])
    #expect((s["lastSweep"] as? [String: Any])?["removedEntries"] as? Int == 4)
  }

  @Test("a key names its object wherever a digest does; keys lists and removes keys")
  func keysEverywhere() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let bytes = Bytes.random(5000, seed: 260)
    let file = try scratch.write("model.bin", bytes)
    let url = "https://example.org/models/model.bin"
    let put = try CLI.run(["--store", store, "put", "--key", url, file])
    let digest = String(put.out.prefix(39))
    #expect(try CLI.run(["--store", store, "has", url]).status == 0)
    #expect(try CLI.run(["--store", store, "get", url, "-"]).stdout == bytes)
    #expect(try CLI.run(["--store", store, "get", url, scratch["out"]]).status == 0)
    #expect(try contents(scratch["out"]) == bytes)
    let path = try CLI.run(["--store", store, "path", url]).out
    #expect(path == objectFilePath(scratch["store"], try BlobDigest(parsing: digest)) + "\n")
    let listed = try CLI.run(["--store", store, "keys"])
    #expect(listed.out == "\(digest)     4.9 KiB  \(url)\n")
    let json =
      try JSONSerialization.jsonObject(
        with: Data(try CLI.run(["--store", store, "keys", "--json"]).stdout)) as? [[String: Any]]
    #expect(json?.first?["key"] as? String == url && json?.first?["size"] as? Int == 5000)
    // Unbound keys are misses; digest-shaped text of another kind is a usage error.
    #expect(try CLI.run(["--store", store, "has", "https://example.org/nope"]).status == 1)
    let miss = try CLI.run(["--store", store, "get", "https://example.org/nope", scratch["x"]])
    #expect(
      miss.status == 1
        && miss.errorLines == ["Error: no key 'https://example.org/nope' in store '\(store)'"])
    #expect(try CLI.run(["--store", store, "has", "sha256:abc"]).status == 64)
    // keys rm unbinds and leaves the object; rm by key removes the object and its keys.
    #expect(try CLI.run(["--store", store, "keys", "rm", url]).status == 0)
    #expect(try CLI.run(["--store", store, "keys", "rm", url]).status == 1)
    #expect(try CLI.run(["--store", store, "has", digest]).status == 0)
    _ = try CLI.run(["--store", store, "put", "--key", url, file])
    #expect(try CLI.run(["--store", store, "rm", url]).status == 0)
    #expect(try CLI.run(["--store", store, "has", digest]).status == 1)
    #expect(try CLI.run(["--store", store, "keys"]).out.isEmpty)
  }

  @Test("processes putting and sweeping at once leave totals that match the objects on disk")
  func concurrentSweeps() async throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    _ = try CLI.run(["--store", store, "config", "set", "budget", "300K"])
    var files: [String] = []
    for i in 0..<40 {
      files.append(try scratch.write("f\(i)", Bytes.random(10_000 + i, seed: UInt64(200 + i))))
    }
    let commands: [[String]] = [
      ["--store", store, "put"] + Array(files[0..<20]),
      ["--store", store, "put"] + Array(files[20..<40]),
      ["--store", store, "put"] + Array(files[10..<30]),
      ["--store", store, "sweep", "--budget", "100K"],
      ["--store", store, "sweep", "--max-age", "1s"],
      ["--store", store, "sweep"],
    ]
    let statuses = try await withThrowingTaskGroup(of: Int32.self) { group in
      for command in commands { group.addTask { try CLI.run(command).status } }
      return try await group.reduce(into: []) { $0.append($1) }
    }
    // Sweeps may find another sweep running (exit 75); nothing else may fail.
    #expect(statuses.allSatisfy { $0 == 0 || $0 == 75 })
    let onDisk = scratch.list("store/objects").flatMap { fanout in
      scratch.list("store/objects/\(fanout)").map { fanout + "/" + $0 }
    }
    let stats = try #require(
      try JSONSerialization.jsonObject(
        with: Data(try CLI.run(["--store", store, "stats", "--json"]).stdout))
        as? [String: Any])
    #expect(stats["entries"] as? Int == onDisk.count)
    let bytes = try onDisk.map { try fileStatus(scratch["store/objects/" + $0]).size }.reduce(0, +)
    #expect(stats["logicalBytes"] as? Int == Int(bytes))
    let reindex = try CLI.run(["--store", store, "reindex"])
    #expect(
      reindex.errorLines == [
        "trove: index rebuilt: 0 added, 0 dropped, 0 corrected, 0 twins removed"
      ])
    #expect(scratch.temporaries("store").isEmpty)
  }

  @Test("four processes putting the same file at once store it once")
  func concurrentProcesses() async throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("same.bin", Bytes.random(4 * 1024 * 1024, seed: 43))
    let outputs = try await withThrowingTaskGroup(of: String.self) { group in
      for _ in 0..<4 {
        group.addTask { try CLI.run(["--store", store, "put", file]).out }
      }
      return try await group.reduce(into: []) { $0.append($1) }
    }
    #expect(Set(outputs).count == 1)
    #expect(outputs[0].hasPrefix("xxh128:"))
    let ls = try CLI.run(["--store", store, "ls"])
    #expect(ls.out.split(separator: "\n").count == 1)
    #expect(scratch.temporaries("store").isEmpty)
  }

  @Test("trove raises its soft limit on open files to the hard one (two groups of a put stay open)")
  func openFileLimit() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    // /proc/self/limits, opened by the shell and read by the trove it
    // becomes: trove's own limits, stored as an object.
    let put = try CLI.run(
      [],
      prefix: [
        "/bin/sh", "-c",
        "ulimit -Sn 1024 && exec \"$0\" --store \"$1\" put - < /proc/self/limits",
        CLI.executable, store,
      ])
    #expect(put.status == 0, "\(put.stderr)")
    let digest = String(put.out.split(separator: " ").first ?? "")
    let limits = try CLI.run(["--store", store, "get", digest, "-"]).out
    let line = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
    let fields = line.split(separator: " ", omittingEmptySubsequences: true)
    // "Max open files <soft> <hard> files"
    let (soft, hard) = (fields[3], fields[4])
    #expect(soft == hard || (Int(soft) ?? 0) >= 1 << 20, "\(line)")
    #expect(soft != "1024" || hard == "1024", "\(line)")
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

}
