#if canImport(Glibc)
  import Glibc
#endif

/// Who may read and write a store: the Linux counterpart of the seeds'
/// protection classes (one user's private data, or data a team shares).
///
/// The store's root folder says which, so that every process — whatever
/// its umask — makes new folders and files alike: a root with the setgid
/// bit and group read, write and search (`2770`) is shared by its group;
/// anything else is private to its owner.
public enum StoreAccess: String, Sendable, Hashable, Codable, CaseIterable {
  /// Only the owner: folders `0700`, files `0600`/`0644` inside them.
  case `private`
  /// The root folder's group: folders `2770` (setgid, so everything made
  /// in them belongs to the group; the staging folders also sticky,
  /// `3770`), files that every member writes (the index, locks, the
  /// journal) `0660`, part files and temp files `0600`, objects read-only
  /// `0444` and owned by whoever stored them. Members can read
  /// every object, store their own and evict any; Trove never writes or
  /// replaces an object file and none is writable, but members are trusted:
  /// one who can remove an object could put other bytes under its name by
  /// hand (copies and `verify: true` gets catch it). Anyone outside the
  /// group is refused by the root folder's mode.
  case group

  /// The mode of every folder in the store but the staging ones.
  var folderMode: mode_t { self == .group ? 0o2770 : 0o700 }
  /// The mode of the folders members stage files in, to be renamed later
  /// (`tmp/`, its staging folders, `partial/`): in a group store also
  /// sticky (`3770`), so that no member can rename or unlink, and so
  /// replace, another's file there.
  var stagingFolderMode: mode_t { self == .group ? 0o3770 : 0o700 }
  /// The mode of files any writer of the store opens to write (the index
  /// and its journal, locks, the references log).
  var sharedFileMode: mode_t { self == .group ? 0o660 : 0o644 }

  /// The access a root folder of `mode` gives.
  init(rootMode mode: UInt32) {
    self = mode & 0o2070 == 0o2070 ? .group : .private
  }
}

extension FileDescriptor {
  /// Creates folder `name` here for a store with `access`, and opens it
  /// (never through a symbolic link); one that exists is opened as it is.
  /// A folder made here gets exactly `access`'s mode (its staging mode when
  /// `staging`), whatever the umask. Returns it and whether it was made.
  func makeStoreFolder(_ name: String, access: StoreAccess, staging: Bool = false)
    throws(SystemCallError) -> (FileDescriptor, created: Bool)
  {
    let mode = staging ? access.stagingFolderMode : access.folderMode
    // Opened first: the folder is there but once, and this runs per fetch.
    if let folder = try? FileDescriptor.open(name, in: self, [.directory, .noFollow]) {
      return (folder, false)
    }
    var created = false
    do throws(SystemCallError) {
      try makeDirectory(name, permissions: mode)
      created = true
    } catch  where error.errno == .fileExists {}
    let folder = try FileDescriptor.open(name, in: self, [.directory, .noFollow])
    if created && access == .group {
      do throws(SystemCallError) {
        try folder.setPermissions(mode)
      } catch {
        folder.close()
        throw error
      }
    }
    return (folder, created)
  }

  /// Gives a file this process just created `access`'s shared-file mode
  /// (the umask may have taken group write away). Best effort: a file
  /// another user made keeps the mode they gave it.
  func shareForStore(_ access: StoreAccess) {
    guard access == .group else { return }
    try? setPermissions(access.sharedFileMode)
  }
}

extension Store {
  /// Opens the folder `name` in the root, creating it with the store's
  /// folder mode (its staging mode when `sticky`) when missing.
  func ensureFolder(_ name: String, sticky: Bool = false) throws(TroveError) -> FileDescriptor {
    try attempt("create store folder", root + "/" + name) {
      () throws(SystemCallError) -> FileDescriptor in
      try rootDirectory.makeStoreFolder(name, access: access, staging: sticky).0
    }
  }

  /// Gives the staging folders (`tmp/`, its staging folders, `partial/`)
  /// of a group store that this user owns their sticky mode
  /// (``StoreAccess/stagingFolderMode``), if they lack it: a store made
  /// before they were sticky gets it when its owner opens it to write, or
  /// on `verify --repair`. Only a folder's owner (or root) may change its
  /// mode; the others' stay as they are. Returns how many were changed.
  /// Best effort. O(staging folders).
  @discardableResult
  func makeStagingFoldersSticky() -> Int {
    guard access == .group, readOnlyReason == nil else { return 0 }
    let me = Sys.effectiveUserID
    var changed = 0
    func fix(_ folder: FileDescriptor) {
      guard let status = try? folder.status(), status.isDirectory,
        me == 0 || status.owner == me,
        status.mode & 0o7777 != access.stagingFolderMode
      else { return }
      if (try? folder.setPermissions(access.stagingFolderMode)) != nil { changed += 1 }
    }
    fix(tmpDirectory)
    for name in StoreLayout.stagingFolders {
      guard let folder = try? FileDescriptor.open(name, in: tmpDirectory, [.directory, .noFollow])
      else { continue }
      fix(folder)
      folder.close()
    }
    if let partial = try? FileDescriptor.open(
      StoreLayout.partial, in: rootDirectory, [.directory, .noFollow])
    {
      fix(partial)
      partial.close()
    }
    return changed
  }
}

extension FileDescriptor {
  /// Gives the file the owner `uid` and group `gid`. `fchown(2)`.
  func setOwner(_ uid: UInt32, _ gid: UInt32) throws(SystemCallError) {
    _ = try Sys.call("fchown") { fchown(rawValue, uid, gid) }
  }

  /// Gives `name` here the owner `uid` and group `gid`, never following a
  /// symbolic link. `fchownat(2)` with AT_SYMLINK_NOFOLLOW.
  func setOwner(of name: String, _ uid: UInt32, _ gid: UInt32) throws(SystemCallError) {
    _ = try Sys.call("fchownat") { fchownat(rawValue, name, uid, gid, AT_SYMLINK_NOFOLLOW) }
  }

  /// Gives the file the group `gid` (its owner stays). `fchown(2)`.
  func setGroup(_ gid: UInt32) throws(SystemCallError) {
    _ = try Sys.call("fchown") { fchown(rawValue, uid_t.max, gid) }
  }

  /// Gives `name` here the group `gid`, never following a symbolic link.
  /// `fchownat(2)` with AT_SYMLINK_NOFOLLOW.
  func setGroup(of name: String, _ gid: UInt32) throws(SystemCallError) {
    _ = try Sys.call("fchownat") {
      fchownat(rawValue, name, uid_t.max, gid, AT_SYMLINK_NOFOLLOW)
    }
  }
}

/// What ``Store/setAccess(_:)`` changed, and what it could not.
public struct AccessChange: Sendable, Hashable, Codable {
  /// The access the store has now.
  public var access: StoreAccess
  /// The group it is shared with (the root folder's), by number.
  public var groupID: UInt32
  /// Folders and files whose mode or group was set.
  public var changed = 0
  /// Those that could not be (another user's files: run as their owner,
  /// or as root), one line each for the first 20.
  public var failures: [String] = []
}

extension Store {
  /// Makes the store private to its owner, or shared with its root
  /// folder's group (`chgrp` the folder to the team's group first): sets
  /// the root folder's mode, then every folder's (`2770` or `0700`; the
  /// staging folders `tmp/`, its folders and `partial/` `3770` or `0700`)
  /// and group, the files every writer opens (the index, locks, the
  /// journal: `0660` or `0644`), and the group of every object (objects
  /// stay read-only, `0444`) and part file (each stays its owner's alone). Nothing is followed through a
  /// symbolic link. Files another user owns cannot be changed by this
  /// process: they are listed in the result. O(files in the store).
  ///
  /// This `Store` keeps the access it was opened with: open the store
  /// again to write with the new one.
  public func setAccess(_ access: StoreAccess) throws(TroveError) -> AccessChange {
    try requireWritable()
    let gid = try attempt("inspect store", root) { () throws(SystemCallError) -> UInt32 in
      try rootDirectory.status().group
    }
    var change = AccessChange(access: access, groupID: gid)
    // Root making a store private gives it whole to the root folder's
    // owner: a member's folder left theirs at 0700 would lock the owner out.
    let owner: UInt32? =
      access == .private && Sys.effectiveUserID == 0
      ? (try? rootDirectory.status().owner) : nil
    // Whether other users could write the index or the log until now.
    let journal = try? rootDirectory.status(of: StoreLayout.journal, followSymlinks: false)
    let wasShared =
      self.access == .group || othersMayWriteIndex(modesOnly: true) != nil
      || (journal.map { $0.mode & 0o022 != 0 } ?? false)
    try attempt("change access of", root) { () throws(SystemCallError) in
      try rootDirectory.setPermissions(access.folderMode)
    }
    change.changed += 1
    if access == .private, wasShared {
      // Other users could bind keys and append to the log until now: none
      // of that is this user's to sign, and nothing says whose each is.
      // The index goes to a new file first, out of reach of any process
      // that opened the old one; then every key in it is marked, and the
      // log rewritten from it. (The modes of what these write are set
      // below, with every other file's.)
      try objects.moveIndexToNewFile(access: access)
      try objects.markKeysPulled()
      let folder = try attempt("inspect store", root) { () throws(SystemCallError) in
        try rootDirectory.status()
      }
      try objects.rewriteJournal(
        access: access, owner: Sys.effectiveUserID == 0 ? (folder.owner, folder.group) : nil)
    }
    func note(_ path: String, _ error: SystemCallError) {
      if change.failures.count < 20 {
        change.failures.append(TroveError.system(error, "change access of", path: path).description)
      }
    }
    /// Walks `folder` (at `path`): sub-folders get the folder mode; files
    /// the shared mode when `shared` says so; all get the group.
    func walk(_ folder: FileDescriptor, _ path: String, shared: (String) -> Bool, depth: Int) {
      guard let names = try? folder.entries() else { return }
      for name in names {
        guard let status = try? folder.status(of: name, followSymlinks: false) else { continue }
        let here = path + "/" + name
        if status.isDirectory {
          guard depth > 0,
            let sub = try? FileDescriptor.open(name, in: folder, [.directory, .noFollow])
          else { continue }
          defer { sub.close() }
          do throws(SystemCallError) {
            if let owner { try sub.setOwner(owner, gid) } else { try sub.setGroup(gid) }
            try sub.setPermissions(access.folderMode)
            change.changed += 1
          } catch {
            note(here, error)
          }
          walk(sub, here, shared: shared, depth: depth - 1)
        } else if status.isRegular && shared(name) {
          do throws(SystemCallError) {
            let file = try FileDescriptor.open(
              name, in: folder, [.readOnly, .noFollow, .nonBlocking])
            defer { file.close() }
            if let owner { try file.setOwner(owner, gid) } else { try file.setGroup(gid) }
            try file.setPermissions(access.sharedFileMode)
            change.changed += 1
          } catch {
            note(here, error)
          }
        } else if status.isRegular {
          do throws(SystemCallError) {
            if let owner {
              try folder.setOwner(of: name, owner, gid)
            } else {
              try folder.setGroup(of: name, gid)
            }
            change.changed += 1
          } catch {
            note(here, error)
          }
        }
      }
    }
    let sharedAtRoot = Set(
      [StoreLayout.sweepLock, StoreLayout.journal, StoreLayout.index]
        + ObjectTable.indexCompanions.map { StoreLayout.index + $0 })
    func walkFolder(_ name: String, shared: Bool, staging: Bool = false) {
      guard let folder = try? FileDescriptor.open(name, in: rootDirectory, [.directory, .noFollow])
      else { return }
      defer { folder.close() }
      do throws(SystemCallError) {
        if let owner { try folder.setOwner(owner, gid) } else { try folder.setGroup(gid) }
        try folder.setPermissions(staging ? access.stagingFolderMode : access.folderMode)
        change.changed += 1
      } catch {
        note(root + "/" + name, error)
      }
      walk(folder, root + "/" + name, shared: { _ in shared }, depth: 2)
    }
    walk(rootDirectory, root, shared: { sharedAtRoot.contains($0) }, depth: 0)
    // Read by every user of the store, whatever umask made them.
    for name in [StoreLayout.settings, StoreLayout.cacheDirTag] {
      do throws(SystemCallError) {
        let file = try FileDescriptor.open(
          name, in: rootDirectory, [.readOnly, .noFollow, .nonBlocking])
        defer { file.close() }
        // Only a file that is this user's choice becomes one every member
        // reads: any other in its place (an object, a file the group may
        // write) would pass for this user's once given its mode
        // (``Store/rootFileRefusal(_:)``).
        let status = try file.status()
        guard Self.rootFileRefusal(status) == nil, status.owner == Sys.effectiveUserID,
          status.mode & 0o7777 != Self.rootFileMode
        else { continue }
        try file.setPermissions(Self.rootFileMode)
        change.changed += 1
      } catch {
        note(root + "/" + name, error)
      }
    }
    for name in [StoreLayout.objects, StoreLayout.tmp, StoreLayout.quarantine] {
      walkFolder(name, shared: false, staging: name == StoreLayout.tmp)
    }
    // A part becomes an object: it stays its owner's alone.
    walkFolder(StoreLayout.partial, shared: false, staging: true)
    walkFolder(StoreLayout.locks, shared: true)
    // The staging folders inside tmp/ (counted by the walk) are sticky too.
    for name in StoreLayout.stagingFolders {
      guard let folder = try? FileDescriptor.open(name, in: tmpDirectory, [.directory, .noFollow])
      else { continue }
      defer { folder.close() }
      do throws(SystemCallError) {
        try folder.setPermissions(access.stagingFolderMode)
      } catch {
        note(tmpPath + "/" + name, error)
      }
    }
    return change
  }
}
