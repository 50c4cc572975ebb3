"""Acceptance scenario 10 (shared/design.md): the disk fills up under `binlake replicate`, through
the whole pipeline (real MariaDB, Spark, Iceberg), on a real size-limited tmpfs mounted by the
test (mounting needs root, which the test environment is; without it these tests fail).

- the state folder's disk (relay log, checkpoint, source state), filled up to its last pages;
- the warehouse's disk: the folder of the database's namespace in the session's warehouse, so
  that every Iceberg file of those tables (data, deletes, manifests, metadata) is written there.

Each time `binlake replicate` must stop by itself with `DiskFullError` (exit 74), one `error:`
line naming the file and one `hint:` line, no traceback; the lake must hold no partial commit;
and once space returns, a restart must resume with nothing lost or doubled (verify, the snapshot
histories).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from acceptance_testing import (
    BackgroundReplicate,
    assert_refused,
    assert_relay_is_a_suffix_of_the_source,
    fill,
    lake_positions,
    last_source_transaction,
    mount_tmpfs,
    unmount,
    wait_for_lake,
)

from binlake.config import load_config
from binlake.errors import DiskFullError
from binlake_dev.sandbox import MariaDBSandbox
from crash.applier_workload import ShopWorkload
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    lake_warehouse,
    module_source,
    refresh,
    replicate_in_process,
    run_replicate,
)

pytestmark = pytest.mark.acceptance

EXIT_STORAGE = DiskFullError.exit_code


source = module_source("acceptance-disk-source")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    mount_tmpfs(disk, "1m")
    try:
        yield disk
    finally:
        unmount(disk)


def resume_once_space_returns(
    filler: Path, workload: ShopWorkload, config: Path, spark: object
) -> None:
    """The filler deleted (space returns), more transactions: a restart (in this process)
    applies everything, exactly once."""
    filler.unlink()
    workload.run(3)
    refresh(spark, load_config(config))
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)


def test_a_full_state_disk_stops_replicate_with_disk_full_and_it_resumes_once_space_returns(
    small_disk: Path, source: MariaDBSandbox, spark: object
) -> None:
    """The state folder (relay log included) on a 1 MiB tmpfs, filled to its last two pages
    while binlake is down; 30 transactions (about four times what fits) then arrive. The run
    must stop with the disk-full error naming a file of the state folder; with the filler
    deleted, the next run resumes where the relay log's last complete transaction ends."""
    database = "acc_state_full"
    workload = ShopWorkload(source, database, seed=10).create()
    workload.run(5)
    # binlake.toml on the small disk: the state folder beside it is on it too
    config = config_for(small_disk, source, spark, database)
    replicate_in_process(config, spark)
    filler = fill(small_disk, leave_pages=2)
    workload.run(30)
    full = run_replicate(config, "--until-caught-up")
    assert_refused(full, EXIT_STORAGE, "disk full", str(small_disk / "state"))
    resume_once_space_returns(filler, workload, config, spark)
    assert_relay_is_a_suffix_of_the_source(small_disk / "state", source)


def test_a_full_warehouse_disk_stops_replicate_with_disk_full_and_it_resumes_once_space_returns(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """The namespace folder of the database in the warehouse on an 8 MiB tmpfs. A running
    `binlake replicate` (a subprocess: it has its own Spark) applies the first transactions;
    then the disk is filled to the last byte and more transactions arrive: the run must stop by
    itself with the disk-full error, leaving no partial commit. With the filler deleted, a
    restart resumes. The typed error is asserted last, so that a failure there still shows that
    everything else held."""
    database = "acc_lake_full"
    warehouse = lake_warehouse(spark)
    disk = warehouse / database  # the namespace's folder: every file of its tables
    mount_tmpfs(disk, "8m")
    try:
        workload = ShopWorkload(source, database, seed=12).create()
        workload.run(5)
        config = config_for(tmp_path, source, spark, database)
        replicate = BackgroundReplicate(config)
        try:
            target = last_source_transaction(source)
            wait_for_lake(warehouse, database, target, replicate, timeout=240)
            applied = lake_positions(warehouse, database)
            filler = fill(disk)
            workload.run(10)
            code = replicate.wait(timeout=180)  # must stop by itself
        finally:
            replicate.kill()
        stopped = replicate.stderr()
        assert lake_positions(warehouse, database) == applied, "a commit landed on a full disk"
        resume_once_space_returns(filler, workload, config, spark)
        stop = subprocess.CompletedProcess(replicate.process.args, code, "", stopped)
        assert_refused(stop, EXIT_STORAGE, "disk full")
    finally:
        forget_namespace(spark, database)  # its files go with the tmpfs: not its catalog rows
        unmount(disk)


def forget_namespace(spark: object, namespace: str) -> None:
    """Drop the namespace's tables from the session's embedded catalog (files too)."""
    run = spark.sql  # type: ignore[attr-defined]
    for row in run(f"SHOW TABLES IN lake.{namespace}").collect():
        run(f"DROP TABLE IF EXISTS lake.{namespace}.`{row['tableName']}` PURGE")
