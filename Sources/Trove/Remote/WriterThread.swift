import Foundation

/// Where a remote's download puts the bytes it receives: a store's
/// ``BlobWriter`` (which hashes and writes them), directly or through a
/// ``WriterThread``.
protocol RemoteSink: AnyObject {
  /// Takes the next bytes of the blob.
  func write(_ bytes: UnsafeRawBufferPointer) throws(TroveError)
}

extension BlobWriter: RemoteSink {}

/// A ``BlobWriter`` fed from another thread: a large download's transfer
/// thread (libcurl's write callback, the socket reads) only copies the
/// bytes into one of a few buffers and goes back to the network, while
/// this thread hashes and writes them, and starts the kernel writing the
/// temp file back as it grows (so the fsync of the commit has little left
/// to wait for). The writer gets the bytes in the order they came, whole:
/// the bytes hashed are the bytes stored, and the caller commits only
/// after ``finish()``, expecting the digest.
///
/// The buffers bound the memory (``bufferCount`` × ``bufferSize``); a
/// transfer faster than the disk waits for a free one. The writer's first
/// failure is thrown to the transfer at its next write, and by
/// ``finish()``. ``finish()`` must be called once, whatever happens: it
/// ends the thread.
final class WriterThread: RemoteSink, @unchecked Sendable {
  static let bufferSize = 2 << 20
  static let bufferCount = 4
  /// Bytes written between two starts of the write-back.
  static let writebackStep: Int64 = 16 << 20

  private let writer: BlobWriter
  /// A second hash of the bytes (a signed remote's SHA-256), fed each
  /// buffer by a thread of its own while the writer takes the same buffer.
  private let companion: SHA2Hasher?
  /// Buffers for the companion, and how many of the two threads still
  /// read each handed-on buffer (it is free again at none).
  private var hashing: [(UnsafeMutableRawBufferPointer, Int)] = []
  private var readers: [UnsafeMutableRawPointer: Int] = [:]
  private var hashFinished = true
  private let condition = NSCondition()
  private var free: [UnsafeMutableRawBufferPointer] = []
  private var full: [(UnsafeMutableRawBufferPointer, Int)] = []
  private var failure: TroveError?
  private var ending = false
  private var finished = false
  /// The buffer being filled on the transfer's thread, and how far.
  private var current: UnsafeMutableRawBufferPointer?
  private var filled = 0

  init(_ writer: BlobWriter, companion: SHA2Hasher? = nil) {
    self.writer = writer
    self.companion = companion
    for _ in 0..<Self.bufferCount {
      free.append(.allocate(byteCount: Self.bufferSize, alignment: 4096))
    }
    let thread = Thread { [self] in run() }
    thread.name = "trove-remote-writer"
    thread.start()
    if companion != nil {
      hashFinished = false
      let hasher = Thread { [self] in runCompanion() }
      hasher.name = "trove-remote-hasher"
      hasher.start()
    }
  }

  deinit {
    for buffer in free { buffer.deallocate() }
    current?.deallocate()
  }

  // MARK: The transfer's thread

  func write(_ bytes: UnsafeRawBufferPointer) throws(TroveError) {
    var rest = bytes
    while !rest.isEmpty {
      let buffer: UnsafeMutableRawBufferPointer
      if let current {
        buffer = current
      } else {
        buffer = try takeFree()
        current = buffer
      }
      let n = min(rest.count, buffer.count - filled)
      UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<filled + n])
        .copyMemory(from: UnsafeRawBufferPointer(rebasing: rest[..<n]))
      filled += n
      rest = UnsafeRawBufferPointer(rebasing: rest[n...])
      if filled == buffer.count { try handOn() }
    }
  }

  /// Hands what is written on to the writer and waits until it took all
  /// of it; throws the writer's failure. Ends the thread.
  func finish() throws(TroveError) {
    var handing: TroveError?
    if filled > 0 {
      do throws(TroveError) { try handOn() } catch { handing = error }
    }
    condition.lock()
    if let buffer = current {
      free.append(buffer)
      current = nil
    }
    ending = true
    condition.broadcast()
    while !finished || !hashFinished { condition.wait() }
    let failure = self.failure ?? handing
    condition.unlock()
    if let failure { throw failure }
  }

  private func takeFree() throws(TroveError) -> UnsafeMutableRawBufferPointer {
    condition.lock()
    defer { condition.unlock() }
    while free.isEmpty && failure == nil { condition.wait() }
    if let failure { throw failure }
    return free.removeLast()
  }

  private func handOn() throws(TroveError) {
    guard let buffer = current else { return }
    condition.lock()
    defer { condition.unlock() }
    current = nil
    full.append((buffer, filled))
    if companion != nil, let base = buffer.baseAddress {
      hashing.append((buffer, filled))
      readers[base] = 2
    }
    filled = 0
    condition.broadcast()
    if let failure { throw failure }
  }

  // MARK: The writer's thread

  private func run() {
    var written: Int64 = 0
    var writtenBack: Int64 = 0
    while true {
      condition.lock()
      while full.isEmpty && !ending { condition.wait() }
      if full.isEmpty {
        finished = true
        condition.broadcast()
        condition.unlock()
        return
      }
      let (buffer, count) = full.removeFirst()
      let failed = failure != nil
      condition.unlock()
      var error: TroveError?
      if !failed {
        do throws(TroveError) {
          try writer.write(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
          written += Int64(count)
          if written - writtenBack >= Self.writebackStep {
            // The whole file: with compression on, its length is not the
            // bytes'. Pages under write-back already are passed over.
            writer.file.startWriteback(at: 0, length: 0)
            writtenBack = written
          }
        } catch let failure {
          error = failure
        }
      }
      condition.lock()
      if let error, failure == nil { failure = error }
      release(buffer)
      condition.broadcast()
      condition.unlock()
    }
  }

  /// One reader is done with `buffer`: it is free once both are. Called
  /// with the condition locked.
  private func release(_ buffer: UnsafeMutableRawBufferPointer) {
    if let base = buffer.baseAddress, let left = readers[base], left > 1 {
      readers[base] = left - 1
    } else {
      if let base = buffer.baseAddress { readers[base] = nil }
      free.append(buffer)
    }
  }

  // MARK: The companion's thread

  private func runCompanion() {
    guard let companion else { return }
    while true {
      condition.lock()
      while hashing.isEmpty && !ending { condition.wait() }
      if hashing.isEmpty {
        hashFinished = true
        condition.broadcast()
        condition.unlock()
        return
      }
      let (buffer, count) = hashing.removeFirst()
      condition.unlock()
      companion.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
      condition.lock()
      release(buffer)
      condition.broadcast()
      condition.unlock()
    }
  }
}
