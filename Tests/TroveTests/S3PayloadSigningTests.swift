import Testing

@testable import Trove

/// What vouches for an S3 upload's bytes on the way, by the endpoint's
/// scheme: no server is asked.
@Suite("S3 payload signing")
struct S3PayloadSigningTests {
  func headers(endpoint: String, bytes: [UInt8]) throws -> [String] {
    let spec = RemoteSpec(name: "s3", url: "s3://bucket/team", endpointURL: endpoint)
    let backend = try S3Backend(spec, endpoint: spec.endpoint(), limits: .standard)
    return try backend.payloadHeaders(bytes)
  }

  @Test(
    "over http:// a body carries its SHA-256, which the server checks; over https:// it goes as UNSIGNED-PAYLOAD"
  )
  func payloadBySchema() throws {
    let bytes = Array("abc".utf8)
    let plain = try headers(endpoint: "http://127.0.0.1:9", bytes: bytes)
    #expect(
      plain == [
        "x-amz-content-sha256: ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
      ])
    let tls = try headers(endpoint: "https://127.0.0.1:9", bytes: bytes)
    #expect(tls == ["x-amz-content-sha256: UNSIGNED-PAYLOAD"])
  }
}
