/// The lengths one input may have on its way into a store: the exact
/// length its caller vouches for (`--expect-size`) and the store's
/// `max-object-size`. A length known in advance (a file's size, a
/// `Content-Length`) is checked before the first byte is read; bytes that
/// arrive are counted, so a stream stops as soon as it passes either —
/// `/dev/zero` included — and nothing is stored.
struct SizeLimit: Sendable {
  /// What the bytes are, for messages: a path, `<stream>`, a URL.
  var source: String
  /// The exact length the caller expects, if it said.
  var expected: Int64?
  /// The policy's `max-object-size`, if any.
  var maximum: Int64?

  /// No limit: any length will do.
  static func none(_ source: String) -> SizeLimit {
    SizeLimit(source: source, expected: nil, maximum: nil)
  }

  /// The most bytes worth reading: one past this already fails.
  var ceiling: Int64? {
    switch (expected, maximum) {
    case (let e?, let m?): return min(e, m)
    case (let e?, nil): return e
    case (nil, let m?): return m
    case (nil, nil): return nil
    }
  }

  /// Checks a length announced before the bytes (a file's size, a
  /// `Content-Length`; `isExact` false for a hint that the bytes need not
  /// match, such as the size a writer was made for).
  func checkAnnounced(_ length: Int64, isExact: Bool = true) throws(TroveError) {
    if let maximum, length > maximum {
      throw tooLarge("it is \(length) bytes, ")
    }
    if isExact, let expected, length != expected { throw wrongLength(length, expected) }
  }

  /// Checks the bytes counted so far (`total`), as they arrive.
  func checkReceived(_ total: Int64) throws(TroveError) {
    if let maximum, total > maximum { throw tooLarge("") }
    if let expected, total > expected {
      throw TroveError(
        .checksumMismatch, "'\(source)' is longer than \(expected) bytes", value: source,
        remedy: .checkExpectedSize)
    }
  }

  /// Checks the length of the whole input, once it ended.
  func checkComplete(_ total: Int64) throws(TroveError) {
    try checkReceived(total)
    if let expected, total != expected { throw wrongLength(total, expected) }
  }

  private func wrongLength(_ length: Int64, _ expected: Int64) -> TroveError {
    TroveError(
      .checksumMismatch, "'\(source)' is \(length) bytes, expected \(expected)", value: source,
      remedy: .checkExpectedSize)
  }

  private func tooLarge(_ length: String) -> TroveError {
    let limit = maximum ?? 0
    return TroveError(
      .tooLarge,
      "cannot store '\(source)': \(length)more than max-object-size \(CachePolicy.Quantities.formatSizeSetting(limit)) (\(limit) bytes, config.json)",
      value: source, remedy: .raiseMaximumObjectSize)
  }
}
