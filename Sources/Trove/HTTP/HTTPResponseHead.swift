/// The response a transfer ended with (the last one, after redirects).
struct HTTPResponseHead: Sendable {
  /// The status code (200, 206, 304, 404…); 0 when no response came.
  var status = 0
  /// The status line's reason phrase ("Not Found"), if the server sent one.
  var reason = ""
  /// Header fields in order, names lowercased.
  var fields: [(name: String, value: String)] = []

  /// The value of `name` (lowercase); several fields of one name are
  /// joined with ", " as HTTP allows.
  func field(_ name: String) -> String? {
    let values = fields.filter { $0.name == name }.map(\.value)
    return values.isEmpty ? nil : values.joined(separator: ", ")
  }

  /// The value of the last field named `name` (lowercase): for a field
  /// that holds one value, where joining several would make none.
  func lastField(_ name: String) -> String? {
    fields.last { $0.name == name }?.value
  }

  /// The distinct values of its `Content-Length` fields (a field may
  /// list several, comma-separated): more than one means the length is
  /// not known, and the response cannot be trusted.
  var contentLengths: Set<String> {
    var lengths = Set<String>()
    forEachContentLength { lengths.insert(String($0)) }
    return lengths
  }

  /// The body's length as its one `Content-Length` says; nil when there
  /// is none, or several that disagree, or one that is not a number.
  var announcedLength: Int64? {
    // Read for every response, several times: no set, no strings.
    var first: Substring?
    var agree = true
    forEachContentLength { length in
      if let first { agree = agree && first == length } else { first = length }
    }
    guard agree, let first else { return nil }
    return Int64(first).flatMap { $0 >= 0 ? $0 : nil }
  }

  /// Calls `body` with each value its `Content-Length` fields list,
  /// without the whitespace around it.
  private func forEachContentLength(_ body: (Substring) -> Void) {
    for field in fields where field.name == "content-length" {
      for value in field.value.split(separator: ",") { body(Self.withoutWhitespace(value)) }
    }
  }

  /// Takes one line of a response's head as libcurl hands it over, line
  /// ending included. A status line (`HTTP/1.1 200 OK`) starts a new
  /// response — after a redirect or an interim 1xx — dropping the fields
  /// before it. A field line adds its name, lowercased, and its value
  /// without the optional whitespace (spaces and tabs) around it, as
  /// RFC 9110 says; a line that starts with whitespace continues the
  /// previous field's value (the obsolete line folding of RFC 9112). The
  /// empty line that ends the head, and anything else, is ignored.
  mutating func add(line bytes: UnsafeRawBufferPointer) {
    // Split in bytes: every delimiter is ASCII, and a field's name is a
    // token, lowercased in ASCII.
    var end = bytes.count
    while end > 0, bytes[end - 1] == Self.cr || bytes[end - 1] == Self.lf { end -= 1 }
    let line = UnsafeRawBufferPointer(rebasing: bytes[..<end])
    guard let first = line.first else { return }
    if line.starts(with: "HTTP/".utf8) {
      let text = Substring(String(decoding: line, as: UTF8.self))
      let parts = text.split(separator: " ", maxSplits: 2)
      self = HTTPResponseHead(
        status: parts.count > 1 ? Int(parts[1]) ?? 0 : 0,
        reason: parts.count > 2 ? String(Self.withoutWhitespace(parts[2])) : "")
    } else if first == Self.space || first == Self.tab {
      guard let previous = fields.indices.last else { return }
      let more = Self.trimmed(line)
      guard !more.isEmpty else { return }
      fields[previous].value += (fields[previous].value.isEmpty ? "" : " ") + more
    } else if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
      let name = String(
        unsafeUninitializedCapacity: colon,
        initializingUTF8With: { name in
          for i in 0..<colon {
            let byte = line[i]
            name[i] = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
          }
          return colon
        })
      fields.append((name, Self.trimmed(UnsafeRawBufferPointer(rebasing: line[(colon + 1)...]))))
    }
  }

  private static let cr = UInt8(ascii: "\r")
  private static let lf = UInt8(ascii: "\n")
  private static let space = UInt8(ascii: " ")
  private static let tab = UInt8(ascii: "\t")

  /// `bytes` without the spaces and tabs around them (HTTP's `OWS`), as text.
  private static func trimmed(_ bytes: UnsafeRawBufferPointer) -> String {
    var start = 0
    var end = bytes.count
    while start < end, bytes[start] == space || bytes[start] == tab { start += 1 }
    while end > start, bytes[end - 1] == space || bytes[end - 1] == tab { end -= 1 }
    return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
  }

  /// `text` without the spaces and tabs around it (HTTP's `OWS`).
  private static func withoutWhitespace(_ text: Substring) -> Substring {
    let isWhitespace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
    guard let start = text.firstIndex(where: { !isWhitespace($0) }),
      let end = text.lastIndex(where: { !isWhitespace($0) })
    else { return "" }
    return text[start...end]
  }
}
