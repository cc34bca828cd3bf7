import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Nanoseconds since 1970 (CLOCK_REALTIME): the index's time unit.
func currentTimeNanoseconds() -> Int64 {
  var ts = timespec()
  clock_gettime(CLOCK_REALTIME, &ts)
  return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

extension Int64 {
  /// `seconds` in nanoseconds, saturating at the bounds of `Int64` (a
  /// setting of a billion years means "forever", never a crash).
  static func nanoseconds(fromSeconds seconds: Int64) -> Int64 {
    seconds.multipliedSaturated(by: 1_000_000_000)
  }

  /// `self * other`, clamped to `Int64`'s range instead of overflowing.
  func multipliedSaturated(by other: Int64) -> Int64 {
    let (value, overflow) = multipliedReportingOverflow(by: other)
    guard overflow else { return value }
    return (self < 0) == (other < 0) ? .max : .min
  }

  /// `self + other`, clamped to `Int64`'s range instead of overflowing.
  func addingSaturated(_ other: Int64) -> Int64 {
    let (value, overflow) = addingReportingOverflow(other)
    guard overflow else { return value }
    return other > 0 ? .max : .min
  }

  /// `self - other`, clamped to `Int64`'s range instead of overflowing.
  func subtractingSaturated(_ other: Int64) -> Int64 {
    let (value, overflow) = subtractingReportingOverflow(other)
    guard overflow else { return value }
    return other < 0 ? .max : .min
  }
}

extension Duration {
  /// The duration in seconds, as a `Double`.
  var seconds: Double {
    Double(components.seconds) + Double(components.attoseconds) / 1e18
  }
}

extension Date {
  /// The index's time (nanoseconds since 1970) as a `Date` (to within
  /// the microsecond a `Double` keeps at this distance from 1970).
  init(nanosecondsSince1970 nanoseconds: Int64) {
    self.init(timeIntervalSince1970: Double(nanoseconds) / 1e9)
  }

  /// The date in the index's unit, nanoseconds since 1970, saturating.
  var nanosecondsSince1970: Int64 {
    let value = (timeIntervalSince1970 * 1e9).rounded()
    guard value.isFinite else { return value < 0 ? .min : .max }
    if value >= 9.2e18 { return .max }
    if value <= -9.2e18 { return .min }
    return Int64(value)
  }
}

extension Duration {
  /// Whole seconds, rounded up (a lease of 1.5 s holds 2 s), saturating.
  var wholeSecondsRoundedUp: Int64 {
    let (seconds, attoseconds) = components
    return attoseconds > 0 ? seconds.addingSaturated(1) : seconds
  }

  /// Nanoseconds, saturating.
  var nanoseconds: Int64 {
    let (seconds, attoseconds) = components
    return seconds.multipliedSaturated(by: 1_000_000_000).addingSaturated(
      attoseconds / 1_000_000_000)
  }
}
