"""Binlog index files: the ordered list of a log's files, one path per line, changed crash-safely.

Reading: this module reads MariaDB/MySQL index files (and ours, which have the same format). Paths
in an index are absolute or relative; relative ones resolve against the index's folder.

Writing (``LogIndex``): every change is a whole new version written with
``durable.atomic_replace`` (temp copy, fsync, rename, fsync the folder). A *marker file*
(``<index>.marker``, also written with ``atomic_replace``) names the files being created or purged
while such an operation runs, so that a crash between a file operation and the index update is
repaired at the next open (``storage/index_repair.py``):

- create: marker ``create NAME`` -> create NAME (header fsynced) -> index lists NAME -> marker
  removed. A NAME not in the index at repair is removed if it holds no complete transaction,
  adopted (appended) if it does.
- purge: marker ``purge NAME...`` -> index without them -> files deleted -> marker removed.
  Repair always finishes a purge: the caller decided the files are no longer needed.

The marker is removed last; a marker that reappears after a power cut is applied again, which is
harmless because each step checks the state before acting (names are never reused while listed).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from binlake.crashpoints import crash_point
from binlake.errors import FileAccessError, IndexFileError, NoIndexError
from binlake.storage.durable import atomic_replace, fsync_dir, raise_os_error, temp_path_for

MARKER_SUFFIX = ".marker"
MARKER_HEADER = "binlake index marker v1"
#: MySQL 5.6+ writes its new index version here before renaming it over the index.
MYSQL_CRASH_SAFE_SUFFIX = ".index_crash_safe"


def find_index(folder: Path) -> Path:
    """The one ``*.index`` file in ``folder``."""
    try:
        candidates = sorted(p for p in folder.iterdir() if p.suffix == ".index" and p.is_file())
    except OSError as exc:
        raise FileAccessError(f"cannot list {folder}: {exc.strerror}", file=str(folder)) from exc
    if not candidates:
        raise NoIndexError(f"{folder} has no .index file", file=str(folder))
    if len(candidates) > 1:
        names = ", ".join(p.name for p in candidates)
        raise NoIndexError(
            f"{folder} has several index files ({names})",
            file=str(folder),
            hint="pass the binlog files themselves instead of the folder",
        )
    return candidates[0]


def _read_text(index_path: Path) -> str:
    try:
        raw = index_path.read_bytes()
    except OSError as exc:
        raise FileAccessError(f"cannot read index: {exc.strerror}", file=str(index_path)) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IndexFileError(
            f"index is not text (byte {exc.start} is invalid UTF-8)", file=str(index_path)
        ) from exc
    if "\0" in text:
        raise IndexFileError("index contains NUL bytes", file=str(index_path))
    return text


def index_lines(index_path: Path) -> list[str]:
    """The non-blank lines of an index, stripped, in order."""
    return [line.strip() for line in _read_text(index_path).splitlines() if line.strip()]


def read_index(index_path: Path) -> list[Path]:
    """The files an index lists, in order, resolved to paths."""
    files = []
    for name in index_lines(index_path):
        path = Path(name)
        files.append(path if path.is_absolute() else index_path.parent / path)
    return files


def index_temp_copies(index_path: Path) -> list[Path]:
    """Where a crash may have left a new version of ``index_path`` that was never renamed."""
    mysql_copy = index_path.with_name(index_path.stem + MYSQL_CRASH_SAFE_SUFFIX)
    return [p for p in (temp_path_for(index_path), mysql_copy) if p.exists()]


def locate_index(folder: Path, index_name: str | None = None) -> Path:
    """The index of the log in ``folder``: named, the one ``*.index``, or one left as a temp copy.

    The returned path may not exist when only a temp copy survived (a crash between removing the
    old version and renaming the new one); repair then restores it from the copy.
    """
    if not folder.is_dir():
        raise FileAccessError(f"{folder} is not a folder", file=str(folder))
    if index_name is not None:
        return folder / index_name
    try:
        return find_index(folder)
    except NoIndexError:
        pass
    suffixes = (".index.tmp", MYSQL_CRASH_SAFE_SUFFIX)
    copies = sorted(p for p in folder.iterdir() if p.name.endswith(suffixes) and p.is_file())
    if len(copies) != 1:
        raise NoIndexError(f"{folder} has no .index file", file=str(folder))
    name = copies[0].name
    stem = name[: -len(".tmp")] if name.endswith(".tmp") else name[: -len(MYSQL_CRASH_SAFE_SUFFIX)]
    return folder / (stem if stem.endswith(".index") else stem + ".index")


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One line of an index: its text as written, and the file it names inside the folder."""

    line: str
    name: str
    path: Path
    #: The line names a path outside the index's folder; ``path`` is the file of the same name
    #: inside the folder (a copied or moved log folder). Files outside are never touched.
    relocated: bool


class MarkerOp(Enum):
    CREATE = "create"
    PURGE = "purge"


@dataclass(frozen=True, slots=True)
class Marker:
    op: MarkerOp
    names: tuple[str, ...]

    def encode(self) -> bytes:
        lines = [MARKER_HEADER, *(f"{self.op.value} {name}" for name in self.names)]
        return ("\n".join(lines) + "\n").encode("utf-8")


def decode_marker(text: str, path: Path) -> Marker:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines or lines[0] != MARKER_HEADER:
        raise IndexFileError(f"marker file does not start with {MARKER_HEADER!r}", file=str(path))
    ops: set[MarkerOp] = set()
    names: list[str] = []
    for line in lines[1:]:
        word, _, name = line.partition(" ")
        try:
            ops.add(MarkerOp(word))
        except ValueError:
            raise IndexFileError(
                f"marker line {line!r}: unknown operation", file=str(path)
            ) from None
        if not name or "/" in name or name in (".", ".."):
            raise IndexFileError(f"marker line {line!r}: bad file name", file=str(path))
        names.append(name)
    if len(ops) != 1:
        raise IndexFileError("marker must name exactly one kind of operation", file=str(path))
    return Marker(ops.pop(), tuple(names))


class LogIndex:
    """An index file, its marker and its temp copy; every change is durable before it returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.folder = path.parent
        self.marker_path = path.with_name(path.name + MARKER_SUFFIX)
        self.temp_path = temp_path_for(path)

    def exists(self) -> bool:
        return self.path.exists()

    # ---- reading ----------------------------------------------------------------------------

    def entries(self, lines: Sequence[str] | None = None) -> list[IndexEntry]:
        """The entries of ``lines`` (by default the index's own); duplicates are an error."""
        lines = index_lines(self.path) if lines is None else lines
        out: list[IndexEntry] = []
        seen: set[str] = set()
        for line in lines:
            entry = self._entry(line)
            if entry.name in seen:
                raise IndexFileError(f"index lists {entry.name} twice", file=str(self.path))
            seen.add(entry.name)
            out.append(entry)
        return out

    def names(self) -> list[str]:
        return [entry.name for entry in self.entries()]

    def _entry(self, line: str) -> IndexEntry:
        listed = Path(line)
        name = listed.name
        if not name or name in (".", ".."):
            raise IndexFileError(f"index line {line!r} names no file", file=str(self.path))
        here = self.folder / name
        where = listed if listed.is_absolute() else self.folder / listed
        inside = os.path.realpath(where.parent) == os.path.realpath(self.folder)
        return IndexEntry(line, name, here, relocated=not inside)

    def line_for(self, name: str, entries: Sequence[IndexEntry]) -> str:
        """The line naming ``name`` in the style of the index's last line (absolute, ./, bare)."""
        if not entries:
            return name
        last = entries[-1].line
        return last[: len(last) - len(entries[-1].name)] + name

    def read_marker(self) -> Marker | None:
        try:
            text = self.marker_path.read_text("utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise IndexFileError(f"cannot read marker: {exc}", file=str(self.marker_path)) from exc
        return decode_marker(text, self.marker_path)

    # ---- writing (each durable) -------------------------------------------------------------

    def write_lines(self, lines: Sequence[str]) -> None:
        atomic_replace(self.path, "".join(f"{line}\n" for line in lines).encode("utf-8"), "index")

    def append(self, name: str) -> None:
        """Add ``name`` at the end of the index (a newly created file)."""
        entries = self.entries()
        self.write_lines([e.line for e in entries] + [self.line_for(name, entries)])

    def write_marker(self, marker: Marker) -> None:
        atomic_replace(self.marker_path, marker.encode(), "index")

    def remove_marker(self) -> None:
        remove_file(self.marker_path)
        fsync_dir(self.folder, "index")

    def remove_files(self, names: Sequence[str]) -> None:
        """Remove ``names`` from the index, then from disk; a crash anywhere is finished at repair.

        No policy here: ``purge`` decides what may go; recovery also uses this to drop a newest
        file that has no complete format description.
        """
        if not names:
            return
        self.write_marker(Marker(MarkerOp.PURGE, tuple(names)))
        crash_point("purge_before_index")
        gone = set(names)
        self.write_lines([e.line for e in self.entries() if e.name not in gone])
        crash_point("purge_after_index")
        for name in names:
            crash_point("purge_before_delete")
            remove_file(self.folder / name)
        fsync_dir(self.folder, "index")
        self.remove_marker()

    def purge(self, up_to: str, *, keep_from: str) -> list[str]:
        """Remove the files listed before ``up_to`` (exclusive, like PURGE BINARY LOGS TO).

        ``keep_from`` is the caller's checkpoint file: it and every newer file are kept whatever
        ``up_to`` says, and the newest file is never removed. Returns the names removed.
        """
        names = self.names()
        for label, name in (("up_to", up_to), ("keep_from", keep_from)):
            if name not in names:
                raise IndexFileError(
                    f"purge {label}={name!r} is not in the index", file=str(self.path)
                )
        limit = min(names.index(up_to), names.index(keep_from), len(names) - 1)
        victims = names[:limit]
        self.remove_files(victims)
        return victims


def remove_file(path: Path) -> None:
    """Delete ``path`` if it exists (the folder fsync is the caller's)."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise_os_error(exc, path, "deleting")


def files_of(path: Path) -> list[Path]:
    """The binlog files a command was given: a file is itself; a folder is what its index lists.

    Index lines are resolved inside the folder (as recovery does), so a copied server folder is
    read from the copy, not from the absolute paths its index still names.
    """
    if path.is_dir():
        return [entry.path for entry in LogIndex(find_index(path)).entries()]
    return [path]
