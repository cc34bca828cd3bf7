import Foundation

/// Times for people: how long ago an index time was (`3 days ago`), as
/// `ls` and `show` print them; `--json` keeps ISO 8601 UTC.
enum RelativeTime {
  /// Now, in the index's unit (nanoseconds since 1970).
  static var now: Int64 { Int64(Date().timeIntervalSince1970 * 1e9) }

  /// `just now`, `5 minutes ago`, `1 hour ago`, `3 days ago`, `2 months
  /// ago`, `1 year ago` (whole units, rounded down); `in 2 hours` for a
  /// time still ahead (a lease's end, a clock set back).
  static func describe(_ time: Int64, now: Int64 = RelativeTime.now) -> String {
    let seconds = (now.subtractingReportingOverflow(time).partialValue) / 1_000_000_000
    let span = seconds.magnitude
    guard span >= 60 else { return seconds >= 0 ? "just now" : "in under a minute" }
    let units: [(UInt64, String)] = [
      (365 * 86400, "year"), (30 * 86400, "month"), (7 * 86400, "week"), (86400, "day"),
      (3600, "hour"), (60, "minute"),
    ]
    let (size, name) = units.first { span >= $0.0 } ?? (60, "minute")
    let count = span / size
    let amount = "\(count) \(name)\(count == 1 ? "" : "s")"
    return seconds >= 0 ? amount + " ago" : "in " + amount
  }

  /// ``describe(_:now:)`` of a date.
  static func describe(_ date: Date, now: Int64 = RelativeTime.now) -> String {
    describe(Int64((date.timeIntervalSince1970 * 1e9).rounded()), now: now)
  }
}
