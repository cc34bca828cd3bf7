import Foundation
import Testing

@testable import Trove

/// `trove help CMD` for every command: its usage line lists every option
/// the command takes, so that an error's usage line is the whole story.
@Suite("help and usage lines")
struct HelpTests {
  /// The subcommands `trove --help` lists.
  static func commands() throws -> [String] {
    let help = try CLI.run(["--help"]).out
    let section = try #require(help.components(separatedBy: "SUBCOMMANDS:\n").last)
    return section.split(separator: "\n").compactMap { line in
      guard line.hasPrefix("  "), !line.hasPrefix("   "), !line.contains("See 'trove help")
      else { return nil }
      return line.split(separator: " ").first.map(String.init)
    }
  }

  @Test("every option of every command appears in its usage line")
  func usageListsEveryOption() throws {
    let globals: Set<String> = ["--store", "-h", "--help", "-q", "--quiet"]
    let commands = try Self.commands()
    #expect(commands.count > 15, "\(commands)")
    for command in commands {
      let help = try CLI.run(["help", command]).out
      let usage = try #require(
        help.split(separator: "\n").first { $0.hasPrefix("USAGE: ") }, "\(command)")
      let tokens = Set(
        usage.split(whereSeparator: { " []|.=<>".contains($0) }).map(String.init))
      let options = try #require(help.components(separatedBy: "\nOPTIONS:\n").last)
      for line in options.split(separator: "\n") where line.hasPrefix("  -") {
        // "  -o, --output <dest>   help": the option's names.
        let names = line.split(separator: " ").prefix { $0.hasPrefix("-") }.map {
          $0.trimmingCharacters(in: CharacterSet(charactersIn: ","))
        }
        if names.contains(where: globals.contains) { continue }
        #expect(
          names.contains(where: tokens.contains),
          "trove \(command): \(names) not in '\(usage)'")
      }
    }
  }

  @Test("a negative value after an option that takes one is refused as negative")
  func negativeValues() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", [1, 2, 3])
    let digest = String(try CLI.run(["--store", store, "put", file]).out.prefix(39))
    for arguments in [["pin", "--for", "-5m", digest], ["pin", "--for=-5m", digest]] {
      let run = try CLI.run(["--store", store] + arguments)
      #expect(run.status == 64)
      #expect(run.errorLines.first == "Error: negative duration '-5m' for --for", "\(run.stderr)")
    }
    let size = try CLI.run(["--store", store, "sweep", "--budget", "-1G"])
    #expect(size.errorLines.first == "Error: negative size '-1G' for --budget")
    // Another option after one that takes a value is still a missing value.
    let missing = try CLI.run(["--store", store, "pin", "--for", "--name", "x", digest])
    #expect(missing.errorLines.first == "Error: Missing value for '--for <duration>'")
  }

  @Test("counts read in the singular for one: 1 entry, 1 object")
  func plurals() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", [1, 2, 3])
    let digest = String(try CLI.run(["--store", store, "put", file]).out.prefix(39))
    #expect(try CLI.run(["--store", store, "pin", digest]).status == 0)
    let stats = try CLI.run(["--store", store, "stats"]).out
    #expect(stats.contains("pinned      1 entry, "), "\(stats)")
    #expect(stats.contains("(3 bytes)"))
    let verify = try CLI.run(["--store", store, "verify"]).out
    #expect(verify.hasPrefix("checked 1 object ("), "\(verify)")
    #expect(try CLI.run(["--store", store, "unpin", digest]).status == 0)
    let sweep = try CLI.run(["--store", store, "sweep", "--budget", "0"]).out
    #expect(sweep.hasPrefix("removed 1 entry ("), "\(sweep)")
  }
  @Test("--json with --format is refused; keys rm --json is refused")
  func jsonAndFormat() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", [1, 2, 3])
    for arguments in [
      ["put", "--json", "--format", "xxhsum", file], ["ls", "--json", "--format", "xxhsum"],
      ["put", "--format=trove", "--json", file], ["keys", "rm", "--json", "k"],
    ] {
      let run = try CLI.run(["--store", store] + arguments)
      #expect(
        run.status == 64 && run.errorLines.first?.hasPrefix("Error: ") == true, "\(arguments)")
      #expect(run.out.isEmpty)
    }
    #expect(!FileManager.default.fileExists(atPath: store))
  }

  @Test("pin --for 0 and put --key '' are usage errors; reindex -q says nothing")
  func refusedValues() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", [1, 2, 3])
    #expect(try CLI.run(["--store", store, "put", file]).status == 0)
    let digest = XXH3Hasher.digest([1, 2, 3]).description
    for lease in ["0", "0s", "0d"] {
      let pin = try CLI.run(["--store", store, "pin", "--for", lease, digest])
      #expect(pin.status == 64, "\(lease): \(pin.stderr)")
      #expect(
        pin.errorLines.first
          == "Error: invalid --for '\(lease)': duration must be positive (without --for a pin has no lease)"
      )
    }
    #expect(try CLI.run(["--store", store, "pins"]).out.isEmpty)
    let key = try CLI.run(["--store", store, "put", "--key", "", file])
    #expect(
      key.status == 64 && key.errorLines.first == "Error: invalid --key '': a key is not empty")
    #expect(try CLI.run(["--store", store, "keys"]).out.isEmpty)
    let quiet = try CLI.run(["--store", store, "reindex", "-q"])
    #expect(quiet.status == 0 && quiet.stderr.isEmpty, "\(quiet.stderr)")
    let said = try CLI.run(["--store", store, "reindex", "-v"])
    #expect(said.stderr.hasPrefix("trove: index rebuilt: 0 added"), "\(said.stderr)")
  }

  @Test("trove alone is a usage error on stderr; missing actions are named alike")
  func bareAndActions() throws {
    let bare = try CLI.run([])
    #expect(bare.status == 64 && bare.out.isEmpty)
    #expect(bare.errorLines.first == "Error: Missing expected argument '<subcommand>'")
    #expect(bare.errorLines.dropFirst().first?.hasPrefix("Usage: trove") == true)
    let help = try CLI.run(["--help"])
    #expect(help.status == 0 && help.out.hasPrefix("OVERVIEW"))
    let scratch = try Scratch()
    for command in ["remote", "record"] {
      let run = try CLI.run(["--store", scratch["s"], command])
      #expect(run.status == 64)
      #expect(
        run.errorLines.first?.hasPrefix("Error: Missing expected argument '<action>': one of ")
          == true, "\(command): \(run.stderr)")
    }
  }

}
