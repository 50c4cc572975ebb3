"""`binlake replicate` killed (SIGKILL) at every applier crash point during a live workload whose
transactions touch several tables, then restarted: every table equals the source (`verify`: row
sets and values exact) and its snapshot history shows each batch and each position once. One
lineage per target is killed at each point in turn (each restart recovers from the kill before it;
on the cluster, the points whose aftermath the catalog holds), on two targets: the embedded catalog
on `local[2]`, and Iceberg's JDBC catalog (PostgreSQL) from a Spark standalone cluster
(`tests/lake_targets.py`).

On the embedded target the lineage also runs in ``cut`` mode (``make power-cut``): its state
folder (relay log, state files, checkpoint, key indexes) and its warehouse (Iceberg's files and
the embedded catalog's ``catalog.sqlite``) on the power-cut file system, the power cut after each
kill (tests/cut_modes.py).

Also a transaction larger than ``[applier] max_bytes`` (its row images read back from the relay
log as applied) killed between its two tables' commits, then restarted.

Also acceptance scenario 7 (WL#4621): the relay log loses a tail the applier had already applied
(the newest relay file cut back to an earlier transaction boundary, as a lost page cache would);
the restart refetches it from the source and every table skips what it has, by position.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from applier_workload import ShopWorkload

from binlake.binlog.names import TableName
from binlake.config import load_config
from binlake.crashpoints import POINTS
from binlake.lake.catalog.target import lake_target
from binlake.storage.binlog_file import BinlogFileReader
from binlake.storage.index import LogIndex
from binlake_dev.sandbox import MariaDBSandbox
from cut_modes import CUT, KILL, Ground
from lake_targets import TargetSetup
from replicate_testing import (
    assert_cuts_are_exact,
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    describe,
    lake_offset,
    lake_warehouse,
    module_source,
    replicate_command,
    replicate_env,
    replicate_in_process,
    run_armed,
    run_replicate,
    run_until_killed,
)

#: Crash point -> the pass to die at, in the order one lineage is killed at them.
CASES = {
    "apply_before_commit": "apply_before_commit:2",
    "apply_during_ddl": "apply_during_ddl:1",
    "apply_before_delta_commit": "apply_before_delta_commit:3",
    "apply_before_backfill": "apply_before_backfill:1",
    "apply_between_tables": "apply_between_tables:2",
    "apply_during_purge": "apply_during_purge:1",
    "apply_after_commits": "apply_after_commits:2",
    "cut_before_record": "cut_before_record:2",
    "cut_after_record": "cut_after_record:2",
    "cut_after_prune": "cut_after_prune:1",
}
CRASH_TIMEOUT_S = 120
#: Killed on the embedded target only: what they leave behind is the same on every target. The
#: cut points and the relay-log purge touch the state folder and the cuts table alone; a kill
#: before the first commit leaves the lake as the previous run left it, with at most orphan
#: files, which ``apply_before_delta_commit`` leaves too (and which the cluster's kills after
#: it also meet: a dead driver's application holding the cluster's cores); a kill between two
#: tables' commits leaves each table as a kill before its commit or ``apply_after_commits``
#: does, and the restart reads each table's own position; a kill before an added column's
#: backfill leaves the catalog as a kill between two schema statements does (``apply_during_ddl``,
#: killed on both: a schema commit landed, no positioned commit yet), and the restart reads the
#: ALTER again from the table's position before it, on either target.
EMBEDDED_ONLY = {p for p in CASES if p.startswith("cut_")} | {
    "apply_before_commit",
    "apply_during_purge",
    "apply_between_tables",
    "apply_before_backfill",
}


source = module_source("applier-crash-source")


def test_every_apply_and_cut_crash_point_has_a_case() -> None:
    assert set(CASES) == {name for name in POINTS if name.startswith(("apply_", "cut_"))}


def two_step_ddl(run: int) -> str:
    """The DDL before killed run ``run``: two schema statements (an add, then a drop of the
    column the previous one added), so every run meets ``apply_during_ddl`` and
    ``apply_before_backfill``."""
    dropped = "extra" if run == 0 else f"note{run - 1}"
    return f"ALTER TABLE {{db}}.orders ADD COLUMN note{run} VARCHAR(10), DROP COLUMN {dropped}"


@pytest.mark.parametrize(
    ("target", "ground"),
    [
        ("embedded", KILL),
        ("cluster-jdbc", KILL),
        pytest.param("embedded", CUT, marks=[pytest.mark.powercut, pytest.mark.slow]),
    ],
    indirect=True,
)
def test_replicate_killed_at_every_apply_crash_point_in_turn_then_restarted_is_exactly_once(
    ground: Ground, source: MariaDBSandbox, spark: object, target: TargetSetup
) -> None:
    """One lineage per target, killed at each point in turn (on the cluster, ``EMBEDDED_ONLY``
    aside): each run recovers from the
    previous run's kill, applies, and dies at its own point while the workload commits (its
    backlog holds transactions, a two-statement DDL, and the live ones). After each kill no
    table's history holds a batch or a position twice; after the last, an unarmed restart
    catches up and the lake equals the source."""
    database = f"crash_lineage{target.suffix}{'_cut' if ground.cutting else ''}"
    workload = ShopWorkload(source, database).create()
    folder = ground.folder("run")
    folder.mkdir()
    target = ground.lake(spark) or target
    config = config_for(
        folder,
        source,
        spark,
        database,
        receiver="max_relay_file_size = 4096\nsync_interval_ms = 10\n",
        applier="max_transactions = 10\nmax_seconds = 1.0\n",
        target=target,
    )
    # A cut after every batch; the cuts table pruned whenever 2 cuts are beyond what it keeps
    # (the newest 10, and the first of the hour).
    config.write_text(config.read_text() + "[cuts]\nevery_s = 0\nkeep_last = 10\n")
    ground.settle()
    cases = {p: a for p, a in CASES.items() if target.cluster is None or p not in EMBEDDED_ONLY}
    for run, (point, armed) in enumerate(cases.items()):
        workload.run(8)
        workload.ddl(two_step_ddl(run))
        workload.run(8)
        live = workload.in_thread(12, pause_s=0.03)
        killed, timed_out = run_armed(config, armed, CRASH_TIMEOUT_S)
        live.join()
        assert not workload.errors, workload.errors
        assert not timed_out, f"never reached {point} in {CRASH_TIMEOUT_S}s\n{describe(killed)}"
        assert killed.returncode == -9, f"not killed at {point}\n{describe(killed)}"
        ground.crash(tear=4096)
        assert_history_is_exactly_once(config, spark)
        assert_cuts_are_exact(config, spark)
    workload.run(5)
    # The restart catches up the backlog the kills left (hundreds of transactions) in bigger
    # batches: a restart's batches may have any bounds (the skip is per transaction), and the
    # lineage's small batches would make this catch-up a third of the test.
    text = config.read_text()
    bigger = text.replace("max_transactions = 10\n", "max_transactions = 1000\n")
    assert bigger != text
    config.write_text(bigger)
    if target.cluster is None:
        replicate_in_process(config, spark)  # the restart: in this process, one Spark less
    else:
        again = run_replicate(config, "--until-caught-up")
        assert again.returncode == 0, describe(again)
    assert_verify_passes(config, spark)
    history = assert_history_is_exactly_once(config, spark)
    assert set(history) == {f"{database}.{t}" for t in ("orders", "order_lines", "audit")}
    assert assert_cuts_are_exact(config, spark) > 0


def test_a_transaction_past_max_bytes_killed_between_its_tables_is_applied_once_after_restart(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """A transaction whose row images the applier reads back from the relay log (larger than
    ``[applier] max_bytes``), killed after its first table's commit: the restart reads it
    again, skips it in the table that has it, applies it to the other, and each table equals
    the source."""
    database = "crash_big"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.a (id INT PRIMARY KEY, v VARCHAR(200), n INT)")
    source.execute(f"CREATE TABLE {database}.b (id INT PRIMARY KEY, v VARCHAR(200))")
    source.execute(f"INSERT INTO {database}.a VALUES (-1, 'before', 0)")
    source.execute(f"INSERT INTO {database}.b VALUES (-1, 'before')")
    config = config_for(tmp_path, source, spark, database, applier="max_bytes = 65536\n")
    replicate_in_process(config, spark)  # both tables in the lake
    with source.connect(database, autocommit=False) as conn, conn.cursor() as cursor:
        cursor.execute("INSERT INTO a SELECT seq, REPEAT('a', 150), 0 FROM seq_0_to_1999")
        cursor.execute("INSERT INTO b SELECT seq, REPEAT('b', 150) FROM seq_0_to_1999")
        cursor.execute("UPDATE a SET n = n + 1, id = id + 10000 WHERE id % 3 = 0")
        cursor.execute("DELETE FROM b WHERE id % 4 = 0 OR id = -1")
        conn.commit()
    killed = run_until_killed(config, "apply_between_tables:1", CRASH_TIMEOUT_S)
    assert killed.returncode == -9, describe(killed)
    assert "its row images are read from the relay log" in killed.stderr, describe(killed)
    assert_history_is_exactly_once(config, spark)
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)


def transaction_ends(path: Path) -> list[int]:
    with path.open("rb") as f, BinlogFileReader(f, path.name) as reader:
        return [g.end_offset for g in reader.groups() if g.is_transaction]


def test_a_relay_tail_lost_after_it_was_applied_is_refetched_and_skipped_by_position(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """Acceptance scenario 7 (WL#4621). The first run is stopped with SIGINT (Ctrl-C) once it
    has applied everything: a clean stop (exit 0), binlake's handler and not pyspark's (which
    cancels the jobs and raises KeyboardInterrupt when a session starts in the main thread)."""
    database = "crash_lost_tail"
    workload = ShopWorkload(source, database, seed=11).create()
    workload.run(30)
    config = config_for(tmp_path, source, spark, database, applier="max_transactions = 10\n")
    end = int(source.execute("SHOW MASTER STATUS")[0][1])
    first = subprocess.Popen(
        replicate_command(config), stderr=subprocess.PIPE, text=True, env=replicate_env()
    )
    deadline = time.monotonic() + CRASH_TIMEOUT_S
    while lake_offset(lake_warehouse(spark), (database, "orders")) < end:
        assert first.poll() is None and time.monotonic() < deadline, "replicate did not catch up"
        time.sleep(0.2)
    first.send_signal(signal.SIGINT)
    assert first.wait(60) == 0, first.stderr.read() if first.stderr else ""
    relay = tmp_path / "state" / "relay"
    names = LogIndex(relay / "relay-bin.index").names()
    newest = max((relay / n for n in names), key=lambda p: len(transaction_ends(p)))
    ends = transaction_ends(newest)
    assert len(ends) > 20
    with newest.open("r+b") as f:  # the page cache lost the newest part of the file
        f.truncate(ends[len(ends) // 3])
    workload.run(5)
    second = replicate_in_process(config, spark)  # the restart: in this process
    assert "relay log lost a tail already applied to" in second.output, second.output
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)


def test_files_a_row_delta_stored_before_a_crash_are_orphans_no_read_sees(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """Killed between storing a row delta's files and committing them: no snapshot names the
    files, the table's position has not moved, and the restart writes the batch again under
    new names; the files of the killed run stay behind unread (orphans). The table was turned
    to format v3 (``test_replicate_killed_at_every_apply_crash_point_in_turn...`` kills v2
    tables there): its orphans include the batch's Puffin file of deletion vectors."""
    database = "crash_orphans"
    workload = ShopWorkload(source, database, seed=5).create()
    workload.run(10)
    # One table at a time, in the order they first appear in the batch: the kill is in orders.
    one_at_a_time = "max_transactions = 4\ncommit_threads = 1\n"
    config = config_for(tmp_path, source, spark, database, applier=one_at_a_time)
    replicate_in_process(config, spark)  # only the killed run needs a process of its own
    table = lake_target(load_config(config)).lake_table(TableName(database, "orders"))
    position_before = lake_offset(lake_warehouse(spark), (database, "orders"))
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('format-version' = '3')")  # type: ignore[attr-defined]
    workload.run(6)
    killed = run_replicate(config, crash_point="apply_before_delta_commit:1")
    assert killed.returncode == -9, describe(killed)
    assert lake_offset(lake_warehouse(spark), (database, "orders")) == position_before
    data = lake_warehouse(spark) / database / "orders" / "data"
    orphans = {p.name for p in data.iterdir() if p.name.startswith("binlake-")}
    spark.sql(f"REFRESH TABLE {table}")  # type: ignore[attr-defined]
    named = {
        Path(row[0]).name
        for row in spark.sql(f"SELECT file_path FROM {table}.all_files").collect()  # type: ignore[attr-defined]
    }
    orphans -= named
    assert any(name.endswith("-dv.puffin") for name in orphans), orphans
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
    spark.sql(f"REFRESH TABLE {table}")  # type: ignore[attr-defined]
    named = {
        Path(row[0]).name
        for row in spark.sql(f"SELECT file_path FROM {table}.all_files").collect()  # type: ignore[attr-defined]
    }
    assert not orphans & named  # the restart wrote its own files; the orphans stay unread


WIDE_TABLES = 12
#: Kills while a batch commits its twelve tables on four threads: before the second commit
#: starts (the first one is landing), before the seventh (several in flight, some landed),
#: with the fifth table's files stored and four more commits on the other threads, and after
#: every commit of the second batch.
WIDE_KILLS = (
    "apply_between_tables:1",
    "apply_between_tables:6",
    "apply_before_delta_commit:5",
    "apply_after_commits:2",
)


def wide_transactions(source: MariaDBSandbox, database: str, count: int, first: int) -> None:
    """``count`` transactions, each inserting a row into every wide table and updating one."""
    with source.connect(database, autocommit=False) as conn, conn.cursor() as cursor:
        for n in range(first, first + count):
            for t in range(WIDE_TABLES):
                cursor.execute(f"INSERT INTO w{t:02d} VALUES (%s, %s)", (n, n * 10 + t))
            cursor.execute(f"UPDATE w{n % WIDE_TABLES:02d} SET v = v + 1 WHERE id = %s", (n,))
            conn.commit()


def test_replicate_killed_while_a_batch_commits_many_tables_side_by_side_is_exactly_once(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """Twelve tables per batch committed on four threads (``[applier] commit_threads``),
    killed between two tables' commits of a batch and while several commits are in flight:
    after each kill no table holds a batch or a position twice (each table's commits carry
    its own position); the unarmed restart catches up and every table equals the source."""
    database = "crash_wide"
    source.execute(f"CREATE DATABASE {database}")
    for t in range(WIDE_TABLES):
        source.execute(f"CREATE TABLE {database}.w{t:02d} (id INT PRIMARY KEY, v INT NOT NULL)")
    config = config_for(
        tmp_path,
        source,
        spark,
        database,
        applier="max_transactions = 5\nmax_seconds = 0.5\ncommit_threads = 4\n",
    )
    first = 0
    for kill in WIDE_KILLS:
        wide_transactions(source, database, 15, first)
        first += 15
        killed = run_until_killed(config, kill, CRASH_TIMEOUT_S)
        assert killed.returncode == -9, describe(killed)
        assert_history_is_exactly_once(config, spark)
    wide_transactions(source, database, 5, first)
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    history = assert_history_is_exactly_once(config, spark)
    assert set(history) == {f"{database}.w{t:02d}" for t in range(WIDE_TABLES)}
