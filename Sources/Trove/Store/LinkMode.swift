/// How `Store.materialize(_:at:mode:replacing:durable:verify:)` makes a file from an object.
public enum LinkMode: String, Sendable, CaseIterable, Codable {
  /// Clone where the filesystems allow, else copy (the default): with
  /// `copy_file_range` onto NFS or SMB (the server copies), with a verified
  /// read/write copy elsewhere. The result says which happened, and why.
  case auto
  /// Clone (copy-on-write), or fail with `.cloneUnsupported` saying why.
  case clone
  /// A full byte copy that shares no extents, verified against the digest
  /// as it is made.
  case copy
  /// A hard link to the object itself: instant and free, but the file *is*
  /// the store's copy. It is read-only; a tool that makes it writable and
  /// edits it (or writes through it as root) corrupts the store for every
  /// other user of those bytes — the trap pnpm, ccache and uv users fell
  /// into. Opt in only for files nobody writes.
  case hardlink
}

/// How a materialization was actually done.
public enum MaterializeMethod: String, Sendable, Codable {
  /// FICLONE: the destination shares the object's extents, copy-on-write.
  case clone
  /// `copy_file_range` onto NFS or SMB: the server made the copy.
  case copyFileRange = "copy_file_range"
  /// Read and written through user space, verified against the digest.
  case copy
  /// A hard link to the object.
  case hardlink
  /// Decompressed from a zstd object, verified against the digest.
  case decompress
}

/// What a materialization did.
public struct Materialization: Sendable, Hashable, Codable {
  /// The object's digest.
  public var digest: BlobDigest
  /// Where the file now is.
  public var destination: String
  /// How it was made.
  public var method: MaterializeMethod
  /// Its size in bytes.
  public var size: Int64
  /// Why a clone was not made, when `method` is not `.clone` in `.auto`
  /// mode (e.g. "store on xfs, destination on ext4: Invalid cross-device
  /// link (ioctl(FICLONE), errno 18)"); nil otherwise.
  public var fallbackReason: String?
}
