/// The exact text a signature covers: versioned, one field a line, every
/// free-form value (a key, a validator) as its UTF-8 length, `:`, and its
/// bytes, so that no value can pass for another field. See
/// Docs/OnDiskFormat.md.
///
/// ```
/// trove-object 1            trove-key 1
/// digest xxh128:HEX         key 23:https://example.com/x
/// size 1234                 digest xxh128:HEX
/// sha256 HEX                size 1234
///                           sha256 HEX
///                           etag 6:"abc1"     (or: etag none)
///                           last-modified none
///                           time 1764651600
/// ```
struct SignedText: Hashable {
  let bytes: [UInt8]

  /// What an object's signed entry (`sigs/<aa>/<hex>.json`) covers.
  static func object(digest: BlobDigest, size: Int64, sha256: Checksum) -> SignedText {
    SignedText(
      lines: [
        "trove-object 1", "digest \(digest)", "size \(size)", "sha256 \(sha256.hex)",
      ])
  }

  /// What a key record's signature covers: the key, the object, and the
  /// origin's validators, at `time` (seconds since 1970).
  static func keyRecord(
    key: String, digest: BlobDigest, size: Int64, sha256: Checksum, etag: String?,
    lastModified: String?, time: Int64
  ) -> SignedText {
    func counted(_ value: String?) -> String {
      value.map { "\($0.utf8.count):\($0)" } ?? "none"
    }
    return SignedText(
      lines: [
        "trove-key 1", "key \(counted(key))", "digest \(digest)", "size \(size)",
        "sha256 \(sha256.hex)", "etag \(counted(etag))", "last-modified \(counted(lastModified))",
        "time \(time)",
      ])
  }

  private init(lines: [String]) {
    bytes = Array(lines.map { $0 + "\n" }.joined().utf8)
  }
}
