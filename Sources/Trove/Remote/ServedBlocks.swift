/// What a `trove serve` peer gives a puller that holds an earlier version
/// of a large object (``BlockSums``): the signatures of the blocks it
/// asks for, and many ranges of the object in one answer. Both read the
/// object's raw file; the puller checks the whole object it makes.
extension Store {
  /// The signatures (``BlockSums/encode(_:)``) of blocks `blocks` of
  /// `digest`'s object, a range list of block numbers (``RangeList``) of
  /// whole blocks; nil when the store does not hold it uncompressed, or
  /// the list is malformed or asks for more than ``BlockSums/maximumBlocks``.
  @_spi(Serving)
  public func servedBlockSums(of digest: BlobDigest, blocks list: String) throws(TroveError)
    -> [UInt8]?
  {
    guard let (file, size) = try rawObject(digest) else { return nil }
    defer { file.close() }
    let block = Int64(BlockSums.blockSize)
    guard
      let blocks = RangeList.decode(
        list, below: size / block, maximumCount: BlockSums.maximumRanges,
        maximumTotal: BlockSums.maximumBlocks)
    else { return nil }
    let buffer = UnsafeMutableRawBufferPointer.allocate(
      byteCount: 256 * BlockSums.blockSize, alignment: 4096)
    defer { buffer.deallocate() }
    var entries: [BlockSums.Entry] = []
    for range in blocks {
      for start in stride(from: range.lowerBound, to: range.upperBound, by: 256) {
        let count = Int(min(range.upperBound - start, 256))
        let wanted = UnsafeMutableRawBufferPointer(
          rebasing: buffer[0..<(count * BlockSums.blockSize)])
        try read(wanted, at: start * block, of: file, digest)
        entries += BlockSums.entries(ofBlocksIn: UnsafeRawBufferPointer(wanted))
      }
    }
    return BlockSums.encode(entries)
  }

  /// The bytes of the byte ranges `list` (``RangeList``) of `digest`'s
  /// object, one after the other; nil when the store does not hold it
  /// uncompressed, or the list is malformed or asks for more than
  /// ``BlockSums/maximumRangeBytes``.
  @_spi(Serving)
  public func servedRanges(of digest: BlobDigest, ranges list: String) throws(TroveError)
    -> [UInt8]?
  {
    guard let (file, size) = try rawObject(digest) else { return nil }
    defer { file.close() }
    guard
      let ranges = RangeList.decode(
        list, below: size, maximumCount: BlockSums.maximumRanges,
        maximumTotal: BlockSums.maximumRangeBytes)
    else { return nil }
    let total = ranges.reduce(0) { $0 + Int($1.count) }
    var bytes = [UInt8](repeating: 0, count: total)
    var at = 0
    for range in ranges {
      let failure = bytes.withUnsafeMutableBytes { out -> TroveError? in
        let wanted = UnsafeMutableRawBufferPointer(rebasing: out[at..<(at + range.count)])
        do throws(TroveError) {
          try read(wanted, at: range.lowerBound, of: file, digest)
          return nil
        } catch {
          return error
        }
      }
      if let failure { throw failure }
      at += range.count
    }
    return bytes
  }

  /// `digest`'s raw object file, open, and its length.
  private func rawObject(_ digest: BlobDigest) throws(TroveError) -> (FileDescriptor, Int64)? {
    guard let entry = try self.entry(for: digest), !entry.isCompressed,
      let file = try objects.open(digest, compressed: false)
    else { return nil }
    return (file, entry.size)
  }

  /// Fills `buffer` from `offset` of `digest`'s raw file: a file shorter
  /// than its entry says was damaged, and is refused.
  private func read(
    _ buffer: UnsafeMutableRawBufferPointer, at offset: Int64, of file: FileDescriptor,
    _ digest: BlobDigest
  ) throws(TroveError) {
    let path = objects.path(digest, compressed: false)
    let read = try attempt("read", path) { () throws(SystemCallError) in
      try file.read(into: buffer, at: offset)
    }
    guard read == buffer.count else {
      throw TroveError(
        .corruptObject, "object '\(path)' is corrupt: it is shorter than its entry says",
        path: path, value: digest.description, remedy: .removeAndStoreAgain)
    }
  }
}
