import Foundation
import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// Writing to the terminal: machine output alone on stdout, messages on stderr.
///
/// Every line printed through ``line(_:)`` and ``error(_:)`` is one line
/// with no control characters: values echoed in it (a path, a key, an
/// argument, a server's words) are escaped here, once for every caller
/// (``MessageText/escaped(_:)``: `\n`, `\t`, `\r`, `\xHH`). JSON is exact
/// and escaped by JSON's own rules.
enum Output {
  /// Prints `text` and a newline on standard output, its control
  /// characters escaped.
  static func line(_ text: String) {
    write(Array((MessageText.escaped(text) + "\n").utf8), to: 1)
  }

  /// Lines for standard output, each as ``line(_:)`` prints it, written
  /// in blocks of 64 KiB: a listing of a million objects makes a few
  /// hundred writes into a pipe, not a million. Call ``flush()`` at the end.
  struct Lines {
    private var bytes: [UInt8] = []

    mutating func line(_ text: String) {
      bytes += (MessageText.escaped(text) + "\n").utf8
      if bytes.count >= 1 << 16 { flush() }
    }

    mutating func flush() {
      guard !bytes.isEmpty else { return }
      Output.write(bytes, to: 1)
      bytes.removeAll(keepingCapacity: true)
    }
  }

  /// Prints `text` as it is on standard output: Trove's own text of
  /// several lines (help, JSON), or output a program must get exactly
  /// (`trove path`, like `realpath`).
  static func raw(_ text: String) {
    write(Array(text.utf8), to: 1)
  }

  /// Whether `-q`/`--quiet` was given: warnings are not printed.
  nonisolated(unsafe) static var quiet = false

  /// Prints `trove: warning: TEXT` on standard error, unless `--quiet`.
  /// A warning says what went otherwise than asked while the command still
  /// succeeded (copied, not cloned; a leftover left in place; a repair
  /// made on the way); errors are never silenced.
  static func warning(_ text: String) {
    if !quiet { error("trove: warning: " + text) }
  }

  /// Prints `text` and a newline on standard error, its control
  /// characters escaped; a progress line drawn there is erased first.
  static func error(_ text: String) {
    ProgressLine.eraseForMessage()
    write(Array((MessageText.escaped(text) + "\n").utf8), to: 2)
  }

  /// The status a closed standard output ends the command with: that of
  /// SIGPIPE (141) for commands whose output is data, 0 for listings
  /// (`trove ls | head -1`), as git does.
  nonisolated(unsafe) static var closedPipeStatus = ExitStatus.brokenPipe

  /// Ends the command quietly because standard output was closed (a pipe
  /// whose reader left): there is nobody left to tell.
  static func closedPipe() -> Never { exit(closedPipeStatus) }

  /// Writes all of `bytes` to `fd`. A closed standard output ends the
  /// command (``closedPipe()``); another failure to write it is said on
  /// stderr once, exit 74.
  fileprivate static func write(_ bytes: [UInt8], to fd: Int32) {
    bytes.withUnsafeBytes { raw in
      var offset = 0
      while offset < raw.count {
        let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
        if n < 0 && errno == EINTR { continue }
        if n <= 0 {
          guard fd == 1 else { return }
          if n < 0 && errno == EPIPE { closedPipe() }
          let reason = n < 0 ? String(cString: strerror(errno)) : "nothing was written"
          error("Error: cannot write '<output>': \(reason)")
          exit(ExitStatus.ioError)
        }
        offset += n
      }
    }
  }

  /// Prints `value` as JSON (sorted keys, pretty) on standard output.
  static func json(_ value: some Encodable) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    // Our values are plain structs of numbers and strings: encoding cannot fail.
    let data = (try? encoder.encode(value)) ?? Data("null".utf8)
    // JSONEncoder escapes U+0000–U+001F; DEL, the C1 controls and the
    // characters that reorder text it leaves raw, and they can only sit
    // inside strings: \u escapes keep them exact.
    var json = ""
    for scalar in String(decoding: data, as: UTF8.self).unicodeScalars {
      if (0x7F...0x9F).contains(scalar.value) || MessageText.isLayoutCharacter(scalar) {
        let hex = String(scalar.value, radix: 16)
        json += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
      } else {
        json.unicodeScalars.append(scalar)
      }
    }
    raw(json + "\n")
  }

  /// A count and its noun, singular or plural: `1 entry`, `2 entries`,
  /// `0 objects`. `plural` defaults to `singular` + "s".
  static func count(_ n: some BinaryInteger, _ singular: String, _ plural: String? = nil)
    -> String
  {
    "\(n) " + (n == 1 ? singular : plural ?? singular + "s")
  }

  /// A byte count for people: `512 B`, `1.5 KiB`, `3.2 GiB`.
  static func size(_ bytes: Int64) -> String { CachePolicy.Quantities.formatSize(bytes) }

  /// An index time (nanoseconds since 1970) as ISO 8601 in UTC.
  static func time(_ nanoseconds: Int64) -> String {
    time(Date(timeIntervalSince1970: Double(nanoseconds) / 1e9))
  }

  /// A date as ISO 8601 in UTC.
  static func time(_ date: Date) -> String { date.formatted(.iso8601) }
}
