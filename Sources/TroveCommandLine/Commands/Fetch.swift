import Foundation
import Synchronization
import Trove

#if canImport(Glibc)
  import Glibc
#endif

let fetchCommand = CommandSpec(
  name: "fetch",
  abstract: "Download URLs into the store once; revalidate, resume, verify, and print each digest.",
  usage:
    "[-o <dest>] [-f] [--expect <algo:hex>]... [--expect-size <n>] [--mirror <url>]... [--zsync | --zsync-url <url>] [--refresh | --offline] [--max-age <d>] [-H <line>]... [--auth-env <var>] [--retries <n>] [--connect-timeout <seconds>] [--stall-timeout <seconds>] [-i <file>] [-j <n>] [--json] [-v] [-q] <url>...",
  arguments: [("url", "An http:// or https:// URL; several are fetched in parallel.")],
  options: [
    OptionSpec(
      names: ["-o", "--output"], valueName: "dest",
      help: "Also write the object to <dest> (a clone where possible, as 'get'); '-' for stdout."),
    OptionSpec(
      names: ["--expect"], valueName: "algo:hex",
      help: "The publisher's checksum: sha256:HEX, sha512:HEX or xxh128:HEX (repeatable)."),
    expectSizeOption,
    OptionSpec(
      names: ["--mirror"], valueName: "url",
      help:
        "Another URL serving the same bytes, asked in order when the URL fails (repeatable; one <url>)."
    ),
    OptionSpec(
      names: ["--zsync"], valueName: nil,
      help:
        "When an earlier body is cached, download only the blocks it lacks, as <url>.zsync describes."
    ),
    OptionSpec(
      names: ["--zsync-url"], valueName: "url",
      help: "As --zsync, with the zsync control file at <url> (one <url>)."),
    OptionSpec(
      names: ["--refresh"], valueName: nil, help: "Revalidate with the server even if fresh."),
    OptionSpec(
      names: ["--offline"], valueName: nil,
      help: "Never use the network: serve what is cached, else fail (exit 1)."),
    OptionSpec(
      names: ["--max-age"], valueName: "duration",
      help: "Serve a copy fetched less than this long ago without asking (e.g. 10m, 1d)."),
    OptionSpec(
      names: ["-i", "--input"], valueName: "file",
      help:
        "Read URLs from <file> ('-': stdin), one per line: the URL, its mirrors, its checksums."
    ),
    OptionSpec(
      names: ["-j", "--jobs"], valueName: "n", help: "Transfers at once (default 8)."),
    OptionSpec(
      names: ["-H", "--header"], valueName: "line",
      help: "An extra request header, 'Name: value' (repeatable); not sent to another host."),
    OptionSpec(
      names: ["--auth-env"], valueName: "var",
      help:
        "The environment variable holding the credential: user:password, or a bearer token."),
    OptionSpec(
      names: ["--retries"], valueName: "n",
      help: "Retries of a transient failure, each resuming (default 3)."),
    OptionSpec(
      names: ["--connect-timeout"], valueName: "seconds", help: "Connection timeout (default 30)."),
    OptionSpec(
      names: ["--stall-timeout"], valueName: "seconds",
      help: "Fail a transfer that receives under 10 bytes/s for this long (default 30)."),
    OptionSpec(names: ["-f", "--force"], valueName: nil, help: "Replace an existing <dest>."),
    OptionSpec(
      names: ["-q", "--quiet"], valueName: nil, help: "No progress line and no warnings."),
    jsonOption, verboseOption,
  ],
  discussion: """
    Prints 'xxh128:<hex>  <url>' for each URL. A URL fetched before is served
    from the store while fresh (Cache-Control, Expires) and revalidated when
    stale (a 304 costs no body). With --expect and the object already stored,
    no request is made. Bodies are hashed as they arrive and checked against
    their length and the expected checksums; nothing is stored on a mismatch.
    An interrupted download resumes on the next fetch. Processes fetching the
    same URL make one download. A login in the URL (http://user:pw@host/...),
    the --auth-env credential, or ~/.netrc's entry for the host is sent to the
    URL's own origin only, as -H lines are; the key and every message hold
    the URL without its login. Redirects go to http:// or https:// only, never
    from https:// to http://. Exit status: 1 for HTTP 404/410 or an offline
    miss, 65 for a checksum mismatch, 69 when the server cannot be used (a
    refused redirect too), 75 for a transient failure that outlasted its
    retries; the first failure's status when several URLs are fetched.

    Mirrors: --mirror URL2 (or, in an -i file, more URLs on the URL's line:
    'URL [URL2 ...] [sha256:HEX ...]') lists other URLs serving the same bytes.
    When the URL cannot be reached, answers 404, 5xx or another failure, or
    sends bytes that do not match --expect or --expect-size, the next is
    asked; nothing from a mismatch is kept. The key stays the URL asked for,
    and 'keys --json' names the URL that served it (servedBy). Every fetch
    goes down the list from its start; a revalidation sends its validators
    only to the URL that served the cached copy. A login in a mirror goes
    to that mirror only; -H lines and --auth-env only to the URL's origin.
    The store's rewrite rules ('trove config set rewrite.NAME PREFIX=URL')
    replace each URL first. When every URL fails, the error names each: 75
    when one failure may pass, else 65 for a refused body, else 1 when every
    URL answered 404, else 69.

    Versions: with --zsync (or --zsync-url CONTROL), a URL whose earlier body
    is cached and whose server has a new one is rebuilt from that body and
    the ranges it lacks, as the zsync control file the publisher made with
    zsyncmake (URL.zsync) describes: its block checksums are searched for in
    the earlier body, the blocks found are copied (cloned where they line
    up), the rest come by Range requests, and the whole is checked against
    the control file's SHA-1 or SHA-256 and --expect before it is stored. A
    control file that cannot be used, a server that does not answer ranges
    or a mismatch is a warning, and the body is downloaded whole.
    """,
  store: .creates,
  run: { invocation in try runFetch(invocation) })

private func runFetch(_ invocation: Invocation) throws -> Int32 {
  var requests: [FetchRequest] = []
  var expected: [Checksum] = []
  for text in invocation.allValues("--expect") {
    do throws(TroveError) {
      expected.append(try Checksum(parsing: text))
    } catch {
      throw invocation.usageError(error.description)
    }
  }
  var template = FetchRequest(url: "", expected: expected)
  template.expectedSize = try invocation.size("--expect-size")
  if invocation.flag("--refresh") && invocation.flag("--offline") {
    throw invocation.usageError("--refresh and --offline contradict each other")
  }
  if invocation.flag("--offline") {
    template.mode = .offline
  } else if invocation.flag("--refresh") {
    template.mode = .refresh
  }
  template.maxAge = try invocation.duration("--max-age").map { .seconds($0) }
  for line in invocation.allValues("--header") {
    // Bytes, not Characters: "\r\n" is one Character, equal to neither.
    guard let colon = line.utf8.firstIndex(of: UInt8(ascii: ":")), colon != line.utf8.startIndex
    else {
      // Without a colon, no part of it is known to be a name: none is echoed.
      throw invocation.usageError("invalid --header: expected 'Name: value', with a colon")
    }
    guard !line.utf8.contains(where: { $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") })
    else {
      // The value may be a secret: only the name is echoed.
      let name = String(decoding: line.utf8[..<colon], as: UTF8.self)
      throw invocation.usageError(
        "invalid --header '\(name): …': a header line holds no line break (CR or LF)")
    }
    template.headers.append(line)
  }
  if let variable = invocation.value("--auth-env") {
    guard RemoteSpec.isVariableName(variable) else {
      throw invocation.usageError(
        "invalid --auth-env '\(variable)': expected an environment variable's name")
    }
    guard let value = EnvironmentVariables.lookUp(variable), !value.isEmpty else {
      throw TroveError(
        .invalidConfig,
        "--auth-env names the environment variable \(variable), which is not set",
        value: variable)
    }
    template.credential = value
  }
  if invocation.flag("--zsync") && invocation.value("--zsync-url") != nil {
    throw invocation.usageError("--zsync and --zsync-url name the control file twice: give one")
  }
  if invocation.flag("--zsync") { template.zsyncURL = "" }
  if let control = invocation.value("--zsync-url") {
    guard invocation.positionals.count == 1, invocation.value("--input") == nil else {
      throw invocation.usageError(
        "--zsync-url names the control file of one URL: give exactly one <url> with it")
    }
    let scheme = control.prefix { $0 != ":" }.lowercased()
    guard (scheme == "http" || scheme == "https") && control.contains("://") else {
      throw invocation.usageError(
        "invalid --zsync-url '\(FetchRequest(url: control).key)': expected an http:// or https:// URL"
      )
    }
    template.zsyncURL = control
  }
  let mirrors = invocation.allValues("--mirror")
  if !mirrors.isEmpty && invocation.positionals.count != 1 {
    throw invocation.usageError(
      "--mirror lists other URLs of one object: give exactly one <url> with it (several in an -i file: 'URL MIRROR...')"
    )
  }
  for url in invocation.positionals {
    var request = template
    request.url = url
    request.mirrors = mirrors
    requests.append(request)
  }
  if let input = invocation.value("--input") {
    requests += try readURLList(input, template: template, invocation: invocation)
  }
  guard !requests.isEmpty else {
    throw invocation.usageError("Missing expected argument '<url>'")
  }
  let destination = invocation.value("--output")
  if destination != nil && requests.count != 1 {
    throw invocation.usageError("-o names one destination; \(requests.count) URLs given")
  }
  if destination == "-" && invocation.flag("--json") {
    throw invocation.usageError("-o - writes the body to stdout: --json has no room there")
  }
  var options = FetchOptions()
  if let retries = try invocation.count("--retries") { options.retries = retries }
  if let seconds = try invocation.seconds("--connect-timeout") { options.connectTimeout = seconds }
  if let seconds = try invocation.seconds("--stall-timeout") { options.stallTimeout = seconds }
  let jobs = try invocation.count("--jobs") ?? 8
  guard jobs >= 1 else { throw invocation.usageError("invalid --jobs '0': expected at least 1") }

  let store = try invocation.openStore()
  var line: TransferTally?
  var progress: (@Sendable (FetchProgress) -> Void)?
  if let shown = ProgressLine.start("fetch", unit: .bytes, for: invocation) {
    let tally = TransferTally(shown)
    line = tally
    progress = { @Sendable in tally.update($0) }
  }
  let outcomes =
    requests.count == 1
    ? [
      Result { () throws(TroveError) in
        try store.fetch(requests[0], options: options, progress: progress)
      }
    ]
    : store.fetch(requests, jobs: jobs, options: options, progress: progress)
  line?.progress.finish()

  var status = ExitStatus.success
  var records: [FetchRecord] = []
  for (request, outcome) in zip(requests, outcomes) {
    do throws(TroveError) {
      let result = try outcome.get()
      if let destination {
        if destination == "-" {
          try store.write(result.digest, to: FileHandle.standardOutput)
        } else {
          let done = try store.materialize(
            result.digest, at: destination, mode: .auto, replacing: invocation.flag("--force"))
          if let reason = done.fallbackReason {
            Output.warning("copied '\(destination)', not cloned: \(reason)")
          }
        }
      }
      if invocation.flag("--json") {
        records.append(FetchRecord(result))
      } else if destination != "-" {
        Output.line("\(result.digest)  \(result.url)")
      }
      if invocation.flag("--verbose") {
        let mirror =
          result.servedBy.map { $0 == result.url ? "" : " (served by '\($0)')" } ?? ""
        Output.error(
          "trove: \(result.url): \(Output.size(result.size)) from \(describe(result.source))\(mirror), \(Output.size(result.bytesTransferred)) transferred in \(String(format: "%.3f", result.seconds)) s"
        )
      }
    } catch {
      Output.error("Error: \(error.withHint)")
      if status == ExitStatus.success { status = ExitStatus.of(error) }
      if invocation.flag("--json") { records.append(FetchRecord(url: request.key, error: error)) }
    }
  }
  if invocation.flag("--json") { Output.json(records) }
  return status
}

private func describe(_ source: FetchSource) -> String {
  switch source {
  case .network: "the network"
  case .resumed: "the network, resumed"
  case .delta: "the network in part, rebuilt from its earlier body (zsync)"
  case .revalidated: "the store, revalidated (304)"
  case .cache: "the store"
  }
}

/// `-i FILE`: one URL a line, optionally followed by its mirrors (words
/// with `://`) and its checksums (`sha256:HEX`, in any order after the
/// URL); blank lines and `#` comments skipped.
private func readURLList(_ path: String, template: FetchRequest, invocation: Invocation) throws
  -> [FetchRequest]
{
  let data = try readList(path)
  let place = path == "-" ? "<stdin>" : path
  var requests: [FetchRequest] = []
  // Split as bytes: "\r\n" is one Character, which a split on "\n" misses.
  for (number, line) in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
    .enumerated()
  {
    let words = line.split(whereSeparator: {
      $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: "\r")
    }).map { String(decoding: $0, as: UTF8.self) }
    guard let first = words.first, !first.hasPrefix("#") else { continue }
    var request = template
    request.url = first
    for word in words.dropFirst() {
      if word.contains("://") {
        request.mirrors.append(word)
        continue
      }
      do {
        request.expected.append(try Checksum(parsing: String(word)))
      } catch {
        throw invocation.usageError("\(place):\(number + 1): \(error.description)")
      }
    }
    requests.append(request)
  }
  return requests
}

/// `fetch --json`: one record a URL, a failed one with its error and null
/// for the rest.
struct FetchRecord: Encodable {
  var url: String
  @Nullable var digest: String? = nil
  @Nullable var size: Int64? = nil
  @Nullable var source: String? = nil
  @Nullable var httpStatus: Int? = nil
  @Nullable var bytesTransferred: Int64? = nil
  @Nullable var seconds: Double? = nil
  var verified: [String] = []
  /// The URL asked for the bytes (the URL, a mirror, a rewrite's), null
  /// when none was asked.
  @Nullable var servedBy: String? = nil
  @Nullable var error: String? = nil

  init(url: String, error: TroveError) {
    self.url = url
    self.error = error.withHint
  }

  init(_ r: FetchResult) {
    url = r.url
    digest = r.digest.description
    size = r.size
    source = r.source.rawValue
    httpStatus = r.httpStatus
    bytesTransferred = r.bytesTransferred
    seconds = (r.seconds * 1000).rounded() / 1000
    verified = r.verified.map(\.description)
    servedBy = r.servedBy
  }
}

/// The transfers of one fetch summed for its ``ProgressLine``: bytes,
/// rate and time left of one transfer, or of all running ones together.
private final class TransferTally: Sendable {
  let progress: ProgressLine
  private let transfers = Mutex<[String: FetchProgress]>([:])

  init(_ progress: ProgressLine) { self.progress = progress }

  func update(_ transfer: FetchProgress) {
    let (report, label) = transfers.withLock { all in
      all[transfer.url] = transfer
      let received = all.values.reduce(Int64(0)) { $0 + $1.received }
      let totals = all.values.compactMap(\.total)
      let total = totals.count == all.count ? totals.reduce(0, +) : nil
      // The verb first, as every progress line has it: `fetch model.bin`.
      let label = "fetch " + (all.count == 1 ? Self.name(transfer.url) : "\(all.count) URLs")
      return (ProgressReport(unit: .bytes, completed: received, total: total), label)
    }
    progress.update(report, label: label)
  }

  private static func name(_ url: String) -> String {
    url.split(separator: "/").last.map(String.init) ?? url
  }
}
