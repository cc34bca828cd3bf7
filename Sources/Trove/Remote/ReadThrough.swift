import Foundation

/// Reading through the remotes: a read the local store cannot serve asks
/// the store's remotes, in order, before it fails.
extension Store {
  /// On a local miss of `digest`: asks each remote in turn (those its
  /// ``CircuitBreaker`` admits) and pulls the blob from the first that
  /// holds it into the store, through the same writer as any put —
  /// rehashed, and committed only when its bytes are `digest`'s. Returns
  /// whether the store now holds it.
  ///
  /// Never throws: a remote that does not hold the blob is a remote miss;
  /// one that sends other bytes is `corrupt` (nothing stored, a warning);
  /// one that cannot be reached or breaks off is a warning and opens its
  /// breaker, so later reads skip it for a while. A read-only store reads
  /// through nothing (it cannot store what it pulls).
  ///
  /// `unanswered` hears of each remote that could not say whether it
  /// holds `digest`: why, in a phrase naming it (its breaker open, or its
  /// failure), and what would fix it.
  func readThrough(
    _ digest: BlobDigest, unanswered: ((String, TroveError.Remedy?) -> Void)? = nil
  ) -> Bool {
    guard !isReadOnly else { return false }
    return askRemotes(
      { (spec, backend) throws(TroveError) -> Bool? in
        let pulled = try pull(digest, from: backend, spec: spec)
        trace(
          .remote, "read \(digest) through remote '\(spec.name)'",
          why: "the store did not hold it; the remote did (its bytes were rehashed on the way in)")
        notePulled(digest)
        remoteAnswered(spec.name, ["hits": 1, "bytes": pulled.size])
        return true
      }, unanswered: unanswered) ?? false
  }

  /// The name of the first remote that holds `digest` (asking those the
  /// breaker admits, in order), or nil. Nothing is downloaded.
  public func remoteHolding(_ digest: BlobDigest) -> String? {
    askRemotes { (spec, backend) throws(TroveError) -> String? in
      var held = try backend.exists(digest)
      if held, spec.trustedKeys != nil {
        do throws(TroveError) {
          _ = try trustedFacts(of: digest, spec: spec, backend: backend)
        } catch  where error.code == .untrusted {
          held = false
        }
      }
      remoteAnswered(spec.name)
      return held ? spec.name : nil
    }
  }

  /// Asks the remotes the breaker admits, in order, with `ask` (given the
  /// remote and its backend, opened for reading) until one gives a value;
  /// nil when none does. A remote's failure is taken the one way for every
  /// read: not there is a remote miss, other bytes are `corrupt` (a
  /// warning), unreachable or broken off is a warning and opens its
  /// breaker, anything else a warning; then the next remote is asked.
  func askRemotes<T>(
    _ ask: (RemoteSpec, any RemoteBackend) throws(TroveError) -> T?,
    unanswered: ((String, TroveError.Remedy?) -> Void)? = nil
  ) -> T? {
    let specs: [RemoteSpec]
    do throws(TroveError) {
      specs = try remotes()
    } catch {
      configuration.onWarning?("remotes not consulted: \(line(error))")
      return nil
    }
    for spec in specs {
      guard breakerAdmits(spec.name) else {
        unanswered?(
          "remote '\(spec.name)' was not asked: it failed lately and its circuit breaker is open",
          .remoteStatus(name: spec.name))
        continue
      }
      do throws(TroveError) {
        if let value = try ask(spec, try openRemote(spec, writing: false)) { return value }
      } catch {
        _ = take(error, from: spec, unanswered: unanswered)
      }
    }
    return nil
  }

  /// Takes `error`, which `spec`'s remote gave a read, the one way for
  /// every read: not there is a remote miss, other bytes are `corrupt` (a
  /// warning), unreachable or broken off is a warning and opens its
  /// breaker, anything else a warning. Returns whether the remote failed
  /// as a whole (its breaker opened): nothing more is asked of it.
  private func take(
    _ error: TroveError, from spec: RemoteSpec,
    unanswered: ((String, TroveError.Remedy?) -> Void)?
  ) -> Bool {
    switch error.code {
    case .notFound:
      trace(.remote, "remote '\(spec.name)' missed", why: error.message)
      remoteAnswered(spec.name, ["misses": 1])
    case .untrusted:
      trace(.remote, "remote '\(spec.name)' offered nothing trusted", why: error.message)
      remoteAnswered(spec.name, ["untrusted": 1])
    case .checksumMismatch:
      trace(.remote, "refused what remote '\(spec.name)' sent", why: error.message)
      remoteAnswered(spec.name, ["corrupt": 1])
      configuration.onWarning?(line(error))
    case .unavailable, .transferFailed:
      let interval = remoteFailed(spec.name, error)
      configuration.onWarning?("\(line(error)); skipped for \(interval / 1_000_000_000) s")
      unanswered?(error.message, error.remedy)
      return true
    default:
      configuration.onWarning?("remote '\(spec.name)': \(line(error))")
      unanswered?("remote '\(spec.name)': \(error.message)", error.remedy)
    }
    return false
  }

  /// On local misses of `digests`: asks each remote in turn (those the
  /// breaker admits) for the blobs still missing, several at once on
  /// connections kept from one to the next (``RemoteSessions``), and pulls
  /// those it holds into the store as ``readThrough(_:unanswered:)`` pulls
  /// one: rehashed, committed only as the bytes of their digest. Returns
  /// the digests the store now holds. Never throws; each blob's failure is
  /// taken as a read's (a miss, `corrupt`, a warning); a remote that fails
  /// as a whole is asked nothing more.
  func readThrough(_ digests: [BlobDigest]) -> Set<BlobDigest> {
    var missing: [BlobDigest] = []
    var seen = Set<BlobDigest>()
    for digest in digests where seen.insert(digest).inserted { missing.append(digest) }
    guard !isReadOnly, !missing.isEmpty else { return [] }
    if missing.count == 1 { return readThrough(missing[0]) ? [missing[0]] : [] }
    let specs: [RemoteSpec]
    do throws(TroveError) {
      specs = try remotes()
    } catch {
      configuration.onWarning?("remotes not consulted: \(line(error))")
      return []
    }
    var held = Set<BlobDigest>()
    for spec in specs where !missing.isEmpty && breakerAdmits(spec.name) {
      let backend: any RemoteBackend
      do throws(TroveError) {
        backend = try openRemote(spec, writing: false)
      } catch {
        _ = take(error, from: spec, unanswered: nil)
        continue
      }
      let sessions = RemoteSessions(backend)
      let outcomes = pullBatch(
        missing, from: backend, spec: spec, sessions: sessions,
        pulled: { digest, pulled in
          self.trace(
            .remote, "read \(digest) through remote '\(spec.name)'",
            why: "the store did not hold it; the remote did (its bytes were rehashed on the way in)"
          )
          self.notePulled(digest)
          return ["hits": 1, "bytes": pulled.size]
        },
        failed: { error in _ = self.take(error, from: spec, unanswered: nil) })
      sessions.close()
      var pulled = Set<BlobDigest>()
      for (digest, outcome) in zip(missing, outcomes) {
        if case .success = outcome { pulled.insert(digest) }
      }
      held.formUnion(pulled)
      missing.removeAll { pulled.contains($0) }
    }
    return held
  }

  /// Notes that `digest` was read through a remote into the store: its
  /// next read served is a remote hit (``PendingAccessCounts``).
  func notePulled(_ digest: BlobDigest) {
    pendingCounts.withLock { pending in
      if pending.pulled.count >= 4096 { pending.pulled.removeAll(keepingCapacity: true) }
      pending.pulled.insert(digest)
    }
  }
}
