import Foundation

/// The settings persisted beside a store in `config.json`, so every process
/// that writes the store uses the same ones.
struct StoreSettings: Codable, Sendable, Equatable {
  /// The on-disk format this store was written in.
  var format: Int

  /// The format this build writes and the newest it reads.
  static let currentFormat = 1

  static let initial = StoreSettings(format: currentFormat)

  func encoded() -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    // Encoding a struct of plain values cannot fail.
    return Array((try? encoder.encode(self)) ?? Data()) + [0x0A]
  }

  static func decode(_ bytes: [UInt8], path: String) throws(TroveError) -> StoreSettings {
    let settings: StoreSettings
    do {
      settings = try JSONDecoder().decode(StoreSettings.self, from: Data(bytes))
    } catch {
      throw TroveError(
        .unsupportedFormat, "cannot read store settings '\(path)': not valid JSON settings",
        path: path)
    }
    guard settings.format <= currentFormat, settings.format >= 1 else {
      throw TroveError(
        .unsupportedFormat,
        "store '\(path)' has format \(settings.format); this trove reads formats 1 to \(currentFormat)",
        path: path)
    }
    return settings
  }
}
