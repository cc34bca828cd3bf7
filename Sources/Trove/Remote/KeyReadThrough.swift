/// What ``Store/pull(key:from:)`` did.
public struct RemoteKeyPull: Sendable, Hashable, Codable {
  /// The key.
  public var key: String
  /// The object it is bound to now.
  public var digest: BlobDigest
  /// The object's length.
  public var size: Int64
  /// False when the store had the key bound already (nothing was asked
  /// of the remote).
  public var bound: Bool
  /// True when the blob came over the network; false when the store held
  /// it (only the key was bound) or the key was bound already.
  public var downloaded: Bool
}

/// Reading a key through the remotes: a key (a URL a fetch stored) the
/// store does not hold is looked up in the remotes' key records.
extension Store {
  /// Binds `key` from the first remote whose record of it names a blob it
  /// (or this store) holds: the blob is pulled, rehashed, and `key` bound
  /// to it with the record's origin and checksums. Returns whether `key` is
  /// bound now. For a key the store does not hold (`trove get KEY` reads
  /// through this); never throws — a remote that fails is a warning
  /// (``StoreConfiguration/onWarning``) and opens its circuit breaker.
  @discardableResult
  public func pullKey(_ key: String) -> Bool { readThroughKey(key) }

  /// Binds `key` from the record of it on the remote named `remote`,
  /// pulling the blob the record names when the store lacks it (rehashed
  /// on the way in, as ``pull(_:from:)`` does), unless the store has the
  /// key bound already. The record's length and checksums are checked
  /// against the bytes before the key is bound; its validators are kept,
  /// its freshness is not (a fetch asks the origin before serving it). The
  /// remote is asked whatever its circuit breaker says (it was named): its
  /// answer closes the breaker, its failure keeps it open.
  ///
  /// - Throws: `.notFound` when the remote has no record of `key` or does
  ///   not hold the blob it names; `.checksumMismatch` when the blob's
  ///   bytes are not its name, or the record cannot be used (a validator
  ///   that is not a header value) or claims a length or a checksum they do
  ///   not have (nothing is bound); `.unavailable` or `.transferFailed`
  ///   when the remote fails (a record longer than 64 KiB included).
  @discardableResult
  public func pull(key: String, from remote: String) throws(TroveError) -> RemoteKeyPull {
    try requireWritable()
    let spec = try self.remote(named: remote)
    if let binding = try binding(forKey: key), let entry = try entry(for: binding.digest) {
      return RemoteKeyPull(
        key: key, digest: binding.digest, size: entry.size, bound: false, downloaded: false)
    }
    return try askingDirectly(spec.name) { () throws(TroveError) in
      let backend = try openRemote(spec, writing: false)
      guard let bound = try bindFromRecord(key, spec: spec, backend: backend) else {
        throw TroveError(
          .notFound, "remote '\(spec.name)' has no record of key '\(key)'", value: key)
      }
      return bound
    }
  }

  /// Whether the remote named `remote` has a record of `key` (one that
  /// parses and names `key`). Nothing is downloaded but the record.
  ///
  /// - Throws: `.unavailable` or `.transferFailed` when the remote fails.
  public func hasKeyRecord(_ key: String, on remote: String) throws(TroveError) -> Bool {
    let spec = try self.remote(named: remote)
    return try askingDirectly(spec.name) { () throws(TroveError) in
      let record: RemoteKeyRecord?
      do throws(TroveError) {
        record = try openRemote(spec, writing: false).readKeyRecord(key)
      } catch  where error.code == .checksumMismatch {
        return false  // one that cannot be used is none
      }
      guard let record else { return false }
      return spec.trustedKeys.map { record.facts(trusting: $0) != nil } ?? true
    }
  }

  /// The name of the first remote (of those the breaker admits, in order)
  /// whose record of `key` names a blob that remote or this store holds;
  /// nil when none. Nothing is downloaded and nothing bound.
  public func remoteHolding(key: String) -> String? {
    askRemotes { (spec, backend) throws(TroveError) -> String? in
      // Answered only once every request succeeded: a failure is the
      // breaker's (askRemotes), and must not find it closed by this one.
      var held = false
      if let record = try backend.readKeyRecord(key), let digest = record.blobDigest,
        spec.trustedKeys.map({ record.facts(trusting: $0) != nil }) ?? true
      {
        held = try objects.find(digest, confirmingMiss: true) != nil
        if !held { held = try backend.exists(digest) }
      }
      remoteAnswered(spec.name, held ? [:] : ["misses": 1])
      return held ? spec.name : nil
    }
  }

  /// Asks the remotes, in order, for `key`'s record; from the first that
  /// has one whose blob it holds (or the store holds), pulls the blob
  /// (rehashed, as ``readThrough(_:)`` does) and binds `key` to it here,
  /// with the origin and checksums the record carries. Returns whether
  /// `key` is bound now. Never throws: failures are warnings, as for
  /// ``readThrough(_:)``.
  ///
  /// The record is a hint: the binding keeps its validators but no
  /// freshness (``Freshness/pulled(_:)``), so a fetch revalidates it
  /// with the origin before serving it, and checks it against the fetch's
  /// expectations as any cached object.
  func readThroughKey(_ key: String) -> Bool {
    guard !isReadOnly else { return false }
    return askRemotes { (spec, backend) throws(TroveError) -> Bool? in
      // A blob pulled is a hit, counted as it arrives: a record found
      // lying afterwards is counted corrupt besides.
      let bound = try bindFromRecord(key, spec: spec, backend: backend) { pulled in
        notePulled(pulled.digest)
        remoteAnswered(spec.name, ["hits": 1, "bytes": pulled.size])
      }
      guard let bound else {
        remoteAnswered(spec.name, ["misses": 1])
        return nil
      }
      if !bound.downloaded { remoteAnswered(spec.name) }
      return true
    } ?? false
  }

  /// Reads `key`'s record on `backend` and binds `key` to the blob it
  /// names, pulling the blob first when the store lacks it. Nil when the
  /// remote has no record of `key`.
  ///
  /// - Throws: `.checksumMismatch` when the record cannot be used (see
  ///   `RemoteKeyRecord.validated(remote:)`), claims a length or a checksum
  ///   the bytes do not have (the key is not bound; a blob pulled stays,
  ///   its bytes being its name), or when the remote's bytes are not the
  ///   blob's name; `.notFound` when the remote lacks the blob.
  /// `onPulled` hears of the blob pulled, if one is.
  private func bindFromRecord(
    _ key: String, spec: RemoteSpec, backend: any RemoteBackend,
    onPulled: (RemotePull) -> Void = { _ in }
  ) throws(TroveError) -> RemoteKeyPull? {
    guard let record = try backend.readKeyRecord(key), let digest = record.blobDigest else {
      return nil
    }
    // From a remote that must sign, what a trusted key signed of the
    // object is checked against its bytes, here or as they arrive.
    let facts = try trustedFacts(of: record, spec: spec)
    var downloaded = false
    let size: Int64
    if let entry = try entry(for: digest) {
      if let facts { try checkLocal(digest, against: facts, spec: spec) }
      size = entry.size
    } else {
      let pulled = try pull(digest, from: backend, spec: spec, signed: facts)
      onPulled(pulled)
      size = pulled.size
      downloaded = true
    }
    try checkClaims(
      of: record, key: key, digest: digest, size: size, source: "remote '\(spec.name)': ")
    // A binding this store made meanwhile (a fetch of its own) is newer
    // than the record: it stays.
    // Validators, but no freshness: the origin says whether it is current.
    let origin = record.origin.map(Freshness.pulled)
    try objects.bind(key: key, to: digest, origin: origin, existing: .keep, pulled: true)
    var result = RemoteKeyPull(
      key: key, digest: digest, size: size, bound: true, downloaded: downloaded)
    if let binding = try binding(forKey: key), binding.digest != digest,
      let entry = try entry(for: binding.digest)
    {
      // Kept: what this store bound meanwhile, not the record's.
      result = RemoteKeyPull(
        key: key, digest: binding.digest, size: entry.size, bound: false,
        downloaded: downloaded)
    }
    return result
  }
}

extension Store {
  /// Checks what `record` (of `key`, naming `digest`, whose bytes are
  /// `size` long and stored here) claims: its length, and each checksum,
  /// computed from the bytes (and recorded so). A record whose claims the
  /// bytes do not bear binds nothing. `source` starts each message.
  ///
  /// - Throws: `.checksumMismatch` naming the key and the claim.
  func checkClaims(
    of record: RemoteKeyRecord, key: String, digest: BlobDigest, size: Int64, source: String
  ) throws(TroveError) {
    if let claimed = record.origin?.size, claimed != size {
      throw TroveError(
        .checksumMismatch,
        "\(source)the record of key '\(key)' says \(digest) is \(claimed) bytes, and it is \(size); key not bound",
        value: key)
    }
    let claimed = record.parsedChecksums.filter { $0.algorithm != .xxh128 }
    guard !claimed.isEmpty else { return }
    let actual = try checksums(of: digest, Set(claimed.map(\.algorithm)))
    if let wrong = claimed.first(where: { actual[$0.algorithm] != $0 }) {
      throw TroveError(
        .checksumMismatch,
        "\(source)the record of key '\(key)' says \(digest) has \(wrong), which its bytes do not; key not bound",
        value: key)
    }
  }
}
