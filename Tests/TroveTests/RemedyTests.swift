import Foundation
import Synchronization
import Testing

@testable import Trove

/// A library error says what failed and why, and names what would fix it
/// as a ``TroveError/Remedy``, never as a command line; the `trove`
/// command words the remedy (its commands and options) after the message.
@Suite("error remedies")
struct RemedyTests {
  /// Whether `text` prescribes a command line: a `trove` command or an
  /// option such as `--store`.
  static func namesCommandLine(_ text: String) -> Bool {
    text.contains("trove ") || text.contains(/--[a-z]/)
  }

  /// The error `body` throws, which it must.
  static func failure<T>(
    _ body: () throws(TroveError) -> T, sourceLocation: SourceLocation = #_sourceLocation
  ) -> TroveError? {
    do throws(TroveError) {
      _ = try body()
      Issue.record("no error", sourceLocation: sourceLocation)
      return nil
    } catch {
      #expect(
        !namesCommandLine(error.message), "\(error.message)", sourceLocation: sourceLocation)
      return error
    }
  }

  func objectPath(_ root: String, _ digest: BlobDigest) -> String {
    root + "/objects/\(digest.hex.prefix(2))/\(digest.hex)"
  }

  @Test(
    "an object replaced by a link is corrupt: the remedy is a repair, the message names no command")
  func linkedObject() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let file = try scratch.write("in", Bytes.random(50_000, seed: 71))
    let digest = try store.put(file: file).digest
    let object = objectPath(store.root, digest)
    try FileManager.default.removeItem(atPath: object)
    try FileManager.default.createSymbolicLink(atPath: object, withDestinationPath: file)
    let error = try #require(
      Self.failure { () throws(TroveError) in
        try store.materialize(digest, at: scratch["out"])
      })
    #expect(error.code == .corruptObject && error.path == object)
    #expect(error.remedy == .repairStore)
    #expect(error.description == "object '\(object)' is corrupt: it is a symbolic link")
  }

  @Test("a flipped byte: the object is quarantined, and the remedy is to store the bytes again")
  func flippedByte() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let data = Bytes.random(50_000, seed: 72)
    let digest = try store.put(file: try scratch.write("in", data)).digest
    let object = objectPath(store.root, digest)
    #expect(chmod(object, 0o644) == 0)
    var flipped = data
    flipped[100] ^= 1
    try Data(flipped).write(to: URL(fileURLWithPath: object))
    let error = try #require(
      Self.failure { () throws(TroveError) in
        try store.materialize(digest, at: scratch["out"], mode: .copy)
      })
    #expect(error.code == .corruptObject && error.remedy == .storeAgain)
    #expect(error.message.contains("moved it to '\(store.root)/quarantine/"), "\(error.message)")
    #expect(error.message.hasSuffix("'"), "\(error.message)")
  }

  @Test("settings, size limits and expected sizes: each error's remedy, no command in its message")
  func settingsAndSizes() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    _ = try store.setPolicy(.maximumObjectSize, to: "1000")
    let big = try scratch.write("big", Bytes.random(5000, seed: 73))
    let tooLarge = Self.failure { () throws(TroveError) in try store.put(file: big) }
    #expect(tooLarge?.code == .tooLarge && tooLarge?.remedy == .raiseMaximumObjectSize)
    let small = try scratch.write("small", Bytes.random(500, seed: 74))
    let short = Self.failure { () throws(TroveError) in
      try store.put(file: small, expectedSize: 600)
    }
    #expect(short?.code == .checksumMismatch && short?.remedy == .checkExpectedSize)
    #expect(short?.message == "'\(small)' is 500 bytes, expected 600")

    let config = store.root + "/config.json"
    let text = try String(contentsOfFile: config, encoding: .utf8)
    try text.replacingOccurrences(of: "\"budget\" : null", with: "\"budget\" : -5")
      .write(toFile: config, atomically: true, encoding: .utf8)
    #expect(text.contains("\"budget\" : null"), "\(text)")
    let invalid = Self.failure { () throws(TroveError) in try store.policy() }
    #expect(invalid?.code == .invalidConfig && invalid?.remedy == .repairSettings(key: .budget))
    try "not json".write(toFile: config, atomically: true, encoding: .utf8)
    let damaged = Self.failure { () throws(TroveError) in try store.policy() }
    #expect(damaged?.code == .invalidConfig && damaged?.remedy == .repairSettings(key: nil))
  }

  @Test("remotes: an unknown name, a taken name, a password in the URL, an open breaker")
  func remotes() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let unknown = Self.failure { () throws(TroveError) in try store.remote(named: "nope") }
    #expect(unknown?.code == .notFound && unknown?.remedy == .listRemotes)
    let spec = RemoteSpec(name: "down", url: "http://127.0.0.1:9/base")
    try store.addRemote(spec)
    let taken = Self.failure { () throws(TroveError) in try store.addRemote(spec) }
    #expect(taken?.remedy == .removeRemoteFirst(name: "down"))
    let password = Self.failure { () throws(TroveError) in
      try store.addRemote(RemoteSpec(name: "pw", url: "http://user:secret@127.0.0.1:9/"))
    }
    #expect(password?.remedy == .credentialVariable)
    let absent = XXH3Hasher.digest(Bytes.random(100, seed: 75))
    // The first pin finds the remote unreachable, which opens its breaker;
    // the second does not ask it.
    let unreachable = Self.failure { () throws(TroveError) in try store.pinLocal(absent) }
    #expect(unreachable?.code == .unavailable)
    let skipped = Self.failure { () throws(TroveError) in try store.pinLocal(absent) }
    #expect(skipped?.code == .unavailable && skipped?.remedy == .remoteStatus(name: "down"))
    #expect(skipped?.message.contains("circuit breaker is open; not pinned") == true)
  }

  @Test("an offline fetch of what the store lacks: the remedy is the network")
  func offlineFetch() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    let url = "http://127.0.0.1:9/absent"
    let error = Self.failure { () throws(TroveError) in
      try store.fetch(FetchRequest(url: url, mode: .offline))
    }
    #expect(error?.code == .notFound && error?.remedy == .allowNetwork)
    #expect(error?.message == "'\(url)' is not in store '\(store.root)'")
  }

  @Test("doctor's findings and advice name no command; its warnings carry remedies")
  func diagnosis() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    try FileManager.default.createDirectory(
      atPath: scratch["work"], withIntermediateDirectories: true)
    let diagnosis = try store.diagnose(destination: scratch["work"])
    for check in diagnosis.checks {
      #expect(!Self.namesCommandLine(check.detail), "\(check.detail)")
      #expect(!Self.namesCommandLine(check.advice ?? ""), "\(check.advice ?? "")")
      if check.status == .ok { #expect(check.remedy == nil) }
    }
  }

  @Test("the command words each remedy: the message, then what to type")
  func commandWording() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let data = Bytes.random(50_000, seed: 76)
    let file = try scratch.write("in", data)
    #expect(try CLI.run(["--store", store, "put", file]).status == 0)
    let digest = XXH3Hasher.digest(data)
    let object = objectPath(store, digest)
    try FileManager.default.removeItem(atPath: object)
    try FileManager.default.createSymbolicLink(atPath: object, withDestinationPath: file)
    let get = try CLI.run(["--store", store, "get", digest.description, scratch["out"]])
    #expect(
      get.stderr
        == "Error: object '\(object)' is corrupt: it is a symbolic link; run 'trove verify --repair'\n"
    )
    let add = ["--store", store, "remote", "add", "down", "http://127.0.0.1:9/base"]
    #expect(try CLI.run(add).status == 0)
    let again = try CLI.run(add)
    #expect(
      again.stderr
        == "Error: remote 'down' already exists in store '\(store)'; remove it first with 'trove remote rm down'\n"
    )
  }

  @Test(
    "text the store composes from an error words its remedy as the program says, else not at all")
  func composedText() throws {
    let scratch = try Scratch()
    let root = scratch["store"]
    _ = try scratch.store()
    // A password in a remote's URL, written by hand: the remotes cannot be
    // listed, and a read through warns so, a text the store composes.
    try Data(
      #"{"format": 1, "remotes": [{"name": "pw", "url": "http://u:secret@127.0.0.1:9/", "read-only": true}]}"#
        .utf8
    ).write(to: URL(fileURLWithPath: root + "/remotes.json"))
    let line =
      "'\(root)/remotes.json': invalid remote URL 'http://***@127.0.0.1:9/': it holds a password"
    let absent = XXH3Hasher.digest(Bytes.random(100, seed: 77))
    func warnings(_ wording: (@Sendable (TroveError.Remedy) -> String)?) throws -> [String] {
      let said = Mutex<[String]>([])
      let store = try Store(
        StoreConfiguration(
          root: root, onWarning: { text in said.withLock { $0.append(text) } },
          remedyWording: wording))
      let error = Self.failure { () throws(TroveError) in try store.remotes() }
      #expect(error?.description == line && error?.remedy == .credentialVariable)
      _ = try? store.materialize(absent, at: scratch["out"])
      return said.withLock { $0 }
    }
    #expect(try warnings(nil) == ["remotes not consulted: \(line)"])
    #expect(
      try warnings({ " [\($0)]" }) == ["remotes not consulted: \(line) [credentialVariable]"])
    let hint =
      "; put the credential in an environment variable and name it with --auth-env (over HTTP, ~/.netrc serves too)"
    let ls = try CLI.run(["--store", root, "remote", "ls"])
    #expect(ls.stderr == "Error: \(line)\(hint)\n")
    let get = try CLI.run(["--store", root, "get", absent.description, scratch["out"]])
    #expect(get.stderr.hasPrefix("trove: warning: remotes not consulted: \(line)\(hint)\n"))
  }
}
