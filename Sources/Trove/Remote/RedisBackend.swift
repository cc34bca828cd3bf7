/// A remote in a Redis database (`redis://host[:port][/db]`): blobs under
/// `trove:cas:<hex>`, the layout record under `trove:remote`.
///
/// Values live in the server's memory, so nothing is ever held whole
/// here: an upload sends the blob in 4 MiB pieces to a temp key
/// `trove:tmp:<random>` (`SET` with an expiry, then ``appendScript``,
/// which appends only while the key still exists and holds exactly the
/// bytes sent before), then ``publishScript`` renames it into place only
/// if it holds the whole blob and the blob's key does not already hold a
/// value of that length, and drops the expiry — a reader never sees half a
/// blob, a temp key that expired or was evicted mid-upload is never
/// published, an intact blob is never replaced (one of another length,
/// which cannot be it, is), and a writer killed half-way leaves a temp key
/// that expires. A download reads `STRLEN`, then 1 MiB ranges
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
    let key = RemoteNames.redisBlobKey(digest)
    // STRLEN of a missing key is 0, as is an empty blob's.
    let length = try integer(["STRLEN", key])
    if length == 0, try !exists(digest) { return nil }
    return length
  }

  func download(_ digest: BlobDigest, from offset: Int64, into writer: BlobWriter)
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

  func upload(_ digest: BlobDigest, from file: FileDescriptor, size: Int64)
    throws(TroveError) -> RemoteUpload
  {
    if let limit = spec.sizeLimit, size > limit { return .tooLarge }
    // A value of another length under the blob's name is not the blob
    // (a cut-short upload of an older client): it is replaced below.
    if try self.size(digest) == size { return .present }
    let temp = RemoteNames.redisTemporaryKey()
    let piece = UnsafeMutableRawBufferPointer.allocate(
      byteCount: max(1, min(Self.uploadPiece, Int(size))), alignment: 8)
    defer { piece.deallocate() }
    try using { (c) throws(TroveError) in
      try c.call(["SET", temp, "", "EX", String(RemoteNames.redisTemporaryLifetime)])
    }
    var offset: Int64 = 0
    while offset < size {
      let wanted = Int(min(Int64(piece.count), size - offset))
      let n: Int
      do throws(SystemCallError) {
        n = try file.read(
          into: UnsafeMutableRawBufferPointer(rebasing: piece[0..<wanted]), at: offset)
      } catch {
        throw TroveError(
          .ioError, "cannot read the blob being uploaded to remote '\(spec.name)'", cause: error)
      }
      guard n == wanted else {
        throw TroveError(.ioError, "the blob being uploaded to remote '\(spec.name)' shrank")
      }
      let length = try using { (c) throws(TroveError) -> RESPConnection.Reply in
        try c.call(
          ["EVAL", Self.appendScript, "1", temp, String(offset)],
          payload: UnsafeRawBufferPointer(rebasing: piece[0..<n]))
      }
      guard case .integer(let now) = length else { throw unexpected(length, to: "EVAL") }
      guard now == offset + Int64(n) else { throw cutShort(temp) }
      offset += Int64(n)
    }
    let published = try integer([
      "EVAL", Self.publishScript, "2", temp, RemoteNames.redisBlobKey(digest), String(size),
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
    guard let bytes, !bytes.isEmpty, bytes.count <= RemoteKeyRecord.sizeLimit else { return nil }
    return RemoteKeyRecord.decode(bytes, key: key)
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
}
