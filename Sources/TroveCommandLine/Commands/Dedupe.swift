import Trove

let dedupeCommand = CommandSpec(
  name: "dedupe",
  abstract: "Share disk blocks between versions of large objects.",
  usage: "[--dry-run] [--all] [--json] [DIGEST-OR-KEY...]",
  arguments: [],
  options: [
    OptionSpec(
      names: ["--dry-run"], valueName: nil,
      help: "Say how many bytes would be shared; change nothing."),
    OptionSpec(
      names: ["--all"], valueName: nil,
      help: "Every object with chunks, not only those not yet examined."),
    jsonOption,
  ],
  discussion: """
    Large raw objects (chunk-min-object-size and up, with chunking on) record their
    content-defined chunks. An object that has chunks in common with objects stored
    before it shares the whole blocks of those chunks with them (FIDEDUPERANGE): the
    kernel compares the bytes and shares only what is equal, so no object's bytes
    change, and each stays a plain file that clones out as before. Sweeps do this for
    a few new objects each; this command does it now, for the objects named, or for
    every object not yet examined (--all: every object with chunks). Where the
    filesystem cannot share blocks (ext4, tmpfs) it says so and changes nothing
    (exit 0). Shared bytes are counted once in the store's allocated total.
    """,
  store: .writes(when: { !$0.flag("--dry-run") }),
  run: { invocation in
    let store = try invocation.openStore()
    var digests: [BlobDigest]?
    if !invocation.positionals.isEmpty {
      digests = try invocation.positionals.map { try invocation.digestOrKey($0, in: store) }
    } else if invocation.flag("--all") {
      digests = try store.digestsWithChunks()
    }
    let report = try store.shareBlocks(of: digests, dryRun: invocation.flag("--dry-run"))
    if invocation.flag("--json") {
      Output.json(report)
      return ExitStatus.success
    }
    if let why = report.unsupported {
      Output.line("shared nothing: \(why)")
      return ExitStatus.success
    }
    let verb = invocation.flag("--dry-run") ? "would share" : "shared"
    Output.line(
      "examined \(Output.count(Int64(report.examined), "object")); \(verb) \(Output.size(report.sharedBytes)) of \(Output.count(Int64(report.objects), "object")) with earlier versions"
        + (report.alreadySharedBytes > 0
          ? " (\(Output.size(report.alreadySharedBytes)) shared already)" : ""))
    return ExitStatus.success
  })
