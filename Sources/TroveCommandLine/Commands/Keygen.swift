import Trove

let keygenCommand = CommandSpec(
  name: "keygen",
  abstract: "Make an Ed25519 signing key for signed remotes.",
  usage: "<name> [--out <file>]",
  arguments: [("name", "The key's name: 1 to 64 letters, digits, '.', '_' or '-'.")],
  options: [
    OptionSpec(
      names: ["--out"], valueName: "file",
      help: "Where to write the private key (default: NAME.key here); never overwritten.")
  ],
  discussion: """
    Writes a new private key, owner-only (0600), and prints its public key,
    ed25519:BASE64. A store pushes signed once 'trove config set signing-key
    FILE' names the private key file; a store that adds the remote with
    '--trust ed25519:BASE64' reads from it only what that key signed. The
    private key never leaves the file: config.json holds its path, and the file
    is read when a push signs (refused unless it is yours and no one else may
    read it). Exit 73 when the file exists.
    """,
  run: { invocation in
    try invocation.requirePositionals(["name"])
    let name = invocation.positionals[0]
    let path = absolutePath(invocation.value("--out") ?? name + ".key")
    let made = Result { () throws(TroveError) in
      try SigningKey.generate(name: name, writingTo: path)
    }
    if case .failure(let error) = made, error.code == .invalidArgument {
      throw invocation.usageError(error.description)
    }
    let key = try made.get()
    Output.line(key.publicKey.description)
    if !Output.quiet {
      Output.error(
        "trove: wrote the private key '\(name)' to \(path): keep it private; readers trust it with 'remote add NAME URL --trust \(key.publicKey)'"
      )
    }
    return ExitStatus.success
  })
