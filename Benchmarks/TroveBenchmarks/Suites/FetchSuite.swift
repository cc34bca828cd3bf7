import Foundation
import Trove

/// `trove fetch` from a real nginx on 127.0.0.1 (started by
/// `scripts/nginx.sh`), beside curl doing the same transfers.
func fetchSuite(_ b: Bench) throws {
  print("fetch")
  try withNginx(b, suite: "fetch") { www, base in try fetchRows(b, www: www, base: base) }
}

/// The many-small-files rows of the fetch suite alone (`--suite fetch-many`).
func fetchManySuite(_ b: Bench) throws {
  print("fetch-many")
  try withNginx(b, suite: "fetch-many") { www, base in
    let store = b.work + "/fetch-store"
    defer { remove(store) }
    try fetchManySmall(b, base: base, www: www, store: store)
  }
}

/// Runs `body` with nginx serving a fresh folder on 127.0.0.1: the folder
/// and the server's base URL.
func withNginx(_ b: Bench, suite: String, _ body: (String, String) throws -> Void) throws {
  let script = FileManager.default.currentDirectoryPath + "/scripts/nginx.sh"
  guard FileManager.default.isExecutableFile(atPath: script) else {
    b.skip(suite, "run from the repository's root: scripts/nginx.sh starts the server")
    return
  }
  let www = b.work + "/fetch-www"
  let state = b.work + "/fetch-nginx"
  try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
  defer {
    _ = try? Spawn.run([script, "stop", state])
    remove(www)
    remove(state)
  }
  let port = try Spawn.capture([script, "start", www, state])
    .trimmingCharacters(in: .whitespacesAndNewlines)
  try body(www, "http://127.0.0.1:\(port)")
}

private func fetchRows(_ b: Bench, www: String, base: String) throws {
  let store = b.work + "/fetch-store"
  let out = b.work + "/fetch-out.bin"
  defer {
    remove(store)
    remove(out)
  }

  // One large file.
  let size = b.size(1 << 30, quick: 32 << 20)
  let big = "big-\(size).bin"
  try makeRandomFile(www + "/" + big, bytes: size)
  let url = base + "/" + big
  let params = ["size": "\(size)", "server": "nginx on 127.0.0.1"]
  let large = try b.timeCommands([
    [b.trove, "--store", store, "fetch", "-q", url],
    ["curl", "-sSf", "-o", out, url],
    ["sh", "-c", "curl -sSf \"$0\" | xxhsum -H2 -", url],
    ["sh", "-c", "curl -sSf -o \"$1\" \"$0\" && sync \"$1\"", url, out],
  ]) {
    remove(store)
    remove(out)
  }
  let name = "fetch \(sizeName(size))"
  b.add(
    Result(
      suite: "fetch", name: name, parameters: params, unit: .seconds, trove: large[0],
      referenceName: "curl -o FILE", reference: large[1],
      note: "trove also hashes the body and fsyncs the object before publishing it"))
  b.add(
    Result(
      suite: "fetch", name: name, parameters: params, unit: .seconds, trove: large[0],
      referenceName: "curl URL | xxhsum -H2", reference: large[2],
      note: "hashing included on both sides; curl keeps nothing"))
  b.add(
    Result(
      suite: "fetch", name: name, parameters: params, unit: .seconds, trove: large[0],
      referenceName: "curl -o FILE && sync FILE", reference: large[3],
      note: "the same durability as trove, without the hash"))

  let sha = try Spawn.capture(["sha256sum", www + "/" + big]).prefix(64)
  let verified = try b.timeCommands([
    [b.trove, "--store", store, "fetch", "-q", "--expect", "sha256:\(sha)", url],
    ["sh", "-c", "curl -sSf \"$0\" | sha256sum", url],
  ]) { remove(store) }
  b.add(
    Result(
      suite: "fetch", name: "fetch \(sizeName(size)) --expect sha256", parameters: params,
      unit: .seconds, trove: verified[0], referenceName: "curl URL | sha256sum",
      reference: verified[1], note: "trove hashes XXH3-128 and SHA-256 in the same pass, and stores"
    ))

  // A revalidation (304) and a fresh hit, against curl's conditional GET.
  remove(store)
  try Spawn.check([b.trove, "--store", store, "fetch", "-q", url])
  try Spawn.check([b.trove, "--store", store, "fetch", "-q", base + "/fresh/" + big])
  try Spawn.check(["curl", "-sSf", "-R", "-o", out, url])
  let cached = try b.timeCommands([
    [b.trove, "--store", store, "fetch", "-q", url],
    [b.trove, "--store", store, "fetch", "-q", base + "/fresh/" + big],
    ["curl", "-sSf", "-R", "-z", out, "-o", out, url],
  ])
  b.add(
    Result(
      suite: "fetch", name: "revalidate \(sizeName(size)) (304)", parameters: params,
      unit: .seconds, trove: cached[0], referenceName: "curl -z FILE (304)", reference: cached[2],
      note: "one conditional request each; no body"))
  b.add(
    Result(
      suite: "fetch", name: "fresh hit \(sizeName(size))", parameters: params, unit: .seconds,
      trove: cached[1], referenceName: "curl -z FILE (304)", reference: cached[2],
      note: "trove makes no request at all (Cache-Control: max-age)"))

  try fetchManySmall(b, base: base, www: www, store: store)

  // Memory: a large fetch streams through fixed buffers.
  let rssSize = b.size(4 << 30, quick: 64 << 20)
  let huge = "huge-\(rssSize).bin"
  try makeRandomFile(www + "/" + huge, bytes: rssSize)
  remove(store)
  remove(out)
  let mib = { (bytes: Int64) in Series(samples: [Double(bytes) / 1_048_576]) }
  let trovePeak = try Spawn.peakResidentBytes([
    b.trove, "--store", store, "fetch", "-q", base + "/" + huge,
  ])
  let curlPeak = try Spawn.peakResidentBytes(["curl", "-sSf", "-o", out, base + "/" + huge])
  b.add(
    Result(
      suite: "fetch", name: "peak RSS, fetch \(sizeName(rssSize))",
      parameters: ["size": "\(rssSize)"], unit: .mebibytes, trove: mib(trovePeak),
      referenceName: "curl -o FILE", reference: mib(curlPeak),
      note: "goal: at most 64 MiB"))
}

/// Many small files, 8 at a time, beside curl fetching the same URLs.
private func fetchManySmall(_ b: Bench, base: String, www: String, store: String) throws {
  let count = b.size(1000, quick: 100)
  let small = www + "/small"
  try FileManager.default.createDirectory(atPath: small, withIntermediateDirectories: true)
  var generator = SystemRandomNumberGenerator()
  var urls: [String] = []
  var config = ""
  for i in 0..<count {
    let bytes = Int.random(in: 4096...65536, using: &generator)
    try makeRandomFile(small + "/f\(i)", bytes: bytes)
    urls.append(base + "/small/f\(i)")
    config += "url = \"\(base)/small/f\(i)\"\noutput = \"f\(i)\"\n"
  }
  let list = b.work + "/fetch-urls.txt"
  let curlConfig = b.work + "/fetch-curl.cfg"
  let folder = b.work + "/fetch-curl-out"
  try urls.joined(separator: "\n").write(toFile: list, atomically: true, encoding: .utf8)
  try config.write(toFile: curlConfig, atomically: true, encoding: .utf8)
  // Each run's files stay until the work folder goes (``setAside(_:in:)``).
  let graveyard = b.work + "/fetch-set-aside"
  // The same store fed by hand: curl's files put in one `trove put`.
  let handStore = store + "-by-hand"
  defer {
    remove(list)
    remove(curlConfig)
    setAside(folder, in: graveyard)
    setAside(handStore, in: graveyard)
  }
  let many = try b.timeCommands([
    [b.trove, "--store", store, "fetch", "-q", "-i", list, "--jobs", "8"],
    [
      "curl", "-sSf", "--parallel", "--parallel-max", "8", "--output-dir", folder, "-K", curlConfig,
    ],
    ["sh", "-c", "cd \"$1\" && xargs -P8 -n1 curl -sSf -O < \"$0\"", list, folder],
    [
      "sh", "-c",
      "curl -sSf --parallel --parallel-max 8 --output-dir \"$0\" -K \"$1\" && sync -f \"$0\"",
      folder, curlConfig,
    ],
    [
      "sh", "-c",
      "curl -sSf --parallel --parallel-max 8 --output-dir \"$0\" -K \"$1\" && \"$2\" --store \"$3\" put \"$0\"/* > /dev/null",
      folder, curlConfig, b.trove, handStore,
    ],
  ]) {
    setAside(store, in: graveyard)
    setAside(handStore, in: graveyard)
    setAside(folder, in: graveyard)
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
  }
  let manyParams = ["files": "\(count)", "sizes": "4-64 KiB", "jobs": "8"]
  b.add(
    Result(
      suite: "fetch", name: "fetch \(count) small files, 8 at a time", parameters: manyParams,
      unit: .seconds, trove: many[0], referenceName: "curl --parallel --parallel-max 8",
      reference: many[1], note: "trove hashes, stores and records each URL"))
  b.add(
    Result(
      suite: "fetch", name: "fetch \(count) small files, 8 at a time", parameters: manyParams,
      unit: .seconds, trove: many[0], referenceName: "xargs -P8 curl", reference: many[2],
      note: "one curl process per URL"))
  b.add(
    Result(
      suite: "fetch", name: "fetch \(count) small files, 8 at a time", parameters: manyParams,
      unit: .seconds, trove: many[0], referenceName: "curl --parallel, then sync -f DIR",
      reference: many[3],
      note: "durable at the end, where trove makes each file durable and indexed before it says so"
    ))
  b.add(
    Result(
      suite: "fetch", name: "fetch \(count) small files, 8 at a time", parameters: manyParams,
      unit: .seconds, trove: many[0], referenceName: "curl --parallel, then trove put DIR/*",
      reference: many[4],
      note: "the store fed by hand: stored and durable (curl's files too), no URL recorded"))
}
