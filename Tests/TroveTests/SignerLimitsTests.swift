import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// What a signer refuses to vouch for, and what a trusting store refuses
/// to count on: bindings learnt from a remote, a signing key another user
/// configured, unsigned copies a sweep would drop, oversized or padded
/// signed entries. Against real nginx (WebDAV) and redis-server.
extension SigningTests {
  /// The SHA-256 of `bytes`.
  static func sha(_ bytes: [UInt8]) -> Checksum {
    let hasher = SHA2Hasher(.sha256)
    bytes.withUnsafeBytes { hasher.update($0) }
    return hasher.finalize()
  }

  /// The path of `digest`'s signed entry under `base` on `dav`.
  static func entryPath(_ dav: Nginx, _ base: String, _ digest: BlobDigest) -> String {
    dav.files["\(base)/sigs/\(digest.hex.prefix(2))/\(digest.hex).json"]
  }

  /// Writes `bytes` at `path`, making its folders.
  static func plant(_ bytes: [UInt8], at path: String) throws {
    try FileManager.default.createDirectory(
      atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try Data(bytes).write(to: URL(fileURLWithPath: path))
  }

  @Test(
    "a signing store never signs or pushes a key it bound from an unsigned remote's record: a reader trusting its key gets no such key"
  )
  func pulledBindingNotSigned() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (keyFile, publicKey) = try Self.keygen(scratch, "ci")
    // Another writer of the unsigned shared remote plants K -> D'.
    let planter = scratch["planter"]
    #expect(
      try RemoteTests.remote(planter, ["add", "a", dav.url("/a"), "--write", "sync"]).status == 0)
    let planted = Bytes.random(6000, seed: 2811)
    let plantedDigest = XXH3Hasher.digest(planted)
    let file = try scratch.write("planted", planted)
    #expect(try CLI.run(["--store", planter, "put", "--key", "tools/cc", file]).status == 0)

    // The CI writer reads A unsigned and publishes signed to B.
    let writer = scratch["w"]
    #expect(try RemoteTests.remote(writer, ["add", "a", dav.url("/a"), "--read-only"]).status == 0)
    #expect(
      try RemoteTests.remote(writer, ["add", "b", dav.url("/b"), "--write", "off"]).status == 0)
    #expect(try CLI.run(["--store", writer, "config", "set", "signing-key", keyFile]).status == 0)
    let read = try CLI.run(["--store", writer, "get", "tools/cc", "-"])
    #expect(read.status == 0 && read.stdout == planted, "\(read.stderr)")
    let push = try RemoteTests.remote(writer, ["push", "--remote", "b", "--all"])
    #expect(push.status == 0, "\(push.stderr)")
    #expect(push.stderr.contains("'tools/cc' is not signed or pushed"), "\(push.stderr)")
    // references.log keeps where the binding came from: an index rebuilt
    // from it still knows.
    for name in try FileManager.default.contentsOfDirectory(atPath: writer)
    where name.hasPrefix("index.sqlite") {
      try FileManager.default.removeItem(atPath: writer + "/" + name)
    }
    let named = try RemoteTests.remote(writer, ["push", "--remote", "b", "tools/cc"])
    #expect(named.status == 0, "\(named.stderr)")
    #expect(named.stderr.contains("'tools/cc' is not signed or pushed"), "\(named.stderr)")
    #expect(named.stderr.contains("1 key restored from references.log"), "\(named.stderr)")
    #expect(
      !FileManager.default.fileExists(atPath: RemoteKeyPullTests.recordPath(dav, "b", "tools/cc")))
    // The blob itself went up signed: its bytes are their own proof.
    #expect(FileManager.default.fileExists(atPath: Self.entryPath(dav, "b", plantedDigest)))

    let reader = scratch["r"]
    #expect(
      try RemoteTests.remote(reader, ["add", "b", dav.url("/b"), "--trust", publicKey]).status
        == 0)
    let got = try CLI.run(["--store", reader, "get", "tools/cc", "-"])
    #expect(got.status == 1 && got.stdout.isEmpty, "\(got.stderr)")

    // The same key put here by this store's own user is its to sign.
    #expect(try CLI.run(["--store", writer, "put", "--key", "tools/cc", file]).status == 0)
    #expect(try RemoteTests.remote(writer, ["push", "--remote", "b", "tools/cc"]).status == 0)
    let own = try CLI.run(["--store", reader, "get", "tools/cc", "-"])
    #expect(own.status == 0 && own.stdout == planted, "\(own.stderr)")
  }

  @Test(
    "a fetch keeps a pulled binding unsigned through a 304 (it proves only the ETag); a 200 from the origin replaces it, and then it is signed"
  )
  func pulledBindingThroughOrigin() throws {
    let dav = try Nginx(webDAV: true)
    let server = try FaultServer()
    let scratch = try Scratch()
    let (keyFile, publicKey) = try Self.keygen(scratch, "ci")
    let planter = scratch["planter"]
    #expect(
      try RemoteTests.remote(planter, ["add", "a", dav.url("/a"), "--write", "sync"]).status == 0)
    let planted = Bytes.random(7000, seed: 2813)
    let file = try scratch.write("planted", planted)
    // Two origin URLs planted at D': one with the origin's real ETag (it
    // answers 304), one without validators (a fetch must get the body).
    let (revalidated, replaced) = (
      server.url("/ok/tool?size=5000"), server.url("/ok/lib?size=5000")
    )
    for url in [revalidated, replaced] {
      #expect(try CLI.run(["--store", planter, "put", "--key", url, file]).status == 0)
    }
    let recordPath = RemoteKeyPullTests.recordPath(dav, "a", revalidated)
    var record = try #require(
      try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: recordPath)))
        as? [String: Any])
    record["origin"] = [
      "etag": "\"v1\"", "size": planted.count, "isImmutable": false, "fetched": 1,
    ]
    try JSONSerialization.data(withJSONObject: record).write(to: URL(fileURLWithPath: recordPath))

    let writer = scratch["w"]
    #expect(try RemoteTests.remote(writer, ["add", "a", dav.url("/a"), "--read-only"]).status == 0)
    #expect(
      try RemoteTests.remote(writer, ["add", "b", dav.url("/b"), "--write", "off"]).status == 0)
    #expect(try CLI.run(["--store", writer, "config", "set", "signing-key", keyFile]).status == 0)
    for url in [revalidated, replaced] {
      let fetched = try CLI.run(["--store", writer, "fetch", "-o", "-", url])
      #expect(fetched.status == 0, "\(fetched.stderr)")
    }
    // The first was revalidated (If-None-Match "v1", answered 304).
    #expect(server.requests().contains { $0.contains("/ok/tool") && $0.contains("v1") })
    let push = try RemoteTests.remote(writer, ["push", "--remote", "b", "--all"])
    #expect(push.status == 0, "\(push.stderr)")
    #expect(
      !FileManager.default.fileExists(atPath: RemoteKeyPullTests.recordPath(dav, "b", revalidated)))

    let reader = scratch["r"]
    #expect(
      try RemoteTests.remote(reader, ["add", "b", dav.url("/b"), "--trust", publicKey]).status
        == 0)
    let refused = try CLI.run(["--store", reader, "get", revalidated, "-"])
    #expect(refused.status == 1 && refused.stdout.isEmpty, "\(refused.stderr)")
    let origin = try CLI.run(["--store", reader, "get", replaced, "-"])
    #expect(origin.status == 0 && origin.stdout.count == 5000, "\(origin.stderr)")
  }

  @Test(
    "signing-key in a config.json another user owns is not used: a push that would sign stops (exit 78) naming the file and owner; TROVE_SIGNING_KEY still signs",
    .enabled(if: TestFilesystems.isRoot, "needs root to give config.json to another user"))
  func signingKeyFromAnotherUsersConfig() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (keyFile, publicKey) = try Self.keygen(scratch, "ci")
    let store = scratch["s"]
    #expect(
      try RemoteTests.remote(store, ["add", "b", dav.url("/b"), "--write", "off"]).status == 0)
    #expect(try CLI.run(["--store", store, "config", "set", "signing-key", keyFile]).status == 0)
    // Another member of the group (or a restored cache folder) wrote it.
    #expect(chown(store + "/config.json", 60001, 60001) == 0)
    let digest = try RemoteTests.put(store, Bytes.random(3000, seed: 2812), in: scratch)
    let push = try RemoteTests.remote(store, ["push", digest.description])
    #expect(push.status == 78, "\(push.stderr)")
    #expect(
      push.stderr.contains("config.json' is owned by uid 60001")
        && push.stderr.contains("its signing-key is not used"), "\(push.stderr)")
    #expect(!FileManager.default.fileExists(atPath: dav.files["b/" + remoteBlobPath(digest)]))
    let doctor = try CLI.run(["--store", store, "doctor", scratch.path])
    #expect(doctor.out.contains("warn  signing-key-owner"), "\(doctor.out)")

    let own = try RemoteTests.remote(
      store, ["push", digest.description], environment: ["TROVE_SIGNING_KEY": keyFile])
    #expect(own.status == 0, "\(own.stderr)")
    let reader = scratch["r"]
    #expect(
      try RemoteTests.remote(reader, ["add", "b", dav.url("/b"), "--trust", publicKey]).status
        == 0)
    #expect(try CLI.run(["--store", reader, "get", digest.description, "-"]).status == 0)
  }

  @Test(
    "the signing key and whose choice it is come from one read of config.json: another user's file renamed away for this user's after the key was read still stops the push (exit 78)",
    .enabled(if: TestFilesystems.isRoot, "needs root to give config.json to another user"))
  func signingKeyOwnerFromTheSameRead() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (theirKey, theirPublic) = try Self.keygen(scratch, "theirs")
    let (ownKey, _) = try Self.keygen(scratch, "own")
    let store = scratch["s"]
    #expect(
      try RemoteTests.remote(store, ["add", "b", dav.url("/b"), "--write", "off"]).status == 0)
    // This user's config.json (naming their own key), kept aside.
    #expect(try CLI.run(["--store", store, "config", "set", "signing-key", ownKey]).status == 0)
    let own = scratch["own-config.json"]
    try FileManager.default.copyItem(atPath: store + "/config.json", toPath: own)
    // Another user's, naming a key of their choice, in place.
    #expect(try CLI.run(["--store", store, "config", "set", "signing-key", theirKey]).status == 0)
    #expect(chown(store + "/config.json", 60001, 60001) == 0)
    let digest = try RemoteTests.put(store, Bytes.random(3000, seed: 2816), in: scratch)

    let pause = scratch["pause"]
    try FileManager.default.createDirectory(atPath: pause, withIntermediateDirectories: false)
    let push = try Spawned(
      executable: "/usr/bin/env",
      [
        "TROVE_TEST_PAUSE=" + pause, CLI.executable, "--store", store, "remote", "push",
        digest.description,
      ],
      io: scratch["io"])
    let note = pause + "/signing-key"
    while !FileManager.default.fileExists(atPath: note), push.process.isRunning { usleep(10_000) }
    #expect(
      (try? String(contentsOfFile: note, encoding: .utf8)) == theirKey,
      "the push never read its signing key")
    // Between reading the key and judging whose it is, this user's file
    // takes its place.
    #expect(rename(own, store + "/config.json") == 0)
    _ = FileManager.default.createFile(atPath: note + ".go", contents: nil)
    let outcome = try push.wait()
    #expect(outcome.status == 78, "\(outcome.stderr)")
    #expect(outcome.stderr.contains("is owned by uid 60001"), "\(outcome.stderr)")
    #expect(!FileManager.default.fileExists(atPath: dav.files["b/" + remoteBlobPath(digest)]))
    let reader = scratch["r"]
    #expect(
      try RemoteTests.remote(reader, ["add", "b", dav.url("/b"), "--trust", theirPublic]).status
        == 0)
    #expect(try CLI.run(["--store", reader, "get", digest.description, "-"]).status == 1)
  }

  @Test(
    "a config.json of this user's that a hand edit left 0640 is theirs: its signing-key signs, and config set access group makes it 0644; at 0664 the group could have written it, and at 0600 or 0400 it has the mode of a part file or an object, which a member can rename there: not theirs",
    arguments: [
      (0o640, nil), (0o664, "is writable by users other than its owner"),
      (0o600, "is not a file trove wrote (mode 600"),
      (0o400, "is not a file trove wrote (mode 400"),
    ])
  func signingKeyFromOwnFileOfAnyMode(mode: Int, refusal: String?) throws {
    let isOwn = refusal == nil
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (keyFile, publicKey) = try Self.keygen(scratch, "ci")
    let store = scratch["s"]
    #expect(
      try RemoteTests.remote(store, ["add", "b", dav.url("/b"), "--write", "off"]).status == 0)
    #expect(try CLI.run(["--store", store, "config", "set", "signing-key", keyFile]).status == 0)
    #expect(chmod(store + "/config.json", mode_t(mode)) == 0)
    let digest = try RemoteTests.put(store, Bytes.random(3000, seed: 2817), in: scratch)
    let push = try RemoteTests.remote(store, ["push", digest.description])
    if isOwn {
      #expect(push.status == 0, "\(push.stderr)")
      let reader = scratch["r"]
      #expect(
        try RemoteTests.remote(reader, ["add", "b", dav.url("/b"), "--trust", publicKey]).status
          == 0)
      let got = try CLI.run(["--store", reader, "get", digest.description, "-"])
      #expect(got.status == 0 && got.stdout.count == 3000, "\(got.stderr)")
      #expect(try CLI.run(["--store", store, "config", "set", "access", "group"]).status == 0)
      var status = stat()
      #expect(stat(store + "/config.json", &status) == 0 && status.st_mode & 0o7777 == 0o644)
    } else {
      #expect(push.status == 78, "\(push.stderr)")
      #expect(push.stderr.contains(refusal ?? "?"), "\(push.stderr)")
    }
  }

  /// A store whose root folder root owns with `mode` and group `team`,
  /// with remote `b` on `dav` and `keyFile` to sign with.
  static func signingStore(
    _ scratch: Scratch, mode: mode_t, dav: Nginx, keyFile: String
  ) throws -> String {
    let store = scratch["s"]
    try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: false)
    #expect(chown(store, 0, AccessTests.team) == 0 && chmod(store, mode) == 0)
    #expect(
      try RemoteTests.remote(store, ["add", "b", dav.url("/b"), "--write", "off"]).status == 0)
    #expect(try CLI.run(["--store", store, "config", "set", "signing-key", keyFile]).status == 0)
    return store
  }

  @Test(
    "a signer's root folder that others may write without being a group store (0770, 0775, 0777): key records go unsigned, naming why; the object is still signed",
    .enabled(if: TestFilesystems.isRoot, "needs root to give the store a group"),
    arguments: [0o770, 0o775, 0o777])
  func keyRecordsUnsignedWhereOthersWrite(mode: Int) throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (keyFile, publicKey) = try Self.keygen(scratch, "ci")
    let store = try Self.signingStore(scratch, mode: 0o700, dav: dav, keyFile: keyFile)
    let input = try scratch.write("tool", Bytes.random(3000, seed: 2818))
    #expect(try CLI.run(["--store", store, "put", "--key", "tool", input]).status == 0)
    let digest = XXH3Hasher.digest(Bytes.random(3000, seed: 2818))
    #expect(chmod(store, mode_t(mode)) == 0)
    let push = try RemoteTests.remote(store, ["push", digest.description])
    #expect(push.status == 0, "\(push.stderr)")
    #expect(
      push.stderr.contains("'tool' is pushed unsigned")
        && push.stderr.contains(
          "is writable by others than its owner (mode \(String(mode, radix: 8)))"),
      "\(push.stderr)")
    let reader = scratch["r"]
    #expect(
      try RemoteTests.remote(reader, ["add", "b", dav.url("/b"), "--trust", publicKey]).status
        == 0)
    #expect(try CLI.run(["--store", reader, "get", "tool", "-"]).status == 1)
    let got = try CLI.run(["--store", reader, "get", digest.description, "-"])
    #expect(got.status == 0 && got.stdout.count == 3000, "\(got.stderr)")
  }

  @Test(
    "a group store made private keeps the keys its members bound unsigned: config set access private marks them, and a signing push sends none of them",
    .enabled(if: TestFilesystems.isRoot, "needs root to give the store a group"))
  func groupBindingsStayUnsignedWhenPrivate() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (keyFile, publicKey) = try Self.keygen(scratch, "ci")
    let store = try Self.signingStore(scratch, mode: 0o2770, dav: dav, keyFile: keyFile)
    let bytes = Bytes.random(3000, seed: 2819)
    let input = try scratch.write("tool", bytes)
    #expect(try CLI.run(["--store", store, "put", "--key", "tool", input]).status == 0)
    let made = try CLI.run(["--store", store, "config", "set", "access", "private"])
    #expect(made.status == 0, "\(made.stderr)")
    var status = stat()
    #expect(stat(store, &status) == 0 && status.st_mode & 0o7777 == 0o700)
    let digest = XXH3Hasher.digest(bytes)
    let push = try RemoteTests.remote(store, ["push", digest.description])
    #expect(push.status == 0, "\(push.stderr)")
    #expect(push.stderr.contains("'tool' is not signed or pushed"), "\(push.stderr)")
    let reader = scratch["r"]
    #expect(
      try RemoteTests.remote(reader, ["add", "b", dav.url("/b"), "--trust", publicKey]).status
        == 0)
    #expect(try CLI.run(["--store", reader, "get", "tool", "-"]).status == 1)

    // A key bound once it is private is this user's: signed.
    #expect(try CLI.run(["--store", store, "put", "--key", "mine", input]).status == 0)
    let again = try RemoteTests.remote(store, ["push", digest.description])
    #expect(again.status == 0, "\(again.stderr)")
    let mine = try CLI.run(["--store", reader, "get", "mine", "-"])
    #expect(mine.status == 0 && mine.stdout == bytes, "\(mine.stderr)")
  }

  @Test(
    "config set access private puts the index in a new file: a member's descriptor opened while it was shared writes a binding only into the old file, and the signer signs none of it",
    .enabled(if: TestFilesystems.isRoot, "needs root to give the store a group"))
  func heldIndexDescriptorLosesItsReach() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (keyFile, publicKey) = try Self.keygen(scratch, "ci")
    let store = try Self.signingStore(scratch, mode: 0o2770, dav: dav, keyFile: keyFile)
    let bytes = Bytes.random(3000, seed: 2824)
    let digest = try RemoteTests.put(store, bytes, in: scratch)
    // A member's process holds the index open, and waits.
    let go = scratch["go"]
    let holder = try Spawned(
      executable: "/usr/bin/env",
      [
        "python3", "-c",
        """
        import os, sqlite3, sys, time
        # The index's rows in its file, where the copy below reads them.
        sqlite3.connect(sys.argv[1]).execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        fd = os.open(sys.argv[1], os.O_RDWR)
        open(sys.argv[3] + ".ready", "w").close()
        while not os.path.exists(sys.argv[3]): time.sleep(0.05)
        copy = sys.argv[1] + ".member"
        open(copy, "wb").write(os.pread(fd, os.fstat(fd).st_size, 0))
        c = sqlite3.connect(copy)
        c.execute("INSERT INTO keys(key, digest, updated) VALUES ('https://example.com/tool.tgz', ?, 1)", (sys.argv[2],))
        c.commit(); c.close()
        data = open(copy, "rb").read()
        os.pwrite(fd, data, 0); os.ftruncate(fd, len(data)); os.fsync(fd)
        print("written")
        """,
        store + "/index.sqlite", digest.hex, go,
      ], io: scratch["holder"])
    while !FileManager.default.fileExists(atPath: go + ".ready"), holder.process.isRunning {
      usleep(10_000)
    }
    let made = try CLI.run(["--store", store, "config", "set", "access", "private"])
    #expect(made.status == 0, "\(made.stderr)")
    _ = FileManager.default.createFile(atPath: go, contents: nil)
    let held = try holder.wait()
    #expect(held.status == 0 && held.text == "written\n", "\(held.stderr)")
    try? FileManager.default.removeItem(atPath: store + "/index.sqlite.member")

    let push = try RemoteTests.remote(store, ["push", digest.description])
    #expect(push.status == 0, "\(push.stderr)")
    let reader = scratch["r"]
    #expect(
      try RemoteTests.remote(reader, ["add", "b", dav.url("/b"), "--trust", publicKey]).status
        == 0)
    let got = try CLI.run(["--store", reader, "get", "https://example.com/tool.tgz", "-"])
    #expect(got.status != 0 && got.stdout.isEmpty, "\(got.stderr)")
  }

  @Test(
    "a binding a member appended to references.log while the store was shared is not replayed as the user's own after it is private and its index is rebuilt",
    .enabled(if: TestFilesystems.isRoot, "needs root to give the store a group"))
  func sharedJournalLinesStayUnsigned() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (keyFile, publicKey) = try Self.keygen(scratch, "ci")
    let store = try Self.signingStore(scratch, mode: 0o2770, dav: dav, keyFile: keyFile)
    let bytes = Bytes.random(3000, seed: 2825)
    let digest = try RemoteTests.put(store, bytes, in: scratch)
    let line =
      #"{"digest":"\#(digest.description)","key":"https://example.com/tool.tgz","op":"bind"}"#
    if !FileManager.default.fileExists(atPath: store + "/references.log") {
      _ = FileManager.default.createFile(atPath: store + "/references.log", contents: nil)
    }
    let log = try FileHandle(forWritingTo: URL(fileURLWithPath: store + "/references.log"))
    try log.seekToEnd()
    try log.write(contentsOf: Data((line + "\n").utf8))
    try log.close()
    #expect(try CLI.run(["--store", store, "config", "set", "access", "private"]).status == 0)
    // The index is lost; the next command rebuilds it from the objects and the log.
    for suffix in ["", "-wal", "-shm", "-journal"] {
      try? FileManager.default.removeItem(atPath: store + "/index.sqlite" + suffix)
    }
    let push = try RemoteTests.remote(store, ["push", digest.description])
    #expect(push.status == 0, "\(push.stderr)")
    let reader = scratch["r"]
    #expect(
      try RemoteTests.remote(reader, ["add", "b", dav.url("/b"), "--trust", publicKey]).status
        == 0)
    let got = try CLI.run(["--store", reader, "get", "https://example.com/tool.tgz", "-"])
    #expect(got.status != 0 && got.stdout.isEmpty, "\(got.stderr)")
  }

  @Test(
    "a signer in a group store vouches for the SHA-256 of the object's bytes, not a false one a member wrote into the index",
    .enabled(if: TestFilesystems.isRoot, "needs root to give the store a group"))
  func signedChecksumFromBytesInGroupStore() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (keyFile, publicKey) = try Self.keygen(scratch, "ci")
    let store = try Self.signingStore(scratch, mode: 0o2770, dav: dav, keyFile: keyFile)
    let bytes = Bytes.random(3000, seed: 2823)
    let digest = try RemoteTests.put(store, bytes, in: scratch)
    // Written into the index by a member, who may write it.
    let planted = try CLI.run(
      [],
      prefix: [
        "/usr/bin/env", "python3", "-c",
        "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"INSERT INTO checksums(algorithm, value, digest) VALUES ('sha256', ?, ?)\", ('ab'*32, sys.argv[2])); c.commit(); print(c.total_changes)",
        store + "/index.sqlite", digest.hex,
      ])
    #expect(planted.status == 0 && planted.out == "1\n", "\(planted.stderr)")
    let push = try RemoteTests.remote(store, ["push", digest.description])
    #expect(push.status == 0, "\(push.stderr)")
    let reader = scratch["r"]
    #expect(
      try RemoteTests.remote(reader, ["add", "b", dav.url("/b"), "--trust", publicKey]).status
        == 0)
    let got = try CLI.run(["--store", reader, "get", digest.description, "-"])
    #expect(got.status == 0 && got.stdout == bytes, "\(got.stderr)")
  }

  @Test(
    "group store: bob points config.json at alice's key; alice's push stops (exit 78) instead of signing bob's choice, signs with TROVE_SIGNING_KEY, and sends the key bob bound unsigned",
    .enabled(
      if: TestFilesystems.isRoot && TestFilesystems.setprivAvailable,
      "needs root and setpriv to run trove as other users"))
  func signingKeyChosenByAnotherMember() throws {
    let dav = try Nginx(webDAV: true)
    let (alice, bob) = (AccessTests.alice, AccessTests.bob)
    let scratch = try Scratch()
    #expect(chmod(scratch.path, 0o777) == 0)
    let store = scratch["store"]
    try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: false)
    #expect(chown(store, 0, AccessTests.team) == 0 && chmod(store, 0o2770) == 0)
    func trove(_ user: [String], _ arguments: [String], _ environment: [String: String] = [:])
      throws -> CLI.Result
    {
      try CLI.run(["--store", store] + arguments, environment: environment, prefix: user)
    }
    let keyFile = scratch["alice.key"]
    let made = try CLI.run(["keygen", "alice", "--out", keyFile], prefix: alice)
    #expect(made.status == 0, "\(made.stderr)")
    let publicKey = made.out.trimmingCharacters(in: .newlines)
    #expect(
      try trove(alice, ["remote", "add", "b", dav.url("/b"), "--write", "off"]).status == 0)
    #expect(try trove(alice, ["config", "set", "signing-key", keyFile]).status == 0)
    // Bob rewrites config.json (the root folder is the group's): it keeps
    // naming alice's key, and is his now.
    let rewrite = try CLI.run(
      [],
      prefix: bob + [
        "/bin/sh", "-c", "cd \"$1\" && cat config.json > c.new && mv -f c.new config.json", "sh",
        store,
      ])
    #expect(rewrite.status == 0, "\(rewrite.stderr)")
    let input = scratch["in"]
    try Data(Bytes.random(4000, seed: 2814)).write(to: URL(fileURLWithPath: input))
    #expect(chmod(input, 0o644) == 0)
    let put = try trove(alice, ["put", input])
    #expect(put.status == 0, "\(put.stderr)")
    let digest = String(put.out.prefix { $0 != " " && $0 != "\n" })
    let push = try trove(alice, ["remote", "push", digest])
    #expect(push.status == 78 && push.errorLines.count == 1, "\(push.stderr)")
    #expect(push.stderr.contains("is owned by uid 60002"), "\(push.stderr)")
    #expect(
      !FileManager.default.fileExists(
        atPath: dav.files["b/" + remoteBlobPath(try BlobDigest(parsing: digest))]))

    let own = try trove(alice, ["remote", "push", digest], ["TROVE_SIGNING_KEY": keyFile])
    #expect(own.status == 0, "\(own.stderr)")
    let reader = scratch["r"]
    #expect(
      try RemoteTests.remote(reader, ["add", "b", dav.url("/b"), "--trust", publicKey]).status
        == 0)
    #expect(try CLI.run(["--store", reader, "get", digest, "-"]).status == 0)

    // A key bob bound: alice's signing push sends its record unsigned (the
    // index does not say whose a binding is), so the reader binds nothing.
    let evil = scratch["evil"]
    try Data(Bytes.random(3000, seed: 2815)).write(to: URL(fileURLWithPath: evil))
    #expect(chmod(evil, 0o644) == 0)
    let bobPut = try trove(bob, ["put", "--key", "tool", evil])
    #expect(bobPut.status == 0, "\(bobPut.stderr)")
    let evilDigest = String(bobPut.out.prefix { $0 != " " && $0 != "\n" })
    let signed = try trove(alice, ["remote", "push", evilDigest], ["TROVE_SIGNING_KEY": keyFile])
    #expect(signed.status == 0, "\(signed.stderr)")
    #expect(signed.stderr.contains("pushed unsigned"), "\(signed.stderr)")
    let looked = try CLI.run(["--store", reader, "get", "tool", "-"])
    #expect(looked.status == 1, "\(looked.stderr)")
  }

  @Test(
    "remote-first eviction keeps an object a trusting store pushed unsigned (readers of that remote could not use it) and evicts one pushed signed by a trusted key"
  )
  func evictionNeedsTrustedCopy() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (keyFile, publicKey) = try Self.keygen(scratch, "ci")
    let store = scratch["s"]
    #expect(
      try RemoteTests.remote(
        store, ["add", "shared", dav.url("/ev"), "--trust", publicKey, "--write", "off"]
      ).status == 0)
    var digests: [BlobDigest] = []
    for i in 0..<3 {
      digests.append(
        try RemoteTests.put(store, Bytes.random(100_000, seed: UInt64(2820 + i)), in: scratch))
      usleep(20_000)  // distinct last accesses: 0 is the least recently used
    }
    // No signing key: the remote holds it, no trusted key signed it.
    #expect(try RemoteTests.remote(store, ["push", digests[1].description]).status == 0)
    #expect(try CLI.run(["--store", store, "sweep", "--budget", "250K"]).status == 0)
    #expect(try Set(RemoteTests.digests(store)) == [digests[1], digests[2]])
    let got = try CLI.run(["--store", store, "get", digests[1].description, "-"])
    #expect(got.status == 0 && got.stdout.count == 100_000, "\(got.stderr)")

    // Signed by the key it trusts: that copy is one it can read back.
    #expect(try CLI.run(["--store", store, "config", "set", "signing-key", keyFile]).status == 0)
    #expect(try RemoteTests.remote(store, ["push", digests[2].description]).status == 0)
    #expect(try CLI.run(["--store", store, "sweep", "--budget", "150K"]).status == 0)
    #expect(try Set(RemoteTests.digests(store)) == [digests[1]])
    let back = try CLI.run(["--store", store, "get", digests[2].description, "-"])
    #expect(back.status == 0 && back.stdout.count == 100_000, "\(back.stderr)")
  }

  @Test(
    "an owner check: remote status and doctor warn when another user owns remotes.json (its remotes and trust are theirs)",
    .enabled(if: TestFilesystems.isRoot, "needs root to give remotes.json to another user"))
  func remotesOfAnotherUser() throws {
    let scratch = try Scratch()
    let store = scratch["s"]
    #expect(
      try RemoteTests.remote(store, ["add", "shared", "http://127.0.0.1:9/x", "--read-only"])
        .status == 0)
    let mine = try RemoteTests.remote(store, ["status"])
    #expect(mine.status == 0 && !mine.stderr.contains("owned by uid"), "\(mine.stderr)")
    #expect(chown(store + "/remotes.json", 60001, 60001) == 0)
    let status = try RemoteTests.remote(store, ["status"])
    #expect(status.status == 0, "\(status.stderr)")
    #expect(
      status.stderr.contains("remotes.json' is owned by uid 60001")
        && status.stderr.contains("trusted keys are another user's choice"), "\(status.stderr)")
    let doctor = try CLI.run(["--store", store, "doctor", scratch.path])
    #expect(doctor.status == 0, "\(doctor.stderr)")
    #expect(doctor.out.contains("warn  remotes-owner"), "\(doctor.out)")
  }

  @Test(
    "a signed entry over 64 KiB (WebDAV, Redis) is a failure of the remote that counts toward its breaker, not an unsigned object; the signer replaces it"
  )
  func oversizedSignedEntry() throws {
    let dav = try Nginx(webDAV: true)
    let redis = try RedisServer()
    for url in [dav.url("/big"), redis.url(database: 12)] {
      let scratch = try Scratch()
      let (writer, trusting, _, _) = try Self.stores(scratch, url: url)
      let bytes = Bytes.random(4000, seed: 2830)
      let digest = try RemoteTests.put(writer, bytes, in: scratch)
      let padded = [UInt8](repeating: 0x20, count: SignedObjectEntry.sizeLimit + 10)
      if url.hasPrefix("redis") {
        try redis.command(["SET", "trove:sig:\(digest.hex)"], database: 12, payload: padded)
      } else {
        try Self.plant(padded, at: Self.entryPath(dav, "big", digest))
      }
      let pull = try RemoteTests.remote(trusting, ["pull", digest.description])
      #expect(pull.status == 69, "\(url): \(pull.stderr)")
      #expect(pull.stderr.contains("longer than 64 KiB"), "\(url): \(pull.stderr)")
      let status = try RemoteTests.remote(trusting, ["status", "--json"])
      let records = try JSONSerialization.jsonObject(with: Data(status.stdout)) as? [[String: Any]]
      let record = try #require(records?.first)
      #expect(record["errors"] as? Int == 1, "\(url): \(record)")
      #expect(record["untrusted"] as? Int == 0, "\(url): \(record)")
      // The signer replaces it, and readers then take the object: one
      // planted entry does not stop the signer's pushes.
      let pushed = try RemoteTests.remote(writer, ["push", digest.description])
      #expect(pushed.status == 0, "\(url): \(pushed.stderr)")
      let again = try RemoteTests.remote(trusting, ["pull", digest.description])
      #expect(again.status == 0, "\(url): \(again.stderr)")
    }
  }

  @Test(
    "a signer keeps only signatures that verify under keys it knows: junk padding on the remote's entry is dropped, and readers accept the re-signed entry"
  )
  func junkSignaturesDropped() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (writer, trusting, _, _) = try Self.stores(scratch, url: dav.url("/pad"))
    let bytes = Bytes.random(5000, seed: 2840)
    let digest = XXH3Hasher.digest(bytes)
    // A remote writer's entry of these facts, padded with signatures of
    // keys no one trusts and long names, just under the limit.
    var junk: [RemoteSignature] = []
    for _ in 0..<15 {
      let key = try #require(Ed25519.PrivateKey.generate()).publicKey
      junk.append(
        RemoteSignature(
          key: key, name: String(repeating: "n", count: 4000),
          signature: Data(repeating: 7, count: 64).base64EncodedString()))
    }
    var entry = SignedObjectEntry(
      format: SignedObjectEntry.currentFormat, digest: digest.description,
      size: Int64(bytes.count), sha256: Self.sha(bytes).description, signatures: junk)
    let room = SignedObjectEntry.sizeLimit - 80 - entry.encoded().count
    entry.signatures[0].name += String(repeating: "n", count: room)
    #expect(entry.encoded().count == SignedObjectEntry.sizeLimit - 80)
    try Self.plant(entry.encoded(), at: Self.entryPath(dav, "pad", digest))

    let put = try CLI.run(["--store", writer, "put", try scratch.write("in", bytes)])
    #expect(put.status == 0, "\(put.stderr)")
    let written = try contents(Self.entryPath(dav, "pad", digest))
    #expect(written.count < 1000, "\(written.count) bytes")
    let pulled = try RemoteTests.remote(trusting, ["pull", digest.description])
    #expect(pulled.status == 0, "\(pulled.stderr)")
    #expect(try Self.counts(trusting).untrusted == 0)
  }

  @Test(
    "a signed record naming an object this store holds, with another SHA-256 than its bytes, binds nothing and is counted corrupt"
  )
  func signedRecordOfLocalObjectWithOtherSHA() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (_, trusting, _, keyFile) = try Self.stores(scratch, url: dav.url("/local"))
    let bytes = Bytes.random(3000, seed: 2850)
    let digest = try RemoteTests.put(trusting, bytes, in: scratch)
    let record = RemoteKeyRecord(
      key: "k/local", digest: digest.description, origin: nil, checksums: []
    ).signed(
      by: try SigningKey.load(keyFile),
      facts: SignedFacts(size: Int64(bytes.count), sha256: Self.sha(bytes + [0])), time: 1)
    try Self.plant(record.encoded(), at: RemoteKeyPullTests.recordPath(dav, "local", "k/local"))
    let got = try CLI.run(["--store", trusting, "get", "k/local", "-"])
    #expect(got.status == 1 && got.stdout.isEmpty, "\(got.stderr)")
    #expect(!(try trove(trusting, ["keys"]).out.contains("k/local")))
    #expect(try Self.counts(trusting).corrupt == 1)
    #expect(try RemoteTests.digests(trusting) == [digest])
  }
}
