import Foundation

/// What one `trove` process costs when the work itself is nothing: a
/// lookup (`has`) beside `git cat-file -e`, a small clone (`get`) beside
/// `cp --reflink=always`, a put of 4 KiB already stored beside
/// `git hash-object -w`, and the bare start beside `true`. A harness that
/// asks for 200 inputs one process at a time pays this 200 times.
func processSuite(_ b: Bench) throws {
  print("process")
  let calls = b.quick ? 10 : 100
  let folder = b.xfs ?? b.work
  let store = folder + "/process-store"
  let repository = b.work + "/process-git"
  let source = folder + "/process-input.bin"
  let out = folder + "/process-out.bin"
  defer {
    remove(store)
    remove(repository)
    remove(source)
    remove(out)
  }
  try makeRandomFile(source, bytes: 4096)
  let digest =
    try Spawn.capture([b.trove, "--store", store, "put", source])
    .split(separator: " ").first.map(String.init) ?? ""
  try Spawn.check(["git", "init", "-q", repository])
  let oid = try Spawn.capture(["git", "-C", repository, "hash-object", "-w", source])
    .trimmingCharacters(in: .whitespacesAndNewlines)
  let params = ["calls": "\(calls)", "size": "4096"]

  /// Runs each command `calls` times per sample (after `setup`, untimed, each
  /// call) and returns the time of one call.
  func perCall(_ commands: [[String]], setup: @escaping () -> Void = {}) throws -> [Series] {
    let bodies: [() throws -> Void] = commands.map { command in
      {
        for _ in 0..<calls {
          setup()
          try Spawn.check(command)
        }
      }
    }
    return try b.time(bodies).map { Series(samples: $0.samples.map { $0 / Double(calls) }) }
  }

  let starts = try perCall([[b.trove, "--version"], ["true"], ["git", "--version"]])
  b.add(
    Result(
      suite: "process", name: "start: trove --version", parameters: params, unit: .seconds,
      trove: starts[0], referenceName: "true", reference: starts[1],
      note: "the floor: exec, the dynamic loader, the Swift runtime"))
  b.add(
    Result(
      suite: "process", name: "start: trove --version", parameters: params, unit: .seconds,
      trove: starts[0], referenceName: "git --version", reference: starts[2],
      note: "another tool's start: a C program with its own libraries"))
  let lookups = try perCall([
    [b.trove, "--store", store, "has", digest],
    ["git", "-C", repository, "cat-file", "-e", oid],
  ])
  b.add(
    Result(
      suite: "process", name: "has (one process per lookup)", parameters: params,
      unit: .seconds, trove: lookups[0], referenceName: "git cat-file -e", reference: lookups[1],
      note: "opens the store and its index, looks one digest up"))
  // The same 4 KiB each time: trove finds it stored (hash, one lookup), git
  // finds its loose object there (hash, one stat): neither writes again.
  let puts = try perCall([
    [b.trove, "--store", store, "put", source],
    ["git", "-C", repository, "hash-object", "-w", source],
  ])
  b.add(
    Result(
      suite: "process", name: "put 4 KiB already stored (one process per file)",
      parameters: params, unit: .seconds, trove: puts[0], referenceName: "git hash-object -w",
      reference: puts[1], note: "hashes the file and finds the object already stored"))
  // New content each call (written untimed): trove stores it durably (fsync
  // of the file and its folder, an index transaction), and so does git
  // asked to (core.fsync=loose-object, fsyncMethod=fsync): like for like.
  let newInput = folder + "/process-new.bin"
  defer { remove(newInput) }
  var serial: UInt64 = 0
  let fresh = try perCall(
    [
      [b.trove, "--store", store, "put", newInput],
      [
        "git", "-C", repository, "-c", "core.fsync=loose-object", "-c", "core.fsyncMethod=fsync",
        "hash-object", "-w", newInput,
      ],
    ],
    setup: {
      serial += 1
      var bytes = [UInt8](repeating: 0x5A, count: 4096)
      withUnsafeBytes(of: serial) { bytes.replaceSubrange(0..<8, with: $0) }
      _ = FileManager.default.createFile(atPath: newInput, contents: Data(bytes))
    })
  b.add(
    Result(
      suite: "process", name: "put 4 KiB new (one process per file)", parameters: params,
      unit: .seconds, trove: fresh[0], referenceName: "git hash-object -w, core.fsync=loose-object",
      reference: fresh[1], note: "both sync the new object; trove its index entry too"))
  guard b.xfs != nil else { return b.skip("process: get by clone", b.xfsMissing) }
  let clones = try perCall(
    [
      [b.trove, "--store", store, "get", "--mode", "clone", digest, out],
      ["cp", "--reflink=always", source, out],
    ], setup: { remove(out) })
  b.add(
    Result(
      suite: "process", name: "get 4 KiB by clone (one process per file)", parameters: params,
      unit: .seconds, trove: clones[0], referenceName: "cp --reflink=always", reference: clones[1],
      note: "the setup removing the destination is inside both timings alike"))
}
