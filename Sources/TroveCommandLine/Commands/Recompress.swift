import Trove

let recompressCommand = CommandSpec(
  name: "recompress",
  abstract: "Rewrite stored objects to the current compression setting.",
  usage: "[--json]",
  arguments: [],
  options: [jsonOption],
  discussion: """
    With 'compression none', compressed objects are stored raw again (so they can be
    cloned); with 'compression zstd[:LEVEL]', raw objects of at least
    compression-min-size whose first 256 KiB shrink by 10% or more are compressed.
    One object at a time, crash-safe: the new form is written and published before
    the old one is removed.
    """,
  store: .creates,
  run: { invocation in
    try invocation.requirePositionals([])
    let store = try invocation.openStore()
    let progress = ProgressLine.start("recompress", unit: .items, for: invocation)
    let report = try store.recompress(onProgress: progress?.handler)
    progress?.finish()
    if invocation.flag("--json") {
      Output.json(report)
    } else {
      Output.line(
        "compressed \(report.compressed), decompressed \(report.decompressed), unchanged \(report.unchanged); "
          + "\(Output.size(report.storedBytesBefore)) -> \(Output.size(report.storedBytesAfter)) on disk; "
          + String(format: "took %.3f s", report.seconds))
    }
    return ExitStatus.success
  })
