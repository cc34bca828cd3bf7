import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A real S3 service: Ceph's radosgw on a one-node cluster on 127.0.0.1
/// (`scripts/s3-ceph.sh`), one per test run. `scripts/test.sh` starts it
/// and names its folder in `TROVE_TEST_S3`; a run without it (`swift test`
/// alone) starts its own in a folder named after this checkout, stopped
/// when the process exits, and stopped by the next run's start if the
/// process was killed.
final class CephS3: Sendable {
  static let missing = Comment(
    rawValue:
      "Ceph is not installed: scripts/deps.sh test installs ceph-mon, ceph-osd, radosgw and ceph-common"
  )
  static var isInstalled: Bool {
    FileManager.default.isExecutableFile(atPath: "/usr/bin/radosgw")
  }

  /// The variables that let a client reach and sign for it:
  /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
  /// `S3_ENDPOINT`, `AWS_ENDPOINT_URL`; and its HTTPS endpoint
  /// (`S3_ENDPOINT_TLS`) with the certificate it uses (`S3_CA_BUNDLE`).
  let environment: [String: String]
  var endpoint: String { environment["S3_ENDPOINT"] ?? "" }
  var tlsEndpoint: String { environment["S3_ENDPOINT_TLS"] ?? "" }
  var caBundle: String { environment["S3_CA_BUNDLE"] ?? "" }

  private init(environment: [String: String]) {
    self.environment = environment
  }

  /// The run's cluster, started on first use.
  static let shared: Result<CephS3, TestFailure> = {
    let folder: String
    if let given = ProcessInfo.processInfo.environment["TROVE_TEST_S3"], !given.isEmpty {
      folder = given
    } else {
      folder = ownFolder
      let started = try? Spawned(
        executable: repositoryRoot + "/scripts/s3-ceph.sh", ["start", folder],
        io: NSTemporaryDirectory() + "trove-ceph-start-\(getpid())"
      ).wait()
      guard let started, started.status == 0 else {
        return .failure(TestFailure("the Ceph cluster did not start: \(started?.stderr ?? "")"))
      }
      atexit { CephS3.stopOwn() }
    }
    guard let text = try? String(contentsOfFile: folder + "/s3.env", encoding: .utf8) else {
      return .failure(TestFailure("no s3.env in '\(folder)'"))
    }
    var environment: [String: String] = [:]
    for line in text.split(separator: "\n") {
      guard let equals = line.firstIndex(of: "=") else { continue }
      environment[String(line[..<equals])] = String(line[line.index(after: equals)...])
    }
    return .success(CephS3(environment: environment))
  }()

  /// The cluster of this checkout's own runs (not `scripts/test.sh`'s).
  private static var ownFolder: String {
    var hash: UInt64 = 1_469_598_103_934_665_603
    for byte in repositoryRoot.utf8 { hash = (hash ^ UInt64(byte)) &* 1_099_511_628_211 }
    return "/tmp/trove-ceph-\(String(hash, radix: 16))"
  }

  private static func stopOwn() {
    _ = try? Spawned(
      executable: repositoryRoot + "/scripts/s3-ceph.sh", ["stop", ownFolder],
      io: NSTemporaryDirectory() + "trove-ceph-stop-\(getpid())"
    ).wait()
  }

  /// The cluster, or the reason it is not there.
  static func get() throws -> CephS3 { try shared.get() }

  /// Runs curl signing for this cluster (`--aws-sigv4`) on the URL of
  /// `path` (`/bucket/key`) with `arguments`; its output ends with a line
  /// holding the status.
  func curl(_ path: String, _ arguments: [String] = []) throws -> Outcome {
    let id = environment["AWS_ACCESS_KEY_ID"] ?? ""
    let key = environment["AWS_SECRET_ACCESS_KEY"] ?? ""
    return try Spawned(
      executable: "/usr/bin/curl",
      [
        "-s", "-S", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", id + ":" + key, "-H",
        "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-w", "\n%{http_code}", endpoint + path,
      ] + arguments,
      io: NSTemporaryDirectory() + "trove-s3-curl-" + UUID().uuidString
    ).wait()
  }

  /// A new bucket, named for this test alone.
  func makeBucket() throws -> String {
    let name = "t-" + String(UInt64.random(in: .min ... .max), radix: 16)
    let made = try curl("/" + name, ["-X", "PUT"])
    guard made.text.hasSuffix("\n200") else {
      throw TestFailure("cannot make bucket \(name): \(made.text) \(made.stderr)")
    }
    return name
  }

  /// The bytes of `key` in `bucket`, or nil when it is not there.
  func object(_ bucket: String, _ key: String) throws -> [UInt8]? {
    let file = NSTemporaryDirectory() + "trove-s3-object-" + UUID().uuidString
    defer { try? FileManager.default.removeItem(atPath: file) }
    let got = try curl("/\(bucket)/\(key)", ["-o", file])
    guard got.text.hasSuffix("200") else { return nil }
    return Array(try Data(contentsOf: URL(fileURLWithPath: file)))
  }

  /// Puts `bytes` at `key` in `bucket`, replacing what is there.
  func put(_ bytes: [UInt8], _ bucket: String, _ key: String) throws {
    let file = NSTemporaryDirectory() + "trove-s3-object-" + UUID().uuidString
    defer { try? FileManager.default.removeItem(atPath: file) }
    try Data(bytes).write(to: URL(fileURLWithPath: file))
    let put = try curl("/\(bucket)/\(key)", ["-T", file])
    guard put.text.hasSuffix("200") else {
      throw TestFailure("cannot put \(bucket)/\(key): \(put.text) \(put.stderr)")
    }
  }
}

/// boto3 and awscli, which `scripts/deps.sh test` installs from PyPI in a
/// venv under `.build/test-tools`: real S3 clients for interop tests.
enum BotoClient {
  static let python = repositoryRoot + "/.build/test-tools/python/bin/python"
  static var isInstalled: Bool {
    FileManager.default.isExecutableFile(atPath: python)
      && FileManager.default.fileExists(
        atPath: repositoryRoot + "/.build/test-tools/python/bin/aws")
  }
  static let missing = Comment(
    rawValue:
      "boto3 and awscli are not installed: scripts/deps.sh test installs them from PyPI in .build/test-tools/python"
  )

  /// boto3's managed transfer (multipart over 8 MiB, in 8 MiB parts, on
  /// several threads), path-style: `get BUCKET KEY FILE` or `put BUCKET KEY FILE`.
  private static let script = """
    import sys, boto3
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config
    s3 = boto3.client("s3", config=Config(s3={"addressing_style": "path"}))
    op, bucket, key, path = sys.argv[1:5]
    parts = TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=8 << 20)
    if op == "get":
        s3.download_file(bucket, key, path, Config=parts)
    else:
        s3.upload_file(path, bucket, key, Config=parts)
    """

  /// Runs boto3 `operation` on `key` of `bucket` with `file`, against `s3`.
  static func run(
    _ s3: CephS3, _ operation: String, _ bucket: String, _ key: String, _ file: String
  )
    throws -> Outcome
  {
    try Spawned(
      executable: python, ["-c", script, operation, bucket, key, file],
      io: NSTemporaryDirectory() + "trove-boto3-" + UUID().uuidString,
      environment: s3.environment
    ).wait()
  }

  /// `aws ARGUMENTS` (awscli) against `s3`.
  static func aws(_ s3: CephS3, _ arguments: [String]) throws -> Outcome {
    try Spawned(
      executable: repositoryRoot + "/.build/test-tools/python/bin/aws", arguments,
      io: NSTemporaryDirectory() + "trove-aws-" + UUID().uuidString,
      environment: s3.environment
    ).wait()
  }
}

extension Outcome {
  /// What it printed on stdout, as text.
  var text: String { String(decoding: stdout, as: UTF8.self) }
}
