import Foundation
import Synchronization

/// Pulls of many blobs from one remote, several at once: the one way a
/// read-through of many and `pull` of many ask a remote, and tell its
/// circuit breaker what it answered.
extension Store {
  /// Pulls each of `digests` from `spec`'s `backend` on `sessions`, each
  /// as ``pull(_:from:spec:largeTurn:)`` pulls one (rehashed, published
  /// through the one ingest pipeline). Returns each outcome, in order.
  ///
  /// The breaker hears the batch as it would the same reads one by one,
  /// until the remote fails as a whole (unreachable, broken off): that
  /// first failure goes to `failed`, which opens the breaker; the blobs not
  /// started yet fail with it, untried; what ends after it is its echo —
  /// a pull that still completes is counted (`pulled` gives its counts)
  /// but closes no breaker, an error is only that blob's outcome. Before
  /// it, every other error goes to `failed` too.
  func pullBatch(
    _ digests: [BlobDigest], from backend: any RemoteBackend, spec: RemoteSpec,
    sessions: RemoteSessions,
    pulled: @escaping @Sendable (BlobDigest, RemotePull) -> [String: Int64],
    failed: @escaping @Sendable (TroveError) -> Void
  ) -> [Result<RemotePull, TroveError>] {
    let largeTurn = NSLock()
    let outcomes = Mutex<[Int: Result<RemotePull, TroveError>]>([:])
    let failure = Mutex<TroveError?>(nil)
    sessions.forEach(digests.count) { backend, k in
      let outcome: Result<RemotePull, TroveError>
      if let whole = failure.withLock({ $0 }) {
        outcome = .failure(whole)
      } else {
        outcome = Result { () throws(TroveError) -> RemotePull in
          try self.pull(digests[k], from: backend, spec: spec, largeTurn: largeTurn)
        }
        switch outcome {
        case .success(let pull):
          let counts = pulled(digests[k], pull)
          if failure.withLock({ $0 }) == nil {
            self.remoteAnswered(spec.name, counts)
          } else {
            self.noteRemote(spec.name, counts)
          }
        case .failure(let error):
          let whole = error.code == .unavailable || error.code == .transferFailed
          let beforeFailure = failure.withLock { (current) -> Bool in
            guard current == nil else { return false }
            if whole { current = error }
            return true
          }
          if beforeFailure { failed(error) }
        }
      }
      outcomes.withLock { $0[k] = outcome }
    }
    return outcomes.withLock { done in digests.indices.map { done[$0]! } }
  }

  /// Tells `remote`'s breaker what a direct request's `error` says of it:
  /// an answer (not there, other bytes, nothing trusted) closes it; a
  /// failure as a whole (unreachable, broken off) opens it.
  func remoteReplied(_ remote: String, with error: TroveError) {
    switch error.code {
    case .notFound, .checksumMismatch: remoteAnswered(remote)
    case .untrusted: remoteAnswered(remote, ["untrusted": 1])
    case .unavailable, .transferFailed: remoteFailed(remote, error)
    default: break
    }
  }
}
