import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// A content-addressed store of blobs named by their XXH3-128 digest.
///
/// Open one with a ``StoreConfiguration``; put files, streams or bytes in
/// (`put(file:key:expectedSize:priority:onProgress:)`, ``makeWriter(key:expectedSize:priority:)``, `put(bytes:key:priority:)`); get them out as
/// copy-on-write clones or copies (`materialize(_:at:mode:replacing:durable:verify:)`),
/// read them in place (``path(for:decompressing:)``), list, remove, and count.
///
/// A `Store` is `Sendable` and safe to use from many threads at once, and
/// many processes may open the same root: every writer has its own
/// temporary file, and objects are published by a rename that never
/// replaces, so correctness never depends on a lock being honoured.
/// Single puts made by several threads at once are published together in
/// group commits, each returning once its own object is durable and
/// indexed (see <doc:Guarantees>).
public final class Store: Sendable {
  /// How this store was opened.
  public let configuration: StoreConfiguration
  /// The store's root folder.
  public var root: String { configuration.root }

  let rootDirectory: FileDescriptor
  /// Who may read and write the store, as its root folder's mode says.
  public let access: StoreAccess
  /// Why this process cannot write the store, learnt once when it was
  /// opened (its volume is mounted read-only, or its folder, `objects/`,
  /// `tmp/` or index is not writable by this user), or nil when it can.
  public let readOnlyReason: String?
  /// The one owner of every change to an object's state (and of the index).
  let objects: ObjectTable
  /// `st_dev` of `tmp/`: sources on this device can be cloned in.
  let device: UInt64
  /// The settings last read from `config.json`, with the file's identity:
  /// re-read when another process replaced it.
  private let cachedSettings: Mutex<SettingsRead>
  /// Reads this process recorded lately: digest (hex) → when (nanoseconds),
  /// so a hot object is not looked up in the index on every read. Keyed by
  /// text: a dictionary keyed by a type of Trove's costs a short command,
  /// at its first use, a scan of every protocol conformance in the binary.
  let recentReads = Mutex<[String: Int64]>([:])
  /// Hits and misses counted and not yet written to the index.
  let pendingCounts = Mutex(PendingAccessCounts())
  /// Remotes this process saw fail (``CircuitBreaker``).
  let processBreakers = Mutex(ProcessBreakers())
  let cloneProbe = CloneProbe()
  /// The fetch locks this process's threads hold (``FetchLock``).
  let fetchLocks = FetchLocks()
  /// Whether a fetch lock's probe found its lock honoured under `locks/`:
  /// the filesystem's answer, which the next locks need not ask again.
  let fetchLocksHonoured = Atomic<Bool>(false)
  /// How clone-in puts got their digests in this process (``CachedHash``).
  let cloneHashes = Mutex(CachedHash.Tally())
  /// The records this process notes what it uses in (most often none).
  let records: RecordKeeper
  /// Sends what puts and fetches store on to the writable remotes.
  let writeBack = WriteBack()
  /// Tells ``StoreConfiguration/trace`` of the store's decisions:
  /// `trace(.publish, "stored \(digest)", why: …, duration: …)`.
  let trace: Tracer

  var objectsDirectory: FileDescriptor { objects.objectsDirectory }
  var tmpDirectory: FileDescriptor { objects.tmpDirectory }
  var objectsPath: String { objects.objectsPath }
  var tmpPath: String { objects.tmpPath }

  /// Says `message` through ``StoreConfiguration/onWarning``.
  func warn(_ message: String) { configuration.onWarning?(message) }

  /// `error`'s one line as text the store composes for people (a warning,
  /// a report line): with its remedy in the program's words, when the
  /// program words them (``StoreConfiguration/remedyWording``).
  func line(_ error: TroveError) -> String {
    guard let remedy = error.remedy, let wording = configuration.remedyWording else {
      return error.description
    }
    return error.description + wording(remedy)
  }

  /// Whether this process cannot write the store (see ``readOnlyReason``).
  /// A read-only store is read as it is: its index opened read-only, no
  /// access recorded, nothing repaired, no ballast or leftover touched.
  /// What must write fails with `.readOnlyStore` (``requireWritable()``).
  public var isReadOnly: Bool { readOnlyReason != nil }

  /// Opens the store at `configuration.root`, creating it (mode 0700, or
  /// 2770 in a folder its group shares, an empty folder adopted set so;
  /// with `objects/`, `tmp/`, `CACHEDIR.TAG`, `config.json` and the index)
  /// when missing and allowed. Safe to race with other processes opening it.
  /// A store opened without creating it that is not there (no folder, or
  /// one without `config.json`) is `.storeMissing`, and nothing is made.
  ///
  /// - Throws: ``TroveError`` `.storeUnavailable` naming the path and the
  ///   failing call when the root cannot be created or opened,
  ///   `.unsupportedFormat` when a newer Trove wrote it.
  public init(_ configuration: StoreConfiguration = StoreConfiguration()) throws(TroveError) {
    self.configuration = configuration
    trace = Tracer(configuration.trace)
    let root = configuration.root
    guard !root.isEmpty else {
      throw TroveError(.storeUnavailable, "store path is empty", value: root)
    }
    if let name = configuration.recordName, !RecordKeeper.isValidName(name) {
      throw RecordKeeper.invalidName(name, source: "record name (TROVE_RECORD)")
    }
    // Most opens find the folder there: it is made only when it cannot be opened.
    let found = configuration.createIfMissing ? try? FileDescriptor.open(root, .directory) : nil
    if configuration.createIfMissing, found == nil {
      try attempt("create store", root, code: .storeUnavailable) { () throws(SystemCallError) in
        try Self.makeDirectories(root)
      }
    }
    let rootFD: FileDescriptor
    do throws(SystemCallError) {
      if let found { rootFD = found } else { rootFD = try FileDescriptor.open(root, .directory) }
    } catch  where error.errno == .noSuchFileOrDirectory && !configuration.createIfMissing {
      throw Self.missing(root)
    } catch {
      throw TroveError.system(error, "open store", path: root, code: .storeUnavailable)
    }
    var opened = [rootFD]
    do throws(TroveError) {
      let rootRefusal = Self.writeRefusal(of: rootFD, [".", StoreLayout.index])
      let creating = configuration.createIfMissing && rootRefusal == nil
      try Self.adopt(rootFD, root: root, creating: configuration.createIfMissing)
      let access = try attempt("inspect store", root, code: .storeUnavailable) {
        () throws(SystemCallError) in StoreAccess(rootMode: try rootFD.status().mode)
      }
      self.access = access
      for name in [StoreLayout.objects, StoreLayout.tmp] where creating {
        try attempt("create store folder", root + "/" + name, code: .storeUnavailable) {
          () throws(SystemCallError) in
          do throws(SystemCallError) {
            try rootFD.makeStoreFolder(name, access: access, staging: name == StoreLayout.tmp).0
              .close()
          } catch  where error.errno.meansNotAFolder {}  // said below, when it is opened
        }
      }
      let objectsFD = try Self.openFolder(StoreLayout.objects, in: rootFD, root: root)
      opened.append(objectsFD)
      let tmpFD = try Self.openFolder(StoreLayout.tmp, in: rootFD, root: root)
      opened.append(tmpFD)
      let refusal =
        rootRefusal ?? Self.writeRefusal(of: objectsFD, ["."]).map { ($0.0, StoreLayout.objects) }
        ?? Self.writeRefusal(of: tmpFD, ["."]).map { ($0.0, StoreLayout.tmp) }
      readOnlyReason = refusal.map { Self.readOnlyReason($0.0, $0.1, root: root) }
      device = try attempt("inspect store folder", root + "/tmp", code: .storeUnavailable) {
        () throws(SystemCallError) in try tmpFD.status().device
      }
      let filesystem = try attempt("inspect store", root, code: .storeUnavailable) {
        () throws(SystemCallError) in try rootFD.filesystemKind()
      }
      // SQLite opens the index by path, refusing a symbolic link anywhere
      // in it: the kernel's name for the folder opened has none.
      let resolvedRoot =
        (try? rootFD.resolvedPath()) ?? realpath(root, nil).map { resolved in
          defer { free(resolved) }
          return String(cString: resolved)
        } ?? root
      rootDirectory = rootFD
      objects = ObjectTable(
        root: root, rootDirectory: rootFD, objects: objectsFD, tmp: tmpFD, filesystem: filesystem,
        access: access, resolvedRoot: resolvedRoot, isReadOnly: readOnlyReason != nil,
        warn: configuration.onWarning ?? { _ in }, trace: trace,
        removalTuning: configuration.removalTuning)
      if readOnlyReason == nil {
        try Self.publishIfMissing(
          StoreLayout.cacheDirTag, Array(StoreLayout.cacheDirTagContents.utf8), root: root,
          in: rootFD, through: StoreLayout.temporaryName("meta"), in: tmpFD)
      }
      cachedSettings = Mutex(try Self.readSettings(root: root, rootFD: rootFD))
    } catch {
      for fd in opened { fd.close() }
      throw error
    }
    records = RecordKeeper(
      rootDirectory: rootFD, root: root, access: access, extra: configuration.recordName,
      isWritable: readOnlyReason == nil, warn: configuration.onWarning ?? { _ in })
    // A group store made before its staging folders were sticky.
    makeStagingFoldersSticky()
    if configuration.createIfMissing && readOnlyReason == nil {
      // What freeing space needs exists from the start: the sweep lock
      // (the index's WAL and shared memory persist once made), and the
      // ballast, released when the volume fills.
      if (try? rootDirectory.status(of: StoreLayout.sweepLock, followSymlinks: false)) == nil {
        (try? openOwnFile(StoreLayout.sweepLock))?.close()
      }
      ensureReserve()
    }
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
    try objects.index()
  }

  deinit {
    writeAccessCounts()
    objects.tmpDirectory.close()
    objects.objectsDirectory.close()
    rootDirectory.close()
  }

  /// The first of `names` (in `folder`) this process may not write, with
  /// the errno saying why; a name that does not exist is skipped.
  private static func writeRefusal(of folder: FileDescriptor, _ names: [String])
    -> (Errno, String)?
  {
    for name in names {
      if let errno = folder.writeRefusal(name), errno != .noSuchFileOrDirectory {
        return (errno, name)
      }
    }
    if (try? folder.isOnReadOnlyMount()) == true { return (.readOnlyFileSystem, ".") }
    return nil
  }

  /// Why a store is read-only, in words: `errno` refused writing `name`.
  private static func readOnlyReason(_ errno: Errno, _ name: String, root: String) -> String {
    if errno == .readOnlyFileSystem { return "its volume is mounted read-only" }
    let path = name == "." ? root : root + "/" + name
    return "'\(path)' is not writable by this user (uid \(Sys.effectiveUserID)): \(errno)"
  }

  /// Throws unless this process can write the store.
  ///
  /// - Throws: ``TroveError`` `.readOnlyStore`, one line naming the store
  ///   and why: `read-only store '/mnt/cache': its volume is mounted read-only`.
  public func requireWritable() throws(TroveError) {
    guard let readOnlyReason else { return }
    throw TroveError(
      .readOnlyStore, "read-only store '\(root)': \(readOnlyReason)", path: root)
  }

  /// `mkdir -p` with mode 0700 for every folder it creates.
  private static func makeDirectories(_ path: String) throws(SystemCallError) {
    var prefix = path.hasPrefix("/") ? "" : "."
    for component in path.split(separator: "/", omittingEmptySubsequences: true) {
      prefix.append("/")
      prefix.append(contentsOf: component)
      do throws(SystemCallError) {
        _ = try Sys.call("mkdir") { mkdir(prefix, 0o700) }
      } catch  where error.errno == .fileExists {
        continue
      }
    }
  }

  /// The error for a store that is not there, opened without creating it.
  private static func missing(_ root: String) -> TroveError {
    TroveError(
      .storeMissing, "no store at '\(root)': nothing was ever stored there", path: root)
  }

  /// Opens the store's folder `name`, never through a symbolic link.
  private static func openFolder(_ name: String, in rootFD: FileDescriptor, root: String)
    throws(TroveError) -> FileDescriptor
  {
    let path = root + "/" + name
    do throws(SystemCallError) {
      return try FileDescriptor.open(name, in: rootFD, [.directory, .noFollow])
    } catch  where error.errno.meansNotAFolder {
      throw TroveError(
        .storeUnavailable,
        "store folder '\(path)' is not a folder (a symbolic link or a file): Trove never follows links inside a store; remove it",
        path: path)
    } catch {
      throw TroveError.system(error, "open store folder", path: path, code: .storeUnavailable)
    }
  }

  /// Takes the folder as the store, or refuses it. A folder holding
  /// `config.json` (Trove's marker) is a store. One without it is taken
  /// only when it holds nothing but the temp file a creator writes its
  /// marker through — Trove would otherwise write its files (`reserve`,
  /// `sweep.lock`, the index) over, and sweep, whatever a mistyped
  /// `--store` points at — and only when `creating`: then the marker is
  /// written before anything else (a temp file in the root, a rename that
  /// does not replace, so racing creators agree). Without `creating`, a
  /// folder with no marker is `.storeMissing`, and nothing is made.
  private static func adopt(_ rootFD: FileDescriptor, root: String, creating: Bool)
    throws(TroveError)
  {
    if (try? rootFD.status(of: StoreLayout.settings, followSymlinks: false)) != nil { return }
    let names = try attempt("open store", root, code: .storeUnavailable) {
      () throws(SystemCallError) in try rootFD.entries()
    }
    // Another creator published the marker since it was looked for.
    if names.contains(StoreLayout.settings) { return }
    for name in names.sorted() {
      let isMarkerTemp = name.hasPrefix(".config-") && name.hasSuffix(".tmp")
      guard let status = try? rootFD.status(of: name, followSymlinks: false) else {
        // Gone since the listing: a creator's temp renamed into the marker.
        if isMarkerTemp { continue }
        throw TroveError(
          .storeUnavailable,
          "'\(root)' is not a Trove store: it holds '\(name)' and no \(StoreLayout.settings); name an empty or new folder",
          path: root)
      }
      guard status.isRegular, isMarkerTemp else {
        throw TroveError(
          .storeUnavailable,
          "'\(root)' is not a Trove store: it holds '\(name)' and no \(StoreLayout.settings); name an empty or new folder",
          path: root)
      }
    }
    guard creating else { throw missing(root) }
    // An existing folder taken as a store gets the mode its access says
    // (0700, or 2770 for a group's): the index and log made in it would
    // otherwise be as readable as the folder was. Another owner's folder
    // keeps its mode (only its owner may change it).
    if let mode = try? rootFD.status().mode {
      let access = StoreAccess(rootMode: mode)
      if mode & 0o7777 != access.folderMode { try? rootFD.setPermissions(access.folderMode) }
    }
    try publishIfMissing(
      StoreLayout.settings, StoreSettings.initial.encoded(), root: root, in: rootFD,
      through: "." + StoreLayout.temporaryName("config"), in: rootFD)
  }

  /// Writes `bytes` to `name` in `folder` unless it exists: through
  /// `temp` in `tempFolder` (``writeRootFile(_:through:in:publish:)``) and
  /// a rename that does not replace, so racing openers agree.
  private static func publishIfMissing(
    _ name: String, _ bytes: [UInt8], root: String, in folder: FileDescriptor,
    through temp: String, in tempFolder: FileDescriptor
  ) throws(TroveError) {
    if (try? folder.status(of: name, followSymlinks: false)) != nil { return }
    try attempt("write", root + "/" + name, code: .storeUnavailable) {
      () throws(SystemCallError) in
      do throws(SystemCallError) {
        try writeRootFile(bytes, through: temp, in: tempFolder) { () throws(SystemCallError) in
          try tempFolder.renameWithoutReplacing(temp, to: name, in: folder)
        }
      } catch  where error.errno == .fileExists {
        // Another opener published it first: theirs stands.
      }
    }
  }

  /// `config.json` as one read found it: its settings, and the status of
  /// the descriptor they were read from (whose owner and mode say whose
  /// choice they are, ``rootFileRefusal(_:)``).
  struct SettingsRead: Sendable {
    var identity: [Int64]
    var settings: StoreSettings
    var status: FileStatus
  }

  static func readSettings(root: String, rootFD: FileDescriptor) throws(TroveError)
    -> SettingsRead
  {
    let path = root + "/" + StoreLayout.settings
    let (status, bytes) = try attempt("read", path, code: .storeUnavailable) {
      () throws(SystemCallError) -> (FileStatus, [UInt8]) in
      let fd = try FileDescriptor.open(
        StoreLayout.settings, in: rootFD, [.readOnly, .noFollow, .nonBlocking])
      defer { fd.close() }
      let status = try fd.status()
      guard status.isRegular else { throw SystemCallError("open", .isDirectory) }
      return (status, try fd.readAll(limit: 64 * 1024))
    }
    return SettingsRead(
      identity: status.identity, settings: try StoreSettings.decode(bytes, path: path),
      status: status)
  }

  /// The store's settings as `config.json` now has them, problems and all:
  /// one `fstatat` when no process changed them since they were last read.
  func loadedSettings() throws(TroveError) -> StoreSettings {
    try settingsRead().settings.overriding(configuration.policyOverrides)
  }

  /// `config.json` as last read, read again unless one `fstatat` shows no
  /// process changed it since; its settings without overrides.
  func settingsRead() throws(TroveError) -> SettingsRead {
    let identity = try? rootDirectory.status(of: StoreLayout.settings, followSymlinks: false)
      .identity
    if let identity,
      let cached = cachedSettings.withLock({ $0.identity == identity ? $0 : nil })
    {
      return cached
    }
    let fresh = try Self.readSettings(root: root, rootFD: rootDirectory)
    cachedSettings.withLock { $0 = fresh }
    return fresh
  }

  /// The store's settings, for a decision that depends on them.
  ///
  /// - Throws: `.invalidConfig` naming `config.json`, the setting and its
  ///   value when one cannot be used: nothing decides on a default in its
  ///   place.
  func currentSettings() throws(TroveError) -> StoreSettings {
    try loadedSettings().checked(path: settingsPath)
  }

  /// The path of `config.json`.
  var settingsPath: String { root + "/" + StoreLayout.settings }

  // MARK: Looking up

  /// The absolute path of `digest`'s object file (whether or not it exists).
  func objectFilePath(_ digest: BlobDigest, compressed: Bool = false) -> String {
    objects.path(digest, compressed: compressed)
  }

  /// Whether the store holds `digest`: one `fstatat` of `objects/`, which
  /// is the truth, then the read is recorded for LRU (an index read; a
  /// write only when the recorded access is older than the policy's
  /// access resolution).
  public func contains(_ digest: BlobDigest) throws(TroveError) -> Bool {
    guard try objects.find(digest, confirmingMiss: true)?.status.isRegular ?? false else {
      return false
    }
    return recordRead(digest) == .kept
  }

  /// Records a read of `digest` for LRU, coarsely: not when this process
  /// or the index saw one within the policy's access resolution, so most
  /// reads write nothing. A file the index has no row for is adopted. A
  /// failure to record (a read-only store) never fails the read itself.
  /// Says ``ReadRecord/removed`` only when the object turned out to be
  /// going: an `rm` between its two steps, which this read finished.
  @discardableResult
  func recordRead(_ digest: BlobDigest) -> ReadRecord {
    if isReadOnly { return .kept }
    records.note(digest)
    let now = currentTimeNanoseconds()
    // A read needs no sound policy: an invalid access-resolution is taken
    // at its default here, and only here.
    guard let policy = try? loadedSettings().policy else { return .kept }
    let resolution = Int64.nanoseconds(fromSeconds: policy.accessResolution)
    if resolution > 0,
      let last = recentReads.withLock({ $0[digest.hex] }),
      now.subtractingSaturated(last) < resolution
    {
      return .kept
    }
    // Most reads need no record: a look that writes nothing tells, and the
    // index is opened for writing only when one is due.
    if resolution > 0, let recorded = objects.peekLastAccess(digest),
      now.subtractingSaturated(recorded) < resolution || now <= recorded
    {
      rememberRead(digest, at: recorded)
      return .kept
    }
    guard let index = try? index() else { return .kept }
    func record() -> AccessRecord? {
      try? index.read("record access to \(digest)") { (tx) throws(TroveError) in
        try tx.recordAccess(digest, now: now, resolution: resolution)
      }
    }
    var outcome = record()
    if case .noRow = outcome {
      // An orphan (a put killed after its rename, an eviction half done):
      // adopt it, and record this read. An `rm` half done is finished.
      if let report = try? objects.reconcile(digest), report.removalsFinished > 0 {
        return .removed
      }
      outcome = record()
    }
    // Remember when the index says the last access was, not when this read
    // happened: the LRU order stays exact to within one resolution.
    let seen: Int64
    switch outcome {
    case .recent(let recorded)?: seen = recorded
    case .recorded?: seen = now
    case .noRow?, nil: return .kept
    }
    rememberRead(digest, at: seen)
    return .kept
  }

  /// Remembers that the index has `digest`'s last access at `time`.
  private func rememberRead(_ digest: BlobDigest, at time: Int64) {
    recentReads.withLock { reads in
      if reads.count > 4096 { reads.removeAll(keepingCapacity: true) }
      reads[digest.hex] = time
    }
  }

  /// What recording a read found of its object.
  enum ReadRecord {
    /// It stays (the read was recorded, or needed no record).
    case kept
    /// It was being removed (an `rm` between its steps), which the read finished.
    case removed
  }

  /// The path of `digest`'s object, for callers that only read it: zero
  /// copies. The file is read-only (0444) and must never be modified: it is
  /// the store's only copy of those bytes. It can be evicted like any
  /// object; pin it (``pin(_:name:for:)``, a lease) for as long as you
  /// read through the path.
  ///
  /// An object stored compressed has no such file: this throws
  /// `.storedCompressed`, unless `decompressing` is true, in which case
  /// the object is rewritten raw in the store first (as `recompress` would
  /// with compression off) and its path returned.
  ///
  /// - Throws: `.notFound` when the store does not hold `digest`.
  public func path(for digest: BlobDigest, decompressing: Bool = false) throws(TroveError) -> String
  {
    var found = try objects.find(digest, confirmingMiss: true)
    if found == nil, readThrough(digest) { found = try objects.find(digest, confirmingMiss: true) }
    guard let object = found, object.status.isRegular, recordRead(digest) == .kept else {
      throw notFound(digest)
    }
    if object.isCompressed {
      guard decompressing else {
        throw TroveError(
          .storedCompressed,
          "object \(digest) is stored compressed (zstd) in '\(root)': it has no file to read in place; decompress it in the store, or get a copy",
          path: objectFilePath(digest, compressed: true), value: digest.description)
      }
      try convert(digest, compressed: false)
      guard try objects.find(digest, confirmingMiss: true)?.isCompressed == false else {
        throw notFound(digest)
      }
    }
    return objectFilePath(digest)
  }

  /// The error for a digest whose object is not there. The look that
  /// missed (``ObjectTable/find(_:confirmingMiss:)``, ``ObjectTable/open(_:confirmingMiss:)``) has
  /// already dropped a row left without its file, inside a transaction that
  /// confirmed the file missing: a read never deletes what a writer is
  /// publishing.
  func notFound(_ digest: BlobDigest) -> TroveError {
    objects.notFound(digest)
  }

  /// The index's record of `digest`, or nil if the store does not hold it.
  public func entry(for digest: BlobDigest) throws(TroveError) -> StoreEntry? {
    guard try objects.find(digest, confirmingMiss: true) != nil else { return nil }
    return try index().read("look up \(digest)") { (tx) throws(TroveError) in
      try tx.entry(for: digest)
    }
  }

  /// Every entry the index records, ordered by digest. O(n).
  public func entries() throws(TroveError) -> [StoreEntry] {
    try index().read("list entries") { (tx) throws(TroveError) in try tx.entries() }
  }

  // MARK: Removing

  /// Removes `digest`'s object — its row, pins and keys, then its files,
  /// in the two index transactions every removal takes — whether or not it
  /// is pinned. Only a put of the same bytes meanwhile brings it back.
  ///
  /// A reader that already opened the object keeps reading correct bytes;
  /// files made from it earlier (clones, copies, hard links) stay.
  /// - Returns: whether the store held it.
  @discardableResult
  public func remove(_ digest: BlobDigest) throws(TroveError) -> Bool {
    try requireWritable()
    let started = trace.now
    let removed = try objects.drop(digest)
    trace(
      .remove, removed ? "removed \(digest)" : "not removed \(digest)",
      why: removed ? "asked to remove it" : "asked to remove it, and the store does not hold it",
      duration: trace.elapsed(since: started))
    if removed { restoreReserve() }
    return removed
  }

  /// Removes the objects of `digests` as ``remove(_:)`` does, in batches
  /// of up to 131,072, each in parts of 8,192, two parts to a durable index
  /// transaction: the files of one part are unlinked while the next
  /// part's are looked up, then the next part's rows are removed and its
  /// removals recorded.
  /// A digest given twice is removed once (the second is not there).
  ///
  /// - Returns: for each digest, in order, whether the store held it.
  /// - Throws: the first object whose file could not be unlinked (that
  ///   object is kept; the others are removed all the same), after every
  ///   batch was done; or what stopped a batch (an index that cannot be
  ///   written), with the batches before it done.
  @discardableResult
  public func remove(_ digests: [BlobDigest]) throws(TroveError) -> [Bool] {
    try requireWritable()
    var results = [Bool](repeating: false, count: digests.count)
    var seen = Set<BlobDigest>()
    let firsts = digests.indices.filter { seen.insert(digests[$0]).inserted }
    var failure: TroveError?
    for start in stride(from: 0, to: firsts.count, by: Self.sweepBatch) {
      let positions = Array(firsts[start..<min(start + Self.sweepBatch, firsts.count)])
      let started = trace.now
      let (present, failures) = try objects.drop(positions.map { digests[$0] })
      for (position, held) in zip(positions, present) {
        results[position] = held
        trace(
          .remove, held ? "removed \(digests[position])" : "not removed \(digests[position])",
          why: held ? "asked to remove it" : "asked to remove it, and the store does not hold it")
      }
      trace(
        .remove, "removed \(present.filter { $0 }.count) of \(positions.count) objects asked for",
        why: "asked to remove them", duration: trace.elapsed(since: started))
      failure = failure ?? failures.first
    }
    if results.contains(true) { restoreReserve() }
    if let failure { throw failure }
    return results
  }

  // MARK: Named keys

  /// Points `key` (a URL, a package id, any text) at `digest`, replacing
  /// what it pointed at. The store must hold `digest`; the key goes when
  /// the object does.
  ///
  /// - Throws: `.notFound` when the store does not hold `digest`.
  public func bind(key: String, to digest: BlobDigest) throws(TroveError) {
    try requireWritable()
    try objects.bind(key: key, to: digest)
    records.note(digest, key: key)
  }

  /// The digest `key` points at, if it is bound and its object is
  /// present, looked up as `lookup` says: with ``KeyLookup/use`` (the
  /// default) the key is being used, and a record on notes the key and its
  /// digest (``startRecord(_:)``); with ``KeyLookup/readThrough``, a key
  /// the store does not have is read through its remotes' key records
  /// first (``pullKey(_:)``). An empty `lookup` only looks.
  public func digest(forKey key: String, _ lookup: KeyLookup = .use) throws(TroveError)
    -> BlobDigest?
  {
    var bound = try binding(forKey: key)?.digest
    if bound == nil, lookup.contains(.readThrough), pullKey(key) {
      bound = try binding(forKey: key)?.digest
    }
    guard let digest = bound else { return nil }
    if lookup.contains(.use) { records.note(digest, key: key) }
    return digest
  }

  /// `key`'s binding, with what the fetch that bound it learnt (validators,
  /// freshness), if it is bound and its object is present.
  public func binding(forKey key: String) throws(TroveError) -> KeyBinding? {
    let bound = try index().read("look up key '\(key)'") { (tx) throws(TroveError) in
      try tx.binding(forKey: key)
    }
    guard let bound, try isPresent(bound.digest) else { return nil }
    return bound
  }

  /// The object `checksum` names, if the store holds it: an `xxh128:`
  /// checksum is a digest; a `sha256:` or `sha512:` one names the object a
  /// fetch verified it against (``FetchRequest/expected``).
  public func digest(for checksum: Checksum) throws(TroveError) -> BlobDigest? {
    let named = try index().read("look up \(checksum)") { (tx) throws(TroveError) in
      try tx.digest(for: checksum)
    }
    guard let named, try isPresent(named) else { return nil }
    return named
  }

  /// Whether `digest`'s object is there. One that is gone (a crash between
  /// its removal's steps) takes its row, keys and checksums with it.
  private func isPresent(_ digest: BlobDigest) throws(TroveError) -> Bool {
    guard try objects.find(digest, confirmingMiss: true) != nil else {
      _ = try? objects.reconcile(digest)
      return false
    }
    return true
  }

  /// Every key and the digest it names, ordered by key. O(keys). A key goes
  /// when its object does, so each names an object the store holds (or one
  /// removed behind its back, which ``digest(forKey:_:)`` finds missing).
  public func keys() throws(TroveError) -> [KeyBinding] {
    try index().read("list keys") { (tx) throws(TroveError) in try tx.keys() }
  }

  /// Removes `key`; whether it was bound. The object stays.
  @discardableResult
  public func unbind(key: String) throws(TroveError) -> Bool {
    try requireWritable()
    return try objects.unbind(key: key)
  }
}
