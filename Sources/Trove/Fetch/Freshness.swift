import Foundation

/// What a response says about how long its body stays current, and how
/// to ask again: RFC 9111's freshness (`Cache-Control`, `Expires`, `Age`)
/// and validators (`ETag`, `Last-Modified`). No heuristic freshness: a
/// response that gives none is revalidated on every fetch (a conditional
/// request, answered 304 without a body when nothing changed).
enum Freshness {
  /// The origin record for a body of `size` bytes received at `now`
  /// (nanoseconds since 1970) with `head`, from `finalURL`.
  static func origin(_ head: HTTPResponseHead, size: Int64, finalURL: String?, now: Int64)
    -> KeyOrigin
  {
    // A validator that could not be sent back is not kept.
    var origin = KeyOrigin(
      size: size, etag: head.field("etag").flatMap { ConditionalRequest.isSafe($0) ? $0 : nil },
      lastModified: head.field("last-modified").flatMap {
        ConditionalRequest.isDate($0) ? $0 : nil
      },
      expires: nil, isImmutable: false, finalURL: finalURL, fetched: now,
      contentType: head.field("content-type").flatMap(contentType))
    origin.expiresNanoseconds = lifetime(head).map { now.addingSaturated($0) }
    origin.isImmutable =
      origin.expires != nil && cacheControl(head.field("cache-control"))["immutable"] != nil
    return origin
  }

  /// `origin` as a key record pulled from a remote carries it, bound in
  /// this store at `now`: its validators, and no freshness. Freshness is
  /// the origin's word, and a remote's record is any writer's: the first
  /// fetch here asks the origin (a conditional request, a `304` without a
  /// body when nothing changed), whose answer sets the freshness. Never
  /// `immutable`, and never fetched here (time 0): the record's own fetch
  /// time is any writer's too, so no ``FetchRequest/maxAge`` counts it
  /// as young.
  ///
  /// Nor which URL served it: that is the writer's word too, and it would
  /// decide where the validators go. They go to the key's own URL, as they
  /// did before records named one.
  static func pulled(_ origin: KeyOrigin) -> KeyOrigin {
    var bound = origin
    bound.servedBy = nil
    bound.contentType = nil
    bound.expiresNanoseconds = nil
    bound.isImmutable = false
    bound.fetchedNanoseconds = 0
    return bound
  }

  /// A `Content-Type` worth keeping: printable ASCII, at most 255 bytes
  /// (it becomes a response header of `trove serve`).
  static func contentType(_ value: String) -> String? {
    let bytes = value.utf8
    guard !bytes.isEmpty, bytes.count <= 255, bytes.allSatisfy({ (0x20...0x7E).contains($0) })
    else { return nil }
    return value
  }

  /// How much longer than now the response is fresh (nanoseconds, maybe 0
  /// or less), from `Cache-Control: max-age` or `Expires`, less its `Age`;
  /// nil when it says nothing (or `no-cache`, `no-store`: always ask).
  static func lifetime(_ head: HTTPResponseHead) -> Int64? {
    let directives = cacheControl(head.field("cache-control"))
    if directives["no-cache"] != nil || directives["no-store"] != nil { return 0 }
    let age = head.field("age").flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) } ?? 0
    let ageNanoseconds = Int64.nanoseconds(fromSeconds: max(0, age))
    if let text = directives["max-age"] {
      // An invalid max-age makes the response stale (RFC 9111 §4.2.1).
      guard let seconds = Int64(text), seconds >= 0 else { return 0 }
      return Int64.nanoseconds(fromSeconds: seconds).subtractingSaturated(ageNanoseconds)
    }
    guard let expires = head.field("expires") else { return nil }
    // An invalid Expires ("0") means already expired.
    guard let at = httpDate(expires) else { return 0 }
    // Relative to the server's own clock when it sent one: clock skew
    // between here and there does not move the expiry.
    let base = head.field("date").flatMap(httpDate) ?? currentTimeNanoseconds()
    return at.subtractingSaturated(base).subtractingSaturated(ageNanoseconds)
  }

  /// `Cache-Control` directives by lowercase name, with their values
  /// (unquoted; "" for a directive without one).
  static func cacheControl(_ text: String?) -> [String: String] {
    var directives: [String: String] = [:]
    for part in (text ?? "").split(separator: ",") {
      let pair = part.split(separator: "=", maxSplits: 1)
      guard let name = pair.first?.trimmingCharacters(in: .whitespaces).lowercased(),
        !name.isEmpty
      else { continue }
      var value = pair.count > 1 ? pair[1].trimmingCharacters(in: .whitespaces) : ""
      if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
        value = String(value.dropFirst().dropLast())
      }
      directives[name] = value
    }
    return directives
  }

  /// An HTTP date as nanoseconds since 1970, in one of the three forms
  /// RFC 9110 §5.6.7 allows — IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`,
  /// RFC 850 `Sunday, 06-Nov-94 08:49:37 GMT`, asctime `Sun Nov  6
  /// 08:49:37 1994` — and nothing else (no zone offsets); nil otherwise.
  static func httpDate(_ text: String) -> Int64? {
    // In bytes: the grammar is ASCII, and every response's dates are read.
    typealias Word = ArraySlice<UInt8>
    let months = [
      "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ].map { Array($0.utf8) }
    func month(_ word: Word) -> Int? {
      // `| 0x20` lowercases an ASCII letter and makes no other byte one.
      let lower = word.map { $0 | 0x20 }
      return months.firstIndex(of: lower).map { $0 + 1 }
    }
    func number(_ word: Word, digits: ClosedRange<Int>) -> Int? {
      guard digits.contains(word.count),
        word.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
      else { return nil }
      return word.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
    }
    func isGMT(_ word: Word) -> Bool { word.elementsEqual("GMT".utf8) }
    let comma = UInt8(ascii: ",")
    let words = Array(text.utf8).split(separator: UInt8(ascii: " "))
    var fields: (day: Int, month: Int, year: Int, time: Word)?
    if words.count == 6, words[0].last == comma, isGMT(words[5]) {
      if let d = number(words[1], digits: 2...2), let m = month(words[2]),
        let y = number(words[3], digits: 4...4)
      {
        fields = (d, m, y, words[4])
      }
    } else if words.count == 4, words[0].last == comma, isGMT(words[3]) {
      let parts = words[1].split(separator: UInt8(ascii: "-"))
      if parts.count == 3, let d = number(parts[0], digits: 2...2), let m = month(parts[1]),
        let y = number(parts[2], digits: 2...2)
      {
        fields = (d, m, y < 70 ? 2000 + y : 1900 + y, words[2])
      }
    } else if words.count == 5, let m = month(words[1]),
      let d = number(words[2], digits: 1...2), let y = number(words[4], digits: 4...4)
    {
      fields = (d, m, y, words[3])
    }
    guard let fields, (1...31).contains(fields.day) else { return nil }
    let clock = fields.time.split(separator: UInt8(ascii: ":"))
    guard clock.count == 3, let h = number(clock[0], digits: 2...2),
      let mi = number(clock[1], digits: 2...2), let se = number(clock[2], digits: 2...2),
      h < 24, mi < 60, se <= 60
    else { return nil }
    // Days since 1970 of the civil date (Howard Hinnant's algorithm);
    // four-digit years keep every product far from overflow.
    let (year, month, day) = (fields.year, fields.month, fields.day)
    let y = month <= 2 ? year - 1 : year
    let era = y / 400
    let yearOfEra = y - era * 400
    let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    let days = Int64(era * 146097 + dayOfEra - 719468)
    return Int64.nanoseconds(fromSeconds: days * 86400 + Int64(h * 3600 + mi * 60 + se))
  }

  /// Whether `etag` is strong (not `W/`): only a strong one may make a
  /// range request conditional (`If-Range`).
  static func isStrong(_ etag: String) -> Bool { !etag.hasPrefix("W/") }
}
