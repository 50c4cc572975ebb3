"""A key index file written from scratch (a rebuild): ``binlake.keyindex.store`` describes
the file; its caller (``binlake.keyindex.folder``) renames it into place once fsynced."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from binlake.keyindex.store import (
    FORMAT_VERSION,
    SCHEMA,
    IndexedFile,
    IndexMeta,
    SQLiteErrors,
    as_indexed,
    connect,
    duplicate_key,
    entry_crc,
    insert_file,
    write_meta,
)
from binlake.storage.durable import fsync_fd, raise_os_error


class IndexBuilder:
    """A new index file written from scratch at ``path`` (a temporary name: its caller renames
    it into place once ``finish`` returned and the file is fsynced)."""

    def __init__(self, path: Path, table_uuid: str, key_spec: str) -> None:
        self.path = path
        self.table_uuid = table_uuid
        self.key_spec = key_spec
        self.scratch = path.with_name(path.name + ".scratch")
        for stale in (path, self.scratch):
            stale.unlink(missing_ok=True)
        self._conn = connect(path, building=True)
        self._files: dict[str, int] = {}
        self.rows = 0
        conn = self._conn
        conn.execute("ATTACH DATABASE ? AS scratch", (str(self.scratch),))
        conn.execute("PRAGMA scratch.journal_mode = OFF")
        conn.execute("PRAGMA scratch.synchronous = OFF")
        conn.execute("BEGIN")
        for statement in SCHEMA:
            conn.execute(statement)
        conn.execute("CREATE TABLE scratch.rows (key BLOB, file INTEGER, pos INTEGER, crc INTEGER)")

    def add(self, data: IndexedFile | str, keys: Sequence[bytes], positions: Sequence[int]) -> None:
        """The live rows of data file ``data``: their keys and positions."""
        with SQLiteErrors(self.path):
            self._add(as_indexed(data), keys, positions)

    def _add(self, data: IndexedFile, keys: Sequence[bytes], positions: Sequence[int]) -> None:
        file = self._files.get(data.path)
        if file is None:
            file = self._files[data.path] = len(self._files) + 1
            insert_file(self._conn, file, data)
        self._conn.executemany(
            "INSERT INTO scratch.rows VALUES (?, ?, ?, ?)",
            (
                (key, file, pos, entry_crc(key, file, pos))
                for key, pos in zip(keys, positions, strict=True)
            ),
        )
        self.rows += len(keys)

    def finish(self, snapshot: int | None) -> None:
        """Sort the rows into ``entries``, write the meta row last, and close the file,
        fsynced."""
        with SQLiteErrors(self.path):
            self._finish(snapshot)

    def _finish(self, snapshot: int | None) -> None:
        conn = self._conn
        try:
            conn.execute(
                "INSERT INTO entries SELECT key, file, pos, crc FROM scratch.rows ORDER BY key"
            )
        except sqlite3.IntegrityError:
            raise duplicate_key(self.path, "found while indexing its keys") from None
        conn.execute("COMMIT")
        conn.execute("DETACH DATABASE scratch")
        self.scratch.unlink(missing_ok=True)
        conn.execute("BEGIN")
        write_meta(
            conn, IndexMeta(FORMAT_VERSION, self.table_uuid, self.key_spec, snapshot, self.rows)
        )
        conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        conn.execute("COMMIT")
        conn.close()
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError as exc:
            raise_os_error(exc, self.path, "opening a rebuilt key index")
        try:
            fsync_fd(fd, "keyindex", self.path)
        finally:
            os.close(fd)

    def abandon(self) -> None:
        """Close and remove what was written (an error or a stop before ``finish``)."""
        try:
            self._conn.close()
        finally:
            for path in (self.path, self.scratch):
                path.unlink(missing_ok=True)
