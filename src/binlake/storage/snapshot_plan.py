"""``snapshot.plan``: the tables whose existing rows must be copied into the lake.

The plan is the only durable record that a snapshot is owed: which tables, and under which
snapshot id. What a table's snapshot has copied so far is not kept here but in the table's own
Iceberg commits (the ``binlake.snapshot`` summary property, ``binlake.snapshot.copier``), so
after a crash the plan says what to do and the lake says how far it got.

Format: UTF-8 JSON, ``{"version": 2, "tables": [{"database": "...", "table": "...", "id":
"...", "reason": "..."}]}``, written with ``atomic_replace`` (temp file, fsync, rename, fsync
the folder). Names are (database, table) pairs: a database or table name may hold a dot.
Version 1 (``"tables": {"db.t": {...}}``, written before binlake carried pairs) is still read,
each key split at its first dot, as binlake then meant it. A table leaves the
plan only after its last chunk is committed; a crash in between copies nothing again (the lake
says the snapshot with that id is done).

Requests from ``binlake snapshot`` while a replicator holds the state folder's lock are files
in ``snapshot-requests/`` (one per request, also written with ``atomic_replace``): the running
applier moves them into the plan (plan first, then the request file is removed), so a crash in
between only repeats the move.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from binlake.binlog.names import TableName
from binlake.crashpoints import crash_point
from binlake.errors import SnapshotPlanError
from binlake.storage.durable import atomic_replace, fsync_dir, make_folder, raise_os_error

VERSION = 2
#: The plan and requests binlake wrote before names were pairs (read, never written).
VERSION_DOTTED = 1
REQUEST_SUFFIX = ".request"


@dataclass(frozen=True, slots=True)
class PlanEntry:
    table: TableName
    #: Names one snapshot of the table; its chunks carry it in their commits.
    id: str
    #: "initial" (new state folder) or "requested" (``binlake snapshot``).
    reason: str


def new_snapshot_id() -> str:
    """A unique id that sorts by creation time (requests are taken in that order)."""
    now = time.time_ns()
    seconds, nanos = divmod(now, 1_000_000_000)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(seconds))
    return f"{stamp}.{nanos:09d}-{secrets.token_hex(4)}"


class SnapshotPlan:
    """The plan file at ``path`` (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[TableName, PlanEntry]:
        try:
            text = self.path.read_text("utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise SnapshotPlanError(
                f"cannot read the snapshot plan: {exc}", file=str(self.path)
            ) from None
        return _parse(text, self.path)

    def add(self, tables: Iterable[TableName], reason: str) -> dict[TableName, PlanEntry]:
        """Record ``tables`` (a new snapshot id each, replacing any entry they had)."""
        entries = self.read()
        for table in tables:
            entries[table] = PlanEntry(table, new_snapshot_id(), reason)
        self._write(entries)
        crash_point("snapshot_after_plan")
        return entries

    def done(self, *done: PlanEntry) -> None:
        """These entries' snapshots are in the lake: drop them (each unless a newer request
        replaced it), in one write of the plan."""
        entries = self.read()
        gone = [entry.table for entry in done if entries.get(entry.table) == entry]
        for table in gone:
            del entries[table]
        if gone:
            self._write(entries)

    def _write(self, entries: dict[TableName, PlanEntry]) -> None:
        data = {
            "version": VERSION,
            "tables": [
                {"database": t.database, "table": t.table, "id": e.id, "reason": e.reason}
                for t, e in sorted(entries.items())
            ],
        }
        text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        atomic_replace(self.path, text.encode("utf-8"), "snapshot plan")


def _parse(text: str, path: Path) -> dict[TableName, PlanEntry]:
    try:
        data = json.loads(text)
        version = data.get("version")
        if version == VERSION_DOTTED:
            entries = [
                (_dotted(key), value["id"], value["reason"])
                for key, value in data["tables"].items()
            ]
        elif version == VERSION:
            entries = [
                (TableName(_text(e["database"]), _text(e["table"])), e["id"], e["reason"])
                for e in data["tables"]
            ]
        else:
            raise ValueError(f"version {version!r}")
        return {name: PlanEntry(name, str(id_), str(reason)) for name, id_, reason in entries}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SnapshotPlanError(f"the snapshot plan is not valid: {exc}", file=str(path)) from None


def _text(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{value!r} is not a name")
    return value


def _dotted(key: object) -> TableName:
    """A version-1 ``db.table`` key: split at its first dot."""
    database, dot, table = _text(key).partition(".")
    if not dot or not database or not table:
        raise ValueError(f"{key!r} is not db.table")
    return TableName(database, table)


# ---- requests from another process -----------------------------------------------------------


def write_request(folder: Path, tables: Iterable[TableName]) -> Path:
    """A request for a running replicator to snapshot ``tables`` again."""
    make_folder(folder, "snapshot request")
    path = folder / f"{new_snapshot_id()}{REQUEST_SUFFIX}"
    names = [[t.database, t.table] for t in sorted(set(tables))]
    text = json.dumps({"version": VERSION, "tables": names}, ensure_ascii=False) + "\n"
    atomic_replace(path, text.encode("utf-8"), "snapshot request")
    return path


def take_requests(folder: Path, plan: SnapshotPlan) -> list[TableName]:
    """Move the pending requests into ``plan``; the tables they named."""
    try:
        paths = sorted(folder.glob(f"*{REQUEST_SUFFIX}"))
    except OSError as exc:
        raise_os_error(exc, folder, "listing snapshot requests")
    tables: list[TableName] = []
    for path in paths:
        try:
            tables.extend(_request_tables(json.loads(path.read_text("utf-8"))))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SnapshotPlanError(
                f"snapshot request {path.name} is not valid: {exc}", file=str(path)
            ) from None
    if not paths:
        return []
    plan.add(dict.fromkeys(tables), "requested")
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise_os_error(exc, path, "removing a snapshot request")
    fsync_dir(folder, "snapshot requests")
    return tables


def _request_tables(data: dict[str, object]) -> list[TableName]:
    """The tables of a request: [database, table] pairs (version 2) or ``db.table`` text
    (version 1)."""
    tables = data["tables"]
    if not isinstance(tables, list):
        raise TypeError("tables is not a list")
    if data.get("version") == VERSION_DOTTED:
        return [_dotted(t) for t in tables]
    if data.get("version") != VERSION:
        raise ValueError(f"version {data.get('version')!r}")
    return [TableName(_text(database), _text(table)) for database, table in tables]
