import Foundation
import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// Writing to the terminal: machine output alone on stdout, messages on stderr.
enum Output {
  /// Prints `text` and a newline on standard output.
  static func line(_ text: String, terminator: String = "\n") {
    write(Array((text + terminator).utf8), to: 1)
  }

  /// Prints `text` and a newline on standard error.
  static func error(_ text: String) {
    write(Array((text + "\n").utf8), to: 2)
  }

  /// Writes all of `bytes` to `fd`. If standard output is gone (a closed
  /// pipe), there is nobody left to tell: exit quietly with EX_IOERR.
  private static func write(_ bytes: [UInt8], to fd: Int32) {
    bytes.withUnsafeBytes { raw in
      var offset = 0
      while offset < raw.count {
        let n = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
        if n < 0 && errno == EINTR { continue }
        if n <= 0 {
          if fd == 1 { exit(ExitStatus.ioError) }
          return
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
    line(String(decoding: data, as: UTF8.self))
  }

  /// A byte count for people: `512 B`, `1.5 KiB`, `3.2 GiB`.
  static func size(_ bytes: Int64) -> String { Quantities.formatSize(bytes) }

  /// An index time (nanoseconds since 1970) as ISO 8601 in UTC.
  static func time(_ nanoseconds: Int64) -> String {
    let date = Date(timeIntervalSince1970: Double(nanoseconds) / 1e9)
    return date.formatted(.iso8601)
  }
}
