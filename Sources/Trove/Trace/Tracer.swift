/// How the store tells ``StoreConfiguration/trace`` of its decisions.
///
/// Off (no hook), a call costs one check of an optional: the text of an
/// event is made only when a hook will receive it, so the seams can say
/// what and why in full. Called as a function:
/// `store.trace(.publish, "stored \(digest)", why: "new object", duration: elapsed)`.
struct Tracer: Sendable {
  let hook: (@Sendable (TraceEvent) -> Void)?

  init(_ hook: (@Sendable (TraceEvent) -> Void)?) { self.hook = hook }

  /// Whether events are received: measure a duration only then.
  var isEnabled: Bool { hook != nil }

  /// Tells the hook, if any, that `what` was done at `seam`, and why.
  @inline(__always)
  func callAsFunction(
    _ seam: TraceEvent.Seam, _ what: @autoclosure () -> String,
    why: @autoclosure () -> String, duration: Duration? = nil
  ) {
    guard let hook else { return }
    hook(TraceEvent(seam: seam, what: what(), why: why(), duration: duration))
  }

  /// Now, when events are received (to measure a duration); else nil.
  var now: ContinuousClock.Instant? { hook == nil ? nil : .now }

  /// The time since `start`, nil when there is none.
  func elapsed(since start: ContinuousClock.Instant?) -> Duration? {
    start.map { .now - $0 }
  }
}
