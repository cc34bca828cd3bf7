/// Confirms, right before a sweep evicts an object for being held by a
/// remote (``CachePolicy/evictRemoteBackedFirst``), that a remote still
/// holds it. Only a copy this store knows is right counts
/// (``RemoteHolding/verified``: its own upload, or a pull whose bytes
/// hashed to the digest) — a blob of the right name and length anyone
/// could have written is not, as no remote answers a checksum — and the
/// remote must still have it: a `HEAD` (WebDAV) or `STRLEN` (Redis) that
/// finds a blob of the object's length. What `remote_objects` records was
/// true once; a Redis that evicted or restarted, a purged folder make it
/// false, and an object evicted on that belief would be lost. A remote
/// that no longer holds it (or holds another length) loses its row; one
/// that cannot be asked (its breaker open, unreachable) confirms nothing.
/// From a remote with `--trust` keys, a copy counts only when an entry
/// one of them signed is there and gives the local object's length and
/// SHA-256: what a reader of that remote will ask for (a second request).
/// One request per object evicted this way (two from such a remote),
/// through one connection per remote.
final class RemoteCopyCheck {
  private let store: Store
  private let specs: [String: RemoteSpec]
  private var backends: [String: any RemoteBackend] = [:]
  private var unusable: Set<String> = []

  init(store: Store) {
    self.store = store
    let specs = (try? store.remotes()) ?? []
    self.specs = Dictionary(specs.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
  }

  /// Whether a configured remote confirms it holds `entry`'s bytes.
  func confirms(_ entry: StoreEntry) -> Bool {
    let digest = entry.digest
    guard
      let holders = try? store.index().read(
        "look up who holds \(digest)",
        { (tx) throws(TroveError) in
          try tx.remotesVerified(digest)
        })
    else { return false }
    for name in holders {
      guard let spec = specs[name], !unusable.contains(name) else { continue }
      guard store.breakerAdmits(name) else {
        unusable.insert(name)
        continue
      }
      do throws(TroveError) {
        let backend: any RemoteBackend
        if let open = backends[name] {
          backend = open
        } else {
          backend = try store.openRemote(spec, writing: false)
          backends[name] = backend
        }
        let size = try backend.size(digest)
        guard size == entry.size else {
          store.remoteAnswered(name)
          store.forgetHolding(name, digest)
          continue
        }
        // From a remote this store reads signed only, a copy is of use only
        // with an entry a trusted key signed for these very bytes.
        if spec.trustedKeys != nil {
          let signed: SignedFacts?
          do throws(TroveError) {
            signed = try store.trustedFacts(of: digest, spec: spec, backend: backend)
          } catch  where error.code == .untrusted || SignedObjectEntry.isTooLong(error) {
            // No trusted copy (a planted oversized entry included), not a
            // failure of the remote.
            signed = nil
          }
          store.remoteAnswered(name)
          guard let signed, signed == (try? store.recordedFacts(of: digest)) else { continue }
          return true
        }
        store.remoteAnswered(name)
        return true
      } catch {
        if error.code == .unavailable || error.code == .transferFailed {
          store.remoteFailed(name, error)
        }
        unusable.insert(name)
      }
    }
    return false
  }
}
