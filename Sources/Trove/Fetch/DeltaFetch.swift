import Foundation

/// A new body of a URL rebuilt from the body the store holds for it and
/// the ranges it lacks, found with the zsync control file the origin
/// publishes beside the file (``FetchRequest/zsyncURL``).
extension Fetcher {
  /// Missing ranges closer than this are asked for as one: a request
  /// costs a round trip, a few blocks of bytes cost less.
  static let deltaRangeGap: Int64 = 16 << 10

  /// Ranges a rebuild may ask for, one request each: past this, a whole
  /// download costs fewer round trips.
  static let deltaMaximumRanges = 4096

  /// Fetches the URL's new body in part when the request names a control
  /// file and the store holds an earlier body: the blocks that body has
  /// are copied (cloned where they line up), the others are downloaded
  /// with `Range` requests from `candidate`, and the whole is checked
  /// against the control file's digest and the request's expectations
  /// before it is published and bound, as a whole download is. Nil, with
  /// nothing kept and a warning saying why, when anything does not hold:
  /// the caller downloads the body whole.
  ///
  /// - Throws: the store's own failures (`.ioError`…), and `.cancelled`.
  mutating func deltaDownload(
    cached: KeyBinding?, from candidate: Candidate, part: PartialDownload?, cause: String
  ) throws(TroveError) -> FetchResult? {
    guard let asked = request.zsyncURL, let cached,
      part?.resumePoint(from: candidate.url) == nil,
      let entry = try store.entry(for: cached.digest), entry.size > 0
    else { return nil }
    let (store, key) = (self.store, url)
    let skip = { (why: String) -> FetchResult? in
      store.warn("fetch '\(key)': \(why); downloading it whole")
      return nil
    }
    guard let seed = try store.objects.open(cached.digest, compressed: false) else {
      return skip("its cached body is stored compressed, and is not searched for blocks")
    }
    defer { seed.close() }
    // A login in the control file's URL goes with that request only.
    let (controlURL, controlLogin) =
      asked.isEmpty ? (Self.controlURL(beside: candidate.url), nil) : URLUserinfo.split(asked)
    if candidate.url.lowercased().hasPrefix("https:"), controlURL.lowercased().hasPrefix("http:") {
      return skip(
        "its zsync control file '\(controlURL)' would come over plain http://, where anyone on the way could rewrite what the https:// body is rebuilt from"
      )
    }
    // What the server has now: its length, and validators for the other
    // ranges. Conditional on the cached copy's validators, a 304 says
    // nothing changed, and the caller revalidates as usual.
    var ranges = RangeAnswers(url: candidate.url)
    let conditions =
      cached.origin.flatMap {
        ConditionalRequest.canRevalidate($0) && ($0.servedBy ?? url) == candidate.url
          ? ConditionalRequest.revalidation($0) : nil
      } ?? []
    guard
      let probed = try fetchRange(
        0..<1, from: candidate, into: nil, &ranges, conditions: conditions)
    else {
      return ranges.notModified ? nil : skip(ranges.failure ?? "a range request failed")
    }
    transferred += probed
    let control: ZsyncControl
    switch fetchControl(controlURL, login: controlLogin, candidate: candidate) {
    case .failure(let failure): return skip(failure.why)
    case .success(let parsed): control = parsed
    }
    guard ranges.length == control.length else {
      return skip(
        "its zsync control file '\(controlURL)' gives a length of \(control.length), the server \(ranges.length ?? 0)"
      )
    }
    if let expected = request.expectedSize, expected != control.length {
      return skip(
        "its zsync control file '\(controlURL)' gives a length of \(control.length), not the \(expected) expected"
      )
    }
    let found: [Int64?]
    do throws(SystemCallError) {
      found = try ZsyncSearch.locate(control, in: seed, size: entry.size)
    } catch {
      throw TroveError.system(
        error, "read", path: store.objects.path(cached.digest, compressed: false))
    }
    if let cancellation, cancellation.isCancelled {
      throw cancellation.error("fetch '\(url)'")
    }
    let plan = DeltaPlan(control: control, found: found, gap: Self.deltaRangeGap)
    guard plan.localBytes > 0 else { return nil }
    guard plan.remoteCount <= Self.deltaMaximumRanges else {
      return skip(
        "the blocks its cached body lacks make \(plan.remoteCount) ranges, over \(Self.deltaMaximumRanges)"
      )
    }
    let policy = self.policy
    let algorithms = Set(request.expected.map(\.algorithm)).union(policy.checksums)
      .subtracting([.xxh128]).sorted { $0.rawValue < $1.rawValue }
    guard let hashes = DeltaHashes(control: control, checksums: algorithms) else {
      return skip("libcrypto has no \(control.fileHash.algorithm) for its zsync control file")
    }
    let writer: BlobWriter
    do throws(TroveError) {
      writer = try store.makeWriter(
        expectedSize: control.length, priority: request.priority, source: candidate.url,
        exact: true)
    } catch  where [.tooLarge, .noSpace, .lowOnSpace].contains(error.code) {
      // The whole download meets the same limit, with its own message.
      return nil
    }
    writer.companion = hashes
    let seedPath = store.objects.path(cached.digest, compressed: false)
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
    defer { buffer.deallocate() }
    do throws(TroveError) {
      for piece in plan.pieces {
        switch piece {
        case .local(let offset, let length):
          try writer.append(length, at: offset, of: seed, path: seedPath, buffer: buffer)
        case .remote(let range):
          guard let received = try fetchRange(range, from: candidate, into: writer, &ranges)
          else {
            writer.cancel()
            if let cancellation, cancellation.isCancelled {
              throw cancellation.error("fetch '\(url)'")
            }
            return skip(ranges.failure ?? "a range request failed")
          }
          transferred += received
        }
      }
    } catch {
      writer.cancel()
      throw error
    }
    let fileHash = hashes.fileHashHex()
    guard fileHash == control.fileHash.hex else {
      writer.cancel()
      return skip(
        "the body rebuilt with its zsync control file '\(controlURL)' has \(control.fileHash.algorithm) \(fileHash), not the control file's \(control.fileHash.hex)"
      )
    }
    let digest = hashes.digest()
    // The server said its body changed (or has no validators to say it):
    // a control file that rebuilds the cached body describes an older one.
    guard digest != cached.digest else {
      writer.cancel()
      return skip(
        conditions.isEmpty
          ? "its zsync control file '\(controlURL)' describes the cached body, and the server gives no validators to say it is still current"
          : "its zsync control file '\(controlURL)' describes the cached body, not the server's new one"
      )
    }
    let checksums = hashes.checksums()
    let verified: [Checksum]
    do throws(TroveError) {
      verified = try verify(
        digest, size: control.length, computed: checksums, source: candidate.url)
    } catch {
      writer.cancel()
      return skip("the body rebuilt with its zsync control file: \(error.message)")
    }
    var put = try writer.finish(method: .stream, expecting: digest)
    var origin = Freshness.origin(
      ranges.head ?? HTTPResponseHead(), size: control.length, finalURL: ranges.finalURL,
      now: currentTimeNanoseconds())
    origin.servedBy = candidate.url
    put.staged.binding = KeyRequest(key: url, origin: origin, checksums: checksums)
    let published = try put.publish()
    store.countFetch(published.digest, served: false)
    status = ranges.head?.status
    let size = CachePolicy.Quantities.formatSize
    return result(
      published.digest, size: control.length, source: .delta, verified: verified,
      servedBy: candidate.url,
      why: cause
        + "; rebuilt with its zsync control file '\(controlURL)': \(size(plan.localBytes)) from its cached body, \(size(plan.remoteBytes)) in \(plan.remoteCount) ranges"
    )
  }

  /// `url` with `.zsync` added to its path (before a query or fragment).
  static func controlURL(beside url: String) -> String {
    guard let end = url.firstIndex(where: { $0 == "?" || $0 == "#" }) else { return url + ".zsync" }
    return url[..<end] + ".zsync" + url[end...]
  }

  /// The control file at `controlURL` (without its `login`), parsed; or
  /// why not. The user's credential goes with it only to the URL's own
  /// origin.
  private mutating func fetchControl(
    _ controlURL: String, login: String?, candidate: Candidate
  ) -> Result<ZsyncControl, ControlFailure> {
    let ownOrigin =
      HTTPOrigin(controlURL) != nil && HTTPOrigin(controlURL) == HTTPOrigin(candidate.url)
    let sink = MemorySink(limit: ZsyncControl.maximumSize, cancellation: cancellation)
    let client: HTTPClient
    do throws(TroveError) { client = try self.client.get() } catch {
      return .failure(ControlFailure(error.message))
    }
    let outcome = client.perform(
      HTTPRequest(
        url: controlURL, originHeaders: ownOrigin ? candidate.headers : [],
        login: login ?? (ownOrigin ? candidate.login : nil),
        usesNetrc: ownOrigin && candidate.usesNetrc,
        redirectHosts: request.redirectHosts, options: options),
      into: sink)
    transferred += Int64(sink.bytes.count)
    let shown = "its zsync control file '\(controlURL)'"
    guard outcome.succeeded || sink.tooLarge else {
      if outcome.head.status >= 300 {
        return .failure(ControlFailure("\(shown) answered HTTP \(outcome.head.status)"))
      }
      return .failure(
        ControlFailure(
          "\(shown) could not be fetched: \(Self.transferError(controlURL, outcome).message)"))
    }
    guard !sink.tooLarge else {
      return .failure(ControlFailure("\(shown) is over \(ZsyncControl.maximumSize) bytes"))
    }
    guard outcome.head.status == 200 else {
      return .failure(ControlFailure("\(shown) answered HTTP \(outcome.head.status)"))
    }
    do throws(ZsyncControl.Refusal) {
      return .success(try ZsyncControl(sink.bytes))
    } catch {
      return .failure(ControlFailure("\(shown) is refused: \(error.reason)"))
    }
  }

  /// Downloads `range` of the URL into `writer` (nil: dropped): a 206
  /// whose `Content-Range` is that range of a file of the control file's
  /// length, the same file as the other ranges' (`If-Range`), asked with
  /// `conditions` too. Returns the bytes received, or nil when the answer
  /// is anything else (the reason in `answers`, or its `notModified`).
  private mutating func fetchRange(
    _ range: Range<Int64>, from candidate: Candidate, into writer: BlobWriter?,
    _ answers: inout RangeAnswers, conditions: [String] = []
  ) throws(TroveError) -> Int64? {
    let sink = RangeSink(
      range: range, answers: answers, writer: writer, cancellation: cancellation)
    var headers = ["Range: bytes=\(range.lowerBound)-\(range.upperBound - 1)"] + conditions
    if let condition = answers.condition { headers.append("If-Range: " + condition) }
    let outcome = try client.get().perform(
      HTTPRequest(
        url: candidate.url, headers: headers, originHeaders: candidate.headers,
        login: candidate.login, usesNetrc: candidate.usesNetrc,
        redirectHosts: request.redirectHosts, options: options),
      into: sink)
    answers = sink.answers
    if let failure = sink.storeFailure { throw failure }
    if outcome.succeeded, sink.received == Int64(range.count) {
      if answers.finalURL == nil { answers.finalURL = outcome.effectiveURL }
      return sink.received
    }
    answers.failure =
      answers.failure
      ?? (outcome.succeeded
        ? "bytes \(range.lowerBound)-\(range.upperBound - 1) ended after \(sink.received) bytes"
        : Self.transferError(candidate.url, outcome).message)
    return nil
  }

  struct ControlFailure: Error {
    let why: String
    init(_ why: String) { self.why = why }
  }
}

/// The order a rebuilt body is written in: runs of blocks an earlier body
/// holds (its offset and length) and ranges to download.
struct DeltaPlan {
  enum Piece: Equatable {
    case local(offset: Int64, length: Int64)
    case remote(Range<Int64>)
  }

  private(set) var pieces: [Piece] = []
  private(set) var localBytes: Int64 = 0
  var remoteBytes: Int64 { remoteRanges.reduce(0) { $0 + Int64($1.count) } }
  var remoteCount: Int { remoteRanges.count }
  var remoteRanges: [Range<Int64>] {
    pieces.compactMap {
      guard case .remote(let range) = $0 else { return nil }
      return range
    }
  }

  /// The pieces for `control`'s blocks, `found` at those offsets of the
  /// earlier body or not: adjacent ones joined, and missing ranges closer
  /// than `gap` asked for as one (the blocks between them downloaded too).
  init(control: ZsyncControl, found: [Int64?], gap: Int64) {
    let block = Int64(control.blockSize)
    for k in 0..<control.blockCount {
      let start = Int64(k) * block
      let length = Int64(control.length(of: k))
      if let at = found[k] {
        if case .local(let offset, let run)? = pieces.last, offset + run == at {
          pieces[pieces.count - 1] = .local(offset: offset, length: run + length)
        } else {
          pieces.append(.local(offset: at, length: length))
        }
      } else if case .remote(let range)? = pieces.last {
        pieces[pieces.count - 1] = .remote(range.lowerBound..<(start + length))
      } else {
        pieces.append(.remote(start..<(start + length)))
      }
    }
    // A short local run between two missing ranges is downloaded with them.
    var joined: [Piece] = []
    for piece in pieces {
      if case .remote(let range) = piece, joined.count >= 2,
        case .local(_, let run) = joined[joined.count - 1], run < gap,
        case .remote(let before) = joined[joined.count - 2]
      {
        joined.removeLast(2)
        joined.append(.remote(before.lowerBound..<range.upperBound))
      } else {
        joined.append(piece)
      }
    }
    pieces = joined
    for case .local(_, let length) in pieces { localBytes += length }
  }
}

/// The answers to a rebuild's range requests so far: the first one's head
/// (the body's validators and freshness) and what makes the others
/// conditional on the same body.
struct RangeAnswers {
  let url: String
  /// The body's length: the control file's, or the first answer's.
  var length: Int64?
  var head: HTTPResponseHead?
  /// The server answered 304 to a conditional request.
  var notModified = false
  var finalURL: String?
  var failure: String?

  /// `If-Range`'s value: a strong ETag, else the Last-Modified date.
  var condition: String? {
    guard let head else { return nil }
    if let etag = head.field("etag"), !etag.hasPrefix("W/") { return etag }
    return head.field("last-modified")
  }
}

/// Takes a range's answer into the writer, checking it is that range.
private final class RangeSink: HTTPBodySink {
  let range: Range<Int64>
  var answers: RangeAnswers
  let writer: BlobWriter?
  let cancellation: Cancellation?
  var received: Int64 = 0
  var storeFailure: TroveError?

  init(
    range: Range<Int64>, answers: RangeAnswers, writer: BlobWriter?, cancellation: Cancellation?
  ) {
    self.range = range
    self.answers = answers
    self.writer = writer
    self.cancellation = cancellation
  }

  func begin(_ head: HTTPResponseHead) -> Bool {
    let asked = "bytes \(range.lowerBound)-\(range.upperBound - 1)"
    if head.status == 304 {
      answers.notModified = true
      return false
    }
    guard head.status == 206 else {
      answers.failure =
        head.status == 200
        ? "the server answered \(asked) with the whole body (it ignores ranges, or the body changed)"
        : "the server answered \(asked) with HTTP \(head.status)"
      return false
    }
    guard let (start, end, total) = RangeRequest.contentRange(head.field("content-range")),
      start == range.lowerBound, end == range.upperBound - 1, total == answers.length ?? total
    else {
      answers.failure =
        "the server answered \(asked) with Content-Range '\(ServerText.excerpt(head.field("content-range") ?? ""))'"
      return false
    }
    answers.length = total
    if let first = answers.head {
      // Without If-Range's help, the validators at least must agree.
      guard first.field("etag") == head.field("etag") else {
        answers.failure = "the body changed between two range requests (its ETag)"
        return false
      }
    } else {
      answers.head = head
    }
    return true
  }

  func write(_ bytes: UnsafeRawBufferPointer) -> HTTPWriteAnswer {
    guard received + Int64(bytes.count) <= Int64(range.count) else {
      answers.failure = "the server sent more than the range asked for"
      return .stop
    }
    do throws(TroveError) {
      try writer?.write(bytes)
    } catch {
      storeFailure = error
      return .stop
    }
    received += Int64(bytes.count)
    return .accepted
  }

  func progress(received: Int64, expected: Int64?) -> Bool { cancellation?.isCancelled != true }
}

/// A small body kept in memory, up to `limit` bytes.
private final class MemorySink: HTTPBodySink {
  let limit: Int
  let cancellation: Cancellation?
  var bytes: [UInt8] = []
  var tooLarge = false

  init(limit: Int, cancellation: Cancellation?) {
    self.limit = limit
    self.cancellation = cancellation
  }

  func begin(_ head: HTTPResponseHead) -> Bool { head.status == 200 }

  func write(_ bytes: UnsafeRawBufferPointer) -> HTTPWriteAnswer {
    guard self.bytes.count + bytes.count <= limit else {
      tooLarge = true
      return .stop
    }
    self.bytes += bytes
    return .accepted
  }

  func progress(received: Int64, expected: Int64?) -> Bool { cancellation?.isCancelled != true }
}

/// The digests a rebuilt body is checked by, fed as it is written: the
/// object's, the control file's, and the checksums asked for.
private final class DeltaHashes: ByteHashing {
  private var object = XXH3Hasher()
  private let file: EVPHasher
  private let checksumHashers: [SHA2Hasher]

  init?(control: ZsyncControl, checksums: [ChecksumAlgorithm]) {
    guard let file = EVPHasher(name: control.fileHash.algorithm) else { return nil }
    self.file = file
    checksumHashers = checksums.map(SHA2Hasher.init)
  }

  func update(_ bytes: UnsafeRawBufferPointer) {
    object.update(bytes)
    file.update(bytes)
    for hasher in checksumHashers { hasher.update(bytes) }
  }

  func digest() -> BlobDigest { object.finalize() }

  func fileHashHex() -> String {
    file.finalize().map { String(format: "%02x", $0) }.joined()
  }

  func checksums() -> [Checksum] { checksumHashers.map { $0.finalize() } }
}
