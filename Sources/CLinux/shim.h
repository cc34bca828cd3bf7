// Linux calls that Swift cannot reach through Glibc: function-like ioctl
// macros (FICLONE, FS_IOC_FIEMAP) and syscalls that glibc only declares
// under _GNU_SOURCE (renameat2, copy_file_range). Wrappers only: every
// function returns what the kernel returned (-1 and errno on failure).
#ifndef TROVE_CLINUX_SHIM_H
#define TROVE_CLINUX_SHIM_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/fiemap.h>
#include <linux/fs.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#ifndef F_SETPIPE_SZ
#define F_SETPIPE_SZ 1031
#endif

/// O_PATH, which glibc declares only under _GNU_SOURCE.
static const int trove_o_path = 010000000;

/// FICLONE: make `dst` share all of `src`'s extents (copy-on-write).
static inline int trove_ficlone(int dst, int src) {
  return ioctl(dst, FICLONE, src);
}

/// FICLONERANGE: make `len` bytes of `dst` at `dst_off` share `src`'s
/// extents at `src_off` (copy-on-write). Offsets and length must be
/// block-aligned (the length may end at `src`'s end of file).
static inline int trove_clone_range(int dst, int src, uint64_t src_off,
                                    uint64_t len, uint64_t dst_off) {
  struct file_clone_range arg;
  arg.src_fd = src;
  arg.src_offset = src_off;
  arg.src_length = len;
  arg.dest_offset = dst_off;
  return ioctl(dst, FICLONERANGE, &arg);
}

/// FIDEDUPERANGE with one destination: asks the kernel to make `len`
/// bytes of `dst` at `dst_off` share `src`'s blocks at `src_off`, if (it
/// compares them itself, under lock) they hold the same bytes. Sets
/// `*deduped` to the bytes it shared and `*status` to
/// FILE_DEDUPE_RANGE_SAME (0), FILE_DEDUPE_RANGE_DIFFERS (1) or -errno.
static inline int trove_dedupe_range(int src, uint64_t src_off, uint64_t len,
                                     int dst, uint64_t dst_off,
                                     uint64_t *deduped, int32_t *status) {
  struct {
    struct file_dedupe_range range;
    struct file_dedupe_range_info info;
  } arg;
  memset(&arg, 0, sizeof arg);
  arg.range.src_offset = src_off;
  arg.range.src_length = len;
  arg.range.dest_count = 1;
  arg.info.dest_fd = dst;
  arg.info.dest_offset = dst_off;
  int r = ioctl(src, FIDEDUPERANGE, &arg.range);
  *deduped = arg.info.bytes_deduped;
  *status = arg.info.status;
  return r;
}

/// renameat2(2) with RENAME_NOREPLACE: fails with EEXIST instead of replacing.
static inline int trove_rename_noreplace(int olddirfd, const char *oldpath,
                                         int newdirfd, const char *newpath) {
  return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath,
                      RENAME_NOREPLACE);
}

/// fcntl(F_SETPIPE_SZ): resize a pipe's buffer; returns the size granted.
static inline int trove_set_pipe_size(int fd, int size) {
  return fcntl(fd, F_SETPIPE_SZ, size);
}

#ifndef F_OFD_SETLK
#define F_OFD_SETLK 37
#endif

/// fcntl(F_OFD_SETLK) on the whole file, without waiting: an exclusive
/// (write) or shared (read) open-file-description lock, or, with
/// `release`, none.
static inline int trove_ofd_lock(int fd, int exclusive, int release) {
  struct flock lock;
  memset(&lock, 0, sizeof lock);
  lock.l_type = release ? F_UNLCK : (exclusive ? F_WRLCK : F_RDLCK);
  lock.l_whence = SEEK_SET;
  return fcntl(fd, F_OFD_SETLK, &lock);
}

#ifndef F_OFD_GETLK
#define F_OFD_GETLK 36
#endif

#ifndef F_OFD_SETLKW
#define F_OFD_SETLKW 38
#endif

/// fcntl(F_OFD_SETLK or, with `wait`, F_OFD_SETLKW) on the one byte at
/// `offset`: an exclusive open-file-description lock, or, with `release`,
/// none.
static inline int trove_ofd_lock_byte(int fd, int64_t offset, int wait, int release) {
  struct flock lock;
  memset(&lock, 0, sizeof lock);
  lock.l_type = release ? F_UNLCK : F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = (off_t)offset;
  lock.l_len = 1;
  return fcntl(fd, wait && !release ? F_OFD_SETLKW : F_OFD_SETLK, &lock);
}

/// fcntl(F_OFD_GETLK) for the byte at `offset`: 1 when another open file
/// description holds a lock on it, 0 when none does, -1 on error.
static inline int trove_ofd_byte_is_locked(int fd, int64_t offset) {
  struct flock lock;
  memset(&lock, 0, sizeof lock);
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = (off_t)offset;
  lock.l_len = 1;
  if (fcntl(fd, F_OFD_GETLK, &lock) != 0) return -1;
  return lock.l_type != F_UNLCK;
}

/// sync_file_range(2) with SYNC_FILE_RANGE_WRITE: start writing back the
/// dirty pages of a range, without waiting for them.
static inline int trove_start_writeback(int fd, int64_t offset, int64_t length) {
  return (int)syscall(SYS_sync_file_range, fd, (off_t)offset, (off_t)length, 2);
}

/// syncfs(2): sync the whole filesystem that holds `fd`.
static inline int trove_syncfs(int fd) {
  return (int)syscall(SYS_syncfs, fd);
}

/// copy_file_range(2) at the files' current offsets.
static inline long trove_copy_file_range(int in, int out, size_t len) {
  return (long)syscall(SYS_copy_file_range, in, NULL, out, NULL, len, 0);
}

/// The filesystem magic of the filesystem holding `fd` (statfs f_type).
static inline long trove_fs_type(int fd, int *err) {
  struct statfs s;
  if (fstatfs(fd, &s) != 0) { *err = errno; return -1; }
  *err = 0;
  return (long)s.f_type;
}

/// Extent summary of a file from FS_IOC_FIEMAP.
typedef struct {
  uint64_t extents;        // extents mapped
  uint64_t shared_extents; // extents with FIEMAP_EXTENT_SHARED
  uint64_t shared_bytes;   // bytes in shared extents
  uint64_t mapped_bytes;   // bytes in all extents
} trove_extent_summary;

/// Walks every extent of `fd` with FS_IOC_FIEMAP (after syncing it, so
/// delayed allocations show). Returns 0, or -1 with errno set.
static inline int trove_fiemap_summary(int fd, trove_extent_summary *out) {
  enum { BATCH = 256 };
  size_t size = sizeof(struct fiemap) + BATCH * sizeof(struct fiemap_extent);
  struct fiemap *map = (struct fiemap *)calloc(1, size);
  if (!map) { errno = ENOMEM; return -1; }
  memset(out, 0, sizeof(*out));
  uint64_t start = 0;
  for (;;) {
    memset(map, 0, size);
    map->fm_start = start;
    map->fm_length = ~0ULL - start;
    map->fm_flags = FIEMAP_FLAG_SYNC;
    map->fm_extent_count = BATCH;
    if (ioctl(fd, FS_IOC_FIEMAP, map) != 0) { int e = errno; free(map); errno = e; return -1; }
    if (map->fm_mapped_extents == 0) break;
    int last = 0;
    for (unsigned i = 0; i < map->fm_mapped_extents; i++) {
      struct fiemap_extent *e = &map->fm_extents[i];
      out->extents++;
      out->mapped_bytes += e->fe_length;
      if (e->fe_flags & FIEMAP_EXTENT_SHARED) {
        out->shared_extents++;
        out->shared_bytes += e->fe_length;
      }
      if (e->fe_flags & FIEMAP_EXTENT_LAST) last = 1;
      start = e->fe_logical + e->fe_length;
    }
    if (last) break;
  }
  free(map);
  return 0;
}

/// One extent as FS_IOC_FIEMAP reports it.
typedef struct {
  uint64_t logical;  // offset in the file
  uint64_t physical; // offset on the device
  uint64_t length;
  uint32_t flags;    // FIEMAP_EXTENT_*
} trove_extent;

/// One FS_IOC_FIEMAP call from `start` to the end of the file: up to
/// `capacity` extents into `out`, their count into `*count` (0: nothing
/// mapped from `start`). With `sync`, FIEMAP_FLAG_SYNC: the file's dirty
/// pages are written back first. Returns 0, or -1 with errno set.
static inline int trove_fiemap_extents(int fd, uint64_t start, int sync,
                                       trove_extent *out, uint32_t capacity,
                                       uint32_t *count) {
  size_t size = sizeof(struct fiemap) + capacity * sizeof(struct fiemap_extent);
  struct fiemap *map = (struct fiemap *)calloc(1, size);
  if (!map) { errno = ENOMEM; return -1; }
  map->fm_start = start;
  map->fm_length = ~0ULL - start;
  map->fm_flags = sync ? FIEMAP_FLAG_SYNC : 0;
  map->fm_extent_count = capacity;
  if (ioctl(fd, FS_IOC_FIEMAP, map) != 0) { int e = errno; free(map); errno = e; return -1; }
  *count = map->fm_mapped_extents;
  for (uint32_t i = 0; i < map->fm_mapped_extents; i++) {
    out[i].logical = map->fm_extents[i].fe_logical;
    out[i].physical = map->fm_extents[i].fe_physical;
    out[i].length = map->fm_extents[i].fe_length;
    out[i].flags = map->fm_extents[i].fe_flags;
  }
  free(map);
  return 0;
}


/// XFS_IOC_FSGEOMETRY_V1's answer (xfs_fs.h, xfsprogs; the layout has not
/// changed since it was introduced).
struct trove_xfs_geometry_v1 {
  uint32_t blocksize, rtextsize, agblocks, agcount, logblocks, sectsize;
  uint32_t inodesize, imaxpct;
  uint64_t datablocks, rtblocks, rtextents, logstart;
  unsigned char uuid[16];
  uint32_t sunit, swidth;
  int32_t version;
  uint32_t flags, logsectsize, rtsectsize, dirblocksize;
};

/// ioctl(XFS_IOC_FSGEOMETRY_V1) on any file of an XFS filesystem: how many
/// low bits of an inode number count within its allocation group
/// (sb_agblklog + sb_inopblog), so that `inode >> bits` is the group; the
/// number of groups in `*groups`. -1 and errno on failure (ENOTTY off XFS).
static inline int trove_xfs_group_bits(int fd, uint32_t *groups) {
  struct trove_xfs_geometry_v1 g;
  memset(&g, 0, sizeof g);
  if (ioctl(fd, _IOR('X', 100, struct trove_xfs_geometry_v1), &g) < 0) return -1;
  if (g.agblocks == 0 || g.inodesize == 0 || g.blocksize < g.inodesize) {
    errno = EINVAL;
    return -1;
  }
  int agblklog = 0;
  while ((1ULL << agblklog) < g.agblocks) agblklog++;
  int inopblog = 0;
  while ((2U << inopblog) <= g.blocksize / g.inodesize) inopblog++;
  *groups = g.agcount;
  return agblklog + inopblog;
}

#endif
