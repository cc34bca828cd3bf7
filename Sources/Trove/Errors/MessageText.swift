/// Text made fit for a one-line message on a terminal: values a message
/// echoes (an argument, a path, a key, a server's words) can hold control
/// characters or bytes that are not UTF-8, which would split the line or
/// reach the terminal as commands.
///
/// One convention everywhere: a tab, newline and carriage return become
/// `\t`, `\n` and `\r`; every other control character (U+0000–U+001F,
/// U+007F–U+009F), every bidirectional formatting character, which
/// reorders the text around it on screen (U+061C, U+200E, U+200F,
/// U+202A–U+202E, U+2066–U+2069), and the line and paragraph separators
/// (U+2028, U+2029) become `\xHH` per UTF-8 byte (ESC is `\x1b`, U+009B
/// is `\xc2\x9b`, U+202E is `\xe2\x80\xae`); a byte that is not part of valid UTF-8 becomes `\xHH`
/// (`\xff`). Everything else, the backslash included, is left as it is, so
/// escaping is idempotent: text already escaped passes through unchanged,
/// and every layer that prints may escape without doubling backslashes. The
/// price: `\n` in a message may stand for a newline or for a backslash and
/// an `n`; JSON output is the exact form.
public enum MessageText {
  /// `text` with its control characters escaped: one line, safe for a
  /// terminal. O(n).
  public static func escaped(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: needsEscape) else { return text }
    var out = ""
    out.reserveCapacity(text.utf8.count + 8)
    for scalar in text.unicodeScalars {
      if needsEscape(scalar) {
        append(scalar, to: &out)
      } else {
        out.unicodeScalars.append(scalar)
      }
    }
    return out
  }

  /// `text` escaped as ``escaped(_:)`` does and cut to its first
  /// `limit` characters (then `…`): a value from untrusted input (an
  /// archive's member name) that may be long. O(n).
  /// A count and its noun, singular or plural: `1 object`, `2 objects`,
  /// `0 pins`. `plural` defaults to `singular` + "s".
  static func count(_ n: some BinaryInteger, _ singular: String, _ plural: String? = nil)
    -> String
  {
    "\(n) " + (n == 1 ? singular : plural ?? singular + "s")
  }

  static func excerpt(_ text: String, limit: Int = 120) -> String {
    let short = text.count > limit ? String(text.prefix(limit)) + "…" : text
    return escaped(short)
  }

  /// Raw bytes (a command-line argument, a file name) as text: valid UTF-8
  /// decoded and escaped as ``escaped(_:)`` does, each byte that is not
  /// part of valid UTF-8 shown as `\xHH`. O(n).
  public static func escaped(bytes: some Collection<UInt8>) -> String {
    let bytes = Array(bytes)
    var out = ""
    var i = 0
    while i < bytes.count {
      let length = wellFormedLength(bytes, at: i)
      guard length > 0 else {
        out += hex(bytes[i])
        i += 1
        continue
      }
      let scalar = String(decoding: bytes[i..<i + length], as: UTF8.self).unicodeScalars.first!
      if needsEscape(scalar) {
        append(scalar, to: &out)
      } else {
        out.unicodeScalars.append(scalar)
      }
      i += length
    }
    return out
  }

  /// The length of the well-formed UTF-8 sequence starting at `i`, or 0
  /// when the byte there does not start one (Unicode Table 3-7: no
  /// overlong forms, no surrogates, nothing above U+10FFFF).
  private static func wellFormedLength(_ bytes: [UInt8], at i: Int) -> Int {
    let first = bytes[i]
    func continuation(_ k: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool {
      i + k < bytes.count && range.contains(bytes[i + k])
    }
    switch first {
    case 0x00...0x7F: return 1
    case 0xC2...0xDF: return continuation(1) ? 2 : 0
    case 0xE0: return continuation(1, 0xA0...0xBF) && continuation(2) ? 3 : 0
    case 0xE1...0xEC, 0xEE...0xEF: return continuation(1) && continuation(2) ? 3 : 0
    case 0xED: return continuation(1, 0x80...0x9F) && continuation(2) ? 3 : 0
    case 0xF0: return continuation(1, 0x90...0xBF) && continuation(2) && continuation(3) ? 4 : 0
    case 0xF1...0xF3: return continuation(1) && continuation(2) && continuation(3) ? 4 : 0
    case 0xF4: return continuation(1, 0x80...0x8F) && continuation(2) && continuation(3) ? 4 : 0
    default: return 0
    }
  }

  /// `value` in single quotes, escaped as ``escaped(_:)`` does: the form a
  /// message gives a path, key or argument it echoes (`'a\nb'`).
  public static func quoted(_ value: String) -> String {
    "'" + escaped(value) + "'"
  }

  /// Whether `scalar` is a control character (Unicode category Cc) or
  /// one of ``isLayoutCharacter(_:)``'s.
  private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
    scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value <= 0x9F)
      || isLayoutCharacter(scalar)
  }

  /// Whether `scalar` changes how the text around it is laid out rather
  /// than being shown: a bidirectional formatting character (which can
  /// make a name read as another) or a line or paragraph separator.
  public static func isLayoutCharacter(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.value {
    case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: true
    default: false
    }
  }

  private static func append(_ scalar: Unicode.Scalar, to out: inout String) {
    switch scalar {
    case "\t": out += "\\t"
    case "\n": out += "\\n"
    case "\r": out += "\\r"
    default:
      for byte in String(scalar).utf8 { out += hex(byte) }
    }
  }

  private static func hex(_ byte: UInt8) -> String {
    let digits = Array("0123456789abcdef")
    return "\\x" + String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 0xF)])
  }
}
