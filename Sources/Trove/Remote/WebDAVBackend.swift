import CCurl

/// A remote on a WebDAV server (nginx's dav module, Apache mod_dav…):
/// blobs at `{base}/cas/<aa>/<hex>`, the layout record at
/// `{base}/trove-remote.json`.
///
/// An upload asks HEAD first and sends nothing when the blob is there.
/// Otherwise it PUTs to a temp name, `{base}/tmp/<random>`, and MOVEs
/// that onto the blob's name with `Overwrite: F`: no reader ever sees a
/// partial blob, on any WebDAV server (nginx's PUT is atomic, Apache
/// mod_dav's writes in place), and an existing blob is never replaced
/// (nginx ignores `If-None-Match: *` on PUT; a MOVE onto an existing name
/// fails with 412, which means another writer got there first). A writer
/// killed between PUT and MOVE leaves a file under `tmp/`, never under `cas/`.
final class WebDAVBackend: RemoteBackend {
  let spec: RemoteSpec
  private let base: String
  private let transfer: RemoteHTTPTransfer
  private let limits: RemoteLimits
  private let credential: String?

  init(_ spec: RemoteSpec, endpoint: RemoteSpec.Endpoint, limits: RemoteLimits) throws(TroveError) {
    self.spec = spec
    base = endpoint.base
    self.limits = limits
    credential = try spec.credential()
    transfer = try RemoteHTTPTransfer(
      limits: limits, credential: credential, usesNetrc: spec.lendsCredentials)
  }

  /// A session of `backend`: the same server and login, its transfers run
  /// by `multi`.
  private init(session backend: WebDAVBackend, multi: HTTPMulti) throws(TroveError) {
    spec = backend.spec
    base = backend.base
    limits = backend.limits
    credential = backend.credential
    transfer = try RemoteHTTPTransfer(
      limits: limits, credential: credential, usesNetrc: spec.lendsCredentials, multi: multi)
  }

  func session(through multi: HTTPMulti) throws(TroveError) -> (any RemoteBackend)? {
    try WebDAVBackend(session: self, multi: multi)
  }

  /// `{base}/cas/<aa>/<hex>`.
  func blobURL(_ digest: BlobDigest) -> String {
    base + "/" + RemoteNames.blobPath(digest)
  }

  private var layoutURL: String { base + "/" + RemoteNames.layoutFile }

  /// Runs a request; an exchange that did not complete, or a status not in
  /// `accepted`, is an error naming the remote, the URL and the cause.
  @discardableResult
  private func request(
    _ method: String, _ url: String, accepting accepted: Set<Int>, headers: [String] = [],
    upload: RemoteHTTPTransfer.Upload? = nil,
    sink: ((UnsafeRawBufferPointer) throws(TroveError) -> Void)? = nil
  ) throws(TroveError) -> RemoteHTTPTransfer.Outcome {
    let outcome = transfer.perform(method, url, headers: headers, upload: upload, sink: sink)
    if let error = RemoteHTTPTransfer.failure(
      outcome, remote: spec.name, method: method, shown: url)
    {
      throw error
    }
    guard accepted.contains(outcome.status) else {
      throw TroveError(
        outcome.status >= 500 ? .transferFailed : .unavailable,
        "remote '\(spec.name)': \(method) \(url) answered HTTP \(outcome.status)", value: url,
        remedy: [401, 403].contains(outcome.status) && !spec.lendsCredentials
          ? .lendCredentials(name: spec.name) : nil)
    }
    return outcome
  }

  func exists(_ digest: BlobDigest) throws(TroveError) -> Bool {
    try size(digest) != nil
  }

  func size(_ digest: BlobDigest) throws(TroveError) -> Int64? {
    let outcome = try request("HEAD", blobURL(digest), accepting: [200, 404])
    guard outcome.status == 200 else { return nil }
    guard let length = outcome.contentLength else {
      throw TroveError(
        .unavailable,
        "remote '\(spec.name)': HEAD \(blobURL(digest)) gave no Content-Length",
        value: blobURL(digest))
    }
    return length
  }

  func download(_ digest: BlobDigest, from offset: Int64, into writer: any RemoteSink)
    throws(TroveError) -> Int64?
  {
    let url = blobURL(digest)
    let headers = offset > 0 ? ["Range: bytes=\(offset)-"] : []
    var received: Int64 = 0
    let outcome = try request(
      "GET", url, accepting: offset > 0 ? [206, 404] : [200, 404], headers: headers
    ) { (bytes) throws(TroveError) in
      try writer.write(bytes)
      received += Int64(bytes.count)
    }
    guard outcome.status != 404 else { return nil }
    if let length = outcome.contentLength, length != received {
      throw TroveError(
        .transferFailed,
        "remote '\(spec.name)': GET \(url) ended after \(received) of \(length) bytes", value: url)
    }
    return offset + received
  }

  func upload(_ item: RemoteUploadItem) throws(TroveError) -> RemoteUpload {
    let (digest, size) = (item.digest, item.size)
    if let limit = spec.sizeLimit, size > limit { return .tooLarge }
    // A file of another length under the blob's name cannot be the blob
    // (a cut-short or damaged upload): it is replaced, never taken as
    // present. Any writer replacing it writes the blob's own bytes.
    let found = try self.size(digest)
    if found == size { return .present }
    let temp = base + "/" + RemoteNames.temporaryPath()
    var body = RemoteHTTPTransfer.Upload(file: item.file, size: size)
    body.hashes = item.verify
    let sent = try request("PUT", temp, accepting: [200, 201, 204], upload: body)
    do throws(TroveError) {
      if item.verify, sent.sentDigest != digest { throw item.mismatch }
      let moved = try request(
        "MOVE", temp, accepting: [201, 204, 412],
        headers: ["Destination: \(blobURL(digest))", "Overwrite: \(found == nil ? "F" : "T")"])
      guard moved.status == 412 else { return .uploaded }
    } catch {
      _ = try? request("DELETE", temp, accepting: [200, 204, 404])
      throw error
    }
    _ = try? request("DELETE", temp, accepting: [200, 204, 404])
    return .present
  }

  func delete(_ digest: BlobDigest) throws(TroveError) -> Bool {
    try request("DELETE", blobURL(digest), accepting: [200, 204, 404]).status != 404
  }

  func readLayout() throws(TroveError) -> RemoteLayout? {
    var bytes: [UInt8] = []
    let (name, layoutURL) = (spec.name, self.layoutURL)
    let outcome = try request("GET", layoutURL, accepting: [200, 404]) {
      (piece) throws(TroveError) in
      guard bytes.count + piece.count <= 64 * 1024 else {
        throw TroveError(
          .unsupportedFormat, "remote '\(name)': \(layoutURL) is larger than 64 KiB",
          value: layoutURL)
      }
      bytes += piece
    }
    guard outcome.status == 200 else { return nil }
    return try RemoteLayout.decode(bytes, source: "remote '\(spec.name)': \(layoutURL)")
  }

  func writeLayout(_ layout: RemoteLayout) throws(TroveError) {
    // Small and written once, by the first writer.
    try request(
      "PUT", layoutURL, accepting: [200, 201, 204],
      upload: RemoteHTTPTransfer.Upload(bytes: layout.encoded()))
  }

  func readKeyRecord(_ key: String) throws(TroveError) -> RemoteKeyRecord? {
    var bytes: [UInt8] = []
    let (name, url) = (spec.name, base + "/" + RemoteNames.keyRecordPath(key))
    let outcome = try request("GET", url, accepting: [200, 404]) { (piece) throws(TroveError) in
      // Read no further: an endless record would stall every reader.
      guard bytes.count + piece.count <= RemoteKeyRecord.sizeLimit else {
        throw RemoteKeyRecord.tooLong(remote: name, source: url)
      }
      bytes += piece
    }
    guard outcome.status == 200 else { return nil }
    return try RemoteKeyRecord.decode(bytes, key: key)?.validated(remote: spec.name)
  }

  func writeKeyRecord(_ record: RemoteKeyRecord) throws(TroveError) {
    // nginx writes a PUT's body to a temp file and renames it into place:
    // a reader sees the old record or the new one.
    try request(
      "PUT", base + "/" + RemoteNames.keyRecordPath(record.key), accepting: [200, 201, 204],
      upload: RemoteHTTPTransfer.Upload(bytes: record.encoded()))
  }

  func readSignedEntry(_ digest: BlobDigest) throws(TroveError) -> SignedObjectEntry? {
    var bytes: [UInt8] = []
    let (name, url) = (spec.name, base + "/" + RemoteNames.signedEntryPath(digest))
    let outcome = try request("GET", url, accepting: [200, 404]) { (piece) throws(TroveError) in
      // Read no further: an endless entry would stall every reader.
      guard bytes.count + piece.count <= SignedObjectEntry.sizeLimit else {
        throw SignedObjectEntry.tooLong(remote: name, source: url)
      }
      bytes += piece
    }
    guard outcome.status == 200 else { return nil }
    return SignedObjectEntry.decode(bytes, digest: digest)
  }

  func writeSignedEntry(_ entry: SignedObjectEntry, of digest: BlobDigest) throws(TroveError) {
    try request(
      "PUT", base + "/" + RemoteNames.signedEntryPath(digest), accepting: [200, 201, 204],
      upload: RemoteHTTPTransfer.Upload(bytes: entry.encoded()))
  }

  var keepsManifests: Bool { true }

  func readManifest(_ digest: BlobDigest, size: Int64) throws(TroveError) -> ChunkManifest? {
    var bytes: [UInt8] = []
    let limit = Self.manifestLimit(size: size)
    let (name, url) = (spec.name, base + "/" + RemoteNames.manifestPath(digest))
    let outcome = try request("GET", url, accepting: [200, 404]) { (piece) throws(TroveError) in
      guard bytes.count + piece.count <= limit else {
        throw TroveError(
          .unsupportedFormat,
          "remote '\(name)': \(url) is longer than a manifest of \(size) bytes can be", value: url)
      }
      bytes += piece
    }
    guard outcome.status == 200 else { return nil }
    return try ChunkManifest(
      decoding: bytes, expectedSize: size, source: "remote '\(name)': \(url)")
  }

  func writeManifest(_ manifest: ChunkManifest, of digest: BlobDigest) throws(TroveError) {
    try request(
      "PUT", base + "/" + RemoteNames.manifestPath(digest), accepting: [200, 201, 204],
      upload: RemoteHTTPTransfer.Upload(bytes: manifest.encoded))
  }

  func readBlockSums(_ digest: BlobDigest, blocks: [Range<Int64>]) throws(TroveError)
    -> [BlockSums.Entry]?
  {
    guard
      let bytes = try readLists(
        base + "/" + RemoteNames.manifestPath(digest) + ".sums?blocks=", blocks,
        bytesEach: Int64(BlockSums.entrySize))
    else { return nil }
    return BlockSums.decode(bytes, count: bytes.count / BlockSums.entrySize)
  }

  func readRanges(_ digest: BlobDigest, _ ranges: [Range<Int64>]) throws(TroveError) -> [UInt8]? {
    try readLists(
      base + "/" + RemoteNames.manifestPath(digest) + ".bytes?ranges=", ranges, bytesEach: 1)
  }

  /// The answers to `prefix` followed by each of a few range lists that
  /// together name `ranges`, concatenated: `bytesEach` bytes for each unit
  /// of a range, exactly, or it throws. Nil when the remote answers the
  /// first with anything but 200 (a WebDAV server, a Trove before them).
  private func readLists(_ prefix: String, _ ranges: [Range<Int64>], bytesEach: Int64)
    throws(TroveError) -> [UInt8]?
  {
    var out: [UInt8] = []
    var start = 0
    while start < ranges.count {
      // Lists short enough for any server's request line, and within the
      // peer's bounds on one answer.
      var end = start
      var length = 0
      var units: Int64 = 0
      let unitLimit = bytesEach == 1 ? BlockSums.maximumRangeBytes : BlockSums.maximumBlocks
      while end < ranges.count, end - start < BlockSums.maximumRanges, length < 6000,
        units + Int64(ranges[end].count) <= unitLimit || end == start
      {
        length += RangeList.encode([ranges[end]]).utf8.count + 1
        units += Int64(ranges[end].count)
        end += 1
      }
      let url = prefix + RangeList.encode(Array(ranges[start..<end]))
      let expected = units * bytesEach
      var bytes: [UInt8] = []
      bytes.reserveCapacity(Int(min(expected, 16 << 20)))
      let name = spec.name
      let outcome = try request("GET", url, accepting: [200, 400, 404, 405]) {
        (piece) throws(TroveError) in
        guard Int64(bytes.count + piece.count) <= expected else {
          throw TroveError(
            .unsupportedFormat,
            "remote '\(name)': \(url) sent more than the \(expected) bytes asked",
            value: url)
        }
        bytes += piece
      }
      guard outcome.status == 200 else {
        if start == 0 { return nil }
        throw TroveError(
          .transferFailed, "remote '\(name)': \(url) answered \(outcome.status)", value: url)
      }
      guard Int64(bytes.count) == expected else {
        throw TroveError(
          .unsupportedFormat,
          "remote '\(name)': \(url) sent \(bytes.count) bytes, not the \(expected) asked",
          value: url)
      }
      out += bytes
      start = end
    }
    return out
  }

  func download(_ digest: BlobDigest, range: Range<Int64>, into writer: any RemoteSink)
    throws(TroveError)
  {
    let url = blobURL(digest)
    // 206 only: a server that ignores the Range and sends the whole blob
    // is refused before its first byte is taken.
    try RangeRequest.receive(range, into: writer, remote: spec.name, shown: url) {
      (headers, sink) throws(TroveError) in
      try request("GET", url, accepting: [206], headers: headers, sink: sink)
    }
  }
}
