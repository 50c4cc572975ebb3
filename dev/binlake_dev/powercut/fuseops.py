"""The FUSE side of the power-cut file system: libfuse 3's high-level API through mfusepy
(ctypes), every request turned into a ``PowerCutDisk`` call on the backing folder.

libfuse runs one request at a time (``-s``): the disk has no locks of its own, and the only
other thread, the control socket's, takes ``guard`` as every request does. Requests are cheap
(fsync is not passed to the backing disk), so one thread is no bottleneck.

What the kernel does itself, and why:

- Locks: neither ``lock`` nor ``flock`` is implemented and libfuse is told not to want them
  (``FUSE_CAP_POSIX_LOCKS``, ``FUSE_CAP_FLOCK_LOCKS``), so the kernel keeps POSIX (fcntl) and
  flock locks locally, as on any local file system: SQLite's locks and binlake's state lock
  work between the processes of the machine.
- The page cache: files are opened without direct_io, so mmap works (SQLite's WAL index, the
  -shm file, is a shared mapping), and with kernel_cache, so a file's pages stay cached across
  opens (every change passes through the kernel, so its cache stays true). The cache is not
  told about a cut; the mount is remounted after one instead (``PowerCutMount.remount``),
  which drops every cached page, name and attribute (direct_io would have cost mmap, and
  every read a round trip). Writes are written through (no writeback cache), so the daemon
  sees each write when it happens, at the offset the kernel chose (the end, for O_APPEND).
- Writes of up to 1 MiB per request (``max_write``, with the kernel's max_pages), and reads
  and writes copy their bytes once, straight between the kernel's buffer and the backing file.

After a cut the file system is dark: every request fails with EIO (the power is off) except
those that only close handles, until the test remounts.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import threading
from typing import Any

import mfusepy

from binlake_dev.powercut.disk import PowerCutDisk

FUSE_CAP_POSIX_LOCKS = 1 << 1
FUSE_CAP_FLOCK_LOCKS = 1 << 10
MAX_WRITE = 1 << 20
#: Requests served while the power is off: those that only let go of handles.
_DARK_OK = frozenset({"release", "releasedir", "flush", "destroy", "init_fuse_3"})
_NS = 1_000_000_000
_LIBC = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD = -100
_AT_SYMLINK_NOFOLLOW = 0x100
_STATVFS_FIELDS = (
    "f_bsize",
    "f_frsize",
    "f_blocks",
    "f_bfree",
    "f_bavail",
    "f_files",
    "f_ffree",
    "f_favail",
    "f_namemax",
)


class PowerCutOperations(mfusepy.Operations):  # type: ignore[misc]
    """mfusepy's operations on a ``PowerCutDisk``; paths are the mount's ("/" is the root)."""

    use_ns = True

    def __init__(self, disk: PowerCutDisk, guard: threading.Lock) -> None:
        self.disk = disk
        self.guard = guard
        self.powered = True

    def init_with_config(self, conn: Any, config: Any) -> None:
        conn.max_write = MAX_WRITE
        conn.max_readahead = MAX_WRITE
        conn.want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS)

    # -- attributes and names --------------------------------------------------------------

    def getattr(self, path: str | None, fh: int | None = None) -> os.stat_result:
        # Not called by libfuse: PowerCutFUSE.fgetattr fills the kernel's stat in place.
        return os.fstat(fh) if fh is not None else os.lstat(self.disk.backing(path or "/"))

    def readdir(self, path: str, fh: int) -> list[tuple[str, dict[str, int], int]]:
        # glibc skips entries whose inode is 0: each entry carries its own (use_ino).
        backing = self.disk.backing(path)
        own = {"st_ino": os.lstat(backing).st_ino, "st_mode": stat.S_IFDIR}
        found = [(".", own, 0), ("..", own, 0)]
        with os.scandir(backing) as entries:
            for entry in entries:
                mode = stat.S_IFDIR if entry.is_dir(follow_symlinks=False) else stat.S_IFREG
                if entry.is_symlink():
                    mode = stat.S_IFLNK
                found.append((entry.name, {"st_ino": entry.inode(), "st_mode": mode}, 0))
        return found

    def readlink(self, path: str) -> str:
        return os.readlink(self.disk.backing(path))

    def statfs(self, path: str) -> dict[str, int]:
        found = os.statvfs(self.disk.root)
        return {name: getattr(found, name) for name in _STATVFS_FIELDS}

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self.disk.backing(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self.disk.backing(path), uid, gid, follow_symlinks=False)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        # Not called by libfuse: PowerCutFUSE.utimens_fuse_3 passes the times on as they are.
        if times is None:
            os.utime(self.disk.backing(path), follow_symlinks=False)
        else:
            os.utime(self.disk.backing(path), ns=times, follow_symlinks=False)
        return 0

    # -- files -----------------------------------------------------------------------------

    def open(self, path: str, flags: int) -> int:
        return self.disk.open(path, flags)

    def create(self, path: str, mode: int, flags: int) -> int:
        return self.disk.create(path, flags, mode)

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        # Not called by libfuse: PowerCutFUSE.read reads into the kernel's buffer.
        return os.pread(fh, size, offset)

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        # Not called by libfuse: PowerCutFUSE.write writes from the kernel's buffer.
        return self.disk.write(fh, data, offset)

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        self.disk.truncate(path, length, fh)
        return 0

    def fallocate(self, path: str | None, mode: int, offset: int, size: int, fh: int) -> int:
        self.disk.fallocate(fh, mode, offset, size)
        return 0

    def flush(self, path: str | None, fh: int) -> int:
        return 0

    def release(self, path: str | None, fh: int) -> int:
        self.disk.release(fh)
        return 0

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        self.disk.fsync(fh)
        return 0

    # -- directory entries -----------------------------------------------------------------

    def mkdir(self, path: str, mode: int) -> int:
        self.disk.mkdir(path, mode)
        return 0

    def mknod(self, path: str, mode: int, device: int) -> int:
        self.disk.mknod(path, mode, device)
        return 0

    def symlink(self, path: str, contents: str) -> int:
        self.disk.symlink(path, contents)
        return 0

    def unlink(self, path: str) -> int:
        self.disk.unlink(path)
        return 0

    def rmdir(self, path: str) -> int:
        self.disk.rmdir(path)
        return 0

    def rename(self, old: str, new: str, flags: int = 0) -> int:
        self.disk.rename(old, new, flags)
        return 0

    def link(self, target: str, source: str) -> int:
        raise OSError(errno.EPERM, "hard links are not supported by the power-cut file system")

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        self.disk.fsyncdir(path or "/")
        return 0


class PowerCutFUSE(mfusepy.FUSE):  # type: ignore[misc]
    """mfusepy's FUSE with what the power cut needs: every request under the guard and dark
    after a cut, renameat2's flags passed on, ftruncate by handle, a cheaper create, and reads
    and writes that copy their bytes once (between the kernel's buffer and the backing file)."""

    def _wrapper(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        operations: PowerCutOperations = self.operations
        with operations.guard:
            if not operations.powered and func.__name__ not in _DARK_OK:
                return -errno.EIO
            return super()._wrapper(func, *args, **kwargs)

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        return int(self.operations.rename(os.fsdecode(old), os.fsdecode(new), flags))

    def create(self, path: bytes, mode: int, fip: Any) -> int:
        # mfusepy's own looks up the operation's signature at every call (80 us).
        info = fip.contents
        info.fh = self.operations.create(os.fsdecode(path), mode, info.flags)
        return 0

    def utimens_fuse_3(self, path: bytes | None, times: Any, fip: Any) -> int:
        # mfusepy's own turns UTIME_NOW and UTIME_OMIT (touch, Java's setLastModifiedTime) into
        # nonsense times: utimensat(2) takes the kernel's two timespecs as they are.
        operations: PowerCutOperations = self.operations
        if fip:
            done = _LIBC.futimens(fip.contents.fh, times)
        else:
            backing = os.fsencode(operations.disk.backing(os.fsdecode(path or b"/")))
            done = _LIBC.utimensat(_AT_FDCWD, backing, times, _AT_SYMLINK_NOFOLLOW)
        return 0 if done == 0 else -ctypes.get_errno()

    def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
        fh = fip.contents.fh if fip else None
        name = None if path is None else os.fsdecode(path)
        return int(self.operations.truncate(name, length, fh))

    def fgetattr(self, path: bytes | None, buf: Any, fip: Any) -> int:
        # mfusepy's own builds a dict and copies it field by field (twice the time).
        name = None if path is None else os.fsdecode(path)
        found = self.operations.getattr(name, fip.contents.fh if fip else None)
        into = buf.contents
        into.st_ino, into.st_mode, into.st_nlink = found.st_ino, found.st_mode, found.st_nlink
        into.st_uid, into.st_gid, into.st_rdev = found.st_uid, found.st_gid, found.st_rdev
        into.st_size, into.st_blksize = found.st_size, found.st_blksize
        into.st_blocks = found.st_blocks
        into.st_atimespec.tv_sec, into.st_atimespec.tv_nsec = divmod(found.st_atime_ns, _NS)
        into.st_mtimespec.tv_sec, into.st_mtimespec.tv_nsec = divmod(found.st_mtime_ns, _NS)
        into.st_ctimespec.tv_sec, into.st_ctimespec.tv_nsec = divmod(found.st_ctime_ns, _NS)
        return 0

    def read(self, path: bytes | None, buf: Any, size: int, offset: int, fip: Any) -> int:
        return os.preadv(fip.contents.fh, [_buffer(buf, size)], offset)

    def write(self, path: bytes | None, buf: Any, size: int, offset: int, fip: Any) -> int:
        operations: PowerCutOperations = self.operations
        return operations.disk.write(fip.contents.fh, _buffer(buf, size), offset)


def _buffer(pointer: Any, size: int) -> memoryview:
    """The kernel request's buffer at ``pointer`` as a memoryview, without a copy."""
    address = ctypes.cast(pointer, ctypes.c_void_p).value
    return memoryview((ctypes.c_char * size).from_address(address or 0)).cast("B")
