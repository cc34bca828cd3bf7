import Foundation

extension CachePolicy {
  /// Sizes and durations as people write them in settings and on the command
  /// line: `500M`, `10G`, `1.5GiB`, `30d`, `12h`.
  public enum Quantities {
    /// Parses a size: a number with an optional unit. `K`, `M`, `G`, `T` (and
    /// `KB`, `MB`, …) are powers of 1000, as in ccache and SI; `Ki`, `Mi`,
    /// `Gi`, `Ti` (and `KiB`, `MiB`, …) are powers of 1024; `B` or no unit
    /// means bytes. Case is ignored for the letter; fractions are allowed
    /// (`1.5GiB`). Returns nil for anything else or a negative size.
    public static func parseSize(_ text: String) -> Int64? {
      let (number, unit) = split(text)
      guard let value = Double(number), value >= 0, value.isFinite else { return nil }
      let multipliers: [String: Double] = [
        "": 1, "b": 1,
        "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
        "ki": 1024, "kib": 1024, "mi": 1_048_576, "mib": 1_048_576,
        "gi": 1_073_741_824, "gib": 1_073_741_824, "ti": 1_099_511_627_776,
        "tib": 1_099_511_627_776,
      ]
      guard let multiplier = multipliers[unit.lowercased()] else { return nil }
      // Whole numbers exactly (a Double holds only 53 bits): a size read
      // back from config.json is the size written.
      if let whole = Int64(number) {
        let (bytes, overflow) = whole.multipliedReportingOverflow(by: Int64(multiplier))
        return overflow ? nil : bytes
      }
      let bytes = (value * multiplier).rounded()
      guard bytes < 9.2e18 else { return nil }
      return Int64(bytes)
    }

    /// The longest duration a setting or option accepts: 100 years
    /// (`36500d`). Longer means "forever", which every duration setting
    /// spells `none`.
    public static let maximumDuration: Int64 = 36500 * 86400

    /// Parses a duration: a number and a unit, `s`, `m`, `h`, `d` or `w`
    /// (`0` alone is allowed), at most ``maximumDuration``. Returns seconds,
    /// or nil.
    public static func parseDuration(_ text: String) -> Int64? {
      if text == "0" { return 0 }
      let (number, unit) = split(text)
      guard let value = Double(number), value >= 0, value.isFinite else { return nil }
      let multipliers: [String: Double] = [
        "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604_800,
      ]
      guard let multiplier = multipliers[unit.lowercased()] else { return nil }
      let seconds = (value * multiplier).rounded()
      guard seconds <= Double(maximumDuration) else { return nil }
      return Int64(seconds)
    }

    /// A size for people, in binary units: `512 B`, `1.5 KiB`, `3.2 GiB`.
    public static func formatSize(_ bytes: Int64) -> String {
      let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
      var value = Double(bytes)
      var unit = 0
      while abs(value) >= 1024 && unit < units.count - 1 {
        value /= 1024
        unit += 1
      }
      if unit == 0 { return "\(bytes) B" }
      // `%.1f` by integers (a listing prints a million of these): below
      // 2^49 bytes, tenths = value × 10 is exact, and rounding it half to
      // even is what printf does with the same double.
      if bytes > 0 && bytes < 1 << 49 {
        let tenths = Int64((value * 10).rounded(.toNearestOrEven))
        return "\(tenths / 10).\(tenths % 10) \(units[unit])"
      }
      return String(format: "%.1f %@", value, units[unit])
    }

    /// A size setting for people, in the unit system it was most likely
    /// given in: of the binary form ``formatSize(_:)`` prints (`1.5 GiB`)
    /// and the decimal one (`150 MB`), the one that is exact with fewer
    /// decimals — `config set budget 150M` reads back as `150 MB`, not
    /// `143.1 MiB`; `64K` as `64 KB`, `64KiB` as `64.0 KiB` — binary on a tie
    /// or when neither is exact. What it prints parses back with
    /// ``parseSize(_:)`` to the same bytes when it is exact.
    public static func formatSizeSetting(_ bytes: Int64) -> String {
      let binary = formatSize(bytes)
      guard bytes >= 1000 else { return binary }
      /// Decimals (0 to 3) `bytes` ÷ `size` needs to be exact; nil if more.
      func decimals(_ size: Int64) -> Int? {
        var scale: Int64 = 1
        for d in 0...3 {
          let (scaled, overflow) = (bytes % size).multipliedReportingOverflow(by: scale)
          if !overflow && scaled % size == 0 { return d }
          scale *= 10
        }
        return nil
      }
      var binarySize: Int64 = 1
      while binarySize <= Int64.max / 1024, bytes / binarySize >= 1024 { binarySize *= 1024 }
      let binaryDecimals = parseSize(binary) == bytes ? decimals(binarySize) ?? 1 : Int.max
      let units = ["B", "KB", "MB", "GB", "TB"]
      var unit = 0
      var size: Int64 = 1
      while unit < units.count - 1, bytes / size >= 1000 {
        size *= 1000
        unit += 1
      }
      guard let places = decimals(size), places < binaryDecimals else { return binary }
      let value = Double(bytes) / Double(size)
      return String(format: "%.\(places)f %@", value, units[unit])
    }

    /// A duration for people: the largest whole unit, e.g. `30d`, `12h`,
    /// `90s`.
    public static func formatDuration(_ seconds: Int64) -> String {
      for (unit, size) in [("w", Int64(604_800)), ("d", 86400), ("h", 3600), ("m", 60)]
      where seconds >= size && seconds % size == 0 {
        return "\(seconds / size)\(unit)"
      }
      return "\(seconds)s"
    }

    /// `text` without the spaces and tabs around it (what
    /// `CharacterSet.whitespaces` holds), in the standard library: Foundation's
    /// trim bridges through `NSString`.
    static func trimmed(_ text: Substring) -> Substring {
      func isSpace(_ c: Character) -> Bool { c.isWhitespace && !c.isNewline }
      guard let first = text.firstIndex(where: { !isSpace($0) }),
        let last = text.lastIndex(where: { !isSpace($0) })
      else { return text[text.endIndex...] }
      return text[first...last]
    }

    private static func split(_ text: String) -> (Substring, Substring) {
      let trimmed = Self.trimmed(Substring(text))
      let end =
        trimmed.firstIndex { !($0.isNumber || $0 == ".") } ?? trimmed.endIndex
      return (trimmed[..<end], trimmed[end...].drop { $0 == " " })
    }
  }
}
