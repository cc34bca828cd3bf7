/// What ``Store/recompress(onProgress:)`` rewrote.
public struct RecompressReport: Sendable, Hashable, Codable {
  /// Raw objects now stored compressed.
  public var compressed: Int
  /// Compressed objects now stored raw.
  public var decompressed: Int
  /// Objects left as they were (already in the policy's form, too small,
  /// or not worth compressing).
  public var unchanged: Int
  /// Stray second copies (both forms of one digest, left by a crash) removed.
  public var twinsRemoved: Int
  /// Bytes the object files took before and after.
  public var storedBytesBefore: Int64
  /// Bytes the object files take now.
  public var storedBytesAfter: Int64
  /// How long it took, in seconds.
  public var seconds: Double
}

extension Store {
  /// Rewrites existing objects to the current compression policy, in both
  /// directions, one object at a time and crash-safe (as `ccache -X`
  /// does): with compression off, compressed objects are stored raw again;
  /// with it on, raw objects that qualify (size, a compressible sample)
  /// are compressed. Objects already compressed keep their level.
  /// O(stored bytes of the objects rewritten).
  ///
  /// `onProgress`, when given, hears of the objects handled so far, out
  /// of the number there were when it began, after each one.
  public func recompress(onProgress: ProgressHandler? = nil) throws(TroveError)
    -> RecompressReport
  {
    try requireWritable()
    let clock = ContinuousClock()
    let start = clock.now
    let policy = try currentSettings().policy
    var report = RecompressReport(
      compressed: 0, decompressed: 0, unchanged: 0, twinsRemoved: 0, storedBytesBefore: 0,
      storedBytesAfter: 0, seconds: 0)
    let sample = UnsafeMutableRawBufferPointer.allocate(
      byteCount: CachePolicy.sampleSize, alignment: 4096)
    defer { sample.deallocate() }
    let entries = try index().read("list entries") { (tx) throws(TroveError) in try tx.entries() }
    for (number, entry) in entries.enumerated() {
      defer {
        onProgress?(
          ProgressReport(
            unit: .items, completed: Int64(number + 1), total: Int64(entries.count)))
      }
      // A twin in the other form (a crash between publish and removal) is
      // tidied, and the row made to match, by reconciling the digest.
      if try objects.isStoredTwice(entry.digest) {
        report.twinsRemoved += try objects.reconcile(entry.digest).twins
      }
      guard let object = try objects.find(entry.digest), object.status.isRegular else {
        continue  // evicted or removed meanwhile
      }
      report.storedBytesBefore += object.status.size
      let decision: StorageDecision
      if object.isCompressed {
        decision =
          policy.compression == .none
          ? .raw(skip: nil) : .zstd(level: 0, workers: policy.compressionWorkers)
      } else {
        decision = policy.storage(size: object.status.size) {
          guard let fd = try? objects.open(entry.digest, compressed: false) else { return nil }
          defer { fd.close() }
          guard let n = try? fd.read(into: sample, at: 0) else { return nil }
          return UnsafeRawBufferPointer(rebasing: sample[..<n])
        }
      }
      var rewritten: StoreEntry?
      do throws(TroveError) {
        switch decision {
        case .raw:
          rewritten = try convert(entry.digest, compressed: false)
          if rewritten != nil { report.decompressed += 1 }
        case .zstd(let level, let workers, _):
          rewritten =
            object.isCompressed
            ? nil : try convert(entry.digest, compressed: true, level: level, workers: workers)
          if rewritten != nil { report.compressed += 1 }
        }
      } catch  where error.code == .notFound {
        continue  // evicted or removed meanwhile
      }
      if rewritten == nil { report.unchanged += 1 }
      report.storedBytesAfter += rewritten?.storedBytes ?? object.status.size
    }
    report.seconds = (clock.now - start).seconds
    return report
  }
}
