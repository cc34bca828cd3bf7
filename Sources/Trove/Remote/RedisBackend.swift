/// A remote in a Redis database (`redis://host[:port][/db]`): blobs under
/// `trove:cas:<hex>`, the layout record under `trove:remote`.
///
/// Values live in the server's memory, so nothing is ever held whole
/// here: an upload sends the blob in 4 MiB pieces to a temp key
/// `trove:tmp:<random>` (the first piece in `SETEX`, with an expiry, each
/// next one by ``appendScript``, which appends only while the key still
/// exists and holds exactly the bytes sent before), then ``publishScript``
/// renames it into place only if it holds the whole blob and the blob's
/// key does not already hold a value of that length, and drops the expiry
/// — a reader never sees half a blob, a temp key that expired or was
/// evicted mid-upload is never published, an intact blob is never
/// replaced (one of another length, which cannot be it, is), and a writer
/// killed half-way leaves a temp key that expires. Uploads of many small
/// blobs are pipelined (``uploadMany(_:)``): the lengths of all in one
/// round trip, then the `SETEX` and publish of each, all sent before the
/// replies are read — each blob still published by its own script, each
/// with its own outcome. A download reads `STRLEN`, then 1 MiB ranges
/// (`GETRANGE`) straight into the store's writer. Blobs longer than the
/// remote's `max-object-size` are skipped.
///
/// The client is RESP written small over a socket, not hiredis: the few
/// commands Trove sends need ~200 lines, a streamed bulk reply (which
/// hiredis's reader does not give: it builds the whole reply in memory),
/// the same connect timeout and stall limit as the HTTP remotes, and no
/// new build dependency.
final class RedisBackend: RemoteBackend {
  let spec: RemoteSpec
  private let endpoint: RemoteSpec.Endpoint
  private let limits: RemoteLimits
  private let credential: String?
  private var connection: RESPConnection?

  static let uploadPiece = 4 << 20
  static let downloadPiece: Int64 = 1 << 20

  /// Appends ARGV[2] to the temp key KEYS[1] if it exists and holds
  /// ARGV[1] bytes (the offset of this piece): its new length, or -1 when
  /// it is gone (expired, evicted) or holds another length. A plain
  /// `APPEND` would create a missing key afresh, holding only the tail.
  static let appendScript = """
    if redis.call('exists', KEYS[1]) == 0 then return -1 end
    if redis.call('strlen', KEYS[1]) ~= tonumber(ARGV[1]) then return -1 end
    return redis.call('append', KEYS[1], ARGV[2])
    """

  /// Publishes the temp key KEYS[1] as the blob KEYS[2] of ARGV[1] bytes:
  /// -1 (and KEYS[1] dropped) when KEYS[1] is gone or holds another
  /// length; 0 (KEYS[1] dropped) when KEYS[2] holds that many bytes
  /// already; else KEYS[1] is renamed onto KEYS[2] and made permanent: 1,
  /// or 2 when that replaced a value of another length (a cut-short blob
  /// of an older client, which cannot be the blob).
  static let publishScript = """
    local size = tonumber(ARGV[1])
    if redis.call('exists', KEYS[1]) == 0 or redis.call('strlen', KEYS[1]) ~= size then
      redis.call('del', KEYS[1])
      return -1
    end
    local replaced = 0
    if redis.call('exists', KEYS[2]) == 1 then
      if redis.call('strlen', KEYS[2]) == size then
        redis.call('del', KEYS[1])
        return 0
      end
      replaced = 1
    end
    redis.call('rename', KEYS[1], KEYS[2])
    redis.call('persist', KEYS[2])
    return 1 + replaced
    """

  init(_ spec: RemoteSpec, endpoint: RemoteSpec.Endpoint, limits: RemoteLimits) throws(TroveError) {
    self.spec = spec
    self.endpoint = endpoint
    self.limits = limits
    credential = try spec.credential()
  }

  /// The connection, made (and authenticated, and its database selected)
  /// on first use.
  private func connected() throws(TroveError) -> RESPConnection {
    if let connection { return connection }
    let made = try RESPConnection(
      host: endpoint.host, port: endpoint.port, limits: limits,
      label: "remote '\(spec.name)' (\(spec.url))")
    if let credential {
      if let user = endpoint.user {
        try made.call(["AUTH", user, credential])
      } else if let colon = credential.firstIndex(of: ":") {
        try made.call([
          "AUTH", String(credential[..<colon]),
          String(credential[credential.index(after: colon)...]),
        ])
      } else {
        try made.call(["AUTH", credential])
      }
    }
    if endpoint.database != 0 { try made.call(["SELECT", String(endpoint.database)]) }
    connection = made
    return made
  }

  /// Runs `body` on the connection; a failure drops it (its replies may be
  /// out of step), so the next call connects again.
  @discardableResult
  private func using<T>(_ body: (RESPConnection) throws(TroveError) -> T) throws(TroveError) -> T {
    let connection = try connected()
    do throws(TroveError) {
      return try body(connection)
    } catch {
      self.connection = nil
      throw error
    }
  }

  private func unexpected(_ reply: RESPConnection.Reply, to command: String) -> TroveError {
    TroveError(
      .unavailable,
      "remote '\(spec.name)' (\(spec.url)): malformed reply to \(command): \(ServerText.excerpt("\(reply)"))"
    )
  }

  /// The error for an upload whose temp key vanished or changed under it.
  private func cutShort(_ temp: String) -> TroveError {
    TroveError(
      .transferFailed,
      "remote '\(spec.name)': the upload's temp key \(temp) expired, was evicted or changed before the blob was whole; nothing published",
      value: temp)
  }

  private func integer(_ arguments: [String]) throws(TroveError) -> Int64 {
    try using { (c) throws(TroveError) in
      let reply = try c.call(arguments)
      guard case .integer(let n) = reply else { throw unexpected(reply, to: arguments[0]) }
      return n
    }
  }

  func exists(_ digest: BlobDigest) throws(TroveError) -> Bool {
    try integer(["EXISTS", RemoteNames.redisBlobKey(digest)]) == 1
  }

  func size(_ digest: BlobDigest) throws(TroveError) -> Int64? {
    try sizes([digest])[0].get()
  }

  /// The lengths of `digests`' blobs (nil where the remote holds none),
  /// asked in one round trip: `STRLEN` and `EXISTS` of each (`STRLEN` of
  /// a missing key is 0, as is an empty blob's). A server error about one
  /// key (a value of another type) is that digest's failure; a broken
  /// connection throws.
  func sizes(_ digests: [BlobDigest]) throws(TroveError) -> [Result<Int64?, TroveError>] {
    try using { (c) throws(TroveError) in
      for digest in digests {
        let key = RemoteNames.redisBlobKey(digest)
        try c.send(["STRLEN", key])
        try c.send(["EXISTS", key])
      }
      var sizes: [Result<Int64?, TroveError>] = []
      for _ in digests {
        let (length, exists) = (try c.readReply(), try c.readReply())
        switch (length, exists) {
        case (.integer(let n), .integer(let e)):
          sizes.append(.success(n == 0 && e == 0 ? nil : n))
        case (.error(let message), _), (_, .error(let message)):
          sizes.append(.failure(serverError(message, "STRLEN")))
        default:
          throw unexpected(length, to: "STRLEN")
        }
      }
      return sizes
    }
  }

  /// The server's error reply to `command`, for one object.
  private func serverError(_ message: String, _ command: String) -> TroveError {
    TroveError(
      .unavailable,
      "remote '\(spec.name)' (\(spec.url)): \(command) failed: \(ServerText.excerpt(message))")
  }

  func download(_ digest: BlobDigest, from offset: Int64, into writer: any RemoteSink)
    throws(TroveError) -> Int64?
  {
    guard let length = try size(digest) else { return nil }
    let key = RemoteNames.redisBlobKey(digest)
    var position = offset
    while position < length {
      let last = min(length, position + Self.downloadPiece) - 1
      let got = try using { (c) throws(TroveError) -> Int? in
        try c.send(["GETRANGE", key, String(position), String(last)])
        return try c.readBulk { (bytes) throws(TroveError) in try writer.write(bytes) }
      }
      guard let got, Int64(got) == last - position + 1 else {
        throw TroveError(
          .transferFailed,
          "remote '\(spec.name)': \(key) changed while it was read (got \(got ?? 0) bytes at offset \(position), expected \(last - position + 1))",
          value: key)
      }
      position = last + 1
    }
    return length
  }

  func upload(_ item: RemoteUploadItem) throws(TroveError) -> RemoteUpload {
    guard let outcome = uploadMany([item])[0] else {
      throw TroveError(
        .unavailable, "remote '\(spec.name)': \(item.digest) was not uploaded",
        value: item.digest.description)
    }
    return try outcome.get()
  }

  /// Uploads the items pipelined: one round trip asks the remote for all
  /// of them, then every blob of one piece goes up in `SET` of its temp
  /// key and ``publishScript``, sent together with the others' and the
  /// replies read after (bounded by ``batchBytes`` a round). A blob of
  /// several pieces goes up alone, piece by piece. Each item has its own
  /// outcome: a server error about one object is its failure, not the
  /// others'; when the connection breaks, the items not finished are not
  /// tried (nil).
  func uploadMany(_ items: [RemoteUploadItem]) -> [Result<RemoteUpload, TroveError>?] {
    var results = [Result<RemoteUpload, TroveError>?](repeating: nil, count: items.count)
    var asked: [Int] = []
    for (i, item) in items.enumerated() {
      if let limit = spec.sizeLimit, item.size > limit {
        results[i] = .success(.tooLarge)
      } else {
        asked.append(i)
      }
    }
    guard !asked.isEmpty else { return results }
    let found: [Result<Int64?, TroveError>]
    do throws(TroveError) {
      found = try sizes(asked.map { items[$0].digest })
    } catch {
      results[asked[0]] = .failure(error)
      return results
    }
    // A value of another length under the blob's name is not the blob (a
    // cut-short upload of an older client): it is replaced below.
    var small: [Int] = []
    var large: [Int] = []
    for (i, size) in zip(asked, found) {
      switch size {
      case .failure(let error): results[i] = .failure(error)
      case .success(let length) where length == items[i].size: results[i] = .success(.present)
      case .success where items[i].size <= Self.uploadPiece: small.append(i)
      case .success: large.append(i)
      }
    }
    do throws(TroveError) {
      var start = 0
      while start < small.count {
        var end = start
        var bytes = 0
        while end < small.count,
          end == start || bytes + Int(items[small[end]].size) <= Self.batchBytes
        {
          bytes += Int(items[small[end]].size)
          end += 1
        }
        let round = Array(small[start..<end])
        for (i, outcome) in zip(round, try uploadWhole(round.map { items[$0] })) {
          results[i] = outcome
        }
        start = end
      }
      for i in large {
        do throws(TroveError) {
          results[i] = .success(try uploadInPieces(items[i]))
        } catch  where error.code == .ioError || error.code == .corruptObject {
          results[i] = .failure(error)  // the local copy's failure, not the remote's
        }
      }
    } catch {
      // The connection broke: the first item not finished carries why.
      if let i = asked.first(where: { results[$0] == nil }) { results[i] = .failure(error) }
    }
    return results
  }

  /// The most bytes of blobs sent in one pipelined round.
  static let batchBytes = 16 << 20

  /// Uploads blobs of one piece each, pipelined: `SET` of a new temp key
  /// with the blob and an expiry, then ``publishScript``, for every item,
  /// before any reply is read. Each item's outcome; a local read failure
  /// is its item's alone. Throws when the connection fails.
  private func uploadWhole(_ items: [RemoteUploadItem]) throws(TroveError)
    -> [Result<RemoteUpload, TroveError>]
  {
    let total = items.reduce(0) { $0 + Int($1.size) }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, total), alignment: 8)
    defer { buffer.deallocate() }
    var outcomes = [Result<RemoteUpload, TroveError>](
      repeating: .success(.present), count: items.count)
    var sent: [Int: String] = [:]
    try using { (c) throws(TroveError) in
      var offset = 0
      for (k, item) in items.enumerated() {
        let piece = UnsafeMutableRawBufferPointer(
          rebasing: buffer[offset..<offset + Int(item.size)])
        offset += Int(item.size)
        do throws(TroveError) {
          try read(item, into: piece, at: 0)
          if item.verify, XXH3Hasher.digest(UnsafeRawBufferPointer(piece)) != item.digest {
            throw item.mismatch
          }
        } catch {
          outcomes[k] = .failure(error)
          continue
        }
        let temp = RemoteNames.redisTemporaryKey()
        sent[k] = temp
        try c.send(
          ["SETEX", temp, String(RemoteNames.redisTemporaryLifetime)],
          payload: UnsafeRawBufferPointer(piece))
        try c.send([
          "EVAL", Self.publishScript, "2", temp, RemoteNames.redisBlobKey(item.digest),
          String(item.size),
        ])
      }
      for k in items.indices {
        guard let temp = sent[k] else { continue }
        let (set, published) = (try c.readReply(), try c.readReply())
        switch (set, published) {
        case (.error(let message), _):
          outcomes[k] = .failure(serverError(message, "SETEX"))
        case (_, .error(let message)):
          outcomes[k] = .failure(serverError(message, "EVAL"))
        case (.simple, .integer(let n)):
          outcomes[k] =
            n == 0 ? .success(.present) : n > 0 ? .success(.uploaded) : .failure(cutShort(temp))
        default:
          throw unexpected(published, to: "EVAL")
        }
      }
    }
    return outcomes
  }

  /// Reads `piece.count` bytes of `item`'s file at `offset`.
  private func read(
    _ item: RemoteUploadItem, into piece: UnsafeMutableRawBufferPointer, at offset: Int64
  ) throws(TroveError) {
    let n: Int
    do throws(SystemCallError) {
      n = try item.file.read(into: piece, at: offset)
    } catch {
      throw TroveError(
        .ioError, "cannot read the blob being uploaded to remote '\(spec.name)'", cause: error)
    }
    guard n == piece.count else {
      throw TroveError(.ioError, "the blob being uploaded to remote '\(spec.name)' shrank")
    }
  }

  /// Uploads a blob longer than one piece, the remote found not to hold
  /// it: its first piece in `SETEX` of a new temp key, each next one by
  /// ``appendScript``, then ``publishScript`` — when it is to be verified,
  /// only if the pieces sent hash to its digest (else the temp key goes).
  private func uploadInPieces(_ item: RemoteUploadItem) throws(TroveError) -> RemoteUpload {
    let temp = RemoteNames.redisTemporaryKey()
    let piece = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.uploadPiece, alignment: 8)
    defer { piece.deallocate() }
    var offset: Int64 = 0
    var hasher = XXH3Hasher()
    while offset < item.size {
      let wanted = Int(min(Int64(piece.count), item.size - offset))
      let bytes = UnsafeMutableRawBufferPointer(rebasing: piece[0..<wanted])
      try read(item, into: bytes, at: offset)
      if item.verify { hasher.update(UnsafeRawBufferPointer(bytes)) }
      let reply = try using { (c) throws(TroveError) -> RESPConnection.Reply in
        offset == 0
          ? try c.call(
            ["SETEX", temp, String(RemoteNames.redisTemporaryLifetime)],
            payload: UnsafeRawBufferPointer(bytes))
          : try c.call(
            ["EVAL", Self.appendScript, "1", temp, String(offset)],
            payload: UnsafeRawBufferPointer(bytes))
      }
      if offset > 0 {
        guard case .integer(let now) = reply else { throw unexpected(reply, to: "EVAL") }
        guard now == offset + Int64(wanted) else { throw cutShort(temp) }
      }
      offset += Int64(wanted)
    }
    if item.verify, hasher.finalize() != item.digest {
      _ = try? integer(["DEL", temp])
      throw item.mismatch
    }
    let published = try integer([
      "EVAL", Self.publishScript, "2", temp, RemoteNames.redisBlobKey(item.digest),
      String(item.size),
    ])
    switch published {
    case 1, 2: return .uploaded
    case 0: return .present
    default: throw cutShort(temp)
    }
  }
  func delete(_ digest: BlobDigest) throws(TroveError) -> Bool {
    try integer(["DEL", RemoteNames.redisBlobKey(digest)]) == 1
  }

  func readLayout() throws(TroveError) -> RemoteLayout? {
    let reply = try using { (c) throws(TroveError) in
      try c.call(["GET", RemoteNames.redisLayoutKey])
    }
    guard case .bulk(let bytes) = reply else { throw unexpected(reply, to: "GET") }
    guard let bytes else { return nil }
    return try RemoteLayout.decode(
      bytes, source: "remote '\(spec.name)': key \(RemoteNames.redisLayoutKey)")
  }

  func readKeyRecord(_ key: String) throws(TroveError) -> RemoteKeyRecord? {
    let name = RemoteNames.redisKeyRecordKey(key)
    let reply = try using { (c) throws(TroveError) in
      try c.call(["GETRANGE", name, "0", String(RemoteKeyRecord.sizeLimit)])
    }
    guard case .bulk(let bytes) = reply else { throw unexpected(reply, to: "GETRANGE") }
    guard let bytes, !bytes.isEmpty else { return nil }
    // GETRANGE sent one byte past the limit at most: enough to know.
    guard bytes.count <= RemoteKeyRecord.sizeLimit else {
      throw RemoteKeyRecord.tooLong(remote: spec.name, source: "key \(name)")
    }
    return try RemoteKeyRecord.decode(bytes, key: key)?.validated(remote: spec.name)
  }

  func writeKeyRecord(_ record: RemoteKeyRecord) throws(TroveError) {
    try using { (c) throws(TroveError) in
      _ = try c.call([
        "SET", RemoteNames.redisKeyRecordKey(record.key),
        String(decoding: record.encoded(), as: UTF8.self),
      ])
    }
  }

  func writeLayout(_ layout: RemoteLayout) throws(TroveError) {
    try using { (c) throws(TroveError) in
      _ = try c.call([
        "SET", RemoteNames.redisLayoutKey, String(decoding: layout.encoded(), as: UTF8.self), "NX",
      ])
    }
  }

  func readSignedEntry(_ digest: BlobDigest) throws(TroveError) -> SignedObjectEntry? {
    let reply = try using { (c) throws(TroveError) in
      try c.call([
        "GETRANGE", RemoteNames.redisSignedEntryKey(digest), "0",
        String(SignedObjectEntry.sizeLimit),
      ])
    }
    guard case .bulk(let bytes) = reply else { throw unexpected(reply, to: "GETRANGE") }
    guard let bytes, !bytes.isEmpty else { return nil }
    // GETRANGE sent one byte past the limit at most: enough to know.
    guard bytes.count <= SignedObjectEntry.sizeLimit else {
      throw SignedObjectEntry.tooLong(
        remote: spec.name, source: "key \(RemoteNames.redisSignedEntryKey(digest))")
    }
    return SignedObjectEntry.decode(bytes, digest: digest)
  }

  func writeSignedEntry(_ entry: SignedObjectEntry, of digest: BlobDigest) throws(TroveError) {
    try using { (c) throws(TroveError) in
      _ = try c.call([
        "SET", RemoteNames.redisSignedEntryKey(digest),
        String(decoding: entry.encoded(), as: UTF8.self),
      ])
    }
  }
}
