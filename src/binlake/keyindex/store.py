"""One key index file: a SQLite database of a lake table's keys and where their live rows are.

Tables (docs/format.md, "Key index files"):

* ``entries(key BLOB PRIMARY KEY, file INTEGER, pos INTEGER, crc INTEGER) WITHOUT ROWID``: a key's
  bytes (``binlake.keyindex.encode``), the data file its live row is in (an id of ``files``) and
  the row's position in that file (0-based); ``crc`` is the CRC32 of the key's bytes, then the
  file id and the position as 8-byte big-endian integers. No second index: a batch changes
  only this B-tree (an index on ``(file, pos)`` doubled each update's page writes, format
  version 2); dropping a data file's entries (a compaction, a catch-up) scans it once;
* ``files(id INTEGER PRIMARY KEY, path TEXT UNIQUE, spec INTEGER, partition TEXT, crc INTEGER)``:
  the data files, by their location as the table's metadata names them, with the id of their
  partition spec and their partition values (Iceberg's single-value JSON of the partition:
  ``binlake.lake.write.partitions``; a position delete must be in the spec and partition of the
  data file it names); ``crc`` is the CRC32 of ``<id>|<path>|<spec>|<partition>``;
* ``meta``: one row, the format version, the Iceberg table's UUID, the key spec, the Iceberg
  snapshot the entries match (NULL: the table had none), the number of entries and the CRC32 of
  those five as text.

Every value read is checked against its CRC before it is used; a mismatch, a SQLite error that
says the file is damaged ("malformed", "not a database"), a meta row for another table or key, or
a count of entries other than the meta's means the index is not true: ``KeyIndexUntrustedError``
(its caller rebuilds it from the table). A ``PRAGMA user_version`` above ``FORMAT_VERSION`` is a
newer binlake's file: ``KeyIndexVersionError``, and the file is left alone; one below it (an
older binlake's: version 1 kept no partitions, version 2 a second index on ``(file, pos)``)
is not read, but rebuilt (reason ``older version``).

The database runs with ``journal_mode=WAL`` and ``synchronous=NORMAL``: a transaction is atomic
and the file stays whole through a power cut, but the last transactions committed before one
may be rolled back (SQLite syncs the WAL at its checkpoints, not at every commit). That is
enough: the index is true only of the snapshot its meta row names, so an index set back to an
older snapshot is caught up from the table's commits since (``lake.write.key_positions``), and
a batch's commit costs no fsync of its own. A cache of ``CACHE_KIB`` (the applier's
memory does not grow with the table) and ``cell_size_check`` (SQLite checks each B-tree cell's
size as it reads it). Changes are made in one transaction (``begin`` ... ``commit(snapshot)``):
the meta row's snapshot moves with the entries it describes, or neither does.

``binlake.keyindex.builder.IndexBuilder`` writes a new index file from scratch (a rebuild):
rows are appended to a scratch table as they come, then moved into ``entries`` in key order by
SQLite's sorter, the meta row written last.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from binlake.binlog.header import crc32
from binlake.errors import (
    DiskFullError,
    FileAccessError,
    KeyIndexDuplicateKeyError,
    KeyIndexUntrustedError,
    KeyIndexVersionError,
)

#: The format this binlake reads and writes (``PRAGMA user_version`` and the meta row).
FORMAT_VERSION = 3
#: SQLite's page cache per index file, in KiB: the memory an index costs whatever its size.
CACHE_KIB = 16 * 1024
#: Keys per lookup statement (SQLite's bound on parameters is far above it).
LOOKUP_CHUNK = 500
#: The rows a catch-up removes by position (``remove_at``): a temporary table of the connection.
_GONE = "temp.binlake_gone"
_GONE_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {_GONE} "
    "(file INTEGER, pos INTEGER, PRIMARY KEY (file, pos)) WITHOUT ROWID"
)

SCHEMA = (
    "CREATE TABLE meta (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL, "
    "table_uuid TEXT NOT NULL, key_spec TEXT NOT NULL, snapshot INTEGER, entries INTEGER NOT NULL, "
    "crc INTEGER NOT NULL)",
    "CREATE TABLE files (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, spec INTEGER NOT NULL, "
    "partition TEXT NOT NULL, crc INTEGER NOT NULL)",
    "CREATE TABLE entries (key BLOB PRIMARY KEY, file INTEGER NOT NULL, pos INTEGER NOT NULL, "
    "crc INTEGER NOT NULL) WITHOUT ROWID",
)
#: What SQLite says when a file is not (or no longer) a sound database.
DAMAGE_MARKS = ("malformed", "not a database", "disk i/o error", "corrupt", "no such table")


def entry_crc(key: bytes, file: int, pos: int) -> int:
    return crc32(key + file.to_bytes(8, "big", signed=True) + pos.to_bytes(8, "big", signed=True))


def file_crc(file: int, path: str, spec: int, partition: str) -> int:
    return crc32(f"{file}|{path}|{spec}|{partition}".encode())


@dataclass(frozen=True)
class IndexedFile:
    """A data file the index names: its location, partition spec id and partition values."""

    path: str
    spec: int = 0
    #: The partition values as Iceberg's single-value JSON (``{}``: unpartitioned).
    partition: str = "{}"


@dataclass(frozen=True)
class IndexMeta:
    """The meta row: what the index is of, and the table state it matches."""

    version: int
    table_uuid: str
    key_spec: str
    snapshot: int | None
    entries: int

    @property
    def crc(self) -> int:
        text = f"{self.version}|{self.table_uuid}|{self.key_spec}|{self.snapshot}|{self.entries}"
        return crc32(text.encode())


def untrusted(path: Path, reason: str, detail: str) -> KeyIndexUntrustedError:
    return KeyIndexUntrustedError(
        f"key index {path.name}: {detail}; it is not used, and is rebuilt from the table",
        file=str(path),
        reason=reason,
    )


def connect(path: Path, *, building: bool = False) -> sqlite3.Connection:
    """A connection to ``path`` (autocommit: transactions are explicit) with the index's
    settings; ``building``: a file no one relies on until it is renamed (no journal, no
    fsync: ``IndexBuilder`` fsyncs it once, whole)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        conn.execute("PRAGMA cell_size_check = ON")
        conn.execute("PRAGMA mmap_size = 0")
        if building:
            conn.execute("PRAGMA journal_mode = OFF")
            conn.execute("PRAGMA synchronous = OFF")
        else:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")  # see the module docstring
    except sqlite3.Error:
        conn.close()
        raise
    return conn


class KeyIndex:
    """An open index file (see the module docstring). Not thread-safe: one batch of its table
    uses it at a time (``binlake.lake.write.key_positions`` holds a lock per table)."""

    def __init__(self, path: Path, conn: sqlite3.Connection, meta: IndexMeta) -> None:
        self.path = path
        self._conn = conn
        self.meta = meta
        #: Entries added (+) and removed (-) in the open transaction.
        self._delta: int | None = None
        #: The whole-file check running beside the first batch (``open(verify=True)``).
        self._check: WholeFileCheck | None = None

    @classmethod
    def open(cls, path: Path, table_uuid: str, key_spec: str, *, verify: bool) -> KeyIndex:
        """Open ``path``, the index of the table ``table_uuid`` keyed by ``key_spec``;
        ``verify``: check the whole file's structure and its count of entries too (once per
        process: the first time binlake opens it), beside the caller: ``confirm`` waits for it,
        and nothing the index answered may be used before."""
        if not path.is_file():
            raise untrusted(path, "missing", "the file is missing")
        try:
            conn = connect(path)
        except sqlite3.Error as error:
            raise untrusted(path, "damaged", f"SQLite cannot open it ({error})") from None
        try:
            meta = _checked_meta(path, conn, table_uuid, key_spec)
        except (KeyIndexUntrustedError, KeyIndexVersionError):
            conn.close()
            raise
        except sqlite3.Error as error:
            conn.close()
            raise untrusted(path, "damaged", f"SQLite reports: {error}") from None
        index = cls(path, conn, meta)
        if verify:
            index._check = WholeFileCheck(path, meta)
        return index

    @property
    def snapshot(self) -> int | None:
        return self.meta.snapshot

    @property
    def confirmed(self) -> bool:
        """Whether no whole-file check is pending or failed (``confirm`` returned)."""
        return self._check is None

    def confirm(self) -> None:
        """Wait for the whole-file check ``open`` started, if any: ``KeyIndexUntrustedError``
        when it failed (and at every later call)."""
        if self._check is not None:
            self._check.result()
            self._check = None

    def close(self) -> None:
        if self._delta is not None:
            self.rollback()
        if self._check is not None:
            self._check.wait()  # its connection closed before this one (SQLite's last closes)
        self._conn.close()

    # ---- reads ---------------------------------------------------------------------------

    def lookup(self, keys: Sequence[bytes]) -> dict[bytes, tuple[int, int]]:
        """The (file id, position) of each key the index holds (keys it lacks: not in the table
        at the index's snapshot, or added since in the open transaction)."""
        found: dict[bytes, tuple[int, int]] = {}
        ordered = sorted(keys)  # neighbouring keys share B-tree pages: each is read once
        with self._reading():
            for at in range(0, len(ordered), LOOKUP_CHUNK):
                chunk = ordered[at : at + LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
                statement = f"SELECT key, file, pos, crc FROM entries WHERE key IN ({marks})"
                for key, file, pos, crc in self._conn.execute(statement, chunk):
                    if crc != entry_crc(key, file, pos):
                        raise untrusted(self.path, "crc", "an entry fails its CRC32")
                    found[key] = (file, pos)
        return found

    def paths(self, ids: Iterable[int]) -> dict[int, str]:
        """The data file path of each file id."""
        return {file: found.path for file, found in self.files(ids).items()}

    def files(self, ids: Iterable[int]) -> dict[int, IndexedFile]:
        """The data file (path, spec, partition) of each file id."""
        wanted = sorted(set(ids))
        out: dict[int, IndexedFile] = {}
        with self._reading():
            for at in range(0, len(wanted), LOOKUP_CHUNK):
                chunk = wanted[at : at + LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
                statement = (
                    f"SELECT id, path, spec, partition, crc FROM files WHERE id IN ({marks})"
                )
                for file, path, spec, partition, crc in self._conn.execute(statement, chunk):
                    if crc != file_crc(file, path, spec, partition):
                        raise untrusted(self.path, "crc", "a data file's row fails its CRC32")
                    out[file] = IndexedFile(path, spec, partition)
        if len(out) != len(wanted):
            raise untrusted(self.path, "damaged", "an entry names a data file it does not list")
        return out

    def entries_of(self, path: str) -> Iterator[tuple[bytes, int]]:
        """(key, position) of the entries of one data file, in position order (tests, tools)."""
        with self._reading():
            file = self._file_id(IndexedFile(path), create=False)
            if file is None:
                return
            statement = "SELECT key, pos, crc FROM entries WHERE file = ? ORDER BY pos"
            for key, pos, crc in self._conn.execute(statement, (file,)).fetchall():
                if crc != entry_crc(key, file, pos):
                    raise untrusted(self.path, "crc", "an entry fails its CRC32")
                yield key, pos

    # ---- one transaction of changes -------------------------------------------------------

    def begin(self) -> None:
        with self._reading():
            self._conn.execute("BEGIN IMMEDIATE")
        self._delta = 0

    def remove(self, keys: Sequence[bytes]) -> None:
        """Remove the entries of ``keys`` (each one the index holds)."""
        assert self._delta is not None, "no open transaction"
        with self._reading():
            cursor = self._conn.executemany(
                "DELETE FROM entries WHERE key = ?", ((k,) for k in sorted(keys))
            )
            self._delta -= cursor.rowcount

    def move(
        self, data: IndexedFile | str, keys: Sequence[bytes], positions: Sequence[int]
    ) -> None:
        """Point the entries of ``keys`` (each one the index holds: an updated row) at
        ``positions[i]`` of the data file ``data``: one change of each entry in place, where a
        ``remove`` and a ``put`` would change its B-tree page twice."""
        if not keys:
            return
        with self._placing(data, keys, positions) as (file, rows):
            cursor = self._conn.executemany(
                "UPDATE entries SET file = ?, pos = ?, crc = ? WHERE key = ?",
                ((file, pos, entry_crc(key, file, pos), key) for key, pos in rows),
            )
            if cursor.rowcount != len(rows):
                raise untrusted(self.path, "damaged", "an entry it held a moment ago is gone")

    def put(self, data: IndexedFile | str, keys: Sequence[bytes], positions: Sequence[int]) -> None:
        """Add an entry per key: its live row is at ``positions[i]`` of the data file ``data``
        (a path alone: a file of spec 0, unpartitioned)."""
        if not keys:
            return
        with self._placing(data, keys, positions) as (file, rows):
            try:
                self._conn.executemany(
                    "INSERT INTO entries (key, file, pos, crc) VALUES (?, ?, ?, ?)",
                    ((key, file, pos, entry_crc(key, file, pos)) for key, pos in rows),
                )
            except sqlite3.IntegrityError:
                raise duplicate_key(self.path, "a key given as new is in its index") from None
            self._delta = (self._delta or 0) + len(rows)

    @contextlib.contextmanager
    def _placing(
        self, data: IndexedFile | str, keys: Sequence[bytes], positions: Sequence[int]
    ) -> Iterator[tuple[int, list[tuple[bytes, int]]]]:
        """A change of the open transaction: ``data``'s file id (a new one when the index has
        none) and the (key, position) pairs in key order (neighbouring keys share a B-tree
        page: each is written once); SQLite's errors inside typed."""
        assert self._delta is not None, "no open transaction"
        with self._reading():
            file = self._file_id(as_indexed(data), create=True)
            assert file is not None
            yield file, sorted(zip(keys, positions, strict=True))

    def drop_files(self, paths: Iterable[str]) -> None:
        """Remove every entry of the data files ``paths`` and the files themselves (one scan
        of the entries per ``LOOKUP_CHUNK`` files)."""
        assert self._delta is not None, "no open transaction"
        with self._reading():
            found = (self._file_id(IndexedFile(path), create=False) for path in paths)
            files = sorted(file for file in found if file is not None)
            for at in range(0, len(files), LOOKUP_CHUNK):
                chunk = files[at : at + LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
                cursor = self._conn.execute(f"DELETE FROM entries WHERE file IN ({marks})", chunk)
                self._delta -= cursor.rowcount
                self._conn.execute(f"DELETE FROM files WHERE id IN ({marks})", chunk)

    def remove_at(self, deleted: Mapping[str, Collection[int]]) -> None:
        """Remove the entries that name a row of ``deleted`` (data file path -> positions: rows
        another commit deleted by position); an entry naming another row of the key (its row
        moved on) stays. One scan of the entries per ``LOOKUP_CHUNK`` files, each entry of
        theirs probed against the positions (a temporary table of the connection, emptied
        after)."""
        assert self._delta is not None, "no open transaction"
        with self._reading():
            rows: list[tuple[int, int]] = []
            for path, positions in deleted.items():
                file = self._file_id(IndexedFile(path), create=False)
                if file is not None:
                    rows.extend((file, pos) for pos in positions)
            if not rows:
                return
            conn = self._conn
            conn.execute(_GONE_TABLE)
            conn.executemany(f"INSERT OR IGNORE INTO {_GONE} VALUES (?, ?)", sorted(rows))
            files = sorted({file for file, _ in rows})
            for at in range(0, len(files), LOOKUP_CHUNK):
                chunk = files[at : at + LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
                cursor = conn.execute(
                    f"DELETE FROM entries WHERE file IN ({marks}) "
                    f"AND (file, pos) IN (SELECT file, pos FROM {_GONE})",
                    chunk,
                )
                self._delta -= cursor.rowcount
            conn.execute(f"DELETE FROM {_GONE}")

    def commit(self, snapshot: int | None) -> None:
        """Make the open transaction's changes durable, the index now matching ``snapshot``."""
        assert self._delta is not None, "no open transaction"
        meta = IndexMeta(
            FORMAT_VERSION,
            self.meta.table_uuid,
            self.meta.key_spec,
            snapshot,
            self.meta.entries + self._delta,
        )
        try:
            with self._reading():
                write_meta(self._conn, meta)
                self._conn.execute("COMMIT")
        except BaseException:
            self.rollback()
            raise
        self.meta, self._delta = meta, None

    def rollback(self) -> None:
        """Forget the open transaction's changes (none reached the file)."""
        if self._delta is None:
            return
        self._delta = None
        with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled it back itself
            self._conn.execute("ROLLBACK")

    # ---- helpers -------------------------------------------------------------------------

    def _file_id(self, data: IndexedFile, *, create: bool) -> int | None:
        """The id of ``data``'s path (``create``: a new one when the index has none)."""
        statement = "SELECT id, spec, partition, crc FROM files WHERE path = ?"
        row = self._conn.execute(statement, (data.path,)).fetchone()
        if row is not None:
            if row[3] != file_crc(row[0], data.path, row[1], row[2]):
                raise untrusted(self.path, "crc", "a data file's row fails its CRC32")
            return int(row[0])
        if not create:
            return None
        (last,) = self._conn.execute("SELECT coalesce(max(id), 0) FROM files").fetchone()
        file = int(last) + 1
        insert_file(self._conn, file, data)
        return file

    def _reading(self) -> SQLiteErrors:
        return SQLiteErrors(self.path)


class SQLiteErrors:
    """SQLite's errors as typed ones: a full disk, a damaged file (``KeyIndexUntrustedError``),
    anything else a ``FileAccessError`` naming the file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, error: BaseException | None, _tb: object) -> None:
        if not isinstance(error, sqlite3.DatabaseError) or isinstance(
            error, sqlite3.IntegrityError
        ):
            return
        message = str(error).lower()
        if "full" in message:
            raise DiskFullError(
                f"disk full while writing key index {self.path.name}", file=str(self.path)
            ) from None
        if any(mark in message for mark in DAMAGE_MARKS):
            raise untrusted(self.path, "damaged", f"SQLite reports: {error}") from None
        raise FileAccessError(
            f"key index {self.path.name}: SQLite reports: {error}", file=str(self.path)
        ) from None


def as_indexed(data: IndexedFile | str) -> IndexedFile:
    return IndexedFile(data) if isinstance(data, str) else data


def insert_file(conn: sqlite3.Connection, file: int, data: IndexedFile) -> None:
    conn.execute(
        "INSERT INTO files (id, path, spec, partition, crc) VALUES (?, ?, ?, ?, ?)",
        (
            file,
            data.path,
            data.spec,
            data.partition,
            file_crc(file, data.path, data.spec, data.partition),
        ),
    )


def duplicate_key(path: Path, detail: str) -> KeyIndexDuplicateKeyError:
    return KeyIndexDuplicateKeyError(
        f"the lake table would hold two live rows of one key ({detail})",
        file=str(path),
        reason="duplicate key",
    )


def write_meta(conn: sqlite3.Connection, meta: IndexMeta) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO meta (id, version, table_uuid, key_spec, snapshot, entries, crc) "
        "VALUES (1, ?, ?, ?, ?, ?, ?)",
        (meta.version, meta.table_uuid, meta.key_spec, meta.snapshot, meta.entries, meta.crc),
    )


def _checked_meta(
    path: Path, conn: sqlite3.Connection, table_uuid: str, key_spec: str
) -> IndexMeta:
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version > FORMAT_VERSION:
        raise KeyIndexVersionError(
            f"key index {path.name} is of format version {version}; this binlake reads "
            f"version {FORMAT_VERSION}",
            file=str(path),
            reason="newer version",
            version=int(version),
        )
    if 0 < version < FORMAT_VERSION:
        raise untrusted(
            path,
            "older version",
            f"it is of format version {version}, written by an older binlake (this one writes "
            f"version {FORMAT_VERSION})",
        )
    if version != FORMAT_VERSION:
        raise untrusted(path, "damaged", f"its format version is {version}")
    rows = conn.execute(
        "SELECT version, table_uuid, key_spec, snapshot, entries, crc FROM meta"
    ).fetchall()
    if len(rows) != 1:
        raise untrusted(path, "damaged", f"it has {len(rows)} meta rows")
    *values, crc = rows[0]
    meta = IndexMeta(*values)
    if crc != meta.crc or meta.version != version:
        raise untrusted(path, "crc", "its meta row fails its CRC32")
    if meta.table_uuid != table_uuid:
        raise untrusted(path, "other table", f"it is the index of table {meta.table_uuid}")
    if meta.key_spec != key_spec:
        raise untrusted(
            path, "key changed", f"it indexes the key {meta.key_spec}, the table's is {key_spec}"
        )
    return meta


class WholeFileCheck:
    """SQLite's structural check of every page and the entries counted against the meta row (a
    page lost or cut off loses entries no CRC can name), on a connection of its own in a thread
    of its own: SQLite releases the GIL, so at 10 M keys its 2 s run beside the first batch's
    staging instead of before it. It reads one snapshot of the file: the meta row and the count
    agree whatever the batch commits meanwhile."""

    def __init__(self, path: Path, meta: IndexMeta) -> None:
        self.path = path
        self.meta = meta
        self._error: BaseException | None = None
        self._worker = threading.Thread(target=self._run, name="binlake-keyindex-check")
        self._worker.daemon = True
        self._worker.start()

    def wait(self) -> None:
        self._worker.join()

    def result(self) -> None:
        """Wait; raise what the check found."""
        self._worker.join()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        try:
            conn = connect(self.path)
            try:
                conn.execute("BEGIN")
                self._check(conn)
                conn.execute("COMMIT")
            finally:
                conn.close()
        except sqlite3.Error as error:
            self._error = untrusted(self.path, "damaged", f"SQLite reports: {error}")
        except BaseException as error:  # raised by ``result``, in the caller
            self._error = error

    def _check(self, conn: sqlite3.Connection) -> None:
        path, meta = self.path, self.meta
        problems = [row[0] for row in conn.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            raise untrusted(path, "damaged", f"SQLite's check finds: {'; '.join(problems)}")
        entries = _checked_meta(path, conn, meta.table_uuid, meta.key_spec).entries
        (count,) = conn.execute("SELECT count(*) FROM entries").fetchone()
        if count != entries:
            raise untrusted(
                path, "damaged", f"it holds {count} entries, its meta row says {entries}"
            )
