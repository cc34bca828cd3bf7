/// What each figure should reach against its reference (a ratio, above 1
/// meaning Trove is better), where a reference does the same work and so
/// sets a goal. References that only give context (hashing alone beside a
/// put, `true` beside a process start) have none. Docs/Benchmarks.md says
/// where each goal comes from.
enum Goals {
  private struct Goal {
    let suite: String
    let reference: String
    /// A part of the benchmark's name, when the reference serves several.
    let name: String?
    let ratio: Double
    /// Whether `reference` is the start of the references it sets a goal for.
    let isPrefix: Bool

    init(
      _ suite: String, _ reference: String, _ ratio: Double, name: String? = nil,
      isPrefix: Bool = false
    ) {
      self.suite = suite
      self.reference = reference
      self.name = name
      self.ratio = ratio
      self.isPrefix = isPrefix
    }
  }

  private static let all: [Goal] = [
    Goal("hash", "C XXH3_128bits_dispatch", 0.9),
    Goal("hash", "one-shot, same buffer", 0.9),
    Goal("hash", "xxhsum -H2 FILE", 0.9),
    Goal("hash", "xxhsum -b11 (XXH128)", 0.9),
    Goal("put", "cp && sync FILE", 0.9),
    Goal("put", "cat | cat > FILE && sync", 0.9),
    Goal("put", "xxhsum -H2 FILE", 0.9, name: "again"),
    Goal("put", "xxhsum -H2 FILE", 0.8, name: "clone path"),
    Goal("put", "cp --reflink && xxhsum clone", 0.9),
    Goal("get", "cp --reflink=never", 0.9, name: "GiB by copy"),
    Goal("sweep", "CacheJanitor (walk+sort)", 1.0),
    Goal("sweep", "unlink loop, same files", 0.8),
    Goal("compression", "&& sync", 0.9),
    Goal("compression", "zstd -d", 0.9),
    Goal("compression", "zstd -T1 -1", 0.95, name: "ratio"),
    Goal("compression", "zstd -T1 -3", 0.95, name: "ratio"),
    Goal("fetch", "curl -o FILE && sync FILE", 0.9),
    Goal("fetch", "curl URL | sha256sum", 1.0),
    Goal("fetch", "curl -z FILE (304)", 1.5, name: "fresh hit"),
    Goal("fetch", "curl -z FILE (304)", 1.0, name: "revalidate"),
    Goal("fetch", "curl --parallel --parallel-max 8", 0.8),
    Goal("process", "git cat-file -e", 1.0),
    Goal("process", "git --version", 0.5),
    Goal("process", "git hash-object -w, core.fsync=loose-object", 0.8, name: "new"),
    Goal("small", "python create+write+rename", 0.5),
    Goal("small", "git hash-object -w --stdin-paths", 1.5),
    Goal("small", "open+write+rename loop", 0.5, name: "8 thread"),
    Goal("remote", "curl -o FILE && sync FILE", 0.9),
    Goal("remote", "curl -T FILE", 0.9),
    Goal("remote", "xargs -P8 curl", 0.9),
    Goal("remote", "redis-cli --pipe of the SETs", 0.8),
    // S3: a large push or pull at least 0.9× curl's one request (of the same
    // durability, for a pull); many small objects 1.5× awscli's.
    Goal("remote", "curl --aws-sigv4 -T FILE (one PUT)", 0.9, name: " over "),
    Goal("remote", "curl --aws-sigv4 -o FILE && sync FILE (one GET)", 0.9),
    Goal("remote", "aws s3 cp --recursive", 1.5),
    // Signing may cost a pull at most 1.3× the unsigned one.
    Goal("remote", "the same pull, unsigned remote", 1 / 1.3),
    Goal("remote", "the same fetch, unsigned remote", 0.9),
    Goal("serve", "nginx, the same file", 0.9),
    Goal("serve", "nginx, the same files", 0.7),
    Goal("serve", "curl -o FILE from nginx", 0.8),
    // A store of a million objects costs at most 1.2× one of 10,000: per
    // call where the work is one object, per object where it is all of them,
    // per evicted object for a sweep, in all for stats and ls's memory.
    Goal("scale", "the same, ", 1 / 1.2, name: "one process", isPrefix: true),
    Goal("scale", "the same, ", 1 / 1.2, name: "stats,", isPrefix: true),
    Goal("scale", "the same, ", 1 / 1.2, name: "per object", isPrefix: true),
    Goal("scale", "the same, ", 1 / 1.2, name: "per evicted object", isPrefix: true),
    Goal("scale", "the same, ", 1 / 1.2, name: "ls: peak RSS", isPrefix: true),
    Goal("scale", "xxhsum -c, same files", 0.9),
    // Chunking may cost a put at most 1.15×; an in-place edit's new
    // version takes at most 1.1× its changed bytes on disk.
    Goal("chunks", "the same put, chunking off", 1 / 1.15),
    Goal("chunks", "the changed bytes, in place", 1 / 1.1),
    // A pull moves at most 1.1× the changed bytes and the manifest.
    Goal("chunks", "the changed bytes + manifest", 1 / 1.1),
  ]

  /// The goal of `result`, if its reference sets one.
  static func ratio(for result: Result) -> Double? {
    guard let reference = result.referenceName else { return nil }
    return all.first { goal in
      goal.suite == result.suite
        && (reference == goal.reference || goal.isPrefix && reference.hasPrefix(goal.reference)
          || (goal.reference.hasPrefix("&&") || goal.reference.hasPrefix("xargs"))
            && reference.contains(goal.reference))
        && (goal.name.map { result.name.contains($0) } ?? true)
    }?.ratio
  }
}
