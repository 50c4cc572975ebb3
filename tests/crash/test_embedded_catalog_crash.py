"""kill -9 while the embedded catalog adopts a warehouse the Hadoop catalog wrote (issue 14),
and in ``cut`` mode a power cut after it (tests/cut_modes.py): the catalog database is
absent (the next start adopts again) or whole, every table registered
at its current metadata file; never a catalog that misses a table."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from storage_driver import run_driver

from binlake.lake.catalog.metadata import CATALOG_FILE, find_tables, read_table
from cut_modes import CUT_MODES, Ground

TABLES = (("shop", "orders"), ("shop", "items"), ("crm", "people"))


def hadoop_warehouse(warehouse: Path) -> None:
    """Three Hadoop-layout tables, each at version 2 with one binlake snapshot."""
    for number, identifier in enumerate(TABLES, start=1):
        meta = warehouse.joinpath(*identifier) / "metadata"
        meta.mkdir(parents=True)
        summary = {"operation": "append", "binlake.position": f"f.000001:{number * 100}"}
        snapshot = {"snapshot-id": number, "timestamp-ms": 1000, "summary": summary}
        (meta / "v1.metadata.json").write_text(json.dumps({"snapshots": []}))
        current = {"snapshots": [snapshot], "current-snapshot-id": number}
        (meta / "v2.metadata.json").write_text(json.dumps(current))
        (meta / "version-hint.text").write_text("2\n")


def assert_adopted(warehouse: Path) -> None:
    assert find_tables(warehouse, "lake") == sorted(TABLES)
    for number, identifier in enumerate(TABLES, start=1):
        table = read_table(warehouse, identifier, "lake")
        assert table is not None and table.latest_binlake is not None
        assert str(table.latest_binlake.position) == f"f.000001:{number * 100}"


POINTS = ["durable_after_temp_write", "durable_after_temp_fsync", "durable_after_rename"]


@pytest.mark.parametrize("ground", CUT_MODES, indirect=True)
@pytest.mark.parametrize("point", POINTS)
def test_kill_during_adoption_leaves_no_catalog_or_a_whole_one(ground: Ground, point: str) -> None:
    warehouse = ground.folder("warehouse")
    hadoop_warehouse(warehouse)
    ground.settle()
    killed = run_driver("adopt", warehouse, point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    ground.crash()
    renamed = point == "durable_after_rename" and not ground.cutting
    if renamed:
        assert_adopted(warehouse)  # renamed into place: whole
    else:
        assert not (warehouse / CATALOG_FILE).exists()
        assert find_tables(warehouse) == sorted(TABLES)  # still the Hadoop warehouse
    restarted = run_driver("adopt", warehouse)
    assert restarted.returncode == 0, restarted.stderr
    assert restarted.stdout.split() == [str(0 if renamed else len(TABLES))]
    assert_adopted(warehouse)
