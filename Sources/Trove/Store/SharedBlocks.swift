import Foundation

/// What sharing blocks between versions did (or, in a dry run, would do).
public struct BlockSharingReport: Sendable, Equatable, Codable {
  /// Objects with a manifest looked at.
  public var examined = 0
  /// Of those, the objects that share (or would share) blocks with another
  /// they did not share before.
  public var objects = 0
  /// Bytes newly shared (in a dry run: that the plan would share; the
  /// kernel shares only what it finds equal).
  public var sharedBytes: Int64 = 0
  /// Bytes the plans found shared already.
  public var alreadySharedBytes: Int64 = 0
  /// Why nothing could be shared on this filesystem, if so.
  public var unsupported: String?

  public init() {}
}

/// Shares disk blocks between versions of a file: for a large raw object,
/// the objects it has chunks in common with (found through the chunk
/// hooks), and in each the whole blocks of the chunks that lie at offsets
/// congruent modulo the block size (``BlockSharing``), shared with
/// `FIDEDUPERANGE`. The kernel compares the bytes of every range before it
/// shares them, so nothing here trusts a manifest: a wrong one shares
/// nothing, and no object's bytes ever change. Objects stay plain files;
/// a file whose blocks are shared is copied on write, and objects are
/// never written.
///
/// What is shared is recorded (`shared_blocks`), so that the store's
/// allocated total counts shared blocks once; the objects the volume
/// frees on eviction are measured as ever.
extension Store {
  /// How many earlier versions a new object shares blocks with, at most.
  static let sharingSources = 4

  /// Shares the blocks of `digests` (nil: every object whose manifest was
  /// not yet examined — a put's, a pull's) with the earlier versions they
  /// have chunks in common with; with `dryRun`, only says what it would
  /// share. `limit` bounds the objects looked at (a sweep's share of work).
  ///
  /// - Throws: `.notFound` for a digest the store does not hold; index and
  ///   I/O errors. A filesystem that cannot share blocks is not an error:
  ///   the report says why (``BlockSharingReport/unsupported``).
  public func shareBlocks(
    of digests: [BlobDigest]? = nil, dryRun: Bool = false, limit: Int = .max
  ) throws(TroveError) -> BlockSharingReport {
    if !dryRun { try requireWritable() }
    var report = BlockSharingReport()
    let blockSize = try attempt("read", objects.objectsPath) { () throws(SystemCallError) in
      try objects.objectsDirectory.filesystemBlockSize()
    }
    var pending = digests ?? []
    var cursor = ""
    var done = 0
    while done < limit {
      if digests == nil, pending.isEmpty {
        // Paged by digest: one examined and left unmarked (a dry run marks
        // nothing) is not met again.
        let page = try index().read("list objects to share blocks of") {
          (tx) throws(TroveError) in
          try tx.manifestDigests(after: cursor, limit: 256, unexaminedOnly: true)
        }
        if page.isEmpty { break }
        cursor = page.last?.hex ?? cursor
        pending = page
      }
      guard !pending.isEmpty else { break }
      let digest = pending.removeFirst()
      done += 1
      let found: ChunkManifest?
      do throws(TroveError) {
        found = try chunkManifest(of: digest)
      } catch  where error.code == .notFound {
        found = nil  // removed meanwhile
      }
      guard let manifest = found else {
        // Nothing to share (a manifest that no longer decodes over bytes
        // that no longer hash, chunking since turned off): not tried again.
        if !dryRun { try objects.markExamined([digest]) }
        continue
      }
      report.examined += 1
      do throws(TroveError) {
        try share(digest, manifest, blockSize: blockSize, dryRun: dryRun, into: &report)
      } catch  where report.unsupported != nil {
      }
      if report.unsupported != nil {
        // Nothing can share blocks here: no manifest is tried again (a
        // sweep would otherwise try one each time).
        if !dryRun { try objects.markExamined(nil) }
        return report
      }
    }
    return report
  }

  /// Shares `digest`'s blocks with up to ``sharingSources`` objects it has
  /// chunks in common with, most in common first, each taking the chunks
  /// the ones before did not.
  private func share(
    _ digest: BlobDigest, _ manifest: ChunkManifest, blockSize: Int64, dryRun: Bool,
    into report: inout BlockSharingReport
  ) throws(TroveError) {
    let candidates = try index().read("find the versions of \(digest)") {
      (tx) throws(TroveError) in
      try tx.objectsSharing(manifest.chunks, before: digest, limit: Self.sharingSources)
    }
    var results: [(BlobDigest, Int64)] = []
    var newlyShared: Int64 = 0
    if !candidates.isEmpty, let target = try objects.open(digest, compressed: false) {
      defer { target.close() }
      var remaining = manifest.chunks
      // The target's byte ranges taken by an earlier source: a block is
      // shared with one source and counted once.
      var covered: [Range<Int64>] = []
      var targetExtents: [Extent]?
      for candidate in candidates where !remaining.isEmpty {
        guard let sourceManifest = try? chunkManifest(of: candidate.digest),
          let source = try objects.open(candidate.digest, compressed: false)
        else { continue }
        defer { source.close() }
        let plan = BlockSharing(
          remaining, size: manifest.size, from: sourceManifest.chunks,
          sourceSize: sourceManifest.size, blockSize: blockSize)
        guard !plan.ranges.isEmpty else { continue }
        if targetExtents == nil { targetExtents = try? target.extentMap(sync: true) }
        let sourceExtents = (try? source.extentMap(sync: true)) ?? []
        var pairBytes: Int64 = 0
        for range in plan.ranges.flatMap({ Self.uncovered($0, by: covered) }) {
          let already = Self.bytesShared(
            range, target: targetExtents ?? [], source: sourceExtents)
          report.alreadySharedBytes += already
          if already == range.length {
            pairBytes += already
            continue
          }
          if dryRun {
            newlyShared += range.length - already
            pairBytes += range.length
            continue
          }
          do throws(SystemCallError) {
            let shared = try source.shareBlocks(
              range.length, at: range.sourceOffset, with: target, at: range.offset)
            newlyShared += max(0, shared - already)
            pairBytes += shared
          } catch  where error.errno == .invalidArgument {
            // A range the filesystem will not take (it found the files
            // changed, say): shared it is not, and the others may be.
            continue
          } catch  where error.errno.meansUnsupported {
            report.unsupported =
              "the filesystem of \(objects.objectsPath) cannot share blocks between files (\(error.errno))"
            throw TroveError.system(error, "share blocks of", path: objects.objectsPath)
          } catch {
            throw TroveError.system(
              error, "share blocks of", path: objects.path(digest, compressed: false))
          }
        }
        // The chunks inside the planned ranges are settled; the next
        // candidate is asked for the others only.
        remaining.removeAll { chunk in
          plan.ranges.contains {
            $0.offset <= chunk.offset && chunk.offset + chunk.length <= $0.offset + $0.length
          }
        }
        covered = Self.merged(covered + plan.ranges.map { $0.offset..<($0.offset + $0.length) })
        if pairBytes > 0 { results.append((candidate.digest, pairBytes)) }
      }
    }
    if newlyShared > 0 {
      report.objects += 1
      report.sharedBytes += newlyShared
    }
    if !dryRun { try objects.recordSharing(digest, with: results) }
  }

  /// The parts of `range` outside `covered` (sorted, disjoint), each with
  /// its source offset moved along.
  static func uncovered(_ range: BlockSharing.Range, by covered: [Range<Int64>])
    -> [BlockSharing.Range]
  {
    var pieces: [BlockSharing.Range] = []
    var start = range.offset
    let end = range.offset + range.length
    for taken in covered where taken.upperBound > start && taken.lowerBound < end {
      if taken.lowerBound > start {
        pieces.append(
          BlockSharing.Range(
            sourceOffset: range.sourceOffset + (start - range.offset), offset: start,
            length: taken.lowerBound - start))
      }
      start = max(start, taken.upperBound)
    }
    if start < end {
      pieces.append(
        BlockSharing.Range(
          sourceOffset: range.sourceOffset + (start - range.offset), offset: start,
          length: end - start))
    }
    return pieces
  }

  /// `ranges` sorted, overlapping and touching ones joined.
  static func merged(_ ranges: [Range<Int64>]) -> [Range<Int64>] {
    var out: [Range<Int64>] = []
    for r in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
      if let last = out.last, r.lowerBound <= last.upperBound {
        out[out.count - 1] = last.lowerBound..<max(last.upperBound, r.upperBound)
      } else {
        out.append(r)
      }
    }
    return out
  }

  /// Bytes of `range` whose blocks the two files already share: where the
  /// target's extent maps its offset to the same physical place as the
  /// source's extent maps the source offset.
  static func bytesShared(_ range: BlockSharing.Range, target: [Extent], source: [Extent])
    -> Int64
  {
    var shared: Int64 = 0
    var at: Int64 = 0
    while at < range.length {
      guard let t = extent(covering: range.offset + at, in: target),
        let s = extent(covering: range.sourceOffset + at, in: source)
      else { break }
      let tOffset = UInt64(range.offset + at) - t.logical
      let sOffset = UInt64(range.sourceOffset + at) - s.logical
      let run = Int64(min(t.length - tOffset, s.length - sOffset, UInt64(range.length - at)))
      // An extent not yet placed (delayed allocation) has no physical
      // address to compare.
      if t.isPlaced, s.isPlaced, t.physical + tOffset == s.physical + sOffset { shared += run }
      at += run
    }
    return shared
  }

  private static func extent(covering offset: Int64, in extents: [Extent]) -> Extent? {
    let o = UInt64(offset)
    var low = 0
    var high = extents.count
    while low < high {
      let mid = (low + high) / 2
      if extents[mid].logical + extents[mid].length <= o { low = mid + 1 } else { high = mid }
    }
    guard low < extents.count, extents[low].logical <= o else { return nil }
    return extents[low]
  }
}
