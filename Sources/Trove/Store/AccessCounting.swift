import Synchronization

/// Hits and misses a ``Store`` counted and has not written to the index
/// yet (``StoreStatistics/hits``, ``StoreStatistics/misses``).
///
/// Every read served is counted, and only those: a `get` or `bytes` of an
/// object the store holds is a hit, of one it does not a miss; a fetch is
/// one or the other, and writing its object out afterwards is part of it.
/// Reads the store makes for itself (verify, export, a remote push,
/// recompress) count nothing. Counting in memory and writing the counts
/// together — with the first count a second or more after the oldest
/// pending one, when statistics are read, and when the store is closed —
/// costs one small write per batch, not one per read: a process of the
/// `trove` command writes its counts once, as it ends. A
/// process killed (or one that ends with `exit` before its store is
/// closed, as a `get -` into a closed pipe does) loses its pending counts;
/// a read-only store counts nothing. What reading through each remote did
/// (``RemoteStatus``'s hits, misses, corrupt, bytes, skipped) is kept and
/// written the same way; a remote's failures and its breaker are written
/// at once (other processes must see them).
struct PendingAccessCounts: Sendable {
  var hits: Int64 = 0
  /// Hits on objects read through a remote (``Store/readThrough(_:)``).
  var remoteHits: Int64 = 0
  var misses: Int64 = 0
  /// When the oldest count not yet written was made (nanoseconds), or nil.
  var since: Int64?
  /// Objects fetches of this store counted and have not handed out yet,
  /// with how many: the next read of each is part of a fetch.
  var fetched: [BlobDigest: Int] = [:]
  /// Objects read through a remote into the store and not handed out yet:
  /// the next read of each is a remote hit.
  var pulled: Set<BlobDigest> = []
  /// What reading through each remote did (its hits, misses, corrupt
  /// blobs, bytes, reads that skipped it), by remote and field.
  var remotes: [String: [String: Int64]] = [:]

  /// Counts are written once they are this old (nanoseconds).
  static let flushInterval: Int64 = 1_000_000_000
}

extension Store {
  /// Counts a read of `digest` served from the store, unless it hands out
  /// what a fetch just counted.
  func countHit(_ digest: BlobDigest) {
    count { pending in
      if let waiting = pending.fetched[digest] {
        pending.fetched[digest] = waiting > 1 ? waiting - 1 : nil
        return
      }
      if pending.pulled.remove(digest) != nil {
        pending.remoteHits += 1
      } else {
        pending.hits += 1
      }
    }
  }

  /// Counts a read of `digest` the store could not serve.
  func countMiss(_ digest: BlobDigest) {
    count { pending in pending.misses += 1 }
  }

  /// Counts a fetch of `digest`: a hit when the store served it, a miss
  /// when it was downloaded. The object's next read is part of the fetch.
  func countFetch(_ digest: BlobDigest, served: Bool) {
    count { pending in
      if !served {
        pending.misses += 1
      } else if pending.pulled.remove(digest) != nil {
        pending.remoteHits += 1
      } else {
        pending.hits += 1
      }
      if pending.fetched.count >= 4096 { pending.fetched.removeAll(keepingCapacity: true) }
      pending.fetched[digest, default: 0] += 1
    }
  }

  /// Applies `change` to the pending counts, and writes them when the
  /// oldest is a second old.
  func count(_ change: (inout PendingAccessCounts) -> Void) {
    guard !isReadOnly else { return }
    let now = currentTimeNanoseconds()
    let due = pendingCounts.withLock { pending in
      change(&pending)
      let since = pending.since ?? now
      pending.since = since
      return now.subtractingSaturated(since) >= PendingAccessCounts.flushInterval
    }
    if due { writeAccessCounts() }
  }

  /// Writes the pending counts to the index, in one transaction. A count
  /// that cannot be written (a full volume, a damaged index) is dropped:
  /// counts are statistics, and never fail the read they count.
  func writeAccessCounts() {
    let taken = pendingCounts.withLock { pending in
      defer {
        pending.hits = 0
        pending.remoteHits = 0
        pending.misses = 0
        pending.remotes = [:]
        pending.since = nil
      }
      return (pending.hits, pending.remoteHits, pending.misses, pending.remotes)
    }
    guard taken.0 > 0 || taken.1 > 0 || taken.2 > 0 || !taken.3.isEmpty else { return }
    _ = try? index().write("count hits and misses") { (tx) throws(TroveError) in
      if taken.0 > 0 || taken.1 > 0 || taken.2 > 0 {
        try tx.addAccessCounts(hits: taken.0, remoteHits: taken.1, misses: taken.2)
      }
      for (remote, counts) in taken.3 { try tx.addToRemote(remote, counts) }
    }
  }

  /// Sets the counts of hits and misses (``StoreStatistics/hits``,
  /// ``StoreStatistics/misses``) to zero, in one transaction; the totals,
  /// which follow what the store holds, are not touched. Counts this
  /// store had not written yet are dropped with them.
  ///
  /// - Throws: `.readOnlyStore` in a read-only store.
  public func resetAccessCounts() throws(TroveError) {
    try requireWritable()
    let now = currentTimeNanoseconds()
    try index().write("reset the hit and miss counts") { (tx) throws(TroveError) in
      pendingCounts.withLock { pending in
        pending.hits = 0
        pending.remoteHits = 0
        pending.misses = 0
        pending.since = nil
      }
      try tx.resetAccessCounts(now: now)
    }
  }
}
