"""Fsync of the embedded warehouse before the checkpoint moves: which files and folders a sync
covers (real files, mtimes set by hand), when it is a no-op, and that the checkpoint record is
written only after it."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from binlake.errors import FileAccessError
from binlake.storage import durable, warehouse_sync
from binlake.storage.checkpoint import CheckpointRecord, CheckpointTracker
from binlake.storage.durable import FSYNC_COUNTS
from binlake.storage.warehouse_sync import (
    NoWarehouseSync,
    WarehouseSync,
    local_folder,
    local_warehouse,
    warehouse_sync_for,
)

S = 1_000_000_000
#: A time well after every file the tests make "old".
NOTE_NS = time.time_ns()
OLD_NS = NOTE_NS - 3600 * S
#: A time after every note a test takes (notes are real time: the suite may run for long after
#: this module is imported).
NEW_NS = NOTE_NS + 86_400 * S


@dataclass
class Synced:
    """Paths fsynced, recorded by wrapping the module's fsync helpers."""

    files: list[Path] = field(default_factory=list)
    dirs: list[Path] = field(default_factory=list)

    def clear(self) -> None:
        self.files.clear()
        self.dirs.clear()


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> Iterator[Synced]:
    seen = Synced()
    real_fd, real_dir = durable.fsync_fd, durable.fsync_dir

    def fsync_fd(fd: int, purpose: str, path: str | os.PathLike[str] = "") -> None:
        seen.files.append(Path(path))
        real_fd(fd, purpose, path)

    def fsync_dir(folder: str | os.PathLike[str], purpose: str) -> None:
        seen.dirs.append(Path(folder))
        real_dir(folder, purpose)

    monkeypatch.setattr("binlake.storage.warehouse_sync.fsync_fd", fsync_fd)
    monkeypatch.setattr("binlake.storage.warehouse_sync.fsync_dir", fsync_dir)
    yield seen


def write(path: Path, mtime_ns: int = NEW_NS) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def age(*folders: Path, mtime_ns: int = OLD_NS) -> None:
    for folder in folders:
        os.utime(folder, ns=(mtime_ns, mtime_ns))


def old_table(warehouse: Path, name: str = "db/orders") -> Path:
    """A Hadoop-catalog table folder whose files and folders all predate the note."""
    table = warehouse / name
    write(table / "data" / "00000-1.parquet", OLD_NS)
    write(table / "metadata" / "v1.metadata.json", OLD_NS)
    write(table / "metadata" / "version-hint.text", OLD_NS)
    age(table / "data", table / "metadata", table, table.parent, warehouse)
    return table


def commit(table: Path, version: int, partition: str = "") -> list[Path]:
    """Files an Iceberg commit writes (new files only, as Iceberg does), folders dated by it."""
    data = table / "data" / partition if partition else table / "data"
    files = [
        write(data / f"0000{version}-1.parquet"),
        write(data / f".0000{version}-1.parquet.crc"),
        write(table / "metadata" / f"v{version}.metadata.json"),
        write(table / "metadata" / "version-hint.text"),
    ]
    age(*{f.parent for f in files}, mtime_ns=NEW_NS)
    if partition:
        age(table / "data", mtime_ns=NEW_NS)
    return files


# ---- what a sync covers ------------------------------------------------------------------------


def test_only_files_changed_since_the_note_are_synced(tmp_path: Path, synced: Synced) -> None:
    table = old_table(tmp_path)
    sync = WarehouseSync(tmp_path)
    sync.note(table, NOTE_NS)
    new = commit(table, 2)
    sync.sync()
    assert sorted(synced.files) == sorted(new)
    assert sorted(synced.dirs) == [table / "data", table / "metadata"]
    assert (sync.files_synced, sync.dirs_synced, sync.syncs) == (4, 2, 1)


def test_files_within_the_slack_before_the_note_are_synced(tmp_path: Path, synced: Synced) -> None:
    # A file system keeping whole seconds dates a file written just after the note before it.
    table = old_table(tmp_path)
    early = write(table / "metadata" / "v2.metadata.json", NOTE_NS - S)
    sync = WarehouseSync(tmp_path, slack_ns=2 * S)
    sync.note(table, NOTE_NS)
    sync.sync()
    assert early in synced.files


def test_sync_without_notes_touches_nothing(
    tmp_path: Path, synced: Synced, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit(old_table(tmp_path), 2)
    sync = WarehouseSync(tmp_path)

    def no_walk(*_args: object) -> None:
        raise AssertionError("a sync without notes walked the warehouse")

    monkeypatch.setattr(warehouse_sync, "_entries", no_walk)
    monkeypatch.setattr(warehouse_sync, "_changed_since", no_walk)
    sync.sync()
    assert synced.files == synced.dirs == []
    assert (sync.files_synced, sync.dirs_synced, sync.syncs) == (0, 0, 0)


def test_notes_are_forgotten_once_synced(tmp_path: Path, synced: Synced) -> None:
    table = old_table(tmp_path)
    sync = WarehouseSync(tmp_path)
    sync.note(table, NOTE_NS)
    commit(table, 2)
    sync.sync()
    synced.clear()
    assert sync.noted == {}
    sync.sync()
    assert synced.files == synced.dirs == []


def test_a_new_partition_folder_and_the_folder_holding_it_are_synced(
    tmp_path: Path, synced: Synced
) -> None:
    table = old_table(tmp_path)
    sync = WarehouseSync(tmp_path)
    sync.note(table, NOTE_NS)
    commit(table, 2, partition="day=2024-01-01")
    sync.sync()
    assert table / "data" / "day=2024-01-01" in synced.dirs
    assert table / "data" in synced.dirs  # the new partition's entry


def test_the_counts_go_to_the_warehouse_purpose(tmp_path: Path) -> None:
    table = old_table(tmp_path)
    sync = WarehouseSync(tmp_path)
    sync.note(table, NOTE_NS)
    commit(table, 2)
    before = FSYNC_COUNTS["warehouse"]
    sync.sync()
    assert FSYNC_COUNTS["warehouse"] - before == sync.files_synced + sync.dirs_synced == 6


# ---- the whole warehouse, new and dropped tables -----------------------------------------------


def test_noting_the_warehouse_walks_only_tables_with_a_commit(
    tmp_path: Path, synced: Synced
) -> None:
    orders, lines = old_table(tmp_path, "db/orders"), old_table(tmp_path, "db/lines")
    stray = write(lines / "data" / "orphan.parquet")  # a failed write: no commit in metadata/
    age(lines / "data")
    sync = WarehouseSync(tmp_path)
    sync.note(None, NOTE_NS)
    new = commit(orders, 2)
    sync.sync()
    assert sorted(synced.files) == sorted(new)
    assert stray not in synced.files


def test_a_new_table_syncs_its_namespace_and_the_warehouse(tmp_path: Path, synced: Synced) -> None:
    old_table(tmp_path, "db/orders")
    sync = WarehouseSync(tmp_path)
    sync.note(None, NOTE_NS)
    fresh = tmp_path / "db2" / "audit"
    new = commit(fresh, 1)
    age(fresh, fresh.parent, tmp_path, mtime_ns=NEW_NS)
    sync.sync()
    assert sorted(synced.files) == sorted(new)
    assert {fresh, fresh.parent, tmp_path} <= set(synced.dirs)


def test_a_dropped_table_syncs_the_folder_that_held_it(tmp_path: Path, synced: Synced) -> None:
    table = old_table(tmp_path, "db/orders")
    sync = WarehouseSync(tmp_path)
    sync.note(table, NOTE_NS)
    shutil.rmtree(table)
    age(table.parent, mtime_ns=NEW_NS)
    sync.sync()
    assert synced.files == []
    assert synced.dirs == [table.parent]


def test_a_folder_outside_the_warehouse_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not inside the warehouse"):
        WarehouseSync(tmp_path / "warehouse").note(tmp_path / "elsewhere", NOTE_NS)


# ---- windows and failures ----------------------------------------------------------------------


def test_a_sync_inside_a_commit_window_leaves_the_window_noted(
    tmp_path: Path, synced: Synced
) -> None:
    # A pending DDL released mid-batch moves the checkpoint between two commits of the batch.
    # The default slack: the second write dates its folder with the kernel's coarse clock, which
    # may read a few ms before the fine ``time_ns`` the re-note took (CI failed on slack 0).
    table = old_table(tmp_path)
    sync = WarehouseSync(tmp_path)
    with sync.committing():
        first = commit(table, 2)
        sync.sync()
        assert set(first) <= set(synced.files)
        synced.clear()
        second = write(table / "metadata" / "v3.metadata.json", NEW_NS + S)
    assert tmp_path in sync.noted
    sync.sync()
    assert second in synced.files
    assert sync.noted == {}


def test_a_failed_sync_keeps_its_notes(
    tmp_path: Path, synced: Synced, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = old_table(tmp_path)
    sync = WarehouseSync(tmp_path)
    sync.note(table, NOTE_NS)
    commit(table, 2)

    def eio(fd: int, purpose: str, path: str | os.PathLike[str] = "") -> None:
        raise FileAccessError("fsync failed: Input/output error", file=str(path))

    with monkeypatch.context() as patch:
        patch.setattr("binlake.storage.warehouse_sync.fsync_fd", eio)
        with pytest.raises(FileAccessError):
            sync.sync()
    assert sync.noted == {table: NOTE_NS}
    sync.sync()
    assert len(synced.files) == 4


def test_a_file_gone_before_its_fsync_is_skipped(
    tmp_path: Path, synced: Synced, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = old_table(tmp_path)
    sync = WarehouseSync(tmp_path)
    sync.note(table, NOTE_NS)
    temp = write(table / "metadata" / "abc.metadata.json")
    real_entries = warehouse_sync._entries

    def entries_then_rename(folder: Path) -> dict[str, os.stat_result] | None:
        found = real_entries(folder)
        if folder == temp.parent and temp.exists():
            temp.rename(table / "metadata" / "v2.metadata.json")  # after the listing
        return found

    monkeypatch.setattr(warehouse_sync, "_entries", entries_then_rename)
    sync.sync()
    assert temp not in synced.files
    assert sync.files_synced == 0
    assert table / "metadata" in synced.dirs


# ---- which warehouses --------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    warehouse: Path
    catalog: str = "lake"
    spark_conf: Mapping[str, str] = field(default_factory=dict)


@pytest.mark.parametrize(
    ("location", "folder"),
    [
        ("/srv/lake", "/srv/lake"),
        ("file:/srv/lake", "/srv/lake"),
        ("file:///srv/my%20lake", "/srv/my lake"),
        ("file://localhost/srv/lake", "/srv/lake"),
        ("s3://bucket/lake", None),
        ("s3a://bucket/lake", None),
        ("hdfs://namenode:8020/lake", None),
        ("file://otherhost/srv/lake", None),
    ],
)
def test_only_local_locations_are_folders(location: str, folder: str | None) -> None:
    assert local_folder(location) == (None if folder is None else Path(folder))


def test_the_embedded_catalog_syncs_its_warehouse_folder(tmp_path: Path) -> None:
    assert local_warehouse(Target(tmp_path)) == tmp_path
    sync = warehouse_sync_for(Target(tmp_path), unsynced_since=NOTE_NS)
    assert type(sync) is WarehouseSync
    assert sync.noted == {tmp_path: NOTE_NS}
    assert warehouse_sync_for(Target(tmp_path)).noted == {tmp_path: 0}  # no record yet


@pytest.mark.parametrize(
    "conf",
    [
        {"spark.sql.catalog.lake": "SparkCatalog", "spark.sql.catalog.lake.type": "rest"},
        {"spark.sql.catalog.lake": "SparkCatalog", "spark.sql.catalog.lake.type": "hive"},
        {"spark.sql.catalog.lake": "SparkCatalog", "spark.sql.catalog.lake.catalog-impl": "G"},
        {"spark.sql.catalog.lake.warehouse": "s3a://bucket/lake"},
        {"spark.sql.catalog.lake.type": "rest"},
    ],
)
def test_other_catalogs_and_object_stores_sync_nothing(
    tmp_path: Path, conf: dict[str, str]
) -> None:
    target = Target(tmp_path, spark_conf=conf)
    assert local_warehouse(target) is None
    sync = warehouse_sync_for(target, unsynced_since=0)
    assert isinstance(sync, NoWarehouseSync)
    sync.note(tmp_path / "db" / "t", NOTE_NS)
    with sync.committing():
        pass
    sync.sync()
    assert sync.noted == {}
    assert (sync.files_synced, sync.dirs_synced) == (0, 0)


def test_a_hadoop_catalog_of_the_spark_section_on_a_local_folder_is_synced(tmp_path: Path) -> None:
    conf = {
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "hadoop",
        "spark.sql.catalog.lake.warehouse": f"file://{tmp_path}/wh",
    }
    assert local_warehouse(Target(Path("/unused"), spark_conf=conf)) == tmp_path / "wh"


# ---- the checkpoint waits for it ---------------------------------------------------------------


def test_the_checkpoint_callback_runs_before_the_record_is_written(tmp_path: Path) -> None:
    record = CheckpointRecord(tmp_path / "relay.checkpoint")
    seen: list[str | None] = []
    tracker = CheckpointTracker(
        record, ["relay.000001"], before_record=lambda: seen.append(record.read())
    )
    tracker.on_transaction_appended("relay.000001")
    tracker.on_file_added("relay.000002")
    assert seen == []  # the checkpoint did not move: no sync
    tracker.on_transactions_durable("relay.000001", 1)
    assert seen == [None]  # run while the record still held the old checkpoint (none)
    assert record.read() == "relay.000002"
    tracker.on_file_added("relay.000003")
    assert seen == [None, "relay.000002"]
    assert record.read() == "relay.000003"


def test_a_failed_callback_leaves_the_record_where_it_was(tmp_path: Path) -> None:
    record = CheckpointRecord(tmp_path / "relay.checkpoint")

    def fail() -> None:
        raise FileAccessError("fsync failed: Input/output error")

    tracker = CheckpointTracker(record, ["relay.000001"], before_record=fail)
    with pytest.raises(FileAccessError):
        tracker.on_file_added("relay.000002")
    assert record.read() is None
    assert tracker.recorded_checkpoint == "relay.000001"
    assert tracker.purgeable() == []


def test_the_record_says_when_it_was_written(tmp_path: Path) -> None:
    record = CheckpointRecord(tmp_path / "relay.checkpoint")
    assert record.written_ns() is None
    record.write("relay.000002")
    assert record.written_ns() == record.path.stat().st_mtime_ns
