import Foundation

/// Cuts and hashes the chunks of a put's bytes (``ChunkHasher``) on a
/// thread of its own, beside the thread that hashes and writes them: the
/// put hands each buffer over with one copy and goes on, so the gear hash,
/// the costliest step, overlaps the put's reads, writes and syncs instead
/// of adding to them.
///
/// The buffers bound the memory (``bufferCount`` × ``bufferSize``); a put
/// faster than the cutting waits for a free one. ``finish()`` or
/// ``cancel()`` must be called once: either ends the thread.
final class ChunkingPass: @unchecked Sendable {
  static let bufferSize = 1 << 20
  static let bufferCount = 4

  private let condition = NSCondition()
  private var free: [UnsafeMutableRawBufferPointer] = []
  private var full: [(UnsafeMutableRawBufferPointer, Int)] = []
  private var ending = false
  private var cancelled = false
  private var chunks: [Chunk]?
  /// The buffer being filled on the put's thread, and how far.
  private var current: UnsafeMutableRawBufferPointer?
  private var filled = 0

  init() {
    for _ in 0..<Self.bufferCount {
      free.append(.allocate(byteCount: Self.bufferSize, alignment: 64))
    }
    let thread = Thread { [self] in run() }
    thread.name = "trove-chunker"
    thread.start()
  }

  deinit {
    for buffer in free { buffer.deallocate() }
    for (buffer, _) in full { buffer.deallocate() }
    current?.deallocate()
  }

  // MARK: The put's thread

  /// Hands the next bytes of the object over.
  func feed(_ bytes: UnsafeRawBufferPointer) {
    var rest = bytes
    while !rest.isEmpty {
      let buffer: UnsafeMutableRawBufferPointer
      if let current {
        buffer = current
      } else {
        condition.lock()
        while free.isEmpty { condition.wait() }
        buffer = free.removeLast()
        condition.unlock()
        current = buffer
      }
      let n = min(rest.count, buffer.count - filled)
      UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<filled + n])
        .copyMemory(from: UnsafeRawBufferPointer(rebasing: rest[..<n]))
      filled += n
      rest = UnsafeRawBufferPointer(rebasing: rest[n...])
      if filled == buffer.count { handOn() }
    }
  }

  /// Waits for the last bytes to be cut; every chunk of what was fed, in
  /// order. Ends the thread.
  func finish() -> [Chunk] {
    handOn()
    condition.lock()
    defer { condition.unlock() }
    ending = true
    condition.broadcast()
    while chunks == nil { condition.wait() }
    return chunks ?? []
  }

  /// Drops what was fed without waiting for it. Ends the thread.
  func cancel() {
    condition.lock()
    cancelled = true
    ending = true
    condition.broadcast()
    condition.unlock()
  }

  private func handOn() {
    guard let buffer = current else { return }
    condition.lock()
    full.append((buffer, filled))
    current = nil
    filled = 0
    condition.broadcast()
    condition.unlock()
  }

  // MARK: The chunker's thread

  private func run() {
    var hasher = ChunkHasher()
    var dropped = false
    while true {
      condition.lock()
      while full.isEmpty && !ending { condition.wait() }
      if cancelled || full.isEmpty {
        dropped = cancelled
        condition.unlock()
        break
      }
      let (buffer, count) = full.removeFirst()
      condition.unlock()
      hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
      condition.lock()
      free.append(buffer)
      condition.broadcast()
      condition.unlock()
    }
    // Nobody waits for a cancelled pass's chunks.
    let all = dropped ? [] : hasher.finish()
    condition.lock()
    chunks = all
    condition.broadcast()
    condition.unlock()
  }
}
