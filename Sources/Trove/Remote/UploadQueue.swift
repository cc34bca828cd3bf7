import Foundation

/// What ``Store/uploadQueued(to:everything:ifIdle:probing:onEach:)`` did for one object
/// and remote.
public struct QueuedUpload: Sendable {
  /// The object; nil when the remote failed before any object was tried.
  public var digest: BlobDigest?
  /// The remote.
  public var remote: String
  /// What the upload did; nil when it failed (``error``).
  public var outcome: RemoteUpload?
  /// Why it failed.
  public var error: TroveError?
  /// Whether the remote was not asked at all: its circuit breaker is open
  /// after a failure (``error`` says so; nothing was sent).
  public var skippedByBreaker = false
}

/// The upload queue (write-back): the objects a writable remote is not
/// known to hold. It is not a list kept beside the objects but follows
/// from them (`remote_objects`, see OnDiskFormat): an object is queued from
/// the transaction that stores it, and done only once the remote confirmed
/// it — so a crash loses no item and leaves none done that is not.
extension Store {
  /// Uploads the queued objects of each writable remote (or of `remote`):
  /// those stored since the remote was added, or with `everything` every
  /// object it is not known to hold. Oldest first; each object's outcome
  /// goes to `onEach`. A remote that fails (unreachable, broken off) stops
  /// its part and opens its circuit breaker; one whose breaker is open is
  /// skipped — unless `probing` (a user asked for the upload): then it is
  /// asked all the same, and its answer closes the breaker. Objects
  /// removed meanwhile are passed over.
  ///
  /// One process drains a store's queue at a time (the byte of
  /// `upload-queue` in `fetch.lock`; the lock only saves work: an
  /// object uploaded twice is found present the second time). With `ifIdle`, a drain under way elsewhere makes
  /// this one return at once — that one will see what was queued (a drain
  /// looks at the queue again after it lets go of the lock, and goes on
  /// when it finds more and can take the lock back). `ifIdle` without a
  /// `remote` is the drain a put or fetch starts (the store's write-back): it passes
  /// over the remotes whose ``RemoteSpec/write`` is `off`, which only a
  /// push asked for sends to.
  ///
  /// - Returns: the uploads made (uploaded or present, too large), and the
  ///   failures.
  /// - Throws: `.notFound` for an unknown `remote`, `.permissionDenied`
  ///   for a read-only one, `.readOnlyStore`.
  @discardableResult
  public func uploadQueued(
    to remote: String? = nil, everything: Bool = false, ifIdle: Bool = false,
    probing: Bool = false, onEach: ((QueuedUpload) -> Void)? = nil
  ) throws(TroveError) -> [QueuedUpload] {
    try requireWritable()
    var done: [QueuedUpload] = []
    var wait = !ifIdle
    var idlePasses = 0
    while true {
      do {
        guard let lock = FetchLock(store: self, name: "upload-queue", wait: wait) else {
          return done
        }
        defer { withExtendedLifetime(lock) {} }
        let pass = try drainQueue(
          to: remote, everything: everything, probing: probing, automatic: ifIdle,
          onEach: onEach)
        done += pass
        // A pass that failed is the last; so is a second one in a row that
        // did nothing (what is queued waits behind an open breaker).
        if pass.contains(where: { $0.error != nil }) { return done }
        idlePasses = pass.isEmpty ? idlePasses + 1 : 0
        if idlePasses >= 2 { return done }
      }
      // The lock is let go: what was queued while it was held and not
      // drained (its process found the lock taken) is this one's to do.
      guard try queuedAnywhere(to: remote, everything: everything, automatic: ifIdle) else {
        return done
      }
      wait = false
    }
  }

  /// Whether any target of ``uploadQueued(to:everything:ifIdle:probing:onEach:)``
  /// has a queued object.
  private func queuedAnywhere(to remote: String?, everything: Bool, automatic: Bool)
    throws(TroveError) -> Bool
  {
    for spec in try uploadTargets(remote, automatic: automatic) {
      let from = everything ? 0 : try queueStart(spec.name)
      if try !queue(spec.name, since: from, limit: 1).isEmpty { return true }
    }
    return false
  }

  /// The writable remotes a drain uploads to: `remote`, or all.
  /// An `automatic` drain of all of them passes over those written back
  /// only when asked (`off`).
  private func uploadTargets(_ remote: String?, automatic: Bool = false) throws(TroveError)
    -> [RemoteSpec]
  {
    if let remote {
      let spec = try self.remote(named: remote)
      guard !spec.readOnly else {
        throw TroveError(
          .permissionDenied,
          "remote '\(spec.name)' is read-only: this store does not upload to it", value: spec.name)
      }
      return [spec]
    }
    return try remotes().filter { !$0.readOnly && !(automatic && $0.write == .off) }
  }

  /// One pass over the queues of the targets, under the drain lock.
  private func drainQueue(
    to remote: String?, everything: Bool, probing: Bool, automatic: Bool,
    onEach: ((QueuedUpload) -> Void)?
  ) throws(TroveError) -> [QueuedUpload] {
    var done: [QueuedUpload] = []
    for spec in try uploadTargets(remote, automatic: automatic) {
      let from = everything ? 0 : try queueStart(spec.name)
      guard try !queue(spec.name, since: from, limit: 1).isEmpty else { continue }
      guard breakerAdmits(spec.name, probing: probing) else {
        var skipped = QueuedUpload(digest: nil, remote: spec.name)
        skipped.skippedByBreaker = true
        skipped.error = TroveError(
          .unavailable,
          "remote '\(spec.name)' not asked: it failed lately and its circuit breaker is open; its queue waits",
          value: spec.name, remedy: .remoteStatus(name: spec.name))
        onEach?(skipped)
        done.append(skipped)
        continue
      }
      let backend: any RemoteBackend
      do throws(TroveError) {
        backend = try openRemote(spec, writing: true)
      } catch {
        if error.code == .unavailable || error.code == .transferFailed {
          remoteFailed(spec.name, error)
        }
        let failed = QueuedUpload(digest: nil, remote: spec.name, outcome: nil, error: error)
        onEach?(failed)
        done.append(failed)
        continue
      }
      remoteAnswered(spec.name)
      // Several objects in flight at once, on connections kept for the
      // whole walk.
      let sessions = RemoteSessions(backend)
      defer { sessions.close() }
      // One walk over the queue, oldest first: every object is tried once
      // a pass, whatever becomes of it.
      var after: (Int64, String) = (.min, "")
      var oldestLeft: Int64?
      var stopped = false
      // A backend that pipelines (no sessions) gets a longer batch: its
      // pipeline drains at the end of each.
      let batchSize = sessions.isParallel ? 64 : Self.describedObjects
      // Worked out from the URL: once, not per object.
      let sizeLimit = spec.sizeLimit
      drain: while true {
        let batch = try queue(spec.name, since: from, after: after, limit: batchSize)
        guard let last = batch.last else { break }
        after = (last.2, last.0.hex)
        // The batch's objects go up together (several at once, or
        // pipelined), each with its own outcome; what the remote confirmed
        // is then recorded in one transaction.
        let sent = batch.compactMap { (digest, size, _) in
          size > (sizeLimit ?? .max) ? nil : digest
        }
        var outcomes: [BlobDigest: Result<RemoteUpload, TroveError>] = [:]
        for (digest, result) in zip(sent, push(sent, to: backend, sessions: sessions)) {
          outcomes[digest] = result
        }
        var items: [(QueuedUpload, created: Int64)] = []
        for (digest, size, created) in batch {
          var item = QueuedUpload(digest: digest, remote: spec.name)
          if let limit = sizeLimit, size > limit {
            item.outcome = .tooLarge
          } else if let outcome = outcomes[digest] {
            switch outcome {
            case .success(let upload): item.outcome = upload
            case .failure(let error) where error.code == .notFound:
              continue  // removed meanwhile: no longer queued
            case .failure(let error): item.error = error
            }
          } else {
            // Not tried: the remote failed on an earlier one.
            oldestLeft = min(oldestLeft ?? created, created)
            continue
          }
          items.append((item, created))
        }
        let confirmed = items.compactMap { (item, _) -> (BlobDigest, RemoteHolding)? in
          guard let digest = item.digest, let outcome = item.outcome else { return nil }
          return (digest, RemoteHolding(outcome))
        }
        var recordFailure: TroveError?
        do throws(TroveError) {
          try recordHoldings(spec.name, confirmed)
        } catch {
          recordFailure = error
        }
        for (var item, created) in items {
          if item.error == nil, let recordFailure {
            item.outcome = nil
            item.error = recordFailure
          }
          trace(
            .remote,
            item.error == nil
              ? "\(Self.traceVerb(item.outcome)) \(traceName(item)) to remote '\(spec.name)'"
              : "failed to upload \(traceName(item)) to remote '\(spec.name)'",
            why: item.error?.message ?? "queued: the remote was not known to hold it")
          onEach?(item)
          done.append(item)
          guard let error = item.error else { continue }
          oldestLeft = min(oldestLeft ?? created, created)
          // A remote that fails, or an index that cannot record (busy,
          // full), stops this remote's walk after this batch (what the
          // remote confirmed in it is recorded, unless the index failed):
          // the next pass offers the objects again. Anything else (a
          // corrupt local copy) is this object's alone.
          let remoteFailing = error.code == .unavailable || error.code == .transferFailed
          if remoteFailing, recordFailure == nil, !stopped { remoteFailed(spec.name, error) }
          if remoteFailing || recordFailure != nil { stopped = true }
        }
        if stopped { break drain }
      }
      if !everything {
        // Stopped early: nothing after the object it stopped at is known.
        advanceQueueCursor(
          spec.name, upTo: stopped ? min(oldestLeft ?? after.0, after.0) : oldestLeft)
      }
    }
    return done
  }

  /// The trace's verb for an upload's outcome.
  private static func traceVerb(_ outcome: RemoteUpload?) -> String {
    switch outcome {
    case .uploaded?: return "uploaded"
    case .present?: return "found present"
    case .tooLarge?: return "skipped (larger than its max-object-size)"
    case nil: return "did not upload"
    }
  }

  /// An item's digest as the trace names it.
  private func traceName(_ item: QueuedUpload) -> String { item.digest?.description ?? "nothing" }

  /// How many objects (and bytes) are queued for `remote` (see
  /// ``uploadQueued(to:everything:ifIdle:probing:onEach:)``). O(objects).
  public func uploadQueueLength(for remote: String) throws(TroveError) -> (
    objects: Int64, bytes: Int64
  ) {
    let from = try queueStart(remote)
    return try index().read("count the upload queue of '\(remote)'") { (tx) throws(TroveError) in
      try tx.uploadQueueLength(remote, since: from)
    }
  }

  /// Up to `limit` queued objects of `remote`, after `after`.
  private func queue(
    _ remote: String, since: Int64, after: (Int64, String) = (.min, ""), limit: Int
  ) throws(TroveError) -> [(BlobDigest, Int64, Int64)] {
    try index().read("read the upload queue of '\(remote)'") { (tx) throws(TroveError) in
      try tx.queuedUploads(remote, since: since, after: after, limit: limit)
    }
  }

  /// Where `remote`'s queue is looked for: objects created since it was
  /// added, and after its cursor (what older is known to be there). A
  /// remote with no record of when it was added (one added before this
  /// record existed) is taken as added now, and that is recorded: its
  /// queue never holds what the store held before (`remote push --all`
  /// sends that).
  func queueStart(_ remote: String) throws(TroveError) -> Int64 {
    let record = try index().read("read remote '\(remote)'") { (tx) throws(TroveError) in
      try tx.remoteRecord(remote)
    }
    if record.since > 0 { return max(record.since, record.cursor) }
    let now = currentTimeNanoseconds()
    try index().write("record when remote '\(remote)' was added") { (tx) throws(TroveError) in
      if try tx.remoteRecord(remote).since == 0 { try tx.setRemote(remote, ["since": now]) }
    }
    return now
  }

  /// After a walk over `remote`'s queue: everything created more than ten
  /// minutes ago (a put may take its creation time a while before it
  /// commits), and before `oldestLeft` (the oldest object the walk could
  /// not send), is known to be there; the next walk starts there. Only
  /// ever moves forward; failing to record it costs the next walk time.
  private func advanceQueueCursor(_ remote: String, upTo oldestLeft: Int64?) {
    let settled = currentTimeNanoseconds() - 600_000_000_000
    let cursor = min(settled, oldestLeft ?? .max)
    _ = try? index().write("advance the queue of '\(remote)'") { (tx) throws(TroveError) in
      if try tx.remoteRecord(remote).cursor < cursor {
        try tx.setRemote(remote, ["cursor": cursor])
      }
    }
  }

  /// Records what `remote` holds; nothing in a read-only store. A failure
  /// to record only means the object is offered again.
  func noteHolding(_ remote: String, _ digest: BlobDigest, _ state: RemoteHolding) {
    try? recordHolding(remote, digest, state)
  }

  /// Forgets that `remote` holds `digest`: it was found not to. The object
  /// is queued for it again.
  func forgetHolding(_ remote: String, _ digest: BlobDigest) {
    guard !isReadOnly else { return }
    _ = try? index().write("forget that '\(remote)' holds \(digest)") { (tx) throws(TroveError) in
      try tx.forgetHolding(remote, digest)
    }
  }

  /// Records what `remote` holds, or throws why it could not.
  func recordHolding(_ remote: String, _ digest: BlobDigest, _ state: RemoteHolding)
    throws(TroveError)
  {
    try recordHoldings(remote, [(digest, state)])
  }

  /// Records what `remote` holds of several objects, in one transaction,
  /// or throws why it could not (then none is recorded).
  func recordHoldings(_ remote: String, _ holdings: [(BlobDigest, RemoteHolding)])
    throws(TroveError)
  {
    guard !isReadOnly, let first = holdings.first else { return }
    let now = currentTimeNanoseconds()
    let what = holdings.count == 1 ? "\(first.0)" : "\(holdings.count) objects"
    try index().write("note that '\(remote)' holds \(what)") { (tx) throws(TroveError) in
      for (digest, state) in holdings { try tx.noteHolding(remote, digest, state, now: now) }
    }
  }
}
