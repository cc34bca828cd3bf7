import Foundation
import Trove

/// `trove remote` against a real nginx WebDAV folder on 127.0.0.1 (started
/// by `scripts/nginx.sh start --webdav`), beside curl making the same
/// transfers; and what a dead remote costs a local put.
func remoteSuite(_ b: Bench) throws {
  print("remote")
  let script = FileManager.default.currentDirectoryPath + "/scripts/nginx.sh"
  guard FileManager.default.isExecutableFile(atPath: script) else {
    b.skip("remote", "run from the repository's root: scripts/nginx.sh starts the server")
    return
  }
  let www = b.work + "/remote-www"
  let state = b.work + "/remote-nginx"
  let a = b.work + "/remote-a"
  let reader = b.work + "/remote-b"
  let files = b.work + "/remote-files"
  for folder in [www, files] {
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
  }
  defer {
    _ = try? Spawn.run([script, "stop", state])
    for path in [www, state, a, reader, files] { remove(path) }
  }
  let port = try Spawn.capture([script, "start", "--webdav", www, state])
    .trimmingCharacters(in: .whitespacesAndNewlines)
  let base = "http://127.0.0.1:\(port)/r"
  for store in [a, reader] {
    try Spawn.check([b.trove, "--store", store, "remote", "add", "shared", base, "--write", "off"])
  }
  func blobURL(_ digest: String) -> String {
    let hex = digest.dropFirst("xxh128:".count)
    return "\(base)/cas/\(hex.prefix(2))/\(hex)"
  }
  func blobFile(_ digest: String) -> String {
    let hex = digest.dropFirst("xxh128:".count)
    return "\(www)/r/cas/\(hex.prefix(2))/\(hex)"
  }
  /// Store B empty again, with the remote.
  func resetReader() throws {
    remove(reader)
    try Spawn.check([
      b.trove, "--store", reader, "remote", "add", "shared", base, "--write", "off",
    ])
  }
  func put(_ store: String, _ file: String) throws -> String {
    String(try Spawn.capture([b.trove, "--store", store, "put", file]).prefix(39))
  }

  // One large object: push (the remote emptied before each round), then pull.
  let size = b.size(1 << 30, quick: 32 << 20)
  let big = files + "/big.bin"
  try makeRandomFile(big, bytes: size)
  let digest = try put(a, big)
  let params = ["size": "\(size)", "server": "nginx WebDAV on 127.0.0.1"]
  let pushed = try b.timeCommands([
    [b.trove, "--store", a, "-q", "remote", "push", digest],
    ["curl", "-sSf", "-T", big, base + "/tmp/curl-upload"],
  ]) {
    remove(blobFile(digest))
    remove(www + "/r/tmp/curl-upload")
  }
  b.add(
    Result(
      suite: "remote", name: "push \(sizeName(size))", parameters: params, unit: .seconds,
      trove: pushed[0], referenceName: "curl -T FILE", reference: pushed[1],
      note:
        "trove HEADs, PUTs to tmp/ hashing what it sends, and MOVEs it into place only if it matched (never shares a corrupt copy)"
    ))
  try Spawn.check([b.trove, "--store", a, "-q", "remote", "push", digest])
  let out = files + "/curl-out.bin"
  let pulled = try b.timeCommands([
    [b.trove, "--store", reader, "-q", "remote", "pull", digest],
    ["curl", "-sSf", "-o", out, blobURL(digest)],
    ["sh", "-c", "curl -sSf -o \"$1\" \"$0\" && sync \"$1\"", blobURL(digest), out],
  ]) {
    try resetReader()
    remove(out)
  }
  b.add(
    Result(
      suite: "remote", name: "pull \(sizeName(size))", parameters: params, unit: .seconds,
      trove: pulled[0], referenceName: "curl -o FILE", reference: pulled[1],
      note:
        "trove also hashes every byte (on a thread beside the transfer) and fsyncs the object before publishing it"
    ))
  b.add(
    Result(
      suite: "remote", name: "pull \(sizeName(size))", parameters: params, unit: .seconds,
      trove: pulled[0], referenceName: "curl -o FILE && sync FILE", reference: pulled[2],
      note: "the same durability as trove, without the hash"))
  // The same blob from a signed remote: A signs it (the blob is there, so
  // only its signed entry goes up), and a reader trusting A's key pulls it
  // beside one that reads the remote unsigned.
  let key = files + "/bench.key"
  let publicKey = try Spawn.capture([b.trove, "-q", "keygen", "bench", "--out", key])
    .trimmingCharacters(in: .whitespacesAndNewlines)
  let trusting = b.work + "/remote-trusting"
  defer { remove(trusting) }
  func resetTrusting() throws {
    remove(trusting)
    try Spawn.check([
      b.trove, "--store", trusting, "remote", "add", "shared", base, "--write", "off", "--trust",
      publicKey,
    ])
  }
  try Spawn.check([b.trove, "--store", a, "config", "set", "signing-key", key])
  try Spawn.check([b.trove, "--store", a, "-q", "remote", "push", digest])
  let signedPull = try b.timeCommands([
    [b.trove, "--store", trusting, "-q", "remote", "pull", digest],
    [b.trove, "--store", reader, "-q", "remote", "pull", digest],
  ]) {
    try resetTrusting()
    try resetReader()
  }
  b.add(
    Result(
      suite: "remote", name: "pull \(sizeName(size)), signed", parameters: params,
      unit: .seconds, trove: signedPull[0], referenceName: "the same pull, unsigned remote",
      reference: signedPull[1],
      note:
        "the trusting reader checks the Ed25519 signature of the blob's entry and computes SHA-256 in the same pass as XXH3"
    ))
  // The small objects below are pushed unsigned, as before.
  try Spawn.check([b.trove, "--store", a, "config", "unset", "signing-key"])
  remove(big)
  // The small objects' push --all below must not send the big one again.
  try Spawn.check([b.trove, "--store", a, "-q", "rm", digest])

  // Many small objects: one trove process each way against curl in parallel.
  let count = b.size(1000, quick: 100)
  var digests: [String] = []
  var names: [String] = []
  for i in 0..<count {
    let file = files + "/small-\(i)"
    try makeRandomFile(file, bytes: 16 << 10 + i)
    names.append(file)
  }
  for name in names { digests.append(try put(a, name)) }
  let list = files + "/urls.txt"
  try names.enumerated().map { "-T \($0.1) \(base)/tmp/c\($0.0)" }.joined(separator: "\n")
    .write(toFile: list, atomically: true, encoding: .utf8)
  let smallParams = [
    "objects": "\(count)", "size": "16 KiB", "server": "nginx WebDAV on 127.0.0.1",
  ]
  let pushMany = try b.timeCommands([
    [b.trove, "--store", a, "-q", "remote", "push", "--all"],
    ["sh", "-c", "xargs -P8 -L1 curl -sSf < \"$0\"", list],
  ]) {
    remove(www + "/r/cas")
    remove(www + "/r/tmp")
    // Forget what the remote held: removing and adding it again does.
    try Spawn.check([b.trove, "--store", a, "remote", "rm", "shared"])
    try Spawn.check([b.trove, "--store", a, "remote", "add", "shared", base, "--write", "off"])
  }
  b.add(
    Result(
      suite: "remote", name: "push \(count) × 16 KiB", parameters: smallParams, unit: .seconds,
      trove: pushMany[0], referenceName: "xargs -P8 curl -T", reference: pushMany[1],
      note: "trove sends one object at a time over one connection; curl runs 8 in parallel"))
  try Spawn.check([b.trove, "--store", a, "-q", "remote", "push", "--all"])
  let getList = files + "/gets.txt"
  try digests.enumerated().map { "-o \(files)/g\($0.0) \(blobURL($0.1))" }.joined(separator: "\n")
    .write(toFile: getList, atomically: true, encoding: .utf8)
  let pullMany = try b.timeCommands([
    [b.trove, "--store", reader, "-q", "remote", "pull"] + digests,
    ["sh", "-c", "xargs -P8 -L1 curl -sSf < \"$0\"", getList],
  ]) {
    try resetReader()
    for i in 0..<count { remove("\(files)/g\(i)") }
  }
  b.add(
    Result(
      suite: "remote", name: "pull \(count) × 16 KiB", parameters: smallParams, unit: .seconds,
      trove: pullMany[0], referenceName: "xargs -P8 curl -o", reference: pullMany[1],
      note: "trove pulls one at a time, hashing and fsyncing each; curl runs 8 in parallel"))

  // Fetches of URLs the readers lack, read through the key records another
  // store pushed (with validators: each is revalidated with the origin, a
  // 304): from a signed remote by a reader trusting the key, and unsigned.
  let origin = www + "/origin"
  try FileManager.default.createDirectory(atPath: origin, withIntermediateDirectories: true)
  var urls: [String] = []
  for i in 0..<count {
    try makeRandomFile(origin + "/s\(i)", bytes: 16 << 10 + i + 7)
    urls.append("http://127.0.0.1:\(port)/origin/s\(i)")
  }
  let urlList = files + "/fetch-urls.txt"
  try urls.joined(separator: "\n").write(toFile: urlList, atomically: true, encoding: .utf8)
  try Spawn.check([b.trove, "--store", a, "config", "set", "signing-key", key])
  try Spawn.check([b.trove, "--store", a, "-q", "fetch", "-i", urlList])
  try Spawn.check([b.trove, "--store", a, "-q", "remote", "push"])
  let signedFetch = try b.timeCommands([
    [b.trove, "--store", trusting, "-q", "fetch", "-i", urlList],
    [b.trove, "--store", reader, "-q", "fetch", "-i", urlList],
  ]) {
    try resetTrusting()
    try resetReader()
  }
  b.add(
    Result(
      suite: "remote", name: "fetch \(count) × 16 KiB through key records, signed",
      parameters: smallParams, unit: .seconds, trove: signedFetch[0],
      referenceName: "the same fetch, unsigned remote", reference: signedFetch[1],
      note:
        "per URL: the record's Ed25519 signature checked and the blob's SHA-256 computed as it arrives"
    ))
  try Spawn.check([b.trove, "--store", a, "config", "unset", "signing-key"])

  try redisRows(b, files: files, count: count)
  try s3Rows(b, files: files)

  // What a dead remote costs a local put: none, then a dead one whose
  // breaker is open (sync write-back), then one written back in the background.
  let dead = b.work + "/remote-dead"
  let plain = b.work + "/remote-plain"
  let async = b.work + "/remote-async"
  defer { for path in [dead, plain, async] { remove(path) } }
  let nowhere = "http://127.0.0.1:1/x"
  try Spawn.check([b.trove, "--store", dead, "remote", "add", "gone", nowhere, "--write", "sync"])
  try Spawn.check([b.trove, "--store", async, "remote", "add", "gone", nowhere])
  let first = files + "/first"
  try makeRandomFile(first, bytes: 4096)
  _ = try Spawn.run([b.trove, "--store", dead, "-q", "put", first])  // opens the breaker
  for store in [async, plain] {  // every store made before the timing
    _ = try Spawn.run([b.trove, "--store", store, "-q", "put", first])
  }
  var round = 0
  let one = files + "/one"
  let puts = try b.timeCommands([
    [b.trove, "--store", dead, "-q", "put", one],
    [b.trove, "--store", async, "-q", "put", one],
    [b.trove, "--store", plain, "-q", "put", one],
  ]) {
    round += 1
    try makeRandomFile(one, bytes: 4096 + round)
  }
  let putParams = ["size": "4 KiB", "remote": nowhere]
  b.add(
    Result(
      suite: "remote", name: "put 4 KiB, dead remote (sync, breaker open)", parameters: putParams,
      unit: .seconds, trove: puts[0], referenceName: "put with no remote", reference: puts[2],
      note: "one index read finds the breaker open; no connect is tried"))
  b.add(
    Result(
      suite: "remote", name: "put 4 KiB, dead remote (async)", parameters: putParams,
      unit: .seconds, trove: puts[1], referenceName: "put with no remote", reference: puts[2],
      note: "the put starts a background push and returns"))
}

/// The Redis row of the remote suite alone (`--suite remote-redis`).
func remoteRedisSuite(_ b: Bench) throws {
  let files = b.work + "/remote-redis-files"
  try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)
  defer { remove(files) }
  try redisRows(b, files: files, count: b.size(1000, quick: 100))
}

/// Redis: `count` objects of 64 KiB pushed by `remote push --all`, against
/// `redis-cli --pipe` sending the same SETs (Redis's own mass insertion).
private func redisRows(_ b: Bench, files: String, count: Int) throws {
  guard FileManager.default.isExecutableFile(atPath: "/usr/bin/redis-server"),
    FileManager.default.isExecutableFile(atPath: "/usr/bin/redis-cli")
  else {
    b.skip("remote redis", "redis-server is not installed: scripts/deps.sh test installs it")
    return
  }
  let state = b.work + "/remote-redis"
  let store = b.work + "/remote-redis-store"
  try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
  let port = try Spawn.capture([
    "python3", "-c",
    "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])",
  ]).trimmingCharacters(in: .whitespacesAndNewlines)
  try Spawn.check([
    "/usr/bin/redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
    "--appendonly", "no", "--daemonize", "yes", "--dir", state, "--pidfile", state + "/redis.pid",
  ])
  defer {
    _ = try? Spawn.run(["/usr/bin/redis-cli", "-p", port, "shutdown", "nosave"])
    remove(state)
    remove(store)
  }
  for _ in 0..<100 where (try? Spawn.check(["/usr/bin/redis-cli", "-p", port, "ping"])) == nil {
    usleep(20_000)
  }
  let url = "redis://127.0.0.1:\(port)/0"
  try Spawn.check([b.trove, "--store", store, "remote", "add", "r", url, "--write", "off"])
  var wire = Data()
  func bulk(_ bytes: [UInt8]) -> Data {
    Data("$\(bytes.count)\r\n".utf8) + Data(bytes) + Data("\r\n".utf8)
  }
  for i in 0..<count {
    let file = files + "/redis-\(i)"
    try makeRandomFile(file, bytes: 64 << 10 + i)
    let digest = String(try Spawn.capture([b.trove, "--store", store, "put", file]).prefix(39))
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
    wire += Data("*3\r\n".utf8) + bulk(Array("SET".utf8))
    wire += bulk(Array("trove:cas:\(digest.dropFirst(7))".utf8)) + bulk(bytes)
    remove(file)
  }
  let pipe = files + "/redis.proto"
  try wire.write(to: URL(fileURLWithPath: pipe))
  let pushed = try b.timeCommands([
    [b.trove, "--store", store, "-q", "remote", "push", "--all"],
    ["sh", "-c", "/usr/bin/redis-cli -p \"$0\" --pipe < \"$1\" > /dev/null", port, pipe],
  ]) {
    try Spawn.check(["/usr/bin/redis-cli", "-p", port, "flushall"])
    try Spawn.check([b.trove, "--store", store, "remote", "rm", "r"])
    try Spawn.check([b.trove, "--store", store, "remote", "add", "r", url, "--write", "off"])
  }
  b.add(
    Result(
      suite: "remote", name: "push \(count) × 64 KiB to Redis",
      parameters: ["objects": "\(count)", "size": "64 KiB", "server": "redis-server on 127.0.0.1"],
      unit: .seconds, trove: pushed[0], referenceName: "redis-cli --pipe of the SETs",
      reference: pushed[1],
      note:
        "trove hashes each object, asks the remote for 16 at a time, then pipelines each one's SETEX of an expiring temp key and the script renaming it into place (EVALSHA), the next 16 sent before these are answered; redis-cli pipelines plain SETs"
    ))
}
