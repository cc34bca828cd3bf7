import CZstd

/// One zstd frame in a file, decompressed in pieces the caller asks for
/// (a pull, where ``Zstd/decompress(from:into:)`` pushes): what a server
/// needs when the network, not the file, sets the pace. Bounded memory:
/// one input buffer of zstd's recommended size.
final class ZstdReader {
  private let source: FileDescriptor
  private let context: OpaquePointer
  private let input: UnsafeMutableRawBufferPointer
  /// The bytes of `input` read from the file, and how many zstd consumed.
  private var filled = 0
  private var consumed = 0
  /// The file offset of the next read.
  private var fileOffset: Int64 = 0
  private var sourceEnded = false
  private var frameEnded = false

  /// A reader of the frame in `source` from its start; `source` stays the
  /// caller's to close.
  init(_ source: FileDescriptor) throws(Zstd.StreamError) {
    guard let context = ZSTD_createDCtx() else {
      throw .codec(Zstd.Failure(function: "ZSTD_createDCtx", name: "out of memory"))
    }
    self.source = source
    self.context = context
    input = .allocate(byteCount: ZSTD_DStreamInSize(), alignment: 4096)
  }

  deinit {
    ZSTD_freeDCtx(context)
    input.deallocate()
  }

  /// Fills `buffer` with the next decompressed bytes; 0 only at the end of
  /// the frame. Fails on a damaged or truncated frame, a checksum mismatch
  /// or bytes after the frame.
  func read(into buffer: UnsafeMutableRawBufferPointer) throws(Zstd.StreamError) -> Int {
    guard !buffer.isEmpty else { return 0 }
    while true {
      if frameEnded {
        try refill()
        guard filled == consumed, sourceEnded else { throw Self.failure("bytes after the frame") }
        return 0
      }
      if consumed == filled, !sourceEnded { try refill() }
      var inBuffer = ZSTD_inBuffer(src: input.baseAddress, size: filled, pos: consumed)
      var outBuffer = ZSTD_outBuffer(dst: buffer.baseAddress, size: buffer.count, pos: 0)
      let hint = ZSTD_decompressStream(context, &outBuffer, &inBuffer)
      if ZSTD_isError(hint) != 0 {
        throw Self.failure(String(cString: ZSTD_getErrorName(hint)))
      }
      consumed = inBuffer.pos
      if hint == 0 { frameEnded = true }
      if outBuffer.pos > 0 { return outBuffer.pos }
      if !frameEnded, consumed == filled, sourceEnded { throw Self.failure("truncated frame") }
    }
  }

  /// Drops the next `count` decompressed bytes (a range that starts past
  /// the beginning); fails as ``read(into:)`` does, or when the frame ends first.
  func skip(_ count: Int64) throws(Zstd.StreamError) {
    var left = count
    let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 17, alignment: 16)
    defer { scratch.deallocate() }
    while left > 0 {
      let n = try read(into: .init(rebasing: scratch[..<Int(min(left, Int64(scratch.count)))]))
      guard n > 0 else { throw Self.failure("frame shorter than its declared size") }
      left -= Int64(n)
    }
  }

  /// Reads the next input from the file, after what zstd has not consumed.
  private func refill() throws(Zstd.StreamError) {
    if consumed == filled {
      consumed = 0
      filled = 0
    }
    guard filled < input.count else { return }
    let n: Int
    do throws(SystemCallError) {
      n = try source.read(into: .init(rebasing: input[filled...]), at: fileOffset)
    } catch {
      throw .reading(error)
    }
    if n == 0 { sourceEnded = true }
    filled += n
    fileOffset += Int64(n)
  }

  private static func failure(_ name: String) -> Zstd.StreamError {
    .codec(Zstd.Failure(function: "ZSTD_decompressStream", name: name))
  }
}
