"""Row deltas end to end: a keyed table's batch is one Iceberg commit of new data and deletes
that never reads the table, exact whatever the batch does to a key: position deletes from the
key index (the default), or equality deletes (``[applier] deletes = "equality"``); the tests
whose point is the deletes run both. Real MariaDB, real Spark reads (vectorized and row by
row), real Iceberg; every test ends with `binlake verify`.

The batches here are whole workloads written before the run (``max_seconds`` large), so that
each scenario's changes of one key meet in one batch, the case the deletes must get right.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from binlake.config import load_config
from binlake.lake.catalog.metadata import APPLIED_TAG, read_table
from binlake.lake.catalog.snapshot_progress import SNAPSHOT, SnapshotProgress
from binlake.lake.catalog.target import lake_target
from binlake.lake.catalog.write_path import WRITE, WRITE_REASON
from binlake.lake.spark.lineage import current_lineage, refs
from binlake.metrics import COMMITS
from binlake_dev.readers import WarehouseTable, differences, read_rows, source_rows
from binlake_dev.sandbox import MariaDBSandbox
from key_index_testing import (
    EQUALITY_DELETES,
    POSITION_DELETES,
    assert_index_matches_the_table,
    damage,
    index_path,
    lake_name,
    live_delete_kinds,
    run_sql,
)
from lake_builder import create_lake_table, master_position, replay, write_rows
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    binlake_command,
    config_for,
    lake_warehouse,
    module_source,
    replicate_env,
    replicate_in_process,
)

source = module_source("row-delta-source")

#: One batch per run: everything written before the run is read before the batch is due.
ONE_BATCH = "max_transactions = 100000\nmax_seconds = 120\n"
TABLE = "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40), n DECIMAL(10,2), at DATETIME(6))"


def rows_commits(config: Path, spark: Any, table: str) -> list[dict[str, str]]:
    """Summaries of the table's rows commits (those saying their write), oldest first."""
    lineage = current_lineage(spark, lake_name(config, table))
    return [dict(s.summary) for s in reversed(lineage) if WRITE in s.summary]


def lake_rows(spark: Any, config: Path, table: str, *, vectorized: bool) -> list[tuple[Any, ...]]:
    key = "spark.sql.iceberg.vectorization.enabled"
    spark.conf.set(key, str(vectorized).lower())
    try:
        spark.sql(f"REFRESH TABLE {lake_name(config, table)}")
        return sorted(tuple(r) for r in spark.table(lake_name(config, table)).collect())
    finally:
        spark.conf.unset(key)


def replicated(
    tmp_path: Path, source: MariaDBSandbox, spark: Any, database: str, rows: int
) -> Path:
    """Table ``database.t`` with ``rows`` rows, replicated once; the config."""
    source.execute(f"CREATE DATABASE {database}")
    fill = f"INSERT INTO t SELECT seq, 'a', seq, NOW(6) FROM seq_1_to_{rows}"
    run_sql(source, database, TABLE, fill)
    config = config_for(tmp_path, source, spark, database, applier=ONE_BATCH)
    replicate_in_process(config, spark)
    return config


@pytest.mark.parametrize("deletes", ["position", "equality", "vectors"])
def test_changes_of_one_key_in_one_batch_are_exact_in_one_row_delta_commit(
    tmp_path: Path, source: MariaDBSandbox, spark: Any, deletes: str
) -> None:
    """``vectors``: position deletes in a table binlake creates at format v3 (``[tables]
    format_version = 3``): one deletion vector for the one data file the keys were in."""
    database = f"rd_keys_{deletes}"
    vectors = deletes == "vectors"
    deletes = "position" if vectors else deletes
    source.execute(f"CREATE DATABASE {database}")
    run_sql(source, database, TABLE)
    values = ", ".join(f"({i}, 'v{i}', {i}.5, '2024-01-01 00:00:0{i % 10}')" for i in range(1, 21))
    run_sql(source, database, f"INSERT INTO t VALUES {values}")
    applier = ONE_BATCH + f'deletes = "{deletes}"\n'
    tables = "format_version = 3\n" if vectors else ""
    config = config_for(tmp_path, source, spark, database, applier=applier, tables=tables)
    replicate_in_process(config, spark)
    run_sql(
        source,
        database,
        "INSERT INTO t VALUES (100, 'new', 1, NOW(6))",
        "UPDATE t SET v = 'new, then updated' WHERE id = 100",  # update of a key just inserted
        "DELETE FROM t WHERE id = 5",
        "INSERT INTO t VALUES (5, 'deleted, re-inserted', 5, NOW(6))",
        "UPDATE t SET id = 106 WHERE id = 6",  # a primary-key update
        "UPDATE t SET id = 1000 WHERE id = 9",  # two keys swapped through a third
        "UPDATE t SET id = 9 WHERE id = 10",
        "UPDATE t SET id = 10 WHERE id = 1000",
        "INSERT INTO t VALUES (200, 'inserted, then deleted', 2, NOW(6))",
        "DELETE FROM t WHERE id = 200",
        "DELETE FROM t WHERE id = 11",
        "UPDATE t SET n = n + 1 WHERE id = 12",
        "UPDATE t SET n = n + 1 WHERE id = 12",
        "INSERT INTO t VALUES (300, 'inserted, then moved', 3, NOW(6))",
        "UPDATE t SET id = 301 WHERE id = 300",
    )
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
    commits = rows_commits(config, spark, f"{database}.t")
    assert [c[WRITE] for c in commits] == ["row-delta", "row-delta"]
    batch = commits[-1]
    # Rows added: 100, 5, 106, 9, 10, 12, 301. Keys deleted: 5, 6, 9, 10, 11, 12 (the lake
    # equals the source before the batch, so a key first inserted in it needs no delete; by
    # position: the rows of those keys the index holds, and no other).
    assert batch["added-records"] == "7" and batch["added-data-files"] == "1"
    kept, dropped = ("position", "equality") if deletes == "position" else ("equality", "position")
    assert batch[f"added-{kept}-deletes"] == "6" and f"added-{dropped}-deletes" not in batch
    if vectors:  # Iceberg counts a DV apart from the position-delete files
        assert batch["added-dvs"] == "1" and f"added-{kept}-delete-files" not in batch
        assert (
            spark.table(f"{lake_name(config, f'{database}.t')}.delete_files")
            .select("file_format")
            .collect()[0][0]
            == "PUFFIN"
        )
    else:
        assert batch[f"added-{kept}-delete-files"] == "1"
    assert set(live_delete_kinds(spark, config, f"{database}.t")) == {
        POSITION_DELETES if deletes == "position" else EQUALITY_DELETES
    }
    vectorized = lake_rows(spark, config, f"{database}.t", vectorized=True)
    assert vectorized == lake_rows(spark, config, f"{database}.t", vectorized=False)
    assert [r[0] for r in vectorized] == sorted(
        [1, 2, 3, 4, 5, 7, 8, 9, 10, 12, 13, 14, 15, 16, 17, 18, 19, 20, 100, 106, 301]
    )


def test_a_batch_of_fresh_inserts_writes_no_delete_file(
    tmp_path: Path, source: MariaDBSandbox, spark: Any
) -> None:
    database = "rd_inserts"
    config = replicated(tmp_path, source, spark, database, 500)
    run_sql(source, database, "INSERT INTO t SELECT seq, 'b', seq, NOW(6) FROM seq_501_to_900")
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    commits = rows_commits(config, spark, f"{database}.t")
    assert commits[-1]["added-records"] == "400"
    assert "added-delete-files" not in commits[-1]
    assert commits[-1]["total-delete-files"] == "0"


def test_alters_between_batches_are_followed_by_the_next_row_delta(
    tmp_path: Path, source: MariaDBSandbox, spark: Any
) -> None:
    """Each ALTER is a batch of its own; the row deltas around it write the schema the table
    has then (columns found by field id: added, renamed, widened, dropped), and an ALTER the
    statement cannot place (TEXT(n): pending) is evolved before the next rows."""
    database = "rd_alter"
    config = replicated(tmp_path, source, spark, database, 50)
    run_sql(
        source,
        database,
        "INSERT INTO t VALUES (51, 'before the alter', 1, NOW(6))",
        "UPDATE t SET v = 'updated before' WHERE id IN (1, 51)",
        "ALTER TABLE t ADD COLUMN extra INT NOT NULL DEFAULT 7",
        "UPDATE t SET v = 'updated after', extra = 8 WHERE id IN (1, 2, 51)",
        "ALTER TABLE t CHANGE COLUMN v label VARCHAR(40)",
        "ALTER TABLE t MODIFY COLUMN extra BIGINT NOT NULL DEFAULT 7",
        "DELETE FROM t WHERE id = 3",
        "INSERT INTO t VALUES (52, 'after', 2, NOW(6), 9000000000)",
        "ALTER TABLE t ADD COLUMN note TEXT(100)",  # pending until the next TABLE_MAP
        "UPDATE t SET note = 'noted', extra = extra + 1 WHERE id IN (1, 4, 52)",
        "ALTER TABLE t DROP COLUMN n",
        "UPDATE t SET id = 53 WHERE id = 4",
        "INSERT INTO t VALUES (4, 'again', NOW(6), 1, NULL)",
    )
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
    writes = [c[WRITE] for c in rows_commits(config, spark, f"{database}.t")]
    assert len(writes) >= 5 and set(writes) == {"row-delta"}
    rows = lake_rows(spark, config, f"{database}.t", vectorized=True)
    assert rows == lake_rows(spark, config, f"{database}.t", vectorized=False)


def test_minimal_row_images_take_merge_and_status_and_metrics_say_why(
    tmp_path: Path, source: MariaDBSandbox, spark: Any
) -> None:
    database = "rd_minimal"
    config = replicated(tmp_path, source, spark, database, 20)
    run_sql(
        source,
        database,
        "SET SESSION binlog_row_image = 'MINIMAL'",
        "UPDATE t SET v = 'minimal' WHERE id <= 5",
    )
    run = replicate_in_process(config, spark)
    commits = rows_commits(config, spark, f"{database}.t")
    assert commits[-1][WRITE] == "merge"
    assert "MINIMAL" in commits[-1][WRITE_REASON]
    assert f"{database}.t: rows written by merge (" in run.output
    labels = {"table": f"{database}.t", "write": "merge", "reason": commits[-1][WRITE_REASON]}
    assert run.metrics.value(COMMITS, labels) == 1
    status = json.loads(
        subprocess.run(
            binlake_command("status", config, "--json"),
            capture_output=True,
            text=True,
            env=replicate_env(),
            check=True,
        ).stdout
    )
    (table,) = [t for t in status["tables"] if t["source_table"] == f"{database}.t"]
    assert table["write"] == "merge" and "MINIMAL" in table["write_reason"]
    assert table["delete_files"] >= 1
    run_sql(source, database, "UPDATE t SET v = 'full again' WHERE id > 15")
    replicate_in_process(config, spark)
    assert rows_commits(config, spark, f"{database}.t")[-1][WRITE] == "row-delta"
    assert_verify_passes(config, spark)


@pytest.mark.parametrize("deletes", ["position", "equality", "vectors"])
def test_a_partitioned_table_takes_row_deltas_by_position_and_stays_exact(
    tmp_path: Path, source: MariaDBSandbox, spark: Any, deletes: str
) -> None:
    """A position delete names its row wherever the row is: a table someone partitioned (here
    twice after its copy: partition evolution, its first files in the unpartitioned spec) takes
    row deltas, each new data file in the current spec and its partition, each position delete
    in the spec and partition of the data file it names; rows that change partition land
    exactly, and PyIceberg and DuckDB read it as the source has it. An equality delete is
    scoped to its partition (a key's old row may be in another one): with equality deletes a
    partitioned table keeps MERGE (named in its commits). ``vectors``: position deletes, the
    table turned to format v3 before its last batch, whose deletes are then deletion vectors,
    each in its data file's spec and partition, merged with the file's v2 deletes."""
    database = f"rd_partitioned_{deletes}"
    vectors = deletes == "vectors"
    deletes = "position" if vectors else deletes
    source.execute(f"CREATE DATABASE {database}")
    fill = "INSERT INTO t SELECT seq, 'a', seq, NOW(6) FROM seq_1_to_40"
    run_sql(source, database, TABLE, fill)
    applier = ONE_BATCH + f'deletes = "{deletes}"\n'
    config = config_for(tmp_path, source, spark, database, applier=applier)
    replicate_in_process(config, spark)
    name = lake_name(config, f"{database}.t")
    spark.sql(f"ALTER TABLE {name} ADD PARTITION FIELD bucket(4, v)")
    run_sql(
        source,
        database,
        "UPDATE t SET v = CONCAT('moved ', id) WHERE id <= 20",  # rows change partition
        "DELETE FROM t WHERE id = 30",
        "INSERT INTO t VALUES (41, 'b', 1, NOW(6)), (42, NULL, 2, NULL)",
    )
    replicate_in_process(config, spark)
    spark.sql(f"ALTER TABLE {name} ADD PARTITION FIELD days(at)")
    if vectors:
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('format-version' = '3')")
    if deletes == "position":  # the next batch rebuilds it: every file's partition read again
        assert_index_matches_the_table(spark, config, f"{database}.t")
        damage(index_path(config, spark, f"{database}.t"), "missing")
    run_sql(
        source,
        database,
        "UPDATE t SET v = CONCAT('again ', id), at = '1969-12-31 23:00:00' WHERE id <= 5",
        "UPDATE t SET n = n + 1 WHERE id BETWEEN 10 AND 25 OR id = 42",
        "DELETE FROM t WHERE id IN (2, 41)",
    )
    replicate_in_process(config, spark)
    last = rows_commits(config, spark, f"{database}.t")[-1]
    if deletes == "equality":
        assert last[WRITE] == "merge" and "partitioned" in last[WRITE_REASON]
        assert_verify_passes(config, spark)
        return
    assert {c[WRITE] for c in rows_commits(config, spark, f"{database}.t")} == {"row-delta"}
    assert set(live_delete_kinds(spark, config, f"{database}.t")) == {POSITION_DELETES}
    placed = spark.sql(
        f"SELECT d.spec_id = f.spec_id AND d.partition = f.partition, f.spec_id, count(*) "
        f"FROM {name}.position_deletes d JOIN {name}.files f ON d.file_path = f.file_path "
        "GROUP BY 1, 2"
    ).collect()
    assert {(r[0], r[1]) for r in placed} == {(True, 0), (True, 1)}, placed
    if vectors:  # at most one DV per data file, each in its data file's partition
        dvs = spark.sql(
            f"SELECT referenced_data_file, count(*) FROM {name}.delete_files "
            "WHERE file_format = 'PUFFIN' GROUP BY 1"
        ).collect()
        assert dvs and all(r[1] == 1 for r in dvs), dvs
    specs = {r[0] for r in spark.sql(f"SELECT spec_id FROM {name}.files").collect()}
    assert specs == {0, 1, 2}
    assert_verify_passes(config, spark)
    assert_index_matches_the_table(spark, config, f"{database}.t")
    table = WarehouseTable(lake_warehouse(spark), "lake", database, "t")
    with source.connect(database) as conn, conn.cursor() as cursor:
        want = source_rows(cursor, database, "t", table.columns())
    for reader in ("pyiceberg", "duckdb"):
        problem = differences(reader, table, read_rows(reader, table, spark), want)
        assert not problem, problem


@pytest.mark.parametrize("deletes", ["position", "equality"])
def test_a_table_catching_up_after_its_copy_deletes_every_key_it_writes(
    tmp_path: Path, source: MariaDBSandbox, spark: Any, deletes: str
) -> None:
    """Between a copy's first chunk (P_1, the position streaming replays from) and its newest
    chunk's position (P_2) the copy may already hold a row streaming inserts again: here row 1
    (inserted after P_1, copied at P_2) and row 2 (the same, then deleted after P_2 in the same
    batch as its insert). Treating those inserts as fresh keys would leave row 1 twice and row 2
    undeleted; the table is not exact until its position reaches P_2, so every key it writes
    is deleted first (by position: the copied rows the key index, built from the table, holds).
    Past P_2 a fresh insert needs no delete again."""
    database = f"rd_catch_up_{deletes}"
    table = f"{database}.t"
    source.execute(f"CREATE DATABASE {database}")
    run_sql(source, database, TABLE, "INSERT INTO t VALUES (7, 'old', 7, NOW(6))")
    first_chunk = master_position(source)
    run_sql(
        source,
        database,
        "INSERT INTO t VALUES (1, 'after P_1', 1, NOW(6))",
        "INSERT INTO t VALUES (2, 'after P_1', 2, NOW(6))",
    )
    newest_chunk = master_position(source)
    run_sql(source, database, "DELETE FROM t WHERE id = 2", "UPDATE t SET v = 'x' WHERE id = 7")
    applier = ONE_BATCH + f'deletes = "{deletes}"\n'
    config = config_for(tmp_path, source, spark, database, applier=applier)
    copied = replay(source, [table], until=newest_chunk)[table]  # rows 1, 2, 7, as at P_2
    target = lake_target(load_config(config))
    name = create_lake_table(spark, target, table, copied.schema)
    progress = SnapshotProgress("copy-1", (7,), newest_chunk, 3, done=True)
    write_rows(
        spark,
        name,
        copied.schema,
        copied.lake_rows(),
        first_chunk,
        extra={SNAPSHOT: progress.to_json()},
    )
    replicate_in_process(config, spark)
    assert lake_rows(spark, config, table, vectorized=True) == lake_rows(
        spark, config, table, vectorized=False
    )
    assert sorted(r[0] for r in lake_rows(spark, config, table, vectorized=True)) == [1, 7]
    catching_up = rows_commits(config, spark, table)[-1]
    assert catching_up[f"added-{deletes}-deletes"] == "3"  # keys 1, 2 and 7
    assert_verify_passes(config, spark)
    run_sql(source, database, "INSERT INTO t VALUES (3, 'fresh', 3, NOW(6))")
    replicate_in_process(config, spark)
    assert "added-delete-files" not in rows_commits(config, spark, table)[-1]
    assert_verify_passes(config, spark)


def test_the_warehouse_sync_before_a_checkpoint_takes_the_row_delta_files(
    tmp_path: Path, source: MariaDBSandbox, spark: Any
) -> None:
    """Iceberg and the FileIO stream never fsync: the files a row delta stored are among the
    files ``WarehouseSync`` fsyncs before the relay-log checkpoint moves past them."""
    from binlake.storage.warehouse_sync import WarehouseSync, _SyncPlan

    database = "rd_sync"
    config = replicated(tmp_path, source, spark, database, 30)
    run_sql(source, database, "UPDATE t SET v = 'b' WHERE id <= 10")
    synced: list[Path] = []

    class Recording(WarehouseSync):
        def _fsync(self, plan: _SyncPlan) -> None:
            synced.extend(plan.files)
            super()._fsync(plan)

    warehouse = lake_warehouse(spark)
    sync = Recording(warehouse)
    with sync.committing():
        replicate_in_process(config, spark)
    sync.sync()
    lake = read_table(warehouse, (database, "t"))
    assert lake is not None
    data = warehouse / database / "t" / "data"
    written = sorted(p for p in data.iterdir() if p.name.startswith("binlake-"))
    newest = [p for p in written if p in synced]
    assert {p.name.rsplit("-", 1)[1] for p in newest} == {"data.parquet", "deletes.parquet"}


def test_a_transaction_with_more_keys_than_memory_holds_is_spilled_and_exact(
    tmp_path: Path, source: MariaDBSandbox, spark: Any, monkeypatch: Any
) -> None:
    """One source transaction (a batch never splits one) changes 3,000 keys with inserts,
    updates, key moves and deletes; the applier holds 100 keys in memory and spills the rest
    in runs (``binlake.lake.write.spill``), composed again per key before the row delta is
    written."""
    from binlake.lake.write import spill

    monkeypatch.setattr(spill, "MAX_ENTRIES", 100)
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    runs: list[int] = []
    add = spill.KeySpill.add

    def counted(self: spill.KeySpill, entries: Any) -> None:
        runs.append(1)
        add(self, entries)

    monkeypatch.setattr(spill.KeySpill, "add", counted)
    database = "rd_spill"
    config = replicated(tmp_path, source, spark, database, 1000)
    with source.connect(database, autocommit=False) as conn, conn.cursor() as cursor:
        cursor.execute("INSERT INTO t SELECT seq, 'new', seq, NOW(6) FROM seq_1001_to_3000")
        cursor.execute("UPDATE t SET v = 'updated' WHERE id % 3 = 0")
        cursor.execute("DELETE FROM t WHERE id % 7 = 0")
        cursor.execute("UPDATE t SET id = id + 10000 WHERE id % 11 = 0")
        cursor.execute("INSERT INTO t SELECT seq, 'again', seq, NOW(6) FROM seq_1_to_3000 "
                       "WHERE seq % 7 = 0 AND seq % 11 <> 0")  # fmt: skip
        cursor.execute("DELETE FROM t WHERE id BETWEEN 2990 AND 3000")
        conn.commit()
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
    last = rows_commits(config, spark, f"{database}.t")[-1]
    assert last[WRITE] == "row-delta"
    assert len(runs) > 10  # the net change went to disk in runs
    assert not list(temp.glob("binlake-spill-*"))  # and the runs are gone


def test_a_change_log_batch_is_one_data_file_committed_with_its_position_and_tag(
    tmp_path: Path, source: MariaDBSandbox, spark: Any
) -> None:
    """A table without a key is a change log: a batch's row images are one data file committed
    through Iceberg's API (no Spark write, whose commits carry ``spark.app.id``), the position
    and the ``binlake-applied`` tag in that same commit."""
    database = "rd_log"
    source.execute(f"CREATE DATABASE {database}")
    run_sql(
        source,
        database,
        "CREATE TABLE log (id INT, v VARCHAR(40))",
        "INSERT INTO log VALUES (1, 'a'), (1, 'a'), (2, 'b')",
    )
    config = config_for(tmp_path, source, spark, database, applier=ONE_BATCH)
    replicate_in_process(config, spark)
    run_sql(source, database, "UPDATE log SET v = 'c' WHERE id = 1", "DELETE FROM log WHERE id = 2")
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
    name = lake_name(config, f"{database}.log")
    newest = current_lineage(spark, name)[0]
    assert newest.summary[WRITE] == "append"
    # two updates (a before and an after image each) and a delete
    assert (newest.summary["added-data-files"], newest.summary["added-records"]) == ("1", "5")
    assert "spark.app.id" not in newest.summary
    assert refs(spark, name)[APPLIED_TAG] == ("tag", newest.snapshot_id)
