import Foundation

/// `trove remote check`: whether a remote can be used as configured.
extension Store {
  /// What ``Store/checkRemote(named:cleaningUploadsOlderThan:)`` found.
  public struct RemoteCheck: Sendable, Hashable, Encodable {
    /// The remote's name.
    public var name: String
    /// Its URL.
    public var url: String
    /// `webdav` or `redis`.
    public var kind: String
    /// Whether this store only reads it.
    public var readOnly: Bool
    /// Whether it answered.
    public var reachable: Bool
    /// Whether a probe blob was written, read back and deleted; nil for a
    /// read-only remote (not tried) or one that did not answer.
    @Nullable public var writable: Bool?
    /// Its layout record; nil when it has none (or did not answer).
    @Nullable public var layout: RemoteLayout?
    /// Whether this check wrote the layout record (a new remote).
    public var layoutWritten: Bool
    /// The first request's round trip in seconds (connection included).
    @Nullable var latencySeconds: Double?
    /// S3: seconds this machine's clock is ahead of the server's (behind
    /// when negative), from the answer's `Date`; nil for other remotes.
    @Nullable public var clockSkewSeconds: Int64?
    /// S3 with `--clean`: the unfinished multipart uploads found under
    /// the prefix, and how many of them were aborted; nil when not asked.
    @Nullable public var pendingUploads: Int?
    @Nullable public var abortedUploads: Int?
    /// Why it failed; nil when it did not.
    @Nullable public var error: String?

    /// The first request's round trip in milliseconds (connection included).
    public var latencyMilliseconds: Double? {
      get { latencySeconds.map { $0 * 1000 } }
      set { latencySeconds = newValue.map { $0 / 1000 } }
    }

    /// Whether the remote can be used as configured.
    public var isUsable: Bool { reachable && error == nil && (readOnly || writable == true) }
  }

  /// The clock skew beyond which S3 refuses a signed request.
  public static let s3SkewLimit: Int64 = 15 * 60

  /// Checks the remote named `name`: reads its layout record (timing the
  /// round trip); unless it is read-only, writes the record when missing
  /// and uploads a small probe blob, reads its length back and deletes it.
  /// On S3, also compares this machine's clock with the server's, and with
  /// `cleaningUploadsOlderThan` aborts the multipart uploads left under the
  /// prefix that started at least that many seconds ago.
  /// Failures are reported in the result, not thrown. The remote is asked
  /// whatever its circuit breaker says: an answer closes the breaker, a
  /// failure to reach it keeps it open.
  ///
  /// - Throws: `.notFound` when no remote has that name; `.invalidArgument`
  ///   when asked to clean uploads of a remote that is not S3.
  public func checkRemote(named name: String, cleaningUploadsOlderThan age: Int64? = nil)
    throws(TroveError) -> RemoteCheck
  {
    let spec = try remote(named: name)
    let kind: String
    switch try? spec.endpoint().kind {
    case .redis: kind = "redis"
    case .s3: kind = "s3"
    default: kind = "webdav"
    }
    if age != nil, kind != "s3" {
      throw TroveError(
        .invalidArgument,
        "--clean is for s3:// remotes (unfinished multipart uploads); remote '\(spec.name)' is not one",
        value: spec.name)
    }
    var check = RemoteCheck(
      name: spec.name, url: spec.url, kind: kind, readOnly: spec.readOnly, reachable: false,
      writable: nil, layout: nil, layoutWritten: false, latencySeconds: nil,
      clockSkewSeconds: nil, pendingUploads: nil, abortedUploads: nil, error: nil)
    let backend: any RemoteBackend
    var s3: S3Backend?
    do throws(TroveError) {
      backend = try spec.backend()
      s3 = backend as? S3Backend
      warnOfCredentialInClear(spec)
      let clock = ContinuousClock()
      let started = clock.now
      let layout = try backend.readLayout()
      let elapsed = started.duration(to: clock.now)
      check.latencySeconds =
        Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
      check.reachable = true
      check.layout = layout
      check.clockSkewSeconds = s3.flatMap { $0.clockSkew($0.lastDate) }
      remoteAnswered(spec.name)
    } catch {
      check.clockSkewSeconds = s3.flatMap { $0.clockSkew($0.lastDate) }
      if let skew = check.clockSkewSeconds, abs(skew) > Self.s3SkewLimit {
        check.reachable = true
        check.error = Self.skewError(spec.name, skew)
        remoteAnswered(spec.name)
        return check
      }
      // Reached, but its layout record cannot be used.
      check.reachable = error.code == .unsupportedFormat
      check.error = line(error)
      if error.code == .unavailable || error.code == .transferFailed {
        remoteFailed(spec.name, error)
      } else if check.reachable {
        remoteAnswered(spec.name)
      }
      return check
    }
    if let skew = check.clockSkewSeconds, abs(skew) > Self.s3SkewLimit {
      check.error = Self.skewError(spec.name, skew)
      return check
    }
    if let s3, let age {
      do throws(TroveError) {
        let cleaned = try s3.abortUploads(olderThan: age)
        check.pendingUploads = cleaned.found
        check.abortedUploads = cleaned.aborted
      } catch {
        check.error = line(error)
        return check
      }
    }
    guard !spec.readOnly else { return check }
    do throws(TroveError) {
      if check.layout == nil {
        try backend.writeLayout(.current)
        check.layout = .current
        check.layoutWritten = true
      }
      check.writable = try probe(backend)
      if check.writable == false {
        check.error = "remote '\(spec.name)': a probe blob written to it could not be read back"
      }
    } catch {
      check.writable = false
      check.error = line(error)
    }
    return check
  }

  /// The check's error for a clock `skew` seconds off the server's.
  private static func skewError(_ remote: String, _ skew: Int64) -> String {
    "remote '\(remote)': this machine's clock is \(abs(skew)) s \(skew > 0 ? "ahead of" : "behind") the server's; S3 refuses requests signed more than 15 minutes off, so every SigV4-signed request will fail: set the clock right (NTP)"
  }

  /// Uploads a small blob no one else has, checks its length on the
  /// remote, and deletes it. True when that round trip worked.
  private func probe(_ backend: any RemoteBackend) throws(TroveError) -> Bool {
    let bytes = Array("trove remote check \(RemoteNames.randomName())\n".utf8)
    let digest = XXH3Hasher.digest(bytes)
    let temp = StoreLayout.temporaryName("probe")
    let file = try attempt("create temporary file in", tmpPath) { () throws(SystemCallError) in
      let fd = try FileDescriptor.open(
        temp, in: tmpDirectory, [.readWrite, .create, .exclusive], permissions: 0o600)
      do throws(SystemCallError) {
        try fd.writeAll(bytes)
      } catch {
        fd.close()
        throw error
      }
      return fd
    }
    defer {
      file.close()
      try? tmpDirectory.removeFile(temp)
    }
    let uploaded = try backend.upload(digest, from: file, size: Int64(bytes.count))
    let size = try backend.size(digest)
    _ = try backend.delete(digest)
    return uploaded != .tooLarge && size == Int64(bytes.count)
  }
}
