import Foundation
import Testing

@testable import Trove

/// The records of removals between their two steps, packed in runs of up
/// to ``RemovalRow/capacity`` a row: what goes in comes out, once.
@Suite("Removal records packed in rows")
struct RemovalRowsTests {
  /// `count` removals of made-up digests, every third with a raw file,
  /// every fifth with a compressed one; `rm`'s where `explicit` says.
  func removals(_ count: Int, seed: UInt64, explicit: (Int) -> Bool) -> [Removal] {
    var generator = SeededGenerator(seed: seed)
    return (0..<count).map { i in
      Removal(
        digest: BlobDigest(high: generator.next(), low: generator.next()),
        isExplicit: explicit(i),
        raw: i % 3 == 0 ? FileIdentity(inode: generator.next(), writeTime: -Int64(i)) : nil,
        compressed: i % 5 == 0 ? FileIdentity(inode: UInt64(i + 1), writeTime: Int64(i)) : nil)
    }
  }

  func same(_ a: Removal?, _ b: Removal?) -> Bool {
    a?.digest == b?.digest && a?.isExplicit == b?.isExplicit && a?.raw == b?.raw
      && a?.compressed == b?.compressed
  }

  @Test("a part of 2,500 goes in three rows; lookups, a prefix, call-offs and the take agree")
  func roundTrip() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let all = removals(2500, seed: 41, explicit: { _ in false })
    let capacity = RemovalRow.capacity
    let ids = try store.index().write("record") { (tx) throws(TroveError) in
      try tx.insertRemovals(all, now: 1000)
    }
    #expect(ids.count == (all.count + capacity - 1) / capacity, "\(ids)")

    let byDigest = Dictionary(uniqueKeysWithValues: all.map { ($0.digest, $0) })
    let sorted = all.map(\.digest).sorted()
    // Called off: the first and last of every row, and one inside.
    let calledOff = [
      sorted[0], sorted[capacity - 1], sorted[capacity], sorted[1500], sorted[2 * capacity - 1],
      sorted[2 * capacity], sorted[2499],
    ]
    let absent = BlobDigest(high: 0, low: 7)
    let taken = try store.index().write("call off") { (tx) throws(TroveError) in
      for digest in sorted.enumerated().filter({ $0.offset % 97 == 0 }).map(\.element) {
        #expect(same(try tx.removal(of: digest), byDigest[digest]), "\(digest)")
      }
      #expect(try tx.removal(of: absent) == nil)
      return try tx.takeRemovals(calledOff + [absent])
    }
    #expect(zip(calledOff, taken).allSatisfy { same(byDigest[$0], $1) })
    #expect(taken.last! == nil, "a digest with no removal")

    let left = Set(sorted).subtracting(calledOff)
    try store.index().read("look") { (tx) throws(TroveError) in
      for digest in calledOff { #expect(try tx.removal(of: digest) == nil, "\(digest)") }
      let prefix = String(sorted[1200].hex.prefix(2))
      let inFolder = try tx.removals(withPrefix: prefix)
      #expect(Set(inFolder.keys) == left.filter { $0.hex.hasPrefix(prefix) })
      #expect(inFolder.allSatisfy { same($0.value, byDigest[$0.key]) })
      #expect(Set(try tx.removals(withPrefix: "").keys) == left)
      #expect(try tx.removals(recordedBefore: 1001, limit: 100).count == 100)
      #expect(try tx.removals(recordedBefore: 1000, limit: 100).isEmpty)
    }

    // The remover takes its rows whole: what is left, once.
    let finished = try store.index().write("take") { (tx) throws(TroveError) in
      try tx.takeRemovals(rows: ids)
    }
    #expect(finished.count == left.count)
    #expect(Set(finished.map(\.digest)) == left)
    #expect(finished.allSatisfy { same($0, byDigest[$0.digest]) })
    try store.index().read("look") { (tx) throws(TroveError) in
      #expect(try tx.removals(withPrefix: "").isEmpty)
      #expect(try tx.takeRemovals(rows: ids).isEmpty)
    }
  }

  @Test("a removal recorded again replaces the record: an rm during an eviction is an rm")
  func oneRecordPerDigest() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let evicting = removals(3000, seed: 47, explicit: { _ in false })
    let removing = Array(evicting[1000..<1040]).map {
      var removal = $0
      removal.isExplicit = true
      removal.raw = FileIdentity(inode: 99, writeTime: 1)
      return removal
    }
    let (evictionRows, rmRows) = try store.index().write("record") { (tx) throws(TroveError) in
      (try tx.insertRemovals(evicting, now: 5), try tx.insertRemovals(removing, now: 6))
    }
    try store.index().read("look") { (tx) throws(TroveError) in
      #expect(try tx.removals(withPrefix: "").count == evicting.count)
      for removal in removing {
        let found = try tx.removal(of: removal.digest)
        #expect(found?.isExplicit == true && found?.raw == removal.raw, "\(removal.digest)")
      }
      #expect(try tx.removals(recordedBefore: 6, limit: 5000).count == evicting.count - 40)
    }
    let taken = try store.index().write("take") { (tx) throws(TroveError) in
      (try tx.takeRemovals(rows: evictionRows), try tx.takeRemovals(rows: rmRows))
    }
    #expect(taken.0.count == evicting.count - 40 && taken.1.count == 40)
    #expect(taken.1.allSatisfy { $0.isExplicit })
  }

  @Test("rm's removals and the others go in rows of their own; row ids are never reused")
  func kindsApart() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let mixed = removals(30, seed: 43, explicit: { $0 % 2 == 0 })
    let (first, second) = try store.index().write("record") { (tx) throws(TroveError) in
      let first = try tx.insertRemovals(mixed, now: 5)
      _ = try tx.takeRemovals(rows: first)
      return (first, try tx.insertRemovals(mixed, now: 6))
    }
    #expect(first.count == 2 && second.count == 2)
    #expect(Set(first).isDisjoint(with: second), "\(first) \(second)")
    try store.index().read("look") { (tx) throws(TroveError) in
      for removal in mixed {
        #expect(try tx.removal(of: removal.digest)?.isExplicit == removal.isExplicit)
      }
    }
  }
}
