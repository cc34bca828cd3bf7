import Foundation
import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// The `trove` command as a function: the executable calls
/// ``TroveCommand/run()``; tests reach its parsing and invocation rules
/// without starting a process.
public enum TroveCommand {
  /// Sets the process up as the command expects, runs it with the
  /// process's arguments and returns its exit status.
  public static func run() -> Int32 {
    prepareProcess()
    return main()
  }

  /// What the command needs of its process before it runs.
  static func prepareProcess() {
    // A closed pipe (`trove get D - | head`) is an EPIPE error, not a signal.
    signal(SIGPIPE, SIG_IGN)

    // A put of many files keeps two groups' files open while one of them
    // commits (Store.put(files:priority:onProgress:onResult:) overlaps them
    // only when the process may open 3,072 files): the soft limit on open
    // files goes up to the hard one, as Go's runtime does for every program.
    // Where that fails, the put commits its groups in turn.
    var openFiles = rlimit()
    if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &openFiles) == 0,
      openFiles.rlim_cur < openFiles.rlim_max
    {
      openFiles.rlim_cur = min(openFiles.rlim_max, 1 << 20)
      _ = setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &openFiles)
    }
  }

  /// Parses the process's arguments and runs the command; its exit status.
  static func main() -> Int32 {
    do {
      let arguments = try Arguments.decoded(commands: allCommands)
      switch try CommandLineParser.parse(arguments, commands: allCommands) {
      case .help(let command):
        Output.raw(Help.text(for: command, commands: allCommands))
        return ExitStatus.success
      case .version:
        Output.line(TroveVersion.current)
        return ExitStatus.success
      case .run(let invocation):
        Output.quiet = invocation.flag("--quiet")
        if invocation.command.closedPipeIsSuccess { Output.closedPipeStatus = ExitStatus.success }
        // Every command refuses an invalid TROVE_RECORD, also those that
        // open no store (`dir`, `hash`): a typo is said at once, anywhere.
        if let record = EnvironmentVariables.lookUp("TROVE_RECORD"), !record.isEmpty,
          !Store.isValidRecordName(record)
        {
          throw TroveError(
            .invalidArgument,
            "invalid record name (TROVE_RECORD) '\(record)': expected 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'",
            value: record)
        }
        return try invocation.command.run(invocation)
      }
    } catch let error as UsageError {
      Output.error("Error: \(error.message)")
      Output.error("Usage: \(Help.usageLine(error.command))")
      let topic = error.command.map { "trove \($0.name) --help" } ?? "trove --help"
      Output.error("  See '\(topic)' for more information.")
      return ExitStatus.usage
    } catch let error as AmbiguousDigestPrefix {
      error.report()
      return ExitStatus.usage
    } catch let error as TroveError where error.errno == EPIPE {
      Output.closedPipe()  // `trove get D - | head`: the reader left, quietly
    } catch let error as TroveError {
      Output.error("Error: \(error.withHint)")
      return ExitStatus.of(error)
    } catch {
      Output.error("Error: \(error)")
      return ExitStatus.failure
    }
  }
}
