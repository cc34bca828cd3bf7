import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// The command line as the kernel passed it: bytes, which need not be UTF-8.
///
/// `CommandLine.arguments` decodes each argument replacing bytes that are
/// not UTF-8 with U+FFFD, so `trove put $'\xff'` would open a file named
/// U+FFFD — another file, if one has that name. Trove's names and values
/// are Swift strings (UTF-8), so such an argument is refused, shown with
/// its bytes escaped (`'\xff'`), before anything acts on it.
enum Arguments {
  /// The arguments after the program name.
  /// - Throws: a usage error naming the first argument that is not valid
  ///   UTF-8 (and the command, when the rest of the line names one).
  static func decoded(commands: [CommandSpec]) throws(UsageError) -> [String] {
    var arguments: [String] = []
    var invalid: [UInt8]?
    for i in 1..<Int(CommandLine.argc) {
      guard let pointer = CommandLine.unsafeArgv[i] else { continue }
      let bytes = UnsafeRawBufferPointer(start: pointer, count: strlen(pointer))
      if let text = String(validating: bytes, as: UTF8.self) {
        arguments.append(text)
      } else {
        if invalid == nil { invalid = Array(bytes) }
        arguments.append(String(decoding: bytes, as: UTF8.self))
      }
    }
    guard let invalid else { return arguments }
    var command: CommandSpec?
    if case .run(let invocation)? = try? CommandLineParser.parse(arguments, commands: commands) {
      command = invocation.command
    }
    throw UsageError(
      message:
        "argument '\(MessageText.escaped(bytes: invalid))' is not valid UTF-8; trove takes names and values in UTF-8 only",
      command: command)
  }
}
