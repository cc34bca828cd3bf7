import Foundation

/// What a request's `Range` header asks of a body of a known length.
enum ByteRange: Equatable {
  /// The whole body (no header, several ranges, or one that is not
  /// `bytes=`: ignored, as RFC 9110 allows).
  case whole
  /// Bytes `start` to `end`, inclusive.
  case part(start: Int64, end: Int64)
  /// A range that starts past the end (416).
  case unsatisfiable

  /// The range `header` asks of `length` bytes.
  init(header: String?, length: Int64) {
    guard let header, header.hasPrefix("bytes=") else {
      self = .whole
      return
    }
    let spec = header.dropFirst(6).trimmingCharacters(in: .whitespaces)
    guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else {
      self = .whole
      return
    }
    let first = spec[..<dash]
    let last = spec[spec.index(after: dash)...]
    func number(_ text: Substring) -> Int64? {
      text.isEmpty || !text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) ? nil : Int64(text)
    }
    if first.isEmpty {
      // A suffix: the last N bytes.
      guard let count = number(last) else {
        self = .whole
        return
      }
      guard count > 0, length > 0 else {
        self = .unsatisfiable
        return
      }
      self = .part(start: max(0, length - count), end: length - 1)
      return
    }
    guard let start = number(first) else {
      self = .whole
      return
    }
    var end = length - 1
    if !last.isEmpty {
      guard let given = number(last), given >= start else {
        self = .whole
        return
      }
      end = min(given, length - 1)
    }
    self = start < length ? .part(start: start, end: end) : .unsatisfiable
  }
}
