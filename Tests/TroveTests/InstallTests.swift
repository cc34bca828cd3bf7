import Foundation
import Testing

/// `scripts/install.sh`: installs a built `trove` and
/// a bash completion generated from its own help.
@Suite("install")
struct InstallTests {
  /// The repository's root, from this file's path.
  static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().path

  @Test("install.sh --bin puts trove and a working completion under DESTDIR/PREFIX")
  func installs() throws {
    let scratch = try Scratch()
    let install = try CLI.run(
      [], environment: ["DESTDIR": scratch["dest"]],
      prefix: [
        "/bin/bash", "-c", "exec '\(Self.repository)/scripts/install.sh' --bin \"$0\" /opt/trove",
      ])
    #expect(install.status == 0, "\(install.stderr)")
    let root = scratch["dest"] + "/opt/trove"
    let version = try CLI.run([], prefix: ["/bin/bash", "-c", "'\(root)/bin/trove' --version"])
    #expect(version.status == 0 && !version.out.isEmpty, "\(version.stderr)")
    // The completion offers get's options, every subcommand, and files.
    let completion = root + "/share/bash-completion/completions/trove"
    func complete(_ words: [String]) throws -> [String] {
      let script = """
        source '\(completion)'; COMP_WORDS=(\(words.map { "'\($0)'" }.joined(separator: " ")))
        COMP_CWORD=\(words.count - 1); _trove; printf '%s\\n' "${COMPREPLY[@]}"
        """
      let run = try CLI.run([], prefix: ["/bin/bash", "-c", script])
      #expect(run.status == 0, "\(run.stderr)")
      return run.out.split(separator: "\n").map(String.init)
    }
    #expect(try complete(["trove", "get", "--m"]) == ["--mode"])
    #expect(try complete(["trove", "--store", "/x", "ver"]) == ["verify"])
    let all = try complete(["trove", ""])
    for name in ["put", "get", "fetch", "sweep", "stats", "hash", "clean", "help"] {
      #expect(all.contains(name), "\(name) missing from \(all)")
    }
    #expect(try complete(["trove", "get", scratch["de"]]) == [scratch["dest"]])
  }

  @Test("install.sh refuses a --bin that is not an executable, installing nothing")
  func refusesMissingBinary() throws {
    let scratch = try Scratch()
    let run = try CLI.run(
      [],
      prefix: [
        "/bin/bash", "-c",
        "exec '\(Self.repository)/scripts/install.sh' --bin '\(scratch["nothing"])' '\(scratch["prefix"])'",
      ])
    #expect(run.status == 66 && run.stderr.contains(scratch["nothing"]), "\(run.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["prefix"]))
  }

  @Test("install.sh --help prints its usage; an option for a prefix is refused, nothing built")
  func help() throws {
    let help = try CLI.run(
      [], prefix: ["/bin/bash", "-c", "exec '\(Self.repository)/scripts/install.sh' --help"])
    #expect(help.status == 0 && help.out.contains("scripts/install.sh [PREFIX]"), "\(help.stderr)")
    let option = try CLI.run(
      [], prefix: ["/bin/bash", "-c", "exec '\(Self.repository)/scripts/install.sh' --prefix"])
    #expect(option.status == 64 && option.stderr.contains("unknown option '--prefix'"))
  }
}
