/// The headers that make a request conditional (`If-None-Match`,
/// `If-Modified-Since`, `If-Range`), built from validators a store kept: a
/// response's `ETag` and `Last-Modified`, a remote's key record, a
/// `partial/<k>.ofd.json`. Those are text from elsewhere pasted into a request,
/// so each is checked where it is read and again here, the one place a
/// header is made from one: a value that could end the line or smuggle
/// another header is never sent.
enum ConditionalRequest {
  /// The longest validator sent (a real one is far shorter).
  static let maximumLength = 1024

  /// Whether `value` may be sent as a validator: 1 to ``maximumLength``
  /// bytes of visible ASCII and inner spaces. Anything else (a control
  /// character, CR or LF, a non-ASCII byte, a leading or trailing space) is
  /// refused, not cleaned: a validator changed is a different validator.
  static func isSafe(_ value: String) -> Bool {
    let bytes = value.utf8
    guard (1...maximumLength).contains(bytes.count), bytes.first != 0x20, bytes.last != 0x20
    else { return false }
    return bytes.allSatisfy { (0x20...0x7E).contains($0) }
  }

  /// Whether `value` may be kept as a `Last-Modified`: safe, and an HTTP
  /// date (the only thing `If-Modified-Since` compares).
  static func isDate(_ value: String) -> Bool {
    isSafe(value) && Freshness.httpDate(value) != nil
  }

  /// `If-None-Match` and `If-Modified-Since` for revalidating what a fetch
  /// recorded in `origin`, each only when its validator is safe; empty when
  /// neither is (then the request cannot be conditional).
  static func revalidation(_ origin: KeyOrigin) -> [String] {
    var headers: [String] = []
    if let etag = origin.etag, isSafe(etag) { headers.append("If-None-Match: \(etag)") }
    if let modified = origin.lastModified, isSafe(modified) {
      headers.append("If-Modified-Since: \(modified)")
    }
    return headers
  }

  /// Whether `origin` has a validator ``revalidation(_:)`` would send.
  static func canRevalidate(_ origin: KeyOrigin?) -> Bool {
    origin.map { !revalidation($0).isEmpty } ?? false
  }

  /// `If-Range` for resuming a part on `validator`; nil when it is not
  /// safe (then the part is not resumed: a range request that is not
  /// conditional could splice two bodies).
  static func resumption(_ validator: String) -> String? {
    isSafe(validator) ? "If-Range: \(validator)" : nil
  }
}
