"""`binlake replicate` killed (SIGKILL) at every applier crash point during a live workload whose
transactions touch several tables, then restarted: every table equals the source (`verify`:
row sets and values exact) and its snapshot history shows each batch and each position once.

Also acceptance scenario 7 (WL#4621): the relay log loses a tail the applier had already applied
(the newest relay file cut back to an earlier transaction boundary, as a lost page cache would);
the restart refetches it from the source and every table skips what it has, by position.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from applier_workload import TWO_STEP_DDL, ShopWorkload

from binlake.apply.iceberg_meta import read_table
from binlake.crashpoints import POINTS
from binlake.sandbox import MariaDBSandbox
from binlake.storage.binlog_file import BinlogFileReader
from binlake.storage.index import LogIndex
from conftest import require_mariadb
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    describe,
    lake_warehouse,
    replicate_command,
    replicate_env,
    run_replicate,
    write_config,
)

#: Crash point -> the pass to die at.
CASES = {
    "apply_before_commit": "apply_before_commit:2",
    "apply_between_tables": "apply_between_tables:2",
    "apply_after_commits": "apply_after_commits:2",
    "apply_during_ddl": "apply_during_ddl:1",
    "apply_during_purge": "apply_during_purge:1",
}
CRASH_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBSandbox]:
    require_mariadb()
    sandbox = MariaDBSandbox(tmp_path_factory.mktemp("applier-crash-source"))
    try:
        yield sandbox.start()
    finally:
        sandbox.kill()


def test_every_apply_crash_point_has_a_case() -> None:
    assert set(CASES) == {name for name in POINTS if name.startswith("apply_")}


def run_until_killed(config: Path, crash_point: str) -> subprocess.CompletedProcess[str]:
    """`binlake replicate` (no --until-caught-up) armed at ``crash_point``: it must die there."""
    process = subprocess.Popen(
        replicate_command(config),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=replicate_env(crash_point),
    )
    try:
        out, err = process.communicate(timeout=CRASH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.mark.parametrize("point", sorted(CASES))
def test_replicate_killed_at_an_apply_crash_point_then_restarted_is_exactly_once(
    tmp_path: Path, source: MariaDBSandbox, spark: object, point: str
) -> None:
    database = f"crash_{point}"
    workload = ShopWorkload(source, database).create()
    workload.run(12)
    workload.ddl(TWO_STEP_DDL)
    workload.run(12)
    config = write_config(
        tmp_path / "binlake.toml",
        source,
        warehouse=lake_warehouse(spark),
        include=[f"{database}.*"],
        receiver="max_relay_file_size = 4096\nsync_interval_ms = 10\n",
        applier="max_transactions = 6\nmax_seconds = 1.0\n",
    )
    live = workload.in_thread(20, pause_s=0.03)
    killed = run_until_killed(config, CASES[point])
    live.join()
    assert not workload.errors, workload.errors
    assert killed.returncode == -9, f"not killed at {point}\n{describe(killed)}"
    workload.run(5)
    again = run_replicate(config, "--until-caught-up")
    assert again.returncode == 0, describe(again)
    assert_verify_passes(config, spark)
    history = assert_history_is_exactly_once(config, spark)
    assert set(history) == {f"{database}.{t}" for t in ("orders", "order_lines", "audit")}


def transaction_ends(path: Path) -> list[int]:
    with path.open("rb") as f, BinlogFileReader(f, path.name) as reader:
        return [g.end_offset for g in reader.groups() if g.is_transaction]


def lake_position(warehouse: Path, identifier: tuple[str, str]) -> int:
    table = read_table(warehouse, identifier)
    snapshots = table.binlake_snapshots if table is not None else ()
    position = snapshots[0].position if snapshots else None
    return position.offset if position is not None else 0


def test_a_relay_tail_lost_after_it_was_applied_is_refetched_and_skipped_by_position(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """Acceptance scenario 7 (WL#4621). The first run is stopped with SIGTERM once it has
    applied everything: a clean stop (exit 0)."""
    database = "crash_lost_tail"
    workload = ShopWorkload(source, database, seed=11).create()
    workload.run(30)
    config = write_config(
        tmp_path / "binlake.toml",
        source,
        warehouse=lake_warehouse(spark),
        include=[f"{database}.*"],
        applier="max_transactions = 10\n",
    )
    end = int(source.execute("SHOW MASTER STATUS")[0][1])
    first = subprocess.Popen(
        replicate_command(config), stderr=subprocess.PIPE, text=True, env=replicate_env()
    )
    deadline = time.monotonic() + CRASH_TIMEOUT_S
    while lake_position(lake_warehouse(spark), (database, "orders")) < end:
        assert first.poll() is None and time.monotonic() < deadline, "replicate did not catch up"
        time.sleep(0.2)
    first.send_signal(signal.SIGTERM)
    assert first.wait(60) == 0, first.stderr.read() if first.stderr else ""
    relay = tmp_path / "state" / "relay"
    names = LogIndex(relay / "relay-bin.index").names()
    newest = max((relay / n for n in names), key=lambda p: len(transaction_ends(p)))
    ends = transaction_ends(newest)
    assert len(ends) > 20
    with newest.open("r+b") as f:  # the page cache lost the newest part of the file
        f.truncate(ends[len(ends) // 3])
    workload.run(5)
    second = run_replicate(config, "--until-caught-up")
    assert second.returncode == 0, describe(second)
    assert "relay log lost a tail already applied to" in second.stderr, describe(second)
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
