/// One chunk of a stream: where it lies and the XXH3-128 of its bytes.
public struct Chunk: Sendable, Hashable {
  public var offset: Int64
  public var length: Int64
  public var digest: BlobDigest

  public init(offset: Int64, length: Int64, digest: BlobDigest) {
    self.offset = offset
    self.length = length
    self.digest = digest
  }
}

/// Cuts a stream into content-defined chunks (``ChunkCutter``) and hashes
/// each, in the same pass over bytes the caller already holds: fed the
/// buffers a put reads, it costs the gear hash and a second XXH3 over
/// bytes in cache, no read of its own.
public struct ChunkHasher: ~Copyable {
  private var cutter = ChunkCutter()
  private var hasher = XXH3Hasher()
  /// Where the current chunk starts in the stream.
  private var start: Int64 = 0
  /// Bytes of the current chunk fed so far.
  private var pending: Int64 = 0
  /// The chunks ended so far, in order.
  public private(set) var chunks: [Chunk] = []

  public init() {}

  /// Feeds the next `bytes` of the stream.
  public mutating func update(_ bytes: UnsafeRawBufferPointer) {
    var from = 0
    for end in cutter.cuts(in: bytes) {
      hasher.update(UnsafeRawBufferPointer(rebasing: bytes[from..<end]))
      let length = pending + Int64(end - from)
      chunks.append(Chunk(offset: start, length: length, digest: hasher.finalize()))
      hasher.reset()
      start += length
      pending = 0
      from = end
    }
    hasher.update(UnsafeRawBufferPointer(rebasing: bytes[from...]))
    pending += Int64(bytes.count - from)
  }

  /// Every chunk of the stream, the last (shorter than the others may be)
  /// included.
  public consuming func finish() -> [Chunk] {
    if pending > 0 {
      chunks.append(Chunk(offset: start, length: pending, digest: hasher.finalize()))
    }
    return chunks
  }
}
