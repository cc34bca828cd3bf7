import Foundation
import Trove

/// `trove put` as a process, beside xxhsum and cp on the same file.
func putSuite(_ b: Bench) throws {
  print("put")
  let size = b.size(1 << 30, quick: 32 << 20)
  let source = b.work + "/put-\(size).bin"
  try makeRandomFile(source, bytes: size)
  let store = b.work + "/put-store"
  let copy = b.work + "/put-cp.bin"
  let params = ["size": "\(size)", "filesystem": "work folder"]

  let put = try b.timeCommand([b.trove, "--store", store, "put", source]) { remove(store) }
  let xxhsum = try b.timeCommand(["xxhsum", "-H2", source])
  let cp = try b.timeCommand(["cp", "--reflink=never", source, copy]) { remove(copy) }
  remove(copy)
  b.add(
    Result(
      suite: "put", name: "put \(sizeName(size)), copy path", parameters: params, unit: .seconds,
      trove: put, referenceName: "xxhsum -H2 FILE", reference: xxhsum,
      note: "trove reads, hashes, writes and fsyncs; xxhsum only reads and hashes"))
  b.add(
    Result(
      suite: "put", name: "put \(sizeName(size)), copy path", parameters: params, unit: .seconds,
      trove: put, referenceName: "cp --reflink=never", reference: cp,
      note: "cp neither hashes nor fsyncs"))

  let stream = try b.timeCommand([b.trove, "--store", store, "put", "-"], input: source) {
    remove(store)
  }
  let xxhsumStream = try b.timeCommand(["xxhsum", "-H2", "-"], input: source)
  b.add(
    Result(
      suite: "put", name: "put \(sizeName(size)) from stdin", parameters: params, unit: .seconds,
      trove: stream, referenceName: "xxhsum -H2 - (stdin)", reference: xxhsumStream))

  try Spawn.check([b.trove, "--store", store, "put", source])
  let dedup = try b.timeCommand([b.trove, "--store", store, "put", source])
  b.add(
    Result(
      suite: "put", name: "put \(sizeName(size)) again (dedup hit)", parameters: params,
      unit: .seconds, trove: dedup, referenceName: "xxhsum -H2 FILE", reference: xxhsum))
  remove(store)

  guard let xfs = b.xfs else { return b.skip("put by clone", b.xfsMissing) }
  let xfsSource = xfs + "/put-\(size).bin"
  let xfsStore = xfs + "/put-store"
  let xfsCopy = xfs + "/put-clone.bin"
  try makeRandomFile(xfsSource, bytes: size)
  let cloned = try b.timeCommand([b.trove, "--store", xfsStore, "put", xfsSource]) {
    remove(xfsStore)
  }
  let cpClone = try b.timeCommand(["cp", "--reflink=always", xfsSource, xfsCopy]) {
    remove(xfsCopy)
  }
  let xxhsumXFS = try b.timeCommand(["xxhsum", "-H2", xfsSource])
  let xfsParams = ["size": "\(size)", "filesystem": "xfs"]
  b.add(
    Result(
      suite: "put", name: "put \(sizeName(size)), clone path (xfs)", parameters: xfsParams,
      unit: .seconds, trove: cloned, referenceName: "xxhsum -H2 FILE", reference: xxhsumXFS,
      note: "trove clones into tmp/, hashes the clone, fsyncs, publishes"))
  b.add(
    Result(
      suite: "put", name: "put \(sizeName(size)), clone path (xfs)", parameters: xfsParams,
      unit: .seconds, trove: cloned, referenceName: "cp --reflink=always", reference: cpClone))
  remove(xfsStore)
  remove(xfsCopy)
  remove(xfsSource)
}

/// `trove get` by clone and by copy as a process, beside cp.
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
    let params = ["size": "\(size)", "filesystem": "xfs"]
    let clone = try b.timeCommand([
      b.trove, "--store", store, "get", "--mode", "clone", digest, out,
    ]) {
      remove(out)
    }
    let cpClone = try b.timeCommand(["cp", "--reflink=always", source, out]) { remove(out) }
    b.add(
      Result(
        suite: "get", name: "get \(sizeName(size)) by clone", parameters: params, unit: .seconds,
        trove: clone, referenceName: "cp --reflink=always", reference: cpClone))
    let copy = try b.timeCommand([b.trove, "--store", store, "get", "--mode", "copy", digest, out])
    {
      remove(out)
    }
    let cpCopy = try b.timeCommand(["cp", "--reflink=never", source, out]) { remove(out) }
    b.add(
      Result(
        suite: "get", name: "get \(sizeName(size)) by copy", parameters: params, unit: .seconds,
        trove: copy, referenceName: "cp --reflink=never", reference: cpCopy,
        note: "trove verifies the digest while copying and fsyncs before the rename"))
    remove(out)
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
