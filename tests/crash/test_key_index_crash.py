"""`binlake replicate` killed (SIGKILL) at the key index's durable steps, then restarted: the
table equals the source (`verify`), no batch is applied twice, no equality delete file is live,
and the index names the table's snapshot and holds exactly its live rows.

* ``keyindex_after_delta_commit``: the row delta is committed (the table at S'), the index is
  still at the snapshot before it; the restart catches it up from the table's commits.
* ``keyindex_after_rebuild_fsync`` / ``keyindex_after_rebuild_rename``: a rebuild (the index
  was removed) killed with the new file fsynced under its temporary name, or renamed into place
  with the folder not yet fsynced; the restart rebuilds it, or opens the renamed one, and one
  index file is left.

One lineage kills at each point in turn (each restart recovers from the kill before it). The
table is partitioned (``bucket(2, id)``, ``truncate(100, v)``: an update of ``v`` may move its
row to another partition), so the catch-up and the rebuilds read each data file's partition again,
and every position delete must land in its data file's partition. In ``cut`` mode (``make
power-cut``) its state folder, key indexes included, and its warehouse (``Ground.lake``:
``catalog.sqlite`` with it) are on the power-cut file system and the power is cut after each
kill (tests/cut_modes.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from binlake.config import load_config
from binlake.lake.catalog.write_path import WRITE
from binlake.lake.spark.lineage import current_lineage
from binlake_dev.sandbox import MariaDBSandbox
from cut_modes import CUT, KILL, Ground
from key_index_testing import (
    POSITION_DELETES,
    assert_index_matches_the_table,
    damage,
    index_path,
    lake_name,
    live_delete_kinds,
    run_sql,
)
from lake_targets import TargetSetup
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    describe,
    module_source,
    replicate_in_process,
    run_until_killed,
)

source = module_source("key-index-crash-source")
CRASH_TIMEOUT_S = 120


def workload(source: MariaDBSandbox, database: str, step: int) -> None:
    with source.connect(database, autocommit=False) as conn, conn.cursor() as cursor:
        cursor.execute(f"UPDATE t SET v = v + 1 WHERE id % 3 = {step % 3}")
        cursor.execute(f"DELETE FROM t WHERE id % 11 = {step % 11}")
        cursor.execute(f"INSERT INTO t SELECT seq, seq FROM seq_{500 * step}_to_{500 * step + 20}")
        conn.commit()


def replicated(
    tmp_path: Path,
    source: MariaDBSandbox,
    spark: Any,
    database: str,
    target: TargetSetup | None = None,
) -> Path:
    source.execute(f"CREATE DATABASE {database}")
    run_sql(
        source,
        database,
        "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
        "INSERT INTO t SELECT seq, seq FROM seq_1_to_300",
    )
    layout = f'[tables.layout."{database}.t"]\npartition = ["bucket(2, id)", "truncate(100, v)"]\n'
    config = config_for(tmp_path, source, spark, database, tables=layout, target=target)
    replicate_in_process(config, spark)
    return config


def assert_exact(config: Path, spark: Any, table: str) -> None:
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
    assert_index_matches_the_table(spark, config, table)
    assert set(live_delete_kinds(spark, config, table)) == {POSITION_DELETES}
    lineage = current_lineage(spark, lake_name(config, table))
    assert {s.summary[WRITE] for s in lineage if WRITE in s.summary} == {"row-delta"}


@pytest.mark.parametrize(
    "ground",
    [KILL, pytest.param(CUT, marks=[pytest.mark.powercut, pytest.mark.slow])],
    indirect=True,
)
def test_killed_at_each_key_index_step_the_restart_leaves_one_true_index(
    ground: Ground, source: MariaDBSandbox, spark: Any
) -> None:
    """One lineage, killed in turn: after a row delta's commit, before its index update (the
    restart catches the index up: no rebuild); then, the index removed, while its rebuild puts
    the new file in place, fsynced under its temporary name (the restart rebuilds it again,
    and is killed once that one is renamed into place); the last restart opens it. After each
    restart the table equals the source, no equality delete is live, and one index file is
    left, holding exactly the table's live rows."""
    database = "kic_lineage_cut" if ground.cutting else "kic_lineage"
    table = f"{database}.t"
    folder = ground.folder("run")
    folder.mkdir()
    config = replicated(folder, source, spark, database, ground.lake(spark))
    ground.settle()
    workload(source, database, 2)
    killed = run_until_killed(config, "keyindex_after_delta_commit:1", CRASH_TIMEOUT_S)
    assert killed.returncode == -9, describe(killed)
    ground.crash(tear=4096)
    workload(source, database, 3)
    restart = replicate_in_process(config, spark)
    assert "key index" not in restart.output, restart.output  # caught up, not rebuilt
    assert_exact(config, spark, table)
    damage(index_path(config, spark, table), "missing")
    ground.settle()  # the removal is the test's setup, not a step a cut may undo
    for step, point in ((4, "keyindex_after_rebuild_fsync"), (5, "keyindex_after_rebuild_rename")):
        workload(source, database, step)
        killed = run_until_killed(config, f"{point}:1", CRASH_TIMEOUT_S)
        assert killed.returncode == -9, describe(killed)
        ground.crash(tear=4096)
    workload(source, database, 6)
    replicate_in_process(config, spark)
    assert_exact(config, spark, table)
    folder = load_config(config).state.keyindex_dir
    names = sorted(p.name for p in folder.iterdir() if not p.name.endswith(("-wal", "-shm")))
    assert names == [index_path(config, spark, table).name], names
