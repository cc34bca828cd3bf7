import Foundation
import Testing

@testable import Trove

/// A damaged or hand-edited `config.json`, through the `trove` command:
/// reads go on, everything the policy decides is refused naming the
/// setting, and `config set` / `config reset` repair it.
@Suite("a damaged or invalid config.json")
struct ConfigTests {
  /// A store holding `count` objects put through the CLI, and their digests.
  static func store(_ scratch: Scratch, objects count: Int, seed: UInt64) throws -> [String] {
    try (0..<count).map { i in
      let put = try CLI.run(
        ["--store", scratch["store"], "put", "-"],
        stdin: Bytes.random(20_000, seed: seed + UInt64(i)))
      #expect(put.status == 0, "\(put.stderr)")
      return String(put.out.prefix(39))
    }
  }

  /// The object files under `objects/`.
  static func objectFiles(_ scratch: Scratch) throws -> [String] {
    try FileManager.default.subpathsOfDirectory(atPath: scratch["store/objects"])
      .filter { $0.contains("/") }.sorted()
  }

  /// Rewrites `config.json` with `policy[key] = value` for each change (a
  /// JSON fragment, as a hand edit would leave it).
  static func edit(_ scratch: Scratch, _ changes: [String: String]) throws {
    let path = scratch["store/config.json"]
    var file = try JSONSerialization.jsonObject(with: Data(try contents(path))) as! [String: Any]
    var policy = file["policy"] as? [String: Any] ?? [:]
    for (key, fragment) in changes {
      policy[key] = try JSONSerialization.jsonObject(
        with: Data(fragment.utf8), options: .fragmentsAllowed)
    }
    file["policy"] = policy
    try JSONSerialization.data(withJSONObject: file).write(to: URL(fileURLWithPath: path))
  }

  @Test(
    "garbage in config.json: get -, has, ls, stats work; put, sweep, fetch and config refuse naming the file; config set repairs it"
  )
  func garbage() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let digests = try Self.store(scratch, objects: 2, seed: 100)
    try scratch.write("store/config.json", Array("{\"format\": 1, \"policy\": {budg".utf8))

    let get = try CLI.run(["--store", store, "get", digests[0], "-"])
    #expect(get.status == 0 && get.stdout == Bytes.random(20_000, seed: 100), "\(get.stderr)")
    #expect(try CLI.run(["--store", store, "has", digests[1]]).status == 0)
    #expect(try CLI.run(["--store", store, "ls"]).out.split(separator: "\n").count == 2)
    let stats = try CLI.run(["--store", store, "stats"])
    #expect(stats.status == 0 && stats.out.contains("it is not valid JSON"), "\(stats.stderr)")

    let line =
      "Error: '\(scratch["store/config.json"])' is damaged: it is not valid JSON; repair it with 'trove config reset' or 'trove config set KEY VALUE' (either writes the defaults for the other settings)"
    let file = try scratch.write("new", Bytes.random(5000, seed: 109))
    for command in [
      ["put", file], ["put", "-"], ["sweep"], ["config"], ["config", "get", "budget"],
      ["fetch", "http://127.0.0.1:1/x"],
    ] {
      let run = try CLI.run(["--store", store] + command, stdin: [1, 2, 3])
      #expect(run.status == 78, "\(command): \(run.stderr)")
      #expect(run.errorLines == [line], "\(command)")
    }
    #expect(try Self.objectFiles(scratch).count == 2)
    #expect(scratch.temporaries("store").isEmpty)

    let set = try CLI.run(["--store", store, "config", "set", "budget", "1G"])
    #expect(set.status == 0, "\(set.stderr)")
    #expect(set.stderr.contains("was damaged (it is not valid JSON)"))
    #expect(try CLI.run(["--store", store, "config", "get", "budget"]).out == "1 GB\n")
    #expect(try CLI.run(["--store", store, "put", file]).status == 0)
    #expect(try Self.objectFiles(scratch).count == 3)
  }

  @Test(
    "a budget or max-age of -5 written by hand: put and sweep refuse naming it, nothing is evicted",
    arguments: ["budget", "max-age"])
  func negative(key: String) throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let digests = try Self.store(scratch, objects: 4, seed: 200)
    let before = try Self.objectFiles(scratch)
    try Self.edit(scratch, [key: "-5"])

    let file = try scratch.write("new", Bytes.random(30_000, seed: 209))
    for command in [
      ["put", file], ["sweep"], ["sweep", "--dry-run"], ["sweep", "--budget", "1G"],
    ] {
      let run = try CLI.run(["--store", store] + command)
      #expect(run.status == 78, "\(command): \(run.stderr)")
      #expect(run.errorLines.count == 1, "\(command): \(run.stderr)")
      #expect(
        run.stderr.hasPrefix(
          "Error: invalid \(key) -5 in '\(scratch["store/config.json"])': expected "),
        "\(command): \(run.stderr)")
      #expect(
        run.stderr.hasSuffix(
          "; repair it with 'trove config set \(key) VALUE' or 'trove config reset'\n"))
    }
    #expect(try Self.objectFiles(scratch) == before)
    for digest in digests {
      #expect(try CLI.run(["--store", store, "has", digest]).status == 0)
    }
    let shown = try CLI.run(["--store", store, "config"])
    #expect(shown.status == 78)
    #expect(shown.out.contains("invalid: -5"))
    let get = try CLI.run(["--store", store, "config", "get", key])
    #expect(get.status == 78 && get.out.isEmpty)
    #expect(try CLI.run(["--store", store, "config", "get", "low-water"]).out == "0.9\n")

    let refused = try CLI.run(["--store", store, "config", "set", key, "-5"])
    #expect(refused.status == 64, "\(refused.stderr)")
    #expect(try CLI.run(["--store", store, "put", file]).status == 78)
    let repaired = try CLI.run(
      ["--store", store, "config", "set", key, key == "budget" ? "1G" : "30d"])
    #expect(repaired.status == 0 && repaired.stderr.contains("repaired \(key)"))
    #expect(try CLI.run(["--store", store, "put", file]).status == 0)
    #expect(try CLI.run(["--store", store, "sweep"]).status == 0)
    #expect(try Self.objectFiles(scratch).count == before.count + 1)
  }

  @Test(
    "config set repairs one setting and keeps the others as written; config reset writes the defaults"
  )
  func setKeepsOthersResetClears() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    _ = try Self.store(scratch, objects: 1, seed: 300)
    try Self.edit(
      scratch,
      ["budget": "-5", "compression-workers": "100", "low-water": "\"0.5\"", "colour": "\"blue\""])

    let set = try CLI.run(["--store", store, "config", "set", "budget", "none"])
    #expect(set.status == 0)
    #expect(
      set.errorLines.last
        == "trove: warning: invalid compression-workers 100 in '\(scratch["store/config.json"])': expected a whole number from 0 to 64; repair it with 'trove config set compression-workers VALUE' or 'trove config reset'"
    )
    let file =
      try JSONSerialization.jsonObject(with: Data(try contents(scratch["store/config.json"])))
      as? [String: Any]
    let policy = file?["policy"] as? [String: Any]
    #expect(policy?["budget"] is NSNull)
    #expect(policy?["compression-workers"] as? Int == 100)
    #expect(policy?["colour"] as? String == "blue")
    // Written as `trove config set` takes it: valid, and stored exactly.
    #expect(policy?["low-water"] as? Double == 0.5)
    let put = try CLI.run(["--store", store, "put", "-"], stdin: [1])
    #expect(put.status == 78 && put.stderr.contains("invalid compression-workers 100"))

    let reset = try CLI.run(["--store", store, "config", "reset"])
    #expect(reset.status == 0, "\(reset.stderr)")
    let settings = try StoreSettings.decode(
      try contents(scratch["store/config.json"]), path: "config.json")
    #expect(settings == .initial)
    #expect(try CLI.run(["--store", store, "put", "-"], stdin: [1]).status == 0)
    #expect(try CLI.run(["--store", store, "config", "reset", "now"]).status == 64)
  }

  @Test(
    "config.json is validated by config set's own rules: what set refuses, a read refuses",
    arguments: [
      ("budget", "\"lots\""), ("budget", "-1"), ("max-age", "4000000000"), ("max-age", "\"30\""),
      ("low-water", "0"), ("low-water", "1.5"), ("access-resolution", "-1"),
      ("min-free", "\"120%\""), ("min-free", "-10"), ("tmp-max-age", "0"),
      ("compression", "\"gzip\""), ("compression-workers", "65"),
      ("compression-min-size", "-1"), ("checksums", "\"md5\""), ("max-object-size", "-1"),
      ("budget", "true"), ("max-age", "[1]"), ("low-water", "null"),
    ])
  func sameRules(key: String, json: String) throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    try Self.edit(scratch, [key: json])
    let fragment = try JSONSerialization.jsonObject(
      with: Data(json.utf8), options: .fragmentsAllowed)
    if let text = fragment as? String {
      // The same text through config set: refused the same way.
      let set = try CLI.run(["--store", scratch["store"], "config", "set", key, text])
      #expect(set.status == 64, "\(set.stderr)")
    }
    let get = try CLI.run(["--store", scratch["store"], "config", "get", key])
    #expect(get.status == 78, "\(get.stderr)")
    let store = try scratch.store()
    #expect(throws: TroveError.self) { try store.policy() }
    let status = try store.policyStatus()
    #expect(status.problems.map(\.key) == [CachePolicy.Key(rawValue: key)])
  }

  @Test(
    "the library: policy() and updatePolicy refuse a damaged file; setPolicy and resetPolicy repair it"
  )
  func library() throws {
    let scratch = try Scratch()
    let store = try scratch.store()
    try store.updatePolicy { $0.budget = 5_000_000 }
    #expect {
      try store.updatePolicy { $0.lowWater = 2 }
    } throws: {
      ($0 as? TroveError)?.code == .invalidArgument && "\($0)".contains("invalid low-water 2")
    }
    #expect(try store.policy().lowWater == 0.9)
    try Self.edit(scratch, ["max-age": "-5"])
    #expect { try store.policy() } throws: { ($0 as? TroveError)?.code == .invalidConfig }
    #expect { try store.updatePolicy { $0.budget = 1 } } throws: {
      ($0 as? TroveError)?.code == .invalidConfig && "\($0)".contains("invalid max-age -5")
    }
    #expect { try store.put(bytes: [1, 2, 3]) } throws: {
      ($0 as? TroveError)?.code == .invalidConfig
    }
    let status = try store.setPolicy(.maxAge, to: "1d")
    #expect(status.problems.isEmpty && status.policy.maxAge == 86400)
    #expect(try store.policy().budget == 5_000_000)
    try scratch.write("store/config.json", [0xFF, 0x00])
    #expect(try store.policyStatus().problems.map(\.key) == [nil])
    #expect(try store.resetPolicy() == .default)
    _ = try store.put(bytes: [1, 2, 3])
  }

  @Test("config.json in its documented form reads back exactly, and a newer format is refused")
  func documentedForm() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    try scratch.write(
      "store/config.json",
      Array(
        """
        {
          "format" : 1,
          "policy" : {
            "access-resolution" : 60,
            "budget" : 9007199254740993,
            "checksums" : "sha256",
            "low-water" : 0.9,
            "max-age" : 2592000,
            "max-object-size" : 10000000000,
            "min-free" : "10%",
            "tmp-max-age" : 3600
          }
        }
        """.utf8))
    let policy = try scratch.store().policy()
    #expect(policy.budget == 9_007_199_254_740_993)
    #expect(policy.maxAge == 2_592_000 && policy.checksums == [.sha256])
    #expect(policy.maximumObjectSize == 10_000_000_000)
    #expect(policy.compression == .none && policy.compressionMinimumSize == 65536)
    let decoded = try JSONDecoder().decode(
      CachePolicy.self, from: try JSONEncoder().encode(policy))
    #expect(decoded == policy)

    try scratch.write("store/config.json", Array("{\"format\": 2, \"policy\": 5}".utf8))
    let get = try CLI.run(["--store", scratch["store"], "has", XXH3Hasher.digest([1]).description])
    #expect(get.status == 65 && get.stderr.contains("has format 2"), "\(get.stderr)")
  }
}
