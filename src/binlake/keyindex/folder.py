"""The key index folder, ``<state dir>/keyindex/``: one index file per lake table.

A table's index is ``<table uuid>.<generation>.keyindex`` (the Iceberg table's UUID: a table
dropped and created again has another, and never meets the old index), with SQLite's
``-wal`` and ``-shm`` files beside it while it is open. A rebuild writes generation g + 1 under
a temporary name (``.tmp``), fsyncs it, renames it into place and fsyncs the folder
(crash points ``keyindex_after_rebuild_fsync``, ``keyindex_after_rebuild_rename``), then removes
the older generations. Why a new name rather than a rename over the old file: SQLite would
replay the old file's ``-wal`` into the new one. At open the highest generation is the index;
lower ones, temporary files and scratch files a crash left are removed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from binlake.crashpoints import crash_point
from binlake.keyindex.builder import IndexBuilder
from binlake.keyindex.store import KeyIndex, untrusted
from binlake.storage.durable import fsync_dir, make_folder, raise_os_error

SUFFIX = ".keyindex"
_NAME = re.compile(r"(?P<uuid>[0-9A-Za-z-]+)\.(?P<generation>\d+)\.keyindex(?P<rest>.*)")


class IndexFolder:
    """The index files of one state folder (the folder is made on first use)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, table_uuid: str, generation: int) -> Path:
        return self.folder / f"{table_uuid}.{generation:08d}{SUFFIX}"

    def generations(self, table_uuid: str) -> dict[int, list[Path]]:
        """The files of ``table_uuid``'s index by generation (the index, its SQLite files,
        temporary and scratch files)."""
        out: dict[int, list[Path]] = {}
        if not self.folder.is_dir():
            return out
        for entry in self.folder.iterdir():
            match = _NAME.fullmatch(entry.name)
            if match and match["uuid"] == table_uuid:
                out.setdefault(int(match["generation"]), []).append(entry)
        return out

    def current(self, table_uuid: str) -> Path | None:
        """The index file of ``table_uuid`` (its highest generation renamed into place)."""
        whole = [
            g
            for g, paths in self.generations(table_uuid).items()
            if self.path(table_uuid, g) in paths
        ]
        return self.path(table_uuid, max(whole)) if whole else None

    def open(self, table_uuid: str, key_spec: str, *, verify: bool = True) -> KeyIndex:
        """The index of ``table_uuid`` (``KeyIndex.open``; ``verify``: its whole file checked,
        else its meta row only); files older or left by a crash are removed first.
        ``KeyIndexUntrustedError`` when there is none or it is not sound."""
        path = self.current(table_uuid)
        self._remove_stale(table_uuid, keep=path)
        if path is None:
            raise untrusted(self.path(table_uuid, 0), "missing", "there is no index file")
        return KeyIndex.open(path, table_uuid, key_spec, verify=verify)

    def builder(self, table_uuid: str, key_spec: str) -> IndexBuilder:
        """A builder of the next generation of ``table_uuid``'s index, at its temporary name."""
        self._make_folder()
        generations = self.generations(table_uuid)
        after = max(generations, default=0) + 1
        temp = self.path(table_uuid, after).with_name(self.path(table_uuid, after).name + ".tmp")
        return IndexBuilder(temp, table_uuid, key_spec)

    def install(self, builder: IndexBuilder) -> KeyIndex:
        """Rename a finished builder's file into place (durably), remove the generations
        before it, and open it."""
        temp = builder.path
        path = temp.with_name(temp.name.removesuffix(".tmp"))
        crash_point("keyindex_after_rebuild_fsync")
        try:
            os.replace(temp, path)
        except OSError as exc:
            raise_os_error(exc, path, "renaming a rebuilt key index into place")
        crash_point("keyindex_after_rebuild_rename")
        fsync_dir(self.folder, "keyindex")
        self._remove_stale(builder.table_uuid, keep=path)
        return KeyIndex.open(path, builder.table_uuid, builder.key_spec, verify=False)

    def discard(self, table_uuid: str) -> None:
        """Remove every file of ``table_uuid``'s index (a table binlake no longer indexes)."""
        for paths in self.generations(table_uuid).values():
            for path in paths:
                path.unlink(missing_ok=True)

    def _remove_stale(self, table_uuid: str, keep: Path | None) -> None:
        """Remove ``table_uuid``'s files other than ``keep`` and its SQLite files."""
        kept = {keep.name, f"{keep.name}-wal", f"{keep.name}-shm"} if keep else set()
        for paths in self.generations(table_uuid).values():
            for path in paths:
                if path.name not in kept:
                    try:
                        path.unlink(missing_ok=True)
                    except OSError as exc:
                        raise_os_error(exc, path, "removing an old key index file")

    def _make_folder(self) -> None:
        if not self.folder.is_dir():
            make_folder(self.folder, "key index")
