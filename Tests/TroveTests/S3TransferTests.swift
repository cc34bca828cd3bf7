import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// Large objects on an `s3://` remote (Ceph's radosgw, one per test run, a
/// bucket per test): multipart uploads sent in parallel parts, pulls in
/// parallel ranges, uploads left by a killed process or a server gone
/// mid-push, and `remote check --clean`; many small objects sent and
/// fetched several at once over a few connections.
@Suite("S3 large transfers on Ceph radosgw", .enabled(if: CephS3.isInstalled, CephS3.missing))
struct S3TransferTests {
  /// The unfinished multipart uploads in `bucket` (ListMultipartUploads,
  /// read with curl).
  static func pendingUploads(_ s3: CephS3, _ bucket: String) throws -> Int {
    let listed = try s3.curl("/\(bucket)/?uploads=")
    guard listed.text.hasSuffix("\n200") else {
      throw TestFailure("cannot list the uploads of \(bucket): \(listed.text) \(listed.stderr)")
    }
    return listed.text.components(separatedBy: "<Upload>").count - 1
  }

  /// The ETag the server gives `key` in `bucket` (HEAD with curl).
  static func etag(_ s3: CephS3, _ bucket: String, _ key: String) throws -> String? {
    let head = try s3.curl("/\(bucket)/\(key)", ["-I"])
    return head.text.split(separator: "\r\n").first { $0.lowercased().hasPrefix("etag:") }
      .map { String($0.dropFirst(5)).trimmingCharacters(in: .whitespaces) }
  }

  static func blobKey(_ digest: BlobDigest) -> String {
    "team/cas/\(digest.hex.prefix(2))/\(digest.hex)"
  }

  @Test(
    "a blob of 10 parts goes up as one multipart upload (ETag -10) whose bytes on the server hash to its name; pulled in ranges into two stores (5 MiB parts and the default) it is the same bytes"
  )
  func parallelRoundTrip() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let (a, b, c) = (scratch["a"], scratch["b"], scratch["c"])
    try S3RemoteTests.add(s3, a, bucket, ["--write", "off", "--part-size", "5MiB"])
    let bytes = Bytes.random((45 << 20) + 321, seed: 3301)
    let digest = try RemoteTests.put(a, bytes, in: scratch)
    let pushed = try S3RemoteTests.remote(s3, a, ["push", digest.description])
    #expect(pushed.status == 0, "\(pushed.stderr)")
    #expect(try Self.etag(s3, bucket, Self.blobKey(digest))?.hasSuffix("-10\"") == true)
    #expect(try s3.object(bucket, Self.blobKey(digest)).map { XXH3Hasher.digest($0) } == digest)
    #expect(try Self.pendingUploads(s3, bucket) == 0)
    // The check reads the server's clock: this one is the machine's own.
    let check = try S3RemoteTests.remote(s3, a, ["check", "s3", "--json"])
    let fields = try #require(
      try JSONSerialization.jsonObject(with: Data(check.stdout)) as? [String: Any])
    #expect(check.status == 0 && fields["writable"] as? Bool == true, "\(check.stderr)")
    #expect((fields["clockSkewSeconds"] as? Int).map { abs($0) <= 5 } == true, "\(fields)")
    #expect(fields["pendingUploads"] is NSNull)

    try S3RemoteTests.add(s3, b, bucket, ["--part-size", "5MiB"])
    try S3RemoteTests.add(s3, c, bucket)
    for store in [b, c] {
      let pulled = try S3RemoteTests.remote(s3, store, ["pull", digest.description])
      #expect(pulled.status == 0, "\(pulled.stderr)")
      let got = try S3RemoteTests.trove(s3, store, ["get", digest.description, "-"])
      #expect(got.status == 0 && got.stdout == bytes, "\(got.stderr)")
    }
  }

  @Test(
    "remote add refuses a part size S3 would refuse (under 5 MiB, over 5 GiB) and --part-size on a WebDAV remote, naming it in one line (exit 64)",
    arguments: [
      ["s3://b-parts/team", "--part-size", "4MiB"], ["s3://b-parts/team", "--part-size", "6GiB"],
      ["http://127.0.0.1:1/dav", "--part-size", "8MiB"],
    ])
  func partSizeRefused(_ arguments: [String]) throws {
    let s3 = try CephS3.get()
    let scratch = try Scratch()
    let endpoint = arguments[0].hasPrefix("s3") ? ["--endpoint", s3.endpoint] : []
    let added = try S3RemoteTests.remote(s3, scratch["s"], ["add", "x"] + arguments + endpoint)
    // The error, then the usage hint.
    let error = try #require(added.errorLines.first)
    #expect(added.status == 64, "\(added.stderr)")
    #expect(error.contains("--part-size"), "\(error)")
  }

  @Test(
    "a 200 MiB push killed (kill -9) mid-upload leaves an unfinished upload and no object; remote check --clean aborts it and says so; a new push completes"
  )
  func killedMidUpload() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let store = scratch["s"]
    try S3RemoteTests.add(s3, store, bucket, ["--write", "off"])
    let bytes = Bytes.random(200 << 20, seed: 3302)
    let digest = try RemoteTests.put(store, bytes, in: scratch)
    let push = try Spawned(
      ["--store", store, "remote", "push", digest.description], io: scratch["push"],
      environment: s3.environment)
    let started = poll(
      times: 1500, while: { push.process.isRunning },
      { (try? Self.pendingUploads(s3, bucket)).flatMap { $0 > 0 ? true : nil } })
    usleep(200_000)
    push.kill()
    let ended = try push.wait()
    try #require(started == true && ended.killed, "the push ended before it could be killed")
    #expect(try Self.pendingUploads(s3, bucket) == 1)
    #expect(try s3.object(bucket, Self.blobKey(digest)) == nil)

    let kept = try S3RemoteTests.remote(s3, store, ["check", "s3", "--clean"])
    #expect(kept.status == 0 && kept.out.contains("1 unfinished multipart upload, 0 aborted"))
    #expect(try Self.pendingUploads(s3, bucket) == 1)
    let cleaned = try S3RemoteTests.remote(
      s3, store, ["check", "s3", "--clean", "--older-than", "0"])
    #expect(cleaned.status == 0, "\(cleaned.stderr)")
    #expect(cleaned.out.contains("1 unfinished multipart upload, 1 aborted"), "\(cleaned.out)")
    #expect(try Self.pendingUploads(s3, bucket) == 0)
    #expect(try s3.object(bucket, Self.blobKey(digest)) == nil)

    let again = try S3RemoteTests.remote(s3, store, ["push", digest.description])
    #expect(again.status == 0, "\(again.stderr)")
    #expect(try s3.object(bucket, Self.blobKey(digest)).map { XXH3Hasher.digest($0) } == digest)
  }

  @Test(
    "radosgw unreachable mid-push (its port dead): the push fails in one line, the object stays queued and is read locally; back on the port, the queue drains and check --clean aborts the upload left behind"
  )
  func unreachableMidPush() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let store = scratch["s"]
    let target = try #require(URL(string: s3.endpoint)?.port)
    let relayScript = repositoryRoot + "/Tests/Servers/tcp_relay.py"
    // Client bytes at 20 MB/s: the push is still going when the relay goes.
    var (relay, port) = try startPython(
      "the TCP relay", [relayScript, String(target), scratch["port"], "0", "20000000"],
      state: scratch)
    defer { relay.kill() }
    let endpoint = "http://127.0.0.1:\(port)"
    #expect(
      try S3RemoteTests.remote(
        s3, store, ["add", "s3", "s3://\(bucket)/team", "--endpoint", endpoint, "--write", "off"]
      ).status == 0)
    let bytes = Bytes.random(48 << 20, seed: 3303)
    let digest = try RemoteTests.put(store, bytes, in: scratch)
    let push = try Spawned(
      ["--store", store, "remote", "push"], io: scratch["push"], environment: s3.environment)
    let started = poll(
      times: 1500, while: { push.process.isRunning },
      { (try? Self.pendingUploads(s3, bucket)).flatMap { $0 > 0 ? true : nil } })
    relay.kill()
    _ = try relay.wait()
    let pushed = try push.wait()
    try #require(started == true, "the push ended before the relay could be stopped")
    #expect([69, 75].contains(pushed.status), "\(pushed.status): \(pushed.stderr)")
    #expect(pushed.errorLines.count == 1, "\(pushed.stderr)")
    let queued = try #require(try RemoteReadThroughTests.status(store)["s3"])
    #expect(queued["queuedObjects"] as? Int == 1, "\(queued)")
    #expect(try S3RemoteTests.trove(s3, store, ["get", digest.description, "-"]).stdout == bytes)
    #expect(try s3.object(bucket, Self.blobKey(digest)) == nil)

    try FileManager.default.removeItem(atPath: scratch["port"])
    (relay, port) = try startPython(
      "the TCP relay", [relayScript, String(target), scratch["port"], String(port)],
      state: scratch)
    let drained = try S3RemoteTests.remote(s3, store, ["push"])
    #expect(drained.status == 0, "\(drained.stderr)")
    #expect(try RemoteReadThroughTests.status(store)["s3"]?["queuedObjects"] as? Int == 0)
    #expect(try s3.object(bucket, Self.blobKey(digest)).map { XXH3Hasher.digest($0) } == digest)
    let cleaned = try S3RemoteTests.remote(
      s3, store, ["check", "s3", "--clean", "--older-than", "0"])
    #expect(cleaned.status == 0, "\(cleaned.stderr)")
    #expect(try Self.pendingUploads(s3, bucket) == 0)
  }

  @Test(
    "interop with real clients: a blob Trove pushed in parts is fetched by boto3 and by aws s3 cp and hashes to its name; one boto3 uploaded in parts under the layout is read through by digest",
    .enabled(if: BotoClient.isInstalled, BotoClient.missing))
  func realClients() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let store = scratch["s"]
    try S3RemoteTests.add(s3, store, bucket, ["--write", "off"])
    let ours = Bytes.random((20 << 20) + 17, seed: 3304)
    let digest = try RemoteTests.put(store, ours, in: scratch)
    #expect(try S3RemoteTests.remote(s3, store, ["push", digest.description]).status == 0)
    let fetched = try BotoClient.run(s3, "get", bucket, Self.blobKey(digest), scratch["boto3"])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    #expect(try XXH3Hasher.digest(ofFile: scratch["boto3"]) == digest)
    let copied = try BotoClient.aws(
      s3,
      ["s3", "cp", "--only-show-errors", "s3://\(bucket)/\(Self.blobKey(digest))", scratch["aws"]])
    #expect(copied.status == 0, "\(copied.stderr)")
    #expect(try XXH3Hasher.digest(ofFile: scratch["aws"]) == digest)

    let theirs = Bytes.random((30 << 20) + 5, seed: 3305)
    let theirDigest = XXH3Hasher.digest(theirs)
    let uploaded = try BotoClient.run(
      s3, "put", bucket, Self.blobKey(theirDigest), try scratch.write("theirs", theirs))
    #expect(uploaded.status == 0, "\(uploaded.stderr)")
    let got = try S3RemoteTests.trove(s3, store, ["get", theirDigest.description, "-"])
    #expect(got.status == 0 && got.stdout == theirs, "\(got.stderr)")
    #expect(try RemoteTests.digests(store).contains(theirDigest))
  }

  @Test(
    "remote check reads the clock skew from the server's Date: 5 minutes ahead is reported and works; 20 minutes ahead fails in one line saying SigV4 will fail (exit 69)",
    .enabled(
      if: FileManager.default.isExecutableFile(atPath: "/usr/bin/faketime"),
      "faketime is not installed: scripts/deps.sh test installs it"))
  func clockSkew() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let store = scratch["s"]
    try S3RemoteTests.add(s3, store, bucket)
    func check(_ offset: String) throws -> Outcome {
      try Spawned(
        executable: "/usr/bin/faketime",
        ["-f", offset, CLI.executable, "--store", store, "remote", "check", "s3", "--json"],
        io: scratch["check"], environment: s3.environment
      ).wait()
    }
    let near = try check("+5m")
    let fields = try #require(
      try JSONSerialization.jsonObject(with: Data(near.stdout)) as? [String: Any])
    #expect(near.status == 0, "\(near.stderr)")
    #expect((fields["clockSkewSeconds"] as? Int).map { (290...310).contains($0) } == true)
    let far = try check("+20m")
    #expect(far.status == 69 && far.errorLines.count == 1, "\(far.stderr)")
    // About 1,200 s: the server's Date has whole seconds, and a loaded
    // machine takes a moment between the request and the reading.
    let said = far.stderr.firstMatch(of: /clock is (\d+) s ahead of the server's/)
      .flatMap { Int($0.1) }
    #expect(said.map { (1190...1210).contains($0) } == true, "\(far.stderr)")
    #expect(far.stderr.contains("SigV4-signed request will fail"), "\(far.stderr)")
  }
  /// Puts each of `contents` into `store` in one `trove put`; their digests.
  static func putMany(_ store: String, _ contents: [[UInt8]], in scratch: Scratch) throws
    -> [BlobDigest]
  {
    let files = try contents.enumerated().map { try scratch.write("many-\($0.offset)", $0.element) }
    let put = try CLI.run(["--store", store, "put"] + files)
    guard put.status == 0 else { throw TestFailure("put failed: \(put.stderr)") }
    return contents.map { XXH3Hasher.digest($0) }
  }

  @Test(
    "200 small objects: the queue's push, the pull of all 200 into another store and a push of all 200 by digest from there each go over a few reused connections (counted by a TCP relay), and every object arrives intact on the server and in the other store"
  )
  func manySmallObjects() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let (a, b) = (scratch["a"], scratch["b"])
    let target = try #require(URL(string: s3.endpoint)?.port)
    let accepts = scratch["accepts"]
    let (relay, port) = try startPython(
      "the TCP relay",
      [
        repositoryRoot + "/Tests/Servers/tcp_relay.py", String(target), scratch["port"], "0", "0",
        accepts,
      ],
      state: scratch)
    defer { relay.kill() }
    for store in [a, b] {
      let added = try S3RemoteTests.remote(
        s3, store,
        [
          "add", "s3", "s3://\(bucket)/team", "--endpoint", "http://127.0.0.1:\(port)", "--write",
          "off",
        ])
      #expect(added.status == 0, "\(added.stderr)")
    }
    let contents = (0..<200).map { Bytes.random(1000 + $0 * 97, seed: 3400 + UInt64($0)) }
    let digests = try Self.putMany(a, contents, in: scratch)
    func connections() -> Int {
      ((try? String(contentsOfFile: accepts, encoding: .utf8)) ?? "").split(separator: "\n").count
    }
    // A session per object in flight, and the connection that read the layout.
    let most = RemoteSessions.standardWidth + 1

    let pushed = try S3RemoteTests.remote(s3, a, ["push"])
    #expect(pushed.status == 0, "\(pushed.stderr)")
    #expect(
      pushed.out.split(separator: "\n").filter { $0.hasSuffix("uploaded to 's3'") }.count == 200)
    let pushConnections = connections()
    #expect((2...most).contains(pushConnections), "\(pushConnections) connections")
    let library = try Store(StoreConfiguration(root: a, createIfMissing: false))
    #expect(try library.uploadQueueLength(for: "s3").objects == 0)
    for (digest, bytes) in zip(digests, contents) where digest.hex.hasPrefix("0") {
      #expect(try s3.object(bucket, Self.blobKey(digest)) == bytes)
    }

    let pulled = try S3RemoteTests.remote(s3, b, ["pull"] + digests.map(\.description))
    #expect(pulled.status == 0, "\(pulled.stderr)")
    #expect(
      pulled.out.split(separator: "\n").filter { $0.hasSuffix("pulled from 's3'") }.count == 200)
    let pullConnections = connections() - pushConnections
    #expect((2...most).contains(pullConnections), "\(pullConnections) connections")
    #expect(Set(try RemoteTests.digests(b)) == Set(digests))
    for (digest, bytes) in zip(digests, contents) where digest.hex.hasPrefix("1") {
      #expect(try S3RemoteTests.trove(s3, b, ["get", digest.description, "-"]).stdout == bytes)
    }

    let before = connections()
    let again = try S3RemoteTests.remote(s3, b, ["push"] + digests.map(\.description))
    #expect(again.status == 0, "\(again.stderr)")
    #expect(
      again.out.split(separator: "\n").filter { $0.hasSuffix("already on 's3'") }.count == 200)
    #expect((2...most).contains(connections() - before), "\(connections() - before) connections")
  }

  @Test(
    "among 30 objects sent together (one of 20 MiB, in parts), one corrupt here fails alone (exit 65) and stays queued while the other 29 go up and are confirmed; pulled together (the large one in ranges), one replaced on the server and one missing there fail alone and the other 28 are stored"
  )
  func oneOfManyFailsAlone() throws {
    let s3 = try CephS3.get()
    let bucket = try s3.makeBucket()
    let scratch = try Scratch()
    let (a, b) = (scratch["a"], scratch["b"])
    try S3RemoteTests.add(s3, a, bucket, ["--write", "off"])
    try S3RemoteTests.add(s3, b, bucket)
    let contents =
      (0..<29).map { Bytes.random(2000 + $0 * 501, seed: 3500 + UInt64($0)) }
      + [Bytes.random((20 << 20) + 77, seed: 3530)]
    let digests = try Self.putMany(a, contents, in: scratch)
    let library = try Store(StoreConfiguration(root: a, createIfMissing: false))
    let (corrupt, replaced) = (digests[7], digests[3])
    let path = library.objectFilePath(corrupt)
    var changed = contents[7]
    changed[changed.count / 2] ^= 1
    try? FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
    try Data(changed).write(to: URL(fileURLWithPath: path))

    let pushed = try S3RemoteTests.remote(s3, a, ["push"])
    #expect(pushed.status == 65 && pushed.errorLines.count == 1, "\(pushed.stderr)")
    #expect(pushed.stderr.contains("object \(corrupt) in store"), "\(pushed.stderr)")
    #expect(try library.uploadQueueLength(for: "s3").objects == 1)
    for (digest, bytes) in zip(digests, contents) {
      #expect(try s3.object(bucket, Self.blobKey(digest)) == (digest == corrupt ? nil : bytes))
    }

    try s3.put(Bytes.random(2000 + 3 * 501, seed: 3599), bucket, Self.blobKey(replaced))
    let pulled = try S3RemoteTests.remote(s3, b, ["pull"] + digests.map(\.description))
    #expect(pulled.status == 65 && pulled.errorLines.count == 2, "\(pulled.stderr)")
    #expect(pulled.errorLines[0].contains(replaced.description), "\(pulled.stderr)")
    #expect(pulled.errorLines[1].contains(corrupt.description), "\(pulled.stderr)")
    #expect(Set(try RemoteTests.digests(b)) == Set(digests).subtracting([corrupt, replaced]))
  }
}
