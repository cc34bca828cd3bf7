import Foundation
import Testing

@testable import Trove

/// Keys and pins across a remote: `remote pull KEY`,
/// `has --remote KEY`, `pin --local`, against real nginx (WebDAV) on
/// 127.0.0.1.
@Suite(
  "keys and local pins through remotes",
  .enabled(if: Nginx.executable != nil, Nginx.missing))
struct RemoteKeyPullTests {
  /// The record file of `key` under nginx's root, for base path `base`.
  static func recordPath(_ dav: Nginx, _ base: String, _ key: String) -> String {
    dav.files["\(base)/keys/\(XXH3Hasher.digest(Array(key.utf8)).hex).json"]
  }

  @Test(
    "remote pull and has --remote of a key: found by its record, pulled, bound; lies bind nothing")
  func pullKey() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (a, b) = (scratch["a"], scratch["b"])
    #expect(
      try RemoteTests.remote(a, ["add", "shared", dav.url("/kp"), "--write", "sync"]).status == 0)
    #expect(
      try RemoteTests.remote(b, ["add", "shared", dav.url("/kp"), "--read-only"]).status == 0)
    let bytes = Bytes.random(80_000, seed: 3101)
    let digest = XXH3Hasher.digest(bytes)
    let file = try scratch.write("in", bytes)
    #expect(try CLI.run(["--store", a, "put", "--key", "models/base", file]).status == 0)

    // has: the key is unknown to B; --remote finds its record and blob,
    // and downloads nothing.
    #expect(try CLI.run(["--store", b, "has", "models/base"]).status == 1)
    let has = try CLI.run(["--store", b, "has", "-v", "--remote", "models/base"])
    #expect(has.status == 0 && has.stderr.contains("present on remote 'shared'"), "\(has.stderr)")
    let hasNone = try CLI.run(["--store", b, "has", "--remote", "models/none"])
    #expect(hasNone.status == 1, "\(hasNone.stderr)")
    #expect(try RemoteTests.digests(b) == [])

    let pulled = try RemoteTests.remote(b, ["pull", "--json", "models/base"])
    #expect(pulled.status == 0, "\(pulled.stderr)")
    let records = try #require(
      try JSONSerialization.jsonObject(with: Data(pulled.stdout)) as? [[String: Any]])
    #expect(records.count == 1)
    #expect(records[0]["key"] as? String == "models/base")
    #expect(records[0]["digest"] as? String == digest.description)
    #expect(records[0]["outcome"] as? String == "pulled")
    #expect(records[0]["remote"] as? String == "shared")
    #expect(records[0]["size"] as? Int == bytes.count)
    #expect(records[0]["error"] is NSNull)
    #expect(try RemoteTests.digests(b) == [digest])
    #expect(try CLI.run(["--store", b, "get", "models/base", "-"]).stdout == bytes)
    let again = try RemoteTests.remote(b, ["pull", "models/base"])
    #expect(again.status == 0 && again.out == "models/base  already in the store\n", "\(again.out)")

    // A second key naming a blob B holds: only the key is bound.
    #expect(try CLI.run(["--store", a, "put", "--key", "models/alias", file]).status == 0)
    #expect(try RemoteTests.remote(a, ["push", digest.description]).status == 0)
    let alias = try RemoteTests.remote(b, ["pull", "models/alias"])
    #expect(alias.status == 0, "\(alias.stderr)")
    #expect(
      alias.out == "models/alias  \(digest)  bound from the record on 'shared'\n", "\(alias.out)")
    #expect(try CLI.run(["--store", b, "get", "models/alias", "-"]).stdout == bytes)

    // No record: exit 1, naming the key; nothing bound.
    let none = try RemoteTests.remote(b, ["pull", "models/none"])
    #expect(none.status == 1, "\(none.stderr)")
    #expect(
      none.stderr == "Error: remote 'shared' has no record of key 'models/none'\n",
      "\(none.stderr)")

    // A record claiming a checksum the bytes do not have binds nothing.
    let lie = "sha256:" + String(repeating: "cd", count: 32)
    let json =
      #"{"checksums":["\#(lie)"],"digest":"\#(digest)","key":"models/lying","origin":null}"#
    try Data(json.utf8).write(
      to: URL(fileURLWithPath: Self.recordPath(dav, "kp", "models/lying")))
    let lying = try RemoteTests.remote(b, ["pull", "models/lying"])
    #expect(lying.status == 65, "\(lying.stderr)")
    #expect(
      lying.stderr.contains("says \(digest) has \(lie), which its bytes do not; key not bound"))
    #expect(try CLI.run(["--store", b, "has", "models/lying"]).status == 1)

    // A key of 32 hex digits (an md5-named artefact) is a key, as
    // everywhere; 32 digits no record names are the digest they spell.
    let md5 = "5d41402abc4b2a76b9719d911017c592"
    let hexBytes = Bytes.random(20_000, seed: 3105)
    let hexFile = try scratch.write("hex", hexBytes)
    #expect(try CLI.run(["--store", a, "put", "--key", md5, hexFile]).status == 0)
    let hexHas = try CLI.run(["--store", b, "has", "-v", "--remote", md5])
    #expect(hexHas.status == 0 && hexHas.stderr.contains("present on remote"), "\(hexHas.stderr)")
    let hexPull = try RemoteTests.remote(b, ["pull", md5])
    #expect(hexPull.status == 0, "\(hexPull.stderr)")
    #expect(try CLI.run(["--store", b, "get", md5, "-"]).stdout == hexBytes)
    let other = Bytes.random(9_000, seed: 3106)
    let otherDigest = try RemoteTests.put(a, other, in: scratch)
    let byHex = try RemoteTests.remote(b, ["pull", otherDigest.hex])
    #expect(byHex.status == 0 && byHex.out.contains("pulled from 'shared'"), "\(byHex.stderr)")
    // A short hex key only a remote knows is read through by get.
    let shortBytes = Bytes.random(7_000, seed: 3107)
    let shortFile = try scratch.write("short", shortBytes)
    #expect(try CLI.run(["--store", a, "put", "--key", "cafe1234", shortFile]).status == 0)
    let short = try CLI.run(["--store", b, "get", "cafe1234", "-"])
    #expect(short.status == 0 && short.stdout == shortBytes, "\(short.stderr)")

    // What no remote can look up is a usage error, before anything is asked.
    for text in [lie, "xxh128:0123abcd"] {
      let refused = try RemoteTests.remote(b, ["pull", text])
      #expect(refused.status == 64, "\(text): \(refused.stderr)")
    }
    #expect(RemoteTests.leftovers(b) == [])
  }

  @Test(
    "pin --local brings back an evicted object and a key only the remote has; pin alone does not")
  func pinLocal() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (a, b) = try RemoteTests.twoStores(scratch, url: dav.url("/pl"))
    let bytes = Bytes.random(120_000, seed: 3102)
    let digest = try RemoteTests.put(a, bytes, in: scratch)
    let keyed = Bytes.random(30_000, seed: 3103)
    let file = try scratch.write("keyed", keyed)
    #expect(try CLI.run(["--store", a, "put", "--key", "data/set", file]).status == 0)
    let keyedDigest = XXH3Hasher.digest(keyed)
    #expect(
      try RemoteTests.remote(a, ["push", digest.description, keyedDigest.description]).status == 0)

    // B reads the object through, then evicts it: the remote holds it.
    #expect(try CLI.run(["--store", b, "get", digest.description, "-"]).stdout == bytes)
    #expect(try CLI.run(["--store", b, "sweep", "--budget", "0"]).status == 0)
    #expect(try RemoteTests.digests(b) == [])

    // A plain pin never downloads.
    let plain = try CLI.run(["--store", b, "pin", digest.description])
    #expect(plain.status == 1, "\(plain.stderr)")
    #expect(try RemoteTests.digests(b) == [])

    let local = try CLI.run(["--store", b, "pin", "--local", "--name", "ci", digest.description])
    #expect(local.status == 0, "\(local.stderr)")
    let byKey = try CLI.run(["--store", b, "pin", "--local", "data/set"])
    #expect(byKey.status == 0, "\(byKey.stderr)")
    // Pinned, local, and kept by a sweep that may evict everything else.
    #expect(try CLI.run(["--store", b, "sweep", "--budget", "0"]).status == 0)
    #expect(try Set(RemoteTests.digests(b)) == [digest, keyedDigest])
    let pins = try CLI.run(["--store", b, "pins"])
    #expect(pins.out.contains("\(digest)  ci") && pins.out.contains("\(keyedDigest)  default"))
    #expect(try CLI.run(["--store", b, "get", "data/set", "-"]).stdout == keyed)

    // Nowhere at all: exit 1 naming it; nothing pinned.
    let absent = XXH3Hasher.digest(Bytes.random(10, seed: 3104))
    let missing = try CLI.run(["--store", b, "pin", "--local", absent.description])
    #expect(missing.status == 1, "\(missing.stderr)")
    #expect(
      missing.stderr.contains("\(absent) is neither in store '\(b)' nor on any of its remotes"),
      "\(missing.stderr)")
    #expect(!(try CLI.run(["--store", b, "pins"]).out.contains(absent.description)))
    #expect(RemoteTests.leftovers(b) == [])

    // A remote that cannot be asked is not "not there": exit 69, naming it,
    // also when its breaker skips it.
    let c = scratch["c"]
    #expect(
      try RemoteTests.remote(c, ["add", "gone", "http://127.0.0.1:\(deadPort())/x"]).status == 0)
    for attempt in 0..<2 {
      let dead = try CLI.run(["--store", c, "pin", "--local", digest.description])
      #expect(dead.status == 69, "\(attempt): \(dead.stderr)")
      #expect(
        dead.stderr.contains("Error: \(digest) is not in store '\(c)', and remote 'gone'"),
        "\(attempt): \(dead.stderr)")
      #expect(dead.stderr.contains("; not pinned"), "\(dead.stderr)")
    }
  }

  /// Whether `store` binds `key` as pulled (``KeyBinding/isPulled``).
  static func isPulled(_ store: String, _ key: String) throws -> Bool? {
    try Store(StoreConfiguration(root: store, createIfMissing: false, recordName: nil))
      .binding(forKey: key)?.isPulled
  }

  @Test(
    "export keeps a pulled key pulled; an import, of a folder or an archive, binds every key as pulled"
  )
  func pulledMarkSurvivesExport() throws {
    let dav = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (a, b) = (scratch["a"], scratch["b"])
    #expect(
      try RemoteTests.remote(a, ["add", "shared", dav.url("/pm"), "--write", "sync"]).status == 0)
    #expect(
      try RemoteTests.remote(b, ["add", "shared", dav.url("/pm"), "--read-only"]).status == 0)
    let theirs = try scratch.write("theirs", Bytes.random(5_000, seed: 3102))
    let mine = try scratch.write("mine", Bytes.random(5_000, seed: 3103))
    #expect(try CLI.run(["--store", a, "put", "--key", "models/theirs", theirs]).status == 0)
    #expect(try CLI.run(["--store", b, "record", "start", "set"]).status == 0)
    let pulled = try RemoteTests.remote(b, ["pull", "models/theirs"])
    #expect(pulled.status == 0, "\(pulled.stderr)")
    #expect(try CLI.run(["--store", b, "get", "models/theirs", "-"]).status == 0)
    #expect(try CLI.run(["--store", b, "put", "--key", "models/mine", mine]).status == 0)
    #expect(try CLI.run(["--store", b, "record", "stop", "set"]).status == 0)
    #expect(try Self.isPulled(b, "models/theirs") == true)
    #expect(try Self.isPulled(b, "models/mine") == false)

    // A folder: each key keeps its mark through export; an import of it
    // binds them all as pulled, another store's word.
    let folder = try CLI.run(["--store", b, "export", "--record", "set", scratch["folder"]])
    #expect(folder.status == 0, "\(folder.stderr)")
    #expect(try Self.isPulled(scratch["folder"], "models/theirs") == true)
    #expect(try Self.isPulled(scratch["folder"], "models/mine") == false)
    let fromFolder = try CLI.run(["--store", scratch["c"], "import", scratch["folder"]])
    #expect(fromFolder.status == 0, "\(fromFolder.stderr)")
    #expect(try Self.isPulled(scratch["c"], "models/theirs") == true)
    #expect(try Self.isPulled(scratch["c"], "models/mine") == true)

    // An archive: its manifest lists the pulled key; every key it binds is pulled.
    let tar = scratch["set.tar"]
    let archive = try CLI.run(["--store", b, "export", "--record", "set", tar])
    #expect(archive.status == 0, "\(archive.stderr)")
    let listed = try CLI.run(
      [], prefix: ["/bin/bash", "-c", "tar -xOf '\(tar)' trove-export.json"])
    #expect(listed.out.contains("\"pulled\""), "\(listed.out)")
    let fromArchive = try CLI.run(["--store", scratch["d"], "import", tar])
    #expect(fromArchive.status == 0, "\(fromArchive.stderr)")
    #expect(try Self.isPulled(scratch["d"], "models/theirs") == true)
    #expect(try Self.isPulled(scratch["d"], "models/mine") == true)
  }
}
