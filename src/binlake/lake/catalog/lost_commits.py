"""Embedded-catalog rows a power cut left ahead of their files, set back on start (issue #38).

Iceberg's JDBC catalog commits a table by writing its next metadata file (and before it the
snapshot's manifest list, manifests and data files) through Hadoop's local file system, which
never fsyncs, then updating the table's ``iceberg_tables`` row in ``catalog.sqlite``, which
SQLite makes durable at once (``synchronous=FULL``). binlake fsyncs the warehouse before its
checkpoint moves past a commit (``binlake.storage.warehouse_sync``), so the relay log still holds
every transaction of a commit that was not fsynced yet. But the row itself is durable before the
files it names: a power cut in between leaves a row whose metadata file is missing or torn, and
the table unreadable (the power-cut tier found it: ``FileNotFoundException`` for
``<N>-<uuid>.metadata.json``).

``set_back_lost_commits`` runs before Spark starts (``prepare_embedded_catalog``): a row whose
metadata file is not whole (missing, not JSON, or a manifest list of the snapshots its refs
name missing or not ending in its Avro sync marker) is set back to the newest version that is
whole: its ``previous_metadata_location`` when that one is, else the highest-numbered whole
metadata file of the table below the lost one (only when one file has that number: two mean a
commit that lost a race left its file, and which won is unknown). The restart then applies the
lost commit's transactions again from the relay log, by position. A row with no metadata file
left at all was a table created after the last fsync: the row goes too (the restart creates the
table again). A table with metadata files none of which is whole is refused
(``TargetError``, check ``lost_commit``): its durable history is gone.

What this does not see: a data or delete file, or a manifest, lost under a whole metadata file
and manifest list (a real disk may write pages back in any order; the power-cut file system
drops every unsynced write together, so it cannot). Iceberg would have to fsync its files before
the catalog commit for that (a FileIO of binlake's in the JVM): not done.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from binlake.errors import FileAccessError, TargetError
from binlake.lake.catalog.metadata import load_metadata, location_path

__all__ = ["LOST_COMMIT", "SetBack", "set_back_lost_commits", "whole_metadata"]

#: ``<N>-<uuid>.metadata.json`` (the JDBC catalog's) or ``v<N>.metadata.json`` (an adopted
#: Hadoop table's), gzip-compressed ones too.
_NUMBERED = re.compile(r"^(?:(\d+)-[0-9a-fA-F-]+|v(\d+))(?:\.gz)?\.metadata\.json$")
_AVRO_MAGIC = b"Obj\x01"
_SYNC_BYTES = 16


@dataclass(frozen=True)
class SetBack:
    """One row set back: the table, the lost metadata file, and the one now current (None:
    the row removed, the table's creation lost)."""

    namespace: str
    table: str
    lost: str
    current: str | None


def set_back_lost_commits(db: sqlite3.Connection, catalog: str) -> list[SetBack]:
    """Set back every row of ``catalog`` whose metadata file is not whole (module doc).
    ``db`` in autocommit mode: the rows are checked without a lock (a running writer's commits
    go on), and each row found not whole is checked again and set back in a transaction of
    its own that holds the write lock (a row a commit moved on meanwhile is left alone)."""
    rows = db.execute(
        "SELECT table_namespace, table_name, metadata_location FROM iceberg_tables "
        "WHERE catalog_name = ?",
        (catalog,),
    ).fetchall()
    done = []
    for namespace, table, location in rows:
        if whole_metadata(location_path(location)):
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            set_back = _set_back(db, catalog, namespace, table)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        if set_back is not None:
            done.append(set_back)
    return done


def _set_back(db: sqlite3.Connection, catalog: str, namespace: str, table: str) -> SetBack | None:
    row = db.execute(
        "SELECT metadata_location, previous_metadata_location FROM iceberg_tables "
        "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
        (catalog, namespace, table),
    ).fetchone()
    if row is None or whole_metadata(location_path(row[0])):
        return None
    location, previous = row
    current = _fallback(location_path(location), previous)
    if current is None:
        db.execute(
            "DELETE FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? "
            "AND table_name = ? AND metadata_location = ?",
            (catalog, namespace, table, location),
        )
    else:
        db.execute(
            "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = "
            "NULL WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? "
            "AND metadata_location = ?",
            (current, catalog, namespace, table, location),
        )
    return SetBack(namespace, table, location, current)


def _fallback(lost: Path, previous: str | None) -> str | None:
    """The location to set a row back to, None when the table has no metadata file at all."""
    if previous is not None and whole_metadata(location_path(previous)):
        return previous
    below = _number(lost.name)
    numbered = _numbered_files(lost.parent)
    if not numbered:
        return None
    for number in sorted({n for n, _ in numbered if below is None or n < below}, reverse=True):
        whole = [p for n, p in numbered if n == number and whole_metadata(p)]
        if len(whole) == 1:
            return str(whole[0].absolute())
        if whole:
            raise _refusal(lost, f"{len(whole)} whole metadata files numbered {number}")
    raise _refusal(lost, "no whole metadata file is left")


#: ``TargetError.check`` of a table ``set_back_lost_commits`` cannot set back.
LOST_COMMIT = "lost_commit"


def _refusal(lost: Path, why: str) -> TargetError:
    return TargetError(
        f"the catalog names {lost.name}, lost in a power cut, and {why}",
        hint="restore the warehouse from a backup, or drop the table (binlake snapshot "
        "--tables DB.TABLE copies it again)",
        file=str(lost),
        table=lost.parent.parent.name,
        check=LOST_COMMIT,
    )


def _numbered_files(meta_dir: Path) -> list[tuple[int, Path]]:
    if not meta_dir.is_dir():
        return []
    found = []
    for path in meta_dir.iterdir():
        number = _number(path.name)
        if number is not None:
            found.append((number, path))
    return found


def _number(name: str) -> int | None:
    match = _NUMBERED.match(name)
    if match is None:
        return None
    return int(match.group(1) or match.group(2))


def whole_metadata(path: Path) -> bool:
    """Whether ``path`` is a metadata file that parses, whose refs' snapshots (and the
    current one) have whole manifest lists."""
    try:
        metadata = load_metadata(path)
    except FileAccessError:  # missing, torn, not JSON
        return False
    return all(_whole_avro(location_path(m)) for m in _manifest_lists(metadata))


def _manifest_lists(metadata: dict[str, Any]) -> list[str]:
    named = {ref.get("snapshot-id") for ref in (metadata.get("refs") or {}).values()}
    named.add(metadata.get("current-snapshot-id"))
    lists = []
    for snapshot in metadata.get("snapshots") or []:
        if snapshot.get("snapshot-id") in named and snapshot.get("manifest-list"):
            lists.append(str(snapshot["manifest-list"]))
    return lists


def _whole_avro(path: Path) -> bool:
    """An Avro container file that ends with the sync marker its header declares (a file cut
    short ends inside a block)."""
    try:
        data = path.read_bytes()
    except OSError:
        return False
    if not data.startswith(_AVRO_MAGIC):
        return False
    at = _skip_header_map(data, len(_AVRO_MAGIC))
    if at is None or len(data) < at + _SYNC_BYTES:
        return False
    return data.endswith(data[at : at + _SYNC_BYTES])


def _skip_header_map(data: bytes, at: int) -> int | None:
    """Where the header's metadata map (Avro map of bytes) ends, None when cut short."""
    while True:
        read = _long(data, at)
        if read is None:
            return None
        count, at = read
        if count == 0:
            return at
        if count < 0:  # a block with its size in bytes: skip it whole
            size = _long(data, at)
            if size is None:
                return None
            at = size[1] + size[0]
            continue
        for _ in range(2 * count):  # key, value: each a length and bytes
            length = _long(data, at)
            if length is None or length[0] < 0:
                return None
            at = length[1] + length[0]
        if at > len(data):
            return None


def _long(data: bytes, at: int) -> tuple[int, int] | None:
    """An Avro long (zig-zag varint) at ``at``: (value, where it ends)."""
    shift = value = 0
    while at < len(data):
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), at
        shift += 7
    return None
