import Foundation
import Testing

@testable import Trove

/// ``JSONValue/init(parsing:)``, the reader of `config.json`, held to what
/// `JSONDecoder` makes of the same bytes: the same values, the same texts
/// refused.
@Suite("JSON: the settings file's reader agrees with JSONDecoder")
struct JSONValueTests {
  /// What `JSONDecoder` reads, numbers as the reader keeps them: a whole
  /// number written with a fraction or an exponent stays a number.
  static func decoded(_ bytes: [UInt8]) -> JSONValue? {
    try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
  }

  /// Whether two values are the same JSON: numbers compared by value.
  static func same(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case (.integer, .number), (.number, .integer), (.number, .number):
      return a.double == b.double
    case (.array(let x), .array(let y)):
      return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
    case (.object(let x), .object(let y)):
      return x.count == y.count
        && x.allSatisfy { key, value in y[key].map { same(value, $0) } ?? false }
    default:
      return a == b
    }
  }

  static let valid = [
    #"{"format": 1, "policy": {"budget": 1073741824, "max-age": null, "low-water": 0.9}}"#,
    #"  [true, false, null, -0, 0.5, -12.5e-3, 1E+2, 9223372036854775807]  "#,
    #"{"a": {"b": [[], {}, [{}]]}, "a": "twice: the first counts"}"#,
    #"[1, ]"#, #"{"a": 1 ,}"#,
    #""escapes: \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00 é""#,
    "\u{FEFF}{\"bom\": 1}",
    #"-9223372036854775808"#,
    #"92233720368547758070"#,
    #"1.0"#,
  ]

  static let invalid = [
    "", " ", "{", "}", "[,]", "{,}", "[1,,]", "{\"a\" 1}", "{a: 1}", "'a'", "01", "-", "1.",
    ".5", "1e", "+1", "NaN", "Infinity", "1e999", "tru", "nul", "[1 2]", "{} {}", "\"a",
    "\"\\x\"", "\"\\u12\"", "\"\\ud83d\"", "\"\\ude00\"", "\"a\u{01}b\"", "/* c */ 1",
    String(repeating: "[", count: 600) + String(repeating: "]", count: 600),
  ]

  @Test("valid texts give the values JSONDecoder gives")
  func validTexts() throws {
    for text in Self.valid {
      let bytes = Array(text.utf8)
      let parsed = try #require(JSONValue(parsing: bytes), "\(text)")
      let decoded = try #require(Self.decoded(bytes), "\(text)")
      #expect(Self.same(parsed, decoded), "\(text): \(parsed) vs \(decoded)")
    }
    #expect(JSONValue(parsing: Array("12".utf8)) == .integer(12))
    #expect(JSONValue(parsing: Array("1.5".utf8)) == .number(1.5))
    #expect(
      JSONValue(parsing: Array(#""\ud83d\ude00""#.utf8)) == .string("\u{1F600}"))
  }

  @Test("texts that are not JSON are refused, as JSONDecoder refuses them")
  func invalidTexts() {
    for text in Self.invalid {
      let bytes = Array(text.utf8)
      #expect(JSONValue(parsing: bytes) == nil, "\(text)")
      #expect(Self.decoded(bytes) == nil, "JSONDecoder: \(text)")
    }
    #expect(JSONValue(parsing: [0x22, 0xC3, 0x28, 0x22]) == nil, "invalid UTF-8")
  }

  @Test("a settings file damaged byte by byte reads as JSONDecoder reads it")
  func damagedFiles() throws {
    let file = Array(
      """
      {
        "format" : 1,
        "policy" : {
          "access-resolution" : 3600, "budget" : null, "checksums" : "sha256",
          "low-water" : 0.8, "mirror" : { "pypi" : "https://pypi.org/simple/" },
          "rewrite" : {}, "chunking" : false, "note" : "caf\\u00e9 \\"quoted\\""
        }
      }
      """.utf8)
    var generator = SystemRandomNumberGenerator()
    let alphabet = Array(#"{}[]:,"\ue0.-+1 ntf"#.utf8) + [0x00, 0x0A, 0xC3, 0xFF]
    for _ in 0..<3000 {
      var bytes = file
      for _ in 0..<Int.random(in: 1...3, using: &generator) {
        let at = Int.random(in: 0..<bytes.count, using: &generator)
        switch Int.random(in: 0..<3, using: &generator) {
        case 0: bytes[at] = alphabet.randomElement(using: &generator)!
        case 1: bytes.remove(at: at)
        default: bytes.insert(alphabet.randomElement(using: &generator)!, at: at)
        }
      }
      let parsed = JSONValue(parsing: bytes)
      let decoded = Self.decoded(bytes)
      let text = String(decoding: bytes, as: UTF8.self)
      #expect((parsed == nil) == (decoded == nil), "\(text.debugDescription)")
      if let parsed, let decoded {
        #expect(Self.same(parsed, decoded), "\(text.debugDescription)")
      }
    }
  }
}

extension JSONValue {
  /// The value of a number, either kind.
  fileprivate var double: Double? {
    switch self {
    case .integer(let n): Double(n)
    case .number(let d): d
    default: nil
    }
  }
}
