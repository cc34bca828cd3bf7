import Trove

let dirCommand = CommandSpec(
  name: "dir",
  abstract: "Print the store's folder (as uv cache dir, pip cache dir).",
  usage: "",
  arguments: [],
  options: [],
  discussion: """
    The absolute path of the store --store, TROVE_STORE or the default names,
    '~' expanded. Creates nothing: the store may not exist yet.
    """,
  closedPipeIsSuccess: true,
  run: { invocation in
    try invocation.requirePositionals([])
    Output.raw(try invocation.storeRoot + "\n")
    return ExitStatus.success
  })
