import Trove

let keysCommand = CommandSpec(
  name: "keys",
  abstract: "List the keys bound to objects, or remove keys.",
  usage: "[--json] | rm <key>...",
  arguments: [("key", "A key bound with 'put --key'.")],
  options: [jsonOption],
  discussion: """
    One line per key: digest, size, key. A key goes when its object does (evicted or
    removed). 'trove keys rm KEY...' removes keys and leaves their objects; exit 1
    if one was not bound.
    """,
  store: .writes(when: { $0.positionals.first == "rm" }),
  closedPipeIsSuccess: true,
  run: { invocation in
    let args = invocation.positionals
    switch args.first {
    case nil:
      var records: [KeyRecord] = []
      // No store yet: no keys.
      if let store = try invocation.openStoreIfPresent() {
        for binding in try store.keys() {
          records.append(KeyRecord(binding, size: try store.entry(for: binding.digest)?.size))
        }
      }
      if invocation.flag("--json") {
        Output.json(records)
      } else {
        for record in records {
          let size = record.size.map { Output.size($0) } ?? "missing"
          let padded = String(repeating: " ", count: max(0, 10 - size.count)) + size
          Output.line("\(record.digest)  \(padded)  \(record.key)")
        }
      }
      return ExitStatus.success
    case "rm":
      if invocation.flag("--json") {
        throw invocation.usageError("'keys rm' prints nothing: --json goes with the listing only")
      }
      guard args.count > 1 else { throw invocation.usageError("Missing expected argument '<key>'") }
      let store = try invocation.openStore()
      var status = ExitStatus.success
      for key in args.dropFirst() where try !store.unbind(key: key) {
        Output.error("Error: no key '\(key)' in store '\(store.root)'")
        status = ExitStatus.failure
      }
      return status
    default:
      throw invocation.usageError("unknown action '\(args[0])': expected rm, or nothing to list")
    }
  })

/// One key in `keys --json`.
struct KeyRecord: Encodable {
  var key: String
  var digest: String
  /// The object's size; nil when its file is gone.
  @Nullable var size: Int64?
  var updated: String
  /// What `fetch` recorded (null for `put --key`).
  @Nullable var etag: String? = nil
  /// `Last-Modified` as ISO 8601 (null when not an HTTP date).
  @Nullable var lastModified: String? = nil
  @Nullable var fetched: String? = nil
  /// Until when it is served without asking the server.
  @Nullable var freshUntil: String? = nil
  @Nullable var immutable: Bool? = nil
  @Nullable var finalURL: String? = nil
  /// The URL a fetch asked for the body (the key, a mirror, or a rewrite's
  /// URL), before redirects; null for `put --key` and older records.
  @Nullable var servedBy: String? = nil

  init(_ binding: KeyBinding, size: Int64?) {
    key = binding.shownKey
    digest = binding.digest.description
    self.size = size
    updated = Output.time(binding.updated)
    if let origin = binding.origin {
      etag = origin.etag
      lastModified = origin.lastModifiedDate.map(Output.time)
      // Bound from a remote's record: not fetched here until the origin is asked.
      fetched = origin.fetched.timeIntervalSince1970 > 0 ? Output.time(origin.fetched) : nil
      freshUntil = origin.expires.map(Output.time)
      immutable = origin.isImmutable
      finalURL = origin.shownFinalURL
      servedBy = origin.shownServedBy
    }
  }
}
