#if canImport(Glibc)
  import Glibc
#endif

/// What ``Store/diagnose(destination:)`` found about a store and a folder
/// files are got into: their filesystems, whether clones and hard links
/// work between them (probed with real files, removed afterwards), whether
/// file locks work in the store, its free space against `min-free`, the
/// index's journal mode, and whether the store is read-only — each as a
/// ``Check`` with advice where something is off.
public struct StoreDiagnosis: Sendable, Hashable, Codable {
  /// One finding.
  public struct Check: Sendable, Hashable, Codable {
    /// Whether the finding is as it should be.
    public enum Status: String, Sendable, Hashable, Codable {
      /// As it should be.
      case ok
      /// Something works less well than it could (gets copy instead of
      /// cloning, locks are not enforced, space is short, …).
      case warn
    }

    /// A short stable name: `store-filesystem`, `destination-filesystem`,
    /// `clone`, `shared-blocks`, `hardlink`, `locks`, `free-space`, `index-journal`,
    /// `writable`, and `remotes-owner` when another user's `remotes.json`
    /// configures the remotes, `signing-key-owner` when another user's
    /// `config.json` names the signing key.
    public var name: String
    /// Whether it is as it should be.
    public var status: Status
    /// What was found, in one line.
    public var detail: String
    /// What to change, in one line, when `status` is ``Status/warn``.
    @Nullable public var advice: String?
    /// What would fix it, for a program to say in its own words instead
    /// of ``advice``; not encoded.
    public var remedy: TroveError.Remedy?

    enum CodingKeys: String, CodingKey {
      case name, status, detail, advice
    }
  }

  /// The store's root folder.
  public var store: String
  /// The folder probed as the destination of gets.
  public var destination: String
  /// The store's filesystem (`xfs`, `ext4`, …).
  public var storeFilesystem: String
  /// The destination's filesystem.
  public var destinationFilesystem: String
  /// Whether the two are one filesystem (same device).
  public var sameFilesystem: Bool
  /// Whether an object can be cloned into the destination (probed).
  public var cloneSupported: Bool
  /// Whether an object can be hard-linked into the destination (probed).
  public var hardlinkSupported: Bool
  /// Whether `flock` and open-file-description locks exclude each other
  /// in the store, as its sweep lock and the index rely on (probed).
  public var locksWork: Bool
  /// Bytes free on the store's volume for this user.
  public var availableBytes: Int64
  /// The volume's size.
  public var totalBytes: Int64
  /// The free space `min-free` asks sweeps to keep, in bytes.
  public var minimumFreeBytes: Int64
  /// The index's journal mode (`wal`, `persist`), or nil when the index
  /// could not be opened.
  @Nullable public var journalMode: String?
  /// Why the store cannot be written, or nil when it can.
  @Nullable public var readOnlyReason: String?
  /// Every finding, in the order above.
  public var checks: [Check]

  /// Whether every check is ok.
  public var isHealthy: Bool { checks.allSatisfy { $0.status == .ok } }
}

extension Store {
  /// Diagnoses the store and `destination` (a folder gets write into).
  /// Probes with real files: a one-block temp file in the store's `tmp/`,
  /// cloned and hard-linked into `destination` and locked twice, every one
  /// removed afterwards. A read-only store is probed without writing: its
  /// devices compared, its `config.json` locked for reading. O(1).
  ///
  /// - Throws: ``TroveError`` when `destination` cannot be opened as a
  ///   folder, or the store's volume cannot be inspected.
  public func diagnose(destination: String) throws(TroveError) -> StoreDiagnosis {
    let folder = try attempt("open", destination, code: .destinationDirectoryMissing) {
      () throws(SystemCallError) in try FileDescriptor.open(destination, .directory)
    }
    defer { folder.close() }
    let (destinationKind, destinationDevice) = try attempt("inspect", destination) {
      () throws(SystemCallError) in (try folder.filesystemKind(), try folder.status().device)
    }
    let storeKind = objects.filesystem
    let same = destinationDevice == device
    var checks: [StoreDiagnosis.Check] = []
    func check(
      _ name: String, _ ok: Bool, _ detail: String, _ advice: String? = nil,
      remedy: TroveError.Remedy? = nil
    ) {
      checks.append(
        StoreDiagnosis.Check(
          name: name, status: ok ? .ok : .warn, detail: detail, advice: ok ? nil : advice,
          remedy: ok ? nil : remedy))
    }
    check(
      "store-filesystem", !storeKind.isShared, "'\(root)' is on \(storeKind)",
      "\(storeKind) is a network or user-space filesystem: the index relies on its server's locks, and objects cannot be cloned out; keep the store on a local disk"
    )
    check(
      "destination-filesystem", true,
      "'\(destination)' is on \(destinationKind)\(same ? ", the store's filesystem" : ", another filesystem than the store's")"
    )
    if let readOnlyReason {
      check(
        "writable", false, "read-only store: \(readOnlyReason)",
        "gets, listings and verify work; to store, pin or sweep, open it where it is writable (remount it read-write, or open another store)",
        remedy: .openWritable)
    } else {
      check("writable", true, "the store is writable")
    }
    if let foreign = remotesChosenByAnother() {
      check(
        "remotes-owner", false, foreign,
        "read and write its remotes only if you trust that user; otherwise remove them ('trove remote rm') and add your own"
      )
    }
    if let foreign = signingKeyRefusal() {
      check(
        "signing-key-owner", false, foreign + ": pushes that would sign stop",
        "set TROVE_SIGNING_KEY to a key file of your own, or 'trove config set signing-key FILE' with a key of your own (which makes config.json yours; its signing-key is not carried over)"
      )
    }

    let clone = probeClone(into: destination, readOnly: isReadOnly)
    let advice = cloneAdvice(
      store: storeKind, destination: destinationKind, at: destination, same: same)
    check(
      "clone", clone.isSupported,
      clone.isSupported
        ? "objects clone into '\(destination)' (\(storeKind) to \(destinationKind)): gets are instant and share blocks"
        : "objects cannot be cloned into '\(destination)': \(clone.reason ?? "unknown")",
      advice.text, remedy: advice.remedy)

    if let sharing = probeBlockSharing() {
      check(
        "shared-blocks", sharing.works,
        sharing.works
          ? "versions of large objects share the blocks of their unchanged chunks (\(storeKind))"
          : "versions of large objects cannot share disk blocks on \(storeKind): \(sharing.why); each version takes its whole size",
        "block sharing needs a filesystem with reflinks (XFS made with reflink=1, btrfs): put the store on one to store versions of large files for their changed bytes only"
      )
    }

    let link = probeHardLink(into: folder, same: same)
    check(
      "hardlink", link == nil,
      link == nil
        ? "objects can be hard-linked into '\(destination)'"
        : "objects cannot be hard-linked into '\(destination)': \(link!)",
      same
        ? "hard links need write access to both folders; gets that clone or copy work"
        : "hard links need one filesystem: put the store on the same filesystem as '\(destination)' to hard-link into it",
      remedy: same ? .anotherLinkMode : .sameFilesystem(path: destination))

    let locks = probeLocks()
    check(
      "locks", locks == nil,
      locks == nil
        ? "flock and open-file-description locks exclude each other in the store"
        : "file locks do not work in the store: \(locks!)",
      "the sweep lock and the index's transactions rely on file locks: keep the store on a local filesystem, or mount this one with working locks (NFSv4, or NFSv3 with lockd)"
    )

    let volume = try volumeSpace()
    let threshold =
      ((try? loadedSettings().policy) ?? CachePolicy.default).minimumFree.bytes(
        ofVolume: volume.total)
    check(
      "free-space", volume.available >= threshold,
      "\(CachePolicy.Quantities.formatSize(volume.available)) free of \(CachePolicy.Quantities.formatSize(volume.total)); min-free keeps \(CachePolicy.Quantities.formatSizeSetting(threshold))",
      "the volume is below min-free: sweeps evict to free space; free space on it, set a budget, or lower min-free",
      remedy: .freeSpace)

    var journalMode: String?
    do throws(TroveError) {
      let index = try index()
      journalMode = index.journalMode
      let detail =
        index.journalMode == "wal"
        ? "the index runs in WAL mode: readers never wait for the writer"
        : "the index uses a \(index.journalMode) rollback journal (a network filesystem, or blocks under 4 KiB): readers wait while one process writes"
      if index.isImmutable {
        check(
          "index-journal", false,
          "the index is read as an immutable file: SQLite cannot use its WAL or journal files on this read-only store",
          "open the store once where it is writable so that its shared memory is made"
        )
      } else {
        check(
          "index-journal", index.journalMode == "wal" || storeKind.isShared, detail,
          "a store on a small ext4 (blocks under 4 KiB) uses a rollback journal: put it on a filesystem with 4 KiB blocks for WAL mode"
        )
      }
    } catch {
      check(
        "index-journal", false, "the index cannot be opened: \(line(error))", "rebuild the index",
        remedy: .rebuildIndex)
    }

    return StoreDiagnosis(
      store: root, destination: destination, storeFilesystem: storeKind.description,
      destinationFilesystem: destinationKind.description, sameFilesystem: same,
      cloneSupported: clone.isSupported, hardlinkSupported: link == nil, locksWork: locks == nil,
      availableBytes: volume.available, totalBytes: volume.total, minimumFreeBytes: threshold,
      journalMode: journalMode, readOnlyReason: readOnlyReason, checks: checks)
  }

  /// Whether objects clone into `destination`: ``cloneSupport(to:)``'s
  /// probe; a read-only store has nothing to probe with.
  private func probeClone(into destination: String, readOnly: Bool) -> CloneSupport {
    guard !readOnly else {
      return CloneSupport(
        isSupported: false, storeFilesystem: "", destinationFilesystem: "",
        reason: "the store is read-only: nothing can be written beside it to clone")
    }
    do throws(TroveError) {
      return try cloneSupport(to: destination)
    } catch {
      return CloneSupport(
        isSupported: false, storeFilesystem: "", destinationFilesystem: "",
        reason: line(error))
    }
  }

  /// The advice when clones do not work between a store on `store` and a
  /// folder on `destination`.
  private func cloneAdvice(
    store: FilesystemKind, destination: FilesystemKind, at path: String, same: Bool
  ) -> (text: String, remedy: TroveError.Remedy?) {
    let cloning = ["xfs", "btrfs", "bcachefs", "zfs"]
    if isReadOnly {
      return ("a read-only store can only be copied from; gets copy", nil)
    }
    if same {
      return (
        "\(store) cannot clone here: put the store and your work folder on one XFS (mkfs.xfs -m reflink=1) or Btrfs to get clones; until then gets copy",
        nil
      )
    }
    if cloning.contains(destination.description) {
      return (
        "put the store on the same \(destination) as '\(path)' to get clones; until then gets copy",
        .sameFilesystem(path: path)
      )
    }
    return (
      "'\(path)' is on \(destination), which cannot clone: move the store and your work folder together onto one XFS (mkfs.xfs -m reflink=1) or Btrfs, or work in a folder on the store's \(store); until then gets copy",
      nil
    )
  }

  /// Hard-links a temp file of `tmp/` into `folder` and removes both; nil
  /// when it worked, else why not. A read-only store is judged by its
  /// device alone.
  /// Whether two files of `tmp/` with the same block share it when asked
  /// (`FIDEDUPERANGE`); nil for a read-only store, which shares nothing.
  private func probeBlockSharing() -> (works: Bool, why: String)? {
    guard !isReadOnly else { return nil }
    let names = [StoreLayout.temporaryName("probe"), StoreLayout.temporaryName("probe")]
    var files: [FileDescriptor] = []
    defer {
      for file in files { file.close() }
      for name in names { try? tmpDirectory.removeFile(name) }
    }
    do throws(SystemCallError) {
      let block = [UInt8](repeating: 0x5A, count: 4096)
      for name in names {
        let file = try FileDescriptor.open(
          name, in: tmpDirectory, [.readWrite, .create, .exclusive], permissions: 0o600)
        files.append(file)
        try file.writeAll(block)
        try file.sync()
      }
      let shared = try files[0].shareBlocks(4096, at: 0, with: files[1], at: 0)
      return shared == 4096
        ? (true, "") : (false, "the kernel shared \(shared) of 4096 equal bytes")
    } catch {
      return (false, error.description)
    }
  }

  private func probeHardLink(into folder: FileDescriptor, same: Bool) -> String? {
    guard !isReadOnly else {
      return same
        ? nil : "they are on different filesystems (a hard link never crosses one)"
    }
    let name = StoreLayout.temporaryName("probe")
    let linkName = ".trove-" + StoreLayout.temporaryName("probe")
    do throws(SystemCallError) {
      let file = try FileDescriptor.open(
        name, in: tmpDirectory, [.writeOnly, .create, .exclusive], permissions: 0o600)
      file.close()
      defer { try? tmpDirectory.removeFile(name) }
      try tmpDirectory.link(name, to: linkName, in: folder)
      try? folder.removeFile(linkName)
      return nil
    } catch {
      if error.errno == Errno(rawValue: EXDEV) {
        return "they are on different filesystems (a hard link never crosses one)"
      }
      return error.description
    }
  }

  /// Locks one file through two descriptors, as two processes would: an
  /// exclusive `flock` must keep out a second, and an open-file-description
  /// write lock a second (a temp file of `tmp/`, removed after; in a
  /// read-only store `config.json`, with read locks against a `flock`).
  /// Nil when the locks exclude each other, else what went wrong.
  private func probeLocks() -> String? {
    let name = isReadOnly ? StoreLayout.settings : StoreLayout.temporaryName("probe")
    do throws(SystemCallError) {
      let options: FileDescriptor.Options =
        isReadOnly ? [.readOnly, .noFollow] : [.readWrite, .create, .exclusive]
      let first = try FileDescriptor.open(
        name, in: isReadOnly ? rootDirectory : tmpDirectory, options, permissions: 0o600)
      defer {
        first.close()
        if !isReadOnly { try? tmpDirectory.removeFile(name) }
      }
      let second = try FileDescriptor.open(
        name, in: isReadOnly ? rootDirectory : tmpDirectory,
        isReadOnly ? [.readOnly, .noFollow] : [.readWrite, .noFollow])
      defer { second.close() }
      guard try first.lock(exclusive: true, wait: false) else {
        return "flock: a lock nobody holds was refused"
      }
      if try second.lock(exclusive: true, wait: false) {
        return "flock: two exclusive locks were both granted"
      }
      first.unlock()
      guard try first.lockRange(exclusive: !isReadOnly) else {
        return "fcntl(F_OFD_SETLK): a lock nobody holds was refused"
      }
      defer { first.unlockRange() }
      if !isReadOnly, try second.lockRange(exclusive: true) {
        return "fcntl(F_OFD_SETLK): two write locks were both granted"
      }
      return nil
    } catch {
      return error.description
    }
  }
}
