import Trove

let remoteCommand = CommandSpec(
  name: "remote",
  abstract: "Configure shared remotes (WebDAV, Redis, S3) and copy objects to and from them.",
  usage:
    "add <name> <url> [--read-only] [--max-object-size <size>] [--auth-env <var>] [--write <when>] [--trust <key>...] [--endpoint <url>] [--region <region>] [--path-style] [--storage-class <class>] [--part-size <size>] | login <name> [--auth-env <var>] | logout <name> | ls [--json] | rm <name> | check <name> [--json] [--clean [--older-than <age>]] | status [--json] | push [--remote <name>] [--json] [--all] [--if-idle] [<digest-or-key>...] | pull [--remote <name>] [--json] <digest-or-key>...",
  arguments: [
    ("name", "The remote's name in this store: letters, digits, '.', '_', '-'."),
    ("url", "http(s)://HOST/PATH (WebDAV), redis://HOST[:PORT][/DB] or s3://BUCKET[/PREFIX]."),
    ("digest", "An object's digest (xxh128:…), checksum or key (push); a digest or key (pull)."),
  ],
  options: [
    OptionSpec(
      names: ["--read-only"], valueName: nil,
      help: "add: only read from this remote; push refuses it."),
    OptionSpec(
      names: ["--max-object-size"], valueName: "size",
      help:
        "add: objects larger than this are not uploaded (Redis: default 64MiB, at most 512MiB; WebDAV: no limit by default)."
    ),
    OptionSpec(
      names: ["--auth-env"], valueName: "var",
      help:
        "add, login: the environment variable holding your credential for it (user:password, or a token over HTTP, a password over Redis)."
    ),
    OptionSpec(
      names: ["--write"], valueName: "when",
      help:
        "add: when objects a put or fetch stores go up: async (default: in the background, after the command), sync (before it returns), off (only by 'remote push')."
    ),
    OptionSpec(
      names: ["--trust"], valueName: "key",
      help:
        "add: read only records and objects signed by this public key (ed25519:…, as 'trove keygen' prints it; repeatable)."
    ),
    OptionSpec(
      names: ["--endpoint"], valueName: "url",
      help:
        "add, s3:// only: the S3 service (http(s)://HOST[:PORT]; default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the AWS profile's endpoint_url, else AWS)."
    ),
    OptionSpec(
      names: ["--region"], valueName: "region",
      help:
        "add, s3:// only: the region requests are signed for (default: AWS_REGION, AWS_DEFAULT_REGION, the AWS profile's, else us-east-1)."
    ),
    OptionSpec(
      names: ["--path-style"], valueName: nil,
      help:
        "add, s3:// only: name the bucket in the path (ENDPOINT/BUCKET/KEY), not the host (default for an IP address or localhost)."
    ),
    OptionSpec(
      names: ["--storage-class"], valueName: "class",
      help: "add, s3:// only: the storage class blobs are uploaded with (STANDARD_IA…)."),
    OptionSpec(
      names: ["--part-size"], valueName: "size",
      help:
        "add, s3:// only: the size of a multipart upload's parts, 5MiB to 5GiB (default 8MiB), and of a large pull's ranges (at most 16MiB); blobs up to it go in one PUT."
    ),
    OptionSpec(
      names: ["--clean"], valueName: nil,
      help:
        "check, s3:// only: abort the unfinished multipart uploads under the remote's prefix that started over an hour (--older-than) ago, and say how many."
    ),
    OptionSpec(
      names: ["--older-than"], valueName: "age",
      help: "check --clean: the age of the uploads aborted (default 1h; 0 for all)."),
    OptionSpec(
      names: ["--all"], valueName: nil,
      help:
        "push without digests: every object the remote is not known to hold, not only those stored since it was added."
    ),
    OptionSpec(
      names: ["--if-idle"], valueName: nil,
      help: "push without digests: return at once when another process is sending the queue."),
    OptionSpec(
      names: ["--remote"], valueName: "name",
      help:
        "push, pull: only this remote (default: push to every writable one, pull from the first that has it)."
    ),
    jsonOption,
  ],
  discussion: """
    A remote is a cache shared by several stores (a team, a CI fleet) on a server
    people already run: a WebDAV folder (nginx's dav module: PUT, DELETE, MOVE), a
    Redis database, or an S3 bucket (AWS, Ceph's radosgw, MinIO, R2…). Remotes are
    kept in the store's remotes.json, in the order they are tried. Which remotes get
    your credentials is yours alone to say, in your own file
    (~/.config/trove/credentials.json, or under XDG_CONFIG_HOME), never in the store:
    'remote add' lends the new remote's URL your credentials, 'remote login NAME'
    lends them to a remote someone else added (a group store's, a restored cache's),
    'remote logout NAME' takes them back. A credential lent is the environment
    variable named by --auth-env, else ~/.netrc's login for the host over HTTP, or,
    for s3://, the credentials the AWS tools would use (AWS_ACCESS_KEY_ID and
    AWS_SECRET_ACCESS_KEY, with AWS_SESSION_TOKEN; else AWS_PROFILE's, or the
    default profile's, in ~/.aws/credentials or ~/.aws/config). A remote you lend
    nothing is asked without credentials (a public bucket is read unsigned), so no
    one who can write remotes.json chooses where your secrets go. An https:// S3
    endpoint's certificate is checked against the system's, or only against those
    in the file AWS_CA_BUNDLE or the profile's ca_bundle names.

    'remote check' reads the remote's layout record (trove-remote.json), timing the
    round trip; unless the remote is read-only it writes the record when missing and
    uploads, reads back and deletes a small probe blob. Exit 69 when the remote is
    not usable.

    'remote push' uploads objects a remote does not hold yet (an intact blob is
    never replaced, and no reader sees half of one); objects larger than the remote's
    max-object-size are skipped. 'remote pull' copies objects into the store; every
    byte is hashed on the way in and a blob whose bytes do not match its name is
    refused (exit 65) and nothing is stored. Given a key (a URL a fetch stored, a
    name 'put --key' bound), it reads the key's record on the remote, pulls the blob
    the record names and binds the key to it; a record claiming a checksum the
    bytes do not have binds nothing (exit 65). A remote that cannot be reached fails
    after about 250 ms, or 3 s to resolve a Redis host (exit 69); a malformed Redis
    reply is exit 69; a transfer slower than 1 KiB/s for 15 s, exit 75. Exit 1 when
    no remote holds an object.

    Reading through: a get, get of many or path of an object the store does not
    hold asks the remotes in order and pulls it from the first that has it (hashed
    on the way in: a blob whose bytes are not its name is counted corrupt, a
    warning, and never stored); a fetch of a URL, and a get or path of a key, the
    store lacks read the key's record a push left there, then its blob. Sweeps
    evict what a remote confirms it holds first (config evict-remote-first).
    A remote that cannot be reached is a warning, and
    is skipped by every process of the store for 60 s, doubling to 15 min while it
    keeps failing, then probed once (a circuit breaker kept in the index).
    'remote push' (but --if-idle), 'pull' and 'check' ask it all the same: an
    answer closes the breaker. 'remote status' shows each remote's state, its upload queue and what reading
    through it did.

    Signed remotes: a store whose signing-key setting names a key file ('trove
    keygen') signs every object and key record it pushes. A remote added with
    --trust ed25519:KEY (repeatable) is read only through signatures of those
    keys: what is unsigned, signed by another key or edited after signing is a
    miss, counted 'untrusted' in 'remote status' and never stored or bound; a blob
    whose bytes lack the signed SHA-256 is refused as corrupt (exit 65).

    Write-back: what a put or fetch stores is queued for every writable remote (the
    objects stored since it was added that it is not known to hold) and sent as its
    --write says: async (default) by a background 'remote push --if-idle' the command
    starts as it ends, sync before the command returns, off only by 'remote push'.
    'remote push' with no digest sends the queue; --all every object the remote
    lacks. A failing remote is a warning; the objects stay queued.
    """,
  store: .writes(when: { ["add", "rm", "pull"].contains($0.positionals.first) }),
  closedPipeIsSuccess: true,
  run: { invocation in try remote(invocation) })

/// The options each action takes (beyond --store, --quiet, --help).
private let remoteActionOptions: [String: Set<String>] = [
  "add": [
    "--read-only", "--max-object-size", "--auth-env", "--write", "--trust", "--endpoint",
    "--region", "--path-style", "--storage-class", "--part-size",
  ],
  "login": ["--auth-env"],
  "logout": [],
  "ls": ["--json"],
  "rm": [],
  "check": ["--json", "--clean", "--older-than"],
  "status": ["--json"],
  "push": ["--remote", "--json", "--all", "--if-idle"],
  "pull": ["--remote", "--json"],
]

/// Refuses `variable` (an --auth-env value) when it cannot name an
/// environment variable.
private func checkVariableName(_ variable: String?, _ invocation: Invocation) throws(UsageError) {
  guard let variable, !RemoteSpec.isVariableName(variable) else { return }
  throw invocation.usageError(
    "invalid --auth-env '\(variable)': expected an environment variable's name, such as CACHE_TOKEN"
  )
}

/// `trove remote`.
private func remote(_ invocation: Invocation) throws -> Int32 {
  let args = invocation.positionals
  guard let action = args.first else {
    throw invocation.usageError(
      "Missing expected argument '<action>': one of add, login, logout, ls, rm, check, status, push, pull"
    )
  }
  guard let allowed = remoteActionOptions[action] else {
    throw invocation.usageError(
      "unknown action '\(action)': expected one of add, login, logout, ls, rm, check, status, push, pull"
    )
  }
  for option in invocation.values.keys.sorted()
  where !allowed.contains(option) && option != "--quiet" {
    throw invocation.usageError("'remote \(action)' takes no option \(option)")
  }
  let operands = Array(args.dropFirst())
  func require(_ names: [String]) throws(UsageError) {
    if operands.count < names.count {
      throw invocation.usageError("Missing expected argument '<\(names[operands.count])>'")
    }
    if operands.count > names.count {
      throw invocation.usageError("Unexpected argument '\(operands[names.count])'")
    }
  }
  switch action {
  case "add":
    try require(["name", "url"])
    var spec = RemoteSpec(
      name: operands[0], url: operands[1], readOnly: invocation.flag("--read-only"),
      authEnvironment: invocation.value("--auth-env"))
    try checkVariableName(spec.authEnvironment, invocation)
    spec.endpointURL = invocation.value("--endpoint")
    spec.region = invocation.value("--region")
    spec.storageClass = invocation.value("--storage-class")
    if invocation.flag("--path-style") { spec.pathStyle = true }
    if let when = invocation.value("--write") {
      guard let write = RemoteWrite(rawValue: when) else {
        throw invocation.usageError("invalid --write '\(when)': expected async, sync or off")
      }
      spec.write = write
    }
    if let size = try invocation.size("--max-object-size") { spec.maxObjectSize = size }
    if let size = try invocation.size("--part-size") { spec.partSize = size }
    let trusted = invocation.allValues("--trust")
    if !trusted.isEmpty {
      var keys: [PublicSigningKey] = []
      for text in trusted {
        do throws(TroveError) {
          keys.append(try PublicSigningKey(parsing: text))
        } catch {
          throw invocation.usageError("invalid --trust: \(error.description)")
        }
      }
      spec.trust = keys
    }
    do throws(TroveError) {
      spec = try spec.validated()
    } catch {
      throw invocation.usageError(error.withHint)
    }
    let store = try Store(
      StoreConfiguration(
        root: try invocation.storeRoot, createIfMissing: true, onWarning: { Output.warning($0) },
        remedyWording: Hints.suffix))
    try store.addRemote(spec)
    // The size as given comes back in its units: 1.5GB is `1.5 GB`.
    let limit = spec.maxObjectSize.map {
      ", max-object-size \(CachePolicy.Quantities.formatSizeSetting($0))"
    }
    Output.line("added remote '\(spec.name)' (\(spec.url)\(limit ?? ""))")
    return ExitStatus.success
  case "login":
    try require(["name"])
    let variable = invocation.value("--auth-env")
    try checkVariableName(variable, invocation)
    let store = try invocation.openStore()
    let spec = try store.lendCredentials(toRemote: operands[0], authEnvironment: variable)
    if let foreign = store.remotesChosenByAnother() { Output.warning(foreign) }
    Output.line(
      "remote '\(spec.name)' (\(spec.url)) gets your credential"
        + (variable.map { " from \($0)" }
          ?? (spec.url.hasPrefix("s3:") ? "s (AWS)" : " from ~/.netrc"))
    )
    return ExitStatus.success
  case "logout":
    try require(["name"])
    let (spec, removed) = try invocation.openStore().withdrawCredentials(fromRemote: operands[0])
    Output.line(
      removed
        ? "remote '\(spec.name)' (\(spec.url)) gets none of your credentials"
        : "remote '\(spec.name)' (\(spec.url)) was lent none of your credentials")
    return ExitStatus.success
  case "ls":
    try require([])
    let remotes = try invocation.openStore().remotes()
    if invocation.flag("--json") {
      Output.json(remotes.map(RemoteRecord.init))
    } else {
      for remote in remotes {
        var line = "\(remote.name)  \(remote.url)  \(remote.readOnly ? "read-only" : "read-write")"
        line +=
          remote.sizeLimit.map {
            "  max-object-size \(CachePolicy.Quantities.formatSizeSetting($0))"
          } ?? "  no max-object-size"
        if let variable = remote.authEnvironment {
          line += "  auth-env \(variable)"
        } else if !remote.lendsCredentials {
          line += "  no credentials lent"
        }
        for key in remote.trust ?? [] { line += "  trust \(key)" }
        Output.line(line)
      }
    }
    return ExitStatus.success
  case "rm":
    try require(["name"])
    guard try invocation.openStore().removeRemote(named: operands[0]) else {
      throw TroveError(
        .notFound, "no remote '\(operands[0])' in store '\(try invocation.storeRoot)'",
        value: operands[0])
    }
    return ExitStatus.success
  case "check":
    try require(["name"])
    if invocation.value("--older-than") != nil, !invocation.flag("--clean") {
      throw invocation.usageError("--older-than goes with --clean")
    }
    let check = try invocation.openStore().checkRemote(
      named: operands[0],
      cleaningUploadsOlderThan: invocation.flag("--clean")
        ? try invocation.duration("--older-than") ?? 3600 : nil)
    if invocation.flag("--json") {
      Output.json(check)
    } else if check.isUsable {
      Output.line(describe(check))
    }
    guard check.isUsable else {
      Output.error("Error: \(check.error ?? "remote '\(check.name)' is not usable")")
      return ExitStatus.unavailable
    }
    return ExitStatus.success
  case "status":
    try require([])
    return try remoteStatus(invocation)
  case "push":
    if operands.isEmpty { return try pushQueue(invocation) }
    for option in ["--all", "--if-idle"] where invocation.flag(option) {
      throw invocation.usageError("\(option) sends the queue: give no digests with it")
    }
    return try push(operands, invocation)
  default:  // pull
    guard !operands.isEmpty else {
      throw invocation.usageError("Missing expected argument '<digest-or-key>'")
    }
    return try pull(
      try operands.map { (text) throws(UsageError) in try invocation.pullTarget(text) }, invocation)
  }
}

/// `remote 'ci' (http://…): reachable in 1.2 ms, writable, layout format 1 (xxh128, written now)`.
private func describe(_ check: Store.RemoteCheck) -> String {
  var parts = [
    "reachable in \(check.latencyMilliseconds.map { String(format: "%.1f", $0) } ?? "?") ms"
  ]
  parts.append(check.readOnly ? "read-only (not written)" : "writable")
  if let layout = check.layout {
    parts.append(
      "layout format \(layout.format) (\(layout.hash)\(check.layoutWritten ? ", written now" : ""))"
    )
  } else {
    parts.append("no layout record yet")
  }
  if let skew = check.clockSkewSeconds {
    parts.append("clock \(abs(skew)) s \(skew >= 0 ? "ahead of" : "behind") the server's")
  }
  if let found = check.pendingUploads, let aborted = check.abortedUploads {
    parts.append(
      "\(found) unfinished multipart upload\(found == 1 ? "" : "s"), \(aborted) aborted")
  }
  return "remote '\(check.name)' (\(check.url)): " + parts.joined(separator: ", ")
}

/// One object and remote in `remote push --json`.
struct PushRecord: Encodable {
  /// nil when the remote failed before any object (sending the queue).
  @Nullable var digest: String? = nil
  var remote: String
  /// `uploaded`, `present` or `too-large`; nil when it failed.
  @Nullable var outcome: String? = nil
  @Nullable var error: String? = nil
}

/// `remote push`: each object to each chosen remote; a failure is reported
/// and the rest go on; the exit status is the first failure's.
private func push(_ operands: [String], _ invocation: Invocation) throws -> Int32 {
  let store = try invocation.openStore()
  let targets: [RemoteSpec]
  if let name = invocation.value("--remote") {
    targets = [try store.remote(named: name)]
  } else {
    targets = try store.remotes().filter { !$0.readOnly }
    guard !targets.isEmpty else {
      throw TroveError(
        .notFound,
        "store '\(store.root)' has no writable remote to push to (see 'trove remote add')")
    }
  }
  // Malformed arguments are usage errors before anything is sent.
  let references = try operands.map { (text) throws(UsageError) in try invocation.reference(text) }
  var status = ExitStatus.success
  var records: [PushRecord] = []
  let resolved = references.map { reference in
    Result { try invocation.resolve(reference, in: store) }
  }
  // Several objects go to each remote together, several at once.
  var unique: [BlobDigest] = []
  var seen = Set<BlobDigest>()
  for case .success(let digest) in resolved where seen.insert(digest).inserted {
    unique.append(digest)
  }
  var together: [String: [BlobDigest: Result<RemoteUpload, TroveError>]] = [:]
  if unique.count > 1 {
    for target in targets {
      together[target.name] = Dictionary(
        zip(unique, store.push(unique, to: target.name)), uniquingKeysWith: { first, _ in first })
    }
  }
  for resolution in resolved {
    let digest: BlobDigest
    do {
      digest = try resolution.get()
    } catch {
      reportError(error)
      if status == ExitStatus.success {
        status = (error as? TroveError).map(ExitStatus.of) ?? ExitStatus.usage
      }
      continue
    }
    for target in targets {
      do throws(TroveError) {
        let outcome: RemoteUpload
        if let settled = together[target.name]?[digest] {
          outcome = try settled.get()
        } else {
          outcome = try store.push(digest, to: target.name)
        }
        records.append(
          PushRecord(digest: digest.description, remote: target.name, outcome: outcome.rawValue))
        if !invocation.flag("--json") {
          switch outcome {
          case .uploaded: Output.line("\(digest)  uploaded to '\(target.name)'")
          case .present: Output.line("\(digest)  already on '\(target.name)'")
          case .tooLarge:
            Output.line(
              "\(digest)  skipped: larger than the max-object-size of '\(target.name)' (\(CachePolicy.Quantities.formatSizeSetting(target.sizeLimit ?? 0)))"
            )
          }
        }
      } catch {
        records.append(
          PushRecord(digest: digest.description, remote: target.name, error: error.withHint))
        Output.error("Error: \(error.withHint)")
        if status == ExitStatus.success { status = ExitStatus.of(error) }
      }
    }
  }
  if invocation.flag("--json") { Output.json(records) }
  return status
}

/// What `remote pull` is asked for: an object by its digest, a key, or
/// 32 hex digits — a key if a remote has a record of one so named (as a
/// key shadows a digest everywhere), else a digest.
private enum PullTarget {
  case digest(BlobDigest)
  case key(String)
  case keyOrDigest(String, BlobDigest)

  var text: String {
    switch self {
    case .digest(let digest): return digest.description
    case .key(let key), .keyOrDigest(let key, _): return key
    }
  }
}

extension Invocation {
  /// A `remote pull` operand: a whole digest (with `xxh128:` or as 32 hex
  /// digits), else a key. A digest prefix or a publisher's checksum names
  /// nothing a remote can look up: usage errors.
  fileprivate func pullTarget(_ text: String) throws(UsageError) -> PullTarget {
    switch try reference(text) {
    case .digest(let digest): return .digest(digest)
    case .hex(let hex) where hex.utf8.count == 32:
      return .keyOrDigest(hex, try digest(BlobDigest.prefix + hex.lowercased()))
    case .hex(let key), .key(let key): return .key(key)
    case .prefix:
      throw usageError("'\(text)' is a digest prefix: 'remote pull' needs the whole digest")
    case .checksum:
      throw usageError(
        "'\(text)' is a checksum: 'remote pull' takes a digest or a key (remotes look up neither by checksum)"
      )
    }
  }
}

/// One object in `remote pull --json`.
private struct PullRecord: Encodable {
  /// The object's digest; nil when a key named nothing.
  @Nullable var digest: String? = nil
  /// The key asked for; nil when a digest was.
  @Nullable var key: String? = nil
  /// The remote it came from; nil when it was local already or failed.
  @Nullable var remote: String? = nil
  @Nullable var size: Int64? = nil
  /// Bytes the remote sent: less than `size` when the store held chunks
  /// of it in earlier versions; nil when nothing was pulled.
  @Nullable var transferredBytes: Int64? = nil
  /// Bytes cloned from those earlier versions (their blocks shared); nil
  /// when nothing was pulled.
  @Nullable var clonedBytes: Int64? = nil
  /// `pulled`, `bound` (the key was bound to a blob the store held),
  /// `local` or `failed`.
  var outcome: String
  @Nullable var error: String? = nil
}

/// `remote pull`: each object or key from the chosen remote, or from the
/// first remote that holds it and sends its bytes intact.
private func pull(_ targets: [PullTarget], _ invocation: Invocation) throws -> Int32 {
  // Never creates a store: one that is not there has no remote to pull from.
  let store = try invocation.openStore()
  let sources: [RemoteSpec]
  if let name = invocation.value("--remote") {
    sources = [try store.remote(named: name)]
  } else {
    sources = try store.remotes()
    guard !sources.isEmpty else {
      throw TroveError(
        .notFound, "store '\(store.root)' has no remote to pull from (see 'trove remote add')")
    }
  }
  let together = pullTogether(targets, from: sources, store: store)
  var status = ExitStatus.success
  var records: [PullRecord] = []
  for (index, target) in targets.enumerated() {
    var failure: TroveError?
    var record = PullRecord(outcome: "failed")
    if case .digest(let digest) = target { record.digest = digest.description }
    if case .key(let key) = target { record.key = key }
    if let outcome = together[index] {
      switch outcome {
      case .success(let (pulled, source)):
        record.remote = pulled.downloaded ? source : nil
        record.size = pulled.size
        record.transferredBytes = pulled.downloaded ? pulled.transferredBytes : nil
        record.clonedBytes = pulled.downloaded ? pulled.clonedBytes : nil
        record.outcome = pulled.downloaded ? "pulled" : "local"
      case .failure(let error):
        failure = error
      }
    }
    for source in sources where together[index] == nil {
      do throws(TroveError) {
        var key: String?
        var digest: BlobDigest?
        switch target {
        case .digest(let named): digest = named
        case .key(let named): key = named
        case .keyOrDigest(let hex, let named):
          // The key first, as everywhere; no record of one: the digest.
          var isKey = try store.binding(forKey: hex) != nil
          if !isKey { isKey = try store.hasKeyRecord(hex, on: source.name) }
          key = isKey ? hex : nil
          digest = key == nil ? named : nil
        }
        if let key {
          let pulled = try store.pull(key: key, from: source.name)
          record.key = key
          record.digest = pulled.digest.description
          record.remote = pulled.bound ? source.name : nil
          record.size = pulled.size
          record.outcome = pulled.downloaded ? "pulled" : pulled.bound ? "bound" : "local"
        } else if let digest {
          let pulled = try store.pull(digest, from: source.name)
          record.digest = digest.description
          record.remote = pulled.downloaded ? source.name : nil
          record.size = pulled.size
          record.transferredBytes = pulled.downloaded ? pulled.transferredBytes : nil
          record.clonedBytes = pulled.downloaded ? pulled.clonedBytes : nil
          record.outcome = pulled.downloaded ? "pulled" : "local"
        }
        failure = nil
        break
      } catch {
        // A miss leaves room for the next remote; any other failure is
        // what is reported when none has it intact.
        if failure == nil || failure?.code == .notFound { failure = error }
      }
    }
    if let failure {
      record.error = failure.withHint
      Output.error("Error: \(failure.withHint)")
      if status == ExitStatus.success { status = ExitStatus.of(failure) }
    } else if !invocation.flag("--json") {
      let name = target.text
      switch (record.outcome, record.remote) {
      case ("pulled", let remote?):
        Output.line(
          record.key == nil
            ? "\(name)  pulled from '\(remote)'"
            : "\(name)  \(record.digest ?? "")  pulled from '\(remote)'")
      case ("bound", let remote?):
        Output.line("\(name)  \(record.digest ?? "")  bound from the record on '\(remote)'")
      default:
        Output.line("\(name)  already in the store")
      }
    }
    records.append(record)
  }
  if invocation.flag("--json") { Output.json(records) }
  return status
}

/// The targets named by digest, when there are several, pulled together
/// (several at once) from each source in turn, the next asked for those
/// the previous did not send intact: each one's outcome and the remote it
/// came from, by its position in `targets`. A miss leaves room for the
/// next remote; any other failure is what is reported when none has it.
private func pullTogether(_ targets: [PullTarget], from sources: [RemoteSpec], store: Store)
  -> [Int: Result<(RemotePull, String), TroveError>]
{
  var pending: [(Int, BlobDigest)] = targets.enumerated().compactMap {
    if case .digest(let digest) = $0.element { return ($0.offset, digest) }
    return nil
  }
  var outcomes: [Int: Result<(RemotePull, String), TroveError>] = [:]
  guard pending.count > 1 else { return outcomes }
  var failures: [Int: TroveError] = [:]
  for source in sources where !pending.isEmpty {
    var left: [(Int, BlobDigest)] = []
    for ((index, digest), outcome) in zip(pending, store.pull(pending.map(\.1), from: source.name))
    {
      switch outcome {
      case .success(let pulled):
        outcomes[index] = .success((pulled, source.name))
      case .failure(let error):
        if failures[index] == nil || failures[index]?.code == .notFound { failures[index] = error }
        left.append((index, digest))
      }
    }
    pending = left
  }
  for (index, _) in pending {
    if let failure = failures[index] { outcomes[index] = .failure(failure) }
  }
  return outcomes
}

/// One remote in `remote ls --json`: camelCase like every other command's
/// JSON (remotes.json keeps config.json's kebab-case names on disk).
struct RemoteRecord: Encodable {
  var name: String
  var url: String
  var readOnly: Bool
  @Nullable var maxObjectSize: Int64?
  @Nullable var authEnv: String?
  /// Whether this user lends it their credentials (`remote login`).
  var credentialsLent: Bool
  /// `async`, `sync` or `off`.
  var write: String
  /// The keys it must be signed by (`ed25519:…`); empty: read unsigned.
  var trust: [String]

  init(_ spec: RemoteSpec) {
    write = (spec.write ?? .async).rawValue
    trust = (spec.trust ?? []).map(\.description)
    name = spec.name
    url = spec.url
    readOnly = spec.readOnly
    maxObjectSize = spec.maxObjectSize
    authEnv = spec.authEnvironment
    credentialsLent = spec.lendsCredentials
  }
}
