/// A Redis connection speaking RESP2, written small over a ``Socket``:
/// commands are arrays of bulk strings, replies are read from a buffer; a
/// bulk reply can be streamed piece by piece, so a large value never sits
/// whole in memory. Errors name `label` (the remote and its URL).
///
/// The server is not trusted: a reply read whole holds at most
/// `replyLimit` bytes (its bulk strings, and 16 bytes for each array
/// element) and nests at most ``depthLimit`` arrays deep; a streamed bulk
/// string is at most ``bulkLimit`` bytes; every length is checked before
/// any arithmetic on it, and a bulk string must end in CRLF. Anything else
/// is a "malformed reply" error (`.unavailable`), never a crash. Reads
/// follow the stall rule of ``RemoteLimits``: a reply that arrives at less
/// than `stallSpeed` bytes a second over `stallTimeout` seconds fails.
final class RESPConnection {
  private let socket: Socket
  private let label: String
  private let limits: RemoteLimits
  private let replyLimit: Int
  private var buffer: UnsafeMutableRawBufferPointer
  private var start = 0
  private var end = 0
  /// The stall rule's window: when it began, and the bytes received since.
  private var windowStart = ContinuousClock.now
  private var windowBytes = 0
  /// Commands queued by ``send(_:payload:)``, not sent yet.
  private var outgoing: [UInt8] = []

  /// The longest payload copied into the queue of commands rather than
  /// sent by itself.
  static let inlinePayload = 256 << 10

  /// The longest bulk string streamed by ``readBulk(_:)`` (Redis's own
  /// largest value).
  static let bulkLimit = 512 << 20
  /// The default for the most bytes of a reply read whole: Trove's
  /// replies are integers, status lines and a layout record.
  static let standardReplyLimit = 1 << 20
  /// The deepest nesting of arrays accepted (Trove asks for none deeper
  /// than an array of bulk strings).
  static let depthLimit = 4

  /// A reply.
  enum Reply: Equatable {
    case simple(String)
    case error(String)
    case integer(Int64)
    case bulk([UInt8]?)
    case array([Reply]?)
  }

  /// Connects to `host`:`port` within `limits`; `replyLimit` bounds a
  /// reply read whole (see the type's summary).
  init(
    host: String, port: Int, limits: RemoteLimits, label: String,
    replyLimit: Int = RESPConnection.standardReplyLimit
  ) throws(TroveError) {
    self.label = label
    self.limits = limits
    self.replyLimit = replyLimit
    do throws(SystemCallError) {
      socket = try Socket.connect(
        host: host, port: port, resolveTimeout: limits.resolveTimeout,
        timeout: limits.connectTimeout, stall: limits.stallTimeout)
    } catch  where error.call == "getaddrinfo" {
      throw TroveError(
        .unavailable,
        error.errno.rawValue == 110  // ETIMEDOUT
          ? "\(label): cannot resolve host '\(host)': no answer within \(limits.resolveTimeout) s"
          : "\(label): cannot resolve host '\(host)'", value: host)
    } catch {
      throw TroveError(.unavailable, "\(label): cannot connect to \(host):\(port)", cause: error)
    }
    buffer = .allocate(byteCount: 64 * 1024, alignment: 8)
  }

  deinit {
    socket.close()
    buffer.deallocate()
  }

  private func failed(_ error: SystemCallError) -> TroveError {
    TroveError(.transferFailed, "\(label): the connection failed", cause: error)
  }

  /// A reply that breaks the protocol or Trove's limits; `why` quotes
  /// the server only through ``ServerText``.
  private func protocolError(_ why: String) -> TroveError {
    TroveError(.unavailable, "\(label): malformed reply (\(why))")
  }

  /// The first characters of a line the server sent, escaped, for a message.
  private func quoted(_ text: some StringProtocol) -> String {
    "'" + ServerText.excerpt(text.prefix(40)) + "'"
  }

  /// The server's error reply, escaped and cut, for a message.
  private func serverError(_ message: some StringProtocol, after command: String)
    -> TroveError
  {
    TroveError(
      .unavailable,
      "\(label): \(command.isEmpty ? "" : command + " failed: ")\(ServerText.excerpt(message))")
  }

  /// Queues one command: `arguments`, then `payload` as a last argument
  /// when given. Commands go out together, in as few `send` calls as they
  /// fit, when a reply is read (or at ``flush()``): several sent before
  /// their replies are read make one round trip (pipelining). A payload of
  /// more than ``inlinePayload`` bytes is sent from where it is, not copied.
  func send(_ arguments: [String], payload: UnsafeRawBufferPointer? = nil) throws(TroveError) {
    var head = "*\(arguments.count + (payload == nil ? 0 : 1))\r\n"
    for argument in arguments { head += "$\(argument.utf8.count)\r\n\(argument)\r\n" }
    if let payload { head += "$\(payload.count)\r\n" }
    outgoing += head.utf8
    guard let payload else { return }
    if payload.count <= Self.inlinePayload {
      outgoing += payload
    } else {
      try flush()
      do throws(SystemCallError) { try socket.sendAll(payload) } catch { throw failed(error) }
    }
    outgoing += [13, 10]
    if outgoing.count >= Self.inlinePayload { try flush() }
  }

  /// Sends the queued commands.
  func flush() throws(TroveError) {
    guard !outgoing.isEmpty else { return }
    defer { outgoing.removeAll(keepingCapacity: true) }
    do throws(SystemCallError) { try socket.sendAll(outgoing) } catch { throw failed(error) }
  }

  /// Sends a command and reads its reply; an error reply is thrown.
  @discardableResult
  func call(_ arguments: [String], payload: UnsafeRawBufferPointer? = nil) throws(TroveError)
    -> Reply
  {
    try send(arguments, payload: payload)
    let reply = try readReply()
    if case .error(let message) = reply {
      throw serverError(message, after: ServerText.excerpt(arguments.first ?? ""))
    }
    return reply
  }

  /// Reads more bytes into the buffer (moving what is left to its start).
  private func fill() throws(TroveError) {
    if start > 0 {
      if end > start {
        (buffer.baseAddress! + 0).copyMemory(
          from: buffer.baseAddress! + start, byteCount: end - start)
      }
      end -= start
      start = 0
    }
    guard end < buffer.count else { throw protocolError("a line longer than 64 KiB") }
    let n: Int
    do throws(SystemCallError) {
      n = try socket.receive(into: UnsafeMutableRawBufferPointer(rebasing: buffer[end...]))
    } catch {
      throw failed(error)
    }
    guard n > 0 else { throw failed(SystemCallError("recv", Errno(rawValue: 104))) }  // ECONNRESET
    end += n
    try account(n)
  }

  /// Starts the stall rule's window: called as a reply begins to be read.
  private func startWindow() {
    windowStart = .now
    windowBytes = 0
  }

  /// The stall rule: `received` more bytes came; once a window of
  /// `stallTimeout` seconds is over, fewer than `stallSpeed` bytes a second
  /// in it is a stall, else a new window starts. (A server silent for the
  /// whole window fails in `recv`, by `SO_RCVTIMEO`.)
  private func account(_ received: Int) throws(TroveError) {
    windowBytes += received
    let elapsed = ContinuousClock.now - windowStart
    guard elapsed >= .seconds(limits.stallTimeout) else { return }
    let seconds = Double(elapsed.components.seconds)
    guard Double(windowBytes) >= Double(limits.stallSpeed) * seconds else {
      throw TroveError(
        .transferFailed,
        "\(label): the reply stalled (\(windowBytes) bytes in \(Int(seconds)) s, under \(limits.stallSpeed) bytes/s)"
      )
    }
    startWindow()
  }

  /// One CRLF-terminated line, without the CRLF.
  private func line() throws(TroveError) -> String {
    while true {
      var i = start
      while i + 1 < end {
        if buffer[i] == 13 && buffer[i + 1] == 10 {
          let text = String(
            decoding: UnsafeRawBufferPointer(rebasing: buffer[start..<i]), as: UTF8.self)
          start = i + 2
          return text
        }
        i += 1
      }
      try fill()
    }
  }

  /// Reads exactly `count` bytes, giving them to `body` piece by piece.
  private func consume(_ count: Int, _ body: (UnsafeRawBufferPointer) throws(TroveError) -> Void)
    throws(TroveError)
  {
    var left = count
    while left > 0 {
      if start == end { try fill() }
      let n = min(left, end - start)
      try body(UnsafeRawBufferPointer(rebasing: buffer[start..<start + n]))
      start += n
      left -= n
    }
  }

  /// A length or count the server sent: a decimal from -1 to `limit`.
  private func length(_ text: Substring, of what: String, limit: Int) throws(TroveError) -> Int {
    guard let n = Int(text), n >= -1 else {
      throw protocolError("\(what) \(quoted(text)) is not a number")
    }
    guard n <= limit else {
      throw protocolError("\(what) \(n) is over the limit of \(limit)")
    }
    return n
  }

  /// Reads the CRLF that ends a bulk string.
  private func bulkEnd() throws(TroveError) {
    var ending: [UInt8] = []
    try consume(2) { (piece) throws(TroveError) in ending += piece }
    guard ending == [13, 10] else { throw protocolError("a bulk string not ended by CRLF") }
  }

  /// Reads one reply whole, within the reply limit and the depth limit.
  func readReply() throws(TroveError) -> Reply {
    try flush()
    startWindow()
    var budget = replyLimit
    return try readReply(depth: 0, budget: &budget)
  }

  private func readReply(depth: Int, budget: inout Int) throws(TroveError) -> Reply {
    let text = try line()
    guard let kind = text.first else { throw protocolError("an empty line") }
    let rest = text.dropFirst()
    switch kind {
    case "+": return .simple(String(rest))
    case "-": return .error(String(rest))
    case ":":
      guard let n = Int64(rest) else { throw protocolError("integer \(quoted(rest))") }
      return .integer(n)
    case "$":
      let n = try length(rest, of: "a bulk length", limit: budget)
      guard n >= 0 else { return .bulk(nil) }
      budget -= n
      var bytes: [UInt8] = []
      bytes.reserveCapacity(min(n, 1 << 20))
      try consume(n) { (piece) throws(TroveError) in bytes += piece }
      try bulkEnd()
      return .bulk(bytes)
    case "*":
      guard depth < Self.depthLimit else {
        throw protocolError("arrays nested deeper than \(Self.depthLimit)")
      }
      let n = try length(rest, of: "an array length", limit: budget / 16)
      guard n >= 0 else { return .array(nil) }
      budget -= 16 * n
      var items: [Reply] = []
      items.reserveCapacity(n)
      for _ in 0..<n { items.append(try readReply(depth: depth + 1, budget: &budget)) }
      return .array(items)
    default:
      throw protocolError("a reply starting with \(quoted(text))")
    }
  }

  /// Reads a bulk reply of at most ``bulkLimit`` bytes, giving its bytes
  /// to `body` as they come; returns its length, or nil for a nil bulk.
  /// An error reply is thrown.
  func readBulk(_ body: (UnsafeRawBufferPointer) throws(TroveError) -> Void) throws(TroveError)
    -> Int?
  {
    try flush()
    startWindow()
    let text = try line()
    if text.hasPrefix("-") { throw serverError(text.dropFirst(), after: "") }
    guard text.hasPrefix("$") else {
      throw protocolError("\(quoted(text)) where a bulk string was due")
    }
    let n = try length(text.dropFirst(), of: "a bulk length", limit: Self.bulkLimit)
    guard n >= 0 else { return nil }
    try consume(n, body)
    try bulkEnd()
    return n
  }
}
