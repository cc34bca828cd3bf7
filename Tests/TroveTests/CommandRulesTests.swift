import Testing

@testable import Trove
@testable import TroveCommandLine

/// The command line's parsing and each command's rules, tested as data
/// without starting a process (the CLI suites prove the same end to end).
@Suite("command rules")
struct CommandRulesTests {
  func invocation(_ arguments: [String]) throws -> Invocation {
    guard case .run(let invocation) = try CommandLineParser.parse(arguments, commands: allCommands)
    else { throw TestFailure("\(arguments) did not parse to a command") }
    return invocation
  }

  func usageError(_ arguments: [String]) -> String? {
    do {
      _ = try CommandLineParser.parse(arguments, commands: allCommands)
      return nil
    } catch {
      return error.message
    }
  }

  @Test("the commands that store, sweep or configure make a missing store; no other does")
  func whichCommandsCreate() {
    let creating = Set(allCommands.filter(\.store.creates).map(\.name))
    #expect(creating == ["put", "fetch", "sweep", "recompress", "reindex", "config", "import"])
  }

  @Test(
    "an invocation writes the store when its command, action or flag changes something",
    arguments: [
      (["put", "f"], true), (["fetch", "http://x/"], true), (["rm", "k"], true),
      (["pin", "k"], true), (["unpin", "k"], true), (["sweep"], true), (["clean"], true),
      (["recompress"], true), (["reindex"], true), (["import", "a.tar"], true),
      (["verify"], false), (["verify", "--repair"], true),
      (["dedupe"], true), (["dedupe", "--dry-run"], false),
      (["config", "get", "budget"], false), (["config", "set", "budget", "1G"], true),
      (["config", "reset"], true), (["keys"], false), (["keys", "rm", "k"], true),
      (["stats"], false), (["stats", "--reset"], true), (["remote", "ls"], false),
      (["remote", "add", "r", "http://x/"], true), (["remote", "pull", "d"], true),
      (["get", "k", "out"], false), (["has", "k"], false), (["ls"], false), (["show", "k"], false),
    ])
  func writes(arguments: [String], writes: Bool) throws {
    #expect(try invocation(arguments).writesStore == writes, "\(arguments)")
  }

  @Test("listings end with success when their reader leaves; commands that move bytes do not")
  func closedPipes() {
    let quiet = Set(allCommands.filter(\.closedPipeIsSuccess).map(\.name))
    #expect(
      quiet == [
        "ls", "show", "keys", "pins", "stats", "config", "dir", "path", "doctor", "record",
        "remote",
      ])
  }

  @Test(
    "keys are used by get, path and has, read through the remotes by get, path and pin --local",
    arguments: [
      (["get", "k", "out"], KeyLookup([.use, .readThrough])),
      (["path", "k"], KeyLookup([.use, .readThrough])), (["has", "k"], KeyLookup.use),
      (["pin", "k"], KeyLookup()), (["pin", "--local", "k"], KeyLookup.readThrough),
      (["show", "k"], KeyLookup()), (["rm", "k"], KeyLookup()), (["unpin", "k"], KeyLookup()),
    ])
  func keyLookups(arguments: [String], lookup: KeyLookup) throws {
    let parsed = try invocation(arguments)
    #expect(parsed.command.keyLookup(parsed) == lookup, "\(arguments)")
  }

  @Test("options take '--name value' and '--name=value'; '--' ends them; --store is global")
  func optionForms() throws {
    let spaced = try invocation(["--store", "/s", "sweep", "--budget", "1G"])
    let joined = try invocation(["sweep", "--budget=1G", "--store=/s"])
    #expect(spaced.value("--budget") == "1G" && joined.value("--budget") == "1G")
    #expect(spaced.store == "/s" && joined.store == "/s")
    let ended = try invocation(["put", "--", "--budget"])
    #expect(ended.positionals == ["--budget"])
  }

  @Test("bad command lines are usage errors that say what is wrong")
  func usageErrors() {
    #expect(usageError(["frobnicate"])?.contains("frobnicate") == true)
    #expect(usageError(["get", "--teleport", "a", "b"])?.contains("--teleport") == true)
    #expect(usageError(["sweep", "--budget"])?.contains("--budget") == true)
    #expect(usageError(["ls"]) == nil)
  }
}
