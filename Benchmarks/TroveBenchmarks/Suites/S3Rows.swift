import Foundation

/// S3 rows of the remote suite: `trove remote push` and `pull` against a
/// one-node Ceph radosgw on 127.0.0.1 (`scripts/s3-ceph.sh`, memstore), beside
/// `curl --aws-sigv4` and, when `scripts/deps.sh test` installed it, `aws s3
/// cp` making the same transfers. The cluster is started again (same port,
/// same keys) before each timed upload: radosgw frees deleted data only after
/// its garbage collection, and memstore holds about twice what it stores in
/// RAM. On loopback, this measures the clients, not a cloud.
func s3Rows(_ b: Bench, files: String) throws {
  print("remote (S3)")
  let script = FileManager.default.currentDirectoryPath + "/scripts/s3-ceph.sh"
  guard FileManager.default.isExecutableFile(atPath: "/usr/bin/radosgw") else {
    b.skip("remote s3", "Ceph is not installed: scripts/deps.sh test installs it")
    return
  }
  let aws = FileManager.default.currentDirectoryPath + "/.build/test-tools/python/bin/aws"
  let hasAWS = FileManager.default.isExecutableFile(atPath: aws)
  if !hasAWS {
    b.skip("remote s3 aws", "awscli is not installed: scripts/deps.sh test installs it")
  }
  let cluster = b.work + "/remote-s3"
  let (a, reader) = (b.work + "/remote-s3-a", b.work + "/remote-s3-b")
  let port = try Spawn.capture([
    "python3", "-c",
    "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])",
  ]).trimmingCharacters(in: .whitespacesAndNewlines)
  let access = "TROVEBENCH" + String(UInt64.random(in: 0..<1 << 40), radix: 16).uppercased()
  let secret = UUID().uuidString.replacingOccurrences(of: "-", with: "")
  let tlsPort = try Spawn.capture([
    "python3", "-c",
    "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])",
  ]).trimmingCharacters(in: .whitespacesAndNewlines)
  let endpoint = "http://127.0.0.1:\(port)"
  let tlsEndpoint = "https://127.0.0.1:\(tlsPort)"
  // Made again at each start of the cluster, at the same path.
  let caBundle = cluster + "/tls/cert.pem"
  let bucket = "bench"
  let sign = [
    "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", access + ":" + secret, "-H",
    "x-amz-content-sha256: UNSIGNED-PAYLOAD",
  ]
  let hugeSize = b.size(4 << 30, quick: 64 << 20)
  /// A fresh cluster on the same port, with the bucket.
  func restart() throws {
    _ = try? Spawn.run([script, "stop", cluster])
    remove(cluster)
    // Room in memstore for the largest object and its neighbours (a cap,
    // not an allocation).
    try Spawn.check([
      "env", "S3_CEPH_RGW_PORT=\(port)", "S3_CEPH_RGW_TLS_PORT=\(tlsPort)",
      "S3_ACCESS_KEY=\(access)", "S3_SECRET_KEY=\(secret)",
      "S3_CEPH_MEM_BYTES=\(max(4 << 30, 2 * hugeSize + (1 << 30)))", script, "start", cluster,
    ])
    try Spawn.check(["curl", "-sSf", "-X", "PUT"] + sign + [endpoint + "/" + bucket])
  }
  let variables = [
    "AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1",
    "AWS_ENDPOINT_URL": endpoint, "AWS_CA_BUNDLE": caBundle,
  ]
  for (name, value) in variables { setenv(name, value, 1) }
  defer {
    for name in variables.keys { unsetenv(name) }
    _ = try? Spawn.run([script, "stop", cluster])
    for path in [cluster, a, reader] { remove(path) }
  }
  try restart()
  let url = "s3://\(bucket)/team"
  func add(_ store: String) throws {
    for (name, base) in [("s3", endpoint), ("s3tls", tlsEndpoint)] {
      try Spawn.check([
        b.trove, "--store", store, "remote", "add", name, url, "--endpoint", base, "--write", "off",
      ])
    }
  }
  func readd(_ store: String) throws {
    for name in ["s3", "s3tls"] {
      try Spawn.check([b.trove, "--store", store, "remote", "rm", name])
    }
    try add(store)
  }
  func resetReader() throws {
    remove(reader)
    try add(reader)
  }
  try add(a)
  func key(_ digest: String) -> String {
    let hex = digest.dropFirst("xxh128:".count)
    return "team/cas/\(hex.prefix(2))/\(hex)"
  }

  // One large object, over HTTP and over HTTPS (the same bucket and
  // prefix through a second remote on the TLS port).
  let size = b.size(1 << 30, quick: 32 << 20)
  let big = files + "/s3-big.bin"
  try makeRandomFile(big, bytes: size)
  let digest = String(try Spawn.capture([b.trove, "--store", a, "put", big]).prefix(39))
  let out = files + "/s3-out.bin"
  for (scheme, remote, base) in [("HTTP", "s3", endpoint), ("HTTPS", "s3tls", tlsEndpoint)] {
    let over = " over \(scheme)"
    let tls = scheme == "HTTPS" ? ["--cacert", caBundle] : []
    // radosgw 16 refuses the aws-chunked bodies with a checksum trailer
    // that awscli sends over HTTPS by default (MissingContentLength).
    let awsCommand =
      scheme == "HTTPS"
      ? [
        "env", "AWS_REQUEST_CHECKSUM_CALCULATION=when_required", aws, "--endpoint-url", tlsEndpoint,
      ]
      : [aws]
    let params = [
      "size": "\(size)", "server": "Ceph radosgw 16 (memstore) on 127.0.0.1", "scheme": scheme,
    ]
    var pushCommands = [
      [b.trove, "--store", a, "-q", "remote", "push", "--remote", remote, digest],
      ["curl", "-sSf", "-o", "/dev/null"] + tls + sign + ["-T", big, base + "/\(bucket)/curl-put"],
    ]
    if hasAWS {
      pushCommands.append(
        awsCommand + ["s3", "cp", "--only-show-errors", big, "s3://\(bucket)/aws-put"])
    }
    let pushed = try b.timeCommands(pushCommands) { try restart() }
    b.add(
      Result(
        suite: "remote", name: "push \(sizeName(size)) to S3" + over, parameters: params,
        unit: .seconds, trove: pushed[0], referenceName: "curl --aws-sigv4 -T FILE (one PUT)",
        reference: pushed[1],
        note: scheme == "HTTP"
          ? "trove HEADs, then a multipart upload: 8 MiB parts read and hashed in order, 3 sent at once, each with its SHA-256 (signed; the server checks it); completed only if the whole hashed to its name. curl sends UNSIGNED-PAYLOAD"
          : "as over HTTP, but the parts go as UNSIGNED-PAYLOAD (TLS authenticates them), as curl's one PUT"
      ))
    if hasAWS {
      b.add(
        Result(
          suite: "remote", name: "push \(sizeName(size)) to S3" + over, parameters: params,
          unit: .seconds, trove: pushed[0], referenceName: "aws s3 cp FILE", reference: pushed[2],
          note: scheme == "HTTP"
            ? "awscli: 8 MiB parts, 10 threads, each part's SHA-256 signed and a CRC32"
            : "awscli: 8 MiB parts, 10 threads, no checksum trailer, so each part's SHA-256 signed")
      )
    }
    try restart()
    try Spawn.check([b.trove, "--store", a, "-q", "remote", "push", "--remote", remote, digest])
    let objectURL = base + "/\(bucket)/" + key(digest)
    var pullCommands = [
      [b.trove, "--store", reader, "-q", "remote", "pull", "--remote", remote, digest],
      ["curl", "-sSf", "-o", out] + tls + sign + [objectURL],
      ["sh", "-c", "curl \"$@\" && sync \"$0\"", out, "-sSf", "-o", out] + tls + sign + [objectURL],
    ]
    if hasAWS {
      pullCommands.append(
        awsCommand + [
          "s3", "cp", "--only-show-errors", "s3://\(bucket)/" + key(digest), out,
        ])
    }
    let pulled = try b.timeCommands(pullCommands) {
      try resetReader()
      remove(out)
    }
    b.add(
      Result(
        suite: "remote", name: "pull \(sizeName(size)) from S3" + over, parameters: params,
        unit: .seconds, trove: pulled[0], referenceName: "curl --aws-sigv4 -o FILE (one GET)",
        reference: pulled[1],
        note:
          "trove: 4 MiB ranges, 4 at once, written in order, hashed in one pass, fsynced before it is published"
      ))
    b.add(
      Result(
        suite: "remote", name: "pull \(sizeName(size)) from S3" + over, parameters: params,
        unit: .seconds, trove: pulled[0],
        referenceName: "curl --aws-sigv4 -o FILE && sync FILE (one GET)", reference: pulled[2],
        note: "the same durability as trove, without the hash"))
    if hasAWS {
      b.add(
        Result(
          suite: "remote", name: "pull \(sizeName(size)) from S3" + over, parameters: params,
          unit: .seconds, trove: pulled[0], referenceName: "aws s3 cp s3://… FILE",
          reference: pulled[3], note: "awscli: ranged GETs on 10 threads, no fsync"))
    }
  }
  try resetReader()
  remove(out)
  let mib = { (bytes: Int64) in Series(samples: [Double(bytes) / 1_048_576]) }
  let trovePeak = try Spawn.peakResidentBytes([
    b.trove, "--store", reader, "-q", "remote", "pull", "--remote", "s3", digest,
  ])
  let curlPeak = try Spawn.peakResidentBytes(
    ["curl", "-sSf", "-o", out] + sign + [endpoint + "/\(bucket)/" + key(digest)])
  b.add(
    Result(
      suite: "remote", name: "peak RSS, pull \(sizeName(size)) from S3",
      parameters: ["size": "\(size)"], unit: .mebibytes, trove: mib(trovePeak),
      referenceName: "curl --aws-sigv4 -o FILE", reference: mib(curlPeak),
      note: "trove holds at most 5 ranges of 4 MiB and its writer's 4 × 2 MiB buffers"))
  try restart()
  let trovePushPeak = try Spawn.peakResidentBytes([
    b.trove, "--store", a, "-q", "remote", "push", "--remote", "s3", digest,
  ])
  let curlPushPeak = try Spawn.peakResidentBytes(
    ["curl", "-sSf", "-o", "/dev/null"] + sign + ["-T", big, endpoint + "/\(bucket)/curl-put"])
  b.add(
    Result(
      suite: "remote", name: "peak RSS, push \(sizeName(size)) to S3",
      parameters: ["size": "\(size)"], unit: .mebibytes, trove: mib(trovePushPeak),
      referenceName: "curl --aws-sigv4 -T FILE", reference: mib(curlPushPeak),
      note: "trove holds one 8 MiB part per sender (3)"))
  remove(big)
  remove(out)
  try Spawn.check([b.trove, "--store", a, "-q", "rm", digest])

  // A 4 GiB push and pull, each once, beside curl: time and peak RSS. The
  // cluster starts again before each upload, so that memstore holds one
  // copy at a time.
  let huge = files + "/s3-huge.bin"
  try makeRandomFile(huge, bytes: hugeSize)
  let hugeDigest = String(try Spawn.capture([b.trove, "--store", a, "put", huge]).prefix(39))
  let hugeParams = ["size": "\(hugeSize)", "server": "Ceph radosgw 16 (memstore) on 127.0.0.1"]
  try restart()
  let trovePush = try Spawn.timedPeakResidentBytes([
    b.trove, "--store", a, "-q", "remote", "push", "--remote", "s3", hugeDigest,
  ])
  try restart()
  let curlPush = try Spawn.timedPeakResidentBytes(
    ["curl", "-sSf", "-o", "/dev/null"] + sign + ["-T", huge, endpoint + "/\(bucket)/curl-put"])
  try restart()
  try Spawn.check([b.trove, "--store", a, "-q", "remote", "push", "--remote", "s3", hugeDigest])
  try resetReader()
  let trovePull = try Spawn.timedPeakResidentBytes([
    b.trove, "--store", reader, "-q", "remote", "pull", "--remote", "s3", hugeDigest,
  ])
  let curlPull = try Spawn.timedPeakResidentBytes(
    ["curl", "-sSf", "-o", out] + sign + [endpoint + "/\(bucket)/" + key(hugeDigest)])
  remove(huge)
  remove(out)
  try Spawn.check([b.trove, "--store", a, "-q", "rm", hugeDigest])
  try resetReader()
  try restart()
  let once = { (seconds: Double) in Series(samples: [seconds]) }
  for (what, trove, curl, reference) in [
    ("push \(sizeName(hugeSize)) to S3", trovePush, curlPush, "curl --aws-sigv4 -T FILE (one PUT)"),
    (
      "pull \(sizeName(hugeSize)) from S3", trovePull, curlPull,
      "curl --aws-sigv4 -o FILE (one GET)"
    ),
  ] {
    b.add(
      Result(
        suite: "remote", name: what, parameters: hugeParams, unit: .seconds,
        trove: once(trove.seconds), referenceName: reference, reference: once(curl.seconds),
        note: "one run each"))
    b.add(
      Result(
        suite: "remote", name: "peak RSS, " + what, parameters: hugeParams, unit: .mebibytes,
        trove: mib(trove.bytes), referenceName: reference, reference: mib(curl.bytes),
        note: "one run each"))
  }

  // Many small objects.
  let count = b.size(1000, quick: 100)
  let smallDir = files + "/s3-small"
  try FileManager.default.createDirectory(atPath: smallDir, withIntermediateDirectories: true)
  var digests: [String] = []
  var list: [String] = []
  for i in 0..<count {
    let file = smallDir + "/o\(i)"
    try makeRandomFile(file, bytes: 16 << 10 + i)
    digests.append(String(try Spawn.capture([b.trove, "--store", a, "put", file]).prefix(39)))
    list.append("-T \(file) \(endpoint)/\(bucket)/c/o\(i)")
  }
  let putList = files + "/s3-puts.txt"
  try list.joined(separator: "\n").write(toFile: putList, atomically: true, encoding: .utf8)
  let xargs =
    "xargs -P8 -L1 curl -sSf -o /dev/null " + sign.map { "'\($0)'" }.joined(separator: " ")
  let smallParams = [
    "objects": "\(count)", "size": "16 KiB", "server": "Ceph radosgw 16 (memstore) on 127.0.0.1",
  ]
  var manyPushes = [
    [b.trove, "--store", a, "-q", "remote", "push", "--remote", "s3", "--all"],
    ["sh", "-c", xargs + " < \"$0\"", putList],
  ]
  if hasAWS {
    manyPushes.append([
      aws, "s3", "cp", "--only-show-errors", "--recursive", smallDir, "s3://\(bucket)/aws/",
    ])
  }
  let pushMany = try b.timeCommands(manyPushes) {
    try restart()
    // Forget what the remote held: removing and adding it again does.
    try readd(a)
  }
  b.add(
    Result(
      suite: "remote", name: "push \(count) × 16 KiB to S3", parameters: smallParams,
      unit: .seconds, trove: pushMany[0], referenceName: "xargs -P8 curl --aws-sigv4 -T",
      reference: pushMany[1],
      note:
        "trove: 8 objects in flight through one curl_multi, connections kept; each verified, HEAD, then PUT with its SHA-256"
    ))
  if hasAWS {
    b.add(
      Result(
        suite: "remote", name: "push \(count) × 16 KiB to S3", parameters: smallParams,
        unit: .seconds, trove: pushMany[0], referenceName: "aws s3 cp --recursive",
        reference: pushMany[2], note: "awscli: 10 threads"))
  }
  try restart()
  try readd(a)
  try Spawn.check([b.trove, "--store", a, "-q", "remote", "push", "--remote", "s3", "--all"])
  let getDir = files + "/s3-got"
  let getList = files + "/s3-gets.txt"
  try digests.enumerated().map { "-o \(getDir)/g\($0.0) \(endpoint)/\(bucket)/\(key($0.1))" }
    .joined(separator: "\n").write(toFile: getList, atomically: true, encoding: .utf8)
  var manyPulls = [
    [b.trove, "--store", reader, "-q", "remote", "pull", "--remote", "s3"] + digests,
    ["sh", "-c", xargs.replacingOccurrences(of: "-o /dev/null ", with: "") + " < \"$0\"", getList],
  ]
  if hasAWS {
    manyPulls.append([
      aws, "s3", "cp", "--only-show-errors", "--recursive", "s3://\(bucket)/team/cas", getDir,
    ])
  }
  let pullMany = try b.timeCommands(manyPulls) {
    try resetReader()
    remove(getDir)
    try FileManager.default.createDirectory(atPath: getDir, withIntermediateDirectories: true)
  }
  b.add(
    Result(
      suite: "remote", name: "pull \(count) × 16 KiB from S3", parameters: smallParams,
      unit: .seconds, trove: pullMany[0], referenceName: "xargs -P8 curl --aws-sigv4 -o",
      reference: pullMany[1],
      note:
        "trove: 8 objects in flight through one curl_multi (HEAD, GET each), each rehashed; the commits arriving together share a group commit"
    ))
  if hasAWS {
    b.add(
      Result(
        suite: "remote", name: "pull \(count) × 16 KiB from S3", parameters: smallParams,
        unit: .seconds, trove: pullMany[0], referenceName: "aws s3 cp --recursive",
        reference: pullMany[2], note: "awscli: a listing, then 10 threads"))
  }
  remove(smallDir)
  remove(getDir)
}

/// The S3 rows of the remote suite alone (`--suite remote-s3`).
func remoteS3Suite(_ b: Bench) throws {
  let files = b.work + "/remote-s3-files"
  try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)
  defer { remove(files) }
  try s3Rows(b, files: files)
}
