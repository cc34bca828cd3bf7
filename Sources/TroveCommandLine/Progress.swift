import Foundation
import Synchronization
import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// The progress line of a long command on a terminal's stderr:
/// `trove: LABEL  DONE / TOTAL  RATE  M:SS left`, redrawn in place (`\r`,
/// the line, `ESC [K`) at most every 100 ms and erased when the work ends
/// or before any message is printed (``Output`` asks). Never on stdout.
///
/// Shown only when stderr is a terminal and neither `-q`/`--quiet` nor
/// `--json` is given (``start(_:unit:total:for:)`` returns nil otherwise,
/// and the work runs without a handler). At most one is shown at a time.
/// Nothing is drawn before the first interval has passed, so quick work
/// leaves no trace. `TROVE_PROGRESS_INTERVAL_MS` sets the interval, for
/// tests only (0: draw at every report).
final class ProgressLine: Sendable {
  private struct State {
    var label: String
    var unit: ProgressReport.Unit
    var completed: Int64 = 0
    var total: Int64?
    let started = ContinuousClock.now
    var lastDraw = ContinuousClock.now
    var drawn = false
  }

  private let state: Mutex<State>
  private let interval: Duration

  /// The line on the screen now, if any: ``Output`` erases it before a
  /// message.
  private static let shown = Mutex<ProgressLine?>(nil)

  private init(label: String, unit: ProgressReport.Unit, total: Int64?, interval: Duration) {
    state = Mutex(State(label: label, unit: unit, total: total))
    self.interval = interval
  }

  /// A progress line for `invocation`'s work, counting `unit`s out of
  /// `total` (nil: unknown), or nil when none is shown (stderr not a
  /// terminal, `--quiet`, `--json`). Ends any line shown before.
  static func start(
    _ label: String, unit: ProgressReport.Unit, total: Int64? = nil, for invocation: Invocation
  ) -> ProgressLine? {
    guard isatty(2) == 1, !invocation.flag("--quiet"), !invocation.flag("--json") else {
      return nil
    }
    let progress = ProgressLine(label: label, unit: unit, total: total, interval: drawInterval)
    let previous = shown.withLock { current in
      defer { current = progress }
      return current
    }
    previous?.finish()
    return progress
  }

  /// `TROVE_PROGRESS_INTERVAL_MS` (tests only), else 100 ms.
  private static var drawInterval: Duration {
    let text = EnvironmentVariables.lookUp("TROVE_PROGRESS_INTERVAL_MS") ?? ""
    guard let ms = Int(text), ms >= 0 else { return .milliseconds(100) }
    return .milliseconds(ms)
  }

  /// Hands reports to this line: the library's ``ProgressHandler``.
  var handler: ProgressHandler { { [self] report in update(report) } }

  /// Notes `report` (and a new `label`, if given); redraws the line if the
  /// interval has passed since the last draw. Safe from any thread.
  func update(_ report: ProgressReport, label: String? = nil) {
    state.withLock { s in
      s.completed = report.completed
      s.total = report.total
      s.unit = report.unit
      if let label { s.label = label }
      let now = ContinuousClock.now
      guard now - s.lastDraw >= interval else { return }
      s.lastDraw = now
      s.drawn = true
      Self.write("\r" + Self.text(s, now: now) + "\u{1B}[K")
    }
  }

  /// Counts one more item done (``ProgressReport/Unit/items``).
  func advance() {
    let report = state.withLock { s in
      ProgressReport(unit: .items, completed: s.completed + 1, total: s.total)
    }
    update(report)
  }

  /// Erases the line, if drawn, and stops showing it.
  func finish() {
    erase()
    Self.shown.withLock { current in
      if current === self { current = nil }
    }
  }

  /// Erases the line if it is drawn; the next update draws it again.
  private func erase() {
    state.withLock { s in
      guard s.drawn else { return }
      s.drawn = false
      Self.write("\r\u{1B}[K")
    }
  }

  /// Erases the line shown now, if any, so a message starts on a clean
  /// line. Called by ``Output`` before it writes to stderr.
  static func eraseForMessage() {
    shown.withLock { $0?.erase() }
  }

  /// `trove: LABEL  DONE / TOTAL  RATE  M:SS left`.
  private static func text(_ s: State, now: ContinuousClock.Instant) -> String {
    let elapsed = now - s.started
    let seconds = max(
      0.001, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    let rate = Double(s.completed) / seconds
    func amount(_ n: Int64) -> String { s.unit == .bytes ? Output.size(n) : "\(n)" }
    var line = "trove: " + MessageText.escaped(shortened(s.label))
    line += "  " + amount(s.completed)
    if let total = s.total { line += " / " + amount(total) }
    if s.unit == .items { line += " objects" }
    line +=
      s.unit == .bytes
      ? "  \(Output.size(Int64(rate)))/s" : "  " + String(format: "%.1f/s", rate)
    if let total = s.total, rate > 0, total > s.completed {
      let left = Int(Double(total - s.completed) / rate)
      line += String(format: "  %d:%02d left", left / 60, left % 60)
    }
    return line
  }

  /// A label of at most 32 characters, its middle elided: the line fits
  /// an 80-column terminal, so `\r` returns to its start.
  private static func shortened(_ label: String) -> String {
    guard label.count > 32 else { return label }
    return String(label.prefix(15)) + "…" + String(label.suffix(16))
  }

  /// Writes `text` to stderr as it is; a failure is ignored (a progress
  /// line is not worth failing for).
  private static func write(_ text: String) {
    let bytes = Array(text.utf8)
    bytes.withUnsafeBytes { raw in
      var offset = 0
      while offset < raw.count {
        let n = Glibc.write(2, raw.baseAddress! + offset, raw.count - offset)
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return }
        offset += n
      }
    }
  }
}
