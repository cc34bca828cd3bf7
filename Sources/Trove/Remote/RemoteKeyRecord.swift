import Foundation

/// What a remote knows about a key (a URL a fetch stored, a name a put
/// bound): the object it names, what the fetch learnt of the origin, and
/// the publisher's checksums verified against the object. Written after
/// the blob it names (a reader never finds a key whose blob is missing
/// because of the order of uploads), at `{base}/keys/<h>.json` on WebDAV
/// and `trove:key:<h>` on Redis, `h` the XXH3-128 hex of the key's UTF-8.
///
/// A record is a hint, never trusted for bytes: the blob it names is
/// rehashed on its way into a store, and its checksums are checked against
/// the fetch's expectations like any cached object's.
struct RemoteKeyRecord: Codable, Sendable, Hashable {
  /// The key itself (a record found under another key's name is ignored).
  var key: String
  /// The object: `xxh128:…`.
  var digest: String
  /// What a fetch learnt of the origin (validators, freshness); nil for a
  /// key a put bound.
  var origin: KeyOrigin?
  /// Checksums of the object (`sha256:…`), verified when they were recorded.
  var checksums: [String]
  /// The signatures of the pushing store's signing key, and what they
  /// cover beside the fields above; nil when unsigned.
  var signed: KeyRecordSignatures? = nil

  /// The largest record read: a key, validators and a few checksums.
  static let sizeLimit = 64 * 1024

  /// The XXH3-128 hex of `key`: its record's name.
  static func name(of key: String) -> String {
    XXH3Hasher.digest(Array(key.utf8)).hex
  }

  func encoded() -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return Array((try? encoder.encode(self)) ?? Data()) + [0x0A]
  }

  /// Reads a record of `key` (`source` names it in messages); nil when the
  /// bytes are not one, or are one of another key.
  static func decode(_ bytes: [UInt8], key: String) -> RemoteKeyRecord? {
    guard let record = try? JSONDecoder().decode(Self.self, from: Data(bytes)), record.key == key,
      (try? BlobDigest(parsing: record.digest)) != nil
    else { return nil }
    return record
  }

  /// The object it names.
  var blobDigest: BlobDigest? { try? BlobDigest(parsing: digest) }
  /// Its checksums that parse.
  var parsedChecksums: [Checksum] { checksums.compactMap { try? Checksum(parsing: $0) } }
}

extension RemoteKeyRecord {
  /// The unsigned record of `binding`, whose object has `checksums`.
  /// See ``holdsLogin(_:)`` for the bindings that must have none.
  init(_ binding: KeyBinding, checksums: [Checksum]) {
    self.init(
      key: binding.key, digest: binding.digest.description, origin: binding.origin,
      checksums: checksums.map(\.description))
  }

  /// Whether `binding`'s key or final URL holds a login (a key a fetch made
  /// from such a URL, as older versions kept it): its record would publish
  /// the password, so none is written or served.
  static func holdsLogin(_ binding: KeyBinding) -> Bool {
    URLUserinfo.range(in: binding.key) != nil
      || binding.origin?.finalURL.map({ URLUserinfo.range(in: $0) != nil }) == true
  }

  /// The error for a record at `source` on `remote` longer than
  /// ``sizeLimit``: reading stops there, and the remote counts as failing
  /// (its breaker), as one whose answers break off does.
  static func tooLong(remote: String, source: String) -> TroveError {
    TroveError(
      .unavailable,
      "remote '\(remote)': \(source) is longer than 64 KiB, more than a key record can be; not read",
      value: source)
  }

  /// The record as a reader may use it: a record is any writer's text, and
  /// its validators go into requests to the origin. An `ETag` or
  /// `Last-Modified` that could not be sent as it is (a control character,
  /// CR or LF, longer than ``ConditionalRequest/maximumLength``) or a
  /// negative size makes the record unusable, as does a `finalURL` holding
  /// a control character; a clean `Last-Modified` that is not an HTTP date
  /// is dropped (it validates nothing), as is a `finalURL` that is not an
  /// http(s) URL, and a login in one is cut.
  ///
  /// - Throws: `.checksumMismatch` naming the remote, the key and the field:
  ///   a bad record, counted `corrupt` where remotes count those, and never
  ///   bound.
  func validated(remote: String) throws(TroveError) -> RemoteKeyRecord {
    guard var origin else { return self }
    func refuse(_ why: String) -> TroveError {
      TroveError(
        .checksumMismatch,
        "remote '\(remote)': the record of key '\(key)' is not usable: \(why); ignored",
        value: key)
    }
    if let etag = origin.etag, !ConditionalRequest.isSafe(etag) {
      throw refuse("its etag is not a header value (control characters, or over 1 KiB)")
    }
    if let modified = origin.lastModified {
      guard ConditionalRequest.isSafe(modified) || modified.isEmpty else {
        throw refuse("its lastModified is not a header value (control characters, or over 1 KiB)")
      }
      if !ConditionalRequest.isDate(modified) { origin.lastModified = nil }
    }
    guard origin.size >= 0 else { throw refuse("its size is negative") }
    if let url = origin.finalURL {
      // Printed by `keys`, kept in the index, pushed again: no control
      // character, and no login, which would also keep the key from
      // ever being pushed from here.
      guard !url.unicodeScalars.contains(where: Self.isControl) else {
        throw refuse("its finalURL holds a control character")
      }
      origin.finalURL = URLUserinfo.isHTTP(url) ? URLUserinfo.split(url).url : nil
    }
    var record = self
    record.origin = origin
    return record
  }

  /// Whether `scalar` is a control character: C0, DEL or C1.
  static func isControl(_ scalar: Unicode.Scalar) -> Bool {
    scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
  }
}
