/// Pins and keys: written only where the object is confirmed present.
extension ObjectTable {
  /// Pins `digest` under `name` until `expires`, in the transaction that
  /// confirms the object is there: a pin either protects its object or fails.
  ///
  /// - Throws: `.notFound` when the store does not hold `digest`.
  func pin(_ digest: BlobDigest, name: String, expires: Int64?) throws(TroveError) {
    let now = currentTimeNanoseconds()
    do throws(TroveError) {
      try withPresent(digest, "pin \(digest)") { (tx) throws(TroveError) in
        try tx.insertPin(digest, name: name, expires: expires, now: now)
        journal([JournalRecord(op: .pin, digest: digest, name: name, expires: expires)], tx)
      }
    } catch {
      journalAsIs(pin: (digest, name))
      throw error
    }
  }

  /// Removes `name`'s pin of `digest`; whether there was one.
  func unpin(_ digest: BlobDigest, name: String) throws(TroveError) -> Bool {
    do throws(TroveError) {
      return try index().write("unpin \(digest)") { (tx) throws(TroveError) in
        let removed = try tx.deletePin(digest, name: name)
        if removed { journal([JournalRecord(op: .unpin, digest: digest, name: name)], tx) }
        return removed
      }
    } catch {
      journalAsIs(pin: (digest, name))
      throw error
    }
  }

  /// Removes `key`; whether it was bound. The object stays.
  func unbind(key: String) throws(TroveError) -> Bool {
    do throws(TroveError) {
      return try index().write("remove key '\(key)'") { (tx) throws(TroveError) in
        let removed = try tx.deleteKey(key)
        if removed { journal([JournalRecord(op: .unbind, key: key)], tx) }
        return removed
      }
    } catch {
      journalAsIs(key: key)
      throw error
    }
  }

  /// Marks every key bound so far as not this user's own binding (as one
  /// a remote's record chose): a signer vouches for none of them. For a
  /// store that other users could write until now.
  func markKeysPulled() throws(TroveError) {
    try index().write("mark the keys as others' bindings") { (tx) throws(TroveError) in
      let marked = try tx.markKeysPulled()
      journal(
        marked.map {
          JournalRecord(
            op: .bind, digest: $0.digest, key: $0.key, origin: $0.origin, pulled: true)
        }, tx)
    }
  }

  /// After a change that failed — its line may be in `references.log`
  /// though its transaction rolled back — appends what the index holds
  /// now for that pin or key (or every pin and key of `digests`, after a
  /// failed removal), so the log's last word is the truth.
  /// Best effort, like every append.
  func journalAsIs(pin: (BlobDigest, String)? = nil, key: String? = nil, digests: [BlobDigest] = [])
  {
    _ = try? index().write("journal a failed change") { (tx) throws(TroveError) in
      if !digests.isEmpty {
        // A failed removal: every pin and key the index still holds for them.
        let wanted = Set(digests)
        let pins = try tx.pins().filter { wanted.contains($0.digest) }
        let keys = try tx.keys().filter { wanted.contains($0.digest) }
        journal(
          pins.map {
            JournalRecord(
              op: .pin, digest: $0.digest, name: $0.name, expires: $0.expiresNanoseconds)
          }
            + keys.map {
              JournalRecord(
                op: .bind, digest: $0.digest, key: $0.key, origin: $0.origin,
                pulled: $0.isPulled ? true : nil)
            }, tx)
      }
      if let (digest, name) = pin {
        let held = try tx.pins().first { $0.digest == digest && $0.name == name }
        journal(
          [
            held.map {
              JournalRecord(op: .pin, digest: digest, name: name, expires: $0.expiresNanoseconds)
            }
              ?? JournalRecord(op: .unpin, digest: digest, name: name)
          ], tx)
      }
      if let key {
        let bound = try tx.binding(forKey: key)
        journal(
          [
            bound.map {
              JournalRecord(
                op: .bind, digest: $0.digest, key: key, origin: $0.origin,
                pulled: $0.isPulled ? true : nil)
            } ?? JournalRecord(op: .unbind, key: key)
          ], tx)
      }
    }
  }

  /// Points `key` at `digest` with what a fetch learnt about it (`origin`,
  /// nil for a plain binding), and records the publishers' `checksums`
  /// verified against its bytes — all in the transaction that confirms the
  /// object is there.
  ///
  /// - Throws: `.notFound` when the store does not hold `digest`.
  func bind(
    key: String?, to digest: BlobDigest, origin: KeyOrigin? = nil, checksums: [Checksum] = [],
    existing: KeyRequest.ExistingKey = .replace, pulled: Bool = false
  ) throws(TroveError) {
    let request = KeyRequest(
      key: key, origin: origin, checksums: checksums, existing: existing, pulled: pulled)
    do throws(TroveError) {
      try withPresent(digest, "bind key '\(key ?? digest.description)'") {
        (tx) throws(TroveError) in
        try record(request, for: digest, tx)
      }
    } catch {
      if let key { journalAsIs(key: key) }
      throw error
    }
  }

  /// Writes `request` (its key, origin and checksums) for `digest` inside
  /// `tx`, a transaction in which the object is there, and journals the key.
  /// A put that names a key binds it this way in the transaction that
  /// publishes the object (or counts its dedup hit), so no sweep can come
  /// between the object and its key.
  func record(_ request: KeyRequest?, for digest: BlobDigest, _ tx: IndexSession) throws(TroveError)
  {
    var lines: [JournalRecord] = []
    try record(request, for: digest, tx, journalling: &lines)
    journal(lines, tx)
  }

  /// ``record(_:for:_:)`` leaving the journal's lines in `lines`, for the
  /// caller to append in the same transaction: a group's in one write.
  func record(
    _ request: KeyRequest?, for digest: BlobDigest, _ tx: IndexSession,
    journalling lines: inout [JournalRecord]
  ) throws(TroveError) {
    guard let request else { return }
    let now = currentTimeNanoseconds()
    for key in request.keys {
      if request.existing != .replace, let bound = try tx.binding(forKey: key) {
        // Already bound here: to these bytes, it keeps what a fetch learnt;
        // to others, it keeps them unless the caller repoints it.
        if bound.digest == digest { continue }
        if request.existing == .keep {
          request.onKept?(key, bound.digest)
          continue
        }
      }
      let origin = key == request.key ? request.origin : nil
      let pulled = key == request.key ? request.pulled : request.pulledKeys.contains(key)
      try tx.insertKey(key, digest: digest, origin: origin, pulled: pulled, at: now)
      lines.append(
        JournalRecord(
          op: .bind, digest: digest, key: key, origin: origin,
          checksums: key == request.key && !request.checksums.isEmpty ? request.checksums : nil,
          pulled: pulled ? true : nil))
    }
    try tx.insertChecksums(request.checksums, for: digest)
  }

  /// Runs `body` in a write transaction in which `digest`'s object is
  /// there, with its row (adopted if it was missing); or throws
  /// `.notFound` (dropping a row left without its file).
  func withPresent(
    _ digest: BlobDigest, _ action: String, _ body: (IndexSession) throws(TroveError) -> Void
  ) throws(TroveError) {
    var measured: [BlobDigest: Measured] = [:]
    for _ in 0..<2 {
      // Not there is an answer, not a failure: the transaction commits what
      // reconciling found (a row dropped, an `rm` finished) before it throws.
      let outcome = try index().write(action) { (tx) throws(TroveError) -> Bool? in
        var deferred: [BlobDigest] = []
        _ = try reconcile(tx, digest, repair: true, measured: measured, deferred: &deferred)
        if !deferred.isEmpty { return nil }
        guard try tx.entry(for: digest) != nil else { return false }
        try body(tx)
        return true
      }
      switch outcome {
      case true?: return
      case false?: throw notFound(digest)
      case nil: measured = measure([digest])
      }
    }
    throw notFound(digest)
  }
}

/// A key (and what a fetch learnt about its object) to bind in the
/// transaction that confirms or publishes the object.
struct KeyRequest: Sendable {
  var key: String?
  var origin: KeyOrigin? = nil
  var checksums: [Checksum] = []
  /// More keys to bind to the same object, without an origin (an import's).
  var moreKeys: [String] = []
  /// What becomes of a key the store has bound already.
  var existing = ExistingKey.replace
  /// `key` comes from a remote's record (``KeyBinding/isPulled``).
  var pulled = false
  /// The keys of `moreKeys` that are someone else's word, not this
  /// store's (``KeyBinding/isPulled``): a signer never vouches for them.
  var pulledKeys: Set<String> = []
  /// Hears of each key kept bound to another digest (`.keep`): the key and
  /// that digest. Called inside the transaction.
  var onKept: (@Sendable (_ key: String, _ boundTo: BlobDigest) -> Void)? = nil

  /// `key`, then `moreKeys`.
  var keys: [String] { (key.map { [$0] } ?? []) + moreKeys }

  /// What a binding does to a key the store has bound already.
  enum ExistingKey: Sendable {
    /// Points it at the new digest (a put's, a fetch's key).
    case replace
    /// Keeps its binding; one to the same digest keeps its origin.
    case keep
    /// Points it at the new digest unless it names that one already (then
    /// it keeps its origin).
    case repoint
  }
}

extension ObjectTable {
  /// Records `manifest` as `digest`'s — cut from its bytes after it was
  /// published (a clone put, an index rebuilt), or in place of a damaged
  /// one — if the object is still there, raw.
  func recordManifest(_ manifest: ChunkManifest, of digest: BlobDigest) throws(TroveError) {
    try withPresent(digest, "record the chunks of \(digest)") { (tx) throws(TroveError) in
      guard let entry = try tx.entry(for: digest), !entry.isCompressed,
        entry.size == manifest.size
      else { return }
      try tx.replaceManifest(manifest, of: digest)
    }
  }
}

extension ObjectTable {
  /// Marks the manifests of `digests` (nil: every one) examined, with no
  /// block shared.
  func markExamined(_ digests: [BlobDigest]?) throws(TroveError) {
    try index().write("mark manifests examined") { (tx) throws(TroveError) in
      guard let digests else { return try tx.markAllExamined() }
      for digest in digests { try tx.markExamined(digest) }
    }
  }

  /// Records what sharing `digest`'s blocks with its earlier versions did:
  /// `bytes` of its file now share blocks with each source's (in place of
  /// what an earlier sharing recorded), and its manifest is examined. A source removed meanwhile is left out (its
  /// blocks are `digest`'s alone); nothing is recorded when `digest` itself
  /// is gone.
  func recordSharing(_ digest: BlobDigest, with sources: [(BlobDigest, Int64)])
    throws(TroveError)
  {
    try index().write("record the blocks \(digest) shares") { (tx) throws(TroveError) in
      guard try tx.entry(for: digest) != nil else { return }
      try tx.clearSharing(of: digest)
      for (source, bytes) in sources where try tx.entry(for: source) != nil {
        try tx.setSharing(digest, source: source, bytes: bytes)
      }
      try tx.markExamined(digest)
    }
  }
}
