/// Whether to store an object compressed: the policy's decision, separate
/// from the zstd mechanism in System/Zstd.swift.
enum StorageDecision: Equatable {
  /// Store the bytes as they are; `skip` says why when compression was on.
  case raw(skip: CompressionSkip?)
  /// Store a zstd frame at `level` with `workers` threads.
  case zstd(level: Int32, workers: Int32)
}

extension CachePolicy {
  /// How many leading bytes are compressed to judge an object.
  static let sampleSize = 256 * 1024
  /// A sample must shrink to this fraction of its size or less for the
  /// object to be compressed: already-compressed downloads (weights,
  /// archives, media) stay raw and clonable, and cost no CPU on get.
  static let requiredSampleRatio = 0.9

  /// The decision for an object of `size` bytes whose first bytes are
  /// `sample` (read only when compression is on and the size qualifies).
  func storage(size: Int64, sample: () -> UnsafeRawBufferPointer?) -> StorageDecision {
    guard case .zstd(let level) = compression else { return .raw(skip: nil) }
    guard size >= compressionMinimumSize else { return .raw(skip: .small) }
    guard let bytes = sample(), Zstd.sampleRatio(bytes) <= Self.requiredSampleRatio else {
      return .raw(skip: .incompressible)
    }
    return .zstd(level: level, workers: compressionWorkers)
  }
}
