import Trove

let hasCommand = CommandSpec(
  name: "has",
  abstract: "Exit 0 if the store holds a digest, 1 if not.",
  usage: "<digest>",
  arguments: [("digest", "The digest to look for.")],
  options: [verboseOption],
  discussion: "",
  run: { invocation in
    try invocation.requirePositionals(["digest"])
    let digest = try invocation.digest(invocation.positionals[0])
    let present = try invocation.openStore().contains(digest)
    if invocation.flag("--verbose") {
      Output.error("trove: \(digest): \(present ? "present" : "absent")")
    }
    return present ? ExitStatus.success : ExitStatus.failure
  })

let pathCommand = CommandSpec(
  name: "path",
  abstract: "Print the path of an object's file, for reading in place.",
  usage: "[--decompress] <digest>",
  arguments: [("digest", "The object's digest.")],
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
    try invocation.requirePositionals(["digest"])
    let digest = try invocation.digest(invocation.positionals[0])
    Output.line(
      try invocation.openStore().path(
        for: digest, decompressing: invocation.flag("--decompress")))
    return ExitStatus.success
  })

let removeCommand = CommandSpec(
  name: "rm",
  abstract: "Remove objects from the store.",
  usage: "<digest>...",
  arguments: [("digest", "A digest to remove.")],
  options: [verboseOption],
  discussion: "Files made from the objects earlier (clones, copies) are not touched.",
  run: { invocation in
    guard !invocation.positionals.isEmpty else {
      throw invocation.usageError("Missing expected argument '<digest>'")
    }
    let digests = try invocation.positionals.map { (text) throws(UsageError) in
      try invocation.digest(text)
    }
    let store = try invocation.openStore()
    var status = ExitStatus.success
    for digest in digests {
      if try store.remove(digest) {
        if invocation.flag("--verbose") { Output.error("trove: removed \(digest)") }
      } else {
        Output.error("Error: no object \(digest) in store '\(store.root)'")
        status = ExitStatus.failure
      }
    }
    return status
  })
