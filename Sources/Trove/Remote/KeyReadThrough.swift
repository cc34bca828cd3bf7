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

  /// Asks the remotes, in order, for `key`'s record; from the first that
  /// has one whose blob it holds (or the store holds), pulls the blob
  /// (rehashed, as ``readThrough(_:)`` does) and binds `key` to it here,
  /// with the origin and checksums the record carries. Returns whether
  /// `key` is bound now. Never throws: failures are warnings, as for
  /// ``readThrough(_:)``.
  ///
  /// The record is a hint: a fetch then treats the binding as it treats
  /// any cached one — served while fresh, else revalidated with the
  /// record's validators, and checked against the fetch's expectations.
  func readThroughKey(_ key: String) -> Bool {
    guard !isReadOnly else { return false }
    return askRemotes { (spec, backend) throws(TroveError) -> Bool? in
      guard let record = try backend.readKeyRecord(key), let digest = record.blobDigest else {
        remoteAnswered(spec.name)
        return nil
      }
      if try objects.find(digest) == nil {
        let pulled = try pull(digest, from: backend, spec: spec)
        notePulled(digest)
        remoteAnswered(spec.name, ["hits": 1, "bytes": pulled.size])
      } else {
        remoteAnswered(spec.name)
      }
      // The record's checksums are claims: each is computed from the
      // bytes (and recorded so) before the key is bound; a record whose
      // claims the bytes do not bear is corrupt, and binds nothing.
      let claimed = record.parsedChecksums.filter { $0.algorithm != .xxh128 }
      if !claimed.isEmpty {
        let actual = try checksums(of: digest, Set(claimed.map(\.algorithm)))
        if let wrong = claimed.first(where: { actual[$0.algorithm] != $0 }) {
          pendingCounts.withLock { _ = $0.pulled.remove(digest) }
          remoteAnswered(spec.name, ["corrupt": 1])
          configuration.onWarning?(
            "remote '\(spec.name)': the record of key '\(key)' says \(digest) has \(wrong), which its bytes do not; ignored"
          )
          return nil
        }
      }
      // A binding this store made meanwhile (a fetch of its own) is newer
      // than the record: it stays.
      try objects.bind(key: key, to: digest, origin: record.origin, existing: .keep)
      return true
    } ?? false
  }
}
