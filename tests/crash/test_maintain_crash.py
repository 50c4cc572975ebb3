"""Issue 14: processes killed (SIGKILL) at the durable steps that keep a table healthy and its
applied position through snapshot expiry, then restarted: nothing lost, nothing doubled.

``lake_before_tag_move``: a commit made by a DataFrame write (a partitioned keyless table's
appended change log) landed, the ``binlake-applied`` tag removed before it is not set again
yet. The tag must then be absent, never on an older snapshot (its position would apply the
batch again); the restart sets it on the newest binlake snapshot with its next commit.

``maintain_after_<step>``: `binlake maintain` (its own process, the step the only one its
thresholds call for; ``prune`` after its compaction, ``purge`` after a compaction of the small
files only, of a file the first compaction wrote that a batch of its own then mostly deleted)
killed once the step's commit (or, for orphans, its deletions) is done, after each step in
turn on one table: replication goes on after each kill, every table's history is exactly
once, and `verify` passes at the end.

In ``cut`` mode (``make power-cut``) the state folder and the warehouse (``Ground.lake``) are on
the power-cut file system and the power is cut after each kill: a commit no fsync covered may be
taken back (and set back on start), so the checks of what the killed run left are the ones a
cut allows.

``maintain_after_protect``: killed between the expiry's tag commit (the ``binlake-cut-<id>``
tags on the snapshots retained consistent cuts name) and the expiry: the tags are there, no
snapshot is expired. Replication then records new cuts (a cut after every batch, the newest
three retained: the tagged ones are dropped); the next maintain tags again (stale tags removed,
new ones set, one commit) before it expires, so every retained cut's snapshots stay readable.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from binlake.config import load_config
from binlake.console import Console
from binlake.lake.catalog.metadata import APPLIED_TAG
from binlake.lake.cuts.table import CUT_TAG_PREFIX
from binlake.lake.spark.lineage import current_lineage, refs, snapshots
from binlake.maintain.plan import Step
from binlake.maintain.runner import Maintainer
from binlake_dev.sandbox import MariaDBSandbox
from cut_modes import CUT, KILL, Ground
from maintain_testing import (
    MAINTAIN_EVERYTHING,
    assert_cut_snapshots_tagged,
    delete_from_one_file,
    maintaining_only,
    replicated_workload,
    scheduled,
    write_changes,
)
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    describe,
    module_source,
    replicate_in_process,
    run_binlake,
    run_until_killed,
)

source = module_source("maintain-crash-source")


@pytest.mark.parametrize(
    "ground",
    [KILL, pytest.param(CUT, marks=[pytest.mark.powercut, pytest.mark.slow])],
    indirect=True,
)
def test_replicate_killed_before_a_tag_move_leaves_no_tag_and_restarts_exactly_once(
    ground: Ground, source: MariaDBSandbox, spark: object
) -> None:
    database = "crash_tag_move_cut" if ground.cutting else "crash_tag_move"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.log (id INT, v INT)")
    for i in range(6):
        source.execute(f"INSERT INTO {database}.log VALUES ({i}, {i}), ({i}, {i + 1})")
    source.execute(f"DELETE FROM {database}.log WHERE id = 2")
    # Partitioned: a change log's append is then a DataFrame write (unpartitioned, it commits
    # its data file with the tag, as a row delta does).
    layout = f'[tables.layout."{database}.log"]\npartition = ["bucket(2, id)"]\n'
    folder = ground.folder("run")
    folder.mkdir()
    lake = ground.lake(spark)
    config = config_for(
        folder,
        source,
        spark,
        database,
        applier="max_transactions = 2\n",
        tables=layout,
        target=lake,
    )
    ground.settle()
    killed = run_until_killed(config, "lake_before_tag_move:2")
    assert killed.returncode == -9, f"not killed at lake_before_tag_move\n{describe(killed)}"
    ground.crash(tear=4096)
    name = f"{'lake' if lake is None else lake.catalog}.{database}.log"
    if ground.cutting:
        assert_tag_on_the_newest_or_absent(spark, name)
    else:
        spark.sql(f"REFRESH TABLE {name}")  # type: ignore[attr-defined]
        assert len([s for s in current_lineage(spark, name) if s.binlake]) == 2  # type: ignore[arg-type]
        assert APPLIED_TAG not in refs(spark, name)  # type: ignore[arg-type]
    source.execute(f"UPDATE {database}.log SET v = v * 10 WHERE id > 3")
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    assert assert_history_is_exactly_once(config, spark)[f"{database}.log"] >= 4
    newest = next(s for s in current_lineage(spark, name) if s.binlake)  # type: ignore[arg-type]
    assert refs(spark, name)[APPLIED_TAG] == ("tag", newest.snapshot_id)  # type: ignore[arg-type]


def assert_tag_on_the_newest_or_absent(spark: object, name: str) -> None:
    """After a power cut the table holds what the killed run's last checkpoint covered, or
    more (the commits the cut took back are set back on start: none of them may be left, and
    the table itself may be gone when it was created since); the tag is never on an older
    snapshot than the newest binlake one."""
    if not spark.catalog.tableExists(name):  # type: ignore[attr-defined]
        return
    spark.sql(f"REFRESH TABLE {name}")  # type: ignore[attr-defined]
    newest = next((s for s in current_lineage(spark, name) if s.binlake), None)  # type: ignore[arg-type]
    tag = refs(spark, name).get(APPLIED_TAG)  # type: ignore[arg-type]
    assert tag is None or (newest is not None and tag == ("tag", newest.snapshot_id)), tag


#: A cut after every batch, the newest three retained (no interval kept): the cuts the killed
#: run tagged are gone by the next run, which must swap their tags for the new cuts' ones.
CUTS_EVERY_BATCH = "[cuts]\nevery_s = 0\nkeep_last = 3\nkeep_for_s = 0\n"


#: The steps one lineage's `binlake maintain` runs are killed after, in this order.
STEPS = (*(s.value for s in Step), "protect")


@pytest.mark.parametrize(
    "ground",
    [KILL, pytest.param(CUT, marks=[pytest.mark.powercut, pytest.mark.slow])],
    indirect=True,
)
def test_maintain_killed_after_each_step_in_turn_then_replicated_is_exactly_once(
    ground: Ground, source: MariaDBSandbox, spark: object
) -> None:
    """One table, one state folder: `binlake maintain` killed after each step in turn (its
    thresholds let that step run alone), each kill followed by changes on the source and a
    replication that must go on exactly once from what the killed run left."""
    database = "crash_maintain_cut" if ground.cutting else "crash_maintain"
    folder = ground.folder("run")
    folder.mkdir()
    # A cut after every batch from the start: the protect step tags the snapshots cuts name.
    lake = ground.lake(spark)
    config = replicated_workload(source, spark, folder, database, CUTS_EVERY_BATCH, lake)
    base = config.read_text()
    name = f"{'lake' if lake is None else lake.catalog}.{database}.keyed"
    for run, step in enumerate(STEPS, start=1):
        config.write_text(base + maintaining_only(step))
        if step == "purge":  # a file the compaction before wrote, mostly deleted
            delete_from_one_file(source, database)
            replicate_in_process(config, spark)
        ground.settle()
        before = set(snapshots(spark, name))  # type: ignore[arg-type]
        point = f"maintain_after_{step}"
        killed = run_binlake("maintain", config, "--tables", f"{database}.keyed", crash_point=point)
        assert killed.returncode == -9, f"not killed after {step}\n{describe(killed)}"
        ground.crash(tear=4096)
        spark.sql(f"REFRESH TABLE {name}")  # type: ignore[attr-defined]
        # The compaction's delete files gone from the current snapshot (after a power cut the
        # maintenance commits no fsync covered may be taken back: no step changes a row).
        if step == "prune" and not ground.cutting:
            assert spark.sql(f"SELECT count(*) FROM {name}.delete_files").collect()[0][0] == 0  # type: ignore[attr-defined]
        if step == "purge" and not ground.cutting:  # one file, the bound's one row over
            purge = current_lineage(spark, name)[0]  # type: ignore[arg-type]
            assert (purge.operation, purge.summary["deleted-data-files"]) == ("replace", "1")
        if step == "protect":  # the cut tags committed, the expiry not started
            tagged = assert_cut_snapshots_tagged(config, spark, f"{database}.keyed")
            assert set(snapshots(spark, name)) == before, "no snapshot expired yet"  # type: ignore[arg-type]
        write_changes(source, database, 100 * run)
        replicate_in_process(config, spark)
        if step == "protect":
            assert_maintain_tags_again_before_it_expires(config, spark, database, tagged)
        assert_history_is_exactly_once(config, spark)
    assert len(assert_verify_passes(config, spark)) == 2


def test_replicate_killed_in_its_scheduled_round_beside_batches_restarts_exactly_once(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """`binlake replicate` with a scheduled round (on its own thread, beside the batches of the
    changes waiting on the source) killed once the round's compaction committed: the restart
    applies what the killed run had not (its own first round beside it)."""
    database = "crash_scheduled"
    config = replicated_workload(source, spark, tmp_path, database, MAINTAIN_EVERYTHING)
    scheduled(config)
    name = f"lake.{database}.keyed"
    write_changes(source, database, 100)
    killed = run_until_killed(config, "maintain_after_compact")
    assert killed.returncode == -9, describe(killed)
    spark.sql(f"REFRESH TABLE {name}")  # type: ignore[attr-defined]
    assert "replace" in [s.operation for s in current_lineage(spark, name)]  # type: ignore[arg-type]
    write_changes(source, database, 200)
    replicate_in_process(config, spark)
    assert_history_is_exactly_once(config, spark)
    assert len(assert_verify_passes(config, spark)) == 2


def assert_maintain_tags_again_before_it_expires(
    config: Path, spark: object, database: str, tagged: set[int]
) -> None:
    """Maintenance on every table, to its end (in this process; no orphan listing, as the
    scheduled rounds run it), after the run killed after its tags (``tagged``: the snapshots it
    tagged) and the cuts recorded and dropped since: the expiry kept exactly the snapshots refs
    name, among them every snapshot the retained cuts name, each tagged (the old tags gone) and
    readable."""
    maintainer = Maintainer(load_config(config), spark, Console(io.StringIO(), live=False))  # type: ignore[arg-type]
    for table in maintainer.tables():
        steps = [r.planned.step for r in maintainer.maintain(table, orphans_due=False).runs]
        assert Step.EXPIRE in steps, steps
    only_cut_tag: set[int] = set()
    for name in ("keyed", "keyless"):
        named = assert_cut_snapshots_tagged(config, spark, f"{database}.{name}")
        lake = f"{load_config(config).target.catalog}.{database}.{name}"
        table_refs = refs(spark, lake)  # type: ignore[arg-type]
        kept = set(snapshots(spark, lake))  # type: ignore[arg-type]
        assert kept == {snapshot for _, snapshot in table_refs.values()}, "expired the rest"
        others = {s for n, (_, s) in table_refs.items() if not n.startswith(CUT_TAG_PREFIX)}
        only_cut_tag |= named - others
        if name == "keyed":
            assert not named & tagged, f"the killed run's cuts are dropped: {tagged}, {named}"
    assert only_cut_tag, "some cut names a snapshot only its tag keeps through the expiry"
