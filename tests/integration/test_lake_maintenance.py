"""Issue 14: the maintenance people run on Iceberg tables does not break replication.

A data engineer's usual job on a replicated table, `rewrite_data_files` then
`expire_snapshots(retain_last => 1)`, cuts the table's lineage above every binlake snapshot;
binlake's `binlake-applied` tag keeps its newest snapshot (docs/recovery.md, "Snapshot expiry"),
so replication goes on from the exact position: nothing lost, nothing doubled, no re-snapshot.
One MariaDB for the module, the session's Spark, replicate in this process; the scheduled
maintenance also on the test cluster with the JDBC catalog (`binlake replicate` as its own
process there).
"""

from __future__ import annotations

import io
import os
import subprocess
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlparse

import pytest

from binlake.binlog.names import TableName
from binlake.cli.maintain_cmd import render_report
from binlake.config import load_config
from binlake.console import Console
from binlake.lake.catalog.metadata import APPLIED_TAG, read_table
from binlake.lake.catalog.target import lake_target
from binlake.lake.schema.sql import TABLE_PROPERTIES
from binlake.lake.spark.lineage import current_lineage, lineage_cut, refs, snapshots, table_metadata
from binlake.lake.spark.lookup import load_table
from binlake.lake.tables.maintenance import (
    CACHED_DELETES,
    FoldPolicy,
    action_session,
    compact,
    merge_position_deletes,
    remove_dangling_deletes,
    rewrite_action,
    table_health,
)
from binlake.lake.write import key_positions
from binlake.maintain.plan import Step
from binlake.maintain.runner import Maintainer
from binlake.maintain.schedule import ScheduledMaintenance
from binlake.metrics import (
    KEY_INDEX_REBUILDS,
    MAINTENANCE_REWRITTEN_BYTES,
    MAINTENANCE_STEPS,
    Metrics,
)
from binlake.storage.expiry_lock import EXPIRY_LOCK_FILE_NAME
from binlake_dev.sandbox import MariaDBSandbox
from expiry_holder import expiry_lock_held_by_another_process
from key_index_testing import assert_index_matches_the_table, lake_name, run_sql
from lake_builder import master_position
from lake_targets import TargetSetup
from maintain_testing import (
    MAINTAIN_EVERYTHING,
    cut_snapshots,
    flock_waiters,
    maintaining_only,
    recorded_cuts,
    replicated_workload,
    scheduled,
    with_maintenance,
    write_changes,
)
from replicate_testing import (
    applied_offset,
    assert_cuts_are_exact,
    assert_history_is_exactly_once,
    assert_verify_passes,
    binlake_command,
    config_for,
    lake_warehouse,
    module_source,
    replicate_in_process,
    replicate_until_caught_up,
)

source = module_source("lake-maintenance-source")


def compact_and_expire_all(spark: object, database: str, table: str) -> None:
    """What a user runs by hand: compaction, then expiry of everything but the newest."""
    sql = spark.sql  # type: ignore[attr-defined]
    name = f"{database}.{table}"
    sql(
        f"CALL lake.system.rewrite_data_files(table => '{name}', "
        "options => map('rewrite-all', 'true'))"
    )
    newest = sql(f"SELECT max(committed_at) FROM lake.{name}.snapshots").collect()[0][0]
    sql(
        f"CALL lake.system.expire_snapshots(table => '{name}', "
        f"older_than => TIMESTAMP '{newest}', retain_last => 1)"
    )


def test_replication_goes_on_exactly_once_after_a_user_compacts_and_expires_every_snapshot(
    source: MariaDBSandbox, spark: object, tmp_path: Path
) -> None:
    database = f"lm_{uuid.uuid4().hex[:8]}"
    config = replicated_workload(source, spark, tmp_path, database)
    for table in ("keyed", "keyless"):
        name = f"lake.{database}.{table}"
        newest = current_lineage(spark, name)[0]  # type: ignore[arg-type]
        assert refs(spark, name)[APPLIED_TAG] == ("tag", newest.snapshot_id)  # type: ignore[arg-type]
        compact_and_expire_all(spark, database, table)
        lineage = current_lineage(spark, name)  # type: ignore[arg-type]
        assert not lineage[0].binlake, "the user's compaction is the newest snapshot"
        assert [s.snapshot_id for s in lineage[1:]] == [newest.snapshot_id]
        assert lineage[-1].tagged and not lineage_cut(lineage), "cut, and the tag kept it"
        assert len(snapshots(spark, name)) == 2  # type: ignore[arg-type]
        lake = read_table(lake_warehouse(spark), (database, table))
        assert lake is not None and lake.latest_binlake is not None
        assert lake.latest_binlake.snapshot_id == newest.snapshot_id and not lake.lineage_cut
    write_changes(source, database, 100)
    run = replicate_in_process(config, spark)
    assert run.result.applied.row_changes > 0, run.output
    assert sorted(assert_verify_passes(config, spark)) == [
        f"{database}.keyed",
        f"{database}.keyless",
    ]
    history = assert_history_is_exactly_once(config, spark)
    assert all(count >= 2 for count in history.values()), history


def plant_orphan(spark: object, table: str, age_s: float) -> Path:
    """A copy of one of the table's (``catalog.db.t``) data files under a name no snapshot
    references, in its data folder (where the catalog put the table)."""
    location = table_metadata(spark, table)["location"]  # type: ignore[arg-type]
    data = Path(urlparse(location).path) / "data"
    original = next(data.rglob("*.parquet"))
    orphan = original.with_name(f"orphan-{uuid.uuid4().hex}.parquet")
    orphan.write_bytes(original.read_bytes())
    old = time.time() - age_s
    os.utime(orphan, (old, old))
    return orphan


def test_maintain_compacts_expires_and_removes_old_orphans_then_replication_is_exactly_once(
    source: MariaDBSandbox, spark: object, tmp_path: Path
) -> None:
    database = f"lm_{uuid.uuid4().hex[:8]}"
    config = replicated_workload(source, spark, tmp_path, database, MAINTAIN_EVERYTHING)
    old = plant_orphan(spark, f"lake.{database}.keyed", age_s=2 * 86_400)
    young = plant_orphan(spark, f"lake.{database}.keyed", age_s=0)
    maintainer = Maintainer(load_config(config), spark, Console(io.StringIO(), live=False))  # type: ignore[arg-type]
    tables = maintainer.tables()
    assert [str(t) for t in tables] == [f"{database}.keyed", f"{database}.keyless"]
    keyed = tables[0]
    planned = maintainer.maintain(keyed, dry_run=True)
    # Every step but the purge: the tiny table's mostly deleted rows fit a round's bound (the
    # purge's own test: test_a_rounds_compaction_moves_at_most_compaction_max_rows...).
    every = [s for s in Step if s is not Step.PURGE]
    assert [p.step for p in planned.planned] == every
    assert planned.health.delete_files > 0, "row deltas wrote delete files"
    assert "would compact: " in render_report(planned, dry_run=True)
    assert old.exists(), "a dry run changes nothing"
    done = maintainer.maintain(keyed)
    assert [r.planned.step for r in done.runs] == every
    assert done.runs[0].counts["rewritten_data_files_count"] == planned.health.data_files
    # The compaction leaves the delete files it applied (position deletes of files it removed,
    # none above the rewritten file's sequence number): the pruning removes them, in one more
    # commit.
    assert done.runs[1].counts["removed_dangling_delete_files_count"] > 0, done.runs
    name = f"lake.{database}.keyed"
    after = table_health(spark, name, 1 << 20)  # type: ignore[arg-type]
    assert after.data_files == 1 and after.delete_files == after.dangling_deletes == 0, after
    assert spark.sql(f"SELECT count(*) FROM {name}.delete_files").collect()[0][0] == 0  # type: ignore[attr-defined]
    # Kept: the newest (manifest rewrite), the tagged one, and those consistent cuts name.
    named = cut_snapshots(load_config(config), spark, (database, "keyed"))
    assert named, "replicate recorded cuts naming the table's snapshots"
    kept = set(snapshots(spark, name))  # type: ignore[arg-type]
    assert named <= kept, f"expiry removed snapshots cuts name: {named - kept}"
    assert after.snapshots == 1 + len(named | {refs(spark, name)[APPLIED_TAG][1]}), after  # type: ignore[arg-type]
    assert not old.exists() and young.exists(), "only orphans older than the bound go"
    assert_verify_passes(config, spark)
    again = maintainer.maintain(keyed, dry_run=True)
    assert Step.COMPACT not in [p.step for p in again.planned], again
    assert Step.PRUNE not in [p.step for p in again.planned], again
    maintainer.maintain(tables[1])
    write_changes(source, database, 100)
    replicate_in_process(config, spark)
    assert len(assert_verify_passes(config, spark)) == 2
    assert_history_is_exactly_once(config, spark)


@pytest.mark.parametrize("target", ["embedded", "cluster-jdbc"], indirect=True)
def test_replicate_with_scheduled_maintenance_maintains_beside_its_batches_exactly_once(
    source: MariaDBSandbox, spark: object, tmp_path: Path, target: TargetSetup
) -> None:
    """On the cluster the round's compaction, expiry and orphan listing are Spark jobs on its
    executor, and every commit goes through the JDBC catalog (the workload before it is
    replicated into that catalog by the tests' own session)."""
    database = f"lm_{uuid.uuid4().hex[:8]}{target.suffix}"
    config = replicated_workload(source, spark, tmp_path, database, MAINTAIN_EVERYTHING, target)
    scheduled(config)
    keyed = lake_target(load_config(config)).lake_table(TableName(database, "keyed"))
    old = plant_orphan(spark, keyed, age_s=2 * 86_400)
    write_changes(source, database, 100)
    run = replicate_until_caught_up(config, spark, target)
    # Each step's line is printed once its commit landed. (The compaction's replace is not looked
    # for in the lineage: a batch committed before the round's expiry may let it drop the replace.)
    for step in ("compact", "prune", "manifests", "expire", "orphans"):  # orphans: first round
        assert f"keyed: {step} in " in run.output, run.output
    assert not old.exists()
    assert len(assert_verify_passes(config, spark)) == 2  # (the session's metadata refreshed)
    assert_history_is_exactly_once(config, spark)


def test_a_scheduled_round_runs_on_its_own_thread_while_replication_commits(
    source: MariaDBSandbox, spark: object, tmp_path: Path
) -> None:
    """``step`` starts the round and returns; replication commits to the same tables while it
    runs (Iceberg's retries settle any commit either side loses); ``close`` waits for it. A
    second round cancelled by ``close(cancel=True)`` leaves the tables exact too."""
    database = f"lm_{uuid.uuid4().hex[:8]}"
    config = replicated_workload(source, spark, tmp_path, database, MAINTAIN_EVERYTHING)
    loaded = load_config(config)  # replicate's own rounds stay off: this test runs them
    rounds = replace(loaded, maintenance=replace(loaded.maintenance, schedule_s=1.0))
    stop = threading.Event()
    output = io.StringIO()
    metrics = Metrics()
    console = Console(output, live=False)
    maintenance = ScheduledMaintenance(rounds, spark, console, stop, metrics)  # type: ignore[arg-type]
    tables = [TableName(database, "keyed"), TableName(database, "keyless")]
    maintenance.step(lambda: tables)
    assert not maintenance.running, "the first round is due schedule_s after the start"
    time.sleep(1.0)
    maintenance.step(lambda: tables)
    assert maintenance.running, "step returned before its round ended"
    write_changes(source, database, 100)
    replicate_in_process(config, spark)  # batches committed beside the round
    maintenance.close(cancel=False)
    assert not maintenance.running and maintenance.rounds == 1, output.getvalue()
    assert "compact" in maintenance.steps and "expire" in maintenance.steps, output.getvalue()
    # The keyed table's compaction committed. (Not read from its lineage: when replication
    # commits between the round's compaction and its expiry, the expiry may drop the replace.)
    assert f"{tables[0]}: compact in " in output.getvalue(), output.getvalue()
    compacted = {"table": str(tables[0]), "step": "compact"}
    assert metrics.value(MAINTENANCE_STEPS, compacted) == 1
    rewritten = metrics.value(MAINTENANCE_REWRITTEN_BYTES, compacted) or 0
    assert 0 < rewritten <= maintenance.rewritten_bytes, output.getvalue()
    assert " MB rewritten (" in output.getvalue(), output.getvalue()
    try:
        assert len(assert_verify_passes(config, spark)) == 2
    except AssertionError as error:  # the commits on either side, to tell what raced
        detail = f"{error}\n{output.getvalue()}{commits_of(spark, config, tables[0])}"
        raise AssertionError(detail) from None
    assert_history_is_exactly_once(config, spark)
    write_changes(source, database, 200)
    replicate_in_process(config, spark)
    time.sleep(1.0)  # schedule_s: the next round is due
    maintenance.step(lambda: tables)
    assert maintenance.running
    maintenance.close(cancel=True)
    assert not maintenance.running and maintenance.rounds == 2, output.getvalue()
    write_changes(source, database, 300)
    replicate_in_process(config, spark)
    assert len(assert_verify_passes(config, spark)) == 2
    assert_history_is_exactly_once(config, spark)


def commits_of(spark: object, config: Path, table: TableName) -> str:
    """Each snapshot of ``table`` still in its metadata, with its parent, operation, binlake
    position and file counts, and each live delete file with the data files it names."""
    name = lake_target(load_config(config)).lake_table(table)
    spark.sql(f"REFRESH TABLE {name}")  # type: ignore[attr-defined]
    lines = [
        f"{r[0]} <- {r[1]} {r[2]} {dict(r[3] or {})}"
        for r in spark.sql(  # type: ignore[attr-defined]
            f"SELECT snapshot_id, parent_id, operation, summary FROM {name}.snapshots "
            "ORDER BY committed_at"
        ).collect()
    ]
    deletes = spark.sql(  # type: ignore[attr-defined]
        f"SELECT d.file_path, d.content, p.file_path AS names FROM {name}.delete_files d "
        f"LEFT JOIN (SELECT DISTINCT delete_file_path, file_path FROM {name}.position_deletes) p "
        "ON p.delete_file_path = d.file_path"
    ).collect()
    lines += [f"delete {r[0]} ({r[1]}) names {r[2]}" for r in deletes]
    live = spark.sql(f"SELECT file_path FROM {name}.data_files").collect()  # type: ignore[attr-defined]
    lines += [f"data {r[0]}" for r in live]
    return "\n".join(lines)


class WatchedLock:
    """A lock that tells when someone starts waiting for it (``with``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiting = threading.Event()

    def __enter__(self) -> WatchedLock:
        self.waiting.set()
        self.lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def test_a_maintainers_expiry_waits_for_its_lock_which_cut_recording_shares(
    source: MariaDBSandbox, spark: object, tmp_path: Path
) -> None:
    """A scheduled round's expiry holds ``expiry`` from its cut tags to its end (the applier's
    cut recording skips a try while it is held): held by someone else, the expiry waits, after
    the steps before it ran, and runs once it is free."""
    database = f"lm_{uuid.uuid4().hex[:8]}"
    config = replicated_workload(source, spark, tmp_path, database, MAINTAIN_EVERYTHING)
    expiry = WatchedLock()
    console = Console(io.StringIO(), live=False)
    maintainer = Maintainer(load_config(config), spark, console, expiry=expiry)  # type: ignore[arg-type]
    keyed = maintainer.tables()[0]
    name = f"lake.{database}.keyed"
    before = len(snapshots(spark, name))  # type: ignore[arg-type]
    reports: list[object] = []
    with expiry.lock:
        thread = threading.Thread(
            target=lambda: reports.append(maintainer.maintain(keyed, orphans_due=False))
        )
        thread.start()
        assert expiry.waiting.wait(120), "the maintainer never came to its expiry"
        time.sleep(1.0)  # what an expiry not waiting would do meanwhile
        assert thread.is_alive(), "the expiry did not wait for the lock"
        operations = [s.operation for s in current_lineage(spark, name)]  # type: ignore[arg-type]
        assert "replace" in operations, "the compaction before it ran"
        held = len(snapshots(spark, name))  # type: ignore[arg-type]
        assert held > before, "the compaction's snapshots are there: nothing expired"
    thread.join(120)
    assert not thread.is_alive() and reports
    assert len(snapshots(spark, name)) < held, "the expiry ran once the lock was free"  # type: ignore[arg-type]
    assert len(assert_verify_passes(config, spark)) == 2


def test_replicate_records_no_cut_while_another_process_holds_the_expiry_lock(
    source: MariaDBSandbox, spark: object, tmp_path: Path
) -> None:
    """`binlake maintain` on this host holds the state folder's expiry lock from its cut tags
    to the end of its expiry (``binlake.storage.expiry_lock``): a `replicate` of that state
    folder applies its batches meanwhile but records no cut, and at its end waits to record
    the last one, which it does once the lock is free."""
    database = f"lm_{uuid.uuid4().hex[:8]}"
    config = replicated_workload(source, spark, tmp_path, database)
    loaded = load_config(config)
    before = recorded_cuts(loaded, spark)
    assert before, "the first run recorded its cut"
    runs: list[object] = []
    with expiry_lock_held_by_another_process(loaded.state.dir):
        write_changes(source, database, 100)
        end = master_position(source)
        thread = threading.Thread(target=lambda: runs.append(replicate_in_process(config, spark)))
        thread.start()
        deadline = time.monotonic() + 120
        while applied_offset(config, (database, "keyless")) < end.offset:
            assert time.monotonic() < deadline, "the run never applied the new changes"
            assert thread.is_alive(), "the run ended without its last cut"
            time.sleep(0.2)
        time.sleep(1.0)  # what a cut recording not waiting would do meanwhile
        assert thread.is_alive(), "the run's last cut did not wait for the expiry lock"
        assert recorded_cuts(loaded, spark) == before, "a cut was recorded under the lock"
    thread.join(120)
    assert not thread.is_alive() and runs
    after = recorded_cuts(loaded, spark)
    assert len(after) > len(before), "the last cut was recorded once the lock was free"
    assert max(after, key=lambda cut: cut.cut_id).position == end
    assert assert_cuts_are_exact(config, spark) == len(after)
    assert len(assert_verify_passes(config, spark)) == 2


def test_binlake_maintain_expires_only_once_another_process_lets_go_of_the_expiry_lock(
    source: MariaDBSandbox, spark: object, tmp_path: Path
) -> None:
    """`binlake maintain` takes its config's state-folder expiry lock for each expiry (the lock
    a `replicate`'s cut recording takes): held by another process, the command waits in it,
    having expired nothing, and expires once it is free."""
    database = f"lm_{uuid.uuid4().hex[:8]}"
    config = replicated_workload(source, spark, tmp_path, database, maintaining_only("expire"))
    loaded = load_config(config)
    name = f"lake.{database}.keyed"
    before = len(snapshots(spark, name))  # type: ignore[arg-type]
    lock_file = loaded.state.dir / EXPIRY_LOCK_FILE_NAME
    command = binlake_command("maintain", config, "--tables", f"{database}.keyed")
    with expiry_lock_held_by_another_process(loaded.state.dir):
        maintain = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            deadline = time.monotonic() + 180
            while flock_waiters(lock_file) == 0:
                assert maintain.poll() is None, "binlake maintain ended without waiting"
                assert time.monotonic() < deadline, "binlake maintain never came to its expiry"
                time.sleep(0.2)
            spark.sql(f"REFRESH TABLE {name}")  # type: ignore[attr-defined]
            assert len(snapshots(spark, name)) == before, "expired under the lock"  # type: ignore[arg-type]
        except BaseException:
            maintain.kill()
            raise
    out, err = maintain.communicate(timeout=300)
    assert maintain.returncode == 0, err
    assert "expire" in out, out
    spark.sql(f"REFRESH TABLE {name}")  # type: ignore[attr-defined]
    assert len(snapshots(spark, name)) < before, "the expiry ran once the lock was free"  # type: ignore[arg-type]


def test_pruning_after_a_compaction_removes_a_merges_position_deletes_and_keeps_every_row(
    spark: object,
) -> None:
    """A MERGE's (file-scoped) position deletes: those a compaction applied are pruned, those
    still applying are not."""
    sql = spark.sql  # type: ignore[attr-defined]
    namespace = f"lm_{uuid.uuid4().hex[:8]}"
    name = f"lake.{namespace}.t"
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in TABLE_PROPERTIES.items())
    sql(f"CREATE NAMESPACE lake.{namespace}")
    sql(f"CREATE TABLE {name} (id INT, v INT) USING iceberg TBLPROPERTIES ({properties})")
    sql(f"INSERT INTO {name} VALUES (1, 1), (2, 2)")
    sql(f"INSERT INTO {name} VALUES (3, 3), (4, 4)")
    sql(f"DELETE FROM {name} WHERE id = 1")
    sql(f"UPDATE {name} SET v = 40 WHERE id = 4")  # the newest commit: its deletes at its seq
    before = table_health(spark, name, 1 << 20)  # type: ignore[arg-type]
    assert before.delete_files > 0 and before.dangling_deletes == 0, before
    assert remove_dangling_deletes(spark, name)["removed_dangling_delete_files_count"] == 0  # type: ignore[arg-type]
    compact(spark, "lake", (namespace, "t"))  # type: ignore[arg-type]
    compacted = table_health(spark, name, 1 << 20)  # type: ignore[arg-type]
    assert compacted.data_files == 1 and compacted.delete_files == 0, compacted
    removed = remove_dangling_deletes(spark, name)  # type: ignore[arg-type]
    assert removed["removed_dangling_delete_files_count"] == compacted.dangling_deletes
    assert sql(f"SELECT count(*) FROM {name}.delete_files").collect()[0][0] == 0
    rows = [tuple(r) for r in sql(f"SELECT id, v FROM {name} ORDER BY id").collect()]
    assert rows == [(2, 2), (3, 3), (4, 40)]


def test_a_fold_rewrites_small_and_mostly_deleted_files_only_then_position_deletes_merge(
    spark: object,
) -> None:
    """Without equality deletes a compaction folds the small files and rewrites a file with
    half its rows deleted, and leaves the large file with a few position deletes as it was;
    the "deletes" step then merges the position-delete files (one per DELETE here: partition
    granularity, as a batch writes one for the data files it reaches) into one."""
    sql = spark.sql  # type: ignore[attr-defined]
    namespace = f"lm_{uuid.uuid4().hex[:8]}"
    name = f"lake.{namespace}.t"
    own = {**TABLE_PROPERTIES, "write.delete.granularity": "partition"}
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in own.items())
    sql(f"CREATE NAMESPACE lake.{namespace}")
    sql(f"CREATE TABLE {name} (id INT, v INT) USING iceberg TBLPROPERTIES ({properties})")
    one_file = "INSERT INTO {} SELECT /*+ COALESCE(1) */ CAST(id AS INT), 0 FROM range({}, {})"
    for low, high in ((0, 2000), (2000, 2004), (2004, 2006), (2006, 2008)):
        sql(one_file.format(name, low, high))
    large = sql(f"SELECT file_path, file_size_in_bytes FROM {name}.files").collect()
    large_path, small_bytes = max((r[1], r[0]) for r in large)[::-1]  # every other is smaller
    for deleted in ("id IN (2000, 2001)", "id = 5", "id = 6", "id = 7"):
        sql(f"DELETE FROM {name} WHERE {deleted}")
    health = table_health(spark, name, small_bytes)  # type: ignore[arg-type]
    assert (health.equality_deletes, health.delete_files, health.small_files) == (0, 4, 3)
    expected = [tuple(r) for r in sql(f"SELECT id, v FROM {name} ORDER BY id").collect()]
    counts = compact(spark, "lake", (namespace, "t"), FoldPolicy(small_bytes, 0.3))  # type: ignore[arg-type]
    assert counts["rewritten_data_files_count"] == 3, counts
    live = {r[0] for r in sql(f"SELECT file_path FROM {name}.files WHERE content = 0").collect()}
    assert large_path in live and len(live) == 2, live
    # The delete of the half-deleted file's rows named that file only: dangling, pruned.
    assert remove_dangling_deletes(spark, name)["removed_dangling_delete_files_count"] == 1  # type: ignore[arg-type]
    assert table_health(spark, name, small_bytes).delete_files == 3  # type: ignore[arg-type]
    merged = merge_position_deletes(spark, "lake", (namespace, "t"))  # type: ignore[arg-type]
    assert merged["rewritten_delete_files_count"] == 3, merged
    assert sql(f"SELECT count(*) FROM {name}.delete_files").collect()[0][0] == 1
    assert [tuple(r) for r in sql(f"SELECT id, v FROM {name} ORDER BY id").collect()] == expected


def test_the_compaction_runs_with_the_executors_delete_file_cache_on(spark: object) -> None:
    """Iceberg's rewrite turns the executors' delete-file cache off in its session (every data
    file would read every equality-delete file again); binlake's compaction turns it on in that
    session, reached through the shipped jar's classes."""
    name = f"lake.cache_check.t_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE TABLE {name} (id BIGINT) USING iceberg")  # type: ignore[attr-defined]
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    plain = jvm.org.apache.iceberg.spark.actions.SparkActions.get(
        spark._jsparkSession  # type: ignore[attr-defined]
    ).rewriteDataFiles(load_table(spark, name))  # type: ignore[arg-type]
    iceberg_own = action_session(spark, plain)  # type: ignore[arg-type]
    assert iceberg_own is not None and iceberg_own.conf().get(CACHED_DELETES) == "false"
    ours = action_session(spark, rewrite_action(spark, name))  # type: ignore[arg-type]
    assert ours is not None and ours.conf().get(CACHED_DELETES) == "true"


#: Over the Parquet file of a batch of a few rows (about 500 bytes), under one of 500 rows
#: (about 1,700: a purge's, which the next round's fold must leave as it is).
SMALL_BYTES = 1200
#: Rewrites only through a compaction (and its purge and pruning).
COMPACTING = (
    "[maintenance]\n"
    "schedule_s = 0\n"
    "delete_files_per_data_file = 0.0\n"
    "small_files = 2\n"
    f"small_file_bytes = {SMALL_BYTES}\n"
    "delete_ratio = 0.3\n"
    "compaction_max_rows = {bound}\n"
    "position_delete_files = 10000000\n"
    "manifests = 10000000\n"
    "keep_snapshots = 10000000\n"
    "orphan_min_age_s = 86400\n"
)


def three_half_deleted_files_and_two_small_ones(
    tmp_path: Path, source: MariaDBSandbox, spark: object, database: str, bound: int
) -> Path:
    """A keyed table replicated into three data files of 1,000 rows, each with half its rows
    deleted by a position-delete file of its own (one batch each: a reader's ratio counts the
    deletes scoped to one file), and two files of two rows. Its config."""
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v INT)")
    config = config_for(tmp_path, source, spark, database, applier="max_transactions = 100\n")
    with_maintenance(config, COMPACTING.format(bound=bound))
    replicate_in_process(config, spark)
    statements = [f"INSERT INTO t SELECT seq, {k} FROM seq_{k}000_to_{k}999" for k in (1, 2, 3)]
    statements += [f"DELETE FROM t WHERE id BETWEEN {k}000 AND {k}499" for k in (1, 2, 3)]
    statements += ["INSERT INTO t VALUES (1, 0), (2, 0)", "INSERT INTO t VALUES (3, 0), (4, 0)"]
    for statement in statements:
        run_sql(source, database, statement)
        replicate_in_process(config, spark)
    sizes = data_files(spark, lake_name(config, f"{database}.t")).values()
    small = [size for size, rows in sizes if rows == 2]
    assert len(small) == 2 and max(small) < SMALL_BYTES, sorted(sizes)
    assert min(size for size, rows in sizes if rows == 1000) > 2 * SMALL_BYTES, sorted(sizes)
    return config


def data_files(spark: object, name: str) -> dict[str, tuple[int, int]]:
    """Each live data file of ``name``: its bytes and rows."""
    spark.sql(f"REFRESH TABLE {name}")  # type: ignore[attr-defined]
    query = (
        f"SELECT file_path, file_size_in_bytes, record_count FROM {name}.files WHERE content = 0"
    )
    return {str(r[0]): (int(r[1]), int(r[2])) for r in spark.sql(query).collect()}  # type: ignore[attr-defined]


@pytest.mark.parametrize(("bound", "rounds"), [(500, 3), (0, 1)])
def test_a_rounds_compaction_moves_at_most_compaction_max_rows_and_the_index_catches_up(
    tmp_path: Path,
    source: MariaDBSandbox,
    spark: object,
    monkeypatch: pytest.MonkeyPatch,
    bound: int,
    rounds: int,
) -> None:
    """Three half-deleted files of 500 live rows and the batches' small files. Bounded to 500
    rows a round, each round folds the small files and rewrites one half-deleted file (a
    purge of its own while the rest hold more than the bound; the last one in the fold), so
    the batch after it catches the key index up; unbounded, one round moves them all, and with
    ``REBUILD_MOVED_ROWS`` lowered under that (as 10 M rows are over a million) the next batch
    rebuilds the index. Each batch updates a row of a file the round kept and one it wrote;
    the lake stays equal to the source."""
    monkeypatch.setattr(key_positions, "REBUILD_MOVED_ROWS", 600)
    database = f"lm_bound_{bound}"
    table = f"{database}.t"
    config = three_half_deleted_files_and_two_small_ones(tmp_path, source, spark, database, bound)
    name = lake_name(config, table)
    half_deleted = {p for p, (_, rows) in data_files(spark, name).items() if rows == 1000}
    maintainer = Maintainer(load_config(config), spark, Console(io.StringIO(), live=False))  # type: ignore[arg-type]
    for done in range(1, rounds + 1):
        before = data_files(spark, name)
        report = maintainer.maintain(TableName.parse(table), orphans_due=False)
        after = data_files(spark, name)
        steps = [run.planned.step for run in report.runs]
        purged = [Step.PURGE] if done < rounds else []  # the last file fits the bound
        assert steps == [Step.COMPACT, *purged, Step.PRUNE], report.planned
        small_rows = sum(rows for size, rows in before.values() if size < SMALL_BYTES)
        moved = sum(rows for path, (_, rows) in after.items() if path not in before)
        assert moved <= (bound or 1500) + small_rows, (moved, small_rows)
        left = half_deleted & set(after)
        assert len(left) == (3 - done if bound else 0), left
        small = {path for path, (size, _) in before.items() if size < SMALL_BYTES}
        assert len(small) >= 2 and not small & set(after), "the small files folded every round"
        run_sql(source, database, f"UPDATE t SET v = v + 10 WHERE id IN (1999, 2999, 3999, {done})")
        run_sql(source, database, f"INSERT INTO t VALUES ({9000 + done}, {done})")
        run = replicate_in_process(config, spark)
        if bound:
            assert "key index" not in run.output, run.output  # caught up
        else:
            assert "which costs less than catching up" in run.output, run.output
            moved_reason = {"table": table, "reason": "moved"}
            assert run.metrics.value(KEY_INDEX_REBUILDS, moved_reason) == 1, run.output
        assert_index_matches_the_table(spark, config, table)
    assert half_deleted.isdisjoint(data_files(spark, name))
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
