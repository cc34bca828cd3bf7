import Foundation

/// The receiving end of one transfer: checks the response, hashes the
/// body as it arrives — XXH3-128 and any SHA-2 asked for, in the same pass
/// — and writes it to the URL's part file (or, where the URL's lock is not
/// honoured, a private ``BlobWriter``). Nothing is published here: the
/// fetch publishes a complete, verified body (`Store.fetch(_:options:progress:)`).
final class Download: HTTPBodySink {
  /// How the response was answered, when it was not a body to keep.
  enum Answer {
    /// A body (200, or 206 continuing the part file).
    case body
    /// 304: the cached copy is current, if the validators match.
    case notModified
    /// An HTTP status that is a failure (404, 500…).
    case status(Int)
    /// The answer to a range request did not fit the part file (a wrong
    /// `Content-Range`): start again from zero.
    case misfit
  }

  let store: Store
  let request: FetchRequest
  /// The part file (nil: writing to a private writer).
  let part: PartialDownload?
  /// Where the asked range starts (0: the whole body was asked for).
  let offset: Int64
  /// The lengths the body may have (`--expect-size`, `max-object-size`).
  let limit: SizeLimit
  private let progressHandler: (@Sendable (FetchProgress) -> Void)?

  private(set) var answer: Answer?
  private(set) var head = HTTPResponseHead()
  /// Why the transfer was stopped here, if it was for a failure of ours.
  private(set) var failure: TroveError?
  /// Body bytes received in this response.
  private(set) var received: Int64 = 0
  /// The whole body's length, when the server said.
  private(set) var total: Int64?
  /// Evictions made to fit the body.
  private(set) var sweeps: [SweepReport] = []

  private var hasher = XXH3Hasher()
  private let shaHashers: [SHA2Hasher]
  private var writer: BlobWriter?
  /// The part file's admission (a private writer has its own).
  private var admission: Admission?
  private var writes: PressuredWrites
  /// Received bytes are gathered here and hashed and written 1 MiB at a
  /// time: libcurl hands out 16–512 KiB pieces. Made at the first bytes,
  /// no larger than the body announced: a megabyte per small file would
  /// come from `mmap` and go back by `munmap`, faulted in page by page.
  private var buffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)
  private var buffered = 0
  private var lastProgress: UInt64 = 0
  private var reportedPart = false
  /// Set by an `async` fetch whose task was cancelled: the transfer stops
  /// at the next progress call (at least once a second).
  var cancellation: Cancellation?
  /// The admission of a fetch of many URLs, shared by its small bodies.
  var admissions: AdmissionSharing?

  /// Bodies of at most this many bytes, their length known, are not kept
  /// for resuming: a failed one is fetched again whole.
  static let smallBody: Int64 = 4 << 20

  init(
    store: Store, request: FetchRequest, part: PartialDownload?, offset: Int64,
    algorithms: Set<ChecksumAlgorithm>, limit: SizeLimit,
    progress: (@Sendable (FetchProgress) -> Void)?
  ) {
    self.store = store
    self.request = request
    self.part = part
    self.offset = offset
    self.limit = limit
    progressHandler = progress
    shaHashers = algorithms.subtracting([.xxh128]).sorted { $0.rawValue < $1.rawValue }.map {
      SHA2Hasher($0)
    }
    writes = PressuredWrites(store: store, priority: request.priority)
  }

  deinit {
    if buffer.baseAddress != nil { buffer.deallocate() }
    writer?.cancel()
  }

  private func stop(_ error: TroveError) -> Bool {
    failure = error
    return false
  }

  func begin(_ head: HTTPResponseHead) -> Bool {
    self.head = head
    switch head.status {
    case 200 where offset == 0, 206 where offset > 0:
      break
    case 304:
      answer = .notModified
      return true
    case 200..<300 where offset > 0, 416 where offset > 0:
      // A range request answered otherwise (libcurl refuses a 200 with a
      // body itself, but not one whose length is the offset): start again.
      answer = .misfit
      return false
    default:
      answer = .status(head.status)
      return false
    }
    answer = .body
    let lengths = head.contentLengths
    if lengths.count > 1 {
      // libcurl would go by one of them and Trove's length check by none.
      return stop(
        TroveError(
          .unavailable,
          "cannot fetch '\(request.url)': the server sent conflicting Content-Length headers (\(lengths.sorted().joined(separator: ", ")))",
          value: request.url))
    }
    if head.status == 206 {
      // libcurl checked the range starts at `offset`. The rest must be of
      // the same body: its validator, and the whole length the part was
      // started for. (A server that ignores If-Range would splice.)
      let range = Self.contentRange(head.field("content-range"))
      let validator = part?.info?.validator
      guard let range, range.start == offset, let validator,
        head.field("etag") == validator || head.field("last-modified") == validator
      else {
        answer = .misfit
        return false
      }
      total = range.total ?? part?.info?.total
      if let known = part?.info?.total, let total = range.total, known != total {
        answer = .misfit
        return false
      }
    } else {
      total = head.announcedLength
    }
    do throws(TroveError) {
      if let total { try limit.checkAnnounced(total) }
      if let part, offset == 0, let total, total <= Self.smallBody {
        // Too small to be worth resuming: a private writer (which may
        // compress as it goes) saves the part file's metadata work.
        if part.length > 0 || part.info != nil { part.discard() }
        writer = try store.makeWriter(
          expectedSize: total, priority: request.priority, source: request.url,
          sharing: admissions)
      } else if let part {
        if offset > 0 {
          try part.rehash { bytes in
            hasher.update(bytes)
            for sha in shaHashers { sha.update(bytes) }
          }
        } else {
          try part.restart(resumeInfo(head))
        }
        let admission = try AdmissionSharing.admission(admissions, store: store)
        sweeps = try admission.admit(
          size: total.map { $0 - offset }, priority: request.priority, input: request.url)
        self.admission = admission
      } else {
        writer = try store.makeWriter(
          expectedSize: total, priority: request.priority, source: request.url,
          sharing: admissions)
      }
    } catch {
      return stop(error)
    }
    return true
  }

  /// What lets a later fetch resume this body: a strong ETag or a
  /// Last-Modified to make the range request conditional on.
  private func resumeInfo(_ head: HTTPResponseHead) -> PartialDownload.Info? {
    let etag = head.field("etag").flatMap { Freshness.isStrong($0) ? $0 : nil }
    // A Last-Modified is a strong validator only when the response was
    // sent at least a second after it (RFC 9110 §8.8.2.2): two changes
    // within its second would otherwise look alike.
    let modified = head.field("last-modified").flatMap { text -> String? in
      guard let at = Freshness.httpDate(text), let date = head.field("date"),
        let sent = Freshness.httpDate(date), sent.subtractingSaturated(at) >= 1_000_000_000
      else { return nil }
      return text
    }
    guard let validator = etag ?? modified,
      head.field("content-encoding").map({ $0.lowercased() == "identity" }) ?? true
    else { return nil }
    return PartialDownload.Info(
      url: request.url, validator: validator, total: total, boot: PartialDownload.bootID)
  }

  func write(_ bytes: UnsafeRawBufferPointer) -> HTTPWriteAnswer {
    guard case .body = answer else { return .accepted }  // a 304 has no body
    // Past the expected size or the store's limit: no byte of it is kept.
    do throws(TroveError) {
      try limit.checkReceived(offset + received + Int64(bytes.count))
    } catch {
      _ = stop(error)
      return .stop
    }
    if buffer.baseAddress == nil {
      let announced = total.map { max(1, $0 - offset) } ?? Int64(Transfer.bufferSize)
      let size = (min(Int64(Transfer.bufferSize), announced) + 4095) & ~4095
      buffer = .allocate(byteCount: Int(size), alignment: 4096)
    }
    var rest = bytes
    while !rest.isEmpty {
      let n = min(rest.count, buffer.count - buffered)
      UnsafeMutableRawBufferPointer(rebasing: buffer[buffered..<(buffered + n)])
        .copyMemory(from: UnsafeRawBufferPointer(rebasing: rest[..<n]))
      buffered += n
      rest = UnsafeRawBufferPointer(rebasing: rest[n...])
      if buffered == buffer.count, !flush() { return .stop }
    }
    received += Int64(bytes.count)
    return .accepted
  }

  /// Hashes and writes what is gathered. After a failure, never again:
  /// the gathered bytes were hashed, and the part keeps only whole writes.
  private func flush() -> Bool {
    guard failure == nil else { return false }
    guard buffered > 0 else { return true }
    let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<buffered])
    hasher.update(bytes)
    for sha in shaHashers { sha.update(bytes) }
    do throws(TroveError) {
      if let writer {
        try writer.write(bytes)
      } else if let part {
        let remaining = total.map { max(0, $0 - part.length) }
        try part.append(bytes, writes: &writes, remaining: remaining)
      }
    } catch {
      return stop(error)
    }
    buffered = 0
    return true
  }

  var wantsProgress: Bool { progressHandler != nil || cancellation != nil }

  func progress(received: Int64, expected: Int64?) -> Bool {
    if let cancellation, cancellation.isCancelled {
      return stop(cancellation.error("fetch '\(request.url)'"))
    }
    guard let progressHandler else { return true }
    // The part file is named only once its body is admitted, and never
    // after the transfer failed.
    var growsPart = false
    if case .body? = answer, writer == nil, part != nil, admission != nil, failure == nil {
      growsPart = true
    }
    // A report naming the part file wakes the readers a server sends it
    // to: the first at once, then every 10 ms; others ten a second at most.
    let now = DispatchTime.now().uptimeNanoseconds
    guard (growsPart && !reportedPart) || now - lastProgress >= (growsPart ? 10 : 100) * 1_000_000
    else { return true }
    lastProgress = now
    reportedPart = reportedPart || growsPart
    var report = FetchProgress(url: request.url, received: offset + received, total: total)
    if case .body? = answer {
      report = described(report)
      report.partFile = growsPart ? part?.path : nil
    }
    progressHandler(report)
    return true
  }

  /// Tells a progress handler that reads the part file along that its
  /// bytes are `body`'s, verified: the last report of the transfer.
  func reportVerified(_ body: Body) {
    guard let progressHandler, reportedPart, let part else { return }
    var report = described(FetchProgress(url: request.url, received: body.size, total: total))
    report.partFile = part.path
    report.verified = body.digest
    progressHandler(report)
  }

  /// `report` with the response's type and validators, checked as a fetch
  /// records them.
  private func described(_ report: FetchProgress) -> FetchProgress {
    var report = report
    report.contentType = head.field("content-type").flatMap(Freshness.contentType)
    report.etag = head.field("etag").flatMap { ConditionalRequest.isSafe($0) ? $0 : nil }
    report.lastModified = head.field("last-modified").flatMap {
      ConditionalRequest.isDate($0) ? $0 : nil
    }
    return report
  }

  /// The finished body: every byte hashed and handed on, its length
  /// checked against what the server announced.
  struct Body {
    var digest: BlobDigest
    var size: Int64
    var checksums: [Checksum]
  }

  /// Ends a transfer that libcurl reported complete.
  /// - Throws: `.transferFailed` when the body is shorter than announced.
  func finish() throws(TroveError) -> Body {
    guard flush() else { throw failure! }
    let size = offset + received
    if let total, size != total {
      throw TroveError(
        .transferFailed,
        "'\(request.url)' ended after \(size) of \(total) bytes", value: request.url)
    }
    return Body(
      digest: hasher.finalize(), size: size, checksums: shaHashers.map { $0.finalize() })
  }

  /// Publishes a finished body through the ingest pipeline, with
  /// `binding` bound in the transaction that publishes it: the writer's
  /// staged object, or the part file moved into `tmp/` and staged in the
  /// form the policy chooses, is published as a single put (coalesced
  /// with the puts other threads publish at the same time).
  func publish(_ body: Body, binding: KeyRequest) throws(TroveError) -> PutResult {
    var put: StagedPut
    if let writer {
      self.writer = nil
      put = try writer.finish(method: .stream)
    } else if let part, let file = part.file, let admission {
      let name = try part.handOver()
      let staged = try store.stage(
        raw: name, file: file, digest: body.digest, size: body.size, admission: admission,
        writes: &writes)
      put = StagedPut(
        store: store, staged: staged, method: .stream, sweeps: sweeps + writes.reliefs,
        admission: admission)
    } else {
      // An empty body of unknown length wrote nothing: store it from memory.
      return try store.put(bytes: [UInt8](), binding: binding, priority: request.priority)
    }
    put.staged.binding = binding
    return try put.publish()
  }

  /// A small finished body (at most ``smallBody`` bytes, announced) that a
  /// private writer holds, staged with `binding` for the caller to publish;
  /// nil for any other, which ``publish(_:binding:)`` publishes.
  func stage(_ body: Body, binding: KeyRequest) throws(TroveError) -> StagedPut? {
    guard let writer, let total, total <= Self.smallBody, offset == 0 else { return nil }
    self.writer = nil
    var put = try writer.finish(method: .stream)
    put.staged.binding = binding
    return put
  }

  /// Ends a transfer that failed: what arrived whole is written to the
  /// part file, to be resumed; or, when its bytes are known to be wrong
  /// (`discardingPart`), the part file goes. A private writer always goes.
  func abandon(discardingPart: Bool) {
    if let writer {
      writer.cancel()
      self.writer = nil
    } else if discardingPart {
      part?.discard()
    } else if part?.file != nil, case .body = answer {
      _ = flush()
    }
  }

  /// `bytes START-END/TOTAL` (TOTAL may be `*`).
  static func contentRange(_ text: String?) -> (start: Int64, total: Int64?)? {
    guard var text = text?.trimmingCharacters(in: .whitespaces), text.hasPrefix("bytes ") else {
      return nil
    }
    text.removeFirst(6)
    let halves = text.split(separator: "/", maxSplits: 1)
    guard halves.count == 2, let dash = halves[0].firstIndex(of: "-"),
      let start = Int64(halves[0][..<dash])
    else { return nil }
    return (start, halves[1] == "*" ? nil : Int64(halves[1]))
  }
}
