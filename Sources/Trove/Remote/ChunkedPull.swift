import Foundation
import Synchronization

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

  /// The bytes of an earlier version that the missing chunks of piece
  /// `index` most likely replaced: those between the local pieces around
  /// it, when both come from one object in order and the gap is not much
  /// longer than the piece; else as many as it has after the piece
  /// before it, or before the piece after it. Nil when no local piece is
  /// beside it.
  func replaced(at index: Int) -> (source: BlobDigest, range: Range<Int64>)? {
    guard case .remote(let missing) = pieces[index] else { return nil }
    let slack: Int64 = 64 << 10
    var before: (source: BlobDigest, end: Int64)?
    var after: (source: BlobDigest, start: Int64)?
    if index > 0, case .local(let source, let offset, let length) = pieces[index - 1] {
      before = (source, offset + length)
    }
    if index + 1 < pieces.count, case .local(let source, let offset, _) = pieces[index + 1] {
      after = (source, offset)
    }
    if let before, let after, before.source == after.source, after.start >= before.end,
      after.start - before.end <= 4 * Int64(missing.count) + slack
    {
      return (before.source, before.end..<after.start)
    }
    if let before {
      return (before.source, before.end..<(before.end + Int64(missing.count) + slack))
    }
    if let after {
      return (after.source, max(0, after.start - Int64(missing.count) - slack)..<after.start)
    }
    return nil
  }

  /// Piece `index`, a missing range, replaced by `pieces` (its bytes, in
  /// order); the totals follow.
  mutating func replace(_ index: Int, with replacement: [Piece]) {
    pieces.replaceSubrange(index...index, with: replacement)
    localBytes = 0
    remoteBytes = 0
    requests = 0
    for piece in pieces {
      switch piece {
      case .local(_, _, let length): localBytes += length
      case .remote(let range):
        remoteBytes += Int64(range.count)
        requests += 1
      }
    }
  }

  /// The pieces that make `missing` from its whole blocks found in an
  /// earlier version (`found[k]`: where block `firstBlock + k` is in the
  /// bytes at `region` of `source`) and the rest from the remote; adjacent
  /// pieces joined.
  static func pieces(
    of missing: Range<Int64>, firstBlock: Int64, found: [Int?], source: BlobDigest,
    region: Range<Int64>
  ) -> [Piece] {
    let block = Int64(BlockSums.blockSize)
    var out: [Piece] = []
    func add(_ piece: Piece) {
      switch (out.last, piece) {
      case (.remote(let last), .remote(let range)) where last.upperBound == range.lowerBound:
        out[out.count - 1] = .remote(last.lowerBound..<range.upperBound)
      case (.local(let s, let o, let l), .local(let t, let p, let m)) where s == t && o + l == p:
        out[out.count - 1] = .local(source: s, offset: o, length: l + m)
      default:
        if case .remote(let range) = piece, range.isEmpty { return }
        out.append(piece)
      }
    }
    add(.remote(missing.lowerBound..<(firstBlock * block)))
    for (k, at) in found.enumerated() {
      let start = (firstBlock + Int64(k)) * block
      if let at {
        add(.local(source: source, offset: region.lowerBound + Int64(at), length: block))
      } else {
        add(.remote(start..<(start + block)))
      }
    }
    add(.remote(((firstBlock + Int64(found.count)) * block)..<missing.upperBound))
    return out
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
    var plan = ChunkedPullPlan(manifest.chunks, held: try chunksHeld(for: manifest))
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
    // Within the missing chunks, the blocks an earlier version holds too.
    let sumsBytes = refineInBlocks(&plan, digest, from: backend, sources: sources)
    let writer = try makeWriter(
      expectedSize: size, priority: .important, source: "remote '\(spec.name)'", exact: true)
    let sha = facts.map { _ in SHA2Hasher(.sha256) }
    writer.companion = sha
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
    defer { buffer.deallocate() }
    var cloned: Int64 = 0
    // Only a peer that gave signatures can send many ranges at once; one
    // that refuses a batch is not asked again.
    var batching = sumsBytes > 0
    do throws(TroveError) {
      var next = 0
      while next < plan.pieces.count {
        // Small missing ranges, many at once where the remote can send
        // them so; a large one streams alone.
        var end = next
        var wanted: [Range<Int64>] = []
        var wantedBytes: Int64 = 0
        while batching, end < plan.pieces.count {
          if case .remote(let range) = plan.pieces[end] {
            guard Int64(range.count) <= Self.batchedRangeBytes,
              wantedBytes + Int64(range.count) <= BlockSums.maximumRangeBytes,
              wanted.count < BlockSums.maximumRanges
            else { break }
            wanted.append(range)
            wantedBytes += Int64(range.count)
          }
          end += 1
        }
        let batch = wanted.isEmpty ? nil : try backend.readRanges(digest, wanted)
        if batch == nil {
          end = next + 1
          if !wanted.isEmpty { batching = false }
        }
        var taken = 0
        for piece in plan.pieces[next..<end] {
          switch piece {
          case .remote(let range):
            guard let batch else {
              try backend.download(digest, range: range, into: writer)
              continue
            }
            try writer.write(batch[taken..<(taken + range.count)])
            taken += range.count
          case .local(let source, let offset, let length):
            guard let file = sources[source] else { throw notFound(source) }
            cloned += try writer.append(
              length, at: offset, of: file, path: objects.path(source, compressed: false),
              buffer: buffer)
          }
        }
        next = end
      }
      let result = try commitPulled(writer, digest, size: size, sha: sha, facts: facts, spec: spec)
      // Its blocks shared with the versions it came from where the
      // chunks were not cloned (not congruent to the block size, a
      // filesystem that cannot clone), and recorded either way.
      _ = try? shareBlocks(of: [digest])
      return RemotePull(
        digest: digest, size: result.size, downloaded: true,
        transferredBytes: plan.remoteBytes + Int64(manifest.encoded.count) + sumsBytes,
        clonedBytes: cloned)
    } catch {
      writer.cancel()
      throw error
    }
  }

  /// Missing ranges up to this long are asked for many at once.
  static let batchedRangeBytes: Int64 = 1 << 20
  /// Bytes of an earlier version searched for the blocks of one missing
  /// range, at most.
  static let replacedBytesSearched: Int64 = 16 << 20

  /// Finds, for each missing range of `plan` beside a local piece, the
  /// blocks of it the earlier version holds around there (``BlockSums``:
  /// their signatures asked of the remote, the old bytes searched with
  /// rsync's rolling checksum), and takes them from there instead. Returns
  /// the bytes of signatures received; 0 when the remote has none to give
  /// (all but a `trove serve` peer), or anything fails: the plan stays.
  private func refineInBlocks(
    _ plan: inout ChunkedPullPlan, _ digest: BlobDigest, from backend: any RemoteBackend,
    sources: [BlobDigest: FileDescriptor]
  ) -> Int64 {
    let block = Int64(BlockSums.blockSize)
    var candidates: [(index: Int, blocks: Range<Int64>, source: BlobDigest, region: Range<Int64>)] =
      []
    for index in plan.pieces.indices {
      guard case .remote(let missing) = plan.pieces[index],
        let (source, region) = plan.replaced(at: index),
        Int64(region.count) <= Self.replacedBytesSearched
      else { continue }
      let blocks = ((missing.lowerBound + block - 1) / block)..<(missing.upperBound / block)
      if !blocks.isEmpty { candidates.append((index, blocks, source, region)) }
    }
    let targets = candidates
    guard !targets.isEmpty,
      let sums = try? backend.readBlockSums(digest, blocks: targets.map(\.blocks)),
      sums.count == targets.reduce(0, { $0 + Int($1.blocks.count) })
    else { return 0 }
    // Where each target's signatures start in `sums`.
    let firsts = targets.reduce(into: [0]) { $0.append($0.last! + Int($1.blocks.count)) }
    // The searches are independent and bound by the CPU: one a core.
    let largest = targets.map(\.region.count).max() ?? 0
    let found = Mutex<[(Int, [ChunkedPullPlan.Piece])]>([])
    let pieces = plan.pieces
    Parallel.forEach(
      targets.count, width: min(ProcessInfo.processInfo.activeProcessorCount, 4),
      context: { SearchBuffer(byteCount: largest) },
      { (buffer, i) throws(Never) in
        let target = targets[i]
        let these = sums[firsts[i]..<(firsts[i] + Int(target.blocks.count))]
        guard let file = sources[target.source],
          let read = try? file.read(
            into: UnsafeMutableRawBufferPointer(rebasing: buffer.bytes[0..<target.region.count]),
            at: target.region.lowerBound),
          case .remote(let missing) = pieces[target.index]
        else { return }
        let located = BlockSums.locate(
          these, in: UnsafeRawBufferPointer(rebasing: buffer.bytes[0..<read]))
        guard located.contains(where: { $0 != nil }) else { return }
        let replacement = ChunkedPullPlan.pieces(
          of: missing, firstBlock: target.blocks.lowerBound, found: located,
          source: target.source, region: target.region)
        found.withLock { $0.append((target.index, replacement)) }
      })
    // From the end, so that the indices before stay right.
    let replacements = found.withLock { $0 }.sorted { $0.0 > $1.0 }
    for (index, pieces) in replacements { plan.replace(index, with: pieces) }
    return Int64(sums.count * BlockSums.entrySize)
  }

  /// A thread's buffer for the bytes it searches.
  private final class SearchBuffer {
    let bytes: UnsafeMutableRawBufferPointer
    init(byteCount: Int) {
      bytes = .allocate(byteCount: max(byteCount, 1), alignment: 4096)
    }
    deinit { bytes.deallocate() }
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
