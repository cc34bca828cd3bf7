import Foundation
import Testing

@testable import Trove

/// ``Nullable``, the one way Trove's JSON keeps every key: `null` for an
/// absent value on the way out, a missing key or `null` read as nil on the
/// way in — for the library's types and the CLI's `--json` records alike.
@Suite("JSON: every key, null when absent")
struct NullableTests {
  struct Sample: Codable, Equatable {
    @Nullable var size: Int64?
    @Nullable var etag: String?
    var name: String
  }

  static func json(_ value: some Encodable) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return String(decoding: try encoder.encode(value), as: UTF8.self)
  }

  @Test("a nil property is encoded as null, never left out; a value as itself")
  func encodes() throws {
    #expect(
      try Self.json(Sample(size: nil, etag: nil, name: "a"))
        == #"{"etag":null,"name":"a","size":null}"#)
    #expect(
      try Self.json(Sample(size: 5, etag: "\"v1\"", name: "a"))
        == #"{"etag":"\"v1\"","name":"a","size":5}"#)
  }

  @Test("decoding takes a missing key or null for nil, and a value for itself")
  func decodes() throws {
    let decoder = JSONDecoder()
    for text in [#"{"name":"a"}"#, #"{"name":"a","size":null,"etag":null}"#] {
      #expect(
        try decoder.decode(Sample.self, from: Data(text.utf8))
          == Sample(size: nil, etag: nil, name: "a"))
    }
    let full = try decoder.decode(
      Sample.self, from: Data(#"{"name":"a","size":7,"etag":"e"}"#.utf8))
    #expect(full == Sample(size: 7, etag: "e", name: "a"))
    #expect(throws: DecodingError.self) {
      try decoder.decode(Sample.self, from: Data(#"{"name":"a","size":"seven"}"#.utf8))
    }
  }

  @Test("a remotes.json without the optional keys is read; remote ls --json shows them null")
  func remotesWithoutOptionalKeys() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    try Data("x".utf8).write(to: URL(fileURLWithPath: scratch["x"]))
    #expect(try CLI.run(["--store", store, "put", scratch["x"]]).status == 0)
    try Data(
      #"{"format": 1, "remotes": [{"name": "old", "url": "http://127.0.0.1:9/base", "read-only": true}]}"#
        .utf8
    ).write(to: URL(fileURLWithPath: store + "/remotes.json"))
    let ls = try CLI.run(["--store", store, "remote", "ls", "--json"])
    #expect(ls.status == 0, "\(ls.stderr)")
    let records = try JSONSerialization.jsonObject(with: Data(ls.stdout)) as? [[String: Any]]
    #expect(records?.count == 1)
    #expect(records?.first?["maxObjectSize"] is NSNull)
    #expect(records?.first?["authEnv"] is NSNull)
    #expect(records?.first?["readOnly"] as? Bool == true)
    let specs = try RemoteList.decode(try contents(store + "/remotes.json"), path: "remotes.json")
    #expect(
      specs.remotes == [RemoteSpec(name: "old", url: "http://127.0.0.1:9/base", readOnly: true)])
    #expect(
      try Self.json(specs.remotes[0])
        == #"{"max-object-size":null,"name":"old","read-only":true,"trust":null,"url":"http:\/\/127.0.0.1:9\/base","write":null}"#
    )
  }
}
