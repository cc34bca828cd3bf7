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
/// blobs are pipelined (``uploadSequence(_:done:)``), in rounds: the
/// lengths of a round in one round trip, then the `SETEX` and publish of
/// each, all sent before the replies are read, with the next round sent
/// before this one's replies — each blob still published by its own
/// script, each with its own outcome. A download reads `STRLEN`, then 1 MiB ranges
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
  /// How ``publishScript`` runs on this connection: `EVALSHA` of the SHA-1
  /// the server gave on `SCRIPT LOAD`, or `EVAL` of its text when it would
  /// not load it. Nil until asked, on each new connection (a server
  /// restarted since has forgotten its scripts).
  private var publishCall: [String]?

  /// No sessions: many requests go pipelined on one connection.
  var hasSessions: Bool { false }

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
    publishCall = nil
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
    var given = false
    var outcome: Result<RemoteUpload, TroveError>?
    uploadSequence(
      { () -> RemoteUploadItem? in
        defer { given = true }
        return given ? nil : item
      },
      done: { _, result in outcome = result })
    guard let outcome else {
      throw TroveError(
        .unavailable, "remote '\(spec.name)': \(item.digest) was not uploaded",
        value: item.digest.description)
    }
    return try outcome.get()
  }

  /// The most blobs, and bytes of blobs, in one round of
  /// ``uploadSequence(_:done:)``.
  static let roundItems = 16
  static let roundBytes = 16 << 20

  /// Uploads the items pipelined, in rounds of blobs of one piece each
  /// (up to ``roundItems`` and ``roundBytes``): one round trip asks the
  /// remote for a round's lengths (`STRLEN` and `EXISTS` of each), then
  /// each blob it lacks goes up in `SETEX` of a new temp key and
  /// ``publishScript``, all sent before their replies are read. A round is
  /// always in flight: round k + 1's blobs (and round k + 2's lengths) go
  /// out before round k's replies are read, so the server works while the
  /// next round's files are read and hashed here; at most two rounds of
  /// blobs are unanswered. A blob of several pieces goes up alone, once the
  /// rounds before it are answered. The publish script runs by `EVALSHA`
  /// (loaded once a connection, pipelined with the first lengths asked); a
  /// publish the server refuses as `NOSCRIPT` (its scripts flushed) is
  /// sent again by `EVAL`. A server error about one object is its failure;
  /// when the connection breaks, the first item not finished carries why,
  /// the others handed out are not tried (nil), and no more are asked for.
  func uploadSequence(
    _ next: () -> RemoteUploadItem?, done: (Int, Result<RemoteUpload, TroveError>?) -> Void
  ) {
    var taken = 0
    var ended = false
    // An item taken from `next` that did not fit the round being gathered.
    var held: (place: Int, item: RemoteUploadItem)?
    // Rounds with items not finished, in order.
    var live: [UploadRound] = []
    // The replies due, in the order the server sends them.
    var waiting: [Awaited] = []
    var scriptAsked = false
    // Worked out from the URL: once, not per item.
    let sizeLimit = spec.sizeLimit
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.uploadPiece, alignment: 8)
    defer { buffer.deallocate() }

    func finish(_ round: UploadRound, _ k: Int, _ outcome: Result<RemoteUpload, TroveError>?) {
      guard round.open[k] else { return }
      round.open[k] = false
      round.unfinished -= 1
      done(round.places[k], outcome)
      if round.unfinished == 0 { live.removeAll { $0 === round } }
    }

    func published(_ n: Int64, _ temp: String) -> Result<RemoteUpload, TroveError> {
      n == 0 ? .success(.present) : n > 0 ? .success(.uploaded) : .failure(cutShort(temp))
    }

    // The next item to upload; one over the remote's size limit is
    // skipped at once.
    func take() -> (place: Int, item: RemoteUploadItem)? {
      if let item = held {
        held = nil
        return item
      }
      while !ended, let item = next() {
        let place = taken
        taken += 1
        if let limit = sizeLimit, item.size > limit {
          done(place, .success(.tooLarge))
          continue
        }
        return (place, item)
      }
      ended = true
      return nil
    }

    // The next round: blobs of one piece up to the limits, or one blob of
    // several pieces alone.
    func gather() -> UploadRound? {
      let round = UploadRound()
      while round.items.count < Self.roundItems, let (place, item) = take() {
        let large = item.size > Int64(Self.uploadPiece)
        if !round.items.isEmpty, large || round.bytes + Int(item.size) > Self.roundBytes {
          held = (place, item)
          break
        }
        round.add(place, item)
        if large {
          round.large = true
          break
        }
      }
      guard !round.items.isEmpty else { return nil }
      live.append(round)
      return round
    }

    func ask(_ round: UploadRound) throws(TroveError) {
      let c = try connected()
      if publishCall == nil, !scriptAsked {
        try c.send(["SCRIPT", "LOAD", Self.publishScript])
        waiting.append(.script)
        scriptAsked = true
      }
      for item in round.items {
        let key = RemoteNames.redisBlobKey(item.digest)
        try c.send(["STRLEN", key])
        try c.send(["EXISTS", key])
      }
      waiting.append(.lengths(round))
    }

    func sendBlobs(_ round: UploadRound) throws(TroveError) {
      let c = try connected()
      let publish = publishCall ?? ["EVAL", Self.publishScript]
      var sent = false
      for k in round.items.indices where round.wanted[k] {
        let item = round.items[k]
        let piece = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<Int(item.size)])
        do throws(TroveError) {
          try read(item, into: piece, at: 0)
          if item.verify, XXH3Hasher.digest(UnsafeRawBufferPointer(piece)) != item.digest {
            throw item.mismatch
          }
        } catch {
          finish(round, k, .failure(error))
          continue
        }
        let temp = RemoteNames.redisTemporaryKey()
        round.temps[k] = temp
        try c.send(
          ["SETEX", temp, String(RemoteNames.redisTemporaryLifetime)],
          payload: UnsafeRawBufferPointer(piece))
        try c.send(
          publish + ["2", temp, RemoteNames.redisBlobKey(item.digest), String(item.size)])
        sent = true
      }
      guard sent else { return }
      waiting.append(.published(round, verb: publish[0]))
      try c.flush()
    }

    func readNext() throws(TroveError) {
      let c = try connected()
      switch waiting.removeFirst() {
      case .script:
        let reply = try c.readReply()
        switch reply {
        case .bulk(let sha?) where sha.count == 40 && sha.allSatisfy(Self.isHexDigit):
          publishCall = ["EVALSHA", String(decoding: sha, as: UTF8.self)]
        case .error:
          // A server that keeps clients from loading scripts may still run them.
          publishCall = ["EVAL", Self.publishScript]
        default:
          throw unexpected(reply, to: "SCRIPT LOAD")
        }
      case .lengths(let round):
        for k in round.items.indices {
          let (length, exists) = (try c.readReply(), try c.readReply())
          switch (length, exists) {
          case (.integer(let n), .integer(let e)):
            // A value of another length under the blob's name is not the
            // blob (a cut-short upload of an older client): it is replaced.
            if (n == 0 && e == 0 ? nil : n) == round.items[k].size {
              finish(round, k, .success(.present))
            } else {
              round.wanted[k] = true
            }
          case (.error(let message), _), (_, .error(let message)):
            finish(round, k, .failure(serverError(message, "STRLEN")))
          default:
            throw unexpected(length, to: "STRLEN")
          }
        }
        round.answered = true
      case .published(let round, let verb):
        for k in round.items.indices {
          guard let temp = round.temps[k] else { continue }
          let (set, publish) = (try c.readReply(), try c.readReply())
          switch (set, publish) {
          case (.error(let message), _):
            finish(round, k, .failure(serverError(message, "SETEX")))
          case (_, .error(let message)) where message.hasPrefix("NOSCRIPT"):
            let item = round.items[k]
            try c.send([
              "EVAL", Self.publishScript, "2", temp, RemoteNames.redisBlobKey(item.digest),
              String(item.size),
            ])
            waiting.append(.republished(round, k))
          case (_, .error(let message)):
            finish(round, k, .failure(serverError(message, verb)))
          case (.simple, .integer(let n)):
            finish(round, k, published(n, temp))
          default:
            throw unexpected(publish, to: verb)
          }
        }
      case .republished(let round, let k):
        let reply = try c.readReply()
        switch reply {
        case .error(let message): finish(round, k, .failure(serverError(message, "EVAL")))
        case .integer(let n): finish(round, k, published(n, round.temps[k] ?? ""))
        default: throw unexpected(reply, to: "EVAL")
        }
      }
    }

    func uploadAlone(_ round: UploadRound) throws(TroveError) {
      let item = round.items[0]
      switch try sizes([item.digest])[0] {
      case .failure(let error):
        finish(round, 0, .failure(error))
      case .success(let length) where length == item.size:
        finish(round, 0, .success(.present))
      case .success:
        do throws(TroveError) {
          finish(round, 0, .success(try uploadInPieces(item)))
        } catch  where error.code == .ioError || error.code == .corruptObject {
          finish(round, 0, .failure(error))  // the local copy's failure, not the remote's
        }
      }
    }

    do throws(TroveError) {
      // Rounds whose lengths are asked, their blobs not sent yet.
      var asked: [UploadRound] = []
      while true {
        while asked.count < 2, asked.last?.large != true, let round = gather() {
          if !round.large { try ask(round) }
          asked.append(round)
        }
        guard !asked.isEmpty else { break }
        let round = asked.removeFirst()
        if round.large {
          while !waiting.isEmpty { try readNext() }
          try uploadAlone(round)
        } else {
          while !round.answered { try readNext() }
          try sendBlobs(round)
        }
      }
      while !waiting.isEmpty { try readNext() }
    } catch {
      // The connection broke (its replies may be out of step): the first
      // item not finished carries why.
      connection = nil
      var why: Result<RemoteUpload, TroveError>? = .failure(error)
      for round in live {
        for k in round.items.indices where round.open[k] {
          finish(round, k, why)
          why = nil
        }
      }
      if let (place, _) = held { done(place, why) }
    }
  }

  private static func isHexDigit(_ byte: UInt8) -> Bool {
    (48...57).contains(byte) || (97...102).contains(byte)
  }

  /// The replies ``uploadSequence(_:done:)`` waits for, in order.
  private enum Awaited {
    /// To `SCRIPT LOAD` of ``publishScript``.
    case script
    /// To a round's `STRLEN` and `EXISTS`.
    case lengths(UploadRound)
    /// To a round's `SETEX` and publish (by `verb`) of each blob sent.
    case published(UploadRound, verb: String)
    /// To the `EVAL` that published item `k` of a round again after `NOSCRIPT`.
    case republished(UploadRound, Int)
  }

  /// A round of ``uploadSequence(_:done:)``: its items (with their places
  /// in the sequence), and where each stands.
  private final class UploadRound {
    var places: [Int] = []
    var items: [RemoteUploadItem] = []
    var bytes = 0
    /// One blob of several pieces, uploaded alone.
    var large = false
    /// Its lengths are read.
    var answered = false
    /// The remote lacks it: it is to be sent.
    var wanted: [Bool] = []
    /// The temp key it went up under.
    var temps: [String?] = []
    /// No outcome handed out yet.
    var open: [Bool] = []
    var unfinished = 0

    func add(_ place: Int, _ item: RemoteUploadItem) {
      places.append(place)
      items.append(item)
      bytes += Int(item.size)
      wanted.append(false)
      temps.append(nil)
      open.append(true)
      unfinished += 1
    }
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
