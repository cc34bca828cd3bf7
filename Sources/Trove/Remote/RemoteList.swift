import Foundation

/// The remotes a store uses, in the order they are tried, as its
/// `remotes.json` holds them (see Docs/OnDiskFormat.md). Written whole,
/// atomically, as `config.json` is.
struct RemoteList: Sendable, Equatable {
  var remotes: [RemoteSpec] = []

  /// The file's name in the store's root.
  static let fileName = "remotes.json"
  /// The format this build writes and the newest it reads.
  static let currentFormat = 1

  /// The file's bytes: `{"format": 1, "remotes": [...]}`, sorted keys.
  func encoded() -> [UInt8] {
    struct File: Encodable {
      var format: Int
      var remotes: [RemoteSpec]
    }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    return Array(
      (try? encoder.encode(File(format: Self.currentFormat, remotes: remotes))) ?? Data())
      + [0x0A]
  }

  /// Reads the file's bytes; each remote is validated as `remote add`
  /// validates it.
  ///
  /// - Throws: `.unsupportedFormat` for a newer format, `.invalidConfig`
  ///   naming the file for anything that cannot be used.
  static func decode(_ bytes: [UInt8], path: String) throws(TroveError) -> RemoteList {
    struct File: Decodable {
      var format: Int
      var remotes: [RemoteSpec]
    }
    guard let file = try? JSONDecoder().decode(File.self, from: Data(bytes)) else {
      throw TroveError(
        .invalidConfig,
        "'\(path)' is not a remotes file (expected {\"format\": 1, \"remotes\": [...]}); fix or remove it",
        path: path)
    }
    guard file.format <= currentFormat else {
      throw TroveError(
        .unsupportedFormat,
        "'\(path)' has format \(file.format); this trove reads format \(currentFormat)", path: path)
    }
    var seen: Set<String> = []
    for remote in file.remotes {
      do throws(TroveError) {
        _ = try remote.validated()
      } catch {
        throw TroveError(
          .invalidConfig, "'\(path)': \(error.message)", path: path, remedy: error.remedy)
      }
      guard seen.insert(remote.name).inserted else {
        throw TroveError(
          .invalidConfig, "'\(path)' names remote '\(remote.name)' twice", path: path)
      }
    }
    return RemoteList(remotes: file.remotes)
  }
}
