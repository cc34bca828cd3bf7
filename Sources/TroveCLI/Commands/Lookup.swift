import Trove

let hasCommand = CommandSpec(
  name: "has",
  abstract: "Exit 0 if the store holds an object, 1 if not.",
  usage: "[-v] <digest-or-key>",
  arguments: [("digest-or-key", "A digest, or a key bound with 'put --key'.")],
  options: [verboseOption],
  discussion: "A key that is not bound is absent too.",
  run: { invocation in
    try invocation.requirePositionals(["digest-or-key"])
    let text = invocation.positionals[0]
    let reference = try invocation.reference(text)
    let store = try invocation.openStore()
    var present = false
    do {
      present = try store.contains(try invocation.resolve(reference, in: store))
    } catch let error as TroveError where error.code == .notFound {}
    if invocation.flag("--verbose") {
      Output.error("trove: \(text): \(present ? "present" : "absent")")
    }
    return present ? ExitStatus.success : ExitStatus.failure
  })

let pathCommand = CommandSpec(
  name: "path",
  abstract: "Print the path of an object's file, for reading in place.",
  usage: "[--decompress] <digest-or-key>",
  arguments: [("digest-or-key", "A digest, or a key bound with 'put --key'.")],
  options: [
    OptionSpec(
      names: ["--decompress"], valueName: nil,
      help: "If the object is stored compressed, store it raw first (else: exit 69).")
  ],
  discussion: """
    The file is the store's own copy, read-only: read it, never write it. Zero
    copies; it can disappear when the object is removed. A compressed object has no
    such file: 'get' decompresses a copy, '--decompress' stores it raw.
    """,
  run: { invocation in
    try invocation.requirePositionals(["digest-or-key"])
    let reference = try invocation.reference(invocation.positionals[0])
    let store = try invocation.openStore()
    // Exact, as `realpath` prints it: a program opens this path.
    let path = try store.path(
      for: try invocation.resolve(reference, in: store),
      decompressing: invocation.flag("--decompress"))
    Output.raw(path + "\n")
    return ExitStatus.success
  })

let removeCommand = CommandSpec(
  name: "rm",
  abstract: "Remove objects from the store.",
  usage: "[-v] <digest-or-key>...",
  arguments: [("digest-or-key", "A digest, or a key bound with 'put --key'.")],
  options: [verboseOption],
  discussion: """
    Files made from the objects earlier (clones, copies) are not touched. Removing
    an object by a key removes the object, and with it every key that names it;
    'trove keys rm' removes a key alone.
    """,
  run: { invocation in
    guard !invocation.positionals.isEmpty else {
      throw invocation.usageError("Missing expected argument '<digest-or-key>'")
    }
    let references = try invocation.positionals.map { (text) throws(UsageError) in
      try invocation.reference(text)
    }
    let store = try invocation.openStore()
    var status = ExitStatus.success
    for reference in references {
      let digest: Digest
      do {
        digest = try invocation.resolve(reference, in: store)
      } catch {
        Output.error("Error: \(error)")
        status = ExitStatus.failure
        continue
      }
      if try store.remove(digest) {
        if invocation.flag("--verbose") { Output.error("trove: removed \(digest)") }
      } else {
        Output.error("Error: no object \(digest) in store '\(store.root)'")
        status = ExitStatus.failure
      }
    }
    return status
  })
