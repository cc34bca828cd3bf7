/// Where a new object can share disk blocks with an older one it has
/// chunks in common with: the plan ``FileDescriptor/shareBlocks(_:at:with:at:)``
/// carries out, the kernel checking every byte as it does.
///
/// A chunk found in both (the same XXH3-128 and length) can share the
/// whole blocks inside it, and only if it lies at offsets congruent modulo
/// the block size in the two files: blocks are shared whole or not at all.
/// An edit in place keeps the chunks around it at the same offsets, so
/// all of them qualify; an insertion shifts everything after it, and only
/// the chunks that happen to land congruent do.
struct BlockSharing: Sendable, Equatable {
  /// `length` bytes at `offset` in the new file, the same as those at
  /// `sourceOffset` in the old one.
  struct Range: Sendable, Equatable {
    var sourceOffset: Int64
    var offset: Int64
    var length: Int64
  }

  /// The ranges, in the new file's order, each as long as it can be.
  var ranges: [Range] = []

  /// Bytes the plan would share.
  var bytes: Int64 { ranges.reduce(0) { $0 + $1.length } }

  /// The plan for a new file of `size` bytes cut into `chunks`, against
  /// an old one of `sourceSize` cut into `sourceChunks`, on a filesystem
  /// of `blockSize`-byte blocks. A chunk that ends both files may share
  /// its last, partial block too (the kernel takes a range to the end of
  /// both files).
  init(
    _ chunks: [Chunk], size: Int64, from sourceChunks: [Chunk], sourceSize: Int64,
    blockSize: Int64
  ) {
    precondition(blockSize > 0)
    var byDigest: [BlobDigest: Chunk] = [:]
    for chunk in sourceChunks where byDigest[chunk.digest] == nil { byDigest[chunk.digest] = chunk }
    // Runs of chunks in common, adjacent in both files, first; then each
    // run's whole blocks: a block straddling two shared chunks is shared.
    var runs: [Range] = []
    for chunk in chunks {
      guard let old = byDigest[chunk.digest], old.length == chunk.length,
        (old.offset - chunk.offset) % blockSize == 0
      else { continue }
      if let last = runs.last, last.offset + last.length == chunk.offset,
        last.sourceOffset + last.length == old.offset
      {
        runs[runs.count - 1].length += chunk.length
      } else {
        runs.append(Range(sourceOffset: old.offset, offset: chunk.offset, length: chunk.length))
      }
    }
    for run in runs {
      let start = (run.offset + blockSize - 1) / blockSize * blockSize
      let runEnd = run.offset + run.length
      let endsBoth = runEnd == size && run.sourceOffset + run.length == sourceSize
      let end = endsBoth ? runEnd : runEnd / blockSize * blockSize
      guard end > start else { continue }
      ranges.append(
        Range(
          sourceOffset: run.sourceOffset + (start - run.offset), offset: start, length: end - start)
      )
    }
  }
}
