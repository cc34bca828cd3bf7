import Foundation

/// A remote as a store's `remotes.json` names it: where it is, whether
/// this store may write to it, and which signers it trusts. Never a
/// credential, nor where one comes from: that is each user's own choice,
/// kept outside the store (``CredentialBindings``), so that whoever writes
/// `remotes.json` never chooses where another user's secrets go.
public struct RemoteSpec: Sendable, Hashable, Codable {
  /// The remote's name in this store (`ci-cache`).
  public var name: String
  /// `http://`, `https://` (WebDAV: the base folder) or
  /// `redis://host[:port][/db]`.
  public var url: String
  /// Only read: pushes are refused.
  public var readOnly: Bool
  /// Blobs longer than this are not uploaded (skipped, not an error);
  /// nil for the default: 64 MiB for Redis (whose values live in
  /// memory), no limit for WebDAV. See ``sizeLimit``.
  @Nullable public var maxObjectSize: Int64?
  /// The environment variable holding the credential (`user:password`, or
  /// a bearer token over HTTP, a password over Redis), or nil for none:
  /// from this user's binding of the remote (``CredentialBinding``) when
  /// the store read it; what ``Store/addRemote(_:)`` binds. Never written
  /// to `remotes.json`.
  public var authEnvironment: String? = nil
  /// When objects a put or fetch stores go up to this (writable) remote;
  /// nil for the default, ``RemoteWrite/async``.
  @Nullable public var write: RemoteWrite?
  /// The keys whose signatures this store accepts from the remote (`remote
  /// add --trust`): with any, only records and objects one of them signed
  /// are read from it; nil reads what the remote holds, checked against
  /// damage only.
  @Nullable public var trust: [PublicSigningKey]?
  /// S3: the service's URL (`http://127.0.0.1:7480`, `https://s3.eu-west-1.amazonaws.com`);
  /// nil for the one the AWS configuration names (`AWS_ENDPOINT_URL_S3`,
  /// `AWS_ENDPOINT_URL`, `endpoint_url` in `~/.aws/config`), else AWS's.
  public var endpointURL: String?
  /// S3: the region requests are signed for; nil for the one the AWS
  /// configuration names, else `us-east-1`.
  public var region: String?
  /// S3: whether the bucket is named in the path (`ENDPOINT/BUCKET/KEY`)
  /// rather than the host (`BUCKET.HOST/KEY`); nil for path style when the
  /// endpoint's host is an IP address or `localhost`, virtual-hosted
  /// otherwise.
  public var pathStyle: Bool?
  /// S3: the storage class blobs are uploaded with (`STANDARD_IA`); nil
  /// for the bucket's default.
  public var storageClass: String?
  /// S3: the size of a multipart upload's parts, and of the ranges a large
  /// blob is pulled in (5 MiB to 5 GiB); nil for 8 MiB.
  public var partSize: Int64?
  /// Whether this user lends it their credentials — ``authEnvironment``'s,
  /// `~/.netrc`'s for its host, the AWS credentials — as their own
  /// ``CredentialBinding`` of its URL says. A spec made in this process
  /// does; one a store read does only when the binding exists. Never
  /// written.
  public internal(set) var lendsCredentials = true

  /// The default ``maxObjectSize`` of a Redis remote: 64 MiB.
  public static let defaultRedisMaxObjectSize: Int64 = 64 << 20
  /// The largest value Redis stores: 512 MiB.
  static let redisValueLimit: Int64 = 512 << 20

  /// A remote spec; see ``validated()``.
  public init(
    name: String, url: String, readOnly: Bool = false,
    maxObjectSize: Int64? = nil, authEnvironment: String? = nil, write: RemoteWrite? = nil,
    trust: [PublicSigningKey]? = nil, endpointURL: String? = nil, region: String? = nil,
    pathStyle: Bool? = nil, storageClass: String? = nil
  ) {
    self.endpointURL = endpointURL
    self.region = region
    self.pathStyle = pathStyle
    self.storageClass = storageClass
    self.write = write
    self.trust = trust
    self.name = name
    self.url = url
    self.readOnly = readOnly
    self.maxObjectSize = maxObjectSize
    self.authEnvironment = authEnvironment
  }

  /// The longest blob uploaded: ``maxObjectSize``, else 64 MiB for a
  /// Redis remote; nil for no limit.
  public var sizeLimit: Int64? {
    if let maxObjectSize { return maxObjectSize }
    return (try? endpoint().kind) == .redis ? Self.defaultRedisMaxObjectSize : nil
  }

  enum CodingKeys: String, CodingKey {
    case name, url
    case readOnly = "read-only"
    case maxObjectSize = "max-object-size"
    case write
    case trust
    case endpointURL = "endpoint"
    case region
    case pathStyle = "path-style"
    case storageClass = "storage-class"
    case partSize = "part-size"
  }

  /// The kind of server the URL names.
  enum Kind { case webDAV, redis, s3 }

  /// The parts of the URL a backend needs.
  struct Endpoint {
    var kind: Kind
    /// The URL without a trailing `/` (WebDAV).
    var base: String
    var host: String
    var port: Int
    /// The Redis database number.
    var database: Int
    /// A user name in the URL (`redis://user@host`), never a password.
    var user: String?
    /// S3: the bucket and the key prefix (no leading or trailing `/`;
    /// empty for the bucket's root).
    var bucket = ""
    var prefix = ""
  }

  /// The URL's parts.
  ///
  /// - Throws: `.invalidArgument` quoting the URL: another scheme, no
  ///   host, a password in it (any login, over HTTP), a Redis database
  ///   that is not a number.
  func endpoint() throws(TroveError) -> Endpoint {
    func bad(_ why: String, remedy: TroveError.Remedy? = nil) -> TroveError {
      let shown = Self.redacted(url)
      return TroveError(
        .invalidArgument, "invalid remote URL '\(shown)': \(why)", value: shown, remedy: remedy)
    }
    guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased()
    else {
      throw bad("expected http://, https://, redis://HOST[:PORT][/DB] or s3://BUCKET[/PREFIX]")
    }
    if scheme == "s3" { return try s3Location(components, bad) }
    guard let host = components.host, !host.isEmpty else { throw bad("it names no host") }
    if components.password != nil {
      throw bad("it holds a password", remedy: .credentialVariable)
    }
    // Over HTTP a user name alone is a credential too (a token as
    // `https://TOKEN@host`); Redis's names an ACL user, not a secret.
    if components.user != nil, scheme == "http" || scheme == "https" {
      throw bad("it holds a login", remedy: .credentialVariable)
    }
    guard components.query == nil, components.fragment == nil else {
      throw bad("a remote URL has no query or fragment")
    }
    if let port = components.port, !(1...65535).contains(port) {
      throw bad("the port \(port) is not from 1 to 65535")
    }
    if let odd = url.unicodeScalars.first(where: { $0.value <= 0x20 || $0.value == 0x7F }) {
      throw bad(
        "it holds \(odd == " " ? "a space" : "a control character"); write it percent-encoded (%20)"
      )
    }
    switch scheme {
    case "http", "https":
      var base = url
      while base.hasSuffix("/") { base.removeLast() }
      return Endpoint(
        kind: .webDAV, base: base, host: host,
        port: components.port ?? (scheme == "http" ? 80 : 443),
        database: 0, user: components.user)
    case "redis":
      let path = components.path.drop { $0 == "/" }
      guard let database = path.isEmpty ? 0 : Int(path) else {
        throw bad("the database '\(path)' is not a number")
      }
      guard (0...65535).contains(database) else {
        throw bad("the database \(database) is not from 0 to 65535")
      }
      return Endpoint(
        kind: .redis, base: url, host: host, port: components.port ?? 6379, database: database,
        user: components.user)
    default:
      throw bad("the scheme '\(scheme)' is not http, https, redis or s3")
    }
  }

  /// `url` with its user part, if any, replaced by `***`, so that no
  /// message repeats a credential.
  static func redacted(_ url: String) -> String {
    URLUserinfo.redacted(url)
  }

  /// This spec, or the error naming what is wrong with it.
  ///
  /// - Throws: `.invalidArgument` naming the value: a name that is not
  ///   1 to 64 letters, digits, `.`, `_` or `-` starting with a letter or
  ///   digit; a bad URL (another scheme, no host, a password in it or,
  ///   over HTTP, any login, a Redis database that is not a number); a
  ///   `max-object-size` of 0 or (Redis) above 512 MiB; an environment
  ///   variable name that is not one.
  public func validated() throws(TroveError) -> RemoteSpec {
    let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
    guard (1...64).contains(name.count), name.allSatisfy(allowed.contains),
      name.first?.isLetter == true || name.first?.isNumber == true
    else {
      throw TroveError(
        .invalidArgument,
        "invalid remote name '\(name)': expected 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit",
        value: name)
    }
    let endpoint = try endpoint()
    let ceiling = endpoint.kind == .redis ? Self.redisValueLimit : Int64.max
    if let maxObjectSize, maxObjectSize <= 0 || maxObjectSize > ceiling {
      throw TroveError(
        .invalidArgument,
        "invalid max-object-size \(maxObjectSize) for remote '\(name)': expected more than 0"
          + (endpoint.kind == .redis ? " and at most 512 MiB (Redis's largest value)" : ""),
        value: String(maxObjectSize))
    }
    if let variable = authEnvironment, !Self.isVariableName(variable) {
      throw TroveError(
        .invalidArgument,
        "invalid auth-env '\(variable)' for remote '\(name)': expected an environment variable's name, such as CACHE_TOKEN",
        value: variable)
    }
    try validateS3Options(endpoint.kind)
    if let trust, trust.isEmpty {
      throw TroveError(
        .invalidArgument,
        "remote '\(name)' trusts no key: give at least one, or none of trust", value: name)
    }
    return self
  }

  /// Whether `text` can name an environment variable, as
  /// ``authEnvironment`` must: a letter or `_`, then letters, digits and
  /// `_`.
  public static func isVariableName(_ text: String) -> Bool {
    let first = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
    let rest = first.union("0123456789")
    guard let head = text.first else { return false }
    return first.contains(head) && text.allSatisfy(rest.contains)
  }

  /// The credential from the environment variable named by
  /// ``authEnvironment``, or nil when none is named or this user lends the
  /// remote no credential.
  ///
  /// - Throws: `.invalidConfig` when the variable is named but not set.
  func credential(environment: [String: String] = ProcessInfo.processInfo.environment)
    throws(TroveError) -> String?
  {
    guard lendsCredentials, let variable = authEnvironment else { return nil }
    guard let value = environment[variable], !value.isEmpty else {
      throw TroveError(
        .invalidConfig,
        "remote '\(name)' takes its credential from the environment variable \(variable), which is not set",
        value: variable)
    }
    return value
  }

  /// The scheme its credential would cross a network in clear by (plain
  /// `http` or `redis` to a host that is not this machine), or nil when
  /// it has none or it would not.
  var credentialInClear: String? {
    guard lendsCredentials, authEnvironment != nil, let endpoint = try? endpoint() else {
      return nil
    }
    let scheme = url.prefix { $0 != ":" }.lowercased()
    guard scheme == "http" || scheme == "redis", !HTTPOrigin.isLoopback(host: endpoint.host)
    else { return nil }
    return scheme
  }

  /// A backend for this remote (no connection is made yet).
  func backend(limits: RemoteLimits = .standard) throws(TroveError) -> any RemoteBackend {
    let endpoint = try endpoint()
    switch endpoint.kind {
    case .webDAV: return try WebDAVBackend(self, endpoint: endpoint, limits: limits)
    case .redis: return try RedisBackend(self, endpoint: endpoint, limits: limits)
    case .s3: return try S3Backend(self, endpoint: endpoint, limits: limits)
    }
  }
}
