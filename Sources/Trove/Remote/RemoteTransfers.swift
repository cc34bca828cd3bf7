import Foundation
import Synchronization

/// What ``Store/pull(_:from:)`` did.
public struct RemotePull: Sendable, Hashable, Codable {
  /// The object's digest.
  public var digest: BlobDigest
  /// Its length.
  public var size: Int64
  /// False when the store held it already (nothing was asked of the remote).
  public var downloaded: Bool
  /// Bytes of the object the remote sent: its length for a whole download;
  /// the missing chunks and the manifest when the store held the rest in
  /// earlier versions (``ChunkManifest``); 0 when nothing was downloaded.
  public var transferredBytes: Int64
  /// Bytes of the object cloned from those earlier versions: blocks
  /// shared with them, not written again (0 where the filesystem cannot
  /// clone, or chunks lie at offsets that differ within a block).
  public var clonedBytes: Int64

  public init(
    digest: BlobDigest, size: Int64, downloaded: Bool, transferredBytes: Int64? = nil,
    clonedBytes: Int64 = 0
  ) {
    self.digest = digest
    self.size = size
    self.downloaded = downloaded
    self.transferredBytes = transferredBytes ?? (downloaded ? size : 0)
    self.clonedBytes = clonedBytes
  }
}

/// One-shot transfers between a store and one of its remotes. Every byte
/// that comes from a remote goes through the store's ``BlobWriter``, which
/// hashes it, and is committed only when it matches the digest it was
/// asked for: a remote is a trust boundary.
extension Store {
  /// The backend for `spec`, after its layout record was read: a remote
  /// laid out in a way this build cannot use is refused. With `writing`,
  /// a remote with no record gets this build's.
  func openRemote(_ spec: RemoteSpec, writing: Bool) throws(TroveError) -> any RemoteBackend {
    let backend = try spec.backend()
    warnOfCredentialInClear(spec)
    if try backend.readLayout() == nil, writing {
      try backend.writeLayout(.current)
    }
    return backend
  }

  /// Warns when `spec`'s credential is about to cross a network unencrypted.
  func warnOfCredentialInClear(_ spec: RemoteSpec) {
    guard let scheme = spec.credentialInClear else { return }
    warn(
      "remote '\(spec.name)': its credential goes over plain \(scheme)://, readable on the network; "
        + (scheme == "http" ? "use https://" : "reach it through a TLS tunnel")
    )
  }

  /// Copies `digest`'s blob from the remote named `remote` into the store,
  /// unless the store holds it already. The remote is asked whatever its
  /// circuit breaker says (it was named): its answer closes the breaker,
  /// its failure keeps it open.
  ///
  /// - Throws: `.notFound` when the remote does not hold it;
  ///   `.checksumMismatch` when the remote's bytes are not `digest`'s
  ///   (nothing is stored); `.unavailable` or `.transferFailed` when the
  ///   remote cannot be reached or the transfer breaks (nothing is stored).
  @discardableResult
  public func pull(_ digest: BlobDigest, from remote: String) throws(TroveError) -> RemotePull {
    let spec = try self.remote(named: remote)
    if let entry = try entry(for: digest) {
      return RemotePull(digest: digest, size: entry.size, downloaded: false)
    }
    return try askingDirectly(spec.name) { () throws(TroveError) in
      let pulled = try pull(digest, from: try openRemote(spec, writing: false), spec: spec)
      trace(.remote, "pulled \(digest) from remote '\(spec.name)'", why: "asked to pull it")
      return pulled
    }
  }

  /// Copies each of `digests`' blobs from the remote named `remote` into
  /// the store, as ``pull(_:from:)`` does one, up to `jobs` at once on
  /// connections kept from one to the next. Every blob is rehashed as it
  /// comes and published through the store's one ingest pipeline (blobs
  /// arriving together share a group commit). Each outcome, in order; one
  /// blob's failure (not there, other bytes) is its own. Once the remote
  /// fails (unreachable, broken off), the blobs not started yet fail with
  /// that error, untried.
  public func pull(_ digests: [BlobDigest], from remote: String, jobs: Int = 8)
    -> [Result<RemotePull, TroveError>]
  {
    let spec: RemoteSpec
    do throws(TroveError) {
      spec = try self.remote(named: remote)
    } catch {
      return digests.map { _ in .failure(error) }
    }
    var results = [Result<RemotePull, TroveError>?](repeating: nil, count: digests.count)
    var missing: [Int] = []
    for (i, digest) in digests.enumerated() {
      do throws(TroveError) {
        if let entry = try entry(for: digest) {
          results[i] = .success(RemotePull(digest: digest, size: entry.size, downloaded: false))
        } else {
          missing.append(i)
        }
      } catch {
        results[i] = .failure(error)
      }
    }
    guard !missing.isEmpty else { return results.map { $0! } }
    let backend: any RemoteBackend
    do throws(TroveError) {
      backend = try askingDirectly(spec.name) { () throws(TroveError) in
        try openRemote(spec, writing: false)
      }
    } catch {
      for i in missing { results[i] = .failure(error) }
      return results.map { $0! }
    }
    let sessions = RemoteSessions(backend, width: max(1, jobs))
    defer { sessions.close() }
    let outcomes = pullBatch(
      missing.map { digests[$0] }, from: backend, spec: spec, sessions: sessions,
      pulled: { digest, _ in
        self.trace(.remote, "pulled \(digest) from remote '\(spec.name)'", why: "asked to pull it")
        return [:]
      },
      failed: { error in self.remoteReplied(spec.name, with: error) })
    for (i, outcome) in zip(missing, outcomes) { results[i] = outcome }
    return results.map { $0! }
  }

  /// Pulls `digest`'s blob from `backend`. From a remote `spec` trusts
  /// keys for, the blob must also have the length and SHA-256 a trusted
  /// key signed: `signed` (a signed key record's), else the blob's own
  /// signed entry (`.untrusted` when there is none). A blob over
  /// ``batchedObjectSize`` (ranges in memory, a writer thread) is pulled
  /// holding `largeTurn`, so that pulls side by side hold one such blob's
  /// buffers at a time.
  func pull(
    _ digest: BlobDigest, from backend: any RemoteBackend, spec: RemoteSpec,
    signed: SignedFacts? = nil, largeTurn: NSLock? = nil
  )
    throws(TroveError) -> RemotePull
  {
    guard let size = try backend.size(digest) else {
      throw TroveError(
        .notFound, "remote '\(spec.name)' does not hold \(digest)", value: digest.description)
    }
    let turn = size > Self.batchedObjectSize ? largeTurn : nil
    turn?.lock()
    defer { turn?.unlock() }
    var facts = signed
    if facts == nil { facts = try trustedFacts(of: digest, spec: spec, backend: backend) }
    if let facts, facts.size != size {
      throw TroveError(
        .checksumMismatch,
        "remote '\(spec.name)' holds \(size) bytes as \(digest), not the \(facts.size) a trusted key signed; nothing stored",
        value: digest.description)
    }
    do throws(TroveError) {
      if let pulled = try pullInChunks(digest, size: size, from: backend, spec: spec, facts: facts)
      {
        return pulled
      }
    } catch {
      trace(
        .remote,
        "the chunked pull of \(digest) from remote '\(spec.name)' failed: \(error.message)",
        why: "pulling it whole instead")
    }
    let writer = try makeWriter(
      expectedSize: size, priority: .important, source: "remote '\(spec.name)'", exact: true)
    // The SHA-256 a signer gave is computed from the bytes as they are
    // written: by the writer, or beside it on a large blob's thread.
    let sha = facts.map { _ in SHA2Hasher(.sha256) }
    do throws(TroveError) {
      // A large blob is hashed and written on a thread of its own, beside
      // the transfer; the commit waits for all of it.
      let threaded =
        size >= Self.threadedPullSize ? WriterThread(writer, companion: sha) : nil
      if threaded == nil { writer.companion = sha }
      let downloaded: Int64?
      do throws(TroveError) {
        downloaded = try backend.download(digest, from: 0, into: threaded ?? writer)
      } catch {
        try? threaded?.finish()
        throw error
      }
      try threaded?.finish()
      guard downloaded != nil else {
        throw TroveError(
          .notFound, "remote '\(spec.name)' does not hold \(digest)", value: digest.description)
      }
      let result = try commitPulled(writer, digest, size: size, sha: sha, facts: facts, spec: spec)
      return RemotePull(digest: digest, size: result.size, downloaded: true)
    } catch  where error.code == .checksumMismatch {
      writer.cancel()
      throw TroveError(
        .checksumMismatch,
        "remote '\(spec.name)' sent bytes that are not \(digest) (\(error.message)); nothing stored",
        value: digest.description)
    } catch {
      writer.cancel()
      throw error
    }
  }

  /// Publishes a pulled blob's bytes, all written to `writer`: only with the
  /// SHA-256 a trusted key signed (`facts`, computed as `sha`), and only as
  /// `digest`. Its bytes hashed to the digest as they came: a copy known good.
  func commitPulled(
    _ writer: BlobWriter, _ digest: BlobDigest, size: Int64, sha: SHA2Hasher?,
    facts: SignedFacts?, spec: RemoteSpec
  ) throws(TroveError) -> PutResult {
    if let facts, let computed = sha?.finalize(), computed != facts.sha256 {
      throw TroveError(
        .checksumMismatch,
        "their SHA-256 is \(computed), not the \(facts.sha256) a trusted key signed",
        value: digest.description)
    }
    let result = try writer.commit(method: .stream, expecting: digest, size: size)
    noteHolding(spec.name, digest, .verified)
    return result
  }

  /// The smallest blob a pull hashes and writes on a ``WriterThread``.
  static let threadedPullSize: Int64 = 16 << 20

  /// Uploads `digest`'s object to the remote named `remote`, unless the
  /// remote holds it already or it is longer than the remote's
  /// `max-object-size`. The object is verified against its digest first
  /// (a corrupt local copy is never shared). The remote is asked whatever
  /// its circuit breaker says (it was named): its answer closes the
  /// breaker, its failure keeps it open.
  ///
  /// - Throws: `.notFound` when the store does not hold it;
  ///   `.permissionDenied` when the remote is read-only; `.corruptObject`
  ///   when the local copy is damaged; `.unavailable` or
  ///   `.transferFailed` when the remote fails.
  @discardableResult
  public func push(_ digest: BlobDigest, to remote: String) throws(TroveError) -> RemoteUpload {
    let spec = try self.remote(named: remote)
    guard !spec.readOnly else {
      throw TroveError(
        .permissionDenied,
        "remote '\(spec.name)' is read-only: this store does not upload to it", value: spec.name)
    }
    guard let entry = try entry(for: digest) else { throw notFound(digest) }
    if let limit = spec.sizeLimit, entry.size > limit {
      noteHolding(spec.name, digest, .tooLarge)
      return .tooLarge
    }
    let upload = try askingDirectly(spec.name) { () throws(TroveError) in
      try push(digest, to: try openRemote(spec, writing: true))
    }
    noteHolding(spec.name, digest, RemoteHolding(upload))
    trace(
      .remote, "pushed \(digest) to remote '\(spec.name)': \(upload.rawValue)",
      why: "asked to push it")
    return upload
  }

  /// Uploads each of `digests`' objects to the remote named `remote`, as
  /// ``push(_:to:)`` does one, up to `jobs` at once on connections kept
  /// from one to the next. Each outcome, in order; one object's failure (not
  /// in the store, a corrupt local copy) is its own. Once the remote fails
  /// (unreachable, broken off), the objects not started yet fail with that
  /// error, untried.
  public func push(_ digests: [BlobDigest], to remote: String, jobs: Int = 8)
    -> [Result<RemoteUpload, TroveError>]
  {
    let spec: RemoteSpec
    do throws(TroveError) {
      spec = try self.remote(named: remote)
      guard !spec.readOnly else {
        throw TroveError(
          .permissionDenied,
          "remote '\(spec.name)' is read-only: this store does not upload to it", value: spec.name)
      }
    } catch {
      return digests.map { _ in .failure(error) }
    }
    var results = [Result<RemoteUpload, TroveError>?](repeating: nil, count: digests.count)
    var sent: [Int] = []
    for (i, digest) in digests.enumerated() {
      do throws(TroveError) {
        guard let entry = try entry(for: digest) else { throw notFound(digest) }
        if let limit = spec.sizeLimit, entry.size > limit {
          noteHolding(spec.name, digest, .tooLarge)
          results[i] = .success(.tooLarge)
        } else {
          sent.append(i)
        }
      } catch {
        results[i] = .failure(error)
      }
    }
    guard !sent.isEmpty else { return results.map { $0! } }
    let backend: any RemoteBackend
    do throws(TroveError) {
      backend = try askingDirectly(spec.name) { () throws(TroveError) in
        try openRemote(spec, writing: true)
      }
    } catch {
      for i in sent { results[i] = .failure(error) }
      return results.map { $0! }
    }
    let sessions = RemoteSessions(backend, width: max(1, jobs))
    defer { sessions.close() }
    let outcomes = push(sent.map { digests[$0] }, to: backend, sessions: sessions)
    let remoteFailure = outcomes.lazy.compactMap { outcome -> TroveError? in
      guard case .failure(let error)? = outcome,
        error.code == .unavailable || error.code == .transferFailed
      else { return nil }
      return error
    }.first
    if let remoteFailure {
      remoteFailed(spec.name, remoteFailure)
    } else {
      remoteAnswered(spec.name)
    }
    for (i, outcome) in zip(sent, outcomes) {
      guard let outcome else {
        results[i] = .failure(
          remoteFailure
            ?? TroveError(
              .unavailable, "\(digests[i]) was not uploaded", value: digests[i].description))
        continue
      }
      if case .success(let upload) = outcome {
        noteHolding(spec.name, digests[i], RemoteHolding(upload))
        trace(
          .remote, "pushed \(digests[i]) to remote '\(spec.name)': \(upload.rawValue)",
          why: "asked to push it")
      }
      results[i] = outcome
    }
    return results.map { $0! }
  }

  func push(_ digest: BlobDigest, to backend: any RemoteBackend) throws(TroveError) -> RemoteUpload
  {
    guard let outcome = push([digest], to: backend)[0] else {
      throw TroveError(.unavailable, "\(digest) was not uploaded", value: digest.description)
    }
    return try outcome.get()
  }

  /// Uploads `digests`' objects, each verified against its digest first,
  /// then the keys that name each one uploaded (never before: a reader
  /// that finds a key finds its blob). With `sessions` that ask in
  /// parallel, each object goes up on one of them, several at once;
  /// otherwise they go to the backend as one sequence (Redis pipelines
  /// it), their keys written after every ``describedObjects`` objects
  /// (the backend's connection is its own until then). Each object's
  /// outcome, in order: nil for one not tried (the remote failed on an
  /// earlier one). One object's failure (a corrupt local copy, an error
  /// about its key) is its own.
  func push(
    _ digests: [BlobDigest], to backend: any RemoteBackend, sessions: RemoteSessions? = nil
  )
    -> [Result<RemoteUpload, TroveError>?]
  {
    // A key that cannot be read uploads nothing: unsigned objects would
    // be of no use to the readers that trust it.
    let signer: SigningKey?
    do throws(TroveError) {
      signer = try signingKey()
    } catch {
      return digests.map { _ -> Result<RemoteUpload, TroveError>? in .failure(error) }
    }
    // Another user may have written the bindings and checksums the index
    // holds: a signer vouches for none of them, only for bytes it read.
    let othersWriteIndex = signer == nil ? nil : othersMayWriteIndex()
    if let sessions, sessions.isParallel, digests.count > 1 {
      return push(
        digests, on: sessions, signer: signer, othersWriteIndex: othersWriteIndex)
    }
    var results = [Result<RemoteUpload, TroveError>?](repeating: nil, count: digests.count)
    var remoteFailed = false
    var cursor = 0
    while cursor < digests.count, !remoteFailed {
      let last = min(digests.count, cursor + Self.describedObjects)
      // The copies handed to the backend, by their place in the sequence,
      // until their outcome comes (each holds an open file).
      var handed: [(index: Int, copy: VerifiedCopy)?] = []
      var uploaded: [(index: Int, upload: RemoteUpload)] = []
      backend.uploadSequence(
        { () -> RemoteUploadItem? in
          while cursor < last, !remoteFailed {
            let i = cursor
            cursor += 1
            let copy: VerifiedCopy
            do throws(TroveError) {
              copy = try verifiedCopy(of: digests[i])
            } catch {
              results[i] = .failure(error)
              continue
            }
            handed.append((i, copy))
            return RemoteUploadItem(
              digest: digests[i], file: copy.file, size: copy.size, verify: copy.unverified)
          }
          return nil
        },
        done: { place, outcome in
          guard let (i, copy) = handed[place] else { return }
          handed[place] = nil
          release(copy)
          switch outcome {
          case .success(let upload)?:
            uploaded.append((i, upload))
          case .failure(let error)? where error.code == .corruptObject:
            results[i] = .failure(corrupt(digests[i]))
          case .failure(let error)?:
            results[i] = outcome
            // The remote failing stops what is still to send.
            if error.code == .unavailable || error.code == .transferFailed { remoteFailed = true }
          case nil:
            remoteFailed = true
          }
        })
      for case (_, let copy)? in handed { release(copy) }
      // Unsigned, an object with no key has nothing to describe: one read
      // finds those that have keys, rather than one read each.
      let keyed = signer == nil ? objectsWithKeys(uploaded.map { digests[$0.index] }) : nil
      for (i, upload) in uploaded {
        if upload != .tooLarge { pushManifest(of: digests[i], to: backend) }
        if let keyed, !keyed.contains(digests[i]) {
          results[i] = .success(upload)
          continue
        }
        results[i] = describe(
          digests[i], upload, on: backend, signer: signer, othersWriteIndex: othersWriteIndex)
      }
    }
    return results
  }

  /// `push(_:to:sessions:)` on sessions asking in parallel: each object
  /// verified, uploaded and described on one session; an object over
  /// ``batchedObjectSize`` (its parts in memory) waits for its turn, one
  /// at a time. Once the remote fails, the objects not started yet are not
  /// tried.
  private func push(
    _ digests: [BlobDigest], on sessions: RemoteSessions, signer: SigningKey?,
    othersWriteIndex: String?
  ) -> [Result<RemoteUpload, TroveError>?] {
    let results = Mutex<[Result<RemoteUpload, TroveError>?]>(
      Array(repeating: nil, count: digests.count))
    let remoteFailed = Atomic<Bool>(false)
    let largeTurn = NSLock()
    sessions.forEach(digests.count) { backend, i in
      guard !remoteFailed.load(ordering: .relaxed) else { return }
      let outcome = self.pushAlone(
        digests[i], to: backend, signer: signer, othersWriteIndex: othersWriteIndex,
        largeTurn: largeTurn)
      if case .failure(let error) = outcome,
        error.code == .unavailable || error.code == .transferFailed
      {
        remoteFailed.store(true, ordering: .relaxed)
      }
      results.withLock { $0[i] = outcome }
    }
    return results.withLock { $0 }
  }

  /// One object of a parallel push: verified, uploaded, then described
  /// (signed, its keys' records written); one over ``batchedObjectSize``
  /// holding `largeTurn`.
  private func pushAlone(
    _ digest: BlobDigest, to backend: any RemoteBackend, signer: SigningKey?,
    othersWriteIndex: String?, largeTurn: NSLock
  ) -> Result<RemoteUpload, TroveError> {
    let copy: VerifiedCopy
    do throws(TroveError) {
      copy = try verifiedCopy(of: digest)
    } catch {
      return .failure(error)
    }
    defer { release(copy) }
    let turn = copy.size > Self.batchedObjectSize ? largeTurn : nil
    turn?.lock()
    defer { turn?.unlock() }
    let upload: RemoteUpload
    do throws(TroveError) {
      upload = try backend.upload(
        RemoteUploadItem(digest: digest, file: copy.file, size: copy.size, verify: copy.unverified))
    } catch  where error.code == .corruptObject {
      return .failure(corrupt(digest))
    } catch {
      return .failure(error)
    }
    if upload != .tooLarge { pushManifest(of: digest, to: backend) }
    return describe(
      digest, upload, on: backend, signer: signer, othersWriteIndex: othersWriteIndex)
  }

  /// Those of `digests` that keys name, in one read of the index; nil
  /// when it cannot be read (then each is described, and fails, alone).
  private func objectsWithKeys(_ digests: [BlobDigest]) -> Set<BlobDigest>? {
    guard !digests.isEmpty else { return [] }
    return try? index().read("read the keys of \(digests.count) objects") {
      (tx) throws(TroveError) in
      var keyed: Set<BlobDigest> = []
      for digest in digests where try !tx.keys(of: digest).isEmpty { keyed.insert(digest) }
      return keyed
    }
  }

  /// After `digest`'s blob (and its chunk manifest) is on the remote: its
  /// signed entry (with `signer`), then its keys' records. `upload` when
  /// they are written.
  private func describe(
    _ digest: BlobDigest, _ upload: RemoteUpload, on backend: any RemoteBackend,
    signer: SigningKey?, othersWriteIndex: String?
  ) -> Result<RemoteUpload, TroveError> {
    do throws(TroveError) {
      var facts: SignedFacts?
      if let signer {
        // Signed after the blob, before its keys: a reader that finds
        // a signed record finds the blob and its signed entry.
        let signed = try signedFacts(of: digest)
        try signObject(digest, facts: signed, on: backend, signer: signer)
        facts = signed
      }
      try writeKeyRecords(
        of: digest, to: backend, signer: signer, facts: facts,
        othersWriteIndex: othersWriteIndex)
      return .success(upload)
    } catch {
      return .failure(error)
    }
  }

  /// Writes `digest`'s chunk manifest beside its blob, when it has one,
  /// so that a store holding an earlier version pulls only the chunks it
  /// lacks. A hint: a remote that takes none (Redis; a `trove serve` peer
  /// cuts its own) or fails to loses nothing but that saving.
  private func pushManifest(of digest: BlobDigest, to backend: any RemoteBackend) {
    guard backend.keepsManifests, let manifest = try? chunkManifest(of: digest) else { return }
    do throws(TroveError) {
      try backend.writeManifest(manifest, of: digest)
    } catch {
      trace(
        .remote, "did not write the manifest of \(digest) to remote '\(backend.spec.name)'",
        why: error.message)
    }
  }

  /// The largest object moved beside others on sessions of a remote (a
  /// larger one waits its turn), or checked before it is sent (a larger
  /// one is hashed as it is sent).
  static let batchedObjectSize: Int64 = 4 << 20
  /// How many objects go up in one sequence before their keys are
  /// written (see `push(_:to:sessions:)`).
  static let describedObjects = 1024

  /// Writes the key records of the keys bound to `digest`, with what
  /// fetches learnt and the checksums.
  /// With `signer`, each record is signed, saying `facts` of the object,
  /// unless another user may have made the binding (`othersWriteIndex`
  /// says why): that record goes unsigned.
  private func writeKeyRecords(
    of digest: BlobDigest, to backend: any RemoteBackend, signer: SigningKey? = nil,
    facts: SignedFacts? = nil, othersWriteIndex: String? = nil
  )
    throws(TroveError)
  {
    let (keys, checksums) = try index().read("read the keys of \(digest)") {
      (tx) throws(TroveError) in (try tx.keys(of: digest), try tx.checksums(of: digest))
    }
    let time = currentTimeNanoseconds() / 1_000_000_000
    for binding in keys {
      let (record, warning) = publishedRecord(
        binding, checksums: checksums, signer: signer, facts: facts,
        othersWriteIndex: othersWriteIndex, time: time)
      if let warning { warn(warning) }
      guard let record else { continue }
      try backend.writeKeyRecord(record)
    }
  }

  /// The record of `binding` a push (or a server, as the read side of a
  /// remote) publishes, and what it says when it publishes none or one
  /// unsigned. With `signer`, the record is signed, saying `facts` of the
  /// object, unless another user may have made the binding
  /// (`othersWriteIndex` says why): then it goes unsigned.
  func publishedRecord(
    _ binding: KeyBinding, checksums: [Checksum], signer: SigningKey?, facts: SignedFacts?,
    othersWriteIndex: String?, time: Int64
  ) -> (record: RemoteKeyRecord?, warning: String?) {
    // A key a fetch made from a URL with a login in it (older versions
    // kept it) would publish the password: such a record stays here.
    if RemoteKeyRecord.holdsLogin(binding) {
      return (
        nil,
        "the record of key '\(URLUserinfo.split(binding.key).url)' is not pushed: its URL holds a login; fetch it again without one and remove this key"
      )
    }
    // A binding read from a remote record is whatever that remote's
    // writers chose (one made while other users could write the store
    // counts as such): a signer vouches only for what an origin sent it.
    if signer != nil, binding.isPulled {
      return (
        nil,
        "the record of key '\(binding.key)' is not signed or pushed: a remote's record or another user of this store chose it, not its origin; fetch it again once it is removed ('trove rm') to vouch for it"
      )
    }
    let record = RemoteKeyRecord(binding, checksums: checksums)
    // Where another user may write the index, any of them may have made
    // the binding: a signer vouches for its own, and the index does not
    // say whose this is.
    if signer != nil, let othersWriteIndex {
      return (
        record,
        "the record of key '\(binding.key)' is pushed unsigned: \(othersWriteIndex), so another user may have bound it; sign from a store only you can write"
      )
    }
    if let signer, let facts { return (record.signed(by: signer, facts: facts, time: time), nil) }
    return (record, nil)
  }

  /// An object's bytes, open for reading: the object file itself when it
  /// is stored raw, else a temp file in `tmp/` it was decompressed into
  /// (``release(_:)`` removes it). Checked against the digest already, or
  /// `unverified`: a raw object over ``batchedObjectSize`` is hashed as it
  /// is sent instead (in one read, not two), and the remote publishes it
  /// only if it matches.
  private struct VerifiedCopy {
    var file: FileDescriptor
    var size: Int64
    var temp: String?
    var unverified = false
  }

  /// The error for an object whose local copy does not match its digest.
  private func corrupt(_ digest: BlobDigest, compressed: Bool = false) -> TroveError {
    TroveError(
      .corruptObject,
      "object \(digest) in store '\(root)' is corrupt (its bytes do not match its digest); not uploaded",
      path: objectFilePath(digest, compressed: compressed), value: digest.description,
      remedy: .repairStore)
  }

  private func release(_ copy: VerifiedCopy) {
    copy.file.close()
    if let temp = copy.temp { try? tmpDirectory.removeFile(temp) }
  }

  /// `digest`'s bytes, checked against the digest: the object file itself
  /// when it is stored raw (hashed first), else a temp file in `tmp/` it
  /// is decompressed into.
  private func verifiedCopy(of digest: BlobDigest) throws(TroveError) -> VerifiedCopy {
    let (object, isCompressed) = try openObject(digest)
    let path = objectFilePath(digest, compressed: isCompressed)
    if !isCompressed {
      do throws(TroveError) {
        let size = try attempt("read", path) { () throws(SystemCallError) in
          try object.status().size
        }
        if size > Self.batchedObjectSize {
          return VerifiedCopy(file: object, size: size, unverified: true)
        }
        var hasher = XXH3Hasher()
        let buffer = UnsafeMutableRawBufferPointer.allocate(
          byteCount: Int(min(max(size, 1), 1 << 20)), alignment: 8)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while true {
          let n = try attempt("read", path) { () throws(SystemCallError) in
            try object.read(into: buffer, at: offset)
          }
          if n == 0 { break }
          hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
          offset += Int64(n)
        }
        guard hasher.finalize() == digest, offset == size else { throw corrupt(digest) }
        return VerifiedCopy(file: object, size: size)
      } catch {
        object.close()
        throw error
      }
    }
    object.close()
    let temp = StoreLayout.temporaryName("push")
    let file = try attempt("create temporary file in", tmpPath) { () throws(SystemCallError) in
      // Private, as every staged file: its bytes are another party's.
      try FileDescriptor.open(
        temp, in: tmpDirectory, [.readWrite, .create, .exclusive], permissions: 0o600)
    }
    do throws(TroveError) {
      let size = try write(
        digest, to: FileHandle(fileDescriptor: file.rawValue, closeOnDealloc: false))
      return VerifiedCopy(file: file, size: size, temp: temp)
    } catch {
      file.close()
      try? tmpDirectory.removeFile(temp)
      throw error
    }
  }
}
