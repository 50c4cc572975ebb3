"""Directory entries that a power cut would take: creations, removals and renames whose
directories were not fsynced since.

Every entry operation is done on the backing folder at once, and logged with what undoing it
needs. A removed entry (unlink, rmdir, or the target a rename replaced) is not deleted but
moved into the graveyard, a folder outside the mounted tree on the same file system, so that
an undo can move it back whole, inode and content. An operation becomes durable when every
directory it touches (the parent of the name; for a rename, both parents) has been fsynced
after it (POSIX: fsync of a file does not make its name durable, fsync of its directory does);
its graveyard entry is deleted then. A cut undoes the operations that are not durable, newest
first.

Directories are known by inode, not by path, so that an operation logged under a directory
that is renamed later is still undone in the right place (``DirIndex`` follows the renames).

Not modelled: a journaling file system that makes every earlier metadata operation durable at
any fsync (ext4, XFS do); here only the directory's own fsync counts, the strictest reading.
When directories fsynced apart leave two undos in conflict (a rename across directories only
one of which was fsynced, whose name was reused since), the undo that cannot be done is
skipped and counted (``Undone.conflicts``); the entry stays where it is, or in the graveyard.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from dataclasses import dataclass
from typing import NoReturn


class Graveyard:
    """A folder outside the mounted tree where removed entries wait until their removal is
    durable (then deleted) or undone (then moved back)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._count = 0
        os.makedirs(root, exist_ok=True)
        self.clear()

    def bury(self, path: str) -> str:
        """Move ``path`` into the graveyard; its grave's path."""
        self._count += 1
        grave = os.path.join(self.root, str(self._count))
        os.rename(path, grave)
        return grave

    def release(self, grave: str) -> None:
        """Delete a grave whose entry will not come back."""
        try:
            if stat.S_ISDIR(os.lstat(grave).st_mode):
                shutil.rmtree(grave)
            else:
                os.unlink(grave)
        except FileNotFoundError:
            pass

    def clear(self) -> None:
        for name in os.listdir(self.root):
            self.release(os.path.join(self.root, name))


class DirIndex:
    """The backing path of each directory an operation names, by inode, kept up to date as
    directories are renamed, buried and restored."""

    def __init__(self) -> None:
        self._paths: dict[int, str] = {}

    def note(self, path: str) -> int:
        """The inode of the directory at ``path``, remembered with that path."""
        ino = os.lstat(path).st_ino
        self._paths[ino] = path
        return ino

    def path(self, ino: int) -> str | None:
        return self._paths.get(ino)

    def moved(self, old: str, new: str) -> None:
        """A directory moved from ``old`` to ``new``: it and everything below it."""
        below = old + "/"
        for ino, path in self._paths.items():
            if path == old or path.startswith(below):
                self._paths[ino] = new + path[len(old) :]

    def forget_below(self, path: str) -> list[int]:
        """Forget the directories at and below ``path`` (deleted); their inodes."""
        below = path + "/"
        gone = [i for i, p in self._paths.items() if p == path or p.startswith(below)]
        for ino in gone:
            del self._paths[ino]
        return gone


@dataclass
class EntryOp:
    """One logged entry operation. ``kind``: "create" (``dir``/``name`` is new, inode ``ino``),
    "remove" (``dir``/``name`` was ``ino``, now at ``grave``) or "rename" (``dir``/``name``,
    inode ``ino``, moved to ``to_dir``/``to_name``, whose entry it replaced now at ``grave``).
    ``pending``: the directories (inodes) not fsynced since."""

    kind: str
    dir: int
    name: str
    ino: int
    pending: set[int]
    to_dir: int = 0
    to_name: str = ""
    grave: str | None = None
    durable: bool = False


@dataclass
class Undone:
    """What a cut did to the directories: operations undone, and those that could not be
    (conflicts: left as they are)."""

    entries: int = 0
    conflicts: int = 0


def _raise(code: int, path: str) -> NoReturn:
    raise OSError(code, os.strerror(code), path)


class EntryLog:
    """Entry operations done on the backing folder since their directories' last fsync."""

    def __init__(self, graveyard: Graveyard) -> None:
        self._graves = graveyard
        self._dirs = DirIndex()
        self._ops: list[EntryOp] = []
        self._by_dir: dict[int, list[EntryOp]] = {}
        self._live = 0

    @property
    def unsynced(self) -> int:
        """Operations not durable yet."""
        return self._live

    @property
    def dirs_unsynced(self) -> int:
        """Directories with operations waiting for their fsync."""
        return len(self._by_dir)

    def created(self, path: str) -> None:
        """``path`` was just created (file, directory, symlink, special file)."""
        parent, name = os.path.split(path)
        dir_ino = self._dirs.note(parent)
        self._log(EntryOp("create", dir_ino, name, os.lstat(path).st_ino, {dir_ino}))

    def remove(self, path: str, *, directory: bool) -> None:
        """unlink (``directory`` False) or rmdir ``path``: its entry goes to the graveyard."""
        found = os.lstat(path)
        if directory and not stat.S_ISDIR(found.st_mode):
            _raise(errno.ENOTDIR, path)
        if not directory and stat.S_ISDIR(found.st_mode):
            _raise(errno.EISDIR, path)
        if directory and not _empty(path):
            _raise(errno.ENOTEMPTY, path)
        parent, name = os.path.split(path)
        dir_ino = self._dirs.note(parent)
        grave = self._bury(path)
        self._log(EntryOp("remove", dir_ino, name, found.st_ino, {dir_ino}, grave=grave))

    def rename(self, old: str, new: str) -> None:
        """rename(2) ``old`` to ``new``, replacing what is there (which goes to the graveyard)."""
        moved = os.lstat(old)
        replaced = self._replaceable(moved, new)
        if replaced is not None and replaced.st_ino == moved.st_ino:
            return  # the same file under both names: POSIX says do nothing
        old_parent, old_name = os.path.split(old)
        new_parent, new_name = os.path.split(new)
        old_dir, new_dir = self._dirs.note(old_parent), self._dirs.note(new_parent)
        grave = self._bury(new) if replaced is not None else None
        try:
            os.rename(old, new)
        except OSError:
            if grave is not None:
                self._unbury(grave, new)
            raise
        if stat.S_ISDIR(moved.st_mode):
            self._dirs.moved(old, new)
        op = EntryOp("rename", old_dir, old_name, moved.st_ino, {old_dir, new_dir}, grave=grave)
        op.to_dir, op.to_name = new_dir, new_name
        self._log(op)

    @staticmethod
    def _replaceable(moved: os.stat_result, new: str) -> os.stat_result | None:
        """The entry at ``new`` if a rename may replace it (rename(2)'s checks), else None."""
        try:
            target = os.lstat(new)
        except FileNotFoundError:
            return None
        if target.st_ino == moved.st_ino:
            return target
        if stat.S_ISDIR(moved.st_mode) and not stat.S_ISDIR(target.st_mode):
            _raise(errno.ENOTDIR, new)
        if not stat.S_ISDIR(moved.st_mode) and stat.S_ISDIR(target.st_mode):
            _raise(errno.EISDIR, new)
        if stat.S_ISDIR(target.st_mode) and not _empty(new):
            _raise(errno.ENOTEMPTY, new)
        return target

    def synced(self, dir_path: str) -> None:
        """fsync of the directory ``dir_path``: its operations so far are durable for it."""
        self._synced(self._dirs.note(dir_path))
        if len(self._ops) > 2 * self._live + 64:
            self._ops = [op for op in self._ops if not op.durable]

    def _synced(self, dir_ino: int) -> None:
        for op in self._by_dir.pop(dir_ino, []):
            op.pending.discard(dir_ino)
            if not op.pending and not op.durable:
                op.durable = True
                self._live -= 1
                if op.grave is not None:
                    self._release(op.grave)

    def forget(self) -> None:
        """Every operation durable (sync-all): the graveyard emptied."""
        self._ops.clear()
        self._by_dir.clear()
        self._live = 0
        self._graves.clear()
        self._dirs = DirIndex()

    def undo(self) -> Undone:
        """Undo every operation that is not durable, newest first; the log is empty after."""
        done = Undone()
        for op in reversed(self._ops):
            if op.durable:
                continue
            if op.kind == "create":
                undone = self._undo_create(op)
            elif op.kind == "remove":
                undone = self._undo_remove(op)
            else:
                undone = self._undo_rename(op)
            if undone:
                done.entries += 1
            else:
                done.conflicts += 1
        self.forget()
        return done

    def _undo_create(self, op: EntryOp) -> bool:
        path = self._entry(op.dir, op.name)
        if path is None or _ino(path) != op.ino:
            return False
        self._bury(path)
        return True

    def _undo_remove(self, op: EntryOp) -> bool:
        path = self._entry(op.dir, op.name)
        return path is not None and op.grave is not None and self._unbury(op.grave, path)

    def _undo_rename(self, op: EntryOp) -> bool:
        old, new = self._entry(op.dir, op.name), self._entry(op.to_dir, op.to_name)
        if old is None or new is None:
            return False
        back = _ino(new) == op.ino and _ino(old) is None
        if back:
            os.rename(new, old)
            self._dirs.moved(new, old)
        if op.grave is not None:
            back = self._unbury(op.grave, new) and back
        return back

    def _entry(self, dir_ino: int, name: str) -> str | None:
        """The backing path of ``name`` in the directory ``dir_ino`` (None: deleted for good)."""
        parent = self._dirs.path(dir_ino)
        return None if parent is None else os.path.join(parent, name)

    def _log(self, op: EntryOp) -> None:
        self._ops.append(op)
        self._live += 1
        for dir_ino in op.pending:
            self._by_dir.setdefault(dir_ino, []).append(op)

    def _bury(self, path: str) -> str:
        grave = self._graves.bury(path)
        self._dirs.moved(path, grave)
        return grave

    def _unbury(self, grave: str, path: str) -> bool:
        if _ino(path) is not None or _ino(grave) is None:
            return False
        os.rename(grave, path)
        self._dirs.moved(grave, path)
        return True

    def _release(self, grave: str) -> None:
        """Delete a grave for good. Operations still pending in a directory deleted with it
        have nothing left to undo: they count as durable."""
        gone = self._dirs.forget_below(grave)
        self._graves.release(grave)
        for dir_ino in gone:
            self._synced(dir_ino)


def _empty(path: str) -> bool:
    with os.scandir(path) as entries:
        return next(entries, None) is None


def _ino(path: str) -> int | None:
    try:
        return os.lstat(path).st_ino
    except FileNotFoundError:
        return None
