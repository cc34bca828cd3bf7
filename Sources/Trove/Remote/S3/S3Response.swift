import Foundation

/// What an S3 service says in a response body: the code of an error
/// (`<Error><Code>NoSuchBucket</Code>…`) and the id of a multipart upload.
/// Only short, plainly-spelled values are taken: the body is the server's,
/// and hostile until checked.
enum S3Response {
  /// The error code in an error body (`AccessDenied`), or nil when it
  /// has none that is 1 to 64 letters and digits.
  static func errorCode(_ body: [UInt8]) -> String? {
    guard let code = element("Code", in: body), (1...64).contains(code.count),
      code.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) })
    else { return nil }
    return code
  }

  /// The `UploadId` a CreateMultipartUpload answered, or nil when it has
  /// none of 1 to 1024 printable ASCII characters.
  static func uploadID(_ body: [UInt8]) -> String? {
    guard let id = element("UploadId", in: body), (1...1024).contains(id.count),
      id.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
    else { return nil }
    return id
  }

  /// An unfinished multipart upload a ListMultipartUploads answer names.
  struct PendingUpload: Equatable {
    var key: String
    var uploadID: String
    /// When it started, in seconds since 1970 (the server's clock).
    var initiated: Int64
  }

  /// The uploads in a ListMultipartUploads answer, and where the next page
  /// starts (nil on the last). An upload whose key, id or start time is
  /// not plainly spelled is left out: it is not one this client made.
  static func pendingUploads(_ body: [UInt8]) -> (
    uploads: [PendingUpload], next: (key: String, uploadID: String)?
  ) {
    var uploads: [PendingUpload] = []
    var from = 0
    let open = Array("<Upload>".utf8)
    let close = Array("</Upload>".utf8)
    while let start = find(open, in: body, from: from),
      let end = find(close, in: body, from: start + open.count)
    {
      let entry = Array(body[start + open.count..<end])
      from = end + close.count
      guard let key = element("Key", in: entry), isPlainKey(key),
        let id = uploadID(entry),
        let initiated = element("Initiated", in: entry).flatMap(isoSeconds)
      else { continue }
      uploads.append(PendingUpload(key: key, uploadID: id, initiated: initiated))
    }
    guard element("IsTruncated", in: body) == "true",
      let key = element("NextKeyMarker", in: body), isPlainKey(key),
      let id = element("NextUploadIdMarker", in: body), (1...1024).contains(id.count),
      id.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
    else { return (uploads, nil) }
    return (uploads, (key, id))
  }

  /// Whether `key` is spelled as the layout's names are: 1 to 1024 of
  /// letters, digits, `/`, `.`, `_` and `-`.
  private static func isPlainKey(_ key: String) -> Bool {
    (1...1024).contains(key.utf8.count)
      && key.unicodeScalars.allSatisfy {
        $0.isASCII
          && (CharacterSet.alphanumerics.contains($0) || "/._-".unicodeScalars.contains($0))
      }
  }

  /// `2026-12-02T17:35:56.412Z` as seconds since 1970.
  static func isoSeconds(_ text: String) -> Int64? {
    let date =
      (try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
      ?? (try? Date(text, strategy: Date.ISO8601FormatStyle()))
    return date.map { Int64($0.timeIntervalSince1970.rounded(.down)) }
  }

  /// The text of the first `<name>…</name>` in `body`.
  private static func element(_ name: String, in body: [UInt8]) -> String? {
    let open = Array("<\(name)>".utf8)
    let close = Array("</\(name)>".utf8)
    guard let start = find(open, in: body, from: 0) else { return nil }
    let from = start + open.count
    guard let end = find(close, in: body, from: from) else { return nil }
    return String(decoding: body[from..<end], as: UTF8.self)
  }

  private static func find(_ needle: [UInt8], in haystack: [UInt8], from: Int) -> Int? {
    guard needle.count <= haystack.count - from else { return nil }
    var i = from
    while i + needle.count <= haystack.count {
      if haystack[i..<i + needle.count].elementsEqual(needle) { return i }
      i += 1
    }
    return nil
  }

  /// What to tell the user about `code`, beyond naming it.
  static func hint(_ code: String) -> String? {
    switch code {
    case "NoSuchBucket": return "the bucket does not exist"
    case "AccessDenied": return "the credentials may not do this"
    case "InvalidAccessKeyId": return "the server knows no such AWS_ACCESS_KEY_ID"
    case "SignatureDoesNotMatch":
      return "the secret access key does not match the key id, or the region is wrong"
    case "RequestTimeTooSkewed":
      return "this machine's clock is more than 15 minutes off the server's"
    case "SlowDown": return "the server asks for fewer requests"
    default: return nil
    }
  }
}
