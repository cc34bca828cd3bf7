/// What removing one entry of a directory, and everything under it, did.
struct TreeRemoval {
  /// Whether the entry itself is gone (in a dry run: would go).
  var isRemoved = false
  /// Allocated bytes of what was removed (in a dry run: of the whole entry).
  var bytes: Int64 = 0
  /// The first thing that could not be removed: its path relative to the
  /// directory, and why. Removal goes on past it; the entry then stays.
  var failure: (path: String, error: SystemCallError)?
}

extension FileDescriptor {
  /// Removes `name` in this directory, whatever it is, never following a
  /// symbolic link: a file, a symbolic link (the link itself), a FIFO, a
  /// socket or a device node is unlinked, never opened; a directory is
  /// emptied the same way, then removed.
  ///
  /// Every directory is opened relative to its parent's descriptor with
  /// `O_DIRECTORY | O_NOFOLLOW`, never by path: one swapped for a link
  /// after it was looked at is refused (ELOOP, ENOTDIR), not followed.
  /// Nothing on another filesystem is touched (a mount point below is left,
  /// and its removal fails with EBUSY), and at most `depth` levels are
  /// opened (deeper, the removal fails with ENOTEMPTY). Entries that cannot
  /// be removed are passed over: everything else goes, and the first
  /// failure is reported. Something already gone (ENOENT) is not a failure.
  /// `fstatat(2)`, `openat(2)`, `unlinkat(2)`; O(entries in the tree).
  func removeTree(_ name: String, dryRun: Bool, depth: Int = 64) -> TreeRemoval {
    var result = TreeRemoval()
    let status: FileStatus
    do throws(SystemCallError) {
      status = try self.status(of: name, followSymlinks: false)
    } catch {
      if error.errno != .noSuchFileOrDirectory { result.failure = (name, error) }
      return result
    }
    if status.isDirectory {
      if depth > 0 { result = removeContents(of: name, status: status, dryRun: dryRun, depth) }
      if !dryRun {
        do throws(SystemCallError) {
          try removeDirectory(name)
        } catch  where error.errno == .noSuchFileOrDirectory {
          return result
        } catch {
          // An entry inside that stayed is the cause; else this is.
          if result.failure == nil { result.failure = (name, error) }
          return result
        }
      }
    } else if !dryRun {
      do throws(SystemCallError) {
        try removeFile(name)
      } catch  where error.errno == .noSuchFileOrDirectory {
        return result
      } catch {
        result.failure = (name, error)
        return result
      }
    }
    result.isRemoved = true
    result.bytes += status.allocatedBytes
    return result
  }

  /// Removes what is inside directory `name` (whose status is `status`),
  /// when it is on this directory's filesystem.
  private func removeContents(
    of name: String, status: FileStatus, dryRun: Bool, _ depth: Int
  ) -> TreeRemoval {
    var result = TreeRemoval()
    do throws(SystemCallError) {
      let child = try FileDescriptor.open(name, in: self, [.directory, .noFollow])
      defer { child.close() }
      let opened = try child.status()
      // Swapped for another directory since the look, or a mount point.
      guard opened.inode == status.inode, opened.device == status.device,
        try self.status().device == opened.device
      else { return result }
      for entry in try child.entries() {
        let inner = child.removeTree(entry, dryRun: dryRun, depth: depth - 1)
        result.bytes += inner.bytes
        if result.failure == nil, let failure = inner.failure {
          result.failure = (name + "/" + failure.path, failure.error)
        }
      }
    } catch {
      result.failure = (name, error)
    }
    return result
  }
}
