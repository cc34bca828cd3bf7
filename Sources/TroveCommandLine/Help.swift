/// Help text in swift-argument-parser's layout: OVERVIEW, USAGE,
/// ARGUMENTS, OPTIONS, SUBCOMMANDS.
enum Help {
  static let overview = """
    Trove: a content-addressed download cache. Blobs are named by their XXH3-128
    digest, stored once however often they arrive, and handed out as copy-on-write
    clones where the filesystem allows.
    """

  static func usageLine(_ command: CommandSpec?) -> String {
    guard let command else { return "trove [--store <dir>] <subcommand>" }
    return "trove [--store <dir>] \(command.name) \(command.usage)"
  }

  static func text(for command: CommandSpec?, commands: [CommandSpec]) -> String {
    var out = ""
    func row(_ left: String, _ right: String) {
      let pad =
        left.count < 24
        ? String(repeating: " ", count: 24 - left.count) : "\n" + String(repeating: " ", count: 26)
      out += "  " + left + pad + right + "\n"
    }
    guard let command else {
      out += "OVERVIEW: " + overview + "\n\n"
      out += "USAGE: " + usageLine(nil) + "\n\n"
      out += "OPTIONS:\n"
      for option in globalOptions { row(option.display, option.help) }
      row("--version", "Show the version.")
      out += "\nSUBCOMMANDS:\n"
      for c in commands { row(c.name, c.abstract) }
      out += "\n  See 'trove help <subcommand>' for detailed help.\n"
      return out
    }
    out += "OVERVIEW: " + command.abstract + "\n"
    if !command.discussion.isEmpty { out += "\n" + command.discussion + "\n" }
    out += "\nUSAGE: " + usageLine(command) + "\n"
    if !command.arguments.isEmpty {
      out += "\nARGUMENTS:\n"
      for (name, help) in command.arguments { row("<\(name)>", help) }
    }
    out += "\nOPTIONS:\n"
    for option in command.options + globalOptions { row(option.display, option.help) }
    return out
  }
}
