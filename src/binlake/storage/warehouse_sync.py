"""Fsync of a local Iceberg warehouse, so that the relay-log checkpoint never outruns the lake.

Iceberg's Hadoop catalog on a local folder (binlake's embedded warehouse) writes data files,
manifests, ``v<N>.metadata.json`` and ``version-hint.text`` (each with Hadoop's ``.crc``) and
never fsyncs any of them (strace, docs/benchmarks.md): a commit sits in the page cache. The
relay-log checkpoint (``binlake.storage.checkpoint``) is fsynced, and purge removes the relay
files before it; after a power loss the commit could be gone while the transactions it held are
no longer in the relay log. The rule this module serves: the Iceberg files of every commit are
durable before the checkpoint records a position past them.

``WarehouseSync`` is told which folders had commits and since when (``note``, or the
``committing()`` window around code that commits); ``sync()``, which the checkpoint tracker runs
just before it writes a record, then fsyncs:

* every regular file under a noted folder whose mtime is not older than the note (less
  ``MTIME_SLACK_NS``: file systems that keep whole seconds, a coarse kernel clock);
* every folder there that holds such a file, or whose own entries changed since the note (its
  mtime: a file or sub-folder created, renamed or removed in it: new data partitions, a new
  table, a dropped one), up to the warehouse root.

A folder holding ``metadata/`` is an Iceberg table (the Hadoop catalog lays ``ns.tbl`` out as
``<warehouse>/ns/tbl/{data,metadata}``). Every Iceberg commit creates files in ``metadata/``,
so a table whose ``metadata/`` has not changed since the note had no commit and is skipped
without walking its data files: noting the whole warehouse stays cheap.

Notes are forgotten once synced. A ``sync()`` inside a ``committing()`` window (the checkpoint
can move in the middle of a batch, when a pending DDL is released) keeps the window's folder
noted from the sync's start, so the window's later commits are synced by the next one.

A JDBC catalog with a local warehouse lays its tables out the same way (its metadata files are
named ``<N>-<uuid>.metadata.json``, still in ``metadata/``) and is synced the same way. Object
stores and catalogs binlake does not lay out (REST, Hive, Glue, S3, HDFS...) make a commit
durable before acknowledging it, or are not files here: ``warehouse_sync_for`` gives
``NoWarehouseSync`` for them.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlsplit

from binlake.storage.durable import fsync_dir, fsync_fd, raise_os_error

FSYNC_PURPOSE = "warehouse"
#: How much older than its note a changed file's mtime may look: ext4 with small inodes and
#: HFS+ keep whole seconds, FAT two; the kernel's file clock is coarser than ``time_ns``.
MTIME_SLACK_NS = 2_000_000_000
#: The folder that makes a folder an Iceberg table (Hadoop catalog layout).
METADATA_DIR = "metadata"


class CatalogTarget(Protocol):
    """What ``warehouse_sync_for`` reads of a lake target (``binlake.lake.catalog.target``)."""

    @property
    def warehouse(self) -> Path: ...

    @property
    def catalog(self) -> str: ...

    @property
    def spark_conf(self) -> Mapping[str, str]: ...


@dataclass
class _SyncPlan:
    """What one ``sync()`` fsyncs."""

    #: Ordered, without duplicates (two notes may cover one file).
    files: dict[Path, None] = field(default_factory=dict)
    dirs: dict[Path, None] = field(default_factory=dict)


class WarehouseSync:
    """Fsyncs what changed under noted folders of a local warehouse (see the module doc)."""

    def __init__(self, root: Path, *, slack_ns: int = MTIME_SLACK_NS) -> None:
        self.root = Path(os.path.abspath(root))
        self.slack_ns = slack_ns
        #: Totals, for tests and benchmarks: ``sync()`` calls that had notes, files and
        #: folders fsynced.
        self.syncs = 0
        self.files_synced = 0
        self.dirs_synced = 0
        self._notes: dict[Path, int] = {}
        self._windows: list[Path] = []

    @property
    def noted(self) -> dict[Path, int]:
        """Folders waiting for ``sync()``, each with the oldest time (ns) noted for it."""
        return dict(self._notes)

    def note(self, folder: Path | None = None, since_ns: int | None = None) -> int:
        """Files under ``folder`` (default: the whole warehouse) changed from ``since_ns``
        (default: now) on; returns that time. Folders outside the warehouse are refused."""
        since = time.time_ns() if since_ns is None else since_ns
        target = self.root if folder is None else Path(os.path.abspath(folder))
        if target != self.root and self.root not in target.parents:
            raise ValueError(f"{target} is not inside the warehouse {self.root}")
        self._notes[target] = min(since, self._notes.get(target, since))
        return since

    @contextmanager
    def committing(self, folder: Path | None = None) -> Iterator[None]:
        """Around code that commits to ``folder`` (default: the whole warehouse): noted from
        the start, and kept noted by any ``sync()`` run inside."""
        target = self.root if folder is None else Path(os.path.abspath(folder))
        self.note(target)
        self._windows.append(target)
        try:
            yield
        finally:
            self._windows.remove(target)

    def sync(self) -> None:
        """Fsync what changed under the noted folders since their notes, then forget them."""
        if not self._notes:
            return
        started = time.time_ns()
        notes, self._notes = self._notes, {}
        try:
            plan = _SyncPlan()
            for folder, since in sorted(notes.items()):
                self._collect(folder, since - self.slack_ns, plan)
            self._fsync(plan)
        except BaseException:
            for folder, since in notes.items():
                self.note(folder, since)
            raise
        for folder in self._windows:
            self.note(folder, started)

    # ---- walking ---------------------------------------------------------------------------

    def _collect(self, folder: Path, threshold: int, plan: _SyncPlan) -> None:
        """Add what changed under ``folder`` since ``threshold``, and its changed parents."""
        self._walk(folder, threshold, plan)
        if folder == self.root:
            return
        for parent in folder.parents:
            if _changed_since(parent, threshold):
                plan.dirs[parent] = None  # a table or namespace created, renamed or removed
            if parent == self.root:
                return

    def _walk(self, folder: Path, threshold: int, plan: _SyncPlan) -> None:
        entries = _entries(folder)
        if entries is None:
            return  # removed (a dropped table): its parent's mtime says so
        table = entries.get(METADATA_DIR)
        if table is not None and stat.S_ISDIR(table.st_mode) and table.st_mtime_ns < threshold:
            return  # an Iceberg table without a commit since the note
        holds_changed = False
        for name, info in entries.items():
            if stat.S_ISDIR(info.st_mode):
                self._walk(folder / name, threshold, plan)
            elif stat.S_ISREG(info.st_mode) and info.st_mtime_ns >= threshold:
                plan.files[folder / name] = None
                holds_changed = True
        if holds_changed or _changed_since(folder, threshold):
            plan.dirs[folder] = None

    def _fsync(self, plan: _SyncPlan) -> None:
        self.syncs += 1
        for path in plan.files:
            if _fsync_file(path):
                self.files_synced += 1
        for folder in plan.dirs:
            if folder.is_dir():
                fsync_dir(folder, FSYNC_PURPOSE)
                self.dirs_synced += 1


class NoWarehouseSync(WarehouseSync):
    """For a warehouse that is not a local folder of ours: notes nothing, fsyncs nothing."""

    def __init__(self) -> None:
        super().__init__(Path("/"))

    def note(self, folder: Path | None = None, since_ns: int | None = None) -> int:
        return time.time_ns() if since_ns is None else since_ns

    def sync(self) -> None:
        return


def _entries(folder: Path) -> dict[str, os.stat_result] | None:
    """The entries of ``folder`` (not following symlinks), None when it is gone."""
    try:
        with os.scandir(folder) as it:
            return {entry.name: entry.stat(follow_symlinks=False) for entry in it}
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise_os_error(exc, folder, "listing a warehouse folder")


def _changed_since(folder: Path, threshold: int) -> bool:
    try:
        return os.stat(folder).st_mtime_ns >= threshold
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise_os_error(exc, folder, "reading a warehouse folder")


def _fsync_file(path: Path) -> bool:
    """Fsync one file; False when it is gone (a temp file renamed or removed since the walk)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise_os_error(exc, path, "opening a warehouse file")
    try:
        fsync_fd(fd, FSYNC_PURPOSE, path)
    finally:
        os.close(fd)
    return True


# ---- which warehouses are ours to sync ---------------------------------------------------------


def local_folder(location: str) -> Path | None:
    """The local folder a warehouse location names (a path or a ``file:`` URI), else None."""
    parts = urlsplit(location)
    if not parts.scheme:
        return Path(os.path.abspath(location))
    if parts.scheme == "file" and parts.netloc in ("", "localhost") and parts.path:
        return Path(os.path.abspath(unquote(parts.path)))
    return None  # s3://, s3a://, hdfs://, gs://, abfs://...


def local_warehouse(target: CatalogTarget) -> Path | None:
    """The folder of ``target``'s catalog when its files are in a local folder: the embedded
    Hadoop catalog (``[target] warehouse``), a Hadoop catalog ``[spark]`` defines with ``type =
    hadoop``, or a JDBC catalog (``[catalog]``) with a ``file:`` warehouse (its database makes
    the commit's pointer durable, not the files it points at)."""
    prefix = f"spark.sql.catalog.{target.catalog}"
    conf = target.spark_conf
    embedded = prefix not in conf
    if conf.get(f"{prefix}.type", "hadoop" if embedded else None) not in ("hadoop", "jdbc"):
        return None
    if f"{prefix}.catalog-impl" in conf:
        return None
    location = conf.get(f"{prefix}.warehouse", str(target.warehouse) if embedded else None)
    return None if location is None else local_folder(location)


def warehouse_sync_for(
    target: CatalogTarget, *, unsynced_since: int | None = None
) -> WarehouseSync:
    """The sync for ``target``'s warehouse (``NoWarehouseSync`` when it is not a local folder).
    ``unsynced_since``: changes from then on may not be durable yet (the last checkpoint
    record's time: snapshots and an earlier run's commits since), so the whole warehouse is
    noted from then; None when no record exists: everything is noted once."""
    root = local_warehouse(target)
    if root is None:
        return NoWarehouseSync()
    sync = WarehouseSync(root)
    sync.note(None, 0 if unsynced_since is None else unsynced_since)
    return sync
