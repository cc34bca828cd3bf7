/// A Redis connection speaking RESP2, written small over a ``Socket``:
/// commands are arrays of bulk strings, replies are read from a buffer; a
/// bulk reply can be streamed piece by piece, so a large value never sits
/// whole in memory. Errors name `label` (the remote and its URL).
final class RESPConnection {
  private let socket: Socket
  private let label: String
  private var buffer: UnsafeMutableRawBufferPointer
  private var start = 0
  private var end = 0

  /// A reply.
  enum Reply: Equatable {
    case simple(String)
    case error(String)
    case integer(Int64)
    case bulk([UInt8]?)
    case array([Reply]?)
  }

  init(host: String, port: Int, limits: RemoteLimits, label: String) throws(TroveError) {
    self.label = label
    do throws(SystemCallError) {
      socket = try Socket.connect(
        host: host, port: port, timeout: limits.connectTimeout, stall: limits.stallTimeout)
    } catch  where error.call == "getaddrinfo" {
      throw TroveError(.unavailable, "\(label): cannot resolve host '\(host)'", value: host)
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

  private func protocolError(_ why: String) -> TroveError {
    TroveError(.unavailable, "\(label): not a Redis server's answer (\(why))")
  }

  /// Sends one command: `arguments`, then `payload` as a last argument
  /// when given (sent from where it is, not copied).
  func send(_ arguments: [String], payload: UnsafeRawBufferPointer? = nil) throws(TroveError) {
    var head = "*\(arguments.count + (payload == nil ? 0 : 1))\r\n"
    for argument in arguments { head += "$\(argument.utf8.count)\r\n\(argument)\r\n" }
    if let payload { head += "$\(payload.count)\r\n" }
    do throws(SystemCallError) {
      try socket.sendAll(Array(head.utf8))
      if let payload {
        if payload.count > 0 { try socket.sendAll(payload) }
        try socket.sendAll([13, 10])
      }
    } catch {
      throw failed(error)
    }
  }

  /// Sends a command and reads its reply; an error reply is thrown.
  @discardableResult
  func call(_ arguments: [String], payload: UnsafeRawBufferPointer? = nil) throws(TroveError)
    -> Reply
  {
    try send(arguments, payload: payload)
    let reply = try readReply()
    if case .error(let message) = reply {
      throw TroveError(
        .unavailable, "\(label): \(arguments.first ?? "") failed: \(message)")
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

  /// Reads one reply whole.
  func readReply() throws(TroveError) -> Reply {
    let text = try line()
    guard let kind = text.first else { throw protocolError("an empty line") }
    let rest = String(text.dropFirst())
    switch kind {
    case "+": return .simple(rest)
    case "-": return .error(rest)
    case ":":
      guard let n = Int64(rest) else { throw protocolError("integer '\(rest)'") }
      return .integer(n)
    case "$":
      guard let n = Int(rest), n >= -1 else { throw protocolError("length '\(rest)'") }
      guard n >= 0 else { return .bulk(nil) }
      var bytes: [UInt8] = []
      bytes.reserveCapacity(min(n, 1 << 20))
      try consume(n + 2) { (piece) throws(TroveError) in bytes += piece }
      return .bulk(Array(bytes.dropLast(2)))
    case "*":
      guard let n = Int(rest), n >= -1 else { throw protocolError("count '\(rest)'") }
      guard n >= 0 else { return .array(nil) }
      var items: [Reply] = []
      for _ in 0..<n { items.append(try readReply()) }
      return .array(items)
    default:
      throw protocolError("a reply starting with '\(kind)'")
    }
  }

  /// Reads a bulk reply, giving its bytes to `body` as they come; returns
  /// its length, or nil for a nil bulk. An error reply is thrown.
  func readBulk(_ body: (UnsafeRawBufferPointer) throws(TroveError) -> Void) throws(TroveError)
    -> Int?
  {
    let text = try line()
    if text.hasPrefix("-") { throw TroveError(.unavailable, "\(label): \(text.dropFirst())") }
    guard text.hasPrefix("$"), let n = Int(text.dropFirst()), n >= -1 else {
      throw protocolError("'\(text.prefix(40))' where a bulk string was due")
    }
    guard n >= 0 else { return nil }
    var left = n
    try consume(n + 2) { (piece) throws(TroveError) in
      let data = min(piece.count, max(0, left))
      if data > 0 { try body(UnsafeRawBufferPointer(rebasing: piece[0..<data])) }
      left -= piece.count
    }
    return n
  }
}
