import Foundation
import Testing

@testable import Trove

/// A store that does not exist yet is an empty cache to the commands that
/// read: a lookup is a miss (exit 1, as for a store that lacks the object),
/// a listing is empty (exit 0), and nothing is made — so a script's
/// `trove has D || trove fetch …` works on a fresh machine.
@Suite("reading commands on a store that does not exist yet")
struct MissingStoreTests {
  static let digest = "xxh128:0123456789abcdef0123456789abcdef"

  @Test("has, get, path and show of anything are a miss (exit 1) naming the store; nothing is made")
  func lookupsMiss() throws {
    let scratch = try Scratch()
    let store = scratch["never"]
    let out = scratch["out"]
    for (arguments, name) in [
      (["has", Self.digest], nil),
      (["has", "--remote", "some-key"], nil),
      (["get", Self.digest, out], Self.digest),
      (["get", "https://example.com/a.tgz", "-"], "https://example.com/a.tgz"),
      (["get", "-C", scratch["dir"], Self.digest, "0123abcd"], nil as String?),
      (["path", "0123abcd"], "0123abcd"),
      (["show", "some-key"], "some-key"),
    ] as [([String], String?)] {
      let run = try CLI.run(["--store", store] + arguments)
      #expect(run.status == 1, "\(arguments): \(run.stderr)")
      #expect(run.out == "", "\(arguments)")
      if arguments[0] == "has" {
        #expect(run.stderr == "", "\(arguments)")
      } else {
        let what = name.map { "no object or key '\($0)'" } ?? "no object or key named"
        #expect(
          run.stderr == "Error: \(what): no store exists at '\(store)' yet\n", "\(arguments)")
      }
    }
    let verbose = try CLI.run(["--store", store, "has", "-v", "some-key"])
    #expect(verbose.status == 1)
    #expect(verbose.stderr == "trove: some-key: absent (no store exists at '\(store)' yet)\n")
    #expect(!FileManager.default.fileExists(atPath: store))
    #expect(!FileManager.default.fileExists(atPath: out))
    #expect(!FileManager.default.fileExists(atPath: scratch["dir"]))
  }

  @Test("ls, keys and pins list nothing and exit 0 (JSON: an empty array); nothing is made")
  func listingsAreEmpty() throws {
    let scratch = try Scratch()
    let store = scratch["never"]
    for command in [["ls"], ["keys"], ["pins"], ["ls", "--format", "xxhsum"]] {
      let run = try CLI.run(["--store", store] + command)
      #expect(run.status == 0 && run.out == "" && run.stderr == "", "\(command): \(run.stderr)")
      if command.count == 1 {
        let json = try CLI.run(["--store", store] + command + ["--json"])
        #expect(json.status == 0, "\(command): \(json.stderr)")
        let parsed = try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [Any]
        #expect(parsed?.isEmpty == true, "\(command): \(json.out)")
      }
    }
    #expect(!FileManager.default.fileExists(atPath: store))
  }

  @Test("an empty folder is no store either: a miss, and it stays empty; stats still says exit 66")
  func emptyFolder() throws {
    let scratch = try Scratch()
    let store = scratch["empty"]
    try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: false)
    #expect(try CLI.run(["--store", store, "has", Self.digest]).status == 1)
    #expect(try CLI.run(["--store", store, "ls"]).status == 0)
    // Statistics describe a store (its volume, settings, filesystem): none to describe.
    let stats = try CLI.run(["--store", store, "stats"])
    #expect(stats.status == 66, "\(stats.stderr)")
    #expect(stats.stderr.contains("no store at '\(store)'"), "\(stats.stderr)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: store) == [])
    // A store that exists answers as before: a miss is exit 1, and says nothing of a missing store.
    let made = scratch["made"]
    #expect(try CLI.run(["--store", made, "config", "set", "budget", "1G"]).status == 0)
    let miss = try CLI.run(["--store", made, "get", Self.digest, scratch["out"]])
    #expect(miss.status == 1 && !miss.stderr.contains("no store exists"), "\(miss.stderr)")
  }
}
