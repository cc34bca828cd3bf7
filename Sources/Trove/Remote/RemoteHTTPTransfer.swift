import CCurl
import Foundation

/// One WebDAV request through libcurl: any method (HEAD, GET, PUT with a
/// body read from a file, MOVE, DELETE), on a reused easy handle (so the
/// connection is kept), with the remote tier's limits: a short connect
/// timeout and a stall limit, never a limit on a whole transfer. The
/// fetch path's ``HTTPClient`` only GETs; this is its uploading sibling.
final class RemoteHTTPTransfer {
  private let curl: LibCurl
  private let handle: UnsafeMutableRawPointer
  private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
  private let limits: RemoteLimits
  /// `user:password` for basic authentication, or a bearer token.
  private let credential: String?

  init(limits: RemoteLimits, credential: String?) throws(TroveError) {
    curl = try LibCurl.loaded()
    guard let handle = curl.easyInit() else {
      throw TroveError(.ioError, "cannot start libcurl: curl_easy_init failed")
    }
    self.handle = handle
    self.limits = limits
    self.credential = credential
  }

  deinit {
    curl.easyCleanup(handle)
    errorBuffer.deallocate()
  }

  /// A request's body: `size` bytes of `file` from offset 0, or `bytes`
  /// when there is no file.
  struct Upload {
    var file: FileDescriptor?
    var bytes: [UInt8] = []
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
  }

  private final class Context {
    var status = 0
    var contentLength: Int64?
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
  }

  /// Sends `method` to `url` with `headers`, the body from `upload`; a
  /// 2xx response's body goes to `sink` (others' is dropped).
  func perform(
    _ method: String, _ url: String, headers: [String] = [], upload: Upload? = nil,
    sink: ((UnsafeRawBufferPointer) throws(TroveError) -> Void)? = nil
  ) -> Outcome {
    curl.easyReset(handle)
    errorBuffer[0] = 0
    let context = Context(sink: sink, upload: upload)
    let pointer = Unmanaged.passUnretained(context).toOpaque()
    var list: UnsafeMutablePointer<curl_slist>?
    // No `Expect: 100-continue` round trip before a body; bytes as they are.
    var lines = ["Expect:", "Accept-Encoding: identity"] + headers
    if let credential, !credential.contains(":") {
      lines.append("Authorization: Bearer \(credential)")
    }
    for line in lines { list = curl.slistAppend(list, line) }
    defer { curl.slistFreeAll(list) }
    curl.setTransferOptions(
      handle, url: url, connectTimeout: limits.connectTimeout, stallSpeed: limits.stallSpeed,
      stallTimeout: limits.stallTimeout, userAgent: "trove/0.1")
    // CURL_NETRC_OPTIONAL: ~/.netrc's login when it names the host.
    trove_curl_set_long(curl.easySetopt, handle, CURLOPT_NETRC, 1)
    if let credential, credential.contains(":") {
      trove_curl_set_string(curl.easySetopt, handle, CURLOPT_USERPWD, credential)
    }
    trove_curl_set_list(curl.easySetopt, handle, CURLOPT_HTTPHEADER, list)
    trove_curl_set_pointer(curl.easySetopt, handle, CURLOPT_ERRORBUFFER, errorBuffer)
    switch method {
    case "GET": break
    case "HEAD": trove_curl_set_long(curl.easySetopt, handle, CURLOPT_NOBODY, 1)
    case "PUT": break
    default: trove_curl_set_string(curl.easySetopt, handle, CURLOPT_CUSTOMREQUEST, method)
    }
    if let upload {
      trove_curl_set_long(curl.easySetopt, handle, CURLOPT_UPLOAD, 1)
      // Fewer, larger reads of the file than libcurl's default 64 KiB.
      trove_curl_set_long(curl.easySetopt, handle, CURLOPT_UPLOAD_BUFFERSIZE, 1 << 20)
      trove_curl_set_offset(
        curl.easySetopt, handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(upload.size))
      trove_curl_set_pointer(curl.easySetopt, handle, CURLOPT_READDATA, pointer)
      trove_curl_set_data_callback(curl.easySetopt, handle, CURLOPT_READFUNCTION) {
        buffer, size, count, user in
        let context = Unmanaged<Context>.fromOpaque(user!).takeUnretainedValue()
        guard let upload = context.upload, let buffer else { return 0 }
        let wanted = min(size * count, Int(max(0, upload.size - context.offset)))
        guard wanted > 0 else { return 0 }
        let target = UnsafeMutableRawBufferPointer(start: buffer, count: wanted)
        guard let file = upload.file else {
          let start = Int(context.offset)
          upload.bytes.withUnsafeBytes {
            target.copyMemory(from: .init(rebasing: $0[start..<start + wanted]))
          }
          context.offset += Int64(wanted)
          return wanted
        }
        do throws(SystemCallError) {
          let n = try file.read(into: target, at: context.offset)
          guard n > 0 else { throw SystemCallError("pread", .ioError) }  // the file shrank
          context.hasher?.update(UnsafeRawBufferPointer(rebasing: target[..<n]))
          context.offset += Int64(n)
          return n
        } catch {
          context.readError = error
          return 0x1000_0000  // CURL_READFUNC_ABORT
        }
      }
    }
    trove_curl_set_pointer(curl.easySetopt, handle, CURLOPT_HEADERDATA, pointer)
    trove_curl_set_data_callback(curl.easySetopt, handle, CURLOPT_HEADERFUNCTION) {
      buffer, size, count, user in
      let context = Unmanaged<Context>.fromOpaque(user!).takeUnretainedValue()
      let n = size * count
      guard let buffer else { return n }
      let line = String(
        decoding: UnsafeRawBufferPointer(start: buffer, count: n), as: UTF8.self
      ).trimmingCharacters(in: .whitespacesAndNewlines)
      if line.hasPrefix("HTTP/") {
        let parts = line.split(separator: " ", maxSplits: 2)
        context.status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
        context.contentLength = nil
      } else if line.lowercased().hasPrefix("content-length:") {
        context.contentLength = Int64(line.dropFirst(15).trimmingCharacters(in: .whitespaces))
      }
      return n
    }
    trove_curl_set_pointer(curl.easySetopt, handle, CURLOPT_WRITEDATA, pointer)
    trove_curl_set_data_callback(curl.easySetopt, handle, CURLOPT_WRITEFUNCTION) {
      buffer, size, count, user in
      let context = Unmanaged<Context>.fromOpaque(user!).takeUnretainedValue()
      let n = size * count
      guard (200..<300).contains(context.status), let sink = context.sink else { return n }
      do throws(TroveError) {
        try sink(UnsafeRawBufferPointer(start: buffer, count: n))
        return n
      } catch {
        context.sinkError = error
        return 0
      }
    }
    let code = curl.easyPerform(handle)
    let detail = String(cString: errorBuffer)
    return Outcome(
      status: context.status, contentLength: context.contentLength, code: code,
      message: detail.isEmpty ? curl.message(code) : detail,
      sinkError: context.sinkError, readError: context.readError,
      sentDigest: context.offset == upload?.size ? context.hasher?.finalize() : nil)
  }
}
