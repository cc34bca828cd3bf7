import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// One line per request (`--access-log FILE|-`): the common log format of
/// web servers, or one JSON object (`--access-log-format json`). A line
/// holds the client's address, the method, the path (escaped, never the
/// query), the status and the body's length — no header, so no token.
public final class AccessLog: Sendable {
  /// The form of a line.
  public enum Format: String, Sendable {
    /// `ADDR - - [DATE] "METHOD PATH VERSION" STATUS BYTES`.
    case commonLogFormat = "clf"
    /// `{"time":…,"client":…,"method":…,"path":…,"status":…,"bytes":…,"completed":…}`.
    case json
  }

  /// What a line says of a request.
  public struct Entry: Sendable {
    public var client: String
    public var method: String
    public var path: String
    public var version: String
    public var status: Int
    public var bytes: Int64
    /// Whether the response was sent whole (not cut by the client or a failure).
    public var completed: Bool
    /// When the request came.
    public var time: Date
  }

  private let fd: Int32
  private let closes: Bool
  private let format: Format
  private let lock = Mutex(())

  /// A log written to `path` (appended; made 0640 if missing), or to
  /// standard error for `-`.
  public init(path: String, format: Format) throws(ServerError) {
    self.format = format
    if path == "-" {
      fd = 2
      closes = false
      return
    }
    let opened = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o640)
    guard opened >= 0 else {
      throw ServerError(
        .invalidConfiguration,
        "access log '\(path)' cannot be opened: \(String(cString: strerror(errno)))")
    }
    fd = opened
    closes = true
  }

  deinit { if closes { close(fd) } }

  /// Appends `entry`'s line in one write, so lines of concurrent requests
  /// never interleave.
  public func record(_ entry: Entry) {
    let line = Array((format == .json ? json(entry) : commonLogFormat(entry)).utf8) + [0x0A]
    lock.withLock { _ in
      line.withUnsafeBytes { bytes in
        var offset = 0
        while offset < bytes.count {
          let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
          if n < 0, errno == EINTR { continue }
          // A log that cannot be written loses the line, not the request.
          guard n > 0 else { return }
          offset += n
        }
      }
    }
  }

  private func commonLogFormat(_ entry: Entry) -> String {
    let request =
      "\(Self.escaped(entry.method)) \(Self.escaped(entry.path)) \(Self.escaped(entry.version))"
    return
      "\(entry.client) - - [\(Self.utc(entry.time, "%d/%b/%Y:%H:%M:%S +0000"))] \"\(request)\" \(entry.status) \(entry.bytes)"
  }

  private func json(_ entry: Entry) -> String {
    struct Line: Encodable {
      var time: String
      var client: String
      var method: String
      var path: String
      var version: String
      var status: Int
      var bytes: Int64
      var completed: Bool
    }
    let milliseconds = Int(entry.time.timeIntervalSince1970 * 1000) % 1000
    let time =
      Self.utc(entry.time, "%Y-%m-%dT%H:%M:%S.")
      + String(String(1000 + milliseconds).dropFirst()) + "Z"
    let line = Line(
      time: time, client: entry.client, method: entry.method, path: entry.path,
      version: entry.version, status: entry.status, bytes: entry.bytes,
      completed: entry.completed)
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return String(decoding: (try? encoder.encode(line)) ?? Data(), as: UTF8.self)
  }

  /// `date` in UTC as `strftime` writes `format` (the C locale's month
  /// names): no formatter object per line, and safe on any thread.
  static func utc(_ date: Date, _ format: String) -> String {
    var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
    var parts = tm()
    gmtime_r(&seconds, &parts)
    var text = [CChar](repeating: 0, count: 64)
    let count = strftime(&text, text.count, format, &parts)
    return String(decoding: text.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  /// Text as a common-log-format field shows it: printable ASCII, with
  /// `"`, `\` and anything else written as `\xHH`.
  static func escaped(_ text: String) -> String {
    var out = ""
    for byte in text.utf8 {
      if (0x20...0x7E).contains(byte), byte != 0x22, byte != 0x5C {
        out.unicodeScalars.append(Unicode.Scalar(byte))
      } else {
        out += "\\x" + (byte < 16 ? "0" : "") + String(byte, radix: 16)
      }
    }
    return out
  }
}
