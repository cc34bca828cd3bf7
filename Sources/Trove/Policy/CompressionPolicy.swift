/// Whether to store an object compressed: the policy's decision, separate
/// from the zstd mechanism in System/Zstd.swift.
enum StorageDecision: Equatable {
  /// Store the bytes as they are; `skip` says why when compression was on.
  case raw(skip: CompressionSkip?)
  /// Store a zstd frame at `level` with `workers` threads; `sampleRatio`
  /// is how far the sample shrank (compressed ÷ raw), to estimate the
  /// room the frame will take.
  case zstd(level: Int32, workers: Int32, sampleRatio: Double = 1)
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
    guard let bytes = sample() else { return .raw(skip: .incompressible) }
    let ratio = Zstd.sampleRatio(bytes)
    guard ratio <= Self.requiredSampleRatio else { return .raw(skip: .incompressible) }
    return .zstd(level: level, workers: compressionWorkers, sampleRatio: ratio)
  }

  /// The room a frame of `size` bytes judged by `sampleRatio` is expected
  /// to take: the sample's ratio with a quarter more for the rest being
  /// less regular, never more than the raw size. Only an estimate — a
  /// full disk later in the write still gets its room made
  /// (``PressuredWrites``).
  static func expectedStoredSize(_ size: Int64, sampleRatio: Double) -> Int64 {
    min(size, Int64((Double(size) * sampleRatio * 1.25).rounded(.up)) + Int64(Zstd.blockSize))
  }
}
