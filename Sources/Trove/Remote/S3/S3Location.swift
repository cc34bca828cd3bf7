import Foundation

/// Where an `s3://BUCKET/PREFIX` remote's objects are, and the options only
/// an S3 remote takes.
extension RemoteSpec {
  /// The bucket and prefix of an `s3://` URL.
  ///
  /// - Throws: what `bad` makes of the problem: a bucket name S3 refuses, a
  ///   port, a login, or a prefix with characters other than letters,
  ///   digits, `.`, `_`, `-` and `/` (or an empty, `.` or `..` segment).
  func s3Location(_ components: URLComponents, _ bad: (String, TroveError.Remedy?) -> TroveError)
    throws(TroveError) -> Endpoint
  {
    let bucket = components.host ?? ""
    guard Self.isBucketName(bucket) else {
      throw bad(
        "the bucket '\(ServerText.excerpt(bucket))' is not 3 to 63 lowercase letters, digits, '.' or '-', starting and ending with a letter or digit",
        nil)
    }
    if components.user != nil || components.password != nil {
      throw bad(
        "it holds a login: S3 credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or an AWS profile",
        nil)
    }
    if components.port != nil {
      throw bad("an s3:// URL names a bucket, not a server: give the server with --endpoint", nil)
    }
    guard components.query == nil, components.fragment == nil else {
      throw bad("a remote URL has no query or fragment", nil)
    }
    let path = components.path
    let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
    let prefix = segments.joined(separator: "/").trimmingSuffix("/")
    let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/")
    let parts = prefix.split(separator: "/", omittingEmptySubsequences: false)
    guard prefix.count <= 512, prefix.allSatisfy(allowed.contains),
      prefix.isEmpty || parts.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." })
    else {
      throw bad(
        "the prefix '\(ServerText.excerpt(prefix))' may hold only letters, digits, '.', '_', '-' and '/' between non-empty names",
        nil)
    }
    return Endpoint(
      kind: .s3, base: url, host: bucket, port: 0, database: 0, user: nil, bucket: bucket,
      prefix: prefix)
  }

  /// Whether S3 accepts `name` for a bucket (the rules every S3 service
  /// shares): 3 to 63 of `a-z`, `0-9`, `.` and `-`, starting and ending
  /// with a letter or digit.
  static func isBucketName(_ name: String) -> Bool {
    let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789.-")
    let ends = Set("abcdefghijklmnopqrstuvwxyz0123456789")
    guard (3...63).contains(name.count), name.allSatisfy(allowed.contains),
      let first = name.first, let last = name.last, ends.contains(first), ends.contains(last)
    else { return false }
    return !name.contains("..")
  }

  /// Refuses S3 options on a remote that is not `s3://`, and checks them
  /// on one that is.
  ///
  /// - Throws: `.invalidArgument` naming the option or value.
  func validateS3Options(_ kind: Kind) throws(TroveError) {
    guard kind == .s3 else {
      let given = [
        ("--endpoint", endpointURL != nil), ("--region", region != nil),
        ("--path-style", pathStyle != nil), ("--storage-class", storageClass != nil),
        ("--part-size", partSize != nil),
      ].filter(\.1).map(\.0)
      if let option = given.first {
        throw TroveError(
          .invalidArgument, "\(option) is for s3:// remotes; remote '\(name)' is not one",
          value: option)
      }
      return
    }
    if let endpointURL { _ = try Self.s3Service(endpointURL, remote: name) }
    if let region, !Self.isRegionName(region) {
      throw TroveError(
        .invalidArgument,
        "invalid region '\(ServerText.excerpt(region))' for remote '\(name)': expected letters, digits and '-' (us-east-1)",
        value: region)
    }
    if let partSize, !Self.partSizes.contains(partSize) {
      throw TroveError(
        .invalidArgument,
        "invalid --part-size of \(partSize) bytes for remote '\(name)': S3 takes parts of 5 MiB to 5 GiB",
        value: String(partSize))
    }
    if let storageClass {
      let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZ_")
      guard (1...32).contains(storageClass.count), storageClass.allSatisfy(allowed.contains)
      else {
        throw TroveError(
          .invalidArgument,
          "invalid storage class '\(ServerText.excerpt(storageClass))' for remote '\(name)': expected capitals and '_' (STANDARD_IA)",
          value: storageClass)
      }
    }
  }

  /// The part sizes S3 accepts (every part but the last).
  static let partSizes: ClosedRange<Int64> = (5 << 20)...(5 << 30)

  /// Whether `text` can be a region's name: 1 to 32 of `a-z`, `0-9`, `-`.
  static func isRegionName(_ text: String) -> Bool {
    let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-")
    return (1...32).contains(text.count) && text.allSatisfy(allowed.contains)
  }

  /// An S3 service URL's scheme, host and port (`http://127.0.0.1:7480`),
  /// without a trailing `/`.
  ///
  /// - Throws: `.invalidArgument` naming it: not http(s), no host, a
  ///   login, a query or a path.
  static func s3Service(_ text: String, remote: String) throws(TroveError) -> S3Service {
    func bad(_ why: String) -> TroveError {
      let shown = redacted(text)
      return TroveError(
        .invalidArgument, "invalid endpoint '\(shown)' for remote '\(remote)': \(why)",
        value: shown)
    }
    guard let components = URLComponents(string: text),
      let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https"
    else { throw bad("expected http://HOST[:PORT] or https://HOST[:PORT]") }
    guard let host = components.host, !host.isEmpty else { throw bad("it names no host") }
    if components.user != nil || components.password != nil { throw bad("it holds a login") }
    guard components.query == nil, components.fragment == nil,
      components.path.isEmpty || components.path == "/"
    else { throw bad("an endpoint is a server, with no path, query or fragment") }
    if let port = components.port, !(1...65535).contains(port) {
      throw bad("the port \(port) is not from 1 to 65535")
    }
    if text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }) {
      throw bad("it holds a space or a control character")
    }
    return S3Service(scheme: scheme, host: host, port: components.port)
  }
}

/// An S3 service: where requests go.
struct S3Service: Equatable {
  var scheme: String
  var host: String
  var port: Int?

  /// `host[:port]`, brackets around an IPv6 address.
  var authority: String {
    let shown = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
    return port.map { shown + ":\($0)" } ?? shown
  }

  /// AWS's own endpoint for `region`.
  static func aws(region: String) -> S3Service {
    S3Service(scheme: "https", host: "s3.\(region).amazonaws.com", port: nil)
  }

  /// Whether a bucket is named in the path by default: for an IP address
  /// or `localhost`, where `BUCKET.HOST` names nothing.
  var prefersPathStyle: Bool {
    let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
    return bare == "localhost" || IPAddress(literal: bare) != nil
  }
}

extension String {
  /// This string without any trailing `character`s.
  fileprivate func trimmingSuffix(_ character: Character) -> String {
    var text = self
    while text.last == character { text.removeLast() }
    return text
  }
}
