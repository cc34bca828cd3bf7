import CMicroHTTPD
import Foundation
@_spi(Serving) import Trove

/// The answer to a request for an object (`/cas/…`, `/sha256/…`,
/// `/sha512/…`, a remote's `cas/<aa>/<hex>`): immutable content named by
/// its digest. A raw object goes out with `sendfile` from its file; a
/// compressed one is decompressed as the client reads, or sent as stored
/// with `Content-Encoding: zstd` when the client accepts that and asked
/// for no range.
struct ObjectResponse {
  let store: Store
  let request: Request
  let digest: BlobDigest
  /// How a mirrored URL's body is described: its origin's type and
  /// validators instead of the digest's; nil for content by address.
  var mirrored: MirroredHeaders? = nil

  /// Bytes decompressed per call of the body callback.
  static let blockSize = 256 * 1024

  func queue() throws(TroveError) -> MHD_Result {
    let wantsBody = !request.isHead
    guard let body = try store.openBody(digest, recordingRead: wantsBody) else {
      return request.text(404, "no object \(digest)")
    }
    let rangeHeader = request.header("Range")
    // A mirrored body is the origin's representation: never re-encoded.
    let encoded = body.isCompressed && rangeHeader == nil && acceptsZstd && mirrored == nil
    // Each form is its own representation, with its own tag.
    let etag: String? =
      if let mirrored { mirrored.etag } else { "\"\(digest.hex)\(encoded ? ".zst" : "")\"" }
    var headers: [(String, String)]
    if let mirrored {
      headers = [("Accept-Ranges", "bytes")] + mirrored.headers
      if let etag { headers.append(("ETag", etag)) }
    } else {
      headers = [
        ("ETag", etag ?? ""), ("Cache-Control", "public, max-age=31536000, immutable"),
        ("Accept-Ranges", "bytes"),
      ]
      if body.isCompressed { headers.append(("Vary", "Accept-Encoding")) }
    }
    if encoded { headers.append(("Content-Encoding", "zstd")) }
    if let etag, Self.matches(request.header("If-None-Match"), etag) {
      // With the length a 200 would have: a 304 may say only that one,
      // and libmicrohttpd sends no body with it.
      return send(
        body, status: 304, offset: 0, length: encoded ? body.storedSize : body.size,
        headers: headers)
    }
    if encoded {
      return send(body, status: 200, offset: 0, length: body.storedSize, headers: headers)
    }
    switch ByteRange(header: rangeHeader, length: body.size) {
    case .whole:
      return send(body, status: 200, offset: 0, length: body.size, headers: headers)
    case .part(let start, let end):
      headers.append(("Content-Range", "bytes \(start)-\(end)/\(body.size)"))
      return send(body, status: 206, offset: start, length: end - start + 1, headers: headers)
    case .unsatisfiable:
      headers.append(("Content-Range", "bytes */\(body.size)"))
      return request.text(
        416,
        "the range \(Route.shown(Substring(rangeHeader ?? ""))) starts past the end (\(body.size) bytes)",
        headers: headers)
    }
  }

  /// Whether `Accept-Encoding` lists zstd with a weight above 0.
  private var acceptsZstd: Bool {
    guard let header = request.header("Accept-Encoding") else { return false }
    for item in header.split(separator: ",") {
      let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
      guard parts.first?.lowercased() == "zstd" else { continue }
      let weight = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap {
        Double($0.dropFirst(2))
      }
      return (weight ?? 1) > 0
    }
    return false
  }

  /// Whether `If-None-Match` names `etag` (or is `*`); a weak tag compares
  /// as its strong form, as RFC 9110 says for this header.
  static func matches(_ header: String?, _ etag: String) -> Bool {
    guard let header else { return false }
    let strong = etag.hasPrefix("W/") ? String(etag.dropFirst(2)) : etag
    return header.split(separator: ",").contains {
      var tag = $0.trimmingCharacters(in: .whitespaces)
      if tag.hasPrefix("W/") { tag.removeFirst(2) }
      return tag == strong || tag == "*"
    }
  }

  /// Queues `length` bytes of `body` from `offset`: the stored file
  /// (`sendfile`) when raw or sent encoded, decompressed otherwise.
  private func send(
    _ body: ObjectBody, status: Int, offset: Int64, length: Int64, headers: [(String, String)]
  ) -> MHD_Result {
    let rawFile = !body.isCompressed || headers.contains { $0.0 == "Content-Encoding" }
    let response: OpaquePointer?
    if rawFile || request.isHead || status == 304 {
      // libmicrohttpd closes the file when the response is done.
      guard let fd = body.takeDescriptor() else { return .NO }
      response = trove_mhd_create_response_from_fd_at_offset64(UInt64(length), fd, UInt64(offset))
      if response == nil { close(fd) }
    } else {
      let reader: DecompressedReader
      do throws(TroveError) {
        reader = try body.decompressedReader(from: offset)
      } catch {
        return request.text(500, "the object could not be read")
      }
      let stream = Unmanaged.passRetained(DecompressingStream(reader, length: length)).toOpaque()
      response = trove_mhd_create_response_from_callback(
        UInt64(length), Self.blockSize, decompressedBlock, stream, releaseStream)
      if response == nil { Unmanaged<DecompressingStream>.fromOpaque(stream).release() }
    }
    guard let response else { return .NO }
    Request.add(
      ("Content-Type", mirrored?.contentType ?? "application/octet-stream"), to: response)
    for header in headers { Request.add(header, to: response) }
    return request.queue(status, response, bodyBytes: status == 304 ? 0 : length)
  }
}

/// What a mirrored response says of its body, from what the origin sent
/// when it was fetched.
struct MirroredHeaders {
  /// The origin's `Content-Type`, nil when it sent none (then
  /// `application/octet-stream`).
  var contentType: String?
  /// The origin's `ETag`, nil when it sent none.
  var etag: String?
  /// `Last-Modified`, `X-Trove-Cache`, `Warning`.
  var headers: [(String, String)]
}

/// A compressed object's bytes on their way out: the reader and how many
/// bytes are still owed.
final class DecompressingStream: @unchecked Sendable {
  let reader: DecompressedReader
  var remaining: Int64

  init(_ reader: DecompressedReader, length: Int64) {
    self.reader = reader
    remaining = length
  }
}

/// libmicrohttpd asks for the next bytes of a decompressed body. A frame
/// that fails or ends early ends the response with an error, which closes
/// the connection: the client sees fewer bytes than Content-Length said,
/// never a short body passed off as whole.
private let decompressedBlock: MHD_ContentReaderCallback = { context, _, buffer, capacity in
  guard let context, let buffer else { return trove_mhd_end_with_error() }
  let stream = Unmanaged<DecompressingStream>.fromOpaque(context).takeUnretainedValue()
  guard stream.remaining > 0 else { return trove_mhd_end_of_stream() }
  let wanted = Int(min(Int64(capacity), stream.remaining))
  do throws(TroveError) {
    let n = try stream.reader.read(
      into: UnsafeMutableRawBufferPointer(start: buffer, count: wanted))
    guard n > 0 else { return trove_mhd_end_with_error() }
    stream.remaining -= Int64(n)
    return n
  } catch {
    return trove_mhd_end_with_error()
  }
}

private let releaseStream: MHD_ContentReaderFreeCallback = { context in
  guard let context else { return }
  Unmanaged<DecompressingStream>.fromOpaque(context).release()
}
