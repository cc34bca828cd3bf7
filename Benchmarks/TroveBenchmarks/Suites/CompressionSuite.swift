import Foundation
import Trove

/// Put and get of compressible data (a tar of /usr/lib) and random data at
/// zstd levels 1 and 3, beside the zstd command at the same level, one
/// thread, on the same files; and the compression ratio achieved.
func compressionSuite(_ b: Bench) throws {
  print("compression")
  let size = b.size(512 << 20, quick: 16 << 20)
  let text = b.work + "/usr-lib-\(size).tar"
  if !FileManager.default.fileExists(atPath: text) {
    try Spawn.check(["sh", "-c", "tar cf - /usr/lib 2>/dev/null | head -c \(size) > \"$0\"", text])
  }
  let random = b.work + "/random-\(size).bin"
  try makeRandomFile(random, bytes: size)
  defer {
    remove(text)
    remove(random)
  }
  let store = b.work + "/compression-store"
  let out = b.work + "/compression-out"
  defer {
    remove(store)
    remove(out)
  }
  for (label, input) in [("tar of /usr/lib", text), ("random", random)] {
    for level in [1, 3] {
      let params = ["size": "\(size)", "data": label, "level": "\(level)"]
      func configure() throws {
        remove(store)
        try Spawn.check([
          b.trove, "--store", store, "config", "set", "compression", "zstd:\(level)",
        ])
      }
      let puts = try b.timeCommands([
        [b.trove, "--store", store, "put", input],
        ["zstd", "-T1", "-\(level)", "-q", "-f", input, "-o", out],
        ["sh", "-c", "zstd -T1 -\(level) -q -f \"$0\" -o \"$1\" && sync \"$1\"", input, out],
      ]) {
        try configure()
        remove(out)
      }
      let putName = "put \(sizeName(size)) \(label), zstd:\(level)"
      b.add(
        Result(
          suite: "compression", name: putName, parameters: params, unit: .gigabytesPerSecond,
          trove: rate(puts[0], Double(size)), referenceName: "zstd -T1 -\(level)",
          reference: rate(puts[1], Double(size)),
          note: "trove also hashes, fsyncs and indexes; random data is sampled and stored raw"))
      b.add(
        Result(
          suite: "compression", name: putName, parameters: params, unit: .gigabytesPerSecond,
          trove: rate(puts[0], Double(size)), referenceName: "zstd -T1 -\(level) && sync",
          reference: rate(puts[2], Double(size)), note: "the same durability as trove"))

      // The same bytes through a pipe: sampled, then compressed as they
      // arrive (or written raw), in one pass.
      let piped = try b.timeCommands([
        ["sh", "-c", "cat \"$0\" | \"$1\" --store \"$2\" put -", input, b.trove, store],
        [
          "sh", "-c", "cat \"$0\" | zstd -T1 -\(level) -q -f -o \"$1\" && sync \"$1\"", input,
          out,
        ],
      ]) {
        try configure()
        remove(out)
      }
      b.add(
        Result(
          suite: "compression", name: "put \(sizeName(size)) \(label) from a pipe, zstd:\(level)",
          parameters: params, unit: .gigabytesPerSecond, trove: rate(piped[0], Double(size)),
          referenceName: "cat | zstd -T1 -\(level) && sync",
          reference: rate(piped[1], Double(size)),
          note: "the length is unknown: the first 256 KiB decide the form"))

      // Get: decompress (or copy, for raw) the stored object.
      try configure()
      let digest =
        try Spawn.capture([b.trove, "--store", store, "put", input])
        .split(separator: " ").first.map(String.init) ?? ""
      try Spawn.check(["zstd", "-T1", "-\(level)", "-q", "-f", input, "-o", out + ".zst"])
      let stats = try Spawn.capture([b.trove, "--store", store, "stats", "--json"])
      let json = try JSONSerialization.jsonObject(with: Data(stats.utf8)) as? [String: Any]
      let stored = (json?["storedBytes"] as? Int).map(Double.init) ?? Double(size)
      let zstdSize = Double(
        (try FileManager.default.attributesOfItem(atPath: out + ".zst")[.size] as? Int) ?? size)
      let gets = try b.timeCommands([
        [b.trove, "--store", store, "get", "--mode", "copy", digest, out],
        ["zstd", "-d", "-q", "-f", out + ".zst", "-o", out],
      ]) { remove(out) }
      b.add(
        Result(
          suite: "compression", name: "get \(sizeName(size)) \(label), zstd:\(level)",
          parameters: params, unit: .gigabytesPerSecond, trove: rate(gets[0], Double(size)),
          referenceName: "zstd -d", reference: rate(gets[1], Double(size)),
          note: "trove verifies the digest of the decompressed bytes"))
      b.add(
        Result(
          suite: "compression", name: "ratio \(label), zstd:\(level)", parameters: params,
          unit: .ratio, trove: Series(samples: [Double(size) / stored]),
          referenceName: "zstd -T1 -\(level)",
          reference: Series(samples: [Double(size) / zstdSize]),
          note: "logical ÷ stored bytes"))
      remove(out + ".zst")
    }
  }
}
