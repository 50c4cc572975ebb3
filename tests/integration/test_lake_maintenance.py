"""Issue 14: the maintenance people run on Iceberg tables does not break replication.

A data engineer's usual job on a replicated table, `rewrite_data_files` then
`expire_snapshots(retain_last => 1)`, cuts the table's lineage above every binlake snapshot;
binlake's `binlake-applied` tag keeps its newest snapshot (docs/recovery.md, "Snapshot expiry"),
so replication goes on from the exact position: nothing lost, nothing doubled, no re-snapshot.
One MariaDB for the module, the session's Spark, replicate in this process.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from binlake.lake.commit import current_lineage, lineage_cut, refs, snapshots
from binlake.lake.iceberg_meta import APPLIED_TAG, read_table
from binlake_dev.sandbox import MariaDBSandbox
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    lake_warehouse,
    module_source,
    replicate_in_process,
)

source = module_source("lake-maintenance-source")


def write_changes(source: MariaDBSandbox, database: str, start: int) -> None:
    """Inserts, updates and deletes in both tables (the keyless one takes appends)."""
    rows = ", ".join(f"({i}, {i % 5})" for i in range(start, start + 30))
    source.execute(f"INSERT INTO {database}.keyed VALUES {rows}")
    source.execute(f"INSERT INTO {database}.keyless VALUES {rows}")
    source.execute(f"UPDATE {database}.keyed SET v = v + 10 WHERE id % 3 = 0")
    source.execute(f"DELETE FROM {database}.keyed WHERE id % 7 = 0")
    source.execute(f"UPDATE {database}.keyless SET v = v + 10 WHERE id % 4 = 0")
    source.execute(f"DELETE FROM {database}.keyless WHERE id % 9 = 0")


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
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.keyed (id INT PRIMARY KEY, v INT)")
    source.execute(f"CREATE TABLE {database}.keyless (id INT, v INT)")
    write_changes(source, database, 0)
    # Two transactions a batch: each table gets several binlake commits to expire.
    config = config_for(tmp_path, source, spark, database, applier="max_transactions = 2\n")
    replicate_in_process(config, spark)
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
