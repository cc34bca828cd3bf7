import Foundation
import Testing

@testable import Trove

/// `s3://` remotes against a real S3 service: Ceph's radosgw on a one-node
/// cluster on 127.0.0.1, one per test run, a bucket per test.
@Suite("S3 remotes on Ceph radosgw", .enabled(if: CephS3.isInstalled, CephS3.missing))
struct S3RemoteTests {
  /// `trove --store STORE remote ARGUMENTS` with the cluster's
  /// credentials (and `environment` over them).
  static func remote(
    _ s3: CephS3, _ store: String, _ arguments: [String], environment: [String: String] = [:]
  ) throws -> CLI.Result {
    try RemoteTests.remote(
      store, arguments, environment: s3.environment.merging(environment) { $1 })
  }

  /// `trove --store STORE ARGUMENTS` with the cluster's credentials.
  static func trove(_ s3: CephS3, _ store: String, _ arguments: [String]) throws -> CLI.Result {
    try CLI.run(["--store", store] + arguments, environment: s3.environment)
  }

  /// Adds remote `s3` at `s3://BUCKET/team` to `store`.
  static func add(_ s3: CephS3, _ store: String, _ bucket: String, _ options: [String] = [])
    throws
  {
    let added = try remote(
      s3, store, ["add", "s3", "s3://\(bucket)/team", "--endpoint", s3.endpoint] + options)
    #expect(added.status == 0, "\(added.stderr)")
  }

  @Test(
    "two stores share a bucket: what one puts goes up (one PUT each, and a multipart upload over 8 MiB), the other reads it through by digest and by key, then from its own store"
  )
  func sharedBucket() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let (a, b) = (scratch["a"], scratch["b"])
    try Self.add(s3, a, bucket, ["--write", "sync"])
    let small = Bytes.random(3000, seed: 3001)
    let large = Bytes.random(20_000_123, seed: 3002)
    let smallFile = try scratch.write("small", small)
    let largeFile = try scratch.write("large", large)
    #expect(try Self.trove(s3, a, ["put", "--key", "tools/small", smallFile]).status == 0)
    let put = try Self.trove(s3, a, ["put", "--key", "model", largeFile])
    #expect(put.status == 0 && !put.stderr.contains("warning"), "\(put.stderr)")
    let status = try Self.remote(s3, a, ["status"])
    #expect(status.out.contains("0 objects (0 B) queued"), "\(status.out)")

    try Self.add(s3, b, bucket)
    let byKey = try Self.trove(s3, b, ["get", "model", "-"])
    #expect(byKey.status == 0 && byKey.stdout == large, "\(byKey.stderr)")
    let byDigest = try Self.trove(s3, b, ["get", XXH3Hasher.digest(small).description, "-"])
    #expect(byDigest.status == 0 && byDigest.stdout == small, "\(byDigest.stderr)")
    // Now its own: read with the remote gone.
    #expect(try Self.remote(s3, b, ["rm", "s3"]).status == 0)
    let out = scratch["out"]
    let local = try Self.trove(s3, b, ["get", "model", out])
    #expect(local.status == 0, "\(local.stderr)")
    #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == Data(large))
  }

  @Test(
    "the bucket holds the documented layout: curl reads each pushed blob at cas/<aa>/<hex> and it hashes to its name; a blob another client uploaded under the layout is pulled"
  )
  func layoutInterop() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let store = scratch["s"]
    try Self.add(s3, store, bucket)
    let bytes = Bytes.random(10_000_000, seed: 3003)
    let digest = try RemoteTests.put(store, bytes, in: scratch)
    let push = try Self.remote(s3, store, ["push", digest.description])
    #expect(push.status == 0, "\(push.stderr)")
    let stored = try s3.object(bucket, "team/cas/\(digest.hex.prefix(2))/\(digest.hex)")
    #expect(stored.map { XXH3Hasher.digest($0) } == digest)
    let layout = try s3.object(bucket, "team/trove-remote.json")
    #expect(layout.map { String(decoding: $0, as: UTF8.self) }?.contains("xxh128") == true)

    let theirs = Bytes.random(5000, seed: 3004)
    let theirDigest = XXH3Hasher.digest(theirs)
    try s3.put(theirs, bucket, "team/cas/\(theirDigest.hex.prefix(2))/\(theirDigest.hex)")
    let pulled = try Self.remote(s3, store, ["pull", theirDigest.description])
    #expect(pulled.status == 0, "\(pulled.stderr)")
    let got = try Self.trove(s3, store, ["get", theirDigest.description, "-"])
    #expect(got.stdout == theirs)
  }

  @Test(
    "AWS credentials sign only for a bucket and endpoint this user lent them to: another's remotes.json naming the bucket is asked unsigned (AccessDenied) until remote login"
  )
  func credentialsOnlyWhereLent() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let store = scratch["s"]
    let digest = try RemoteTests.put(store, Bytes.random(4000, seed: 3010), in: scratch)
    let file = """
      {"format": 1, "remotes": [{"name": "s3", "url": "s3://\(bucket)/team", "read-only": false, "endpoint": "\(s3.endpoint)"}]}
      """
    try scratch.write("s/remotes.json", Array(file.utf8))
    let unsigned = try Self.remote(s3, store, ["push", digest.description])
    #expect(unsigned.status != 0 && unsigned.stderr.contains("AccessDenied"), "\(unsigned.stderr)")
    #expect(unsigned.stderr.contains("'trove remote login s3"), "\(unsigned.stderr)")
    #expect(try s3.object(bucket, "team/cas/\(digest.hex.prefix(2))/\(digest.hex)") == nil)
    #expect(try Self.remote(s3, store, ["login", "s3"]).status == 0)
    let signed = try Self.remote(s3, store, ["push", digest.description])
    #expect(signed.status == 0, "\(signed.stderr)")
    #expect(try s3.object(bucket, "team/cas/\(digest.hex.prefix(2))/\(digest.hex)") != nil)
  }

  @Test(
    "a blob replaced on the server by other bytes is refused as corrupt (exit 65), counted, and never stored; reads through it are a miss"
  )
  func corruptBlob() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let (a, b) = (scratch["a"], scratch["b"])
    try Self.add(s3, a, bucket)
    let digest = try RemoteTests.put(a, Bytes.random(4000, seed: 3005), in: scratch)
    #expect(try Self.remote(s3, a, ["push", digest.description]).status == 0)
    try s3.put(
      Bytes.random(4000, seed: 3006), bucket, "team/cas/\(digest.hex.prefix(2))/\(digest.hex)")

    try Self.add(s3, b, bucket)
    let pulled = try Self.remote(s3, b, ["pull", digest.description])
    #expect(pulled.status == 65 && pulled.errorLines.count == 1, "\(pulled.stderr)")
    let got = try Self.trove(s3, b, ["get", digest.description, "-"])
    #expect(got.status == 1 && got.stdout.isEmpty, "\(got.stderr)")
    #expect(try RemoteTests.digests(b).isEmpty)
    let status = try Self.remote(s3, b, ["status"])
    #expect(status.out.contains("1 corrupt"), "\(status.out)")
  }

  @Test("a read-only S3 remote is read, and refuses a push (exit 64) without sending anything")
  func readOnly() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let (writer, reader) = (scratch["w"], scratch["r"])
    try Self.add(s3, writer, bucket)
    let bytes = Bytes.random(2000, seed: 3007)
    let digest = try RemoteTests.put(writer, bytes, in: scratch)
    #expect(try Self.remote(s3, writer, ["push", digest.description]).status == 0)

    try Self.add(s3, reader, bucket, ["--read-only"])
    let got = try Self.trove(s3, reader, ["get", digest.description, "-"])
    #expect(got.status == 0 && got.stdout == bytes, "\(got.stderr)")
    let own = try RemoteTests.put(reader, Bytes.random(2000, seed: 3008), in: scratch)
    let push = try Self.remote(s3, reader, ["push", "--remote", "s3", own.description])
    #expect(push.status != 0 && push.errorLines.count == 1, "\(push.stderr)")
    #expect(try s3.object(bucket, "team/cas/\(own.hex.prefix(2))/\(own.hex)") == nil)
  }

  @Test(
    "a wrong secret, an unknown key id and a missing bucket each fail remote check in one line naming S3's code (exit 69), and no secret is printed"
  )
  func refusals() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let store = scratch["s"]
    try Self.add(s3, store, bucket)
    let secret = "wrong-secret-\(UInt32.random(in: 1...UInt32.max))"
    let cases: [([String: String], String, String)] = [
      (["AWS_SECRET_ACCESS_KEY": secret], "s3", "SignatureDoesNotMatch"),
      (["AWS_ACCESS_KEY_ID": "NOSUCHKEY0000000000"], "s3", "InvalidAccessKeyId"),
      ([:], "gone", "NoSuchBucket"),
    ]
    let missing = try Self.remote(
      s3, store,
      [
        "add", "gone", "s3://no-such-bucket-\(UInt16.random(in: 1...9999))/x",
        "--endpoint", s3.endpoint,
      ])
    #expect(missing.status == 0, "\(missing.stderr)")
    for (environment, name, code) in cases {
      let check = try Self.remote(s3, store, ["check", name], environment: environment)
      #expect(check.status == 69, "\(code): \(check.stderr)")
      #expect(
        check.out.contains(code) || check.stderr.contains(code), "\(check.out) \(check.stderr)")
      #expect(!check.out.contains(secret) && !check.stderr.contains(secret))
      #expect(!check.stderr.contains(s3.environment["AWS_SECRET_ACCESS_KEY"] ?? "?"))
    }
  }

  @Test(
    "over HTTPS, with the endpoint's certificate named by AWS_CA_BUNDLE or a profile's ca_bundle, a blob sent in one PUT and one sent in parts go up and come back to another store and hash to their names; without it the certificate is refused in one line (exit 69), and a bundle that is not a file is one line naming it (exit 78)"
  )
  func httpsWithCABundle() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let (a, b) = (scratch["a"], scratch["b"])
    // No profile of this machine's may name a bundle.
    let noProfile = ["AWS_CONFIG_FILE": scratch["no-config"]]
    let trusted = noProfile.merging(["AWS_CA_BUNDLE": s3.caBundle]) { $1 }
    for store in [a, b] {
      let added = try Self.remote(
        s3, store, ["add", "s3", "s3://\(bucket)/team", "--endpoint", s3.tlsEndpoint])
      #expect(added.status == 0, "\(added.stderr)")
    }
    let blobs = [Bytes.random(5000, seed: 3011), Bytes.random(9_000_001, seed: 3012)]
    let digests = try blobs.map { try RemoteTests.put(a, $0, in: scratch) }

    // The system's certificates (this variable may name them already).
    let untrusted = try Self.remote(
      s3, a, ["push"], environment: noProfile.merging(["AWS_CA_BUNDLE": ""]) { $1 })
    #expect(untrusted.status == 69 && untrusted.errorLines.count == 1, "\(untrusted.stderr)")
    #expect(
      untrusted.stderr.contains("certificate")
        && untrusted.stderr.contains("AWS_CA_BUNDLE or the profile's ca_bundle"),
      "\(untrusted.stderr)")
    let missing = try Self.remote(
      s3, a, ["push"],
      environment: noProfile.merging(["AWS_CA_BUNDLE": scratch["no-such-bundle"]]) { $1 })
    #expect(missing.status == 78 && missing.errorLines.count == 1, "\(missing.stderr)")
    #expect(missing.stderr.contains("AWS_CA_BUNDLE names '\(scratch["no-such-bundle"])'"))

    let push = try Self.remote(s3, a, ["push"], environment: trusted)
    #expect(push.status == 0, "\(push.stderr)")
    for digest in digests {
      let stored = try s3.object(bucket, "team/cas/\(digest.hex.prefix(2))/\(digest.hex)")
      #expect(stored.map { XXH3Hasher.digest($0) } == digest)
    }
    // The reader names the certificate in its profile instead.
    let config = try scratch.write(
      "config", Array("[default]\nca_bundle = \(s3.caBundle)\n".utf8))
    let pull = try Self.remote(
      s3, b, ["pull"] + digests.map(\.description),
      environment: ["AWS_CONFIG_FILE": config, "AWS_CA_BUNDLE": ""])
    #expect(pull.status == 0, "\(pull.stderr)")
    for (digest, bytes) in zip(digests, blobs) {
      let got = try Self.trove(s3, b, ["get", digest.description, "-"])
      let same = got.stdout == bytes
      #expect(got.status == 0 && same, "\(got.stderr)")
    }
  }

  @Test(
    "credentials come from an AWS profile file when the environment has none; an AWS_PROFILE no file holds is one line, exit 78"
  )
  func profileCredentials() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let store = scratch["s"]
    try Self.add(s3, store, bucket)
    let file = try scratch.write(
      "credentials",
      Array(
        """
        [default]
        aws_access_key_id = nobody

        [ci]
        aws_access_key_id = \(s3.environment["AWS_ACCESS_KEY_ID"] ?? "")
        aws_secret_access_key = \(s3.environment["AWS_SECRET_ACCESS_KEY"] ?? "")
        """.utf8))
    let fromFile: [String: String] = [
      "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SHARED_CREDENTIALS_FILE": file,
      "AWS_CONFIG_FILE": scratch["none"], "AWS_PROFILE": "ci",
    ]
    let check = try Self.remote(s3, store, ["check", "s3"], environment: fromFile)
    #expect(check.status == 0 && check.out.contains("writable"), "\(check.out) \(check.stderr)")

    var unknown = fromFile
    unknown["AWS_PROFILE"] = "nope"
    let refused = try Self.remote(s3, store, ["check", "s3"], environment: unknown)
    #expect(refused.status == 69 || refused.status == 78, "\(refused.stderr)")
    #expect(
      (refused.out + refused.stderr).contains("AWS_PROFILE names the profile 'nope'"),
      "\(refused.out) \(refused.stderr)")
  }

  @Test(
    "remote add refuses, in one line each (exit 64): a bucket S3 would refuse, a port or login in an s3:// URL, a prefix with '..', a bad region, S3 options on a WebDAV remote"
  )
  func addRefusals() throws {
    let scratch = try Scratch()
    let store = scratch["s"]
    let cases: [[String]] = [
      ["s3://Bad_Bucket/x"],
      ["s3://bucket:9000/x"],
      ["s3://key:secret@bucket/x"],
      ["s3://bucket/a/../b"],
      ["s3://bucket/x", "--region", "EU WEST"],
      ["s3://bucket/x", "--endpoint", "ftp://127.0.0.1"],
      ["http://127.0.0.1:9/x", "--region", "us-east-1"],
    ]
    for arguments in cases {
      let added = try RemoteTests.remote(store, ["add", "r"] + arguments)
      #expect(added.status == 64 && added.errorLines.count >= 1, "\(arguments): \(added.stderr)")
      #expect(!added.stderr.contains("secret"), "\(added.stderr)")
    }
    #expect(!FileManager.default.fileExists(atPath: store + "/remotes.json"))
  }
}
