import Foundation

/// What a fetch tells the trace (``StoreConfiguration/trace``): why it
/// served the cached copy, or why it asked the server.
extension Fetcher {
  /// The trace's verb for a fetch served from `source`.
  static func traceVerb(_ source: FetchSource) -> String {
    switch source {
    case .cache: return "served"
    case .revalidated: return "revalidated"
    case .network: return "downloaded"
    case .resumed: return "resumed"
    case .delta: return "rebuilt"
    }
  }

  /// Why `cached` was served without asking the server.
  func servedCause(_ cached: KeyBinding, now: Int64, young: Bool, waitedSince: Int64?) -> String {
    if request.mode == .offline { return "offline: the cached copy is served as it is" }
    if let origin = cached.origin, origin.isFresh(at: now) {
      let until = origin.expires.map { " until \(Self.traceDate($0))" } ?? ""
      return "fresh\(until) (the server's Cache-Control max-age or Expires)"
    }
    if young, request.mode == .normal {
      return "fetched less than the max-age asked ago (FetchRequest.maxAge)"
    }
    if waitedSince != nil { return "fetched by another process while this one waited for it" }
    return "the cached copy may be served"
  }

  /// Why the server is asked for the URL, `cached` being what the store
  /// has bound to it (nil: nothing).
  func downloadCause(_ cached: KeyBinding?) -> String {
    guard let cached else {
      return request.expected.isEmpty
        ? "not in the store: never fetched, or its object was removed since"
        : "not in the store, and no object with the expected checksum either"
    }
    guard let origin = cached.origin else {
      return "the key was bound by a put, with nothing learnt from a server to serve it by"
    }
    let now = currentTimeNanoseconds()
    var why: String
    if request.mode == .refresh {
      why = "a refresh was asked (FetchRequest.Mode.refresh)"
    } else if !origin.isFresh(at: now) {
      why =
        origin.expires.map { "stale: expired \(Self.traceDate($0))" }
        ?? "stale: the server gave it no max-age or Expires when it was fetched \(Self.traceDate(origin.fetched))"
    } else {
      why = "the cached copy is gone or does not match the expected checksums"
    }
    why +=
      ConditionalRequest.canRevalidate(origin)
      ? "; asked with its validator (If-None-Match, If-Modified-Since)"
      : "; it has no ETag or Last-Modified to revalidate it by"
    return why
  }

  /// A date as the trace shows it: UTC, ISO 8601.
  static func traceDate(_ date: Date) -> String {
    date.formatted(Date.ISO8601FormatStyle())
  }
}
