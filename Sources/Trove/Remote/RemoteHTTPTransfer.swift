import CCurl
import Foundation

/// One WebDAV or S3 request: any method (HEAD, GET, PUT with a body read
/// from a file, MOVE, DELETE), on a reused ``HTTPHandle`` (so the
/// connection is kept), with the remote tier's limits: a short connect
/// timeout and a stall limit, never a limit on a whole transfer. Run on
/// the calling thread, or by a shared ``HTTPMulti`` whose connections the
/// transfers of several threads reuse; the body still reaches its sink on
/// the calling thread.
final class RemoteHTTPTransfer {
  private let handle: HTTPHandle
  /// Runs the transfers when given (see ``HTTPMulti``).
  private let multi: HTTPMulti?
  private let limits: RemoteLimits
  /// `user:password` for basic authentication, or a bearer token.
  private let credential: String?
  /// Whether `~/.netrc` may give a login, where it names the host and
  /// the request would not carry it in clear over a network.
  private let usesNetrc: Bool

  /// How S3 requests are signed; nil for none.
  private let signing: AWSSigning?

  init(
    limits: RemoteLimits, credential: String?, usesNetrc: Bool, signing: AWSSigning? = nil,
    multi: HTTPMulti? = nil
  )
    throws(TroveError)
  {
    handle = try HTTPHandle()
    self.multi = multi
    self.limits = limits
    self.credential = credential
    self.usesNetrc = usesNetrc
    self.signing = signing
  }

  /// AWS Signature Version 4, computed by libcurl, for S3.
  struct AWSSigning {
    var accessKeyID: String
    var secretAccessKey: String
    var sessionToken: String?
    var region: String
  }

  /// The certificates the server's is verified with, when not the
  /// system's (`AWS_CA_BUNDLE`); for signed and anonymous requests alike.
  var caBundle: String?

  /// A request's body: `size` bytes of `file` from offset 0, or `bytes`,
  /// or the bytes of `buffer` (which the caller keeps until the request
  /// returns).
  struct Upload {
    var file: FileDescriptor?
    var bytes: [UInt8] = []
    var buffer: UnsafeRawBufferPointer?
    var size: Int64
    /// Whether the bytes are hashed as they are sent (``Outcome/sentDigest``).
    var hashes = false

    init(file: FileDescriptor, size: Int64) {
      self.file = file
      self.size = size
    }

    init(bytes: [UInt8]) {
      self.bytes = bytes
      size = Int64(bytes.count)
    }

    init(buffer: UnsafeRawBufferPointer) {
      self.buffer = buffer
      size = Int64(buffer.count)
    }
  }

  /// How a request ended.
  struct Outcome {
    /// The status code; 0 when no response came.
    var status: Int
    /// `Content-Length` of the response, when the server sent one.
    var contentLength: Int64?
    /// libcurl's result (`CURLE_OK` when the exchange completed).
    var code: CURLcode
    /// libcurl's message for a failure.
    var message: String
    /// The error the body's sink threw, which stopped the transfer.
    var sinkError: TroveError?
    /// The error reading the upload's file, which stopped the transfer.
    var readError: SystemCallError?
    /// The digest of the body sent, when the upload ``Upload/hashes`` and
    /// all of it was read.
    var sentDigest: BlobDigest?
    /// The start of a body that went to no sink (an error's: S3 names its
    /// error in it), at most ``unreadBodyLimit`` bytes.
    var unreadBody: [UInt8] = []
    /// The response's `Date`, `ETag` and `Content-Range`, when it had them.
    var date: String?
    var etag: String?
    var contentRange: String?
  }

  /// The error for an exchange that did not complete (its sink or the
  /// upload's file failed, or libcurl did), naming `remote`, the request
  /// and `shown` (the URL or object as messages give it); nil when it
  /// completed, whatever its status.
  static func failure(
    _ outcome: Outcome, remote: String, method: String, shown: String
  ) -> TroveError? {
    if let error = outcome.sinkError { return error }
    if let error = outcome.readError {
      return TroveError(
        .ioError, "cannot read the blob being uploaded to remote '\(remote)'", cause: error)
    }
    guard outcome.code != CURLE_OK else { return nil }
    let transient =
      [
        CURLE_PARTIAL_FILE, CURLE_OPERATION_TIMEDOUT, CURLE_RECV_ERROR, CURLE_SEND_ERROR,
        CURLE_GOT_NOTHING,
      ].contains(outcome.code) && outcome.status != 0
    return TroveError(
      transient ? .transferFailed : .unavailable,
      "remote '\(remote)': \(method) \(shown) failed: \(ServerText.excerpt(outcome.message))",
      value: shown)
  }

  /// A request's callbacks: a 2xx response's body to the sink (any other
  /// body is dropped, read up to ``unreadBodyLimit``), the upload's bytes
  /// from its file or array.
  private final class Exchange: HTTPExchange {
    let sink: ((UnsafeRawBufferPointer) throws(TroveError) -> Void)?
    var sinkError: TroveError?
    let upload: Upload?
    var offset: Int64 = 0
    var readError: SystemCallError?
    var hasher: XXH3Hasher?
    init(sink: ((UnsafeRawBufferPointer) throws(TroveError) -> Void)?, upload: Upload?) {
      self.sink = sink
      self.upload = upload
      if upload?.hashes == true { hasher = XXH3Hasher() }
    }

    /// Bytes of a body no one reads, dropped so far, and the first of them.
    var dropped = 0
    var unread: [UInt8] = []
    /// Whether such a body ran past ``unreadBodyLimit`` and the exchange
    /// was ended there.
    var cut = false

    override func body(_ bytes: UnsafeRawBufferPointer) -> HTTPWriteAnswer {
      guard (200..<300).contains(head.status), let sink else {
        // An error page or an answer to a PUT: a short one is read out, so
        // the connection is kept; a longer one ends the exchange, which
        // its status has settled already.
        dropped += bytes.count
        let room = RemoteHTTPTransfer.unreadBodyLimit - unread.count
        if room > 0 { unread += bytes.prefix(room) }
        guard dropped <= RemoteHTTPTransfer.unreadBodyLimit else {
          cut = true
          return .stop
        }
        return .accepted
      }
      do throws(TroveError) {
        try sink(bytes)
        return .accepted
      } catch {
        sinkError = error
        return .stop
      }
    }

    override func read(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
      guard let upload else { return 0 }
      let wanted = min(buffer.count, Int(max(0, upload.size - offset)))
      guard wanted > 0 else { return 0 }
      let target = UnsafeMutableRawBufferPointer(rebasing: buffer[..<wanted])
      guard let file = upload.file else {
        let start = Int(offset)
        if let buffer = upload.buffer {
          target.copyMemory(from: .init(rebasing: buffer[start..<start + wanted]))
        } else {
          upload.bytes.withUnsafeBytes {
            target.copyMemory(from: .init(rebasing: $0[start..<start + wanted]))
          }
        }
        offset += Int64(wanted)
        return wanted
      }
      do throws(SystemCallError) {
        let n = try file.read(into: target, at: offset)
        guard n > 0 else { throw SystemCallError("pread", .ioError) }  // the file shrank
        hasher?.update(UnsafeRawBufferPointer(rebasing: target[..<n]))
        offset += Int64(n)
        return n
      } catch {
        readError = error
        return nil
      }
    }
  }

  /// A request's callbacks on a multi's thread: the body goes to the relay
  /// (the head first), the upload's bytes come from the exchange (only
  /// this thread reads them while the transfer runs). The relay then
  /// delivers head and body to the exchange on the requesting thread.
  private final class RelayedExchange: HTTPExchange, HTTPBodySink {
    let relay: HTTPRelay
    let exchange: Exchange
    private var began = false

    init(relay: HTTPRelay, exchange: Exchange) {
      self.relay = relay
      self.exchange = exchange
    }

    override func body(_ bytes: UnsafeRawBufferPointer) -> HTTPWriteAnswer {
      if !began {
        began = true
        guard relay.begin(head) else { return .stop }
      }
      return relay.write(bytes)
    }

    override func read(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
      exchange.read(into: buffer)
    }

    // The requesting thread's side, as the relay delivers.

    func begin(_ head: HTTPResponseHead) -> Bool {
      exchange.head = head
      return true
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> HTTPWriteAnswer {
      exchange.body(bytes) == .accepted ? .accepted : .stop
    }

    override func progress(received: Int64, expected: Int64?) -> Bool { true }
  }

  /// The most bytes read of a body that goes to no sink (a non-2xx
  /// answer's, or one to a request that reads none).
  static let unreadBodyLimit = 4096

  /// Sends `method` to `url` with `headers`, the body from `upload`; a
  /// 2xx response's body goes to `sink` (others' is dropped, and the
  /// exchange ended after ``unreadBodyLimit`` bytes of it).
  func perform(
    _ method: String, _ url: String, headers: [String] = [], upload: Upload? = nil,
    sink: ((UnsafeRawBufferPointer) throws(TroveError) -> Void)? = nil
  ) -> Outcome {
    let exchange = Exchange(sink: sink, upload: upload)
    var request = HTTPHandle.Request(
      method: method, url: url, headers: headers, connectTimeout: limits.connectTimeout,
      stallSpeed: limits.stallSpeed, stallTimeout: limits.stallTimeout, bodySize: upload?.size,
      usesNetrc: usesNetrc && HTTPOrigin.mayUseNetrc(url))
    request.caBundle = caBundle
    if let signing {
      request.login = signing.accessKeyID + ":" + signing.secretAccessKey
      request.awsSigV4 = "aws:amz:\(signing.region):s3"
      // libcurl signs what this header says the body is; S3 servers
      // (radosgw) refuse a request without it.
      if !request.headers.contains(where: { $0.lowercased().hasPrefix("x-amz-content-sha256:") }) {
        request.headers.append("x-amz-content-sha256: UNSIGNED-PAYLOAD")
      }
      if let token = signing.sessionToken {
        request.headers.append("x-amz-security-token: \(token)")
      }
    } else if let credential, credential.contains(":") {
      request.login = credential
    } else if let credential {
      request.headers.append("Authorization: Bearer \(credential)")
    }
    let ending: HTTPHandle.Ending
    if let multi {
      // libcurl calls back on the multi's thread: the body goes through a
      // relay to this thread, where the exchange hands it to its sink.
      request.waitsToMultiplex = multi.multiplexes
      let relay = HTTPRelay()
      let relayed = RelayedExchange(relay: relay, exchange: exchange)
      ending = handle.perform(request, relayed) { easy in
        multi.start(easy, relay: relay)
        return relay.drain(into: relayed) { multi.resume(easy) }.0
      }
      // The head of a response with no body, which no write delivered.
      exchange.head = relayed.head
    } else {
      ending = handle.perform(request, exchange)
    }
    // A body cut short here was not wanted: the exchange completed.
    let code = exchange.cut && ending.code == CURLE_WRITE_ERROR ? CURLE_OK : ending.code
    return Outcome(
      status: exchange.head.status,
      contentLength: exchange.head.lastField("content-length").flatMap { Int64($0) },
      code: code, message: ending.message,
      sinkError: exchange.sinkError, readError: exchange.readError,
      sentDigest: exchange.offset == upload?.size ? exchange.hasher?.finalize() : nil,
      unreadBody: exchange.unread, date: exchange.head.lastField("date"),
      etag: exchange.head.lastField("etag"),
      contentRange: exchange.head.lastField("content-range"))
  }
}
