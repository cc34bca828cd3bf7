import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A content-addressed store of blobs named by their XXH3-128 digest.
///
/// Open one with a ``StoreConfiguration``; put files, streams or bytes in
/// (``put(file:priority:)``, ``makeWriter(expectedSize:priority:)``, ``put(bytes:priority:)``); get them out as
/// copy-on-write clones or copies (``materialize(_:at:mode:replacing:durable:)``),
/// read them in place (``path(for:decompressing:)``), list, remove, and count.
///
/// A `Store` is `Sendable` and safe to use from many threads at once, and
/// many processes may open the same root: every writer has its own
/// temporary file, and objects are published by a rename that never
/// replaces, so correctness never depends on a lock being honoured.
public final class Store: Sendable {
  /// How this store was opened.
  public let configuration: StoreConfiguration
  /// The store's root folder.
  public var root: String { configuration.root }

  let rootDirectory: FileDescriptor
  let objectsDirectory: FileDescriptor
  let tmpDirectory: FileDescriptor
  /// `st_dev` of `tmp/`: sources on this device can be cloned in.
  let device: UInt64
  /// The index, opened on first use: lookups by digest never need it.
  private let openedIndex = Mutex<Index?>(nil)
  /// The settings last read from `config.json`, with the file's identity:
  /// re-read when another process replaced it.
  private let cachedSettings: Mutex<(identity: [Int64], settings: StoreSettings)>
  /// Reads this process recorded lately: digest → when (nanoseconds), so a
  /// hot object is not looked up in the index on every read.
  let recentReads = Mutex<[Digest: Int64]>([:])
  let cloneProbe = CloneProbe()

  var objectsPath: String { root + "/" + StoreLayout.objects }
  var tmpPath: String { root + "/" + StoreLayout.tmp }

  /// Opens the store at `configuration.root`, creating it (mode 0700, with
  /// `objects/`, `tmp/`, `CACHEDIR.TAG`, `config.json` and the index) when
  /// missing and allowed. Safe to race with other processes opening it.
  ///
  /// - Throws: ``TroveError`` `.storeUnavailable` naming the path and the
  ///   failing call when the root cannot be created or opened,
  ///   `.unsupportedFormat` when a newer Trove wrote it.
  public init(_ configuration: StoreConfiguration = StoreConfiguration()) throws(TroveError) {
    self.configuration = configuration
    let root = configuration.root
    guard !root.isEmpty else {
      throw TroveError(.storeUnavailable, "store path is empty", value: root)
    }
    if configuration.createIfMissing {
      try attempt("create store", root, code: .storeUnavailable) { () throws(SystemCallError) in
        try Self.makeDirectories(root)
      }
    }
    let rootFD = try attempt("open store", root, code: .storeUnavailable) {
      () throws(SystemCallError) in
      try FileDescriptor.open(root, .directory)
    }
    var opened = [rootFD]
    do throws(TroveError) {
      for name in [StoreLayout.objects, StoreLayout.tmp] where configuration.createIfMissing {
        try attempt("create store folder", root + "/" + name, code: .storeUnavailable) {
          () throws(SystemCallError) in
          do throws(SystemCallError) {
            try rootFD.makeDirectory(name)
          } catch  where error.errno == .fileExists {}
        }
      }
      let objectsFD = try attempt("open store folder", root + "/objects", code: .storeUnavailable) {
        () throws(SystemCallError) in
        try FileDescriptor.open(StoreLayout.objects, in: rootFD, .directory)
      }
      opened.append(objectsFD)
      let tmpFD = try attempt("open store folder", root + "/tmp", code: .storeUnavailable) {
        () throws(SystemCallError) in
        try FileDescriptor.open(StoreLayout.tmp, in: rootFD, .directory)
      }
      opened.append(tmpFD)
      device = try attempt("inspect store folder", root + "/tmp", code: .storeUnavailable) {
        () throws(SystemCallError) in try tmpFD.status().device
      }
      rootDirectory = rootFD
      objectsDirectory = objectsFD
      tmpDirectory = tmpFD
      try Self.publishIfMissing(
        StoreLayout.cacheDirTag, Array(StoreLayout.cacheDirTagContents.utf8),
        root: root, rootFD: rootFD, tmpFD: tmpFD)
      try Self.publishIfMissing(
        StoreLayout.settings, StoreSettings.initial.encoded(),
        root: root, rootFD: rootFD, tmpFD: tmpFD)
      let (identity, settings) = try Self.readSettings(root: root, rootFD: rootFD)
      cachedSettings = Mutex((identity, settings))
    } catch {
      for fd in opened { fd.close() }
      throw error
    }
    if configuration.createIfMissing { ensureReserve() }
    #if os(macOS)
      // Time Machine skips the store, as CACHEDIR.TAG makes tar, borg and restic do.
      var url = URL(fileURLWithPath: root, isDirectory: true)
      var values = URLResourceValues()
      values.isExcludedFromBackup = true
      try? url.setResourceValues(values)
    #endif
  }

  /// The index, opened on first use. A new index beside existing objects
  /// (first use, or the index was deleted or lost) is rebuilt from them.
  func index() throws(TroveError) -> Index {
    let opened: Result<(Index, Bool), TroveError> = openedIndex.withLock { slot in
      if let index = slot { return .success((index, false)) }
      do throws(TroveError) {
        let index = try Index(path: root + "/" + StoreLayout.index)
        slot = index
        return .success((index, index.isFresh))
      } catch {
        return .failure(error)
      }
    }
    let (index, isNew) = try opened.get()
    if isNew { _ = try rebuildIndex() }
    return index
  }

  deinit {
    tmpDirectory.close()
    objectsDirectory.close()
    rootDirectory.close()
  }

  /// `mkdir -p` with mode 0700 for every folder it creates.
  private static func makeDirectories(_ path: String) throws(SystemCallError) {
    var prefix = path.hasPrefix("/") ? "" : "."
    for component in path.split(separator: "/", omittingEmptySubsequences: true) {
      prefix += "/" + component
      do throws(SystemCallError) {
        _ = try Sys.call("mkdir") { mkdir(prefix, 0o700) }
      } catch  where error.errno == .fileExists {
        continue
      }
    }
  }

  /// Writes `bytes` to `name` in the root unless it exists: through a temp
  /// file and a rename that does not replace, so racing openers agree.
  private static func publishIfMissing(
    _ name: String, _ bytes: [UInt8], root: String, rootFD: FileDescriptor, tmpFD: FileDescriptor
  ) throws(TroveError) {
    if (try? rootFD.status(of: name)) != nil { return }
    let path = root + "/" + name
    let temp = StoreLayout.temporaryName("meta")
    try attempt("write", path, code: .storeUnavailable) { () throws(SystemCallError) in
      let fd = try FileDescriptor.open(
        temp, in: tmpFD, [.writeOnly, .create, .exclusive], permissions: 0o644)
      defer { fd.close() }
      do throws(SystemCallError) {
        try fd.writeAll(bytes)
        try fd.sync()
        try tmpFD.renameWithoutReplacing(temp, to: name, in: rootFD)
      } catch {
        try? tmpFD.removeFile(temp)
        if error.errno != .fileExists { throw error }
      }
    }
  }

  private static func readSettings(root: String, rootFD: FileDescriptor) throws(TroveError)
    -> (identity: [Int64], settings: StoreSettings)
  {
    let path = root + "/" + StoreLayout.settings
    let (identity, bytes) = try attempt("read", path, code: .storeUnavailable) {
      () throws(SystemCallError) -> ([Int64], [UInt8]) in
      let fd = try FileDescriptor.open(StoreLayout.settings, in: rootFD)
      defer { fd.close() }
      return (try fd.status().identity, try fd.readAll(limit: 64 * 1024))
    }
    return (identity, try StoreSettings.decode(bytes, path: path))
  }

  /// The store's settings as `config.json` now has them: one `fstatat`
  /// when no process changed them since they were last read.
  func currentSettings() throws(TroveError) -> StoreSettings {
    let identity = try? rootDirectory.status(of: StoreLayout.settings).identity
    if let identity,
      let cached = cachedSettings.withLock({ $0.identity == identity ? $0.settings : nil })
    {
      return cached
    }
    let fresh = try Self.readSettings(root: root, rootFD: rootDirectory)
    cachedSettings.withLock { $0 = fresh }
    return fresh.settings
  }

  /// What the store keeps and for how long, as `config.json` now says.
  public func policy() throws(TroveError) -> CachePolicy {
    try currentSettings().policy
  }

  /// Changes the persisted policy: reads the latest, applies `change`, and
  /// replaces `config.json` atomically (temp file, fsync, rename). Two
  /// processes changing it at once are serialized by a lock on the store's
  /// root; where locks are ignored, the later change wins whole — the file
  /// is never torn.
  /// - Returns: the policy now in force.
  @discardableResult
  public func updatePolicy(_ change: (inout CachePolicy) throws(TroveError) -> Void)
    throws(TroveError) -> CachePolicy
  {
    let path = root + "/" + StoreLayout.settings
    _ = try? rootDirectory.lock()
    defer { rootDirectory.unlock() }
    var settings = try Self.readSettings(root: root, rootFD: rootDirectory).settings
    try change(&settings.policy)
    let bytes = settings.encoded()
    let temp = StoreLayout.temporaryName("meta")
    try attempt("write", path) { () throws(SystemCallError) in
      let fd = try FileDescriptor.open(
        temp, in: tmpDirectory, [.writeOnly, .create, .exclusive], permissions: 0o644)
      defer { fd.close() }
      do throws(SystemCallError) {
        try fd.writeAll(bytes)
        try fd.sync()
        try tmpDirectory.rename(temp, to: StoreLayout.settings, in: rootDirectory)
        try rootDirectory.sync()
      } catch {
        try? tmpDirectory.removeFile(temp)
        throw error
      }
    }
    _ = try currentSettings()
    return settings.policy
  }

  // MARK: Looking up

  /// The absolute path of `digest`'s object file (whether or not it exists).
  func objectFilePath(_ digest: Digest, compressed: Bool = false) -> String {
    objectsPath + "/" + StoreLayout.objectPath(digest, compressed: compressed)
  }

  /// An object file found on disk.
  struct StoredObject {
    var status: FileStatus
    var isCompressed: Bool
  }

  /// `digest`'s object file, raw (preferred: it can be cloned) or
  /// compressed, or nil when there is neither. One `fstatat` for a raw
  /// object, two for a compressed one or a miss.
  func storedObject(_ digest: Digest) throws(TroveError) -> StoredObject? {
    for compressed in [false, true] {
      do throws(SystemCallError) {
        let status = try objectsDirectory.status(
          of: StoreLayout.objectPath(digest, compressed: compressed))
        return StoredObject(status: status, isCompressed: compressed)
      } catch  where error.errno == .noSuchFileOrDirectory {
        continue
      } catch {
        throw TroveError.system(
          error, "look up", path: objectFilePath(digest, compressed: compressed))
      }
    }
    return nil
  }

  /// Whether the store holds `digest`. One `fstatat`; the objects folder is
  /// the truth, not the index.
  public func contains(_ digest: Digest) throws(TroveError) -> Bool {
    guard try objectStatus(digest)?.isRegular ?? false else { return false }
    recordRead(digest)
    return true
  }

  /// Records a read of `digest` for LRU, coarsely: not when this process
  /// or the index saw one within the policy's access resolution, so most
  /// reads write nothing. A failure to record (a read-only store) never
  /// fails the read itself.
  func recordRead(_ digest: Digest) {
    let now = currentTimeNanoseconds()
    guard let policy = try? currentSettings().policy else { return }
    let resolution = policy.accessResolution * 1_000_000_000
    if resolution > 0,
      let last = recentReads.withLock({ $0[digest] }), now - last < resolution
    {
      return
    }
    guard (try? index().touch(digest, now: now, resolution: resolution)) != nil else { return }
    recentReads.withLock { reads in
      if reads.count > 4096 { reads.removeAll(keepingCapacity: true) }
      reads[digest] = now
    }
  }

  /// The status of `digest`'s object file, or nil when there is none.
  func objectStatus(_ digest: Digest) throws(TroveError) -> FileStatus? {
    try storedObject(digest)?.status
  }

  /// Counts a put of bytes the store already holds (and re-adds the row if
  /// the index had lost it).
  func recordDuplicate(_ digest: Digest, size: Int64) throws(TroveError) {
    let now = currentTimeNanoseconds()
    let object = try storedObject(digest)
    try index().recordDuplicate(
      Entry(
        digest: digest, size: size, allocatedBytes: object?.status.allocatedBytes ?? 0,
        created: now, lastAccess: now, isCompressed: object?.isCompressed ?? false,
        storedBytes: object?.status.size))
  }

  /// The path of `digest`'s object, for callers that only read it: zero
  /// copies. The file is read-only (0444) and must never be modified: it is
  /// the store's only copy of those bytes.
  ///
  /// An object stored compressed has no such file: this throws
  /// `.storedCompressed`, unless `decompressing` is true, in which case
  /// the object is rewritten raw in the store first (as `recompress` would
  /// with compression off) and its path returned.
  ///
  /// - Throws: `.notFound` when the store does not hold `digest`.
  public func path(for digest: Digest, decompressing: Bool = false) throws(TroveError) -> String {
    guard let object = try storedObject(digest), object.status.isRegular else {
      throw notFound(digest)
    }
    recordRead(digest)
    if object.isCompressed {
      guard decompressing else {
        throw TroveError(
          .storedCompressed,
          "object \(digest) is stored compressed (zstd) in '\(root)': it has no file to read in place; decompress it in the store, or get a copy",
          path: objectFilePath(digest, compressed: true), value: digest.description)
      }
      try restore(digest, compressed: false)
    }
    return objectFilePath(digest)
  }

  func notFound(_ digest: Digest) -> TroveError {
    // A row without its file is a miss; drop the row so totals stay true.
    _ = try? index().remove(digest)
    return TroveError(
      .notFound, "no object \(digest) in store '\(root)'", path: objectFilePath(digest),
      value: digest.description)
  }

  /// The index's record of `digest`, or nil if the store does not hold it.
  public func entry(for digest: Digest) throws(TroveError) -> Entry? {
    guard try objectStatus(digest) != nil else { return nil }
    return try index().entry(for: digest)
  }

  /// Every entry the index records, ordered by digest. O(n).
  public func entries() throws(TroveError) -> [Entry] {
    try index().entries()
  }

  // MARK: Removing

  /// Removes `digest`'s object: the index row first, then the file, so a
  /// crash between the two leaves an orphan file (which ``rebuildIndex()``
  /// adopts), never a row that points at nothing.
  ///
  /// A reader that already opened the object keeps reading correct bytes.
  /// - Returns: whether the store held it.
  @discardableResult
  public func remove(_ digest: Digest) throws(TroveError) -> Bool {
    let hadRow = try index().remove(digest)
    return try removeObjectFiles(digest) || hadRow
  }

  /// Unlinks `digest`'s object files, raw and compressed; whether there was one.
  /// With `recorded` (the form the index knows), that form is unlinked and
  /// the other is looked for only if it was missing: one `unlink` per
  /// object on the eviction path.
  func removeObjectFiles(_ digest: Digest, recorded: Bool? = nil) throws(TroveError) -> Bool {
    var removed = false
    let forms = recorded.map { [$0, !$0] } ?? [false, true]
    for compressed in forms {
      if removed && recorded != nil { break }
      do throws(SystemCallError) {
        try objectsDirectory.removeFile(StoreLayout.objectPath(digest, compressed: compressed))
        removed = true
      } catch  where error.errno == .noSuchFileOrDirectory {
        continue
      } catch {
        throw TroveError.system(
          error, "remove", path: objectFilePath(digest, compressed: compressed))
      }
    }
    return removed
  }

  // MARK: Named keys

  /// Points `key` (a URL, a package id, any text) at `digest`, replacing
  /// what it pointed at. The store must hold `digest`.
  public func bind(key: String, to digest: Digest) throws(TroveError) {
    guard try objectStatus(digest) != nil else { throw notFound(digest) }
    try index().bind(key: key, to: digest, at: currentTimeNanoseconds())
  }

  /// The digest `key` points at, if it is bound and its object is present.
  public func digest(forKey key: String) throws(TroveError) -> Digest? {
    guard let digest = try index().digest(forKey: key), try objectStatus(digest) != nil else {
      return nil
    }
    return digest
  }

  /// Removes `key`; whether it was bound. The object stays.
  @discardableResult
  public func unbind(key: String) throws(TroveError) -> Bool {
    try index().unbind(key: key)
  }
}
