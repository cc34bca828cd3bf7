import Foundation
import Testing

@testable import Trove

/// Listings of stores too large to hold: `list(_:pageSize:each:)` reads
/// the objects a page at a time, `ls` streams them (reading a long listing
/// twice to align its columns), and the human sizes it prints are printf's.
@Suite("listing in pages")
struct ListingPagesTests {
  @Test(
    "a listing read in pages of 7 is the listing read at once, in every order, filter and limit")
  func pagesMatchWhole() throws {
    let scratch = try Scratch()
    let store = try Store(StoreConfiguration(root: scratch["store"]))
    // 60 objects in 5 sizes (ties for the size order, across pages), some
    // keyed and pinned, stored at different times.
    var paths: [String] = []
    for i in 0..<60 {
      var bytes = Bytes.random(100 + 50 * (i % 5), seed: UInt64(4000 + i))
      bytes[0] = UInt8(i)
      paths.append(try scratch.write("f\(i)", bytes))
    }
    let stored =
      try store.put(files: Array(paths[..<30])).map { try $0.get().digest }
      + store.put(files: Array(paths[30...])).map { try $0.get().digest }
    for (i, digest) in stored.enumerated() where i % 7 == 0 {
      try store.bind(key: "k\(i)", to: digest)
    }
    for (i, digest) in stored.enumerated() where i % 11 == 0 {
      try store.pin(digest, name: "p\(i)")
    }
    for (i, digest) in stored.enumerated() where i % 3 == 0 {
      try age(digest, by: Int64(60 * (i + 1)), in: store)
    }
    for order in EntryQuery.Order.allCases {
      for limit in [nil, 0, 1, 7, 13, 59, 60, 100] {
        for query in [
          EntryQuery(order: order, limit: limit),
          EntryQuery(order: order, limit: limit, largerThan: 200),
          EntryQuery(order: order, limit: limit, pinnedOnly: true),
          EntryQuery(order: order, limit: limit, keyPattern: "k*"),
        ] {
          let whole = try store.list(query)
          var paged: [EntryDetails] = []
          try store.list(query, pageSize: 7) { paged.append($0) }
          #expect(paged == whole, "\(query)")
        }
      }
    }
    #expect(try store.list().count == 60)
  }

  @Test("ls of more objects than it holds prints every one, in digest order, its columns aligned")
  func longListingAligned() throws {
    let scratch = try Scratch()
    let root = scratch["store"]
    let store = try Store(StoreConfiguration(root: root))
    // More than the 10,000 rows ls holds, of sizes from bytes to MiB, one
    // pinned: the widest cells come late in digest order as well as early.
    let count = 10_050
    var paths: [String] = []
    for i in 0..<count {
      var bytes = [UInt8](repeating: 0, count: i == 5_000 ? 2 << 20 : 16 + i % 3000)
      withUnsafeBytes(of: UInt64(i)) { bytes.replaceSubrange(0..<8, with: $0) }
      paths.append(try scratch.write("s\(i)", bytes))
    }
    let digests = try store.put(files: paths).map { try $0.get().digest }
    try store.pin(digests[7], name: "keep")
    let ls = try trove(root, ["ls"])
    let lines = ls.out.split(separator: "\n").map(String.init)
    #expect(lines.count == count)
    #expect(lines.map { String($0.prefix(39)) } == digests.map(\.description).sorted())
    for column in ["  raw  ", "  1 pin  "] {
      let starts = Set(
        lines.compactMap { line in
          line.range(of: column).map { line.distance(from: line.startIndex, to: $0.lowerBound) }
        })
      #expect(starts.count == 1, "\(column): \(starts)")
    }
    #expect(lines.contains { $0.contains("2.0 MiB") })
    // The xxhsum listing streams the same objects.
    let sums = try trove(root, ["ls", "--format", "xxhsum"]).out.split(separator: "\n")
    #expect(sums.map { "xxh128:" + $0.prefix(32) } == digests.map(\.description).sorted())
  }

  @Test("human sizes are printf's %.1f, ties rounded half to even")
  func sizesArePrintfs() {
    var checked: [Int64] = [
      0, 1, 1023, 1024, 1075, 1280, 1331, 1536, 1_048_575, 1_048_576, 1_100_000, 5 << 30,
      (1 << 49) - 1, 1 << 49, 1 << 52, .max,
    ]
    var state: UInt64 = 0x51CE
    for _ in 0..<20_000 {
      state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      checked.append(Int64(state >> UInt64(15 + Int(state % 40))))
    }
    // Exact ties: (2n + 1) · 51.2 bytes is n.5 tenths of a KiB.
    for n in stride(from: 25, to: 200_000, by: 10) { checked.append(Int64(n) * 256 / 5) }
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    for bytes in checked {
      var value = Double(bytes)
      var unit = 0
      while abs(value) >= 1024 && unit < units.count - 1 {
        value /= 1024
        unit += 1
      }
      let printf = unit == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[unit])
      #expect(CachePolicy.Quantities.formatSize(bytes) == printf, "\(bytes)")
    }
  }
}
