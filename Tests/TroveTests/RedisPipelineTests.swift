import Foundation
import Testing

@testable import Trove

/// The pipelined Redis upload against a real redis-server: rounds sent
/// before the earlier ones are answered store every blob exactly, and the
/// publish script, run by `EVALSHA`, survives the server forgetting it.
@Suite(.enabled(if: RedisServer.executable != nil, RedisServer.missing))
struct RedisPipelineTests {
  /// `blobs` written to files in `scratch`, open for reading, as upload items.
  static func items(_ blobs: [[UInt8]], in scratch: Scratch) throws -> [RemoteUploadItem] {
    try blobs.map { bytes in
      let path = try scratch.write("blob-\(UUID().uuidString)", bytes)
      return RemoteUploadItem(
        digest: XXH3Hasher.digest(bytes), file: try FileDescriptor.open(path),
        size: Int64(bytes.count))
    }
  }

  /// What happened in one upload sequence, in order: `asked` when the
  /// backend took an item, `done` when it gave one's outcome.
  enum Event: Equatable {
    case asked(Int)
    case done(Int)
  }

  /// Uploads `items` as one sequence on `backend`: each outcome (nil: none
  /// given), and the events in order.
  static func upload(_ items: [RemoteUploadItem], to backend: any RemoteBackend)
    -> (outcomes: [Result<RemoteUpload, TroveError>?], events: [Event])
  {
    var outcomes = [Result<RemoteUpload, TroveError>?](repeating: nil, count: items.count)
    var events: [Event] = []
    var next = 0
    backend.uploadSequence(
      { () -> RemoteUploadItem? in
        guard next < items.count else { return nil }
        events.append(.asked(next))
        next += 1
        return items[next - 1]
      },
      done: { place, outcome in
        events.append(.done(place))
        outcomes[place] = outcome
      })
    return (outcomes, events)
  }

  /// How many times the server has run `command` (`INFO commandstats`).
  static func calls(_ command: String, on redis: RedisServer) throws -> Int {
    guard case .bulk(let bytes?) = try redis.command(["INFO", "commandstats"], database: 0) else {
      throw TestFailure("no INFO commandstats")
    }
    let prefix = "cmdstat_\(command):calls="
    for line in String(decoding: bytes, as: UTF8.self).split(separator: "\r\n")
    where line.hasPrefix(prefix) {
      return Int(line.dropFirst(prefix.count).prefix { $0.isNumber }) ?? 0
    }
    return 0
  }

  /// Records an issue for each outcome that is not `expected`.
  static func expectAll(
    _ outcomes: [Result<RemoteUpload, TroveError>?], _ expected: RemoteUpload,
    sourceLocation: SourceLocation = #_sourceLocation
  ) {
    for (i, outcome) in outcomes.enumerated() {
      guard case .success(expected)? = outcome else {
        Issue.record("item \(i): \(String(describing: outcome))", sourceLocation: sourceLocation)
        continue
      }
    }
  }

  @Test(
    "Redis: rounds overlap (round 3's items are taken before round 1's outcomes), publishes go by EVALSHA; after SCRIPT FLUSH on the same connection each publish refused NOSCRIPT goes again by EVAL, and every blob is stored whole"
  )
  func scriptFlushedMidConnection() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let backend = try RemoteSpec(name: "r", url: redis.url(database: 5)).backend()
    let blobs = (0..<300).map { Bytes.random(1 + $0 * 331, seed: 700 + UInt64($0)) }
    let items = try Self.items(blobs, in: scratch)
    defer { for item in items { item.file.close() } }

    let first = Self.upload(Array(items[..<150]), to: backend)
    Self.expectAll(first.outcomes, .uploaded)
    let roundThree = try #require(first.events.firstIndex(of: .asked(2 * RedisBackend.roundItems)))
    let firstOutcome = try #require(first.events.firstIndex(of: .done(0)))
    #expect(roundThree < firstOutcome, "round 3 was taken only after round 1 was answered")
    #expect(try Self.calls("eval", on: redis) == 0)
    #expect(try Self.calls("evalsha", on: redis) == 150)

    // The server forgets its scripts; the connection stays.
    #expect(try redis.command(["SCRIPT", "FLUSH"], database: 0) == .simple("OK"))
    let second = Self.upload(Array(items[150...]), to: backend)
    Self.expectAll(second.outcomes, .uploaded)
    #expect(try Self.calls("eval", on: redis) >= 1)

    for (bytes, item) in zip(blobs, items) {
      #expect(try redis.value("trove:cas:\(item.digest.hex)", database: 5) == bytes)
    }
    #expect(try redis.keys("trove:tmp:*", database: 5) == [])
    #expect(try redis.keys("trove:cas:*", database: 5).count == blobs.count)
    #expect(
      try redis.command(["TTL", "trove:cas:\(items[299].digest.hex)"], database: 5)
        == .integer(-1))
  }

  @Test(
    "Redis restarted under a backend's connection: the upload that finds it gone fails (transfer failed, the rest not tried), the next connects again, loads the script again and stores its blobs"
  )
  func serverRestartedUnderConnection() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let backend = try RemoteSpec(name: "r", url: redis.url(database: 2)).backend()
    let blobs = (0..<4).map { Bytes.random(1000 + $0, seed: 800 + UInt64($0)) }
    let items = try Self.items(blobs, in: scratch)
    defer { for item in items { item.file.close() } }
    #expect(try backend.upload(items[0]) == .uploaded)

    try redis.restart()
    let broken = Self.upload(Array(items[1...]), to: backend)
    guard case .failure(let error)? = broken.outcomes[0] else {
      Issue.record("the first upload after the restart: \(String(describing: broken.outcomes[0]))")
      return
    }
    #expect(error.code == .transferFailed, "\(error)")
    #expect(broken.outcomes[1...].allSatisfy { $0 == nil })

    let again = Self.upload(Array(items[1...]), to: backend)
    Self.expectAll(again.outcomes, .uploaded)
    // The restarted server ran the script by the SHA-1 it was given again.
    #expect(try Self.calls("evalsha", on: redis) == 3)
    #expect(try Self.calls("eval", on: redis) == 0)
    for (bytes, item) in zip(blobs[1...], items[1...]) {
      #expect(try redis.value("trove:cas:\(item.digest.hex)", database: 2) == bytes)
    }
  }

  @Test(
    "Redis: a push of 300 objects in overlapping rounds (one of two pieces among them, some on the remote already, one cut short there) stores every object exactly: pulled back into a fresh store, the same digests"
  )
  func overlappingRoundsStoreEveryObject() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let (a, b) = try RemoteTests.twoStores(scratch, url: redis.url(database: 6))
    var blobs = (0..<300).map { Bytes.random(($0 * 7919) % (128 << 10), seed: 900 + UInt64($0)) }
    blobs[150] = Bytes.random((5 << 20) + 3, seed: 899)  // uploaded alone, in pieces
    let digests = blobs.map { XXH3Hasher.digest($0) }
    #expect(Set(digests).count == blobs.count)
    var files: [String] = []
    for (i, bytes) in blobs.enumerated() { files.append(try scratch.write("in-\(i)", bytes)) }
    let put = try CLI.run(["--store", a, "put"] + files)
    #expect(put.status == 0, "\(put.stderr)")
    // Some are on the remote already; one holds a cut-short value there.
    let present = Array(stride(from: 5, to: blobs.count, by: 37))
    for i in present {
      try redis.command(["SET", "trove:cas:\(digests[i].hex)"], database: 6, payload: blobs[i])
    }
    try redis.command(
      ["SET", "trove:cas:\(digests[200].hex)"], database: 6, payload: Array(blobs[200].prefix(10)))

    let pushed = try RemoteTests.remote(a, ["push", "--all", "--json"])
    #expect(pushed.status == 0, "\(pushed.stderr)")
    let records = try #require(
      JSONSerialization.jsonObject(with: Data(pushed.out.utf8)) as? [[String: Any]])
    var outcomes: [String: String] = [:]
    for record in records {
      outcomes[record["digest"] as? String ?? "?"] = record["outcome"] as? String ?? "?"
    }
    #expect(outcomes.count == blobs.count)
    for (i, digest) in digests.enumerated() {
      #expect(
        outcomes[digest.description] == (present.contains(i) ? "present" : "uploaded"),
        "object \(i)")
    }
    #expect(try redis.keys("trove:tmp:*", database: 6) == [])
    #expect(
      try RemoteTests.intactBlobs(redis, database: 6) == Set(digests.map { "trove:cas:\($0.hex)" }))

    let pulled = try RemoteTests.remote(b, ["pull"] + digests.map(\.description))
    #expect(pulled.status == 0, "\(pulled.stderr)")
    #expect(Set(try RemoteTests.digests(b)) == Set(digests))
    let verified = try CLI.run(["--store", b, "verify"])
    #expect(verified.status == 0, "\(verified.stderr)")
  }

  @Test(
    "a push to Redis and a pull from it load no libcurl: no HTTP multi handle is made for a backend that pipelines"
  )
  func noLibCurl() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let (a, b) = try RemoteTests.twoStores(scratch, url: redis.url(database: 9))
    let digests = try (0..<3).map {
      try RemoteTests.put(a, Bytes.random(5000 + $0, seed: 60 + UInt64($0)), in: scratch)
    }
    // ld.so writes what it loads, dlopen included, to ld.PID.
    let debug = ["LD_DEBUG": "files", "LD_DEBUG_OUTPUT": scratch["ld"]]
    let pushed = try RemoteTests.remote(a, ["push"], environment: debug)
    #expect(pushed.status == 0, "\(pushed.stderr)")
    let pulled = try RemoteTests.remote(
      b, ["pull"] + digests.map(\.description), environment: debug)
    #expect(pulled.status == 0, "\(pulled.stderr)")
    #expect(Set(try RemoteTests.digests(b)) == Set(digests))
    let logs = try FileManager.default.contentsOfDirectory(atPath: scratch.path)
      .filter { $0.hasPrefix("ld.") }
    #expect(logs.count == 2, "\(logs)")
    for log in logs {
      let text = String(decoding: try contents(scratch[log]), as: UTF8.self)
      #expect(text.contains("libc.so"), "\(log) lists nothing ld.so loaded")
      #expect(!text.contains("libcurl"), "\(log): a Redis transfer loaded libcurl")
    }
  }
}
