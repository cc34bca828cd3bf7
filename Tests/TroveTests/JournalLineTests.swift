import Foundation
import Testing

@testable import Trove

@Suite("references.log lines written directly")
struct JournalLineTests {
  /// Every byte a string can hold that JSON treats specially, and some it
  /// does not.
  static let awkward: [String] = [
    "", "plain", "https://example.org/a/b?c=d&e=%20f#g", "quote \" backslash \\ slash /",
    String((0..<0x20).map { Character(Unicode.Scalar(UInt8($0))) }) + "\u{7F}",
    "é ü 漢字 🦀 \u{2028}\u{2029} \u{FEFF}", "W/\"etag-1\"", "Tue, 15 Nov 1994 08:12:31 GMT",
  ]

  static func records() throws -> [JournalRecord] {
    let digest = BlobDigest(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)
    let sha = try Checksum(parsing: "sha256:" + String(repeating: "ab", count: 32))
    var records: [JournalRecord] = [
      JournalRecord(op: .drop, digest: digest),
      JournalRecord(op: .unbind),
      JournalRecord(op: .pin, digest: digest, name: "release", expires: Int64.max),
      JournalRecord(op: .unpin, digest: digest, name: "", expires: Int64.min),
      JournalRecord(
        op: .bind, digest: digest, key: "k", checksums: [Checksum(digest), sha], pulled: true),
      JournalRecord(op: .bind, digest: digest, key: "k", checksums: [], pulled: false),
    ]
    for text in awkward {
      let origin = KeyOrigin(
        size: 4096, etag: text, lastModified: text, expires: -1, isImmutable: true,
        finalURL: text, fetched: 1_765_000_000_123_456_789, servedBy: text, contentType: text)
      let bare = KeyOrigin(
        size: 0, etag: nil, lastModified: nil, expires: nil, isImmutable: false, finalURL: nil,
        fetched: 0)
      records.append(JournalRecord(op: .bind, digest: digest, key: text, origin: origin))
      records.append(JournalRecord(op: .bind, digest: digest, key: text, origin: bare))
      records.append(JournalRecord(op: .pin, digest: digest, name: text))
    }
    return records
  }

  /// A record with every field set, the origin's too.
  static func full() throws -> JournalRecord {
    let digest = BlobDigest(high: 1, low: 2)
    let origin = KeyOrigin(
      size: 7, etag: "\"e\"", lastModified: "Tue, 15 Nov 1994 08:12:31 GMT", expires: 9,
      isImmutable: true, finalURL: "https://example.org/f", fetched: 8,
      servedBy: "https://mirror.example.org/f", contentType: "text/plain")
    return JournalRecord(
      op: .bind, digest: digest, name: "n", expires: 5, key: "k", origin: origin,
      checksums: [Checksum(digest)], pulled: true)
  }

  @Test("a record with every field set, a field added later included, is written whole")
  func fullRecordSetsEveryField() throws {
    let record = try Self.full()
    for value in [record, record.origin!] as [Any] {
      for child in Mirror(reflecting: value).children {
        let inner = Mirror(reflecting: child.value)
        #expect(
          inner.displayStyle != .optional || !inner.children.isEmpty,
          "\(type(of: value)).\(child.label ?? "?") is nil in the full record")
      }
    }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    #expect(ObjectTable.lines([record]) == Array(try encoder.encode(record)) + [0x0A])
  }

  @Test("each line is the bytes JSONEncoder makes of its record, keys sorted, slashes bare")
  func linesMatchTheEncoder() throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    for record in try Self.records() {
      let expected = Array(try encoder.encode(record)) + [0x0A]
      let written = ObjectTable.lines([record])
      #expect(
        written == expected,
        "\(String(decoding: written, as: UTF8.self)) vs \(String(decoding: expected, as: UTF8.self))"
      )
    }
  }

  @Test("lines read back as the records they were written from, in order")
  func linesDecodeToTheirRecords() throws {
    let records = try Self.records()
    let bytes = ObjectTable.lines(records)
    let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).dropLast()
    #expect(lines.count == records.count)
    for (line, record) in zip(lines, records) {
      #expect(try JSONDecoder().decode(JournalRecord.self, from: Data(line)) == record)
    }
  }
  @Test(
    "a log past 1 MiB is rewritten as the keys the index holds once it is four times their size, and goes on growing from there"
  )
  func logCompactedPastItsLimit() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let digest = try store.put(bytes: Bytes.random(3000, seed: 4400)).digest
    let other = try store.put(bytes: Bytes.random(3100, seed: 4401)).digest
    let key = "https://example.com/" + String(repeating: "k", count: 40_000)
    let log = store.root + "/references.log"
    func size() throws -> Int {
      (try FileManager.default.attributesOfItem(atPath: log)[.size] as? Int) ?? 0
    }
    var (largest, shrank) = (0, false)
    // Each bind a line of about 40 KB; one key alive, so the rewritten log
    // holds one line of it.
    for i in 0..<40 {
      try store.bind(key: key, to: i % 2 == 0 ? digest : other)
      let now = try size()
      shrank = shrank || now < largest
      largest = max(largest, now)
    }
    let final = try size()
    #expect(largest > 900_000 && shrank, "\(largest)")
    #expect(final < largest, "\(final)")
    let text = try String(contentsOfFile: log, encoding: .utf8)
    #expect(text.components(separatedBy: "\"op\":\"bind\"").count >= 2)
    let reopened = try Store(StoreConfiguration(root: store.root))
    #expect(try reopened.digest(forKey: key) == other)
  }
}
