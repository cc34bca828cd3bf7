import Foundation

/// A pull in ranges, several fetched at once: the first range's answer
/// gives the blob's length; the rest are fetched by
/// ``S3Backend/parallelTransfers`` threads, each on its own connection,
/// each range asked only of the object the first answer came from
/// (`If-Match` its ETag), into one of a few buffers. This thread hands the
/// ranges to the writer in order, so the bytes are hashed in one pass as
/// they would be from one GET, and the pull commits them only when they
/// are the digest's. Memory: one range more than there are fetchers,
/// allocated once.
extension S3Backend {
  /// The size of a pull's ranges, whatever the uploads' part size: the
  /// ranges in memory are most of a pull's, and on a link where latency
  /// matters the fetchers side by side hide it.
  static let rangeSize = 4 << 20

  func downloadInRanges(_ digest: BlobDigest, into writer: any RemoteSink)
    throws(TroveError) -> Int64?
  {
    let name = RemoteNames.blobPath(digest)
    let first = Int64(Self.rangeSize)
    var received: Int64 = 0
    // The server may ignore the range (200, the whole blob): any length is
    // written, and a blob whose bytes are not its name is never committed.
    let outcome = try request(
      "GET", name, accepting: [200, 206, 404, 416], headers: ["Range: bytes=0-\(first - 1)"]
    ) { (bytes) throws(TroveError) in
      try writer.write(bytes)
      received += Int64(bytes.count)
    }
    switch outcome.status {
    case 404:
      return nil
    case 416:
      // No byte at 0: an empty blob.
      return try downloadWhole(name, into: writer)
    case 200:
      try checkLength(outcome, received, name)
      return received
    default:
      break
    }
    guard let (start, end, total) = RangeRequest.contentRange(outcome.contentRange), start == 0,
      end + 1 == received, total >= received
    else {
      throw TroveError(
        .unavailable,
        "remote '\(spec.name)': GET \(shown(name)) answered bytes 0-\(received - 1) with Content-Range '\(ServerText.excerpt(outcome.contentRange ?? ""))'",
        value: shown(name))
    }
    if total > received {
      try fetchRanges(name, from: received, to: total, etag: outcome.etag, into: writer)
    }
    return total
  }

  /// One GET of the whole of `name`.
  private func downloadWhole(_ name: String, into writer: any RemoteSink) throws(TroveError)
    -> Int64?
  {
    var received: Int64 = 0
    let outcome = try request("GET", name, accepting: [200, 404]) {
      (bytes) throws(TroveError) in
      try writer.write(bytes)
      received += Int64(bytes.count)
    }
    guard outcome.status != 404 else { return nil }
    try checkLength(outcome, received, name)
    return received
  }

  private func checkLength(
    _ outcome: RemoteHTTPTransfer.Outcome, _ received: Int64, _ name: String
  ) throws(TroveError) {
    if let length = outcome.contentLength, length != received {
      throw TroveError(
        .transferFailed,
        "remote '\(spec.name)': GET \(shown(name)) ended after \(received) of \(length) bytes",
        value: shown(name))
    }
  }

  /// Fetches bytes `start..<total` of `name` in ranges of ``rangeSize``,
  /// several at once, and writes them to `writer` in order.
  private func fetchRanges(
    _ name: String, from start: Int64, to total: Int64, etag: String?,
    into writer: any RemoteSink
  ) throws(TroveError) {
    let size = Int64(Self.rangeSize)
    let count = Int((total - start + size - 1) / size)
    var connections = [transfer]
    for _ in 0..<(min(Self.parallelTransfers, count) - 1) {
      connections.append(try makeTransfer())
    }
    let ranges = RangeQueue(count: count, window: connections.count, bufferSize: Self.rangeSize)
    // An ETag is sent back only when it is plainly one.
    let match = etag.flatMap {
      (1...128).contains($0.count)
        && $0.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
        ? "If-Match: \($0)" : nil
    }
    let group = DispatchGroup()
    for connection in connections {
      let fetcher = RangeFetcher(
        backend: self, connection: connection, ranges: ranges, name: name, start: start,
        total: total, ifMatch: match)
      group.enter()
      Thread {
        fetcher.run()
        group.leave()
      }.start()
    }
    for index in 0..<count {
      guard let (buffer, length) = ranges.next(index) else { break }
      do throws(TroveError) {
        try writer.write(UnsafeRawBufferPointer(rebasing: buffer[..<length]))
        ranges.recycle(buffer)
      } catch {
        ranges.recycle(buffer)
        ranges.fail(error)
        break
      }
    }
    group.wait()
    if let error = ranges.failure { throw error }
  }

  /// Fetches `count` bytes of `name` from `offset` into `buffer`, on
  /// `connection`.
  fileprivate func fetchRange(
    _ name: String, offset: Int64, count: Int, into buffer: UnsafeMutableRawBufferPointer,
    ifMatch: String?, on connection: RemoteHTTPTransfer
  ) throws(TroveError) {
    var filled = 0
    let shown = shown(name)
    let remote = spec.name
    var headers = ["Range: bytes=\(offset)-\(offset + Int64(count) - 1)"]
    if let ifMatch { headers.append(ifMatch) }
    let outcome = try request("GET", name, accepting: [206], headers: headers, on: connection) {
      (piece) throws(TroveError) in
      guard filled + piece.count <= count else {
        throw TroveError(
          .unavailable,
          "remote '\(remote)': GET \(shown) sent more than the \(count) bytes asked from \(offset)",
          value: shown)
      }
      UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<filled + piece.count])
        .copyMemory(from: piece)
      filled += piece.count
    }
    guard filled == count,
      let (start, _, _) = RangeRequest.contentRange(outcome.contentRange), start == offset
    else {
      throw TroveError(
        .transferFailed,
        "remote '\(remote)': GET \(shown) gave \(filled) of the \(count) bytes asked from \(offset)",
        value: shown)
    }
  }
}

/// The ranges between the fetching threads and this one: which to fetch
/// next, those fetched and not yet written, the first failure, and the
/// buffers, allocated once (one more than the window: the one being
/// written), so that memory stays flat however long the blob. A fetcher
/// waits while it is ``window`` ranges ahead of the writing.
private final class RangeQueue: @unchecked Sendable {
  private let condition = NSCondition()
  private let count: Int
  private let window: Int
  private var claimed = 0
  private var written = 0
  private var fetched: [Int: (UnsafeMutableRawBufferPointer, Int)] = [:]
  private let buffers: [UnsafeMutableRawBufferPointer]
  private var free: [UnsafeMutableRawBufferPointer]
  private(set) var failure: TroveError?

  init(count: Int, window: Int, bufferSize: Int) {
    self.count = count
    self.window = window
    buffers = (0...window).map { _ in
      UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 4096)
    }
    free = buffers
  }

  deinit {
    for buffer in buffers { buffer.deallocate() }
  }

  /// The next range to fetch and a buffer for it, waiting while too far
  /// ahead; nil when there are no more, or after a failure.
  func claim() -> (Int, UnsafeMutableRawBufferPointer)? {
    condition.lock()
    defer { condition.unlock() }
    while claimed < count && (claimed >= written + window || free.isEmpty) && failure == nil {
      condition.wait()
    }
    guard failure == nil, claimed < count else { return nil }
    claimed += 1
    return (claimed - 1, free.removeLast())
  }

  /// Range `index` is in `buffer` (its first `length` bytes), or failed.
  func deliver(
    _ index: Int, _ buffer: UnsafeMutableRawBufferPointer, length: Int?, _ error: TroveError?
  ) {
    condition.lock()
    if let length, error == nil {
      fetched[index] = (buffer, length)
    } else {
      free.append(buffer)
      if failure == nil { failure = error }
    }
    condition.broadcast()
    condition.unlock()
  }

  func fail(_ error: TroveError) {
    condition.lock()
    if failure == nil { failure = error }
    condition.broadcast()
    condition.unlock()
  }

  /// Range `index`'s buffer and length, waiting for it; nil after a
  /// failure. The buffer goes back by ``recycle(_:)``.
  func next(_ index: Int) -> (UnsafeMutableRawBufferPointer, Int)? {
    condition.lock()
    defer { condition.unlock() }
    while fetched[index] == nil && failure == nil { condition.wait() }
    guard failure == nil, let range = fetched.removeValue(forKey: index) else { return nil }
    written = index + 1
    condition.broadcast()
    return range
  }

  func recycle(_ buffer: UnsafeMutableRawBufferPointer) {
    condition.lock()
    free.append(buffer)
    condition.broadcast()
    condition.unlock()
  }
}

/// One fetching thread's loop, on a connection of its own.
private final class RangeFetcher: @unchecked Sendable {
  let backend: S3Backend
  let connection: RemoteHTTPTransfer
  let ranges: RangeQueue
  let name: String
  let start: Int64
  let total: Int64
  let ifMatch: String?

  init(
    backend: S3Backend, connection: RemoteHTTPTransfer, ranges: RangeQueue, name: String,
    start: Int64, total: Int64, ifMatch: String?
  ) {
    self.backend = backend
    self.connection = connection
    self.ranges = ranges
    self.name = name
    self.start = start
    self.total = total
    self.ifMatch = ifMatch
  }

  func run() {
    let size = Int64(S3Backend.rangeSize)
    while let (index, buffer) = ranges.claim() {
      let offset = start + Int64(index) * size
      let count = Int(min(size, total - offset))
      do throws(TroveError) {
        try backend.fetchRange(
          name, offset: offset, count: count, into: buffer, ifMatch: ifMatch, on: connection)
        ranges.deliver(index, buffer, length: count, nil)
      } catch {
        ranges.deliver(index, buffer, length: nil, error)
      }
    }
  }
}
