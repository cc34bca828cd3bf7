import CCurl
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A remote in an S3 bucket (AWS S3, Ceph's radosgw, MinIO, R2…), under a
/// prefix, in the WebDAV remote's layout (`trove-remote.json`,
/// `cas/<aa>/<hex>`, `keys/<h>.json`, `sigs/…`): `aws s3 ls` shows what
/// Trove stored, and any Trove reads it. Requests are signed by libcurl
/// (AWS Signature Version 4) with the credentials the AWS tools would use
/// (``AWSConfiguration``), or go unsigned for a public bucket.
///
/// An upload asks HEAD first and sends nothing when the blob is there. A
/// blob of up to ``partSize`` is read into memory, checked against its
/// digest, and sent in one PUT (its bytes checked on the way as
/// ``payloadHeaders(_:blob:)`` says) with `If-None-Match: *`, so that an
/// existing blob is never replaced (a 412 means another writer got there
/// first). A larger one goes as a
/// multipart upload (``uploadInParts(_:)``), and a large pull in ranges
/// (``downloadInRanges(_:into:)``), several at once.
final class S3Backend: RemoteBackend {
  let spec: RemoteSpec
  let configuration: AWSConfiguration
  let transfer: RemoteHTTPTransfer
  let bucket: String
  let prefix: String
  private let limits: RemoteLimits
  /// The `Date` of the last answer on ``transfer``: the server's clock.
  private(set) var lastDate: String?
  private let signing: RemoteHTTPTransfer.AWSSigning?
  /// Runs this session's transfers, when it is one (``session(through:)``).
  private let multi: HTTPMulti?

  /// The size of a multipart upload's parts and of a large pull's ranges,
  /// and the largest blob sent in one PUT: the remote's `part-size`, else
  /// ``defaultPartSize``.
  let partSize: Int
  static let defaultPartSize = 8 << 20
  /// Ranges fetched at once.
  static let parallelTransfers = 4
  /// Parts sent at once: each holds a part in memory (of 8 MiB by default).
  static let parallelParts = 3
  /// Attempts of a request the server asked to slow down (503, `SlowDown`).
  static let attempts = 4

  init(_ spec: RemoteSpec, endpoint: RemoteSpec.Endpoint, limits: RemoteLimits) throws(TroveError) {
    self.spec = spec
    var configuration = try AWSConfiguration.resolve(spec)
    // This user's AWS credentials sign only requests to a bucket and
    // endpoint they lend them to; others go unsigned, as to a public bucket.
    if !spec.lendsCredentials { configuration.credentials = nil }
    self.configuration = configuration
    bucket = endpoint.bucket
    prefix = endpoint.prefix
    partSize = Int(spec.partSize ?? Int64(Self.defaultPartSize))
    self.limits = limits
    signing = configuration.credentials.map {
      RemoteHTTPTransfer.AWSSigning(
        accessKeyID: $0.accessKeyID, secretAccessKey: $0.secretAccessKey,
        sessionToken: $0.sessionToken, region: configuration.region)
    }
    multi = nil
    transfer = try Self.transfer(limits, signing, configuration, multi: nil)
  }

  /// A connection to the service, signing with `signing`.
  private static func transfer(
    _ limits: RemoteLimits, _ signing: RemoteHTTPTransfer.AWSSigning?,
    _ configuration: AWSConfiguration, multi: HTTPMulti?
  ) throws(TroveError) -> RemoteHTTPTransfer {
    let transfer = try RemoteHTTPTransfer(
      limits: limits, credential: nil, usesNetrc: false, signing: signing, multi: multi)
    transfer.caBundle = configuration.caBundle
    return transfer
  }

  /// A session of `backend`: the same remote and credentials, its
  /// transfers run by `multi`.
  private init(session backend: S3Backend, multi: HTTPMulti) throws(TroveError) {
    spec = backend.spec
    configuration = backend.configuration
    bucket = backend.bucket
    prefix = backend.prefix
    partSize = backend.partSize
    limits = backend.limits
    signing = backend.signing
    self.multi = multi
    transfer = try Self.transfer(limits, signing, configuration, multi: multi)
  }

  func session(through multi: HTTPMulti) throws(TroveError) -> (any RemoteBackend)? {
    try S3Backend(session: self, multi: multi)
  }

  /// Another connection to the service, for a part or range sent beside
  /// others.
  func makeTransfer() throws(TroveError) -> RemoteHTTPTransfer {
    try Self.transfer(limits, signing, configuration, multi: multi)
  }

  /// `name`'s key in the bucket: under the prefix.
  func key(_ name: String) -> String {
    prefix.isEmpty ? name : prefix + "/" + name
  }

  /// `s3://BUCKET/KEY`, for messages.
  func shown(_ name: String) -> String { "s3://\(bucket)/\(key(name))" }

  /// The request URL of `name`, with `query` in the canonical form
  /// Signature Version 4 signs (sorted, percent-encoded, `=` after every
  /// name), which libcurl does not make itself.
  func url(_ name: String, query: [(String, String)] = []) -> String {
    let path = key(name).split(separator: "/").map { Self.encoded(String($0)) }
      .joined(separator: "/")
    return bucketURL(query: []) + path + Self.queryString(query)
  }

  /// The bucket's own URL, ending in `/` (for requests on the bucket, not
  /// on an object), with `query` as ``url(_:query:)`` gives it.
  func bucketURL(query: [(String, String)]) -> String {
    let service = configuration.service
    let base =
      configuration.pathStyle
      ? "\(service.scheme)://\(service.authority)/\(bucket)/"
      : "\(service.scheme)://\(bucket).\(service.authority)/"
    return base + Self.queryString(query)
  }

  /// `?` and `query` in the canonical form, or nothing.
  private static func queryString(_ query: [(String, String)]) -> String {
    guard !query.isEmpty else { return "" }
    return "?"
      + query.sorted { $0.0 < $1.0 }.map { encoded($0.0) + "=" + encoded($0.1) }
      .joined(separator: "&")
  }

  /// `text` with everything but RFC 3986's unreserved characters
  /// percent-encoded, as Signature Version 4 wants.
  static func encoded(_ text: String) -> String {
    var out = ""
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
        UInt8(ascii: "_"), UInt8(ascii: "~"):
        out.unicodeScalars.append(Unicode.Scalar(byte))
      default:
        out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
      }
    }
    return out
  }

  /// Runs a request on `name`; an exchange that did not complete, or a
  /// status not in `accepted`, is an error naming the remote, the object
  /// and S3's error code. A 503 is tried again, after 0.2 s, 0.8 s and
  /// 3.2 s. A 404 whose code is not `NoSuchKey` or `NoSuchUpload` (a
  /// missing bucket) is an error even where 404 is accepted.
  @discardableResult
  func request(
    _ method: String, _ name: String, query: [(String, String)] = [],
    accepting accepted: Set<Int>, headers: [String] = [],
    upload: RemoteHTTPTransfer.Upload? = nil, on connection: RemoteHTTPTransfer? = nil,
    atBucket: Bool = false,
    sink: ((UnsafeRawBufferPointer) throws(TroveError) -> Void)? = nil
  ) throws(TroveError) -> RemoteHTTPTransfer.Outcome {
    let transfer = connection ?? self.transfer
    let target = atBucket ? bucketURL(query: query) : url(name, query: query)
    var outcome = transfer.perform(method, target, headers: headers, upload: upload, sink: sink)
    var attempt = 1
    while outcome.code == CURLE_OK, outcome.status == 503, attempt < Self.attempts {
      usleep(useconds_t(200_000 << (2 * (attempt - 1))))
      attempt += 1
      outcome = transfer.perform(method, target, headers: headers, upload: upload, sink: sink)
    }
    if connection == nil, outcome.date != nil { lastDate = outcome.date }
    if let error = RemoteHTTPTransfer.failure(
      outcome, remote: spec.name, method: method, shown: shown(name))
    {
      guard outcome.code == CURLE_PEER_FAILED_VERIFICATION else { throw error }
      let hint =
        configuration.caBundle.map { "the certificates trusted are those in '\($0)'" }
        ?? "AWS_CA_BUNDLE or the profile's ca_bundle names the certificates to trust"
      throw TroveError(error.code, error.message + " (\(hint))", value: error.value)
    }
    let code = S3Response.errorCode(outcome.unreadBody)
    if outcome.status == 404, let code, code != "NoSuchKey", code != "NoSuchUpload" {
      throw failure(method, name, outcome, code: code)
    }
    guard accepted.contains(outcome.status) else {
      throw failure(method, name, outcome, code: code)
    }
    return outcome
  }

  /// The error for an answer no request accepts: its status, S3's code
  /// and what the code means.
  func failure(
    _ method: String, _ name: String, _ outcome: RemoteHTTPTransfer.Outcome, code: String?
  ) -> TroveError {
    var text =
      "remote '\(spec.name)': \(method) \(shown(name)) answered HTTP \(outcome.status)"
    if let code {
      text += " \(code)"
      if let hint = S3Response.hint(code) { text += " (\(hint))" }
    }
    if code == "RequestTimeTooSkewed" || code == "SignatureDoesNotMatch",
      let skew = clockSkew(outcome.date), abs(skew) > 300
    {
      text +=
        "; this machine's clock is \(abs(skew)) s \(skew > 0 ? "ahead of" : "behind") the server's"
    }
    return TroveError(
      outcome.status >= 500 ? .transferFailed : .unavailable, text, value: shown(name),
      remedy: [401, 403].contains(outcome.status) && !spec.lendsCredentials
        ? .lendCredentials(name: spec.name) : nil)
  }

  /// Seconds this machine's clock is ahead of `date` (an HTTP date the
  /// server sent), or nil without one.
  func clockSkew(_ date: String?) -> Int64? {
    guard let date, let seconds = Freshness.httpDate(date) else { return nil }
    return (currentTimeNanoseconds() - seconds) / 1_000_000_000
  }

  func exists(_ digest: BlobDigest) throws(TroveError) -> Bool {
    try size(digest) != nil
  }

  func size(_ digest: BlobDigest) throws(TroveError) -> Int64? {
    let name = RemoteNames.blobPath(digest)
    let outcome = try request("HEAD", name, accepting: [200, 404])
    guard outcome.status == 200 else { return nil }
    guard let length = outcome.contentLength else {
      throw TroveError(
        .unavailable, "remote '\(spec.name)': HEAD \(shown(name)) gave no Content-Length",
        value: shown(name))
    }
    return length
  }

  func download(_ digest: BlobDigest, from offset: Int64, into writer: any RemoteSink)
    throws(TroveError) -> Int64?
  {
    if offset == 0 { return try downloadInRanges(digest, into: writer) }
    let name = RemoteNames.blobPath(digest)
    let headers = ["Range: bytes=\(offset)-"]
    var received: Int64 = 0
    let outcome = try request(
      "GET", name, accepting: [206, 404], headers: headers
    ) { (bytes) throws(TroveError) in
      try writer.write(bytes)
      received += Int64(bytes.count)
    }
    guard outcome.status != 404 else { return nil }
    if let length = outcome.contentLength, length != received {
      throw TroveError(
        .transferFailed,
        "remote '\(spec.name)': GET \(shown(name)) ended after \(received) of \(length) bytes",
        value: shown(name))
    }
    return offset + received
  }

  func upload(_ item: RemoteUploadItem) throws(TroveError) -> RemoteUpload {
    let (digest, size) = (item.digest, item.size)
    if let limit = spec.sizeLimit, size > limit { return .tooLarge }
    // An object of another length under the blob's name cannot be the
    // blob (a damaged upload): it is replaced, never taken as present.
    let found = try self.size(digest)
    if found == size { return .present }
    if size > Int64(partSize) {
      return try uploadInParts(item)
    }
    var bytes = [UInt8](repeating: 0, count: Int(size))
    try readFully(item, into: &bytes, at: 0)
    if item.verify, XXH3Hasher.digest(bytes) != digest { throw item.mismatch }
    var headers = try payloadHeaders(bytes)
    if found == nil { headers.append("If-None-Match: *") }
    let put = try request(
      "PUT", RemoteNames.blobPath(digest), accepting: [200, 412], headers: headers,
      upload: RemoteHTTPTransfer.Upload(bytes: bytes))
    return put.status == 412 ? .present : .uploaded
  }

  /// The headers of a body's upload: what signs it, and the storage class
  /// of a blob. Over plain HTTP, its SHA-256, which the server checks:
  /// nothing else would notice a changed byte. Over HTTPS, TLS does (each
  /// record is authenticated up to the server's end of it), and the body
  /// goes as `UNSIGNED-PAYLOAD`: a SHA-256 hashed here and again by the
  /// server would cost a pass over every byte on each side. Readers hash
  /// every blob they pull either way.
  func payloadHeaders(_ bytes: [UInt8], blob: Bool = true) throws(TroveError) -> [String] {
    var headers: Result<[String], TroveError> = .success([])
    bytes.withUnsafeBytes { buffer in
      headers = Result { () throws(TroveError) in try payloadHeaders(buffer, blob: blob) }
    }
    return try headers.get()
  }

  func payloadHeaders(_ bytes: UnsafeRawBufferPointer, blob: Bool = true) throws(TroveError)
    -> [String]
  {
    var headers: [String]
    if configuration.service.scheme == "https" {
      headers = ["x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    } else {
      let hasher = SHA2Hasher(.sha256)
      hasher.update(bytes)
      headers = ["x-amz-content-sha256: \(hasher.finalize().hex)"]
    }
    if blob, let storageClass = spec.storageClass {
      headers.append("x-amz-storage-class: \(storageClass)")
    }
    return headers
  }

  /// Reads `bytes.count` bytes of `item`'s file from `offset`.
  func readFully(_ item: RemoteUploadItem, into bytes: inout [UInt8], at offset: Int64)
    throws(TroveError)
  {
    var read: Result<Void, TroveError> = .success(())
    bytes.withUnsafeMutableBytes { buffer in
      read = Result { () throws(TroveError) in try readFully(item, into: buffer, at: offset) }
    }
    try read.get()
  }

  /// Fills `buffer` with bytes of `item`'s file from `offset`.
  func readFully(
    _ item: RemoteUploadItem, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64
  ) throws(TroveError) {
    var failure: SystemCallError?
    var short = false
    var done = 0
    while done < buffer.count {
      do throws(SystemCallError) {
        let n = try item.file.read(
          into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]),
          at: offset + Int64(done))
        guard n > 0 else {
          short = true
          break
        }
        done += n
      } catch {
        failure = error
        break
      }
    }
    if let failure {
      throw TroveError(
        .ioError, "cannot read the blob being uploaded to remote '\(spec.name)'", cause: failure)
    }
    if short {
      throw TroveError(
        .ioError,
        "the blob being uploaded to remote '\(spec.name)' ended before \(item.size) bytes",
        value: item.digest.description)
    }
  }

  func delete(_ digest: BlobDigest) throws(TroveError) -> Bool {
    // S3 answers 204 whether or not there was one.
    guard try size(digest) != nil else { return false }
    try request("DELETE", RemoteNames.blobPath(digest), accepting: [200, 204, 404])
    return true
  }

  /// A small object's bytes (a record), or nil when there is none; one
  /// longer than `limit` is `tooLong`'s error, not read to its end.
  private func readSmall(
    _ name: String, limit: Int, tooLong: @escaping (String) -> TroveError
  ) throws(TroveError) -> [UInt8]? {
    var bytes: [UInt8] = []
    let source = shown(name)
    let outcome = try request("GET", name, accepting: [200, 404]) { (piece) throws(TroveError) in
      guard bytes.count + piece.count <= limit else { throw tooLong(source) }
      bytes += piece
    }
    return outcome.status == 200 ? bytes : nil
  }

  /// Writes a small object (a record) whole, replacing any earlier one.
  private func writeSmall(_ name: String, _ bytes: [UInt8], onlyNew: Bool = false)
    throws(TroveError)
  {
    var headers = try payloadHeaders(bytes, blob: false)
    if onlyNew { headers.append("If-None-Match: *") }
    try request(
      "PUT", name, accepting: onlyNew ? [200, 412] : [200], headers: headers,
      upload: RemoteHTTPTransfer.Upload(bytes: bytes))
  }

  func readLayout() throws(TroveError) -> RemoteLayout? {
    let name = spec.name
    guard
      let bytes = try readSmall(
        RemoteNames.layoutFile, limit: 64 * 1024,
        tooLong: {
          TroveError(
            .unsupportedFormat, "remote '\(name)': \($0) is larger than 64 KiB", value: $0)
        })
    else { return nil }
    return try RemoteLayout.decode(
      bytes, source: "remote '\(spec.name)': \(shown(RemoteNames.layoutFile))")
  }

  func writeLayout(_ layout: RemoteLayout) throws(TroveError) {
    // Written once, by the first writer: a later one keeps it.
    try writeSmall(RemoteNames.layoutFile, layout.encoded(), onlyNew: true)
  }

  func readKeyRecord(_ key: String) throws(TroveError) -> RemoteKeyRecord? {
    let name = spec.name
    guard
      let bytes = try readSmall(
        RemoteNames.keyRecordPath(key), limit: RemoteKeyRecord.sizeLimit,
        tooLong: { RemoteKeyRecord.tooLong(remote: name, source: $0) })
    else { return nil }
    return try RemoteKeyRecord.decode(bytes, key: key)?.validated(remote: spec.name)
  }

  func writeKeyRecord(_ record: RemoteKeyRecord) throws(TroveError) {
    try writeSmall(RemoteNames.keyRecordPath(record.key), record.encoded())
  }

  func readSignedEntry(_ digest: BlobDigest) throws(TroveError) -> SignedObjectEntry? {
    let name = spec.name
    guard
      let bytes = try readSmall(
        RemoteNames.signedEntryPath(digest), limit: SignedObjectEntry.sizeLimit,
        tooLong: { SignedObjectEntry.tooLong(remote: name, source: $0) })
    else { return nil }
    return SignedObjectEntry.decode(bytes, digest: digest)
  }

  func writeSignedEntry(_ entry: SignedObjectEntry, of digest: BlobDigest) throws(TroveError) {
    try writeSmall(RemoteNames.signedEntryPath(digest), entry.encoded())
  }

  var keepsManifests: Bool { true }

  func readManifest(_ digest: BlobDigest, size: Int64) throws(TroveError) -> ChunkManifest? {
    let name = spec.name
    let path = RemoteNames.manifestPath(digest)
    guard
      let bytes = try readSmall(
        path, limit: Self.manifestLimit(size: size),
        tooLong: {
          TroveError(
            .unsupportedFormat,
            "remote '\(name)': \($0) is longer than a manifest of \(size) bytes can be", value: $0)
        })
    else { return nil }
    return try ChunkManifest(
      decoding: bytes, expectedSize: size, source: "remote '\(name)': \(shown(path))")
  }

  func writeManifest(_ manifest: ChunkManifest, of digest: BlobDigest) throws(TroveError) {
    try writeSmall(RemoteNames.manifestPath(digest), manifest.encoded)
  }

  func download(_ digest: BlobDigest, range: Range<Int64>, into writer: any RemoteSink)
    throws(TroveError)
  {
    let name = RemoteNames.blobPath(digest)
    try RangeRequest.receive(range, into: writer, remote: spec.name, shown: shown(name)) {
      (headers, sink) throws(TroveError) in
      try request("GET", name, accepting: [206], headers: headers, sink: sink)
    }
  }
}
