import Foundation

/// A multipart upload, its parts sent several at once: this thread reads
/// the blob once, in order, into one of a few part buffers and hashes it
/// as it goes; ``S3Backend/parallelParts`` threads, each on its own
/// connection, send the parts, each checked on the way as
/// ``S3Backend/payloadHeaders(_:blob:)`` says. The upload is completed only
/// when every part was taken and the whole hashed to its digest; on any
/// failure it is aborted on the server (a process killed meanwhile leaves
/// it for `remote check --clean`).
/// Memory: one part buffer per sender, allocated once (a part is read into
/// the buffer its sender just freed).
extension S3Backend {
  /// The most parts S3 takes in one upload.
  static let maximumParts: Int64 = 10_000

  /// The part size for a blob of `size` bytes: ``partSize``, or larger (a
  /// whole number of MiB) when that would make more than
  /// ``maximumParts`` parts.
  func partSize(for size: Int64) -> Int64 {
    let least = (size + Self.maximumParts - 1) / Self.maximumParts
    let mebibyte: Int64 = 1 << 20
    return max(Int64(partSize), (least + mebibyte - 1) / mebibyte * mebibyte)
  }

  func uploadInParts(_ item: RemoteUploadItem) throws(TroveError) -> RemoteUpload {
    let name = RemoteNames.blobPath(item.digest)
    var headers: [String] = []
    if let storageClass = spec.storageClass {
      headers.append("x-amz-storage-class: \(storageClass)")
    }
    var body: [UInt8] = []
    try request("POST", name, query: [("uploads", "")], accepting: [200], headers: headers) {
      (piece) throws(TroveError) in
      guard body.count + piece.count <= 64 * 1024 else {
        throw TroveError(
          .unavailable,
          "remote '\(self.spec.name)': the answer to starting an upload of \(self.shown(name)) is larger than 64 KiB",
          value: self.shown(name))
      }
      body += piece
    }
    guard let uploadID = S3Response.uploadID(body) else {
      throw TroveError(
        .unavailable,
        "remote '\(spec.name)': starting an upload of \(shown(name)) gave no UploadId",
        value: shown(name))
    }
    do throws(TroveError) {
      let etags = try sendParts(item, name: name, uploadID: uploadID)
      let parts = etags.enumerated().map {
        "<Part><PartNumber>\($0.offset + 1)</PartNumber><ETag>\($0.element)</ETag></Part>"
      }
      let complete = Array(
        ("<CompleteMultipartUpload>" + parts.joined() + "</CompleteMultipartUpload>").utf8)
      var answer: [UInt8] = []
      try request(
        "POST", name, query: [("uploadId", uploadID)], accepting: [200],
        headers: try payloadHeaders(complete, blob: false),
        upload: RemoteHTTPTransfer.Upload(bytes: complete)
      ) { (piece) throws(TroveError) in
        if answer.count < 4096 { answer += piece.prefix(4096 - answer.count) }
      }
      // S3 may answer 200 and report the failure in the body.
      if let code = S3Response.errorCode(answer) {
        throw TroveError(
          .transferFailed,
          "remote '\(spec.name)': completing the upload of \(shown(name)) failed: \(code)",
          value: shown(name))
      }
      return .uploaded
    } catch {
      abortUpload(name, uploadID)
      throw error
    }
  }

  /// Aborts the multipart upload `uploadID` of `name`, dropping its parts;
  /// a failure is left for `remote check --clean`.
  func abortUpload(_ name: String, _ uploadID: String) {
    _ = try? request(
      "DELETE", name, query: [("uploadId", uploadID)], accepting: [200, 204, 404])
  }

  /// Sends `item`'s parts; returns their ETags in order once all were
  /// taken and the blob hashed to its digest.
  private func sendParts(_ item: RemoteUploadItem, name: String, uploadID: String)
    throws(TroveError) -> [String]
  {
    let size = partSize(for: item.size)
    let count = Int((item.size + size - 1) / size)
    var connections = [transfer]
    for _ in 0..<(min(Self.parallelParts, count) - 1) { connections.append(try makeTransfer()) }
    let parts = PartQueue(count: count, buffers: connections.count, bufferSize: Int(size))
    let group = DispatchGroup()
    for connection in connections {
      let sender = PartSender(backend: self, connection: connection, parts: parts)
      group.enter()
      Thread {
        sender.run(name: name, uploadID: uploadID)
        group.leave()
      }.start()
    }
    var hasher = XXH3Hasher()
    var failure: TroveError?
    for number in 1...count {
      guard let buffer = parts.freeBuffer() else { break }
      let offset = Int64(number - 1) * size
      let part = UnsafeMutableRawBufferPointer(
        rebasing: buffer[..<Int(min(size, item.size - offset))])
      do throws(TroveError) {
        try readFully(item, into: part, at: offset)
      } catch {
        parts.sent(number, nil, buffer: buffer)
        failure = error
        break
      }
      hasher.update(UnsafeRawBufferPointer(part))
      parts.add(number, part, buffer: buffer)
    }
    parts.finish(failure)
    group.wait()
    if let error = parts.failure { throw error }
    if hasher.finalize() != item.digest { throw item.mismatch }
    return try parts.etags.map { (etag) throws(TroveError) -> String in
      guard let etag else {
        throw TroveError(
          .transferFailed, "remote '\(spec.name)': a part of \(shown(name)) was not sent",
          value: shown(name))
      }
      return etag
    }
  }

  /// Sends one part on `connection`; returns its ETag.
  fileprivate func sendPart(
    _ number: Int, _ bytes: UnsafeRawBufferPointer, name: String, uploadID: String,
    on connection: RemoteHTTPTransfer
  ) throws(TroveError) -> String {
    let sent = try request(
      "PUT", name, query: [("partNumber", String(number)), ("uploadId", uploadID)],
      accepting: [200], headers: try payloadHeaders(bytes, blob: false),
      upload: RemoteHTTPTransfer.Upload(buffer: bytes), on: connection)
    // The ETag goes into the XML that completes the upload.
    guard let etag = sent.etag, (1...128).contains(etag.count),
      etag.unicodeScalars.allSatisfy({
        $0.value >= 0x20 && $0.value < 0x7F && $0 != "<" && $0 != "&"
      })
    else {
      throw TroveError(
        .unavailable,
        "remote '\(spec.name)': part \(number) of \(shown(name)) was answered with no usable ETag",
        value: shown(name))
    }
    return etag
  }
}

/// The parts between the thread reading the blob and the threads sending
/// them: parts read and not yet taken, free buffers (allocated once), the
/// ETags, the first failure.
private final class PartQueue: @unchecked Sendable {
  private let condition = NSCondition()
  /// Each part read: its number, its bytes, and the buffer they are in.
  private var ready: [(Int, UnsafeMutableRawBufferPointer, UnsafeMutableRawBufferPointer)] = []
  private let buffers: [UnsafeMutableRawBufferPointer]
  private var free: [UnsafeMutableRawBufferPointer]
  private var reading = true
  private(set) var etags: [String?]
  private(set) var failure: TroveError?

  init(count: Int, buffers: Int, bufferSize: Int) {
    etags = Array(repeating: nil, count: count)
    self.buffers = (0..<buffers).map { _ in
      UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 4096)
    }
    free = self.buffers
  }

  deinit {
    for buffer in buffers { buffer.deallocate() }
  }

  /// A buffer to read the next part into, waiting for one to be free;
  /// nil once a part failed.
  func freeBuffer() -> UnsafeMutableRawBufferPointer? {
    condition.lock()
    defer { condition.unlock() }
    while free.isEmpty && failure == nil { condition.wait() }
    guard failure == nil else { return nil }
    return free.removeLast()
  }

  /// Part `number` is `bytes`, the start of `buffer`.
  func add(
    _ number: Int, _ bytes: UnsafeMutableRawBufferPointer, buffer: UnsafeMutableRawBufferPointer
  ) {
    condition.lock()
    ready.append((number, bytes, buffer))
    condition.broadcast()
    condition.unlock()
  }

  /// No more parts will be added; `error`, when the reading failed.
  func finish(_ error: TroveError?) {
    condition.lock()
    reading = false
    if failure == nil { failure = error }
    condition.broadcast()
    condition.unlock()
  }

  /// The next part to send and its buffer, waiting for one; nil when there
  /// are no more or one failed.
  func take() -> (Int, UnsafeMutableRawBufferPointer, UnsafeMutableRawBufferPointer)? {
    condition.lock()
    defer { condition.unlock() }
    while ready.isEmpty && reading && failure == nil { condition.wait() }
    guard failure == nil, !ready.isEmpty else { return nil }
    return ready.removeFirst()
  }

  /// Records how sending part `number` went (nil: it was not sent) and
  /// frees its buffer.
  func sent(
    _ number: Int, _ result: Result<String, TroveError>?, buffer: UnsafeMutableRawBufferPointer
  ) {
    condition.lock()
    switch result {
    case .success(let etag)?: etags[number - 1] = etag
    case .failure(let error)?: if failure == nil { failure = error }
    case nil: break
    }
    free.append(buffer)
    condition.broadcast()
    condition.unlock()
  }
}

/// One sending thread's loop, on a connection of its own.
private final class PartSender: @unchecked Sendable {
  let backend: S3Backend
  let connection: RemoteHTTPTransfer
  let parts: PartQueue

  init(backend: S3Backend, connection: RemoteHTTPTransfer, parts: PartQueue) {
    self.backend = backend
    self.connection = connection
    self.parts = parts
  }

  func run(name: String, uploadID: String) {
    while let (number, bytes, buffer) = parts.take() {
      let result: Result<String, TroveError>
      do throws(TroveError) {
        result = .success(
          try backend.sendPart(
            number, UnsafeRawBufferPointer(bytes), name: name, uploadID: uploadID,
            on: connection))
      } catch {
        result = .failure(error)
      }
      parts.sent(number, result, buffer: buffer)
    }
  }
}
