/// A URL to bring into the store, and what its bytes must be.
public struct FetchRequest: Sendable, Hashable {
  /// When the network may be used.
  public enum Mode: String, Sendable, Hashable {
    /// A fresh cached copy is served as it is; a stale one is revalidated.
    case normal
    /// The server is always asked: the cached copy is revalidated even
    /// when fresh or `immutable` (`--refresh`).
    case refresh
    /// The network is never used: what is cached is served, a miss is
    /// `.notFound` (`--offline`).
    case offline
  }

  /// The URL (`http://` or `https://`). It is recorded under ``key``: a
  /// login in it (`http://user:password@host/…`) is used for this
  /// request's origin and never stored or printed.
  public var url: String
  /// The publisher's checksums: the body must match every one. With one
  /// whose object the store holds, no request is made.
  public var expected: [Checksum]
  /// The body's length, when the publisher gives it.
  public var expectedSize: Int64?
  /// When the network may be used.
  public var mode: Mode
  /// Serve a cached copy fetched or revalidated less than this long ago
  /// without asking the server, whatever its headers said.
  public var maxAge: Duration?
  /// Extra request header lines (`Authorization: Bearer …`), sent to the
  /// URL's origin only: a redirect to another scheme, host or port goes
  /// without them.
  public var headers: [String]
  /// The credential for the URL's origin when the URL holds none:
  /// `user:password` for basic authentication, else a bearer token
  /// (`Authorization: Bearer`). Sent as ``headers`` are; never stored.
  /// With neither, `~/.netrc` is used where it names the host, unless
  /// ``usesNetrc`` is false.
  public var credential: String?
  /// Whether `~/.netrc` may give a login: false for a URL someone else
  /// asked for (a proxy's client), who must not borrow the user's.
  public var usesNetrc = true
  /// The hosts a redirect may lead to, nil for any: `HOST` (any port) or
  /// `HOST:PORT`, in lower case, an IPv6 address in brackets. A redirect
  /// anywhere else fails the fetch (`.unavailable`): a proxy that serves
  /// only some hosts must not be led to others.
  public var redirectHosts: [String]?
  /// What to do when the volume is low (see ``PutPriority``).
  public var priority: PutPriority
  /// Other URLs serving the same bytes, asked in order when ``url`` fails:
  /// it cannot be reached, answers 404, 5xx or another failure status, or
  /// sends bytes that do not match ``expected`` or ``expectedSize`` (which
  /// hold for whichever URL serves the body; nothing from a mismatch is
  /// kept). The result is recorded under ``key`` all the same, with the URL
  /// that served it (``KeyOrigin/servedBy``). A login in one
  /// (`http://user:pw@mirror/…`) goes to that mirror only; ``headers`` and
  /// ``credential`` go to a mirror only when it has the URL's origin.
  /// The store's rewrite rules (``URLRewrite``) apply to each.
  public var mirrors: [String]
  /// A zsync control file describing the URL's body (`zsyncmake`'s
  /// `FILE.zsync`; empty: the URL with `.zsync` added). When the store
  /// holds an earlier body of the URL and the server has a new one, the
  /// blocks the earlier body has are taken from it and only the rest is
  /// downloaded, with `Range` requests; the rebuilt body is checked
  /// against the control file's SHA-1 or SHA-256 and the expectations
  /// before it is stored (``FetchSource/delta``). A control file that
  /// cannot be used, a server that does not answer ranges, or a mismatch,
  /// and the body is downloaded whole, with a warning saying why.
  public var zsyncURL: String?

  public init(
    url: String, expected: [Checksum] = [], expectedSize: Int64? = nil, mode: Mode = .normal,
    maxAge: Duration? = nil, headers: [String] = [], credential: String? = nil,
    priority: PutPriority = .important, mirrors: [String] = []
  ) {
    self.url = url
    self.expected = expected
    self.expectedSize = expectedSize
    self.mode = mode
    self.maxAge = maxAge
    self.headers = headers
    self.credential = credential
    self.priority = priority
    self.mirrors = mirrors
  }

  /// The key the URL is recorded under, and the URL every message and
  /// result gives: ``url`` without its userinfo.
  public var key: String { URLUserinfo.split(url).url }
}

/// How transfers behave: timeouts, retries, redirects.
public struct FetchOptions: Sendable, Hashable {
  /// Seconds to wait for a connection.
  public var connectTimeout: Double = 30
  /// A transfer slower than ``stallSpeed`` bytes a second for this many
  /// seconds has stalled and fails (there is no limit on a whole transfer).
  public var stallTimeout: Double = 30
  /// See ``stallTimeout``.
  public var stallSpeed = 10
  /// Redirects followed at most (only to http:// and https://, never
  /// from https:// to http://).
  public var maxRedirects = 10
  /// Transient failures (a dropped connection, a stall, 408, 429, 5xx)
  /// retried at most this many times; each retry resumes what was received.
  public var retries = 3
  /// The first retry's delay in seconds, doubled for each next (at most 30 s);
  /// a `Retry-After` of up to 60 s is honoured instead.
  public var retryDelay: Double = 1
  /// The `User-Agent` header: `trove/` and the version by default.
  public var userAgent = TroveVersion.userAgent

  public init() {}
}

/// Where a fetch's bytes came from.
public enum FetchSource: String, Sendable, Codable {
  /// Downloaded whole.
  case network
  /// Downloaded from where an interrupted transfer stopped.
  case resumed
  /// The server said the cached copy is current (304).
  case revalidated
  /// Served from the store without asking the server.
  case cache
  /// Rebuilt from the URL's earlier body and the ranges it lacked, found
  /// with a zsync control file (``FetchRequest/zsyncURL``).
  case delta
}

/// What a fetch did.
public struct FetchResult: Sendable, Hashable, Codable {
  /// The URL asked for, without its userinfo (``FetchRequest/key``).
  public var url: String
  /// The object's digest.
  public var digest: BlobDigest
  /// Its length.
  public var size: Int64
  /// Where the bytes came from.
  public var source: FetchSource
  /// The last HTTP status (200, 206, 304), nil when no request was made.
  public var httpStatus: Int?
  /// Body bytes received from the network by this fetch.
  public var bytesTransferred: Int64
  /// How long it took, seconds.
  public var seconds: Double
  /// The publishers' checksums the bytes were verified against.
  public var verified: [Checksum]
  /// The URL asked for the bytes, before any redirect, without its login:
  /// ``url``, a mirror, or what a rewrite rule made of either; nil when no
  /// request was made (``FetchSource/cache``).
  public var servedBy: String? = nil
}

/// A running transfer's progress, for a progress line.
public struct FetchProgress: Sendable {
  /// The URL.
  public var url: String
  /// Bytes of the body held so far (a resumed prefix included).
  public var received: Int64
  /// The body's length, when known.
  public var total: Int64?
  /// The response's `Content-Type`, `ETag` and `Last-Modified`, checked as
  /// a fetch records them (nil when absent or unusable): what a server
  /// sending the body on as it arrives describes it with.
  public var contentType: String? = nil
  public var etag: String? = nil
  public var lastModified: String? = nil
  /// The part file the body is written to as it arrives (the bytes from
  /// its start, a resumed prefix included), for a server that sends them
  /// on before the fetch ends; nil when the body goes to a private temp
  /// file. Unverified until the fetch returns: a reader checks what it
  /// read against the result's digest.
  @_spi(Serving) public var partFile: String? = nil
  /// Set in one last report when the body is whole and verified — its
  /// length as announced, every checksum expected of it matched — before
  /// the store makes it durable: the digest of the part file's bytes. A
  /// server reading along may end its responses then; the fetch may still
  /// fail to store them.
  @_spi(Serving) public var verified: BlobDigest? = nil
}
