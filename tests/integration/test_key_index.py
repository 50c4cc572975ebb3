"""The key index end to end (real MariaDB, Spark, Iceberg): by default a batch that updates or
deletes a key already in the table deletes its row by position (a position-delete file, or on a
table turned to format v3 deletion vectors; the positions from the key index in the state
folder); the index names the table's snapshot and holds exactly its live rows after every
batch, after another writer's compaction (caught up from the table's commits), and after it was
damaged, removed or replaced by another table's (rebuilt, reported, counted); ``binlake
maintain`` turns an equality-delete table into one no equality delete reaches; a commit whose
position deletes name a data file a compaction removed meanwhile, or whose DV loses to another
writer's, fails as a conflict. Every scenario ends with `binlake verify`."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from binlake.binlog.names import TableName
from binlake.config import load_config
from binlake.console import Console
from binlake.errors import CommitConflictError, DeletionVectorError
from binlake.keyindex.open_set import OpenIndexes
from binlake.lake.catalog.target import lake_target
from binlake.lake.catalog.write_path import WRITE
from binlake.lake.spark.lineage import current_lineage, table_metadata
from binlake.lake.spark.lookup import read_lake_schema
from binlake.lake.tables.maintenance import (
    FoldPolicy,
    compact,
    merge_position_deletes,
    remove_dangling_deletes,
)
from binlake.lake.write import catch_up, key_positions
from binlake.lake.write.changes import KeyedChanges
from binlake.lake.write.key_positions import KeyPositions
from binlake.lake.write.keyed import KeyedWriter
from binlake.maintain.runner import Maintainer
from binlake.metrics import KEY_INDEX_REBUILDS
from binlake_dev.sandbox import MariaDBSandbox
from key_index_testing import (
    EQUALITY_DELETES,
    POSITION_DELETES,
    assert_index_matches_the_table,
    current_snapshot,
    damage,
    damage_delete_file,
    index_entries,
    index_path,
    lake_name,
    live_delete_kinds,
    run_sql,
)
from maintain_testing import with_maintenance
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    describe,
    module_source,
    replicate_in_process,
    run_replicate,
)

source = module_source("key-index-source")

ONE_BATCH = "max_transactions = 100000\nmax_seconds = 120\n"
TABLE = "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40), n INT)"
COMPACT_ONLY = (
    "[maintenance]\n"
    "schedule_s = 0\n"
    "delete_files_per_data_file = 0.0\n"
    "small_files = 2\n"
    "manifests = 10000000\n"
    "keep_snapshots = 10000000\n"
    "orphan_min_age_s = 86400\n"
)


def churn(source: MariaDBSandbox, database: str, step: int) -> None:
    """Updates, deletes, inserts and a key move of rows already in the lake."""
    run_sql(
        source,
        database,
        f"UPDATE t SET v = 'u{step}', n = n + 1 WHERE id % 5 = {step % 5}",
        f"DELETE FROM t WHERE id % 17 = {step % 17}",
        f"INSERT INTO t SELECT seq, 'i{step}', seq FROM seq_{1000 * step}_to_{1000 * step + 9}",
        f"UPDATE t SET id = id + 100000 WHERE id = {2 + step}",
    )


def replicated(
    tmp_path: Path, source: MariaDBSandbox, spark: Any, database: str, applier: str = ""
) -> Path:
    source.execute(f"CREATE DATABASE {database}")
    run_sql(source, database, TABLE, "INSERT INTO t SELECT seq, 'a', seq FROM seq_1_to_200")
    config = config_for(tmp_path, source, spark, database, applier=ONE_BATCH + applier)
    replicate_in_process(config, spark)
    return config


def test_position_deletes_follow_every_batch_and_a_damaged_or_foreign_index_is_rebuilt(
    tmp_path: Path, source: MariaDBSandbox, spark: Any
) -> None:
    """Batches of updates, deletes, inserts and key moves: every delete is by position, the
    index follows each batch (never rebuilt) and holds exactly the table's live rows. Then the
    index file is damaged (bytes overwritten in its middle), then cut in half, then replaced by
    another table's: each time the next batch rebuilds it, says so and counts it, and no row is
    wrong."""
    database = "ki_default"
    table = f"{database}.t"
    config = replicated(tmp_path, source, spark, database)
    run_sql(source, database, "CREATE TABLE other (id INT PRIMARY KEY, v INT)",
            "INSERT INTO other SELECT seq, seq FROM seq_1_to_300")  # fmt: skip
    assert_index_matches_the_table(spark, config, table)
    churn(source, database, 1)
    run = replicate_in_process(config, spark)
    assert "key index" not in run.output, run.output  # followed, never rebuilt
    assert_index_matches_the_table(spark, config, table)
    newest = current_lineage(spark, lake_name(config, table))[0].summary
    assert newest[WRITE] == "row-delta"
    assert int(newest["added-position-deletes"]) > 0 and "added-equality-deletes" not in newest
    damaged = ((2, "middle", "damaged"), (3, "truncate", "damaged"), (4, "foreign", "other table"))
    for step, how, reason in damaged:
        other = index_path(config, spark, f"{database}.other")
        damage(index_path(config, spark, table), how, other=other)
        churn(source, database, step)
        run = replicate_in_process(config, spark)
        assert f"{table}: key index" in run.output and "rebuilt from the table" in run.output
        assert run.metrics.value(KEY_INDEX_REBUILDS, {"table": table, "reason": reason}) == 1
        assert_index_matches_the_table(spark, config, table)
    assert set(live_delete_kinds(spark, config, table)) == {POSITION_DELETES}
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)


@dataclass
class StagedBeforeCompaction:
    """A batch staged on a replicated table's state, its index transaction open, then the
    table compacted by ``binlake maintain`` (``compaction``: its report)."""

    config: Path
    table: str
    keyed: KeyedWriter
    target: Any
    batch: Any
    staged: Any
    compaction: Any

    def end(self) -> None:
        """Roll the batch's index changes back (what the applier does unless the commit went
        on top of its base)."""
        assert self.keyed.positions is not None
        self.keyed.positions.end(self.batch, None)
        self.keyed.positions.close()


def staged_batch(
    config: Path, spark: Any, table: str, change: Callable[[KeyedChanges], None]
) -> tuple[KeyedWriter, Any, Any, Any]:
    """A batch of ``change`` staged on the table's state, its index transaction open: the
    writer, the table loaded, the index's batch and the staged files."""
    name = lake_name(config, table)
    schema = read_lake_schema(spark, name, TableName.parse(table))
    folder = load_config(config).state.keyindex_dir
    keyed = KeyedWriter(spark, KeyPositions(spark, folder, print))
    changes = KeyedChanges(table, ["id", "v", "n"], schema.key, lake_exact=True)
    change(changes)
    target = keyed.deltas.open(name, schema.key, table)
    assert keyed.positions is not None
    batch = keyed.positions.begin(target, table)
    staged = keyed.deltas.stage(target, changes.delta_chunks(schema.columns), table, batch)
    return keyed, target, batch, staged


def staged_before_compaction(
    tmp_path: Path,
    source: MariaDBSandbox,
    spark: Any,
    database: str,
    change: Callable[[KeyedChanges], None],
) -> StagedBeforeCompaction:
    """``replicated`` and churned, a batch of ``change`` staged, then compacted."""
    table = f"{database}.t"
    config = with_maintenance(replicated(tmp_path, source, spark, database), COMPACT_ONLY)
    churn(source, database, 1)
    replicate_in_process(config, spark)
    keyed, target, batch, staged = staged_batch(config, spark, table, change)
    maintainer = Maintainer(load_config(config), spark, Console(io.StringIO(), live=False))
    (keyed_table,) = maintainer.tables()
    report = maintainer.maintain(keyed_table)
    return StagedBeforeCompaction(config, table, keyed, target, batch, staged, report)


@pytest.mark.parametrize("follows", ["caught up", "rebuilt"])
def test_a_compaction_fails_a_batch_staged_before_it_and_the_next_batch_catches_up(
    tmp_path: Path,
    source: MariaDBSandbox,
    spark: Any,
    monkeypatch: pytest.MonkeyPatch,
    follows: str,
) -> None:
    """A batch is staged on the table's state before ``binlake maintain`` compacts it: its
    position deletes name data files the compaction removed, so its commit fails as a conflict
    (the applier's retry re-plans it) instead of leaving the replaced rows live. The
    compaction moved every row and removed the deletes it applied; the next batch catches the
    index up from its commit and deletes by position in the compacted file. Had the compaction
    moved at least ``REBUILD_MOVED_ROWS`` rows (here lowered to 1), most of the index, the next
    batch rebuilds it instead (cheaper), says so and counts it with the reason ``moved``."""
    if follows == "rebuilt":
        monkeypatch.setattr(key_positions, "REBUILD_MOVED_ROWS", 1)
    database = "ki_compacted" if follows == "caught up" else "ki_compacted_rebuilt"
    it = staged_before_compaction(  # a row the churn left as it was
        tmp_path, source, spark, database, lambda c: c.update((4, "a", 4), (4, "changed", 40))
    )
    config, table = it.config, it.table
    assert it.staged.referenced, "the update deletes a row by position"
    assert it.compaction.runs[0].counts["rewritten_data_files_count"] >= 2, it.compaction.runs
    assert live_delete_kinds(spark, config, table) == []
    with pytest.raises(CommitConflictError) as conflict:
        it.keyed.deltas.commit(it.staged, {"binlake.position": "x:4"}, table)
    it.end()
    assert "missing" in (conflict.value.reason or "").lower(), conflict.value.reason
    churn(source, database, 2)
    run = replicate_in_process(config, spark)
    if follows == "caught up":
        assert "key index" not in run.output, run.output
    else:
        assert "which costs less than catching up" in run.output, run.output
        moved = {"table": table, "reason": "moved"}
        assert run.metrics.value(KEY_INDEX_REBUILDS, moved) == 1, run.output
    assert_index_matches_the_table(spark, config, table)
    assert set(live_delete_kinds(spark, config, table)) == {POSITION_DELETES}
    assert_verify_passes(config, spark)


def test_a_delta_put_on_top_of_a_compaction_leaves_the_index_for_the_next_batch_to_catch_up(
    tmp_path: Path, source: MariaDBSandbox, spark: Any
) -> None:
    """A delta that names no data file and moves no tag, staged before a compaction: Iceberg's
    retry puts it on top of the compaction (``Committed.parent`` is the compaction's snapshot,
    not the base), so the batch's index changes are rolled back and the next batch catches up
    over both commits: the row the delta wrote is found there and replaced by position (the
    source's insert is taken as a new key, not looked up: its entry is met when it is put, and
    the batch is staged again looking up every key)."""
    database = "ki_rebased"
    # The source gets the row after: the replication replaces it by position.
    it = staged_before_compaction(
        tmp_path, source, spark, database, lambda c: c.insert((7000, "lake", 1))
    )
    config, table = it.config, it.table
    assert not it.staged.referenced
    compacted = current_snapshot(spark, config, table)
    committed = it.keyed.deltas.commit(it.staged, {"binlake.batch": "x"}, table)  # no tag
    assert committed.parent == compacted != it.target.base_snapshot
    assert not committed.follows(it.target.base_snapshot)
    assert it.keyed.positions is not None
    # The compaction moved rows: the batch's changes are not exact on top of it.
    assert it.keyed.positions.committed_at(it.target, committed, table) is None
    it.end()
    run_sql(source, database, "INSERT INTO t VALUES (7000, 'source', 2)")
    churn(source, database, 2)
    run = replicate_in_process(config, spark)
    assert "key index" not in run.output, run.output
    assert_index_matches_the_table(spark, config, table)
    assert_verify_passes(config, spark)


def test_deletes_pruned_after_a_batch_followed_the_compaction_are_caught_up_not_rebuilt(
    tmp_path: Path, source: MariaDBSandbox, spark: Any
) -> None:
    """A compaction, a batch, then the compacted files' dangling deletes pruned: the next
    catch-up meets delete files removed that name data files gone before the index's snapshot;
    it drops them (the index holds nothing of them) instead of rebuilding the index."""
    database = "ki_pruned"
    table = f"{database}.t"
    config = replicated(tmp_path, source, spark, database)
    churn(source, database, 1)
    replicate_in_process(config, spark)
    name = lake_name(config, table)
    compact(spark, "lake", (database, "t"), FoldPolicy(32 << 20, 0.3))
    churn(source, database, 2)
    replicate_in_process(config, spark)
    assert remove_dangling_deletes(spark, name)["removed_dangling_delete_files_count"] >= 1
    churn(source, database, 3)
    run = replicate_in_process(config, spark)
    assert "key index" not in run.output, run.output
    assert_index_matches_the_table(spark, config, table)
    assert_verify_passes(config, spark)


def churned_in_three_batches(
    tmp_path: Path, source: MariaDBSandbox, spark: Any, database: str
) -> Path:
    """``replicated``, then churned in three batches: several position-delete files on the
    same data files."""
    config = replicated(tmp_path, source, spark, database)
    for step in (1, 2, 3):
        churn(source, database, step)
        replicate_in_process(config, spark)
    return config


def spy_on_key_reads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The data files each key read of the index's catch-ups asks for (``read_entries``'s
    ``files``), in order, from now on."""
    asked: list[object] = []
    reading = key_positions.read_entries

    def spy(*args: Any, **kwargs: Any) -> Any:
        asked.append(args[2])
        return reading(*args, **kwargs)

    monkeypatch.setattr(key_positions, "read_entries", spy)
    return asked


def test_position_deletes_merged_by_maintenance_are_followed_without_reading_rows_again(
    tmp_path: Path, source: MariaDBSandbox, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three batches leave several position-delete files on the same data files; maintenance
    merges them (``RewritePositionDeleteFiles``, a ``replace`` commit: no row changes). The next
    batch catches the index up over that commit without reading a data file's rows again, and
    every delete stays right."""
    database = "ki_merged"
    table = f"{database}.t"
    config = churned_in_three_batches(tmp_path, source, spark, database)
    target = lake_target(load_config(config))
    identifier = target.identifier(TableName.parse(table))
    merged = merge_position_deletes(spark, target.catalog, identifier)
    assert merged["rewritten_delete_files_count"] >= 2, merged
    assert current_lineage(spark, lake_name(config, table))[0].operation == "replace"
    asked = spy_on_key_reads(monkeypatch)
    churn(source, database, 4)
    run = replicate_in_process(config, spark)
    assert "key index" not in run.output, run.output
    assert asked == [set()], asked  # one catch-up, no data file read again
    assert_index_matches_the_table(spark, config, table)
    assert_verify_passes(config, spark)


def test_a_batch_committed_on_top_of_merged_deletes_keeps_its_index_changes(
    tmp_path: Path, source: MariaDBSandbox, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Maintenance merges position deletes (a ``replace`` that moves no row) between a batch's
    staging and its commit: Iceberg's retry puts the delta on top of the merge, and the batch's
    index changes are committed at the delta's snapshot (``committed_at``), not rolled back for
    the next batch to catch up over the delta (which read again every data file its deletes
    name: the whole table, with random keys)."""
    database = "ki_merged_beside"
    table = f"{database}.t"
    config = churned_in_three_batches(tmp_path, source, spark, database)
    keyed, target, batch, staged = staged_batch(
        config, spark, table, lambda c: c.update((100, "a", 100), (100, "lake", 7))
    )
    assert staged.referenced  # the row it replaces is deleted by position
    lake = lake_target(load_config(config))
    merged = merge_position_deletes(spark, lake.catalog, lake.identifier(TableName.parse(table)))
    assert merged["rewritten_delete_files_count"] >= 2, merged
    merge = current_snapshot(spark, config, table)
    committed = keyed.deltas.commit(staged, {"binlake.batch": "x"}, table)  # no tag
    assert committed.parent == merge != target.base_snapshot
    assert keyed.positions is not None
    snapshot = keyed.positions.committed_at(target, committed, table)
    assert snapshot == committed.snapshot
    keyed.positions.end(batch, snapshot)
    keyed.positions.close()
    assert_index_matches_the_table(spark, config, table)
    asked = spy_on_key_reads(monkeypatch)
    run_sql(source, database, "UPDATE t SET v = 'source', n = 8 WHERE id = 100")
    churn(source, database, 4)
    run = replicate_in_process(config, spark)
    assert "key index" not in run.output, run.output
    assert asked == [], asked  # the index matched the base: no catch-up
    assert_index_matches_the_table(spark, config, table)
    assert_verify_passes(config, spark)


def a_commit_the_index_missed(
    tmp_path: Path, source: MariaDBSandbox, spark: Any, database: str, version: int
) -> tuple[Path, Any]:
    """``replicated`` (turned to format ``version``) and churned, then a batch's row delta
    committed with its index changes lost (as a kill at ``keyindex_after_delta_commit`` leaves
    them): an update of row 100, deleted by position (format 2: a position-delete file; 3: a
    DV, merged with its data file's older one, which the commit removed), which the source
    then changes again. The next batch catches the index up over it. The config and the delta
    staged."""
    table = f"{database}.t"
    config = replicated(tmp_path, source, spark, database)
    if version == 3:
        to_format_3(spark, config, table)
    churn(source, database, 1)  # on v3: a DV on the file of row 100
    replicate_in_process(config, spark)
    keyed, _target, batch, staged = staged_batch(
        config, spark, table, lambda c: c.update((100, "a", 100), (100, "lake", 7))
    )
    assert staged.referenced  # the row it replaces is deleted by position
    assert bool(staged.removed_deletes) == (version == 3)  # the older DV it merged
    keyed.deltas.commit(staged, {"binlake.batch": "x"}, table)  # no tag
    assert keyed.positions is not None
    keyed.positions.end(batch, None)
    keyed.positions.close()
    run_sql(source, database, "UPDATE t SET v = 'source', n = 8 WHERE id = 100")
    return config, staged


@pytest.mark.parametrize(
    ("version", "held", "older"),
    [(2, True, "readable"), (3, True, "readable"), (2, False, "readable"), (3, True, "flipped")],
)
def test_a_catch_up_over_a_batchs_commit_removes_its_deleted_rows_without_reading_their_files(
    tmp_path: Path,
    source: MariaDBSandbox,
    spark: Any,
    monkeypatch: pytest.MonkeyPatch,
    version: int,
    held: bool,
    older: str,
) -> None:
    """A batch's row delta committed, its index changes lost (``a_commit_the_index_missed``):
    the next batch catches up over it by reading the rows it deleted from its position deletes
    and the batch's own data file; no data file it deleted from is read again (with random
    keys, most of the table). Past ``MAX_DELETED_ROWS`` deleted rows (``held`` False: a bound
    of 0), the data files they are in are read again instead, with the same result. The older
    DV the commit merged and removed, damaged (``older`` "flipped": its CRC fails), cannot
    tell which rows the new one deleted afresh: its data file is read again instead, and no
    error stops the batch (the table no longer holds that DV)."""
    if not held:
        monkeypatch.setattr(catch_up, "MAX_DELETED_ROWS", 0)
    database = f"ki_positional_v{version}{'' if held else '_unheld'}"
    database += "" if older == "readable" else "_older_damaged"
    table = f"{database}.t"
    config, staged = a_commit_the_index_missed(tmp_path, source, spark, database, version)
    again: set[str] = set()
    if older != "readable":
        (removed,) = staged.removed_deletes
        damage_delete_file(removed, older)
        again = {str(removed.referencedDataFile())}
    asked = spy_on_key_reads(monkeypatch)
    churn(source, database, 2)
    run = replicate_in_process(config, spark)
    assert "key index" not in run.output, run.output
    own = {str(f.location()) for f in staged.data_files}
    assert (asked[0] == own | again) if held else (asked[0] > own), asked
    assert_index_matches_the_table(spark, config, table)
    assert_verify_passes(config, spark)


#: Each damage once, each path on both formats (tests/unit/test_spark_delete_files.py holds every
#: failure text of Iceberg's reader, vector_files' own checks every damage of ours).
@pytest.mark.parametrize(
    ("version", "how", "path"),
    [
        (2, "missing", "catch-up"),
        (3, "flipped", "catch-up"),
        (2, "not parquet", "rebuild"),
        (3, "truncated", "rebuild"),
    ],
)
def test_a_delete_file_the_key_index_cannot_read_stops_replicate_until_it_is_restored(
    tmp_path: Path, source: MariaDBSandbox, spark: Any, version: int, how: str, path: str
) -> None:
    """The delete file of a commit the index missed (``a_commit_the_index_missed``: format 2,
    a Parquet position-delete file; 3, a DV) is missing, truncated, not Parquet, or its DV's
    CRC fails: `binlake replicate`, which must read it to catch the index up (``path``
    "catch-up") or, the index file removed too, to rebuild it from a Spark read of the whole
    table ("rebuild"), exits 73 with a ``DeletionVectorError`` naming the file and the table
    once each and its hint, no traceback; nothing is committed and the index stays at its
    snapshot (the catch-up stopped, not a later step), or is not there (the rebuild left
    nothing). The file restored, as the hint says, the next run catches up (no rebuild) or
    rebuilds, and source = target."""
    database = f"ki_unreadable_v{version}_{how.replace(' ', '_')}_{path.replace('-', '_')}"
    table = f"{database}.t"
    config, staged = a_commit_the_index_missed(tmp_path, source, spark, database, version)
    (delete_file,) = staged.delete_files  # unpartitioned: one file (v2), one DV (v3)
    held = damage_delete_file(delete_file, how)
    churn(source, database, 2)
    snapshot = current_snapshot(spark, config, table)
    indexed, _ = index_entries(config, spark, table)
    removed = index_path(config, spark, table)
    if path == "rebuild":
        removed.unlink()
    run = run_replicate(config, "--until-caught-up")
    assert run.returncode == DeletionVectorError.exit_code == 73, describe(run)
    assert "Traceback" not in run.stderr, describe(run)
    lines = run.stderr.splitlines()
    error = next(i for i, line in enumerate(lines) if line.startswith("error: "))
    named = str(delete_file.location())
    said = lines[error].removeprefix(f"error: {named}, table {table}: ")
    assert said.startswith(("the delete file ", "the deletion vector ")), lines[error]
    assert named not in said and table not in said, lines[error]
    location = named.removeprefix("file:")
    assert lines[error + 1] == f"hint: {DeletionVectorError.default_hint}", describe(run)
    assert current_snapshot(spark, config, table) == snapshot
    if path == "rebuild":
        assert not removed.exists()
    else:
        assert index_entries(config, spark, table)[0] == indexed != snapshot
    Path(location).write_bytes(held)
    run = replicate_in_process(config, spark).output
    assert ("key index" in run) == (path == "rebuild"), run
    assert_index_matches_the_table(spark, config, table)
    assert_verify_passes(config, spark)


class CountedOpenIndexes(OpenIndexes):
    """``OpenIndexes`` that remembers each instance made (to read their counts after a run)."""

    made: list[OpenIndexes] = []

    def __init__(self, budget: int) -> None:
        super().__init__(budget)
        self.made.append(self)


def test_more_keyed_tables_than_the_open_index_budget_close_and_reopen_their_indexes(
    tmp_path: Path, source: MariaDBSandbox, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under an open-file limit that leaves room for two indexes, four keyed tables changed in
    every batch: the least recently used idle index is closed and reopened at its table's next
    batch (no rebuild), and every index stays true to its table."""
    monkeypatch.setattr("binlake.apply.applier.index_budget", lambda _limit: 2)
    monkeypatch.setattr("binlake.lake.write.key_positions.OpenIndexes", CountedOpenIndexes)
    database = "ki_budget"
    tables = [f"t{i}" for i in range(4)]
    source.execute(f"CREATE DATABASE {database}")
    for name in tables:
        run_sql(
            source,
            database,
            TABLE.replace("TABLE t ", f"TABLE {name} "),
            f"INSERT INTO {name} SELECT seq, 'a', seq FROM seq_1_to_30",
        )
    config = config_for(tmp_path, source, spark, database, applier=ONE_BATCH)
    replicate_in_process(config, spark)
    for step in (1, 2):
        for name in tables:
            run_sql(
                source,
                database,
                f"UPDATE {name} SET v = 'u{step}' WHERE id % 3 = {step}",
                f"DELETE FROM {name} WHERE id = {10 * step}",
            )
        run = replicate_in_process(config, spark)
        assert "key index" not in run.output, run.output
    assert sum(o.closed_for_budget for o in CountedOpenIndexes.made) >= 2
    assert all(len(o) <= 2 for o in CountedOpenIndexes.made)
    for name in tables:
        assert_index_matches_the_table(spark, config, f"{database}.{name}")
    assert_verify_passes(config, spark)


def test_maintain_converts_an_equality_delete_table_and_position_batches_follow(
    tmp_path: Path, source: MariaDBSandbox, spark: Any
) -> None:
    """Replicated with ``deletes = "equality"`` (the old behaviour: equality deletes live, no
    index), compacted by ``binlake maintain`` (no equality delete stays live), then switched to
    position deletes: the index is built once from the table and every later delete is by
    position."""
    database = "ki_convert"
    table = f"{database}.t"
    config = replicated(tmp_path, source, spark, database, applier='deletes = "equality"\n')
    churn(source, database, 1)
    replicate_in_process(config, spark)
    assert set(live_delete_kinds(spark, config, table)) == {EQUALITY_DELETES}
    assert not load_config(config).state.keyindex_dir.exists()
    with_maintenance(config, COMPACT_ONLY)
    maintainer = Maintainer(load_config(config), spark, Console(io.StringIO(), live=False))
    maintainer.maintain(maintainer.tables()[0])
    assert live_delete_kinds(spark, config, table) == []
    config.write_text(config.read_text().replace('deletes = "equality"\n', ""))
    churn(source, database, 2)
    run = replicate_in_process(config, spark)
    assert run.metrics.value(KEY_INDEX_REBUILDS, {"table": table, "reason": "missing"}) == 1
    churn(source, database, 3)
    run = replicate_in_process(config, spark)
    assert "key index" not in run.output, run.output
    assert set(live_delete_kinds(spark, config, table)) == {POSITION_DELETES}
    assert_index_matches_the_table(spark, config, table)
    assert_verify_passes(config, spark)


# ---- format v3: deletion vectors -----------------------------------------------------------


def to_format_3(spark: Any, config: Path, table: str) -> str:
    """The table turned to format v3 by another writer (``ALTER TABLE``); its Spark name."""
    name = lake_name(config, table)
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('format-version' = '3')")
    return name


def assert_one_vector_per_data_file(spark: Any, name: str) -> None:
    """Every live DV names a live data file no other DV names (the spec's rule)."""
    spark.sql(f"REFRESH TABLE {name}")
    rows = spark.sql(
        f"SELECT referenced_data_file FROM {name}.delete_files WHERE file_format = 'PUFFIN'"
    ).collect()
    named = [str(r[0]) for r in rows]
    assert named and len(named) == len(set(named)), named
    live = {str(r[0]) for r in spark.sql(f"SELECT file_path FROM {name}.data_files").collect()}
    assert set(named) <= live


def lost_to_another_writer(keyed: KeyedWriter, batch: Any, staged: Any, table: str) -> str:
    """Commit ``staged`` (``staged_batch``), which must fail as a conflict, and roll the
    batch's index changes back, as the applier does; the conflict's reason."""
    with pytest.raises(CommitConflictError) as conflict:
        keyed.deltas.commit(staged, {"binlake.position": "x:4"}, table)
    assert keyed.positions is not None
    keyed.positions.end(batch, None)
    keyed.positions.close()
    return conflict.value.reason or ""


def test_a_table_turned_to_format_3_gets_dvs_merged_with_every_older_delete_and_loses_no_race(
    tmp_path: Path, source: MariaDBSandbox, spark: Any
) -> None:
    """Position-delete files of format v2, then the table turned to v3 between batches. A batch
    staged then, and a Spark ``DELETE`` that adds a DV to the data file it deletes from: its
    commit fails as a conflict ("Found concurrently added DV") for the applier's retry to plan
    again. The next batches add DVs only (no position-delete file), each the union of the
    batch's deletes and its data file's older ones (v2 files, Spark's DV, binlake's own DVs),
    which the same commit removes: the index follows every commit (never rebuilt), one DV per
    data file, source = target. Then a DV binlake must merge with is damaged (a byte of its
    blob flipped), then missing: the batch stops with a typed error naming the file, and
    nothing is committed."""
    database = "ki_dv"
    table = f"{database}.t"
    config = replicated(tmp_path, source, spark, database)
    for step in (1, 2):  # v2 files of one data file, then of two (not file-scoped)
        churn(source, database, step)
        replicate_in_process(config, spark)
    assert set(live_delete_kinds(spark, config, table)) == {POSITION_DELETES}
    name = to_format_3(spark, config, table)
    shared = f"SELECT * FROM {name}.delete_files WHERE referenced_data_file IS NULL"
    assert spark.sql(shared).count() >= 1, "a v2 file naming two data files, merged below"
    keyed, _, batch, staged = staged_batch(  # row 6 moved to batch 1's data file, as row 11
        config, spark, table, lambda c: c.update((6, "u1", 7), (6, "changed", 70))
    )
    assert staged.delete_files and not staged.removed_deletes
    spark.sql(f"DELETE FROM {name} WHERE id = 11")
    reason = lost_to_another_writer(keyed, batch, staged, table)
    assert "Found concurrently added DV" in reason, reason
    run_sql(source, database, "DELETE FROM t WHERE id = 11")
    for step, merged in ((3, "removed-position-delete-files"), (4, "removed-dvs")):
        churn(source, database, step)
        run = replicate_in_process(config, spark)
        assert "key index" not in run.output, run.output
        newest = current_lineage(spark, name)[0].summary
        assert newest[WRITE] == "row-delta"
        assert int(newest["added-dvs"]) > 0 and "added-position-delete-files" not in newest
        assert int(newest.get(merged, 0)) > 0, newest  # the older deletes, merged and replaced
        assert_one_vector_per_data_file(spark, name)
        assert_index_matches_the_table(spark, config, table)
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
    assert_a_damaged_or_missing_dv_stops_the_batch(source, spark, config, database)


def test_a_table_turned_to_format_3_under_a_staged_batch_is_a_conflict_and_never_turned_back(
    tmp_path: Path, source: MariaDBSandbox, spark: Any
) -> None:
    """A batch stages a position-delete file of format v2, then another writer turns the table
    to v3 before it commits: Iceberg refuses the file ("Must use DVs"), a conflict the
    applier's retry plans again, nothing committed. Turning the table back to v2 is refused by
    Iceberg itself (a format version only rises), so no batch meets a table turned back. The
    next batch writes DVs, the index follows (never rebuilt), source = target."""
    database = "ki_turned_meanwhile"
    table = f"{database}.t"
    config = replicated(tmp_path, source, spark, database)
    keyed, _, batch, staged = staged_batch(
        config, spark, table, lambda c: c.update((100, "a", 100), (100, "lake", 7))
    )
    assert staged.delete_files and not staged.removed_deletes
    name = to_format_3(spark, config, table)
    before = current_snapshot(spark, config, table)
    reason = lost_to_another_writer(keyed, batch, staged, table)
    assert "format version changed" in reason, reason
    assert current_snapshot(spark, config, table) == before
    with pytest.raises(Exception, match="downgrade"):
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('format-version' = '2')")
    assert table_metadata(spark, name)["format-version"] == 3
    run_sql(source, database, "UPDATE t SET v = 'source', n = 8 WHERE id = 100")
    churn(source, database, 1)
    run = replicate_in_process(config, spark)
    assert "key index" not in run.output, run.output
    newest = current_lineage(spark, name)[0].summary
    assert int(newest["added-dvs"]) > 0 and "added-position-delete-files" not in newest
    assert_index_matches_the_table(spark, config, table)
    assert_verify_passes(config, spark)


def assert_a_damaged_or_missing_dv_stops_the_batch(
    source: MariaDBSandbox, spark: Any, config: Path, database: str
) -> None:
    name = lake_name(config, f"{database}.t")
    before = current_lineage(spark, name)[0].snapshot_id
    puffin = next(
        str(r[0]).removeprefix("file:")
        for r in spark.sql(f"SELECT file_path FROM {name}.delete_files").collect()
        if "binlake-" in str(r[0]) and str(r[0]).endswith("-dv.puffin")
    )
    data = bytearray(Path(puffin).read_bytes())
    data[20] ^= 0x01  # inside the first blob
    Path(puffin).write_bytes(bytes(data))
    # Hadoop's local checksum file would catch it first (object stores keep none): ours does.
    Path(puffin).with_name(f".{Path(puffin).name}.crc").unlink()
    run_sql(source, database, "UPDATE t SET v = 'again' WHERE id < 2000000")
    with pytest.raises(DeletionVectorError) as damaged:
        replicate_in_process(config, spark)
    assert damaged.value.file is not None and puffin in damaged.value.file
    assert "CRC" in str(damaged.value.check) and "restore" in damaged.value.hint
    Path(puffin).unlink()
    with pytest.raises(DeletionVectorError) as missing:
        replicate_in_process(config, spark)
    assert missing.value.check == "missing", missing.value.check
    assert current_lineage(spark, name)[0].snapshot_id == before
