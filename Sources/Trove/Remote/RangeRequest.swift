/// One `Range` request for part of a blob on a remote, as a chunked pull
/// makes them: exactly the bytes asked for, from a `206` whose
/// `Content-Range` names them. A server that sends more, less or other
/// bytes is refused with an error naming the remote and the object; what
/// was handed on by then is the caller's to throw away (its writer is
/// cancelled, and the blob pulled whole).
enum RangeRequest {
  /// Sends a request with the `Range` header `perform` is given, writes
  /// the body to `writer` and checks it: `range` of the object `shown`
  /// names, on remote `remote`.
  static func receive(
    _ range: Range<Int64>, into writer: any RemoteSink, remote: String, shown: String,
    perform: (
      _ headers: [String], _ sink: @escaping (UnsafeRawBufferPointer) throws(TroveError) -> Void
    ) throws(TroveError) -> RemoteHTTPTransfer.Outcome
  ) throws(TroveError) {
    let wanted = Int64(range.count)
    let asked = "\(range.lowerBound)-\(range.upperBound - 1)"
    var received: Int64 = 0
    let outcome = try perform(["Range: bytes=" + asked]) { (bytes) throws(TroveError) in
      guard received + Int64(bytes.count) <= wanted else {
        throw TroveError(
          .transferFailed,
          "remote '\(remote)': GET \(shown) sent more than the \(wanted) bytes asked",
          value: shown)
      }
      try writer.write(bytes)
      received += Int64(bytes.count)
    }
    guard received == wanted else {
      throw TroveError(
        .transferFailed,
        "remote '\(remote)': GET \(shown) ended after \(received) of the \(wanted) bytes asked",
        value: shown)
    }
    guard let (start, end, _) = contentRange(outcome.contentRange),
      start == range.lowerBound, end == range.upperBound - 1
    else {
      throw TroveError(
        .transferFailed,
        "remote '\(remote)': GET \(shown) answered bytes \(asked) with Content-Range '\(ServerText.excerpt(outcome.contentRange ?? ""))'",
        value: shown)
    }
  }

  /// `bytes START-END/TOTAL`, or nil when it is not that.
  static func contentRange(_ text: String?) -> (Int64, Int64, Int64)? {
    guard let text, text.hasPrefix("bytes ") else { return nil }
    let fields = text.dropFirst(6).split(
      separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
    guard fields.count == 2 else { return nil }
    let bounds = fields[0].split(separator: "-", omittingEmptySubsequences: false)
    guard bounds.count == 2, let start = Int64(bounds[0]), let end = Int64(bounds[1]),
      let total = Int64(fields[1]), start >= 0, start <= end, end < total
    else { return nil }
    return (start, end, total)
  }
}
