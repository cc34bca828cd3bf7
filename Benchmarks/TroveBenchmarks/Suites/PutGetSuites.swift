import Foundation
import Trove

/// `trove put` as a process, beside xxhsum and cp on the same file.
func putSuite(_ b: Bench) throws {
  print("put")
  let size = b.size(1 << 30, quick: 32 << 20)
  let source = b.work + "/put-\(size).bin"
  try makeRandomFile(source, bytes: size)
  defer { remove(source) }
  let store = b.work + "/put-store"
  let copy = b.work + "/put-cp.bin"
  defer {
    remove(store)
    remove(copy)
  }
  let params = ["size": "\(size)", "filesystem": "work folder"]
  let name = "put \(sizeName(size)), copy path"

  let timed = try b.timeCommands([
    [b.trove, "--store", store, "put", source],
    ["xxhsum", "-H2", source],
    ["cp", "--reflink=never", source, copy],
    ["sh", "-c", "cp --reflink=never \"$0\" \"$1\" && sync \"$1\"", source, copy],
  ]) {
    remove(store)
    remove(copy)
  }
  b.add(
    Result(
      suite: "put", name: name, parameters: params, unit: .seconds, trove: timed[0],
      referenceName: "xxhsum -H2 FILE", reference: timed[1],
      note: "trove reads, hashes, writes and fsyncs; xxhsum only reads and hashes"))
  b.add(
    Result(
      suite: "put", name: name, parameters: params, unit: .seconds, trove: timed[0],
      referenceName: "cp --reflink=never", reference: timed[2],
      note: "cp neither hashes nor fsyncs"))
  b.add(
    Result(
      suite: "put", name: name, parameters: params, unit: .seconds, trove: timed[0],
      referenceName: "cp && sync FILE", reference: timed[3],
      note: "the same durability as trove, without the hash"))

  // A stream: through a pipe, so nothing can be cloned, sized or re-read.
  let streamed = try b.timeCommands([
    ["sh", "-c", "cat \"$0\" | \"$1\" --store \"$2\" put -", source, b.trove, store],
    ["sh", "-c", "cat \"$0\" | xxhsum -H2 -", source],
    ["sh", "-c", "cat \"$0\" | cat > \"$1\" && sync \"$1\"", source, copy],
  ]) {
    remove(store)
    remove(copy)
  }
  let pipeName = "put \(sizeName(size)) from a pipe"
  b.add(
    Result(
      suite: "put", name: pipeName, parameters: params, unit: .seconds, trove: streamed[0],
      referenceName: "cat | xxhsum -H2 -", reference: streamed[1]))
  b.add(
    Result(
      suite: "put", name: pipeName, parameters: params, unit: .seconds, trove: streamed[0],
      referenceName: "cat | cat > FILE && sync", reference: streamed[2],
      note: "the same durability as trove, without the hash"))

  try Spawn.check([b.trove, "--store", store, "put", source])
  let again = try b.timeCommands([
    [b.trove, "--store", store, "put", source], ["xxhsum", "-H2", source],
  ])
  b.add(
    Result(
      suite: "put", name: "put \(sizeName(size)) again (dedup hit)", parameters: params,
      unit: .seconds, trove: again[0], referenceName: "xxhsum -H2 FILE", reference: again[1],
      note: "an object of the same size exists, so the file is hashed first: nothing written"))

  guard let xfs = b.xfs else { return b.skip("put by clone", b.xfsMissing) }
  // 4 GiB, written just before, so its pages are cached (the case the
  // source's cached pages are hashed for): against xxhsum of the same
  // cached file. The loop XFS of scripts/bench.sh is 8 GiB; a clone takes
  // no blocks.
  let cloneSize = b.size(4 << 30, quick: 32 << 20)
  let xfsSource = xfs + "/put-\(cloneSize).bin"
  let xfsStore = xfs + "/put-store"
  let xfsCopy = xfs + "/put-clone.bin"
  try makeRandomFile(xfsSource, bytes: cloneSize)
  defer {
    remove(xfsStore)
    remove(xfsCopy)
    remove(xfsSource)
  }
  let xfsTimed = try b.timeCommands([
    [b.trove, "--store", xfsStore, "put", xfsSource],
    ["cp", "--reflink=always", xfsSource, xfsCopy],
    ["xxhsum", "-H2", xfsSource],
    ["sh", "-c", "cp --reflink=always \"$0\" \"$1\" && xxhsum -H2 \"$1\"", xfsSource, xfsCopy],
  ]) {
    remove(xfsStore)
    remove(xfsCopy)
  }
  let xfsParams = ["size": "\(cloneSize)", "filesystem": "xfs", "source": "page-cached"]
  let xfsName = "put \(sizeName(cloneSize)), clone path (xfs)"
  b.add(
    Result(
      suite: "put", name: xfsName, parameters: xfsParams, unit: .seconds, trove: xfsTimed[0],
      referenceName: "xxhsum -H2 FILE", reference: xfsTimed[2],
      note:
        "trove clones into tmp/, hashes the source's cached pages and proves the clone holds"
        + " them (FIEMAP, stat), then syncs and publishes"))
  b.add(
    Result(
      suite: "put", name: xfsName, parameters: xfsParams, unit: .seconds, trove: xfsTimed[0],
      referenceName: "cp --reflink=always", reference: xfsTimed[1],
      note: "cp clones without reading a byte"))
  b.add(
    Result(
      suite: "put", name: xfsName, parameters: xfsParams, unit: .seconds, trove: xfsTimed[0],
      referenceName: "cp --reflink && xxhsum clone", reference: xfsTimed[3],
      note: "clone, then hash the clone's uncached bytes (what trove did before)"))
}

/// `trove get` by clone and by copy as a process, beside cp; and the
/// library's clone in process, beside the bare system calls.
func getSuite(_ b: Bench) throws {
  print("get")
  guard let xfs = b.xfs else { return b.skip("get", b.xfsMissing) }
  let store = xfs + "/get-store"
  defer { remove(store) }
  let sizes = b.quick ? [1 << 20, 16 << 20, 32 << 20] : [1 << 20, 64 << 20, 1 << 30]
  for size in sizes {
    let source = xfs + "/get-\(size).bin"
    try makeRandomFile(source, bytes: size)
    defer { remove(source) }
    let digest =
      try Spawn.capture([b.trove, "--store", store, "put", source])
      .split(separator: " ").first.map(String.init) ?? ""
    let out = xfs + "/get-out.bin"
    defer { remove(out) }
    let params = ["size": "\(size)", "filesystem": "xfs"]
    let clones = try b.timeCommands([
      [b.trove, "--store", store, "get", "--mode", "clone", digest, out],
      ["cp", "--reflink=always", source, out],
    ]) { remove(out) }
    b.add(
      Result(
        suite: "get", name: "get \(sizeName(size)) by clone", parameters: params, unit: .seconds,
        trove: clones[0], referenceName: "cp --reflink=always", reference: clones[1]))
    let copies = try b.timeCommands([
      [b.trove, "--store", store, "get", "--mode", "copy", digest, out],
      ["cp", "--reflink=never", source, out],
    ]) { remove(out) }
    b.add(
      Result(
        suite: "get", name: "get \(sizeName(size)) by copy", parameters: params, unit: .seconds,
        trove: copies[0], referenceName: "cp --reflink=never", reference: copies[1],
        note: "trove verifies the digest while copying"))

    // The library call, in process, against the bare system calls it makes.
    let library = try Store(StoreConfiguration(root: store))
    let parsed = try BlobDigest(parsing: digest)
    let objectPath = try library.path(for: parsed)
    let timed = try b.time(
      [
        { try library.materialize(parsed, at: out, mode: .clone) },
        { try bareClone(objectPath, out) },
      ], setup: { remove(out) })
    let (call, floor) = (timed[0], timed[1])
    b.add(
      Result(
        suite: "get", name: "library get \(sizeName(size)) by clone", parameters: params,
        unit: .seconds, trove: call, referenceName: "open + FICLONE + rename", reference: floor,
        note: "in process: what Trove adds over the system calls a clone needs"))
  }
}

/// The least a clone to a new path costs: open the source, create a temp
/// file, FICLONE, rename it into place.
func bareClone(_ source: String, _ destination: String) throws {
  let src = open(source, O_RDONLY | O_CLOEXEC)
  let temp = destination + ".tmp"
  let dst = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
  defer {
    close(src)
    close(dst)
  }
  guard src >= 0, dst >= 0, ioctl(dst, 0x4004_9409, src) == 0, rename(temp, destination) == 0
  else {
    throw Spawn.Failure(
      command: ["FICLONE", source, destination], detail: String(cString: strerror(errno)))
  }
}

/// Peak RSS of put and get of a large file: memory must stay bounded.
func memorySuite(_ b: Bench) throws {
  print("memory")
  let size = b.size(4 << 30, quick: 64 << 20)
  let source = b.work + "/memory-\(size).bin"
  try makeRandomFile(source, bytes: size)
  defer { remove(source) }
  let store = b.work + "/memory-store"
  let out = b.work + "/memory-out.bin"
  defer {
    remove(store)
    remove(out)
  }
  let mib = { (bytes: Int64) in Series(samples: [Double(bytes) / 1_048_576]) }
  let baseline = try Spawn.peakResidentBytes([b.trove, "--version"])
  b.add(
    Result(
      suite: "memory", name: "peak RSS, trove --version (baseline)", parameters: [:],
      unit: .mebibytes, trove: mib(baseline), referenceName: "xxhsum --version",
      reference: mib(try Spawn.peakResidentBytes(["xxhsum", "--version"])),
      note: "the Swift runtime and Foundation, before any work"))
  let put = try Spawn.peakResidentBytes([b.trove, "--store", store, "put", source])
  let xxhsum = try Spawn.peakResidentBytes(["xxhsum", "-H2", source])
  b.add(
    Result(
      suite: "memory", name: "peak RSS, put \(sizeName(size))", parameters: ["size": "\(size)"],
      unit: .mebibytes, trove: mib(put), referenceName: "xxhsum -H2 FILE", reference: mib(xxhsum)))
  let digest =
    try Spawn.capture([b.trove, "--store", store, "put", source])
    .split(separator: " ").first.map(String.init) ?? ""
  let get = try Spawn.peakResidentBytes([
    b.trove, "--store", store, "get", "--mode", "copy", digest, out,
  ])
  remove(out)
  let cp = try Spawn.peakResidentBytes(["cp", "--reflink=never", source, out])
  b.add(
    Result(
      suite: "memory", name: "peak RSS, get \(sizeName(size)) by copy",
      parameters: ["size": "\(size)"], unit: .mebibytes, trove: mib(get),
      referenceName: "cp --reflink=never", reference: mib(cp)))
}
