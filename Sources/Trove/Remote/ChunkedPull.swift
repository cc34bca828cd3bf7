import Foundation

/// Where each part of a blob to pull comes from: chunks the store holds in
/// earlier versions, read from their files, and the rest, asked of the
/// remote in ranges (adjacent chunks in one).
struct ChunkedPullPlan {
  enum Piece: Equatable {
    /// `length` bytes at `offset` of the stored object `source`.
    case local(source: BlobDigest, offset: Int64, length: Int64)
    /// These bytes of the blob, from the remote.
    case remote(Range<Int64>)
  }

  var pieces: [Piece] = []
  var localBytes: Int64 = 0
  var remoteBytes: Int64 = 0
  var requests = 0

  /// The plan for a blob cut into `chunks`, given where the store holds
  /// chunks of those digests (`held`: digest → source object and offset).
  init(_ chunks: [Chunk], held: [BlobDigest: (source: BlobDigest, offset: Int64, length: Int64)]) {
    for chunk in chunks {
      if let at = held[chunk.digest], at.length == chunk.length {
        localBytes += chunk.length
        if case .local(let source, let offset, let length) = pieces.last, source == at.source,
          offset + length == at.offset
        {
          pieces[pieces.count - 1] = .local(
            source: source, offset: offset, length: length + chunk.length)
        } else {
          pieces.append(.local(source: at.source, offset: at.offset, length: chunk.length))
        }
      } else {
        remoteBytes += chunk.length
        let range = chunk.offset..<(chunk.offset + chunk.length)
        if case .remote(let last) = pieces.last, last.upperBound == range.lowerBound {
          pieces[pieces.count - 1] = .remote(last.lowerBound..<range.upperBound)
        } else {
          pieces.append(.remote(range))
          requests += 1
        }
      }
    }
  }
}

/// Pulls that move only the chunks a store lacks: when a remote keeps the
/// chunk manifest of a large blob (another Trove's `trove serve` cuts its
/// own; WebDAV and S3 remotes hold those pushes sent), and the store holds
/// earlier versions sharing chunks with it, the blob is written from the
/// local chunks (read from their objects' files) and the missing ones
/// (`Range` requests, adjacent chunks coalesced). The manifest, and the
/// local manifests, are hints: the bytes go through the store's writer,
/// which hashes them all, and are published only as the digest's — and,
/// from a remote whose signatures the store trusts, only with the length
/// and SHA-256 a trusted key signed. Any failure leaves nothing, and the
/// caller pulls the blob whole.
extension Store {
  /// Earlier versions a chunked pull reads chunks from, at most.
  static let chunkedPullSources = 4
  /// More range requests than this, and the blob is pulled whole.
  static let chunkedPullRequests = 4096

  /// Pulls `digest`'s blob of `size` bytes from `backend` in chunks when
  /// that saves transfer: nil when it does not (chunking off, a blob under
  /// ``CachePolicy/chunkMinimumSize``, no manifest on the remote, no chunk
  /// held here), for the caller to pull it whole.
  ///
  /// - Throws: what the remote or the store did wrong along the way
  ///   (`.checksumMismatch` for bytes that are not the digest's), nothing
  ///   stored: the caller pulls whole then.
  func pullInChunks(
    _ digest: BlobDigest, size: Int64, from backend: any RemoteBackend, spec: RemoteSpec,
    facts: SignedFacts?
  ) throws(TroveError) -> RemotePull? {
    let policy = try currentSettings().policy
    guard policy.chunking, size >= policy.chunkMinimumSize,
      let manifest = try backend.readManifest(digest, size: size)
    else { return nil }
    let plan = ChunkedPullPlan(manifest.chunks, held: try chunksHeld(for: manifest))
    guard plan.localBytes > 0, plan.requests <= Self.chunkedPullRequests else { return nil }
    trace(
      .remote,
      "pulling \(digest) from remote '\(spec.name)' in chunks: \(CachePolicy.Quantities.formatSize(plan.remoteBytes)) in \(plan.requests) ranges, \(CachePolicy.Quantities.formatSize(plan.localBytes)) from stored versions",
      why: "the remote keeps its manifest and this store holds chunks of it")
    // The versions read from are opened before the writer's admission,
    // which may evict them: an open file reads on after its unlink.
    var sources: [BlobDigest: FileDescriptor] = [:]
    defer { for file in sources.values { file.close() } }
    for case .local(let source, _, _) in plan.pieces where sources[source] == nil {
      guard let file = try objects.open(source, compressed: false) else { return nil }
      sources[source] = file
    }
    let writer = try makeWriter(
      expectedSize: size, priority: .important, source: "remote '\(spec.name)'", exact: true)
    let sha = facts.map { _ in SHA2Hasher(.sha256) }
    writer.companion = sha
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
    defer { buffer.deallocate() }
    var cloned: Int64 = 0
    do throws(TroveError) {
      for piece in plan.pieces {
        switch piece {
        case .remote(let range):
          try backend.download(digest, range: range, into: writer)
        case .local(let source, let offset, let length):
          guard let file = sources[source] else { throw notFound(source) }
          cloned += try writer.append(
            length, at: offset, of: file, path: objects.path(source, compressed: false),
            buffer: buffer)
        }
      }
      let result = try commitPulled(writer, digest, size: size, sha: sha, facts: facts, spec: spec)
      // Its blocks shared with the versions it came from where the
      // chunks were not cloned (not congruent to the block size, a
      // filesystem that cannot clone), and recorded either way.
      _ = try? shareBlocks(of: [digest])
      return RemotePull(
        digest: digest, size: result.size, downloaded: true,
        transferredBytes: plan.remoteBytes + Int64(manifest.encoded.count), clonedBytes: cloned)
    } catch {
      writer.cancel()
      throw error
    }
  }

  /// Where the store holds chunks of `manifest`: in the raw objects with
  /// most of its hooks, by chunk digest.
  private func chunksHeld(for manifest: ChunkManifest) throws(TroveError)
    -> [BlobDigest: (source: BlobDigest, offset: Int64, length: Int64)]
  {
    let candidates = try index().read("find versions of a blob to pull") {
      (tx) throws(TroveError) in
      try tx.objectsSharing(manifest.chunks, limit: Self.chunkedPullSources)
    }
    var held: [BlobDigest: (source: BlobDigest, offset: Int64, length: Int64)] = [:]
    for candidate in candidates {
      guard let local = try? chunkManifest(of: candidate.digest) else { continue }
      for chunk in local.chunks where held[chunk.digest] == nil {
        held[chunk.digest] = (candidate.digest, chunk.offset, chunk.length)
      }
    }
    return held
  }
}
