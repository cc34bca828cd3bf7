import Trove

/// A command's shape: what `help` prints and what the parser accepts.
struct CommandSpec: Sendable {
  /// The subcommand's name, e.g. `get`.
  let name: String
  /// One line for the command list.
  let abstract: String
  /// Usage after `trove NAME`, e.g. `<digest> <destination>`.
  let usage: String
  /// Positional arguments: name and help.
  var arguments: [(String, String)] { argumentsText() }
  /// Options besides the global ones.
  let options: [OptionSpec]
  /// More text for `--help`, after OVERVIEW.
  var discussion: String { discussionText() }
  /// The help texts, made when `--help` asks: some are built from the
  /// settings' names, which every process would otherwise pay for.
  private let argumentsText: @Sendable () -> [(String, String)]
  private let discussionText: @Sendable () -> String
  /// What it does with the store: whether a missing one is made, whether
  /// an invocation writes it (refused on a read-only store before anything
  /// is done).
  var store = StoreUse.reads
  /// Whether a reader that leaves early (`trove ls | head`) ends it with
  /// success rather than the error of a closed pipe.
  var closedPipeIsSuccess = false
  /// How the keys it is given are looked up (``KeyLookup``): used, read
  /// through the remotes, or only looked at.
  var keyLookup: @Sendable (Invocation) -> KeyLookup = { _ in [] }
  /// Runs the command; returns the exit status.
  let run: @Sendable (Invocation) throws -> Int32

  init(
    name: String, abstract: String, usage: String,
    arguments: @autoclosure @escaping @Sendable () -> [(String, String)],
    options: [OptionSpec], discussion: @autoclosure @escaping @Sendable () -> String,
    store: StoreUse = .reads, closedPipeIsSuccess: Bool = false,
    keyLookup: @escaping @Sendable (Invocation) -> KeyLookup = { _ in [] },
    run: @escaping @Sendable (Invocation) throws -> Int32
  ) {
    self.name = name
    self.abstract = abstract
    self.usage = usage
    argumentsText = arguments
    self.options = options
    discussionText = discussion
    self.store = store
    self.closedPipeIsSuccess = closedPipeIsSuccess
    self.keyLookup = keyLookup
    self.run = run
  }
}

/// What a command does with the store.
struct StoreUse: Sendable {
  /// Makes the store when it is missing (those that store, sweep or
  /// configure); the others find no store and make nothing.
  var creates: Bool
  /// Whether an invocation must write the store.
  var writes: @Sendable (Invocation) -> Bool

  /// Only reads: works on a read-only store; a missing one is not made.
  static let reads = StoreUse(creates: false, writes: { _ in false })
  /// Writes, and makes the store when it is missing.
  static let creates = StoreUse(creates: true, writes: { _ in true })
  /// Writes an existing store.
  static let writes = StoreUse(creates: false, writes: { _ in true })
  /// Writes when `writes` says so of an invocation (an action, a flag).
  static func writes(when writes: @escaping @Sendable (Invocation) -> Bool) -> StoreUse {
    StoreUse(creates: false, writes: writes)
  }
}

/// One option: its names (`-f`, `--force`) and, if it takes one, the value's name.
struct OptionSpec: Sendable {
  let names: [String]
  let valueName: String?
  let help: String

  var display: String {
    names.joined(separator: ", ") + (valueName.map { " <\($0)>" } ?? "")
  }
}

/// A usage error: bad or missing arguments. Exit 64 with the usage line.
struct UsageError: Error {
  let message: String
  let command: CommandSpec?
}

/// What the parser made of one command line.
struct Invocation: Sendable {
  let command: CommandSpec
  /// The store folder from `--store`, if given.
  let store: String?
  /// Positional arguments in order.
  let positionals: [String]
  /// Option values by long name (`--mode` → "clone"); flags map to "".
  /// Of an option given more than once, the last.
  let values: [String: String]
  /// Every value of each option, in order (`--expect A --expect B`).
  var lists: [String: [String]] = [:]

  func flag(_ long: String) -> Bool { values[long] != nil }
  func value(_ long: String) -> String? { values[long] }
  func allValues(_ long: String) -> [String] { lists[long] ?? [] }

  func usageError(_ message: String) -> UsageError {
    UsageError(message: message, command: command)
  }
}

/// Options every command accepts.
let globalOptions = [
  OptionSpec(
    names: ["--store"], valueName: "dir",
    help:
      "The store folder (default: $TROVE_STORE, else $XDG_CACHE_HOME/trove, else ~/.cache/trove)."
  ),
  OptionSpec(names: ["-h", "--help"], valueName: nil, help: "Show help information."),
  OptionSpec(
    names: ["-q", "--quiet"], valueName: nil,
    help: "No warnings (e.g. copied, not cloned) and no progress line; errors still print."),
]

/// Parses `arguments` (after the program name) the way swift-argument-parser
/// does: `--name value` and `--name=value`, combined short flags are not
/// needed, `--` ends options, a lone `-` is a positional. A negative
/// number (`-5m`, `-1`) is a value, not an option: after an option that
/// takes one (`--for -5m`) and as a positional (`config set max-age -5m`),
/// so that its check can say "negative".
enum CommandLineParser {
  enum Outcome {
    case run(Invocation)
    case help(CommandSpec?)
    case version
  }

  static func parse(_ arguments: [String], commands: [CommandSpec]) throws(UsageError) -> Outcome {
    var rest = arguments[...]
    var store: String?
    var quiet = false
    // Global options before the subcommand.
    while let first = rest.first, first.hasPrefix("-"), first != "-" {
      rest.removeFirst()
      let (name, inline) = splitInline(first)
      switch name {
      case "-h", "--help": return .help(nil)
      case "--version": return .version
      case "--store":
        store = try storeValue(name, inline, &rest, command: nil)
      case "-q", "--quiet":
        quiet = true
      default:
        throw UsageError(message: "Unknown option '\(first)'", command: nil)
      }
    }
    guard let name = rest.popFirst() else {
      // `trove` alone: a usage error (the usage on stderr, exit 64), as
      // git and swift-argument-parser's tools do; `trove --help` is help.
      throw UsageError(message: "Missing expected argument '<subcommand>'", command: nil)
    }
    if name == "help" {
      guard let topic = rest.first else { return .help(nil) }
      guard let command = commands.first(where: { $0.name == topic }) else {
        throw UsageError(message: "Unknown command '\(topic)'", command: nil)
      }
      return .help(command)
    }
    guard let command = commands.first(where: { $0.name == name }) else {
      throw UsageError(message: "Unknown command '\(name)'", command: nil)
    }
    var positionals: [String] = []
    var values: [String: String] = [:]
    var lists: [String: [String]] = [:]
    var optionsEnded = false
    while let argument = rest.popFirst() {
      if optionsEnded || !argument.hasPrefix("-") || argument == "-" || isNegativeNumber(argument) {
        positionals.append(argument)
        continue
      }
      if argument == "--" {
        optionsEnded = true
        continue
      }
      let (name, inline) = splitInline(argument)
      if name == "-h" || name == "--help" { return .help(command) }
      if name == "--store" {
        store = try storeValue(name, inline, &rest, command: command)
        continue
      }
      if (name == "-q" || name == "--quiet") && inline == nil {
        quiet = true
        continue
      }
      guard let spec = command.options.first(where: { $0.names.contains(name) }) else {
        throw UsageError(message: "Unknown option '\(argument)'", command: command)
      }
      let long = spec.names.last!
      if spec.valueName == nil {
        if inline != nil {
          throw UsageError(message: "Option '\(name)' takes no value", command: command)
        }
        values[long] = ""
      } else {
        let value = try takeValue(name, inline, &rest, spec: spec, command: command)
        values[long] = value
        lists[long, default: []].append(value)
      }
    }
    if quiet { values["--quiet"] = "" }
    return .run(
      Invocation(
        command: command, store: store, positionals: positionals, values: values, lists: lists))
  }

  /// Whether `argument` reads as a negative number: `-` then a digit or `.`.
  private static func isNegativeNumber(_ argument: String) -> Bool {
    guard argument.hasPrefix("-"), let next = argument.dropFirst().first else { return false }
    return next.isNumber || next == "."
  }

  /// The value of `--store`: refused when empty (`--store ''` names no
  /// folder, and a store made in the working directory would surprise).
  private static func storeValue(
    _ name: String, _ inline: String?, _ rest: inout ArraySlice<String>, command: CommandSpec?
  ) throws(UsageError) -> String {
    let value = try takeValue(name, inline, &rest, spec: globalOptions[0], command: command)
    guard !value.isEmpty else {
      throw UsageError(message: "invalid --store '': the store folder is empty", command: command)
    }
    return value
  }

  private static func splitInline(_ argument: String) -> (String, String?) {
    guard argument.hasPrefix("--"), let eq = argument.firstIndex(of: "=") else {
      return (argument, nil)
    }
    return (String(argument[..<eq]), String(argument[argument.index(after: eq)...]))
  }

  private static func takeValue(
    _ name: String, _ inline: String?, _ rest: inout ArraySlice<String>, spec: OptionSpec,
    command: CommandSpec?
  ) throws(UsageError) -> String {
    if let inline { return inline }
    guard let next = rest.first, !(next.hasPrefix("-") && next != "-") || isNegativeNumber(next)
    else {
      throw UsageError(message: "Missing value for '\(spec.display)'", command: command)
    }
    rest.removeFirst()
    return next
  }
}
