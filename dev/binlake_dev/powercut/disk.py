"""The backing folder as a disk that loses power: every change is done on the folder at once and
remembered until it is durable, so that ``cut`` can put the folder back to its durable state.

The rules (POSIX's promises, read strictly):

- A file's data (its bytes and its size) is durable once the file is fsynced (fsync or
  fdatasync: both count; a write through a handle opened with O_SYNC or O_DSYNC is durable at
  once). A cut puts every other file back to its content at its last fsync: bytes appended
  since are dropped, bytes overwritten or truncated away are put back (``UnsyncedData``).
- A directory entry (create, mkdir, symlink, unlink, rmdir, rename) is durable once its
  directory is fsynced; a cut undoes the others, newest first (``EntryLog``). A file whose
  creation was never made durable disappears at a cut even if its data was fsynced, and a
  rename over an existing file that was not made durable brings the old file back.
- With a tear (512 or 4096), the newest write still unsynced at the cut keeps a prefix that
  ends on a multiple of the tear size within it (chosen at random), and loses the rest: the
  sectors or pages that reached the disk when the power went. A write here is a sequential
  run of write requests to one file, each starting where the one before ended (the kernel
  splits one write(2) into requests at page boundaries; appends since the last fsync follow
  each other). A write that fits in one block has no such prefix and is lost whole. Earlier
  unsynced writes to the same file are lost as usual, so after a write that did not follow
  them the kept prefix may come after a gap that reads as zeros (as after a crash of a file
  system that wrote the size but not the data before it).

Not modelled: a cut that keeps some unsynced changes and loses others (writes that reached
the disk before the power went, in any order): a cut loses everything unsynced, the tear
aside; reordering of synced writes, or a disk's write cache that loses them; inode metadata
(mode, owner, times) is not reverted; hard links are not supported (special files, such as a
server's Unix socket, are entries like any other). The backing folder is never fsynced:
durability here is the model's, not the machine's (which does not lose power), so fsync
costs no disk flush.
"""

from __future__ import annotations

import errno
import os
import random
from dataclasses import dataclass

from binlake_dev.powercut.entries import EntryLog, Graveyard
from binlake_dev.powercut.reports import CutReport, Stats, TornWrite
from binlake_dev.powercut.unsynced import UnsyncedData

#: Open flags not passed to the backing file: creation and truncation are done (and logged)
#: apart, every write goes where the kernel says (it places an O_APPEND write at the end
#: itself, and pwrite on an O_APPEND descriptor would ignore the offset), and the backing file
#: needs no durability or alignment of its own.
_NOT_PASSED = (
    os.O_CREAT | os.O_EXCL | os.O_TRUNC | os.O_APPEND | os.O_DIRECT | os.O_SYNC | os.O_DSYNC
)
TEAR_SIZES = (512, 4096)
RENAME_NOREPLACE = 1


@dataclass(slots=True)
class _Handle:
    """An open file: its inode, its name when opened, and whether its writes are durable at
    once (O_SYNC, O_DSYNC)."""

    ino: int
    path: str
    sync: bool


class PowerCutDisk:
    """A passthrough over ``root`` that remembers what is not durable (see the module doc);
    removed entries wait in ``graveyard`` (a folder on the same file system, outside ``root``).
    Paths are the mount's: "/" is ``root``. File handles are the backing descriptors."""

    def __init__(self, root: str, graveyard: str) -> None:
        self.root = os.path.realpath(root)
        self._entries = EntryLog(Graveyard(graveyard))
        self._unsynced: dict[int, UnsyncedData] = {}
        self._handles: dict[int, _Handle] = {}
        self._writes = 0

    def backing(self, path: str) -> str:
        """The backing path of the mount's ``path``."""
        return self.root if path == "/" else self.root + path

    # -- files -----------------------------------------------------------------------------

    def open(self, path: str, flags: int) -> int:
        fd = os.open(self.backing(path), flags & ~_NOT_PASSED)
        self._handles[fd] = _handle(fd, path, flags)
        if flags & os.O_TRUNC:
            self.truncate(path, 0, fd)
        return fd

    def create(self, path: str, flags: int, mode: int) -> int:
        """open(2) with O_CREAT: a new file is a new directory entry."""
        backing = self.backing(path)
        try:
            fd = os.open(backing, flags & ~_NOT_PASSED | os.O_CREAT | os.O_EXCL, mode)
        except FileExistsError:
            if flags & os.O_EXCL:
                raise
            return self.open(path, flags)
        self._entries.created(backing)
        self._handles[fd] = _handle(fd, path, flags)
        return fd

    def release(self, fh: int) -> None:
        del self._handles[fh]
        os.close(fh)

    def write(self, fh: int, data: bytes | memoryview, offset: int) -> int:
        """pwrite(2) at ``offset`` (the kernel's: for an O_APPEND handle, the end)."""
        handle = self._handles[fh]
        unsynced = self._unsynced.get(handle.ino) or self._track(handle.ino, fh, handle.path)
        if offset < unsynced.synced_size:
            unsynced.before_change(offset, offset + len(data))
        written = os.pwrite(fh, data, offset)
        self._writes += 1
        unsynced.wrote(self._writes, offset, written)
        if handle.sync:
            self._durable(handle.ino)
        return written

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> None:
        """truncate(2) by path, or ftruncate(2) of the handle ``fh``."""
        source: int | str
        if fh is not None:
            handle = self._handles[fh]
            ino, source, name = handle.ino, fh, handle.path
        else:
            assert path is not None
            source, name = self.backing(path), path
            ino = os.stat(source).st_ino
        unsynced = self._unsynced.get(ino) or self._track(ino, source, name)
        unsynced.before_change(length, unsynced.synced_size)
        os.ftruncate(unsynced.fd, length)

    def fallocate(self, fh: int, mode: int, offset: int, length: int) -> None:
        """fallocate(2) mode 0 (reserve, growing the size); other modes are not supported."""
        if mode != 0:
            raise OSError(errno.EOPNOTSUPP, "only fallocate mode 0 is supported")
        handle = self._handles[fh]
        unsynced = self._unsynced.get(handle.ino) or self._track(handle.ino, fh, handle.path)
        os.posix_fallocate(unsynced.fd, offset, length)

    def fsync(self, fh: int) -> None:
        """fsync or fdatasync: the file's data is durable (not its name)."""
        self._durable(self._handles[fh].ino)

    def _track(self, ino: int, source: int | str, path: str) -> UnsyncedData:
        """Start remembering the file ``ino`` (open as ``source``: a descriptor or a path)."""
        own = os.open(f"/proc/self/fd/{source}" if isinstance(source, int) else source, os.O_RDWR)
        unsynced = UnsyncedData(own, os.fstat(own).st_size, path)
        self._unsynced[ino] = unsynced
        return unsynced

    def _durable(self, ino: int) -> None:
        unsynced = self._unsynced.pop(ino, None)
        if unsynced is not None:
            unsynced.close()

    # -- directory entries -----------------------------------------------------------------

    def mkdir(self, path: str, mode: int) -> None:
        os.mkdir(self.backing(path), mode)
        self._entries.created(self.backing(path))

    def mknod(self, path: str, mode: int, device: int) -> None:
        """A special file: a FIFO, or the node of a Unix socket being bound."""
        os.mknod(self.backing(path), mode, device)
        self._entries.created(self.backing(path))

    def symlink(self, path: str, target: str) -> None:
        os.symlink(target, self.backing(path))
        self._entries.created(self.backing(path))

    def unlink(self, path: str) -> None:
        self._entries.remove(self.backing(path), directory=False)

    def rmdir(self, path: str) -> None:
        self._entries.remove(self.backing(path), directory=True)

    def rename(self, old: str, new: str, flags: int = 0) -> None:
        """rename(2), or renameat2(2) with RENAME_NOREPLACE (RENAME_EXCHANGE: EINVAL)."""
        if flags & ~RENAME_NOREPLACE:
            raise OSError(errno.EINVAL, "only RENAME_NOREPLACE is supported")
        if flags & RENAME_NOREPLACE and os.path.lexists(self.backing(new)):
            raise OSError(errno.EEXIST, os.strerror(errno.EEXIST), new)
        self._entries.rename(self.backing(old), self.backing(new))

    def fsyncdir(self, path: str) -> None:
        """fsync of a directory: its entries so far are durable."""
        self._entries.synced(self.backing(path))

    # -- the power -------------------------------------------------------------------------

    def stats(self) -> Stats:
        files = self._unsynced.values()
        return Stats(
            files_unsynced=len(files),
            bytes_held=sum(f.held for f in files),
            bytes_unsynced=sum(max(os.fstat(f.fd).st_size - f.synced_size, 0) for f in files),
            entries_unsynced=self._entries.unsynced,
            dirs_unsynced=self._entries.dirs_unsynced,
        )

    def sync_all(self) -> None:
        """Everything is durable now (the state a test sets up before its workload)."""
        self._close_unsynced()
        self._entries.forget()

    def cut(self, tear: int | None = None, seed: int | None = None) -> CutReport:
        """The power goes: the backing folder is put back to its durable state (see the module
        doc); with ``tear``, the newest unsynced write keeps a prefix (``seed``: which one)."""
        if tear is not None and tear not in TEAR_SIZES:
            raise ValueError(f"tear must be one of {TEAR_SIZES}, not {tear}")
        torn = self._tear(tear, random.Random(seed)) if tear else None
        files = list(self._unsynced.values())
        dropped = sum(unsynced.revert() for unsynced in files)
        if torn is not None:
            unsynced, data, report = torn
            os.pwrite(unsynced.fd, data, report.offset)
        self._close_unsynced()
        undone = self._entries.undo()
        return CutReport(
            files_reverted=sorted(unsynced.path for unsynced in files),
            bytes_dropped=dropped,
            bytes_restored=sum(unsynced.held for unsynced in files),
            entries_undone=undone.entries,
            entry_conflicts=undone.conflicts,
            torn=None if torn is None else torn[2],
        )

    def _close_unsynced(self) -> None:
        for unsynced in self._unsynced.values():
            unsynced.close()
        self._unsynced.clear()

    def _tear(self, tear: int, rng: random.Random) -> tuple[UnsyncedData, bytes, TornWrite] | None:
        """The newest unsynced write's kept prefix: its file, its bytes, the report."""
        written = [f for f in self._unsynced.values() if f.last_write is not None]
        if not written:
            return None
        unsynced = max(written, key=lambda f: f.last_write or (0, 0, 0))
        assert unsynced.last_write is not None
        _, offset, length = unsynced.last_write
        boundaries = range((offset // tear + 1) * tear, offset + length, tear)
        if not boundaries:
            return None
        data = os.pread(unsynced.fd, rng.choice(boundaries) - offset, offset)
        report = TornWrite(unsynced.path, offset, len(data), length - len(data), tear)
        return unsynced, data, report


def _handle(fd: int, path: str, flags: int) -> _Handle:
    return _Handle(os.fstat(fd).st_ino, path, bool(flags & (os.O_SYNC | os.O_DSYNC)))
