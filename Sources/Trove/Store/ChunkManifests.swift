import Foundation

/// The chunk manifests of large raw objects (``ChunkManifest``): recorded
/// when a put cuts them as it writes, cut from the stored bytes when an
/// object has none (a clone put hashes the source's cached pages and cuts
/// nothing; a rebuilt index has lost them).
extension Store {
  /// The chunks of `digest`'s object: as recorded, or cut now from its
  /// bytes and recorded. Nil for an object that gets none — compressed,
  /// smaller than ``CachePolicy/chunkMinimumSize``, or chunking off — and
  /// for one whose bytes no longer hash to its digest (`verify`
  /// deals with those).
  ///
  /// - Throws: `.notFound` when the store does not hold `digest`.
  public func chunkManifest(of digest: BlobDigest) throws(TroveError) -> ChunkManifest? {
    let found = try index().read("look up the chunks of \(digest)") {
      (tx) throws(TroveError) -> (StoreEntry, ChunkManifest?)? in
      guard let entry = try tx.entry(for: digest) else { return nil }
      return (entry, entry.isCompressed ? nil : try tx.manifest(of: digest, size: entry.size))
    }
    guard let (entry, recorded) = found else { throw notFound(digest) }
    if let recorded { return recorded }
    let policy = try currentSettings().policy
    guard !entry.isCompressed, policy.chunking, entry.size >= policy.chunkMinimumSize else {
      return nil
    }
    return try cutManifest(of: digest, size: entry.size)
  }

  /// Cuts the chunks of `digest`'s raw file and records them, once its
  /// bytes hash to the digest: a manifest is never taken from anything else.
  private func cutManifest(of digest: BlobDigest, size: Int64) throws(TroveError)
    -> ChunkManifest?
  {
    guard let file = try objects.open(digest, compressed: false) else { throw notFound(digest) }
    defer { file.close() }
    file.adviseSequential()
    var hasher = XXH3Hasher()
    var chunker = ChunkHasher()
    let read = try attempt("read", objects.path(digest, compressed: false)) {
      () throws(SystemCallError) in
      try Transfer.read(from: file, sizeHint: size) {
        hasher.update($0)
        chunker.update($0)
      }
    }
    let chunks = chunker.finish()
    guard read == size, hasher.finalize() == digest else { return nil }
    let manifest = ChunkManifest(size: size, chunks: chunks)
    // Recording it only saves the next caller the cut: a store this process
    // may not write, or one that fails to, still gives the chunks.
    if !objects.isReadOnly { try? objects.recordManifest(manifest, of: digest) }
    return manifest
  }
}

extension Store {
  /// Every object that gets a manifest (raw, of at least
  /// ``CachePolicy/chunkMinimumSize``; none with chunking off), recorded
  /// yet or not, in digest order.
  public func digestsWithChunks() throws(TroveError) -> [BlobDigest] {
    let policy = try currentSettings().policy
    guard policy.chunking else { return [] }
    var all: [BlobDigest] = []
    var cursor = ""
    while true {
      let page = try index().read("list objects with chunks") { (tx) throws(TroveError) in
        try tx.rawDigests(after: cursor, minimumSize: policy.chunkMinimumSize, limit: 1000)
      }
      guard let last = page.last else { return all }
      all += page
      cursor = last.hex
    }
  }
}
