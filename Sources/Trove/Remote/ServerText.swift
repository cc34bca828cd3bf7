/// Text a remote server sent (a Redis error line, a reply that makes no
/// sense, libcurl's account of an HTTP exchange, a layout record's
/// fields), made fit for a one-line message: control characters escaped as
/// ``MessageText/escaped(_:)`` does, and cut to ``limit`` characters, so a
/// hostile server can neither split the line, reach the terminal raw, nor
/// flood it.
enum ServerText {
  /// The most characters of a server's text a message quotes.
  static let limit = 200

  /// `text` escaped, and cut to ``limit`` characters (then ending in `…`).
  /// O(n) in the part kept.
  static func excerpt(_ text: some StringProtocol) -> String {
    let escaped = MessageText.escaped(String(text.prefix(limit + 1)))
    guard escaped.count > limit else { return escaped }
    return String(escaped.prefix(limit)) + "…"
  }

  /// `bytes` as text (invalid UTF-8 shown as `\xHH`), cut as
  /// ``excerpt(_:)`` does. O(``limit``).
  static func excerpt(bytes: some Collection<UInt8>) -> String {
    excerpt(MessageText.escaped(bytes: bytes.prefix(limit * 4)))
  }
}
