import CZstd

/// zstd streams over file descriptors, with bounded memory: one input and
/// one output buffer of zstd's recommended sizes, whatever the object size.
///
/// Frames carry the content size and a checksum, so `zstd -d` on an object
/// file gives back the original bytes and detects damage on its own.
enum Zstd {
  /// A zstd failure: the function and zstd's name for the error.
  struct Failure: Error, CustomStringConvertible {
    let function: String
    let name: String
    var description: String { "zstd: \(name) (\(function))" }
  }

  /// Which side failed during a stream.
  enum StreamError: Error {
    case reading(SystemCallError)
    case writing(SystemCallError)
    case codec(Failure)
  }

  private static func check(_ code: Int, _ function: String) throws(StreamError) -> Int {
    if ZSTD_isError(code) != 0 {
      throw .codec(Failure(function: function, name: String(cString: ZSTD_getErrorName(code))))
    }
    return code
  }

  /// zstd's largest block: the most a frame can exceed a ratio estimate by
  /// at its start.
  static var blockSize: Int { ZSTD_CStreamOutSize() }

  /// The levels zstd accepts: its negative fast levels up to the maximum.
  static var levels: ClosedRange<Int32> { Int32(ZSTD_minCLevel())...Int32(ZSTD_maxCLevel()) }

  /// How well the first bytes compress: compressed size ÷ size, at level 1.
  /// A cheap test (a few hundred µs for 256 KiB) of whether a whole object
  /// is worth compressing.
  static func sampleRatio(_ sample: UnsafeRawBufferPointer) -> Double {
    guard sample.count > 0 else { return 1 }
    let bound = ZSTD_compressBound(sample.count)
    let out = UnsafeMutableRawPointer.allocate(byteCount: bound, alignment: 16)
    defer { out.deallocate() }
    let n = ZSTD_compress(out, bound, sample.baseAddress, sample.count, 1)
    guard ZSTD_isError(n) == 0 else { return 1 }
    return Double(n) / Double(sample.count)
  }

  /// The content size recorded in a frame header, or nil if the bytes do
  /// not start a zstd frame with a known size.
  static func contentSize(ofFrameStart header: UnsafeRawBufferPointer) -> Int64? {
    let size = ZSTD_getFrameContentSize(header.baseAddress, header.count)
    if size == trove_zstd_contentsize_unknown() || size == trove_zstd_contentsize_error() {
      return nil
    }
    return Int64(size)
  }

  /// Compresses all of `source` (from its current offset, `size` bytes
  /// pledged) at `level`, with `workers` threads (0: in this thread),
  /// showing every input chunk to `tap` (to hash it in the same pass) and
  /// handing the frame's bytes to `sink` with how much input is still to
  /// come. Returns the compressed size.
  static func compress(
    from source: FileDescriptor, size: Int64, level: Int32, workers: Int32,
    tap: (UnsafeRawBufferPointer) -> Void = { _ in },
    into sink: (UnsafeRawBufferPointer, _ inputLeft: Int64) throws(SystemCallError) -> Void
  ) throws(StreamError) -> Int64 {
    let compressor = try Compressor(level: level, workers: workers, pledgedSize: size)
    let inSize = ZSTD_CStreamInSize()
    let input = UnsafeMutableRawBufferPointer.allocate(byteCount: inSize, alignment: 4096)
    defer { input.deallocate() }
    var written: Int64 = 0
    var consumed: Int64 = 0
    while true {
      let n: Int
      do throws(SystemCallError) {
        n = try source.readFully(into: input)
      } catch {
        throw .reading(error)
      }
      let last = n < inSize
      let chunk = UnsafeRawBufferPointer(rebasing: input[..<n])
      tap(chunk)
      let left = max(0, size - consumed)
      consumed += Int64(n)
      // More than was pledged (a file growing as it is read): stop here,
      // whatever zstd would do with its workers.
      if consumed > size {
        throw .codec(Failure(function: "read", name: "more input than the \(size) bytes pledged"))
      }
      written += try compressor.compress(chunk, end: last) { (bytes) throws(SystemCallError) in
        try sink(bytes, left)
      }
      if last { return written }
    }
  }

  /// One zstd frame compressed from input handed in piece by piece — a
  /// stream whose length may be unknown. The frame carries a checksum, and
  /// its content size when `pledgedSize` is given (which the input must
  /// then match exactly). Memory: the context and one output buffer.
  final class Compressor {
    private let context: OpaquePointer
    private let output: UnsafeMutableRawBufferPointer

    init(level: Int32, workers: Int32, pledgedSize: Int64?) throws(StreamError) {
      guard let context = ZSTD_createCCtx() else {
        throw .codec(Failure(function: "ZSTD_createCCtx", name: "out of memory"))
      }
      do throws(StreamError) {
        _ = try Zstd.check(ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, level), "level")
        _ = try Zstd.check(ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1), "checksum")
        _ = try Zstd.check(
          ZSTD_CCtx_setParameter(context, ZSTD_c_contentSizeFlag, 1), "content size")
        if workers > 0 {
          _ = try Zstd.check(ZSTD_CCtx_setParameter(context, ZSTD_c_nbWorkers, workers), "workers")
        }
        if let pledgedSize {
          _ = try Zstd.check(
            ZSTD_CCtx_setPledgedSrcSize(context, UInt64(pledgedSize)), "pledged size")
        }
      } catch {
        ZSTD_freeCCtx(context)
        throw error
      }
      self.context = context
      output = UnsafeMutableRawBufferPointer.allocate(
        byteCount: ZSTD_CStreamOutSize(), alignment: 4096)
    }

    deinit {
      ZSTD_freeCCtx(context)
      output.deallocate()
    }

    /// Compresses `input`, handing whatever the frame gains to `sink`;
    /// `end` finishes the frame (its last block and checksum). Returns how
    /// many bytes went to `sink`.
    func compress(
      _ input: UnsafeRawBufferPointer, end: Bool,
      into sink: (UnsafeRawBufferPointer) throws(SystemCallError) -> Void
    ) throws(StreamError) -> Int64 {
      var inBuffer = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
      var produced: Int64 = 0
      while true {
        var outBuffer = ZSTD_outBuffer(dst: output.baseAddress, size: output.count, pos: 0)
        let remaining = try Zstd.check(
          ZSTD_compressStream2(context, &outBuffer, &inBuffer, end ? ZSTD_e_end : ZSTD_e_continue),
          "ZSTD_compressStream2")
        if outBuffer.pos > 0 {
          do throws(SystemCallError) {
            try sink(UnsafeRawBufferPointer(rebasing: output[..<outBuffer.pos]))
          } catch {
            throw .writing(error)
          }
          produced += Int64(outBuffer.pos)
        }
        if end ? remaining == 0 : inBuffer.pos == inBuffer.size { return produced }
      }
    }
  }

  /// Decompresses the frame in `source`, handing each decompressed chunk to
  /// `sink`. Fails on a damaged frame, a checksum mismatch, or trailing
  /// bytes after the frame.
  static func decompress(
    from source: FileDescriptor, into sink: (UnsafeRawBufferPointer) throws(StreamError) -> Void
  ) throws(StreamError) {
    guard let context = ZSTD_createDCtx() else {
      throw .codec(Failure(function: "ZSTD_createDCtx", name: "out of memory"))
    }
    defer { ZSTD_freeDCtx(context) }
    let inSize = ZSTD_DStreamInSize()
    let outSize = ZSTD_DStreamOutSize()
    let input = UnsafeMutableRawBufferPointer.allocate(byteCount: inSize, alignment: 4096)
    let output = UnsafeMutableRawBufferPointer.allocate(byteCount: outSize, alignment: 4096)
    defer {
      input.deallocate()
      output.deallocate()
    }
    var frameEnded = false
    while true {
      let n: Int
      do throws(SystemCallError) {
        n = try source.read(into: input)
      } catch {
        throw .reading(error)
      }
      if n == 0 { break }
      if frameEnded {
        throw .codec(Failure(function: "ZSTD_decompressStream", name: "bytes after the frame"))
      }
      var inBuffer = ZSTD_inBuffer(src: input.baseAddress, size: n, pos: 0)
      while inBuffer.pos < inBuffer.size {
        var outBuffer = ZSTD_outBuffer(dst: output.baseAddress, size: outSize, pos: 0)
        let hint = try check(
          ZSTD_decompressStream(context, &outBuffer, &inBuffer), "ZSTD_decompressStream")
        if outBuffer.pos > 0 {
          try sink(UnsafeRawBufferPointer(rebasing: output[..<outBuffer.pos]))
        }
        if hint == 0 {
          frameEnded = true
          if inBuffer.pos < inBuffer.size {
            throw .codec(Failure(function: "ZSTD_decompressStream", name: "bytes after the frame"))
          }
        }
      }
    }
    // Flush what the decoder still holds.
    while !frameEnded {
      var inBuffer = ZSTD_inBuffer(src: input.baseAddress, size: 0, pos: 0)
      var outBuffer = ZSTD_outBuffer(dst: output.baseAddress, size: outSize, pos: 0)
      let hint = try check(
        ZSTD_decompressStream(context, &outBuffer, &inBuffer), "ZSTD_decompressStream")
      if outBuffer.pos > 0 { try sink(UnsafeRawBufferPointer(rebasing: output[..<outBuffer.pos])) }
      if hint == 0 {
        frameEnded = true
      } else if outBuffer.pos == 0 {
        throw .codec(Failure(function: "ZSTD_decompressStream", name: "truncated frame"))
      }
    }
  }
}
