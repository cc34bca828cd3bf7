import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The lock a fetch holds while it talks to the server about one URL: N
/// threads or processes fetching that URL make one transfer; the others
/// wait, then serve what it stored. It is one byte of the store's
/// `fetch.lock`, at an offset the URL's name gives, locked with an
/// open-file-description lock (`fcntl(F_OFD_SETLK)`): every URL shares the
/// one file, so a fetch creates no file to lock. Threads of one process
/// share the file's descriptor, and keep each other out through
/// ``FetchLocks``.
///
/// Nothing depends on the lock for correctness. Where the lock does
/// nothing (some network filesystems grant it to everyone) or cannot be
/// taken at all (the file cannot be opened), the fetch writes a private
/// temp file instead of the shared partial file: at worst two downloads,
/// each published by a no-replace rename, never a mixed file.
final class FetchLock {
  private let locks: FetchLocks
  private let offset: Int64
  /// The file whose byte is held; nil when only this process's threads
  /// are kept out (the file could not be locked).
  private let file: FetchLocks.File?
  /// Whether the filesystem honours the lock: a second descriptor of the
  /// file, which is another holder as far as the kernel is concerned, was
  /// refused the byte. Only then may the shared partial file be used.
  let isHonoured: Bool

  /// Takes the lock named `name`, waiting for it. The lock is honoured
  /// only on a local filesystem, where the kernel enforces it for every
  /// process on the host; on a network filesystem
  /// (``FilesystemKind/isShared``), whose locks may reach this host alone,
  /// it is taken to save work but reported not honoured.
  convenience init(store: Store, name: String) {
    // Never nil when waiting.
    self.init(store: store, name: name, wait: true)!
  }

  /// Takes the lock named `name`; nil when another holder has it and
  /// `wait` is false.
  init?(store: Store, name: String, wait: Bool) {
    let offset = FetchLocks.offset(of: name)
    guard let taken = store.fetchLocks.take(offset, store: store, wait: wait) else { return nil }
    locks = store.fetchLocks
    self.offset = offset
    file = taken.file
    isHonoured = taken.file.map { Self.honoured(store, $0, offset) } ?? false
  }

  deinit { locks.release(offset, on: file) }

  /// Whether the byte held at `offset` excludes others: a second
  /// descriptor of the file, another holder as far as the kernel is
  /// concerned, must be refused it. Asked once per store (its answer is
  /// the filesystem's), and never honoured on a network filesystem.
  private static func honoured(_ store: Store, _ file: FetchLocks.File, _ offset: Int64) -> Bool {
    guard !store.objects.filesystem.isShared else { return false }
    if store.fetchLocksHonoured.load(ordering: .acquiring) { return true }
    guard
      let probe = try? FileDescriptor.open(
        FetchLocks.path, in: store.rootDirectory, [.readWrite, .noFollow])
    else { return false }
    // Closing it drops only its own locks: they belong to its description.
    defer { probe.close() }
    let refused = (try? probe.lockByte(at: offset, wait: false)) == false
    if refused { store.fetchLocksHonoured.store(true, ordering: .releasing) }
    return refused
  }
}

/// A store's fetch locks in this process: which bytes of `fetch.lock` its
/// threads hold, and the file's one descriptor. A byte is held by the
/// descriptor's open file description, which all the process's threads
/// share, so the kernel keeps out other processes and this table keeps out
/// the other threads.
final class FetchLocks: @unchecked Sendable {
  /// `fetch.lock`, relative to the store's root.
  static let path = StoreLayout.fetchLock

  /// The lock file open. Each lock retains the one it was taken on: a file
  /// replaced under its name is closed once its last holder lets go.
  final class File: @unchecked Sendable {
    let descriptor: FileDescriptor
    let device: UInt64
    let inode: UInt64

    init(_ descriptor: FileDescriptor, _ status: FileStatus) {
      self.descriptor = descriptor
      device = status.device
      inode = status.inode
    }

    deinit { descriptor.close() }
  }

  /// A lock taken: on `file`'s byte, or (nil) in this process alone.
  struct Taken {
    let file: File?
  }

  private let condition = NSCondition()
  /// Offsets held by this process's threads (guarded by `condition`).
  private var held: Set<Int64> = []
  /// The process `held` and `current` are for: a forked child starts with
  /// none of its parent's locks, and opens its own description of the
  /// file (sharing its parent's would make the kernel take them for one).
  private var owner = getpid()
  /// The file as last opened (guarded by `condition`).
  private var current: File?
  /// Whether this process has said that the file cannot be locked.
  private var warned = false

  /// The byte of the lock named `name`: 62 bits of its XXH3-128, so two
  /// names share a byte once in 2^62 pairs (which only makes one wait).
  static func offset(of name: String) -> Int64 {
    Int64(truncatingIfNeeded: XXH3Hasher.digest(Array(name.utf8)).low & 0x3FFF_FFFF_FFFF_FFFF)
  }

  /// Takes the byte at `offset`: from this process's other threads, then
  /// from other processes. Nil when another holds it and `wait` is false.
  /// A file that cannot be opened or locked keeps out this process's
  /// threads alone, said once in a warning: the lock only saves work.
  func take(_ offset: Int64, store: Store, wait: Bool) -> Taken? {
    condition.lock()
    let me = getpid()
    if owner != me {
      owner = me
      held = []
      current = nil
    }
    while held.contains(offset) {
      guard wait else {
        condition.unlock()
        return nil
      }
      condition.wait()
    }
    held.insert(offset)
    condition.unlock()
    do throws(SystemCallError) {
      var attempts = 0
      while true {
        attempts += 1
        let file = try opened(store)
        guard try file.descriptor.lockByte(at: offset, wait: wait) else {
          giveBack(offset)
          return nil
        }
        // The file may have been removed and made again meanwhile: a byte
        // of a file no longer under the name excludes nobody. Take it
        // again on the file that is.
        var named: FileStatus?
        var failure = SystemCallError("fstatat", .noSuchFileOrDirectory)
        do throws(SystemCallError) {
          named = try store.rootDirectory.status(of: Self.path, followSymlinks: false)
        } catch {
          failure = error
        }
        if let named, named.device == file.device, named.inode == file.inode {
          return Taken(file: file)
        }
        file.descriptor.unlockByte(at: offset)
        forget(file)
        if attempts >= 100 { throw failure }
      }
    } catch {
      condition.lock()
      let first = !warned
      warned = true
      condition.unlock()
      if first {
        store.warn(
          "'\(store.root)/\(Self.path)': cannot lock (\(error)): fetches of one URL by several processes may each download it"
        )
      }
      return Taken(file: nil)
    }
  }

  /// Lets go of the byte at `offset` taken on `file` (nil: in this
  /// process alone).
  func release(_ offset: Int64, on file: File?) {
    file?.descriptor.unlockByte(at: offset)
    condition.lock()
    if owner == getpid() { held.remove(offset) }
    condition.broadcast()
    condition.unlock()
  }

  private func giveBack(_ offset: Int64) {
    condition.lock()
    held.remove(offset)
    condition.broadcast()
    condition.unlock()
  }

  /// The lock file, opened (and made, with the store's shared-file mode)
  /// on first use.
  private func opened(_ store: Store) throws(SystemCallError) -> File {
    condition.lock()
    defer { condition.unlock() }
    if let current { return current }
    let descriptor = try FileDescriptor.open(
      Self.path, in: store.rootDirectory, [.readWrite, .create, .noFollow],
      permissions: store.access.sharedFileMode)
    descriptor.shareForStore(store.access)
    let status: FileStatus
    do throws(SystemCallError) {
      status = try descriptor.status()
    } catch {
      descriptor.close()
      throw error
    }
    let file = File(descriptor, status)
    current = file
    return file
  }

  private func forget(_ file: File) {
    condition.lock()
    if current === file { current = nil }
    condition.unlock()
  }

  /// Whether a fetch holds the byte of the lock named `name` in `root`,
  /// asked without taking it (a dry run's question): false when the store
  /// has no lock file, so no fetch of this version holds any.
  static func isHeld(_ name: String, in root: FileDescriptor) -> Bool {
    guard let file = try? FileDescriptor.open(path, in: root, [.noFollow]) else { return false }
    defer { file.close() }
    return (try? file.byteIsLocked(at: offset(of: name))) ?? true
  }
}

extension Store {
  /// The name a URL's lock and partial file go by: its XXH3-128 hex.
  static func downloadName(_ url: String) -> String {
    XXH3Hasher.digest(Array(url.utf8)).hex
  }
}
