import CLinux

#if canImport(Glibc)
  import Glibc
#endif

/// Hashing a clone-in put from the source's cached pages instead of the
/// clone's (which are never cached: the page cache is per inode), with a
/// proof that the bytes hashed are the bytes the clone holds. Without the
/// proof the clone itself is hashed, as before. The argument is in
/// Guarantees ("Hashing a clone from the page cache").
///
/// The proof, after the clone and the hash of the source:
/// - the store is on XFS, where every write to a shared extent is
///   copy-on-write;
/// - FIEMAP with FIEMAP_FLAG_SYNC on the source, taken after the hash,
///   writes its dirty pages back first; its extents over the source's
///   length are then those of the clone — the same offsets, physical
///   blocks and lengths, every one shared, none delayed, unwritten,
///   inline, encoded or of unknown place;
/// - the source's inode, device, length, mtime and ctime (with
///   nanoseconds) are those it had before the clone, and the bytes hashed
///   are its length, which is the clone's.
enum CachedHash {
  /// FIEMAP flags an extent may carry and still be proved: shared, last,
  /// merged (a report of several). Anything else (delayed allocation,
  /// unwritten, inline, encoded, unknown location) falls back.
  private static let provable =
    UInt32(FIEMAP_EXTENT_SHARED) | UInt32(FIEMAP_EXTENT_LAST) | UInt32(FIEMAP_EXTENT_MERGED)

  /// Hashes `source` (at offset 0, the whole file) into `hasher` and
  /// proves that the bytes hashed are those of `clone`, which was cloned
  /// from it after `before` was taken. Returns the bytes hashed, or why
  /// it could not be proved (then `hasher` must be thrown away).
  static func hash(
    _ source: FileDescriptor, clonedInto clone: FileDescriptor, before: FileStatus,
    into hasher: inout XXH3Hasher, progress: ByteProgress?
  ) -> Result<Int64, Refusal> {
    let cloneStatus: FileStatus
    do throws(SystemCallError) {
      let kind = try clone.filesystemKind()
      guard kind == .xfs else { return .failure(.filesystem(kind.description)) }
      cloneStatus = try clone.status()
    } catch {
      return .failure(.system(error))
    }
    guard cloneStatus.size == before.size else { return .failure(.sourceChanged("length")) }
    let hashed: Int64
    let sourceMap: [Extent]
    let cloneMap: [Extent]
    let after: FileStatus
    do throws(SystemCallError) {
      // One block past the length at most: a source that grew is refused below.
      hashed = try Transfer.read(
        from: source, stoppingAfter: before.size, sizeHint: before.size
      ) {
        hasher.update($0)
        progress?.add($0.count)
      }
      // After the hash, in this order: the source's dirty pages written
      // back (a write the hash saw has moved its range of the source to
      // new blocks by then), both maps, then the source's status.
      sourceMap = try source.extentMap(sync: true)
      cloneMap = try clone.extentMap(sync: false)
      after = try source.status()
    } catch {
      return .failure(.system(error))
    }
    guard hashed == before.size else { return .failure(.sourceChanged("bytes read")) }
    let length = UInt64(before.size)
    let ours = normalized(sourceMap, length: length)
    let theirs = normalized(cloneMap, length: length)
    for extent in ours + theirs where extent.flags & ~provable != 0 {
      return .failure(.unprovableExtent(extent.flags))
    }
    // A write that reached the disk moved its range of the source to new
    // blocks, its own: not the clone's, and no longer shared.
    guard ours.map(\.place) == theirs.map(\.place), ours.allSatisfy(\.isShared) else {
      return .failure(.extentsDiffer)
    }
    if let changed = Self.change(from: before, to: after) {
      return .failure(.sourceChanged(changed))
    }
    return .success(hashed)
  }

  /// What differs between two statuses of the source, if anything.
  static func change(from before: FileStatus, to after: FileStatus) -> String? {
    if before.device != after.device || before.inode != after.inode { return "inode" }
    if before.size != after.size { return "length" }
    if before.changeTime != after.changeTime { return "ctime" }
    if before.modificationTimeNanoseconds != after.modificationTimeNanoseconds { return "mtime" }
    return nil
  }

  /// `extents` within the first `length` bytes, cut at `length`, with
  /// neighbours that continue each other on the device (and carry the same
  /// flags) joined: two files mapping the same blocks compare equal however
  /// the filesystem split their records.
  static func normalized(_ extents: [Extent], length: UInt64) -> [Extent] {
    let ignored = UInt32(FIEMAP_EXTENT_LAST) | UInt32(FIEMAP_EXTENT_MERGED)
    var out: [Extent] = []
    for var e in extents where e.logical < length {
      e.length = min(e.length, length - e.logical)
      e.flags &= ~ignored
      if let last = out.last, last.flags == e.flags, last.logical + last.length == e.logical,
        last.physical + last.length == e.physical
      {
        out[out.count - 1].length += e.length
      } else {
        out.append(e)
      }
    }
    return out
  }

  /// Why a clone-in put hashed the clone instead of the source.
  enum Refusal: Error, Equatable, CustomStringConvertible {
    /// The store is not on XFS (named), whose copy-on-write the proof needs.
    case filesystem(String)
    /// A call failed (FIEMAP unsupported, a read error).
    case system(SystemCallError)
    /// The source's status changed between the clone and the end of the
    /// hash (which field), or its bytes did not match its length.
    case sourceChanged(String)
    /// An extent whose place or content cannot be compared (its flags).
    case unprovableExtent(UInt32)
    /// The source's blocks are no longer the clone's.
    case extentsDiffer

    var description: String {
      switch self {
      case .filesystem(let kind): return "not XFS (\(kind))"
      case .system(let error): return error.description
      case .sourceChanged(let what): return "the source changed (\(what))"
      case .unprovableExtent(let flags): return "an extent with flags 0x\(String(flags, radix: 16))"
      case .extentsDiffer: return "the source's extents are not the clone's"
      }
    }
  }

  /// How this store's clone-in puts in this process got their digests.
  struct Tally: Sendable {
    /// From the source's cached pages, proved.
    var fromSource = 0
    /// From the clone, because the proof failed.
    var fromClone = 0
    /// Why the last one that fell back did.
    var lastRefusal: Refusal?
  }
}

extension Extent {
  /// Where the extent is, without its flags.
  fileprivate var place: [UInt64] { [logical, physical, length] }
}
