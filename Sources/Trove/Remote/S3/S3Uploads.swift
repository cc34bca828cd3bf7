import Foundation

/// Multipart uploads left unfinished under the remote's prefix (a process
/// killed mid-upload): their parts are stored, and billed, until aborted.
extension S3Backend {
  /// What ``abortUploads(olderThan:)`` found and did.
  struct UploadsCleaned {
    /// Unfinished uploads under the prefix.
    var found = 0
    /// Those that started at least the bound ago, and were aborted.
    var aborted = 0
  }

  /// Lists the unfinished multipart uploads under the prefix
  /// (ListMultipartUploads) and aborts those that started at least
  /// `seconds` ago by the server's clock. O(n) requests in their number.
  func abortUploads(olderThan seconds: Int64) throws(TroveError) -> UploadsCleaned {
    var cleaned = UploadsCleaned()
    let under = prefix.isEmpty ? "" : prefix + "/"
    var marker: (key: String, uploadID: String)?
    // A page holds up to 1000 uploads; a server that never ends its list
    // is stopped after 1000 pages.
    for _ in 0..<1000 {
      var query = [("uploads", ""), ("prefix", under)]
      if let marker {
        query += [("key-marker", marker.key), ("upload-id-marker", marker.uploadID)]
      }
      var body: [UInt8] = []
      let limit = 4 << 20
      let listed = try request("GET", "", query: query, accepting: [200], atBucket: true) {
        (piece) throws(TroveError) in
        guard body.count + piece.count <= limit else {
          throw TroveError(
            .unavailable,
            "remote '\(self.spec.name)': a list of the uploads under \(self.shown("")) is larger than 4 MiB",
            value: self.shown(""))
        }
        body += piece
      }
      let now =
        listed.date.flatMap(Freshness.httpDate).map { $0 / 1_000_000_000 }
        ?? currentTimeNanoseconds() / 1_000_000_000
      let page = S3Response.pendingUploads(body)
      for upload in page.uploads where upload.key.hasPrefix(under) {
        cleaned.found += 1
        guard now - upload.initiated >= seconds else { continue }
        try request(
          "DELETE", String(upload.key.dropFirst(under.count)),
          query: [("uploadId", upload.uploadID)], accepting: [200, 204, 404])
        cleaned.aborted += 1
      }
      guard let next = page.next else { break }
      marker = next
    }
    return cleaned
  }
}
