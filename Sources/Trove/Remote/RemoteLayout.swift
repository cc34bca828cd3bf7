import Foundation

/// How a remote stores its blobs, recorded on the remote itself
/// (`{base}/trove-remote.json` over WebDAV, the key `trove:remote` in
/// Redis) by the first writer, so that every client reads it the same way.
/// See Docs/OnDiskFormat.md.
public struct RemoteLayout: Sendable, Hashable, Codable {
  /// The layout's format number.
  public var format: Int
  /// The hash that names blobs.
  public var hash: String
  /// Whether blobs are stored compressed: `"none"` (the only form this
  /// build writes).
  public var compression: String

  /// The format this build writes and the newest it reads.
  static let currentFormat = 1

  /// The layout this build writes.
  public static let current = RemoteLayout(
    format: currentFormat, hash: "xxh128", compression: "none")

  /// The record's bytes: sorted, pretty JSON and a newline.
  func encoded() -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    return Array((try? encoder.encode(self)) ?? Data()) + [0x0A]
  }

  /// Reads a layout record (`source` names it in messages).
  ///
  /// - Throws: `.unsupportedFormat` when it is not a layout record, or
  ///   one this build cannot use (a newer format, another hash, compressed blobs).
  static func decode(_ bytes: [UInt8], source: String) throws(TroveError) -> RemoteLayout {
    guard let layout = try? JSONDecoder().decode(RemoteLayout.self, from: Data(bytes)) else {
      throw TroveError(
        .unsupportedFormat, "\(source) is not a Trove remote layout record", value: source)
    }
    guard layout.format <= currentFormat, layout.hash == "xxh128", layout.compression == "none"
    else {
      throw TroveError(
        .unsupportedFormat,
        "\(source) has format \(layout.format), hash \(ServerText.excerpt(layout.hash)), compression \(ServerText.excerpt(layout.compression)); this trove uses format 1, xxh128, none",
        value: source)
    }
    return layout
  }
}
