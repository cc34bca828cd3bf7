import Foundation
import Trove
import TroveServer

let serveCommand = CommandSpec(
  name: "serve",
  abstract:
    "Serve the store over HTTP: objects by digest or checksum, as a remote, and pull-through mirrors.",
  usage:
    "[--listen <addr:port>]... [--mirror <name=upstream>]... [--no-stale-if-error] [--max-origin-transfers <n>] [--proxy-allow <host[:port]>]... [--token-file <file>] [--public-read] [--writable] [--access-log <file>|-] [--access-log-format clf|json] [--max-connections <n>] [--idle-timeout <duration>] [--max-header-size <size>] [--threads <n>] [--sweep-interval <duration>|off] [--grace-period <duration>]",
  arguments: [],
  options: [
    OptionSpec(
      names: ["--listen"], valueName: "addr:port",
      help: "Listen here: 127.0.0.1:7780 (the default), [::1]:7780, 0.0.0.0:7780; repeatable."),
    OptionSpec(
      names: ["--mirror"], valueName: "name=upstream",
      help:
        "Serve /m/NAME/PATH as a fetch of UPSTREAM/PATH through the store; repeatable; besides the store's mirror.NAME settings (config set), over one of the same name."
    ),
    OptionSpec(
      names: ["--no-stale-if-error"], valueName: nil,
      help: "When a mirror's origin fails, answer 502/504, not the stored copy."),
    OptionSpec(
      names: ["--max-origin-transfers"], valueName: "n",
      help: "Mirror fetches run at once (default 32); more wait."),
    OptionSpec(
      names: ["--proxy-allow"], valueName: "host[:port]",
      help:
        "Proxy only this host (any port, or the one given), for every client; repeatable. Without it, an address other machines reach proxies no host."
    ),
    OptionSpec(
      names: ["--token-file"], valueName: "file",
      help: "Require 'Authorization: Bearer TOKEN' with a token of this file (one a line)."),
    OptionSpec(
      names: ["--public-read"], valueName: nil,
      help: "Serve reads without a token, also on addresses other machines reach."),
    OptionSpec(
      names: ["--writable"], valueName: nil,
      help: "Take what other stores push (with a token): blobs, rehashed, and key records."),
    OptionSpec(
      names: ["--access-log"], valueName: "file",
      help: "Append one line per request to this file ('-': standard error)."),
    OptionSpec(
      names: ["--access-log-format"], valueName: "format",
      help: "clf (common log format, the default) or json."),
    OptionSpec(
      names: ["--max-connections"], valueName: "n",
      help: "Connections open at once, per address (default 256)."),
    OptionSpec(
      names: ["--idle-timeout"], valueName: "duration",
      help: "Close a connection idle this long (default 30s)."),
    OptionSpec(
      names: ["--max-header-size"], valueName: "size",
      help: "Memory per connection, which bounds a request's head (default 32K; 8K to 1M)."),
    OptionSpec(
      names: ["--threads"], valueName: "n",
      help: "Threads answering, per address (default: one a CPU, at least 2)."),
    OptionSpec(
      names: ["--sweep-interval"], valueName: "duration",
      help:
        "Sweep the store this often (expiry, budget), besides the sweeps puts make (default 10m; off for never)."
    ),
    OptionSpec(
      names: ["--grace-period"], valueName: "duration",
      help: "On SIGTERM or SIGINT, let responses under way finish this long (default 30s)."),
  ],
  discussion: """
    Runs in the foreground until SIGTERM or SIGINT, printing the URL of each
    address it listens on to stderr. It answers GET and HEAD:
      /cas/<xxh128 hex>        an object by digest
      /sha256/<hex>            an object by a checksum the store recorded
      /sha512/<hex>            (fetch --expect, or a remote's record)
      /trove-remote.json, /cas/<aa>/<hex>, /keys/<h>.json
                               the read side of a WebDAV remote: another store's
                               'trove remote add NAME http://HOST:PORT/ --read-only'
                               reads through from this one, by digest and by key
      /m/<name>/<path>         a fetch of the mirror's UPSTREAM/<path> through the
                               store (--mirror NAME=UPSTREAM): fresh copies served
                               without a request, stale ones revalidated, one
                               transfer for all clients, a miss sent as it arrives
                               (its last byte once verified); the origin's
                               Content-Type, ETag and Last-Modified, and
                               X-Trove-Cache: hit, revalidated, miss or stale (the
                               origin failed and the stored copy is served, with a
                               Warning). Package index pages (PEP 503, PEP 691) get
                               their links into another mirror's upstream
                               rewritten through it, and each file's published
                               sha256 is expected of it.
      http://HOST/PATH         (a proxy's request: http_proxy=http://ADDR:PORT) the
                               store's fetch of that URL, as a mirror's; https://
                               goes through CONNECT HOST:PORT, relayed and not
                               cached. With --token-file, a proxy's client sends
                               Proxy-Authorization: Bearer TOKEN, or the token as
                               the proxy URL's password (http://USER:TOKEN@...).
      /metrics                 counts in Prometheus's text format
      /healthz                 'ok'
    Objects carry a strong ETag (their digest), are immutable for a year, and
    answer Range (one range) and If-None-Match. A compressed object is sent
    decompressed, or as its zstd frame to a client that accepts zstd.
    A loopback address serves reads to anyone on this machine. Any other address
    is refused unless --token-file (every request then needs a token, except
    /healthz) or --public-read is given; tokens are never printed or logged.
    The proxy serves any host to clients of a loopback address and, on any
    other address, only the hosts of --proxy-allow (which, given, applies to
    every address): never an open proxy.
    With --writable (and --token-file: every write needs a token) it also takes
    what 'trove remote push' sends to it: each blob rehashed by the store's own
    writer before it is stored, each key record checked as one read from a
    remote is.
    Exits 0 once stopped, 64 for a bad flag or an address it may not expose, 69
    when an address cannot be listened on (in use, not this machine's), 78 for a
    token file or access log that cannot be used.
    """,
  run: { invocation in
    try invocation.requirePositionals([])
    // Before the store or a daemon starts a thread, so that every thread
    // inherits it and only the wait below receives the signals.
    Server.blockStopSignals()
    var configuration = ServerConfiguration()
    let addresses = invocation.allValues("--listen")
    if !addresses.isEmpty {
      configuration.listen = []
      for text in addresses {
        do throws(ListenAddress.Invalid) {
          configuration.listen.append(try ListenAddress(parsing: text))
        } catch {
          throw invocation.usageError(error.message)
        }
      }
    }
    var names: Set<String> = []
    for text in invocation.allValues("--mirror") {
      let mirror: Mirror
      do throws(Mirror.Invalid) {
        mirror = try Mirror(parsing: text)
      } catch {
        throw invocation.usageError(error.message)
      }
      guard names.insert(mirror.name).inserted else {
        throw invocation.usageError("--mirror \(mirror.name) is given twice")
      }
      configuration.mirrors.append(mirror)
    }
    for text in invocation.allValues("--proxy-allow") {
      do throws(ProxyAllowance.Invalid) {
        configuration.proxyAllow.append(try ProxyAllowance(parsing: text))
      } catch {
        throw invocation.usageError(error.message)
      }
    }
    configuration.staleIfError = !invocation.flag("--no-stale-if-error")
    configuration.publicRead = invocation.flag("--public-read")
    configuration.writable = invocation.flag("--writable")
    configuration.limits = try invocation.serverLimits()
    if invocation.value("--sweep-interval") == "off" {
      configuration.sweepInterval = nil
    } else if let seconds = try invocation.duration("--sweep-interval") {
      guard seconds >= 1, seconds <= 7 * 86400 else {
        throw invocation.usageError("--sweep-interval must be from 1s to 7d, or off")
      }
      configuration.sweepInterval = .seconds(seconds)
    }
    let format: AccessLog.Format
    switch invocation.value("--access-log-format") ?? "clf" {
    case "clf": format = .commonLogFormat
    case "json": format = .json
    case let other:
      throw invocation.usageError("invalid --access-log-format '\(other)': expected clf or json")
    }
    if invocation.value("--access-log-format") != nil, invocation.value("--access-log") == nil {
      throw invocation.usageError("--access-log-format needs --access-log FILE or -")
    }
    let store = try invocation.openStore()
    do throws(ServerError) {
      if let path = invocation.value("--token-file") {
        do throws(Tokens.Invalid) {
          configuration.tokens = try Tokens(contentsOf: path)
        } catch {
          throw ServerError.invalidConfiguration(error.message)
        }
      }
      if let path = invocation.value("--access-log") {
        configuration.accessLog = try AccessLog(path: path, format: format)
      }
      configuration.onError = { Output.error("Error: \($0)") }
      let server = try Server(store: store, configuration: configuration)
      for url in try server.start() { Output.error("trove: serving '\(store.root)' on \(url)") }
      let signal = Server.waitForStopSignal()
      let grace = configuration.limits.gracePeriod
      Output.error(
        "trove: \(signal == SIGINT ? "SIGINT" : "SIGTERM"): not accepting; letting responses under way finish (up to \(grace)s)"
      )
      if !server.stop(grace: grace) {
        Output.warning("responses still under way after \(grace)s were cut off")
      }
      return ExitStatus.success
    } catch {
      switch error.kind {
      case .refusedExposure: throw invocation.usageError(error.message)
      case .invalidConfiguration:
        Output.error("Error: \(error.message)")
        return ExitStatus.config
      case .addressInUse, .cannotListen:
        Output.error("Error: \(error.message)")
        return ExitStatus.unavailable
      }
    }
  })

extension Invocation {
  /// The limits `serve`'s flags set, the defaults for the others.
  fileprivate func serverLimits() throws(UsageError) -> Limits {
    var limits = Limits()
    if let n = try count("--max-connections") {
      guard n >= 1 else { throw usageError("--max-connections must be at least 1") }
      limits.connections = n
    }
    if let n = try count("--max-origin-transfers") {
      guard (1...1024).contains(n) else {
        throw usageError("--max-origin-transfers must be from 1 to 1024")
      }
      limits.originTransfers = n
    }
    if let n = try count("--threads") {
      guard (1...256).contains(n) else { throw usageError("--threads must be from 1 to 256") }
      limits.threads = n
    }
    if let seconds = try duration("--idle-timeout") {
      guard seconds >= 1, seconds <= 86400 else {
        throw usageError("--idle-timeout must be from 1s to 1d")
      }
      limits.idleTimeout = Int(seconds)
    }
    if let seconds = try duration("--grace-period") {
      guard seconds <= 86400 else { throw usageError("--grace-period must be at most 1d") }
      limits.gracePeriod = Int(seconds)
    }
    if let bytes = try size("--max-header-size") {
      guard (8 * 1024...1024 * 1024).contains(bytes) else {
        throw usageError("--max-header-size must be from 8K to 1M")
      }
      limits.headerBytes = Int(bytes)
    }
    return limits
  }
}
