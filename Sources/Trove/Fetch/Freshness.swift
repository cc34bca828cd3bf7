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
    var origin = KeyOrigin(
      size: size, etag: head.field("etag"), lastModified: head.field("last-modified"),
      expires: nil, isImmutable: false, finalURL: finalURL, fetched: now)
    let directives = cacheControl(head.field("cache-control"))
    if directives["no-cache"] != nil || directives["no-store"] != nil { return origin }
    let age = head.field("age").flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) } ?? 0
    if let text = directives["max-age"], let seconds = Int64(text) {
      origin.expires = now.addingSaturated(
        Int64.nanoseconds(fromSeconds: max(0, seconds - max(0, age))))
    } else if let expires = head.field("expires") {
      // Relative to the server's own clock when it sent one: clock skew
      // between here and there does not move the expiry.
      guard let at = httpDate(expires) else { return origin }  // invalid: already expired
      let base = head.field("date").flatMap(httpDate) ?? currentTimeNanoseconds()
      origin.expires = now.addingSaturated(at.subtractingSaturated(base))
    }
    origin.isImmutable = directives["immutable"] != nil
    return origin
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

  /// An HTTP date (IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, RFC 850
  /// `Sunday, 06-Nov-94 08:49:37 GMT` or asctime `Sun Nov  6 08:49:37
  /// 1994`) as nanoseconds since 1970; nil when it is none of them.
  static func httpDate(_ text: String) -> Int64? {
    let months = [
      "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ]
    let words = text.split(whereSeparator: { " ,-".contains($0) }).map(String.init)
    guard words.count >= 5 else { return nil }
    var day: Int?
    var month: Int?
    var year: Int?
    var time: [Int]?
    for word in words.dropFirst() {  // the weekday is not checked
      if let m = months.firstIndex(of: word.lowercased()) {
        month = m + 1
      } else if word.contains(":") {
        let parts = word.split(separator: ":").compactMap { Int($0) }
        guard parts.count == 3 else { return nil }
        time = parts
      } else if let n = Int(word) {
        if day == nil, word.count <= 2, year == nil { day = n } else { year = n }
      }
    }
    guard let day, let month, var year, let time, (1...31).contains(day), time[0] < 24,
      time[1] < 60, time[2] <= 60
    else { return nil }
    if year < 100 { year += year < 70 ? 2000 : 1900 }  // RFC 850's two digits
    // Days since 1970 of the civil date (Howard Hinnant's algorithm).
    let y = month <= 2 ? year - 1 : year
    let era = (y >= 0 ? y : y - 399) / 400
    let yearOfEra = y - era * 400
    let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    let days = Int64(era * 146097 + dayOfEra - 719468)
    let seconds = days * 86400 + Int64(time[0] * 3600 + time[1] * 60 + time[2])
    return Int64.nanoseconds(fromSeconds: seconds)
  }

  /// Whether `etag` is strong (not `W/`): only a strong one may make a
  /// range request conditional (`If-Range`).
  static func isStrong(_ etag: String) -> Bool { !etag.hasPrefix("W/") }
}
