import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// `trove serve` beside nginx serving the same bytes on 127.0.0.1, both
/// read by curl: one large cached object, and many small ones 8 at a time;
/// then the pull-through mirror with nginx as its origin (``mirrorRows``).
func serveSuite(_ b: Bench) throws {
  print("serve")
  let script = FileManager.default.currentDirectoryPath + "/scripts/nginx.sh"
  guard FileManager.default.isExecutableFile(atPath: script) else {
    b.skip("serve", "run from the repository's root: scripts/nginx.sh starts nginx")
    return
  }
  let www = b.work + "/serve-www"
  let state = b.work + "/serve-nginx"
  let store = b.work + "/serve-store"
  let log = b.work + "/serve.err"
  try FileManager.default.createDirectory(atPath: www, withIntermediateDirectories: true)
  defer {
    _ = try? Spawn.run([script, "stop", state])
    remove(www)
    remove(state)
    remove(store)
    remove(log)
  }
  let port = try Spawn.capture([script, "start", www, state])
    .trimmingCharacters(in: .whitespacesAndNewlines)
  let nginx = "http://127.0.0.1:\(port)"

  // The same bytes in both: a large file, and small ones.
  let size = b.size(1 << 30, quick: 32 << 20)
  let big = www + "/big.bin"
  try makeRandomFile(big, bytes: size)
  let bigDigest = try Spawn.capture([b.trove, "--store", store, "put", big])
    .split(separator: " ")[0].dropFirst("xxh128:".count)
  let count = b.size(10_000, quick: 1000)
  let distinct = 100
  var smallDigests: [Substring] = []
  try FileManager.default.createDirectory(atPath: www + "/small", withIntermediateDirectories: true)
  for i in 0..<distinct {
    let path = www + "/small/f\(i)"
    try makeRandomFile(path, bytes: 4096 + i)
    smallDigests.append(
      try Spawn.capture([b.trove, "--store", store, "put", path])
        .split(separator: " ")[0].dropFirst("xxh128:".count))
  }

  // The server, in the background, as a service runs it, with an access
  // log line per request, as nginx writes: the two do the same work.
  let server: ServeProcess
  do {
    server = try ServeProcess(
      trove: b.trove, store: store, arguments: ["--access-log", log + ".access"],
      log: log)
  } catch {
    b.skip("serve", "\(error)")
    return
  }
  defer { server.stop() }
  let trove = server.url

  let large = try b.timeCommands([
    ["curl", "-sSf", "-o", "/dev/null", "\(trove)/cas/\(bigDigest)"],
    ["curl", "-sSf", "-o", "/dev/null", "\(nginx)/big.bin"],
  ])
  b.add(
    Result(
      suite: "serve", name: "GET \(sizeName(size)) cached",
      parameters: ["size": "\(size)", "client": "curl -o /dev/null"], unit: .seconds,
      trove: large[0], referenceName: "nginx, the same file", reference: large[1],
      note: "both sendfile from the page cache"))

  // Many small GETs over 8 connections: curl's own parallel transfers.
  let troveConfig = b.work + "/serve-trove.cfg"
  let nginxConfig = b.work + "/serve-nginx.cfg"
  defer {
    remove(troveConfig)
    remove(nginxConfig)
  }
  var troveLines = ""
  var nginxLines = ""
  for i in 0..<count {
    troveLines += "url = \"\(trove)/cas/\(smallDigests[i % distinct])\"\noutput = \"/dev/null\"\n"
    nginxLines += "url = \"\(nginx)/small/f\(i % distinct)\"\noutput = \"/dev/null\"\n"
  }
  try troveLines.write(toFile: troveConfig, atomically: true, encoding: .utf8)
  try nginxLines.write(toFile: nginxConfig, atomically: true, encoding: .utf8)
  let small = try b.timeCommands([
    ["curl", "-sSf", "--parallel", "--parallel-max", "8", "-K", troveConfig],
    ["curl", "-sSf", "--parallel", "--parallel-max", "8", "-K", nginxConfig],
  ])
  let rate = { (series: Series) in
    Series(samples: series.samples.map { Double(count) / $0 })
  }
  b.add(
    Result(
      suite: "serve", name: "\(count) GETs of 4 KiB cached, 8 at a time",
      parameters: ["requests": "\(count)", "objects": "\(distinct)", "concurrency": "8"],
      unit: .objectsPerSecond, trove: rate(small[0]), referenceName: "nginx, the same files",
      reference: rate(small[1]), note: "curl --parallel --parallel-max 8, keep-alive"))
  server.stop()

  try mirrorRows(
    b, origin: nginx, www: www, nginxLog: state + "/access.log", nginxScript: script)
}
