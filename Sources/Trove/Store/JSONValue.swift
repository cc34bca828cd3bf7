import Foundation

/// A JSON value as a file holds it, to be written back unchanged.
enum JSONValue: Codable, Sendable, Hashable {
  case null
  case bool(Bool)
  case integer(Int64)
  case number(Double)
  case string(String)
  case array([JSONValue])
  case object([String: JSONValue])

  init(from decoder: any Decoder) throws {
    let c = try decoder.singleValueContainer()
    if c.decodeNil() {
      self = .null
    } else if let bool = try? c.decode(Bool.self) {
      self = .bool(bool)
    } else if let integer = try? c.decode(Int64.self) {
      self = .integer(integer)
    } else if let number = try? c.decode(Double.self) {
      self = .number(number)
    } else if let string = try? c.decode(String.self) {
      self = .string(string)
    } else if let array = try? c.decode([JSONValue].self) {
      self = .array(array)
    } else {
      self = .object(try c.decode([String: JSONValue].self))
    }
  }

  func encode(to encoder: any Encoder) throws {
    var c = encoder.singleValueContainer()
    switch self {
    case .null: try c.encodeNil()
    case .bool(let b): try c.encode(b)
    case .integer(let n): try c.encode(n)
    case .number(let d): try c.encode(d)
    case .string(let s): try c.encode(s)
    case .array(let a): try c.encode(a)
    case .object(let o): try c.encode(o)
    }
  }

  /// A whole number, if this is one.
  var integer: Int64? {
    switch self {
    case .integer(let n): return n
    case .number(let d) where d == d.rounded() && abs(d) < 9e18: return Int64(d)
    default: return nil
    }
  }

  /// The value as compact JSON text, for messages: `-5`, `"lots"`.
  var text: String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "?"
  }

  /// The value as `trove config set` would take it: text as it is, `null`
  /// as `none`, a number in the setting's exact unit (`seconds`: a
  /// duration). Anything else is its JSON text, which no setting accepts.
  func settingText(seconds: Bool) -> String {
    let unit = seconds ? "s" : ""
    switch self {
    case .null: return "none"
    case .string(let s): return s
    case .integer(let n): return "\(n)\(unit)"
    case .number(let d): return integer.map { "\($0)\(unit)" } ?? "\(d)\(unit)"
    // Its JSON text, without an encoder: every store has boolean settings.
    case .bool(let b): return b ? "true" : "false"
    case .array, .object: return text
    }
  }
}

extension JSONValue {
  /// Parses `bytes` as one JSON text (RFC 8259, UTF-8, an optional byte
  /// order mark), as leniently as `JSONDecoder` reads it (a comma before a
  /// closing bracket; of a key given twice, the first counts): nil when
  /// they are not one. A number without a fraction or an exponent that
  /// fits is an ``integer``, any other a ``number``. Nests at most 512 deep.
  ///
  /// Read without `JSONDecoder`, whose generic decoding builds an error
  /// for every failed guess of a value's type; a text in another encoding
  /// than UTF-8 is nil here and left to it.
  init?(parsing bytes: [UInt8]) {
    var reader = JSONReader(bytes)
    if reader.bytes.starts(with: [0xEF, 0xBB, 0xBF]) { reader.at = 3 }
    guard let value = reader.value(depth: 0) else { return nil }
    reader.skipSpace()
    guard reader.at == reader.bytes.count else { return nil }
    self = value
  }
}

/// A recursive-descent reader of one JSON text (``JSONValue/init(parsing:)``).
private struct JSONReader {
  let bytes: [UInt8]
  var at = 0

  init(_ bytes: [UInt8]) { self.bytes = bytes }

  mutating func skipSpace() {
    while at < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[at]) { at += 1 }
  }

  /// Consumes `literal` if the bytes continue with it.
  mutating func take(_ literal: StaticString) -> Bool {
    let count = literal.utf8CodeUnitCount
    guard bytes.count - at >= count else { return false }
    for i in 0..<count where bytes[at + i] != literal.utf8Start[i] { return false }
    at += count
    return true
  }

  mutating func value(depth: Int) -> JSONValue? {
    skipSpace()
    guard at < bytes.count, depth < 512 else { return nil }
    switch bytes[at] {
    case UInt8(ascii: "{"): return object(depth: depth)
    case UInt8(ascii: "["): return array(depth: depth)
    case UInt8(ascii: "\""): return string().map { .string($0) }
    case UInt8(ascii: "t"): return take("true") ? .bool(true) : nil
    case UInt8(ascii: "f"): return take("false") ? .bool(false) : nil
    case UInt8(ascii: "n"): return take("null") ? .null : nil
    default: return number()
    }
  }

  mutating func object(depth: Int) -> JSONValue? {
    at += 1
    var members: [String: JSONValue] = [:]
    skipSpace()
    if take("}") { return .object(members) }
    while true {
      skipSpace()
      guard at < bytes.count, bytes[at] == UInt8(ascii: "\""), let key = string() else {
        return nil
      }
      skipSpace()
      guard take(":"), let member = value(depth: depth + 1) else { return nil }
      if members[key] == nil { members[key] = member }
      skipSpace()
      if take("}") { return .object(members) }
      guard take(",") else { return nil }
      skipSpace()
      if take("}") { return .object(members) }
    }
  }

  mutating func array(depth: Int) -> JSONValue? {
    at += 1
    var elements: [JSONValue] = []
    skipSpace()
    if take("]") { return .array(elements) }
    while true {
      guard let element = value(depth: depth + 1) else { return nil }
      elements.append(element)
      skipSpace()
      if take("]") { return .array(elements) }
      guard take(",") else { return nil }
      skipSpace()
      if take("]") { return .array(elements) }
    }
  }

  /// A string from its opening quote: escapes resolved, UTF-8 checked.
  mutating func string() -> String? {
    at += 1
    var utf8: [UInt8] = []
    while at < bytes.count {
      let byte = bytes[at]
      at += 1
      switch byte {
      case UInt8(ascii: "\""):
        return String(validating: utf8, as: UTF8.self)
      case UInt8(ascii: "\\"):
        guard at < bytes.count else { return nil }
        let escape = bytes[at]
        at += 1
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
        case UInt8(ascii: "b"): utf8.append(0x08)
        case UInt8(ascii: "f"): utf8.append(0x0C)
        case UInt8(ascii: "n"): utf8.append(0x0A)
        case UInt8(ascii: "r"): utf8.append(0x0D)
        case UInt8(ascii: "t"): utf8.append(0x09)
        case UInt8(ascii: "u"):
          guard let scalar = escapedScalar() else { return nil }
          utf8.append(contentsOf: String(Character(scalar)).utf8)
        default: return nil
        }
      case 0..<0x20: return nil
      default: utf8.append(byte)
      }
    }
    return nil
  }

  /// The scalar of a `\uXXXX` escape whose `\u` was read, a surrogate
  /// pair's second half included; nil for a lone surrogate.
  mutating func escapedScalar() -> Unicode.Scalar? {
    guard let high = hexQuad() else { return nil }
    guard (0xD800..<0xDC00).contains(high) else { return Unicode.Scalar(high) }
    guard take("\\u"), let low = hexQuad(), (0xDC00..<0xE000).contains(low) else { return nil }
    return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
  }

  mutating func hexQuad() -> UInt32? {
    guard bytes.count - at >= 4 else { return nil }
    var value: UInt32 = 0
    for _ in 0..<4 {
      guard let digit = hexDigit(bytes[at]) else { return nil }
      value = value << 4 | digit
      at += 1
    }
    return value
  }

  func hexDigit(_ byte: UInt8) -> UInt32? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
    case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
    case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
    default: nil
    }
  }

  /// A number as the grammar has it: `-`, digits without a leading zero,
  /// then an optional fraction and exponent.
  mutating func number() -> JSONValue? {
    let start = at
    func digits() -> Int {
      let first = at
      while at < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[at]) {
        at += 1
      }
      return at - first
    }
    _ = take("-")
    let whole = at
    guard digits() > 0, bytes[whole] != UInt8(ascii: "0") || at - whole == 1 else { return nil }
    var integral = true
    if take(".") {
      integral = false
      guard digits() > 0 else { return nil }
    }
    if at < bytes.count, bytes[at] == UInt8(ascii: "e") || bytes[at] == UInt8(ascii: "E") {
      at += 1
      integral = false
      if !take("+") { _ = take("-") }
      guard digits() > 0 else { return nil }
    }
    let text = String(decoding: bytes[start..<at], as: UTF8.self)
    if integral, let integer = Int64(text) { return .integer(integer) }
    guard let number = Double(text), number.isFinite else { return nil }
    return .number(number)
  }
}
