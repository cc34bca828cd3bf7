@_spi(Serving) import Trove

/// What a request's path asks for, parsed into a digest, a checksum or a
/// record name; a path is never joined onto the file system.
///
/// ```
/// /healthz                 .health
/// /metrics                 .metrics      Prometheus's text format
/// /cas/<32 hex>            .cas          the object of an XXH3-128 digest
/// /sha256/<64 hex>         .checksum     the object a recorded checksum names
/// /sha512/<128 hex>        .checksum
/// /trove-remote.json       .remoteLayout the read side of a WebDAV remote:
/// /cas/<aa>/<32 hex>       .remoteBlob     another store's `remote add`
/// /keys/<32 hex>.json      .keyRecord      reads through from this one
/// /sigs/<aa>/<32 hex>.json .signedEntry    (signed by the store's signing-key)
/// /chunks/<aa>/<32 hex>    .manifest       a large object's chunk manifest
/// /chunks/<aa>/<32 hex>.sums  .blockSums  signatures of its blocks (?blocks=a-b,…)
/// /chunks/<aa>/<32 hex>.bytes .blobRanges many ranges of it at once (?ranges=a-b,…)
/// /tmp/<name>              .upload       a blob on its way in (--writable)
/// /m/<name>/<path>         .mirror       a fetch of the mirror's upstream/<path>
/// ```
///
/// A forward proxy's targets are no paths: ``ProxyTarget`` parses them
/// (`.proxy`, `.tunnel`).
public enum Route: Equatable, Sendable {
  case health
  case metrics
  case cas(BlobDigest)
  case checksum(Checksum)
  case remoteLayout
  case remoteBlob(BlobDigest)
  case keyRecord(String)
  case signedEntry(BlobDigest)
  case manifest(BlobDigest)
  case blockSums(BlobDigest)
  case blobRanges(BlobDigest)
  case upload(String)
  case mirror(name: String, path: MirrorPath)
  /// An absolute-form request (`GET http://HOST/PATH`): a fetch of `url`.
  case proxy(url: String, authority: ProxyAuthority)
  /// `CONNECT HOST:PORT`: bytes relayed both ways, not cached.
  case tunnel(ProxyAuthority)

  /// Why a path is no route.
  public enum Refusal: Error, Equatable, Sendable {
    /// No route has that shape (404).
    case unknown
    /// A route's shape with a bad value in it (400); one line naming it.
    case malformed(String)
  }

  /// The longest path looked at: the longest route's is under 200 bytes.
  static let maximumPathLength = 512

  /// Parses `path` (the request target without its query, as the server
  /// decoded it); a mirror's path is read from `target`, the same as the
  /// client sent it (not decoded), when given (see ``MirrorPath``).
  public static func parse(_ path: String, target: String? = nil) -> Result<Route, Refusal> {
    if path.hasPrefix("/m/") || path == "/m" {
      return mirror(target ?? path)
    }
    guard path.utf8.count <= maximumPathLength else {
      return .failure(.malformed("the path is longer than \(maximumPathLength) bytes"))
    }
    let parts = path.split(separator: "/", omittingEmptySubsequences: false)
    guard parts.count >= 2, parts[0].isEmpty else {
      return .failure(.malformed("the path does not start with '/'"))
    }
    let segments = Array(parts.dropFirst())
    switch (segments.first ?? "", segments.count) {
    case ("healthz", 1): return .success(.health)
    case ("metrics", 1): return .success(.metrics)
    case ("trove-remote.json", 1): return .success(.remoteLayout)
    case ("cas", 2):
      return digest(segments[1]).map { .cas($0) }
    case ("cas", 3):
      return fannedOut(segments[1], segments[2], suffix: "").map { .remoteBlob($0) }
    case ("sigs", 3):
      return fannedOut(segments[1], segments[2], suffix: ".json").map { .signedEntry($0) }
    case ("chunks", 3):
      if segments[2].hasSuffix(".sums") {
        return fannedOut(segments[1], segments[2], suffix: ".sums").map { .blockSums($0) }
      }
      if segments[2].hasSuffix(".bytes") {
        return fannedOut(segments[1], segments[2], suffix: ".bytes").map { .blobRanges($0) }
      }
      return fannedOut(segments[1], segments[2], suffix: "").map { .manifest($0) }
    case ("keys", 2):
      let name = segments[1]
      guard name.hasSuffix(".json"), Store.isKeyRecordName(name.dropLast(5)) else {
        return .failure(
          .malformed(
            "'\(shown(name))' is not a key record name: expected 32 lowercase hex digits and '.json'"
          ))
      }
      return .success(.keyRecord(String(name.dropLast(5))))
    case ("tmp", 2):
      let name = segments[1]
      guard (1...64).contains(name.utf8.count),
        name.utf8.allSatisfy({
          isHexDigit($0) || (0x67...0x7A).contains($0) || (0x47...0x5A).contains($0)
        })
      else {
        return .failure(
          .malformed("'\(shown(name))' is not an upload name: expected 1 to 64 letters or digits"))
      }
      return .success(.upload(String(name)))
    case ("sha256", 2), ("sha512", 2):
      let algorithm = segments[0] == "sha256" ? ChecksumAlgorithm.sha256 : .sha512
      let length = algorithm == .sha256 ? 64 : 128
      let hex = segments[1]
      guard hex.utf8.count == length, hex.utf8.allSatisfy(isHexDigit) else {
        return .failure(
          .malformed(
            "'\(shown(hex))' is not a \(algorithm.rawValue) checksum: expected \(length) hex digits"
          ))
      }
      guard let checksum = try? Checksum(parsing: algorithm.rawValue + ":" + hex.lowercased())
      else {
        return .failure(.malformed("'\(shown(hex))' is not a \(algorithm.rawValue) checksum"))
      }
      return .success(.checksum(checksum))
    case ("cas", _), ("keys", _), ("sigs", _), ("chunks", _), ("tmp", _), ("sha256", _),
      ("sha512", _):
      return .failure(.malformed("'\(shown(Substring(path)))' has too many or too few segments"))
    default:
      return .failure(.unknown)
    }
  }

  /// `/m/<name>/<path>`.
  private static func mirror(_ target: String) -> Result<Route, Refusal> {
    let rest = target.utf8.starts(with: "/m/".utf8) ? target.dropFirst(3) : ""
    guard let slash = rest.firstIndex(of: "/"), Mirror.isName(String(rest[..<slash])) else {
      return .failure(
        .malformed("'\(shown(Substring(target)))' is not a mirror path: expected /m/NAME/PATH"))
    }
    do throws(Refusal) {
      let path = try MirrorPath(parsing: rest[rest.index(after: slash)...])
      return .success(.mirror(name: String(rest[..<slash]), path: path))
    } catch {
      return .failure(error)
    }
  }

  /// The route's label in `/metrics`.
  var metricName: String {
    switch self {
    case .health: "healthz"
    case .metrics: "metrics"
    case .cas: "cas"
    case .checksum: "checksum"
    case .remoteLayout, .remoteBlob, .keyRecord, .signedEntry, .manifest, .blockSums, .blobRanges:
      "remote"
    case .upload: "upload"
    case .mirror: "mirror"
    case .proxy: "proxy"
    case .tunnel: "connect"
    }
  }

  /// An object route's digest: 32 hex digits.
  private static func digest(_ text: Substring) -> Result<BlobDigest, Refusal> {
    guard text.utf8.count == 32, text.utf8.allSatisfy(isHexDigit),
      let digest = try? BlobDigest(parsing: BlobDigest.prefix + text)
    else {
      return .failure(.malformed("'\(shown(text))' is not a digest: expected 32 hex digits"))
    }
    return .success(digest)
  }

  /// `<aa>/<hex><suffix>`, `aa` the digest's first two digits.
  private static func fannedOut(_ folder: Substring, _ name: Substring, suffix: String)
    -> Result<BlobDigest, Refusal>
  {
    guard name.hasSuffix(suffix) else {
      return .failure(.malformed("'\(shown(name))' does not end in '\(suffix)'"))
    }
    let hex = name.dropLast(suffix.count)
    guard case .success(let digest) = digest(hex) else { return digest(hex) }
    guard folder == digest.hex.prefix(2) else {
      return .failure(
        .malformed("the folder '\(shown(folder))' is not the first two digits of \(digest.hex)"))
    }
    return .success(digest)
  }

  private static func isHexDigit(_ c: UInt8) -> Bool {
    (0x30...0x39).contains(c) || (0x61...0x66).contains(c) || (0x41...0x46).contains(c)
  }

  /// A path piece as an error body shows it: escaped, at most 80 characters.
  static func shown(_ text: Substring) -> String {
    let escaped = MessageText.escaped(String(text))
    return escaped.count > 80 ? String(escaped.prefix(77)) + "..." : escaped
  }
}
