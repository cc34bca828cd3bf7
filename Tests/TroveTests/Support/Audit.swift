import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// An audit of a store from the outside, once whatever was done to it is
/// over: every object file rehashed (compressed ones through the `zstd`
/// command, not Trove's own code), `trove verify`, the digests that must
/// still be there with their bytes, the totals `trove stats` gives against
/// the files on disk, and what is left in `tmp/`.
///
/// Each `expect…` records one issue per problem, saying `context` (the
/// seed) so that a failure can be replayed.
struct StoreAudit {
  /// The store's root.
  let store: String
  /// Added to every failure message: the seed, and what replays it.
  let context: String
  /// A folder for the output of the processes the audit runs.
  let io: String

  init(store: String, context: String, io: String) throws {
    self.store = store
    self.context = context
    self.io = io
    try FileManager.default.createDirectory(atPath: io, withIntermediateDirectories: true)
  }

  /// The `zstd` command, if installed.
  static let zstd: String? = ["/usr/bin/zstd", "/usr/local/bin/zstd"].first {
    FileManager.default.isExecutableFile(atPath: $0)
  }

  /// One file under `objects/` named like an object.
  struct ObjectFile {
    var digest: BlobDigest
    var compressed: Bool
    /// Relative to `objects/`.
    var name: String
  }

  /// What `walk()` found under `objects/`.
  struct Contents {
    /// Every file named like an object.
    var files: [ObjectFile] = []
    /// The logical size of every digest whose file(s) hold exactly its bytes;
    /// a digest stored both raw and compressed counts once.
    var intact: [BlobDigest: Int64] = [:]
    /// Digests stored in both forms (a `recompress` cut short).
    var twins: Set<BlobDigest> = []
    /// What is wrong: bytes that do not hash to their name, frames `zstd`
    /// rejects, files not named like objects, objects not read-only.
    var problems: [String] = []
  }

  /// Walks `objects/<2 hex>/`: every `<32 hex>` file must hash (XXH3-128)
  /// to its name, every `<32 hex>.zst` must decompress (`zstd -dc`) to
  /// bytes that do; anything else there is a problem.
  func walk() throws -> Contents {
    var contents = Contents()
    let objects = store + "/objects"
    let fanouts = try FileManager.default.contentsOfDirectory(atPath: objects).sorted()
    for fanout in fanouts {
      let folder = objects + "/" + fanout
      guard fanout.utf8.count == 2, fanout.allSatisfy({ "0123456789abcdef".contains($0) }),
        (try? fileStatus(folder))?.isDirectory == true
      else {
        contents.problems.append("unexpected entry objects/\(fanout)")
        continue
      }
      for name in try FileManager.default.contentsOfDirectory(atPath: folder).sorted() {
        let relative = fanout + "/" + name
        let compressed = name.hasSuffix(".zst")
        let hex = compressed ? String(name.dropLast(4)) : name
        guard let digest = BlobDigest(hex: Substring(hex)), digest.hex == hex, hex.hasPrefix(fanout)
        else {
          contents.problems.append("unexpected file objects/\(relative)")
          continue
        }
        let path = folder + "/" + name
        let status = try fileStatus(path)
        guard status.isRegular else {
          contents.problems.append("objects/\(relative) is not a regular file")
          continue
        }
        if status.mode & 0o7777 != 0o444 {
          contents.problems.append(
            "objects/\(relative) has mode \(String(status.mode & 0o7777, radix: 8)), not 444")
        }
        contents.files.append(ObjectFile(digest: digest, compressed: compressed, name: relative))
        let size: Int64
        if compressed {
          guard let zstd = Self.zstd else {
            contents.problems.append(
              "objects/\(relative) cannot be checked: the zstd command is not installed")
            continue
          }
          let run = try Spawned(executable: zstd, ["-d", "-q", "-c", path], io: io + "/zstd").wait()
          guard run.exitedCleanly else {
            contents.problems.append("objects/\(relative): zstd -dc fails: \(run)")
            continue
          }
          let found = XXH3Hasher.digest(run.stdout)
          guard found == digest else {
            contents.problems.append(
              "objects/\(relative) decompresses to bytes hashing to \(found)")
            continue
          }
          size = Int64(run.stdout.count)
        } else {
          let found = try XXH3Hasher.digest(ofFile: path)
          guard found == digest else {
            contents.problems.append("objects/\(relative) hashes to \(found)")
            continue
          }
          size = status.size
        }
        if let other = contents.intact[digest] {
          contents.twins.insert(digest)
          if other != size {
            contents.problems.append("objects/\(relative): \(size) bytes, its twin \(other)")
          }
        }
        contents.intact[digest] = size
      }
    }
    return contents
  }

  /// Records every problem `walk()` found.
  func expectIntact(_ contents: Contents, sourceLocation: SourceLocation = #_sourceLocation) {
    for problem in contents.problems {
      Issue.record("\(problem) [\(context)]", sourceLocation: sourceLocation)
    }
  }

  /// Whether `objects/` holds a file for `digest`, raw or compressed.
  func isStored(_ digest: BlobDigest) -> Bool {
    let base = store + "/objects/" + StoreLayout.objectPath(digest)
    return access(base, F_OK) == 0 || access(base + ".zst", F_OK) == 0
  }

  /// The digests that have a file under `objects/` (raw or compressed),
  /// from the names alone: nothing is read.
  func digestsOnDisk() throws -> Set<BlobDigest> {
    let objects = store + "/objects"
    var found = Set<BlobDigest>()
    for fanout in try FileManager.default.contentsOfDirectory(atPath: objects) {
      let names =
        (try? FileManager.default.contentsOfDirectory(atPath: objects + "/" + fanout)) ?? []
      for name in names {
        let hex = name.hasSuffix(".zst") ? name.dropLast(4) : Substring(name)
        if let digest = BlobDigest(hex: hex) { found.insert(digest) }
      }
    }
    return found
  }

  /// The digests the index has rows for (`trove ls --json`).
  func indexRows(sourceLocation: SourceLocation = #_sourceLocation) throws -> Set<BlobDigest> {
    let ls = try CLI.run(["--store", store, "ls", "--json"])
    let rows = try? JSONSerialization.jsonObject(with: Data(ls.stdout)) as? [[String: Any]]
    #expect(
      ls.status == 0 && rows != nil,
      "trove ls --json: exit \(ls.status), \(ls.stderr) [\(context)]",
      sourceLocation: sourceLocation)
    return Set(
      (rows ?? []).compactMap { ($0["digest"] as? String).flatMap { try? BlobDigest(parsing: $0) } }
    )
  }

  /// One run of `trove verify --json`.
  struct VerifyRun: CustomStringConvertible {
    var outcome: CLI.Result
    var report: VerifyReport?

    var description: String {
      guard let report else { return "exit \(outcome.status), stderr: \(outcome.stderr)" }
      return
        "exit \(outcome.status): \(report.checkedObjects) objects, \(report.corrupt.count) corrupt, "
        + "\(report.orphanFiles) orphan files, \(report.danglingRows) rows without a file, "
        + "\(report.unexpectedFiles.count) unexpected files"
        + (outcome.stderr.isEmpty ? "" : ", stderr: \(outcome.stderr)")
    }
  }

  /// Runs `trove verify --json`, with `--repair` if asked.
  func verify(repair: Bool = false) throws -> VerifyRun {
    let outcome = try CLI.run(
      ["--store", store, "verify", "--json"] + (repair ? ["--repair"] : []))
    return VerifyRun(
      outcome: outcome,
      report: try? JSONDecoder().decode(VerifyReport.self, from: Data(outcome.stdout)))
  }

  /// `trove verify` finds the store clean; or, `allowingRepair`, it finds
  /// only what a crash may leave (orphan files, rows without a file: never
  /// corrupt objects or stray files), one `verify --repair` exits 0, and
  /// then `verify` finds it clean. Returns the first run (what was found).
  @discardableResult
  func expectVerifyClean(allowingRepair: Bool, sourceLocation: SourceLocation = #_sourceLocation)
    throws -> VerifyRun
  {
    let first = try verify()
    guard let report = first.report, first.outcome.status == 0 || first.outcome.status == 65
    else {
      Issue.record("trove verify failed: \(first) [\(context)]", sourceLocation: sourceLocation)
      return first
    }
    #expect(
      report.corrupt.isEmpty && report.unexpectedFiles.isEmpty,
      "trove verify: \(first); corrupt \(report.corrupt), unexpected \(report.unexpectedFiles) [\(context)]",
      sourceLocation: sourceLocation)
    if report.isClean {
      #expect(
        first.outcome.status == 0, "trove verify: \(first) [\(context)]",
        sourceLocation: sourceLocation)
      return first
    }
    guard allowingRepair else {
      Issue.record(
        "trove verify is not clean (and nothing was killed, so nothing may need a repair): \(first) [\(context)]",
        sourceLocation: sourceLocation)
      return first
    }
    let repair = try verify(repair: true)
    #expect(
      repair.outcome.status == 0 && repair.report?.repaired == true,
      "trove verify --repair: \(repair) [\(context)]", sourceLocation: sourceLocation)
    let after = try verify()
    #expect(
      after.outcome.status == 0 && after.report?.isClean == true,
      "trove verify after one repair: \(after) (before: \(first)) [\(context)]",
      sourceLocation: sourceLocation)
    return first
  }

  /// Each digest is in the store (`trove has` exits 0) and `trove get D -`
  /// prints exactly the bytes of the file given for it. `what` says why
  /// it must be there.
  func expectPresent(
    _ expected: [BlobDigest: String], _ what: String,
    sourceLocation: SourceLocation = #_sourceLocation
  ) throws {
    for (digest, source) in expected.sorted(by: { $0.key < $1.key }) {
      let name = (source as NSString).lastPathComponent
      let has = try CLI.run(["--store", store, "has", digest.description])
      guard has.status == 0 else {
        Issue.record(
          "\(what) \(digest) (\(name)) is gone: trove has exits \(has.status) [\(context)]",
          sourceLocation: sourceLocation)
        continue
      }
      let get = try CLI.run(["--store", store, "get", digest.description, "-"])
      let bytes = try contents(source)
      #expect(
        get.status == 0 && get.stdout == bytes,
        "\(what) \(digest) (\(name)): trove get exits \(get.status) with \(get.stdout.count) bytes, stderr: \(get.stderr) [\(context)]",
        sourceLocation: sourceLocation)
    }
  }

  /// `trove stats --json` counts the digests on disk (`entries`; one
  /// stored in both forms counts once) and their logical bytes.
  func expectTotalsMatchDisk(
    _ contents: Contents, sourceLocation: SourceLocation = #_sourceLocation
  )
    throws
  {
    let stats = try CLI.run(["--store", store, "stats", "--json"])
    let json = try JSONSerialization.jsonObject(with: Data(stats.stdout)) as? [String: Any]
    let entries = json?["entries"] as? Int
    let logical = json?["logicalBytes"] as? Int
    // A remover killed between its two steps (the row gone, the file not
    // yet) leaves a recorded removal: its file is no longer an object of
    // the store (a get finishes the removal, a put of its bytes calls it
    // off), and the next repair or sweep of its folder unlinks it.
    let removing = try pendingRemovals()
    let objects = contents.intact.filter { !removing.contains($0.key) }
    let bytes = objects.values.reduce(0, +)
    #expect(
      stats.status == 0 && entries == objects.count && logical == Int(bytes),
      "trove stats: \(entries.map(String.init) ?? "?") entries of \(logical.map(String.init) ?? "?") bytes; on disk \(objects.count) digests of \(bytes) bytes, besides \(contents.intact.count - objects.count) whose removal is under way (exit \(stats.status)) [\(context)]",
      sourceLocation: sourceLocation)
  }

  /// Digests whose removal the index records as under way.
  func pendingRemovals() throws -> Set<BlobDigest> {
    let library = try Store(StoreConfiguration(root: store))
    return Set(
      try library.index().read("audit removals") { (tx) throws(TroveError) in
        try tx.removals(withPrefix: "")
      }.keys)
  }

  /// Every file left in `tmp/` was left by a process the test killed:
  /// temporary names carry their writer's pid, and a process that ends by
  /// itself (successfully or not) removes its own.
  func expectNoLeftovers(
    exceptFrom killed: Set<Int32>, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    let names = storeTemporaries(store)
    for name in names.sorted() {
      let pid = name.split(separator: "-").lazy.compactMap { Int32($0) }.first
      if let pid, killed.contains(pid) { continue }
      Issue.record(
        "tmp/\(name) was left behind by a process that was not killed [\(context)]",
        sourceLocation: sourceLocation)
    }
  }
}
