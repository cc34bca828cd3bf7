import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

@Suite("the descriptor table reserved before a batch opens its files", .serialized)
struct DescriptorTableTests {
  /// `FDSize` of /proc/self/status: the slots of this process's table.
  static func tableSize() throws -> Int {
    let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
    let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("FDSize:") })
    return try #require(Int(line.dropFirst("FDSize:".count).trimmingCharacters(in: .whitespaces)))
  }

  /// Slots above the table's present size that the process may still
  /// open descriptors in.
  static var roomToGrow: Bool {
    guard let size = try? tableSize(), let limit = Sys.openFileLimit else { return false }
    return Int(clamping: limit) >= 2 * size
  }

  @Test(
    "reserving grows the table to hold the count",
    .enabled(if: roomToGrow, "RLIMIT_NOFILE leaves no room above the table to grow it")
  )
  func reservingGrowsTheTable() throws {
    let limit = Int(clamping: Sys.openFileLimit ?? 0)
    let wanted = min(limit, try Self.tableSize() * 4)
    let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count
    Sys.reserveDescriptors(wanted)
    #expect(try Self.tableSize() >= wanted)
    // Nothing is left open (other tests may open and close files meanwhile).
    #expect(try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count <= open + 64)
  }

  @Test(
    "a count past the process's limit reserves up to the limit",
    .enabled(
      if: (1...(1 << 16)).contains(Sys.openFileLimit ?? 0),
      "RLIMIT_NOFILE is unknown or too large to reserve in a test")
  )
  func reservingPastTheLimit() throws {
    let limit = Int(clamping: Sys.openFileLimit ?? 0)
    Sys.reserveDescriptors(limit * 2)
    #expect(try Self.tableSize() >= limit)
  }
}
