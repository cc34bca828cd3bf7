import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The lock a fetch holds while it talks to the server about one URL
/// (`locks/<k>.lock`, `flock`): N threads or processes fetching that URL
/// make one transfer; the others wait, then serve what it stored.
///
/// Nothing depends on the lock for correctness. Where `flock` does nothing
/// (some NFS and Lustre mounts grant it to everyone), a probe finds out
/// and the fetch writes a private temp file instead of the shared partial
/// file: at worst two downloads, each published by a no-replace rename,
/// never a mixed file.
final class FetchLock {
  private let file: FileDescriptor
  /// Whether the filesystem honours the lock: a second open of the file,
  /// which is another holder as far as `flock` is concerned, was refused.
  /// Only then may the shared partial file be used.
  let isHonoured: Bool

  /// Waits for the lock named `name`. The lock is honoured only on a
  /// local filesystem, where the kernel enforces `flock` for every process
  /// on the host; on a network filesystem (``FilesystemKind/isShared``),
  /// whose locks may reach this host alone, it is taken to save work but
  /// reported not honoured.
  /// Takes `locks/<name>.lock`, waiting for it.
  convenience init(store: Store, name: String) throws(TroveError) {
    // Never nil when waiting.
    try self.init(store: store, name: name, wait: true)!
  }

  /// Takes `locks/<name>.lock`; nil when another holder has it and
  /// `wait` is false.
  init?(store: Store, name: String, wait: Bool) throws(TroveError) {
    let folder = try store.ensureFolder(StoreLayout.locks)
    defer { folder.close() }
    let lockName = name + ".lock"
    let path = store.root + "/" + StoreLayout.locks + "/" + lockName
    var attempts = 0
    while true {
      attempts += 1
      let file = try attempt("open", path) { () throws(SystemCallError) in
        let file = try FileDescriptor.open(
          lockName, in: folder, [.readWrite, .create, .noFollow],
          permissions: store.access.sharedFileMode)
        file.shareForStore(store.access)
        return file
      }
      do throws(SystemCallError) {
        guard try file.lock(exclusive: true, wait: wait) else {
          file.close()
          return nil
        }
        // A sweep may have unlinked the file while this one waited: a lock
        // on a file no longer under the name excludes nobody. Start over.
        let held = try file.status()
        let named = try? folder.status(of: lockName, followSymlinks: false)
        guard let named, named.device == held.device, named.inode == held.inode else {
          // Closed by the catch below when giving up; here to try again.
          if attempts >= 100 { throw SystemCallError("flock", .noSuchFileOrDirectory) }
          file.close()
          continue
        }
        self.file = file
        isHonoured = try Self.honoured(store, lockName, in: folder)
        return
      } catch {
        file.close()
        throw TroveError.system(error, "lock", path: path)
      }
    }
  }

  deinit { file.close() }  // closing releases the lock

  /// Whether `flock` excludes under `locks/`, where `name` is locked: a
  /// second open of it is another holder, which must be refused. Asked
  /// once per store (its answer is the filesystem's), and never honoured
  /// on a network filesystem.
  private static func honoured(_ store: Store, _ name: String, in folder: FileDescriptor)
    throws(SystemCallError) -> Bool
  {
    guard !store.objects.filesystem.isShared else { return false }
    if store.fetchLocksHonoured.load(ordering: .acquiring) { return true }
    let probe = try FileDescriptor.open(name, in: folder, [.readWrite, .noFollow])
    defer { probe.close() }
    let refused = try !probe.lock(exclusive: true, wait: false)
    if refused { store.fetchLocksHonoured.store(true, ordering: .releasing) }
    return refused
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

  /// The name a URL's lock and partial file go by: its XXH3-128 hex.
  static func downloadName(_ url: String) -> String {
    XXH3Hasher.digest(Array(url.utf8)).hex
  }
}
