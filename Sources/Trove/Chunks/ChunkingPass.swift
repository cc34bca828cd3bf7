import Foundation

/// Cuts and hashes the chunks of a put's bytes (``ChunkHasher``) on a
/// thread of its own, beside the thread that hashes and writes them: the
/// put only says how far the temp file is written, and this thread reads
/// the new bytes back from the page cache, so the gear hash — the costliest
/// step — and its copy overlap the put's reads, writes and syncs instead of
/// adding to them.
///
/// The file must be written in order from its start, raw. ``finish()`` or
/// ``cancel()`` must be called once, before the file is closed: either
/// ends the thread and waits for it.
final class ChunkingPass: @unchecked Sendable {
  static let bufferSize = 1 << 20

  private let file: FileDescriptor
  private let condition = NSCondition()
  /// Bytes of the file written so far.
  private var written: Int64 = 0
  private var ending = false
  private var cancelled = false
  /// Set by the thread when it stops: the chunks, or nil when cancelled
  /// or a read failed (no manifest then).
  private var outcome: [Chunk]??

  init(reading file: FileDescriptor) {
    self.file = file
    let thread = Thread { [self] in run() }
    thread.name = "trove-chunker"
    thread.start()
  }

  // MARK: The put's thread

  /// The file now holds `count` bytes.
  func advance(to count: Int64) {
    condition.lock()
    written = count
    condition.signal()
    condition.unlock()
  }

  /// Waits for the last bytes to be cut; every chunk of the file, in
  /// order, or nil when one could not be read back. Ends the thread.
  func finish() -> [Chunk]? {
    condition.lock()
    defer { condition.unlock() }
    ending = true
    condition.broadcast()
    while outcome == nil { condition.wait() }
    return outcome ?? nil
  }

  /// Stops cutting and waits for the thread to end (after at most one
  /// more buffer).
  func cancel() {
    condition.lock()
    defer { condition.unlock() }
    cancelled = true
    ending = true
    condition.broadcast()
    while outcome == nil { condition.wait() }
  }

  // MARK: The chunker's thread

  private func run() {
    var hasher = ChunkHasher()
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferSize, alignment: 4096)
    defer { buffer.deallocate() }
    var read: Int64 = 0
    var failed = false
    while true {
      condition.lock()
      while written == read && !ending { condition.wait() }
      let stop = cancelled || written == read
      let available = written
      condition.unlock()
      if stop { break }
      let want = Int(min(Int64(buffer.count), available - read))
      guard
        let n = try? file.read(
          into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<want]), at: read),
        n > 0
      else {
        failed = true
        break
      }
      hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<n]))
      read += Int64(n)
    }
    condition.lock()
    let keep = !cancelled && !failed
    condition.unlock()
    let chunks: [Chunk]? = keep ? hasher.finish() : nil
    condition.lock()
    outcome = .some(chunks)
    condition.broadcast()
    condition.unlock()
  }
}
