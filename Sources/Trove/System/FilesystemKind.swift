/// The kind of filesystem a file lives on, from `statfs`'s `f_type` magic.
public struct FilesystemKind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
  /// The `f_type` magic number.
  public let rawValue: Int

  /// Wraps an `f_type` magic number.
  public init(rawValue: Int) { self.rawValue = rawValue }

  private static let names: [Int: String] = [
    0x5846_5342: "xfs", 0x9123_683E: "btrfs", 0xEF53: "ext4", 0x0102_1994: "tmpfs",
    0x6969: "nfs", 0x794C_7630: "overlay", 0x2FC1_2FC1: "zfs", 0x6573_5546: "fuse",
    0xFF53_4D42: "cifs", 0xFE53_4D42: "smb2", 0x0102_1997: "9p", 0xF2F5_2010: "f2fs",
    0x5346_544E: "ntfs",
    0x00C3_6400: "ceph", 0x4D44: "vfat", 0x7366_746E: "ntfs3", 0xCA45_1A4E: "bcachefs",
    0x0BD0_0BD0: "lustre", 0x4750_4653: "gpfs",
  ]

  /// XFS.
  public static let xfs = FilesystemKind(rawValue: 0x5846_5342)
  /// NFS.
  public static let nfs = FilesystemKind(rawValue: 0x6969)
  /// CIFS (SMB 1).
  public static let cifs = FilesystemKind(rawValue: 0xFF53_4D42)
  /// SMB 2 and 3.
  public static let smb2 = FilesystemKind(rawValue: 0xFE53_4D42)

  /// FUSE (any filesystem in user space: sshfs, s3fs, …).
  public static let fuse = FilesystemKind(rawValue: 0x6573_5546)
  /// Plan 9 (9p): shared folders of VMs and containers.
  public static let plan9 = FilesystemKind(rawValue: 0x0102_1997)
  /// Ceph.
  public static let ceph = FilesystemKind(rawValue: 0x00C3_6400)
  /// Lustre.
  public static let lustre = FilesystemKind(rawValue: 0x0BD0_0BD0)
  /// IBM Spectrum Scale (GPFS).
  public static let gpfs = FilesystemKind(rawValue: 0x4750_4653)

  /// Whether files here may be shared with other hosts or served by a
  /// process (NFS, SMB, 9p, Ceph, FUSE, Lustre, GPFS): no shared memory
  /// between the processes that use them, and locks only as good as the
  /// server's (or, mounted with local locks, good on this host alone).
  public var isShared: Bool {
    [.nfs, .cifs, .smb2, .fuse, .plan9, .ceph, .lustre, .gpfs].contains(self)
  }

  /// A short name (`xfs`, `btrfs`, `ext4`, …) or the magic in hex.
  public var description: String {
    Self.names[rawValue] ?? "0x" + String(rawValue, radix: 16)
  }
}
