import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// The serve suite's pull-through mirror rows, with nginx (serving `www` at
/// `origin`) as the mirror's upstream: a large miss beside curl straight
/// from nginx and beside nginx's own pull-through cache (`proxy_cache`), a
/// revalidated hit's latency beside a fresh hit's and nginx's,
/// and the server's peak RSS while 32 clients read one miss along.
func mirrorRows(
  _ b: Bench, origin: String, www: String, nginxLog: String, nginxScript: String
) throws {
  let log = b.work + "/mirror.err"
  let output = b.work + "/mirror-out.bin"
  let headers = b.work + "/mirror-headers.txt"
  defer {
    remove(log)
    remove(output)
    remove(headers)
  }
  var generation = 0
  /// A server on a store of its own, new each time: every miss is a miss.
  func freshServer() throws -> (ServeProcess, String) {
    generation += 1
    let store = b.work + "/mirror-store-\(generation)"
    // A sweep of a folder that holds no store makes an empty one.
    try Spawn.check([b.trove, "--store", store, "sweep"])
    return (
      try ServeProcess(
        trove: b.trove, store: store, arguments: ["--mirror", "o=" + origin],
        log: log), store
    )
  }
  /// What curl's `-w` printed, split at spaces and newlines.
  func written(_ path: String) -> [Substring] {
    ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(
      whereSeparator: \.isWhitespace)
  }
  func cacheState(_ path: String) -> String {
    let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    return text.split(separator: "\r\n").first { $0.lowercased().hasPrefix("x-trove-cache:") }
      .map { $0.dropFirst("x-trove-cache:".count).trimmingCharacters(in: .whitespaces) } ?? "none"
  }

  /// nginx as a caching proxy of the origin, its cache empty: the same
  /// work as the mirror (a copy written while the response goes out).
  func freshProxyCache() throws -> (url: String, state: String) {
    generation += 1
    let state = b.work + "/proxy-cache-\(generation)"
    try FileManager.default.createDirectory(
      atPath: state + "/cache", withIntermediateDirectories: true)
    let port = try Spawn.capture(
      [nginxScript, "start", "--proxy-cache", origin, state + "/cache", state + "/nginx"]
    ).trimmingCharacters(in: .whitespacesAndNewlines)
    return ("http://127.0.0.1:\(port)", state)
  }

  // 1. A miss of a large file, the client writing it to a file either way;
  // beside nginx's proxy_cache missing the same file; and, for context,
  // curl straight from nginx made durable as the store's copy is before the
  // last byte goes out.
  let size = b.size(1 << 30, quick: 32 << 20)
  try makeRandomFile(www + "/mirror-big.bin", bytes: size)
  let format = "%{time_starttransfer} %{size_download}"
  let timings = b.work + "/mirror-timings.txt"
  defer { remove(timings) }
  var seconds = [[Double]](repeating: [], count: 4)
  var firstByte = [[Double]](repeating: [], count: 4)
  // One untimed run of each first: the origin's file, new on disk, is read
  // into the page cache by the first, which would otherwise pay for it.
  for round in -1..<b.repetitions {
    for i in Bench.order(4, round: max(0, round)) {
      var server: (ServeProcess, String)?
      var proxyCache: (url: String, state: String)?
      var url = origin + "/mirror-big.bin"
      if i == 0 {
        server = try freshServer()
        url = server!.0.url + "/m/o/mirror-big.bin"
      } else if i == 3 {
        proxyCache = try freshProxyCache()
        url = proxyCache!.url + "/mirror-big.bin"
      }
      let curl = ["curl", "-sSf", "-D", headers, "-o", output, "-w", format, url]
      sync()
      // Backed free memory for this run's new page cache, whoever runs
      // (a miss writes the body twice: the store's copy and the client's);
      // the series writes far more than one warming backs.
      HostMemory.warm(b.warmBytes > 0 ? b.warmBytes + size : 0)
      let outcome = try Spawn.check(
        i == 2 ? ["sh", "-c", "\"$@\" && sync \"$0\"", output] + curl : curl, output: timings)
      let fields = written(timings)
      guard fields.count == 2, let start = Double(fields[0]), Int(fields[1]) == size else {
        throw Spawn.Failure(command: ["curl", url], detail: "wrote '\(fields)', not \(size) bytes")
      }
      if i == 0 {
        let state = cacheState(headers)
        guard state == "miss" else {
          throw Spawn.Failure(command: ["curl", url], detail: "X-Trove-Cache: \(state), not miss")
        }
      }
      if round >= 0 {
        seconds[i].append(outcome.seconds)
        firstByte[i].append(start)
      }
      remove(output)
      if let server {
        server.0.stop()
        remove(server.1)
      }
      if let proxyCache {
        _ = try? Spawn.run([nginxScript, "stop", proxyCache.state + "/nginx"])
        remove(proxyCache.state)
      }
    }
  }
  b.add(
    Result(
      suite: "serve", name: "mirror miss of \(sizeName(size))",
      parameters: ["size": "\(size)", "client": "curl -o FILE", "store": "new each run"],
      unit: .seconds, trove: Series(samples: seconds[0]), referenceName: "curl -o FILE from nginx",
      reference: Series(samples: seconds[1]),
      note: "trove serve --mirror o=nginx; the client's file and the store both written"))
  b.add(
    Result(
      suite: "serve", name: "mirror miss of \(sizeName(size))",
      parameters: ["size": "\(size)", "client": "curl -o FILE", "store": "new each run"],
      unit: .seconds, trove: Series(samples: seconds[0]),
      referenceName: "nginx proxy_cache miss (an empty cache each run)",
      reference: Series(samples: seconds[3]),
      note: "the same work: a pull-through cache writing its copy as it sends"))
  b.add(
    Result(
      suite: "serve", name: "mirror miss of \(sizeName(size)): time to first byte",
      parameters: ["size": "\(size)", "measure": "curl %{time_starttransfer}"], unit: .seconds,
      trove: Series(samples: firstByte[0]), referenceName: "curl -o FILE from nginx, first byte",
      reference: Series(samples: firstByte[1]), note: "the body is sent as it downloads"))
  b.add(
    Result(
      suite: "serve", name: "mirror miss of \(sizeName(size))",
      parameters: ["size": "\(size)", "client": "curl -o FILE", "store": "new each run"],
      unit: .seconds, trove: Series(samples: seconds[0]),
      referenceName: "curl -o FILE && sync FILE from nginx", reference: Series(samples: seconds[2]),
      note: "context: the store's copy is durable before its last byte is sent"))

  // 2. One small file's latency, request after request on one connection:
  // revalidated each time (nginx sends no Cache-Control, so a stored copy
  // is stale at once), fresh (served with no request), and from nginx.
  let (server, store) = try freshServer()
  defer {
    server.stop()
    remove(store)
  }
  try makeRandomFile(www + "/mirror-small.bin", bytes: 4096)
  let revalidated = server.url + "/m/o/mirror-small.bin"
  let fresh = server.url + "/m/o/fresh/mirror-small.bin"
  for (url, expected) in [(revalidated, "revalidated"), (fresh, "hit")] {
    for _ in 0..<2 {
      try Spawn.check(["curl", "-sSf", "-D", headers, "-o", "/dev/null", url])
    }
    let state = cacheState(headers)
    guard state == expected else {
      b.skip("serve mirror latency", "\(url) answered X-Trove-Cache: \(state), not \(expected)")
      return
    }
  }
  let requests = b.size(1000, quick: 50)
  let urls = [revalidated, fresh, origin + "/mirror-small.bin"]
  var latency = [[Double]](repeating: [], count: urls.count)
  let config = b.work + "/mirror-latency.cfg"
  defer { remove(config) }
  for round in 0..<b.repetitions {
    for i in Bench.order(urls.count, round: round) {
      let batch = requests / b.repetitions
      try String(repeating: "url = \"\(urls[i])\"\noutput = \"/dev/null\"\n", count: batch)
        .write(toFile: config, atomically: true, encoding: .utf8)
      try Spawn.check(["curl", "-sSf", "-K", config, "-w", "%{time_total}\\n"], output: timings)
      let samples = written(timings).compactMap { Double($0) }
      guard samples.count == batch else {
        throw Spawn.Failure(
          command: ["curl", urls[i]], detail: "timed \(samples.count) of \(batch) requests")
      }
      latency[i].append(contentsOf: samples)
    }
  }
  let parameters = [
    "size": "4096", "requests": "\(latency[0].count)", "client": "curl -K, one connection",
    "measure": "curl %{time_total}",
  ]
  b.add(
    Result(
      suite: "serve", name: "mirror hit revalidated (304), 4 KiB", parameters: parameters,
      unit: .seconds, trove: Series(samples: latency[0]),
      referenceName: "mirror hit, fresh (no request)", reference: Series(samples: latency[1]),
      note: "median of single requests; the origin answers If-None-Match with 304"))
  b.add(
    Result(
      suite: "serve", name: "mirror hit revalidated (304), 4 KiB", parameters: parameters,
      unit: .seconds, trove: Series(samples: latency[0]), referenceName: "curl from nginx",
      reference: Series(samples: latency[2]), note: "median of single requests"))

  // 3. The server's peak RSS while 32 clients fetch one missing file
  // together: one transfer from the origin, read along by all.
  let shared = b.size(64 << 20, quick: 8 << 20)
  let clients = 32
  try makeRandomFile(www + "/mirror-shared.bin", bytes: shared)
  var peaks: [Double] = []
  var originGets: [Int] = []
  var idle: [Double] = []
  for _ in 0..<b.repetitions {
    let (server, store) = try freshServer()
    defer {
      server.stop()
      remove(store)
    }
    let before = server.peakResidentBytes ?? 0
    let logged = (try? String(contentsOfFile: nginxLog, encoding: .utf8)) ?? ""
    try Spawn.check(
      [
        "sh", "-c",
        "seq \(clients) | xargs -P\(clients) -I{} curl -sSf -o /dev/null -w '%{size_download}\\n' \"$0\"",
        server.url + "/m/o/mirror-shared.bin",
      ], output: timings)
    let sizes = written(timings)
    guard sizes.count == clients, sizes.allSatisfy({ Int($0) == shared }) else {
      throw Spawn.Failure(
        command: ["curl", "/m/o/mirror-shared.bin"],
        detail: "\(clients) clients received \(sizes), not \(shared) bytes each")
    }
    guard let peak = server.peakResidentBytes else {
      throw Spawn.Failure(command: ["trove", "serve"], detail: "no VmHWM in /proc/PID/status")
    }
    idle.append(Double(before) / Double(1 << 20))
    peaks.append(Double(peak) / Double(1 << 20))
    let after = (try? String(contentsOfFile: nginxLog, encoding: .utf8)) ?? ""
    originGets.append(
      after.dropFirst(logged.count).split(separator: "\n")
        .filter { $0.hasPrefix("GET /mirror-shared.bin ") }.count)
  }
  b.add(
    Result(
      suite: "serve", name: "peak RSS, \(clients) clients of one \(sizeName(shared)) miss",
      parameters: [
        "size": "\(shared)", "clients": "\(clients)", "bytes served": "\(clients * shared)",
        "origin GETs": originGets.map(String.init).joined(separator: ","),
        "measure": "VmHWM of the trove serve process after the run",
        "idle MiB": String(format: "%.1f", Series(samples: idle).median),
      ],
      unit: .mebibytes, trove: Series(samples: peaks),
      note: "xargs -P32 curl; a new server and store each run"))
}
