import Foundation

/// One decision the store made, told to ``StoreConfiguration/trace``: what
/// it did at one of its seams, why, and how long it took — so a user can
/// answer "why was this evicted?" or "why did this download again?".
public struct TraceEvent: Sendable, Hashable, CustomStringConvertible {
  /// Where in the store the decision was made.
  public enum Seam: String, Sendable, Hashable, CaseIterable {
    /// An object stored (or found stored already).
    case publish
    /// Objects removed: evicted by a sweep (expired, over the budget) or
    /// removed on request.
    case remove
    /// Space made on a volume short of it (below `min-free`, or full).
    case pressure
    /// A fetch served from the store, revalidated, or downloaded.
    case fetch
    /// A remote read through, skipped by its circuit breaker, uploaded to,
    /// or failing.
    case remote
  }

  /// When it was decided.
  public var time: Date
  /// The process that decided it.
  public var processID: Int32
  /// Where.
  public var seam: Seam
  /// What was done, naming the object, key or remote (`evicted xxh128:…`).
  public var what: String
  /// Why (`expired: last used 31 days ago, max-age is 30d`).
  public var why: String
  /// How long it took, when that was measured.
  public var duration: Duration?

  public init(
    time: Date = Date(), processID: Int32 = ProcessInfo.processInfo.processIdentifier, seam: Seam,
    what: String, why: String,
    duration: Duration? = nil
  ) {
    self.time = time
    self.processID = processID
    self.seam = seam
    self.what = what
    self.why = why
    self.duration = duration
  }

  /// The event as one line of a trace file, without its newline: time
  /// (UTC, ISO 8601 with milliseconds), process id, seam, what, why and
  /// duration, separated by tabs (`-` for no duration); a tab or line
  /// break inside a field becomes a space.
  public var description: String {
    let took = duration.map { String(format: "%.3fms", $0.seconds * 1e3) } ?? "-"
    let fields = [
      time.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)),
      String(processID), seam.rawValue, Self.oneLine(what), Self.oneLine(why), took,
    ]
    return fields.joined(separator: "\t")
  }

  private static func oneLine(_ text: String) -> String {
    guard text.contains(where: { $0 == "\t" || $0.isNewline }) else { return text }
    return String(text.map { $0 == "\t" || $0.isNewline ? " " : $0 })
  }
}
