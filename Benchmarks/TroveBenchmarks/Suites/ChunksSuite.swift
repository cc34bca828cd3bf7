import Foundation
import Trove

/// Versions that cost their changed bytes: what cutting chunks adds to a
/// put, and the disk a new version takes once `trove dedupe` shared its
/// blocks with the old one's, beside duperemove sharing the same pair.
func chunksSuite(_ b: Bench) throws {
  print("chunks")
  try chunkingCostRows(b)
  guard let xfs = b.xfs else { return b.skip("chunks: shared blocks", b.xfsMissing) }
  guard FileManager.default.isExecutableFile(atPath: "/usr/bin/duperemove") else {
    return b.skip("chunks: shared blocks", "duperemove is not installed (scripts/deps.sh test)")
  }
  let size = b.size(1 << 30, quick: 64 << 20)
  let folder = xfs + "/chunks"
  try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
  defer { remove(folder) }
  let weights = folder + "/weights-v1.bin"
  let tensors = try writeWeights(weights, size: size, seed: 0x7E45)
  for percent in [2, 5, 20] {
    let next = folder + "/weights-v2-\(percent).bin"
    let changed = try rewriteTensors(
      weights, into: next, tensors: tensors, share: Double(percent) / 100, seed: UInt64(percent))
    try pairRows(
      b, "weights \(sizeName(size)), \(percent)% of tensors rewritten", old: weights, new: next,
      changed: changed, aligned: true, folder: folder)
    remove(next)
  }
  let inserted = folder + "/weights-inserted.bin"
  try Spawn.check([
    "sh", "-c",
    "{ head -c 1000 \"$0\"; head -c 100 /dev/urandom; tail -c +1001 \"$0\"; } > \"$1\"", weights,
    inserted,
  ])
  try pairRows(
    b, "weights \(sizeName(size)), 100 bytes inserted near the start", old: weights,
    new: inserted, changed: 100, aligned: false, folder: folder)
  remove(inserted)
  remove(weights)
  if b.quick {
    b.skip("chunks: tar", "a quick run copies no source tree")
  } else {
    try tarRows(b, folder: folder)
  }
  try realPairRows(b, folder: folder)
}

/// Two consecutive releases of a real artifact: `TROVE_BENCH_CHUNKS_PAIR`
/// (OLD:NEW), which scripts/bench.sh sets to numpy's source releases
/// (scripts/real-pair.sh), or names by hand.
private func realPairRows(_ b: Bench, folder: String) throws {
  let environment = ProcessInfo.processInfo.environment
  guard let pair = environment["TROVE_BENCH_CHUNKS_PAIR"] else {
    return b.skip(
      "chunks: real pair",
      environment["TROVE_BENCH_CHUNKS_PAIR_UNAVAILABLE"]
        ?? "TROVE_BENCH_CHUNKS_PAIR is not set (scripts/bench.sh sets it with scripts/real-pair.sh)"
    )
  }
  let parts = pair.split(separator: ":").map(String.init)
  guard parts.count == 2 else { return b.skip("chunks: real pair", "expected OLD:NEW") }
  let (old, new) = (parts[0], parts[1])
  let isTar = old.hasSuffix(".tar") && new.hasSuffix(".tar")
  let changed = isTar ? try changedTarBytes(old, new) : try differingBytes(old, new)
  try pairRows(
    b, "real pair \((old as NSString).lastPathComponent) → \((new as NSString).lastPathComponent)",
    old: old, new: new, changed: changed, aligned: false, folder: folder)
}

/// The bytes of a new tar that its old version does not hold as they are,
/// member by member (matched by path below the top folder): each header
/// (with its long-name or pax records) that differs, and the data of each
/// member that is new or changed, to its 512-byte padding. Nothing is assumed about where the two differ inside
/// a member, so this is the changed bytes at the granularity of files.
private func changedTarBytes(_ old: String, _ new: String) throws -> Int64 {
  let script = """
    import hashlib, sys, tarfile
    def members(path):
        out = {}
        with open(path, "rb") as raw, tarfile.open(path) as tar:
            for m in tar:
                raw.seek(m.offset)
                header = raw.read(m.offset_data - m.offset)
                data = hashlib.sha256(tar.extractfile(m).read()).digest() if m.isfile() else b""
                padded = (m.size + 511) // 512 * 512 if m.isfile() else 0
                # Matched without the top folder, which names the release.
                out[m.name.partition("/")[2] or m.name] = (header, data, len(header), padded)
        return out
    old, new = members(sys.argv[1]), members(sys.argv[2])
    total = 0
    for name, (header, data, head, padded) in new.items():
        before = old.get(name)
        if before is None or before[0] != header:
            total += head
        if before is None or before[1] != data:
            total += padded
    print(total)
    """
  let out = try Spawn.capture(["python3", "-c", script, old, new])
  guard let bytes = Int64(out.trimmingCharacters(in: .whitespacesAndNewlines)) else {
    throw Spawn.Failure(command: ["python3", "-c", "…", old, new], detail: "printed \(out)")
  }
  return bytes
}

/// A put of the same bytes with chunking on and off, by the copy path and
/// from a pipe: what the chunking pass costs.
private func chunkingCostRows(_ b: Bench) throws {
  let size = b.size(1 << 30, quick: 64 << 20)
  let source = b.work + "/chunks-\(size).bin"
  try makeRandomFile(source, bytes: size)
  defer { remove(source) }
  let store = b.work + "/chunks-store"
  defer { remove(store) }
  let put = { (on: Bool) in
    ["env", "TROVE_CHUNKING=\(on ? "on" : "off")", b.trove, "--store", store]
  }
  let timed = try b.timeCommands([
    put(true) + ["put", source], put(false) + ["put", source],
    ["sh", "-c", "cat \"$0\" | \"$@\" put -", source] + put(true),
    ["sh", "-c", "cat \"$0\" | \"$@\" put -", source] + put(false),
  ]) { remove(store) }
  let params = ["size": "\(size)", "filesystem": "work folder"]
  for (i, how) in ["copy path", "from a pipe"].enumerated() {
    b.add(
      Result(
        suite: "chunks", name: "put \(sizeName(size)) \(how), chunking on", parameters: params,
        unit: .seconds, trove: timed[2 * i], referenceName: "the same put, chunking off",
        reference: timed[2 * i + 1],
        note: "the chunks are cut on a thread beside the one that hashes and writes"))
  }
}

/// A weights-like file: a header, then tensors of 1–32 MiB (log-uniform)
/// of random bytes, not aligned to blocks. Returns the tensors' ranges.
private func writeWeights(_ path: String, size: Int, seed: UInt64) throws -> [Range<Int>] {
  var rng = SplitMix(seed)
  var tensors: [Range<Int>] = []
  var at = 12_345
  while at < size {
    let length = min(
      size - at,
      Int(exp(Double.random(in: log(Double(1 << 20))...log(Double(32 << 20)), using: &rng))))
    tensors.append(at..<(at + length))
    at += length
  }
  try writeRandom(path, ranges: [0..<size], seed: rng.next(), creating: true)
  return tensors
}

/// Copies `old` to `path` and rewrites tensors chosen at random in place
/// until `share` of the bytes changed; returns the bytes rewritten.
private func rewriteTensors(
  _ old: String, into path: String, tensors: [Range<Int>], share: Double, seed: UInt64
) throws -> Int64 {
  try Spawn.check(["cp", "--reflink=never", old, path])
  var rng = SplitMix(seed)
  let total = tensors.reduce(0) { $0 + $1.count }
  var chosen: [Range<Int>] = []
  var changed = 0
  for tensor in tensors.shuffled(using: &rng) where Double(changed) < share * Double(total) {
    chosen.append(tensor)
    changed += tensor.count
  }
  try writeRandom(path, ranges: chosen, seed: rng.next(), creating: false)
  return Int64(changed)
}

/// Writes random bytes over `ranges` of `path`, synced.
private func writeRandom(_ path: String, ranges: [Range<Int>], seed: UInt64, creating: Bool) throws
{
  let fd = open(path, O_WRONLY | (creating ? O_CREAT | O_TRUNC : 0), 0o644)
  guard fd >= 0 else {
    throw Spawn.Failure(command: ["open", path], detail: String(cString: strerror(errno)))
  }
  defer { close(fd) }
  var rng = SplitMix(seed)
  var buffer = [UInt64](repeating: 0, count: (1 << 20) / 8)
  for range in ranges {
    var at = range.lowerBound
    while at < range.upperBound {
      for i in buffer.indices { buffer[i] = rng.next() }
      let n = min(range.upperBound - at, 1 << 20)
      _ = buffer.withUnsafeBytes { pwrite(fd, $0.baseAddress, n, off_t(at)) }
      at += n
    }
  }
  fsync(fd)
}

/// An uncompressed tar of a source tree (/usr/include) and of the same tree
/// with a few files edited: five lengthened, five changed in place.
private func tarRows(_ b: Bench, folder: String) throws {
  let tree = "/usr/include"
  guard FileManager.default.fileExists(atPath: tree) else {
    return b.skip("chunks: tar", "\(tree) is missing")
  }
  let copy = folder + "/tree"
  let old = folder + "/tree-v1.tar"
  let new = folder + "/tree-v2.tar"
  defer {
    remove(copy)
    remove(old)
    remove(new)
  }
  try Spawn.check(["cp", "-r", tree, copy])
  try Spawn.check(["tar", "-cf", old, "-C", folder, "tree"])
  let files = try Spawn.capture(["sh", "-c", "find \"$0\" -name '*.h' -size +8k | sort", copy])
    .split(separator: "\n").map(String.init)
  guard files.count >= 10 else { return b.skip("chunks: tar", "too few headers in \(tree)") }
  var changed: Int64 = 0
  for (i, file) in stride(from: 0, to: files.count, by: files.count / 10).prefix(10).map({
    ($0, files[$0])
  }) {
    let line = "/* edited for version 2: \(i) */\n"
    if i % 2 == 0 {
      try Spawn.check(["sh", "-c", "printf '%s' \"$1\" >> \"$0\"", file, line])
    } else {
      // The same length: the first bytes replaced.
      try Spawn.check([
        "sh", "-c", "printf '%s' \"$1\" | dd of=\"$0\" conv=notrunc status=none", file, line,
      ])
    }
    changed += Int64(line.utf8.count)
  }
  try Spawn.check(["tar", "-cf", new, "-C", folder, "tree"])
  let size = (try? FileManager.default.attributesOfItem(atPath: new)[.size] as? Int) ?? 0
  try pairRows(
    b, "tar of \(tree) (\(sizeName(size / (1 << 20) * (1 << 20)))), 10 files edited", old: old,
    new: new, changed: changed, aligned: false, folder: folder)
}

/// Bytes at which two files differ, compared position by position, plus
/// any length difference: the changed bytes of an in-place edit.
private func differingBytes(_ a: String, _ b: String) throws -> Int64 {
  let out = try Spawn.capture(["sh", "-c", "cmp -l \"$0\" \"$1\" 2>/dev/null | wc -l", a, b])
  let sizes = [a, b].map {
    (try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? Int) ?? 0
  }
  return (Int64(out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0)
    + Int64(abs(sizes[0] - sizes[1]))
}

/// The disk the new version of a pair takes on its own once Trove shared
/// its blocks with the old one's (`put -` of both, `trove dedupe`), and
/// once duperemove shared two plain copies; and how long each took.
private func pairRows(
  _ b: Bench, _ name: String, old: String, new: String, changed: Int64, aligned: Bool,
  folder: String
) throws {
  let store = folder + "/store"
  let plain = folder + "/plain"
  defer {
    remove(store)
    remove(plain)
  }
  let size = Int64((try? FileManager.default.attributesOfItem(atPath: new)[.size] as? Int) ?? 0)
  var troveOwn: [Double] = []
  var duperemoveOwn: [Double] = []
  var troveSeconds: [Double] = []
  var duperemoveSeconds: [Double] = []
  for _ in 0..<(b.quick ? 1 : 2) {
    remove(store)
    remove(plain)
    for file in [old, new] {
      try Spawn.check([
        "sh", "-c", "cat \"$0\" | \"$1\" --store \"$2\" put -", file, b.trove, store,
      ])
    }
    sync()
    troveSeconds.append(try Spawn.check([b.trove, "--store", store, "dedupe"]).seconds)
    let digest = try Spawn.capture([b.trove, "hash", new]).split(separator: " ")[0]
    let hex = digest.dropFirst("xxh128:".count)
    let object = store + "/objects/\(hex.prefix(2))/\(hex)"
    troveOwn.append(Double(size - (try sharedBytes(object))) / Double(1 << 20))

    try FileManager.default.createDirectory(atPath: plain, withIntermediateDirectories: true)
    try Spawn.check(["cp", "--reflink=never", old, plain + "/old"])
    try Spawn.check(["cp", "--reflink=never", new, plain + "/new"])
    sync()
    duperemoveSeconds.append(
      try Spawn.check([
        "duperemove", "-d", "-q", "-r", "--dedupe-options=partial",
        "--hashfile=" + folder + "/hashes", plain,
      ])
      .seconds)
    remove(folder + "/hashes")
    duperemoveOwn.append(Double(size - (try sharedBytes(plain + "/new"))) / Double(1 << 20))
  }
  let params = [
    "size": "\(size)", "changed": "\(changed)", "filesystem": "xfs",
    "edits": aligned ? "in place" : "shifting",
  ]
  let changedMiB = Series(samples: [Double(changed) / Double(1 << 20)])
  b.add(
    Result(
      suite: "chunks", name: "\(name): new version's own disk", parameters: params,
      unit: .mebibytes, trove: Series(samples: troveOwn),
      referenceName: aligned ? "the changed bytes, in place" : "the changed bytes",
      reference: changedMiB,
      note: "what the new version's file holds alone after trove dedupe (FIEMAP)"))
  b.add(
    Result(
      suite: "chunks", name: "\(name): new version's own disk", parameters: params,
      unit: .mebibytes, trove: Series(samples: troveOwn),
      referenceName: "duperemove -d (partial), the same pair",
      reference: Series(samples: duperemoveOwn),
      note: "duperemove hashes every block of both plain copies and shares the equal ones"))
  b.add(
    Result(
      suite: "chunks", name: "\(name): time to share", parameters: params, unit: .seconds,
      trove: Series(samples: troveSeconds), referenceName: "duperemove -d (partial), the same pair",
      reference: Series(samples: duperemoveSeconds),
      note: "trove dedupe reads the manifests the puts recorded; the kernel compares the bytes"))
  // Room on the XFS for the transfer's two stores.
  remove(store)
  remove(plain)
  try transferRows(b, name, old: old, new: new, changed: changed, folder: folder, params: params)
}

/// The new version of a pair pulled from a `trove serve` peer by a store
/// holding the old one: bytes the peer sent and time, beside a whole pull
/// and beside zsync of the same pair from nginx.
private func transferRows(
  _ b: Bench, _ name: String, old: String, new: String, changed: Int64, folder: String,
  params: [String: String]
) throws {
  let peer = folder + "/peer"
  let local = folder + "/local"
  let out = folder + "/zsync-out"
  defer {
    remove(peer)
    remove(local)
    remove(out)
  }
  try Spawn.check(["sh", "-c", "cat \"$0\" | \"$1\" --store \"$2\" put -", new, b.trove, peer])
  let digest = String(try Spawn.capture([b.trove, "hash", new]).split(separator: " ")[0])
  let server = try ServeProcess(
    trove: b.trove, store: peer, arguments: [], log: folder + "/serve.log")
  defer { server.stop() }
  let manifest = try Spawn.capture([
    "sh", "-c", "curl -sf \"$0\" | wc -c",
    server.url + "/chunks/\(digest.dropFirst(7).prefix(2))/\(digest.dropFirst(7))",
  ])
  let manifestBytes = Int64(manifest.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
  var sent: [Double] = []
  var chunked: [Double] = []
  var whole: [Double] = []
  for _ in 0..<(b.quick ? 1 : 3) {
    for inChunks in [true, false] {
      // Both pulls go into a store holding the old version, so that each
      // starts from the same page cache; the whole one has chunking off.
      remove(local)
      try Spawn.check([
        "sh", "-c", "cat \"$0\" | \"$1\" --store \"$2\" put -", old, b.trove, local,
      ])
      try Spawn.check([
        b.trove, "--store", local, "remote", "add", "peer", server.url, "--read-only",
      ])
      sync()
      let output = b.work + "/pull.json"
      let timed = try Spawn.check(
        [
          "env", "TROVE_CHUNKING=\(inChunks ? "on" : "off")", b.trove, "--store", local, "remote",
          "pull", "--json", digest,
        ], output: output)
      if inChunks {
        chunked.append(timed.seconds)
        let data = (try? Data(contentsOf: URL(fileURLWithPath: output))) ?? Data()
        let records = (try? JSONSerialization.jsonObject(with: data)) as? [[String: Any]]
        let bytes = records?.first?["transferredBytes"] as? Int ?? 0
        sent.append(Double(bytes) / Double(1 << 20))
      } else {
        whole.append(timed.seconds)
      }
      remove(output)
    }
  }
  b.add(
    Result(
      suite: "chunks", name: "\(name): bytes pulled", parameters: params, unit: .mebibytes,
      trove: Series(samples: sent), referenceName: "the changed bytes + manifest",
      reference: Series(samples: [Double(changed + manifestBytes) / Double(1 << 20)]),
      note: "from a trove serve peer into a store holding the old version"))
  b.add(
    Result(
      suite: "chunks", name: "\(name): pull", parameters: params, unit: .seconds,
      trove: Series(samples: chunked), referenceName: "the same pull, whole",
      reference: Series(samples: whole),
      note: "the whole pull: the same store, chunking off (TROVE_CHUNKING=off)"))
  // The rows below need the room.
  server.stop()
  remove(peer)
  remove(local)
  guard FileManager.default.isExecutableFile(atPath: "/usr/bin/zsync") else {
    return b.skip("chunks: zsync", "zsync is not installed (scripts/deps.sh test)")
  }
  try withNginx(b, suite: "chunks: zsync") { www, base in
    try Spawn.check(["cp", "--reflink=never", new, www + "/new.bin"])
    try Spawn.check([
      "zsyncmake", "-u", base + "/new.bin", "-o", www + "/new.bin.zsync", www + "/new.bin",
    ])
    var fetched: [Double] = []
    var seconds: [Double] = []
    // The server's log says what zsync was sent (its .zsync file included).
    let log = b.work + "/fetch-nginx/access.log"
    for _ in 0..<(b.quick ? 1 : 3) {
      remove(out)
      // Emptied in place: nginx keeps writing to the file it opened.
      try Spawn.check(["truncate", "-s", "0", log])
      sync()
      seconds.append(
        // Run where it writes: zsync renames its temp file (in the
        // current folder) onto -o.
        try Spawn.check([
          "sh", "-c", "cd \"$(dirname \"$1\")\" && exec zsync -q -i \"$0\" -o \"$1\" \"$2\"", old,
          out,
          base + "/new.bin.zsync",
        ]).seconds)
      let lines = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n")
      let bytes = lines.compactMap {
        $0.split(separator: " ").dropFirst(3).first.flatMap { Int($0) }
      }
      fetched.append(Double(bytes.reduce(0, +)) / Double(1 << 20))
    }
    b.add(
      Result(
        suite: "chunks", name: "\(name): bytes pulled", parameters: params, unit: .mebibytes,
        trove: Series(samples: sent), referenceName: "zsync, the same pair",
        reference: Series(samples: fetched),
        note: "zsync -i OLD from nginx: its .zsync file and the blocks it lacks"))
    b.add(
      Result(
        suite: "chunks", name: "\(name): pull", parameters: params, unit: .seconds,
        trove: Series(samples: chunked), referenceName: "zsync, the same pair",
        reference: Series(samples: seconds)))
    try zsyncFetchRows(
      b, name, old: old, new: new, www: www, base: base, zsyncBytes: fetched,
      zsyncSeconds: seconds, folder: folder, params: params)
  }
}

/// `trove fetch --zsync` of the new version from nginx into a store that
/// fetched the old one from the same URL: the bytes and time beside zsync's
/// and beside the same fetch without `--zsync`.
private func zsyncFetchRows(
  _ b: Bench, _ name: String, old: String, new: String, www: String, base: String,
  zsyncBytes: [Double], zsyncSeconds: [Double], folder: String, params: [String: String]
) throws {
  let store = folder + "/fetch-store"
  defer { remove(store) }
  let url = base + "/versioned.bin"
  var sent: [Double] = []
  var rebuilt: [Double] = []
  var whole: [Double] = []
  for _ in 0..<(b.quick ? 1 : 3) {
    for zsync in [true, false] {
      // The old version fetched, then the new one and its control file published.
      remove(store)
      remove(www + "/versioned.bin.zsync")
      try Spawn.check(["cp", "--reflink=never", old, www + "/versioned.bin"])
      // An older mtime: nginx's ETag is the length and the mtime in seconds,
      // and two versions of a tar can have one length.
      try Spawn.check(["touch", "-m", "-d", "2020-01-01", www + "/versioned.bin"])
      try Spawn.check([b.trove, "--store", store, "fetch", "-q", url])
      try Spawn.check(["cp", "--reflink=never", new, www + "/versioned.bin"])
      try Spawn.check([
        "cp", "--reflink=never", www + "/new.bin.zsync", www + "/versioned.bin.zsync",
      ])
      sync()
      let output = b.work + "/fetch.json"
      let timed = try Spawn.check(
        [b.trove, "--store", store, "fetch", "--json"]
          + (zsync ? ["--zsync-url", base + "/new.bin.zsync"] : []) + [url],
        output: output)
      guard zsync else {
        whole.append(timed.seconds)
        continue
      }
      rebuilt.append(timed.seconds)
      let data = (try? Data(contentsOf: URL(fileURLWithPath: output))) ?? Data()
      let records = (try? JSONSerialization.jsonObject(with: data)) as? [[String: Any]]
      guard records?.first?["source"] as? String == "delta" else {
        throw Spawn.Failure(
          command: ["trove", "fetch", "--zsync-url", url],
          detail: "did not rebuild: \(records ?? [])")
      }
      let bytes = records?.first?["bytesTransferred"] as? Int ?? 0
      sent.append(Double(bytes) / Double(1 << 20))
      remove(output)
    }
  }
  b.add(
    Result(
      suite: "chunks", name: "\(name): fetch --zsync, bytes", parameters: params,
      unit: .mebibytes, trove: Series(samples: sent), referenceName: "zsync, the same pair",
      reference: Series(samples: zsyncBytes),
      note: "trove fetch --zsync-url from nginx into a store holding the old version of the URL"))
  b.add(
    Result(
      suite: "chunks", name: "\(name): fetch --zsync", parameters: params, unit: .seconds,
      trove: Series(samples: rebuilt), referenceName: "zsync, the same pair",
      reference: Series(samples: zsyncSeconds)))
  b.add(
    Result(
      suite: "chunks", name: "\(name): fetch --zsync", parameters: params, unit: .seconds,
      trove: Series(samples: rebuilt), referenceName: "the same fetch, whole",
      reference: Series(samples: whole),
      note: "without --zsync, into the same store holding the old version"))
}

/// Bytes of `path` in extents the kernel marks shared (`filefrag -v -s`).
private func sharedBytes(_ path: String) throws -> Int64 {
  let out = try Spawn.capture(["filefrag", "-v", "-s", path])
  var blockSize: Int64 = 4096
  var blocks: Int64 = 0
  for line in out.split(separator: "\n") {
    if let of = line.range(of: " blocks of "), let end = line.range(of: " bytes)") {
      blockSize = Int64(line[of.upperBound..<end.lowerBound]) ?? blockSize
    }
    guard line.contains("shared") else { continue }
    let fields = line.split(separator: ":").map { $0.trimmingCharacters(in: .whitespaces) }
    // ext: logical: physical: length: [expected:] flags
    if fields.count >= 4, let length = Int64(fields[3]) { blocks += length }
  }
  return blocks * blockSize
}

/// SplitMix64: a seeded generator for the suite's data.
private struct SplitMix: RandomNumberGenerator {
  var state: UInt64
  init(_ seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}
