import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The names inside a store's root. Docs/OnDiskFormat.md draws the whole
/// layout and says what each file holds: it is the one copy of it.
enum StoreLayout {
  static let objects = "objects"
  static let tmp = "tmp"
  static let partial = "partial"
  static let locks = "locks"
  /// Every change of a pin or a key, replayed when the index is rebuilt.
  static let journal = "references.log"
  /// What a repair moved out of `objects/`, kept for inspection.
  static let quarantine = "quarantine"
  /// Records of what runs used (``RecordKeeper``).
  static let records = "records"
  static let index = "index.sqlite"
  static let settings = "config.json"
  static let cacheDirTag = "CACHEDIR.TAG"
  /// Held (flock) by the process sweeping the store, which writes its pid in it.
  static let sweepLock = "sweep.lock"
  /// Locked (`flock`) shared while a connection opens the index, and
  /// exclusively while `config set access` gives the index a new file.
  static let indexLock = "index.lock"
  /// One byte per URL being fetched, locked by its fetch (``FetchLock``).
  /// In the root, where no sweep of any version removes leftovers.
  static let fetchLock = "fetch.lock"
  /// Ballast: disk space released when the volume is full, so the index
  /// can record evictions (SQLite needs room to delete rows).
  static let reserve = "reserve"
  static let reserveSize: Int64 = 1 << 20

  /// The Cache Directory Tagging Specification's tag: the first 43 bytes
  /// are the signature that GNU tar `--exclude-caches`, borg and restic look for.
  static let cacheDirTagContents = """
    Signature: 8a477f597d28d172789f06886806bc55
    # This file is a cache directory tag created by Trove.
    # For information about cache directory tags, see:
    #\thttps://bford.info/cachedir/

    """

  /// Permissions of a published object: read-only for everyone who can
  /// reach the store (the root itself is 0700).
  static let objectPermissions: mode_t = 0o444

  /// The fan-out folder of `digest` inside `objects/`: its first two hex digits.
  static func fanout(_ digest: BlobDigest) -> String { String(digest.hex.prefix(2)) }

  /// The suffix of an object stored as a zstd frame.
  static let compressedSuffix = ".zst"

  /// The path of `digest`'s object relative to `objects/`: `ab/<hex>`, or
  /// `ab/<hex>.zst` when it is stored compressed.
  static func objectPath(_ digest: BlobDigest, compressed: Bool = false) -> String {
    fanout(digest) + "/" + objectName(digest, compressed: compressed)
  }

  /// The name of `digest`'s object file inside its fan-out folder: `<hex>`
  /// or `<hex>.zst`.
  static func objectName(_ digest: BlobDigest, compressed: Bool = false) -> String {
    digest.hex + (compressed ? compressedSuffix : "")
  }

  /// A name no other writer will pick: the purpose, this process's id,
  /// 64 random bits drawn once per process, and a count of the names it
  /// gave before. Each writer has its own temp file; none relies on a
  /// lock, and every one is created `O_EXCL`, so a name taken anyway is
  /// refused, never written through. The id is read for each name (one
  /// `getpid`): a child forked without `exec` shares the random bits and
  /// the count, not the id.
  static func temporaryName(_ purpose: String) -> String {
    let n = temporaryCount.add(1, ordering: .relaxed).oldValue
    return purpose + "-" + processPrefix + String(n, radix: 16) + ".tmp"
  }

  /// The folders of `tmp/` that the temp files of puts are spread over,
  /// made when first used. A filesystem that allocates a file's inode
  /// near its folder's (XFS: in the folder's allocation group; folders
  /// are spread over the groups) then spreads a store's objects as it
  /// would spread any tree of files, instead of putting them all where
  /// `tmp/` is; a removal can then unlink the files of different groups
  /// from different threads without each waiting for one group's lock.
  static let stagingFolders = (0..<8).map { String($0) }

  /// ``temporaryName(_:)`` inside one of the ``stagingFolders`` (taken in
  /// turn): `FOLDER/NAME`, relative to `tmp/`.
  static func stagingName(_ purpose: String) -> String {
    let n = temporaryCount.add(1, ordering: .relaxed).oldValue
    return stagingFolders[Int(n % UInt64(stagingFolders.count))] + "/" + purpose + "-"
      + processPrefix + String(n, radix: 16) + ".tmp"
  }

  /// Whether `name` is a temp name this process gave.
  static func isThisProcessTemporary(_ name: String) -> Bool {
    name.contains("-" + processPrefix)
  }

  /// `PID-RANDOM-`: the random part drawn once per process, so a temp name
  /// costs no `getrandom`.
  private static var processPrefix: String { "\(getpid())-" + temporaryRandom }
  private static let temporaryRandom = String(UInt64.random(in: .min ... .max), radix: 16) + "-"
  /// Temp names given by this process.
  private static let temporaryCount = Atomic<UInt64>(0)
}
