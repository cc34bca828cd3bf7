import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// Signed remotes: `trove keygen`, `config set signing-key`, `remote add
/// --trust`, against real nginx (WebDAV) and redis-server on 127.0.0.1. A
/// store that pushes with a signing key signs each object and key record;
/// a store that trusts the key reads nothing else from that remote.
@Suite(
  .enabled(if: Nginx.executable != nil, Nginx.missing),
  .enabled(if: RedisServer.executable != nil, RedisServer.missing))
struct SigningTests {
  /// Makes a key named `name` in `scratch`; its file and public key.
  static func keygen(_ scratch: Scratch, _ name: String) throws -> (String, String) {
    let file = scratch[name + ".key"]
    let made = try CLI.run(["keygen", name, "--out", file])
    guard made.status == 0 else { throw TestFailure("keygen failed: \(made.stderr)") }
    return (file, made.out.trimmingCharacters(in: .newlines))
  }

  /// A writer store that signs with a new key and pushes to `url` (write
  /// sync), a reader that trusts that key, and a reader that trusts
  /// another key; the signing key's file.
  static func stores(_ scratch: Scratch, url: String) throws -> (
    writer: String, trusting: String, other: String, key: String
  ) {
    let (file, publicKey) = try keygen(scratch, "ci")
    let (_, otherKey) = try keygen(scratch, "someone-else")
    let (writer, trusting, other) = (scratch["w"], scratch["t"], scratch["o"])
    let added = try RemoteTests.remote(writer, ["add", "shared", url, "--write", "sync"])
    #expect(added.status == 0, "\(added.stderr)")
    let set = try CLI.run(["--store", writer, "config", "set", "signing-key", file])
    #expect(set.status == 0, "\(set.stderr)")
    for (store, key) in [(trusting, publicKey), (other, otherKey)] {
      let reader = try RemoteTests.remote(store, ["add", "shared", url, "--trust", key])
      #expect(reader.status == 0, "\(reader.stderr)")
    }
    return (writer, trusting, other, file)
  }

  /// `remote status --json`'s `untrusted` and `corrupt` of remote `shared`.
  static func counts(_ store: String) throws -> (untrusted: Int, corrupt: Int) {
    let status = try RemoteTests.remote(store, ["status", "--json"])
    let records = try JSONSerialization.jsonObject(with: Data(status.stdout)) as? [[String: Any]]
    let record = try #require(records?.first)
    return (record["untrusted"] as? Int ?? -1, record["corrupt"] as? Int ?? -1)
  }

  @Test("keygen writes an owner-only key file, prints ed25519:BASE64, and never overwrites a file")
  func keygenFile() throws {
    let scratch = try Scratch()
    let (file, publicKey) = try Self.keygen(scratch, "ci")
    #expect(try PublicSigningKey(parsing: publicKey).description == publicKey)
    let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
    #expect(mode == 0o600)
    let text = try String(contentsOfFile: file, encoding: .utf8)
    #expect(text.hasPrefix("trove-signing-key 1\nname ci\npublic \(publicKey)\nprivate ed25519:"))

    let again = try CLI.run(["keygen", "other", "--out", file])
    #expect(again.status == 73, "\(again.stderr)")
    #expect(again.stderr.contains("a signing key is never overwritten"), "\(again.stderr)")
    #expect(try String(contentsOfFile: file, encoding: .utf8) == text)

    let badName = try CLI.run(["keygen", "no/slash", "--out", scratch["x.key"]])
    #expect(badName.status == 64, "\(badName.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["x.key"]))
  }

  @Test(
    "config set signing-key keeps the file's absolute path, never the key; refuses a key file others may read or one that is not a key"
  )
  func signingKeySetting() throws {
    let scratch = try Scratch()
    let (file, _) = try Self.keygen(scratch, "ci")
    let store = scratch["s"]
    let seed = try #require(
      try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").last)

    chmod(file, 0o640)
    let open = try CLI.run(["--store", store, "config", "set", "signing-key", file])
    #expect(open.status == 78, "\(open.stderr)")
    #expect(open.stderr.contains("may be read or written by others (mode 640): chmod 600 it"))

    let notKey = try scratch.write("not.key", Array("hello\n".utf8))
    chmod(notKey, 0o600)
    let wrong = try CLI.run(["--store", store, "config", "set", "signing-key", notKey])
    #expect(wrong.status == 78, "\(wrong.stderr)")
    #expect(wrong.stderr.contains("is not a Trove signing key"), "\(wrong.stderr)")

    // A FIFO in the key's place is refused, never waited on.
    let fifo = scratch["fifo.key"]
    #expect(mkfifo(fifo, 0o600) == 0)
    let pipe = try CLI.run(["--store", store, "config", "set", "signing-key", fifo])
    #expect(pipe.status == 78, "\(pipe.stderr)")
    #expect(pipe.stderr.contains("is not a regular file"), "\(pipe.stderr)")

    chmod(file, 0o600)
    let set = try CLI.run(["--store", store, "config", "set", "signing-key", file])
    #expect(set.status == 0, "\(set.stderr)")
    #expect(try CLI.run(["--store", store, "config", "get", "signing-key"]).out == file + "\n")
    let config = try #require(
      try JSONSerialization.jsonObject(
        with: Data(contentsOf: URL(fileURLWithPath: store + "/config.json")))
        as? [String: Any])
    #expect((config["policy"] as? [String: Any])?["signing-key"] as? String == file)
    let text = try String(contentsOfFile: store + "/config.json", encoding: .utf8)
    #expect(!text.contains(String(seed.dropFirst("private ed25519:".count))))

    // A key file opened up later stops pushes: nothing goes up unsigned.
    let dav = try Nginx(webDAV: true)
    chmod(file, 0o644)
    #expect(try RemoteTests.remote(store, ["add", "r", dav.url("/open")]).status == 0)
    let digest = try RemoteTests.put(store, [1, 2, 3], in: scratch)
    let push = try RemoteTests.remote(store, ["push", digest.description])
    #expect(push.status == 78, "\(push.stderr)")
    #expect(push.stderr.contains("chmod 600 it"), "\(push.stderr)")
    #expect(!FileManager.default.fileExists(atPath: dav.files["open/" + remoteBlobPath(digest)]))
  }

  @Test(
    "a key file another user owns is refused, even where this user (root) could read it",
    .enabled(if: TestFilesystems.isRoot, "needs root to give the file away"))
  func keyFileOfAnotherUser() throws {
    let scratch = try Scratch()
    let (file, _) = try Self.keygen(scratch, "theirs")
    #expect(chown(file, 60001, 60001) == 0)
    let set = try CLI.run(["--store", scratch["s"], "config", "set", "signing-key", file])
    #expect(set.status == 78, "\(set.stderr)")
    #expect(set.stderr.contains("belongs to user 60001, not to this user (0)"), "\(set.stderr)")
  }

  @Test(
    "WebDAV: a signed push is read by a store trusting its key (object and key); a store trusting another key reads nothing and counts it untrusted"
  )
  func webDAVSigned() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (writer, trusting, other, _) = try Self.stores(scratch, url: dav.url("/signed"))
    let bytes = Bytes.random(300_000, seed: 2801)
    let digest = XXH3Hasher.digest(bytes)
    let input = try scratch.write("in", bytes)
    let put = try CLI.run(["--store", writer, "put", "--key", "models/base", input])
    #expect(put.status == 0, "\(put.stderr)")

    let entryPath = dav.files["signed/sigs/\(digest.hex.prefix(2))/\(digest.hex).json"]
    let entry = try #require(
      try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: entryPath)))
        as? [String: Any])
    #expect(entry["digest"] as? String == digest.description)
    #expect(entry["size"] as? Int == bytes.count)
    #expect(entry["sha256"] as? String == sha256(bytes).description)
    let record = try String(
      contentsOfFile: RemoteKeyPullTests.recordPath(dav, "signed", "models/base"), encoding: .utf8)
    #expect(record.contains("\"signed\""), "\(record)")

    let pulled = try RemoteTests.remote(trusting, ["pull", digest.description])
    #expect(pulled.status == 0, "\(pulled.stderr)")
    let got = try CLI.run(["--store", trusting, "get", "models/base", "-"])
    #expect(got.status == 0 && got.stdout == bytes, "\(got.stderr)")
    #expect(try Self.counts(trusting).untrusted == 0)

    let refused = try RemoteTests.remote(other, ["pull", digest.description])
    #expect(refused.status == 1, "\(refused.stderr)")
    #expect(
      refused.stderr.contains("is not signed by a key this store trusts for it"),
      "\(refused.stderr)")
    let key = try CLI.run(["--store", other, "get", "models/base", "-"])
    #expect(key.status == 1 && key.stdout.isEmpty, "\(key.stderr)")
    let read = try CLI.run(["--store", other, "get", digest.description, "-"])
    #expect(read.status == 1 && read.stdout.isEmpty, "\(read.stderr)")
    #expect(try RemoteTests.digests(other) == [])
    #expect(try Self.counts(other).untrusted == 3)
    let status = try RemoteTests.remote(other, ["status"])
    #expect(status.out.contains(", untrusted 3\n"), "\(status.out)")
  }

  @Test(
    "WebDAV: from a trusting store, an unsigned push is a miss counted untrusted, and a signed entry or record edited after signing is too"
  )
  func webDAVUnsignedAndEdited() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (writer, trusting, _, _) = try Self.stores(scratch, url: dav.url("/edited"))
    // An unsigned writer: the same remote, no signing key.
    let plain = scratch["plain"]
    #expect(
      try RemoteTests.remote(plain, ["add", "shared", dav.url("/edited"), "--write", "sync"])
        .status == 0)
    let unsigned = Bytes.random(5000, seed: 2802)
    let unsignedFile = try scratch.write("u", unsigned)
    #expect(
      try CLI.run(["--store", plain, "put", "--key", "k/unsigned", unsignedFile]).status == 0)
    let unsignedDigest = XXH3Hasher.digest(unsigned)
    let miss = try CLI.run(["--store", trusting, "get", unsignedDigest.description, "-"])
    #expect(miss.status == 1 && miss.stdout.isEmpty, "\(miss.stderr)")
    #expect(try CLI.run(["--store", trusting, "get", "k/unsigned", "-"]).status == 1)
    #expect(try Self.counts(trusting).untrusted == 2)

    // Signed, then edited on the remote: the size in the entry, the
    // validators in the record.
    let bytes = Bytes.random(7000, seed: 2803)
    let digest = XXH3Hasher.digest(bytes)
    let file = try scratch.write("s", bytes)
    #expect(try CLI.run(["--store", writer, "put", "--key", "k/signed", file]).status == 0)
    let entryPath = dav.files["edited/sigs/\(digest.hex.prefix(2))/\(digest.hex).json"]
    let entry = try String(contentsOfFile: entryPath, encoding: .utf8)
    try entry.replacingOccurrences(of: "\"size\":7000", with: "\"size\":7001")
      .write(toFile: entryPath, atomically: true, encoding: .utf8)
    let recordPath = RemoteKeyPullTests.recordPath(dav, "edited", "k/signed")
    var record = try #require(
      try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: recordPath)))
        as? [String: Any])
    var signed = try #require(record["signed"] as? [String: Any])
    signed["time"] = (signed["time"] as? Int ?? 0) + 86400
    record["signed"] = signed
    try JSONSerialization.data(withJSONObject: record).write(to: URL(fileURLWithPath: recordPath))
    let edited = try RemoteTests.remote(trusting, ["pull", digest.description])
    #expect(edited.status == 1, "\(edited.stderr)")
    #expect(try CLI.run(["--store", trusting, "get", "k/signed", "-"]).status == 1)
    #expect(try RemoteTests.digests(trusting) == [])
    #expect(try Self.counts(trusting).untrusted == 4)
  }

  @Test(
    "Redis: a signed push is read by a trusting store; a blob whose bytes lack the signed SHA-256 is refused, counted corrupt, nothing stored"
  )
  func redisSignedAndTampered() throws {
    let redis = try RedisServer()
    let scratch = try Scratch()
    let (writer, trusting, other, keyFile) = try Self.stores(
      scratch, url: redis.url(database: 11))
    let bytes = Bytes.random(200_000, seed: 2804)
    let digest = XXH3Hasher.digest(bytes)
    let file = try scratch.write("in", bytes)
    #expect(try CLI.run(["--store", writer, "put", "--key", "k/redis", file]).status == 0)
    #expect(try redis.value("trove:sig:\(digest.hex)", database: 11) != nil)
    let got = try CLI.run(["--store", trusting, "get", "k/redis", "-"])
    #expect(got.status == 0 && got.stdout == bytes, "\(got.stderr)")
    #expect(try CLI.run(["--store", other, "get", "k/redis", "-"]).status == 1)

    // The trusted key signs facts the bytes do not bear (a writer that
    // signs carelessly, or an XXH3 collision): the SHA-256 computed as
    // the blob arrives refuses it.
    let crafted = Bytes.random(9000, seed: 2805)
    let craftedDigest = XXH3Hasher.digest(crafted)
    try redis.command(
      ["SET", "trove:cas:\(craftedDigest.hex)"], database: 11, payload: crafted)
    let signer = try SigningKey.load(keyFile)
    let lie = SignedObjectEntry(
      digest: craftedDigest,
      facts: SignedFacts(
        size: Int64(crafted.count), sha256: sha256(bytes)),
      signer: signer, keeping: nil)
    try redis.command(
      ["SET", "trove:sig:\(craftedDigest.hex)"], database: 11, payload: lie.encoded())
    let refused = try RemoteTests.remote(trusting, ["pull", craftedDigest.description])
    #expect(refused.status == 65, "\(refused.stderr)")
    #expect(refused.stderr.contains("a trusted key signed"), "\(refused.stderr)")
    let read = try CLI.run(["--store", trusting, "get", craftedDigest.description, "-"])
    #expect(read.status == 1 && read.stdout.isEmpty, "\(read.stderr)")
    #expect(try RemoteTests.digests(trusting) == [digest])
    #expect(try Self.counts(trusting).corrupt == 1)
    #expect(RemoteTests.leftovers(trusting) == [])
  }

  @Test(
    "WebDAV: a signed blob over 16 MiB (SHA-256 on a thread beside the writer's) is pulled whole; one whose bytes lack the signed SHA-256 is refused"
  )
  func largeSignedBlob() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (writer, trusting, _, keyFile) = try Self.stores(scratch, url: dav.url("/large"))
    let bytes = Bytes.random(17 << 20 + 5, seed: 2806)
    let digest = XXH3Hasher.digest(bytes)
    #expect(try CLI.run(["--store", writer, "put", try scratch.write("in", bytes)]).status == 0)
    let pulled = try RemoteTests.remote(trusting, ["pull", digest.description])
    #expect(pulled.status == 0, "\(pulled.stderr)")
    #expect(try CLI.run(["--store", trusting, "get", digest.description, "-"]).stdout == bytes)

    // Another large blob on the remote, with an entry the trusted key
    // signed for the first blob's SHA-256.
    let other = Bytes.random(17 << 20 + 9, seed: 2807)
    let otherDigest = XXH3Hasher.digest(other)
    let blob = dav.files["large/" + remoteBlobPath(otherDigest)]
    try FileManager.default.createDirectory(
      atPath: (blob as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try Data(other).write(to: URL(fileURLWithPath: blob))
    let entry = SignedObjectEntry(
      digest: otherDigest, facts: SignedFacts(size: Int64(other.count), sha256: sha256(bytes)),
      signer: try SigningKey.load(keyFile), keeping: nil)
    let entryPath = dav.files["large/sigs/\(otherDigest.hex.prefix(2))/\(otherDigest.hex).json"]
    try FileManager.default.createDirectory(
      atPath: (entryPath as NSString).deletingLastPathComponent,
      withIntermediateDirectories: true)
    try Data(entry.encoded()).write(to: URL(fileURLWithPath: entryPath))
    let refused = try RemoteTests.remote(trusting, ["pull", otherDigest.description])
    #expect(refused.status == 65, "\(refused.stderr)")
    #expect(refused.stderr.contains("a trusted key signed"), "\(refused.stderr)")
    #expect(try RemoteTests.digests(trusting) == [digest])
    #expect(RemoteTests.leftovers(trusting) == [])
  }
}

/// The SHA-256 of `bytes`.
private func sha256(_ bytes: [UInt8]) -> Checksum {
  let hasher = SHA2Hasher(.sha256)
  bytes.withUnsafeBytes { hasher.update($0) }
  return hasher.finalize()
}
