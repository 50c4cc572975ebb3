"""`binlake replicate` end to end on a real MariaDB, real Spark and real Iceberg tables.

One MariaDB for the module, the session's Spark; each test uses its own database, state folder
and namespace, runs the replicator in this process until caught up, and ends with `binlake
verify` (every value compared exactly, at the same source position) and the exactly-once check
of every table's snapshot history. The type coverage runs on three targets (the embedded
catalog; Iceberg's JDBC catalog on PostgreSQL; the JDBC catalog from a Spark standalone
cluster, where `binlake replicate` runs as its own process and the rows cross to executors),
streamed, then (embedded and cluster) copied again by a snapshot whose chunks Spark tasks
read (on the cluster's executor there); the DDL sequence and a configured layout on the first
two (both catalogs rename tables; a layout is applied by the catalog's create).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from binlake.binlog.names import TableName
from binlake.config import load_config
from binlake.errors import ConfigError, RowImageError, SourcePositionLostError, StatementFormatError
from binlake.lake.catalog.target import lake_target
from binlake.lake.spark.lookup import read_lake_schema, table_exists
from binlake.metrics import ROWS_APPLIED
from binlake.storage.snapshot_plan import write_request
from binlake_dev.sandbox import MariaDBSandbox
from lake_targets import TargetSetup
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    module_source,
    replicate_in_process,
    replicate_until_caught_up,
    writes_per_table,
)
from type_workload import all_tables, run_workload

source = module_source("replicate-source")


@pytest.mark.parametrize("target", ["embedded", "jdbc", "cluster-jdbc"], indirect=True)
def test_the_type_coverage_workload_lands_in_iceberg_with_every_value_exact(
    tmp_path: Path, source: MariaDBSandbox, spark: object, target: TargetSetup
) -> None:
    database = f"rep_types{target.suffix}"
    source.execute(f"CREATE DATABASE {database}")
    tables = [t for t in all_tables() if t.name != "minimal"]  # MINIMAL inserts: next test
    with source.connect(database, autocommit=False) as conn, conn.cursor() as cursor:
        run_workload(cursor, database, tables)
    config = config_for(tmp_path, source, spark, database, target=target)
    run = replicate_until_caught_up(config, spark, target)
    assert run.row_changes > 0, run.output
    checked = assert_verify_passes(config, spark)
    assert sorted(checked) == sorted(f"{database}.{t.name}" for t in tables)
    history = assert_history_is_exactly_once(config, spark)
    assert all(count >= 1 for count in history.values())
    # The row delta on every target (on a cluster too: it runs on the driver, committing
    # through the catalog's table operations). The NOBLOB table takes MERGE for a batch whose
    # net change lacks an unchanged TEXT value, which depends on where batches end.
    writes = writes_per_table(config, spark)
    writes.pop(f"{database}.noblob")
    assert all(w == {"row-delta"} for w in writes.values()), writes
    assert run.zero_dates > 0  # the times() table writes zero dates: nulled, counted
    if target.kind != "embedded":
        # The copy's chunk tasks run the same code on every target; the catalog's part is
        # above. On the cluster (tasks on its executor) a copy is run by test_snapshot.py's
        # test_a_copy_hit_by_a_fault_mid_way_goes_on_with_every_row_once[executor_lost].
        return
    # Every table copied again by a snapshot: each value through the chunk tasks' columnar
    # reader and Parquet files, then verified again.
    again = tables
    requested = [TableName(database, t.name) for t in again]
    write_request(load_config(config).state.snapshot_requests_dir, requested)
    copied = replicate_until_caught_up(config, spark, target)
    assert copied.output.count(": copy done (") == len(again), copied.output
    assert copied.zero_dates > 0
    assert sorted(assert_verify_passes(config, spark)) == sorted(checked)
    assert_history_is_exactly_once(config, spark)


@pytest.mark.parametrize("target", ["embedded", "jdbc"], indirect=True)
def test_ddl_is_applied_in_order_add_rename_widen_drop_truncate(
    tmp_path: Path, source: MariaDBSandbox, spark: object, target: TargetSetup
) -> None:
    database = f"rep_ddl{target.suffix}"
    statements = [
        f"CREATE DATABASE {database}",
        f"CREATE TABLE {database}.items (id INT PRIMARY KEY, name VARCHAR(20), qty INT)",
        f"CREATE TABLE {database}.logbook (id INT PRIMARY KEY, line TEXT)",
        f"INSERT INTO {database}.items VALUES (1,'a',1),(2,'b',2),(3,'c',3),(4,'d',4)",
        f"INSERT INTO {database}.logbook VALUES (1,'x'),(2,'y'),(3,'z')",
        f"ALTER TABLE {database}.items ADD COLUMN price DECIMAL(8,2), MODIFY qty BIGINT",
        f"INSERT INTO {database}.items VALUES (5,'e',5000000000,1.50)",
        f"UPDATE {database}.items SET price = 9.99 WHERE id = 1",
        f"ALTER TABLE {database}.items RENAME COLUMN name TO title",
        f"UPDATE {database}.items SET title = 'B' WHERE id = 2",
        f"TRUNCATE TABLE {database}.logbook",
        f"INSERT INTO {database}.logbook VALUES (7,'after')",
        f"ALTER TABLE {database}.items DROP COLUMN qty",
        f"DELETE FROM {database}.items WHERE id = 4",
        f"INSERT INTO {database}.items VALUES (6,'f',NULL)",
        f"RENAME TABLE {database}.logbook TO {database}.journal",
        f"INSERT INTO {database}.journal VALUES (8,'renamed')",
    ]
    for statement in statements:
        source.execute(statement)
    config_path = config_for(tmp_path, source, spark, database, target=target)
    replicate_in_process(config_path, spark)
    assert_verify_passes(config_path, spark)
    assert_history_is_exactly_once(config_path, spark)
    lake = lake_target(load_config(config_path))
    items = lake.lake_table(TableName(database, "items"))
    schema = read_lake_schema(spark, items, TableName(database, "items"))  # type: ignore[arg-type]
    assert sorted(c.name for c in schema.columns) == ["id", "price", "title"]
    rows = spark.sql(f"SELECT id, title FROM {items} ORDER BY id").collect()  # type: ignore[attr-defined]
    assert [(r["id"], r["title"]) for r in rows] == [
        (1, "a"),
        (2, "B"),
        (3, "c"),
        (5, "e"),
        (6, "f"),
    ]
    journal = lake.lake_table(TableName(database, "journal"))  # renamed in the catalog
    ids = spark.sql(f"SELECT id FROM {journal} ORDER BY id").collect()  # type: ignore[attr-defined]
    assert [r["id"] for r in ids] == [7, 8]
    assert not table_exists(spark, lake.lake_table(TableName(database, "logbook")))  # type: ignore[arg-type]


def test_a_second_run_continues_purges_the_relay_log_and_never_repeats_a_batch(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    database = "rep_again"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.a (id INT PRIMARY KEY, v VARCHAR(100))")
    source.execute(f"CREATE TABLE {database}.b (k BIGINT PRIMARY KEY, n INT)")
    source.execute(f"CREATE TABLE {database}.audit (at INT, what VARCHAR(20))")  # no key
    source.execute(f"CREATE TABLE {database}.pairs (a INT NOT NULL, b INT NOT NULL, n INT)")

    def work(first: int, count: int) -> None:
        with source.connect(database, autocommit=False) as conn, conn.cursor() as cursor:
            for i in range(first, first + count):
                cursor.execute("INSERT INTO a VALUES (%s, %s)", (i, "x" * 60))
                cursor.execute("INSERT INTO b VALUES (%s, %s)", (i, i))
                cursor.execute("INSERT INTO audit VALUES (%s, 'insert')", (i,))
                cursor.execute("INSERT INTO pairs VALUES (%s, %s, 0)", (i % 7, i))
                cursor.execute("UPDATE pairs SET n = n + 1 WHERE a = %s", (i % 7,))
                if i % 3 == 0:
                    cursor.execute("UPDATE a SET id = id + 10000 WHERE id = %s", (i,))
                    cursor.execute("DELETE FROM b WHERE k = %s", (i - 1,))
                conn.commit()

    work(0, 40)
    config = config_for(
        tmp_path,
        source,
        spark,
        database,
        receiver="max_relay_file_size = 4096\n",
        applier="max_transactions = 7\n",
        tables=f'key_columns = {{ "{database}.pairs" = ["a", "b"] }}\n',
    )
    first = replicate_in_process(config, spark)
    work(40, 40)
    second = replicate_in_process(config, spark)
    assert first.result.applied.batches and second.result.applied.batches
    assert first.result.applied.purged + second.result.applied.purged > 0
    assert_verify_passes(config, spark)
    history = assert_history_is_exactly_once(config, spark)
    assert history[f"{database}.a"] > 2
    rows = second.metrics.value(ROWS_APPLIED, {"table": f"{database}.b"})
    assert rows is not None and rows > 0
    pairs = lake_target(load_config(config)).lake_table(TableName(database, "pairs"))
    schema = read_lake_schema(spark, pairs, TableName(database, "pairs"))  # type: ignore[arg-type]
    assert schema.key == ("a", "b")  # merged on the configured key, not a change log


def test_a_transaction_larger_than_max_bytes_is_applied_from_images_read_back_exactly(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """Its row images are left in the relay log and read again as each table's rows are
    applied: inserts, updates of rows inserted in it, a key change, a delete then re-insert,
    a table without a key, all exact."""
    database = "rep_big"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.a (id INT PRIMARY KEY, v VARCHAR(200), n INT)")
    source.execute(f"CREATE TABLE {database}.log (at INT, what VARCHAR(20))")  # no key
    source.execute(f"INSERT INTO {database}.a VALUES (-1, 'before', 0), (-2, 'before', 0)")
    with source.connect(database, autocommit=False) as conn, conn.cursor() as cursor:
        cursor.execute("INSERT INTO a SELECT seq, REPEAT('x', 150), 0 FROM seq_0_to_2999")
        cursor.execute("UPDATE a SET n = n + 1, v = 'updated' WHERE id % 3 = 0")
        cursor.execute("UPDATE a SET id = id + 100000 WHERE id % 7 = 0")
        cursor.execute("DELETE FROM a WHERE id % 5 = 0 OR id = -1")
        cursor.execute("INSERT INTO a VALUES (5, 'again', 2), (-1, 'again', 2)")
        cursor.execute("INSERT INTO log SELECT seq, 'bulk' FROM seq_0_to_999")
        conn.commit()
    source.execute(f"UPDATE {database}.a SET n = 9 WHERE id = 1")  # a small one after it
    config = config_for(tmp_path, source, spark, database, applier="max_bytes = 65536\n")
    run = replicate_in_process(config, spark)
    assert "more than [applier] max_bytes: its row images are read from the relay log" in (
        run.output
    ), run.output
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)


def test_tables_the_filters_do_not_select_have_no_say_in_where_a_new_state_folder_starts(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """Two replicators share a warehouse: one's tables never count as applied for the
    other (no false "relay tail lost" or position-lost verdict from a foreign table)."""
    for database in ("rep_theirs", "rep_ours"):
        source.execute(f"CREATE DATABASE {database}")
        source.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY)")
        source.execute(f"INSERT INTO {database}.t VALUES (1)")
    (tmp_path / "theirs").mkdir()
    (tmp_path / "ours").mkdir()
    replicate_in_process(config_for(tmp_path / "theirs", source, spark, "rep_theirs"), spark)
    ours = config_for(tmp_path / "ours", source, spark, "rep_ours")
    run = replicate_in_process(ours, spark)
    assert "rep_theirs" not in run.output, run.output
    assert "0 tables hold batches" in run.output, run.output
    assert_verify_passes(ours, spark)


def test_one_transaction_batches_begin_with_the_relay_logs_opening_events_alone(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """``max_transactions = 1`` on a new state folder: the relay log's opening events (before
    the source's first ROTATE: no source position) make a batch of their own that commits
    nothing; each transaction after them is a batch of its own and lands once."""
    database = "rep_one_per_batch"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v INT)")
    for row in range(4):
        source.execute(f"INSERT INTO {database}.t VALUES ({row}, {row})")
    source.execute(f"UPDATE {database}.t SET v = v + 1 WHERE id = 2")
    config = config_for(tmp_path, source, spark, database, applier="max_transactions = 1\n")
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    assert assert_history_is_exactly_once(config, spark) == {f"{database}.t": 5}


def test_a_minimal_row_image_insert_is_refused_with_the_row_image_error(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    database = "rep_minimal"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY, a INT, d INT DEFAULT 7)")
    with source.connect(database) as conn, conn.cursor() as cursor:
        cursor.execute("SET SESSION binlog_row_image = MINIMAL")
        cursor.execute("INSERT INTO t (id, a) VALUES (1, 2)")
    config = config_for(tmp_path, source, spark, database)
    with pytest.raises(RowImageError, match="lacks column") as caught:
        replicate_in_process(config, spark)
    assert caught.value.table == f"{database}.t"


def test_a_statement_format_change_is_refused_naming_the_table(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    database = "rep_statement"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY)")
    with source.connect(database) as conn, conn.cursor() as cursor:
        cursor.execute("SET SESSION binlog_format = STATEMENT")
        cursor.execute("INSERT INTO t VALUES (1)")
    config = config_for(tmp_path, source, spark, database)
    with pytest.raises(StatementFormatError, match="binlog_format must be ROW") as caught:
        replicate_in_process(config, spark)
    assert caught.value.table == f"{database}.t"


def test_an_empty_relay_log_behind_a_purged_source_binlog_stops_with_position_lost(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """Design step 5: the state folder was lost and the source purged the binlog after a
    table's position: the transactions between are gone; binlake stops, never skips. (Last in
    the module: it purges the shared server's binlogs.)"""
    database = "rep_gap"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(f"CREATE TABLE {database}.t (id INT PRIMARY KEY)")
    source.execute(f"INSERT INTO {database}.t VALUES (1)")
    config = config_for(tmp_path, source, spark, database)
    replicate_in_process(config, spark)
    source.execute(f"INSERT INTO {database}.t VALUES (2)")
    source.purge_binlogs()
    shutil.rmtree(tmp_path / "state")
    with pytest.raises(SourcePositionLostError, match="the relay log was empty") as caught:
        replicate_in_process(config, spark)
    assert "re-snapshot" in caught.value.hint


@pytest.mark.parametrize("target", ["embedded", "jdbc"], indirect=True)
def test_a_configured_layout_partitions_and_sorts_the_table_and_keeps_it_exact(
    tmp_path: Path, source: MariaDBSandbox, spark: object, target: TargetSetup
) -> None:
    """``[tables.layout."db.t"]`` (issue 14): the table binlake creates has the configured
    partition spec and sort order; inserts, updates (one moving a row to another day's
    partition) and deletes land exactly, by row deltas (one data file per partition, position
    deletes in their data files' partitions); a layout naming a column the table lacks stops
    replicate with a ConfigError naming the key."""
    database = f"rep_layout{target.suffix}"
    source.execute(f"CREATE DATABASE {database}")
    source.execute(
        f"CREATE TABLE {database}.orders (id INT PRIMARY KEY, at DATETIME, cust INT, note TEXT)"
    )
    rows = ", ".join(f"({i}, '2026-11-0{1 + i % 3} 10:00:00', {i % 4}, 'n{i}')" for i in range(12))
    source.execute(f"INSERT INTO {database}.orders VALUES {rows}")
    source.execute(f"UPDATE {database}.orders SET at = '2026-11-09 08:00:00' WHERE id = 4")
    source.execute(f"UPDATE {database}.orders SET note = 'changed' WHERE cust = 1")
    source.execute(f"DELETE FROM {database}.orders WHERE id IN (2, 7)")
    layout = (
        f'[tables.layout."{database}.orders"]\n'
        'partition = ["days(at)", "bucket(4, id)"]\nsort = ["cust DESC", "id"]\n'
    )
    config_path = config_for(tmp_path, source, spark, database, tables=layout, target=target)
    replicate_in_process(config_path, spark)
    assert_verify_passes(config_path, spark)
    assert_history_is_exactly_once(config_path, spark)
    assert writes_per_table(config_path, spark)[f"{database}.orders"] == {"row-delta"}
    name = lake_target(load_config(config_path)).lake_table(TableName(database, "orders"))
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession,  # type: ignore[attr-defined]
        name,
    )
    spec = [(f.name(), str(f.transform())) for f in table.spec().fields()]
    assert spec == [("at_day", "day"), ("id_bucket", "bucket[4]")]
    schema = table.schema()
    order = [
        (schema.findColumnName(f.sourceId()), str(f.direction()))
        for f in table.sortOrder().fields()
    ]
    assert order == [("cust", "DESC"), ("id", "ASC")]

    source.execute(f"CREATE TABLE {database}.other (id INT PRIMARY KEY, v INT)")
    source.execute(f"INSERT INTO {database}.other VALUES (1, 1)")
    bad = f'[tables.layout."{database}.other"]\npartition = ["days(at)"]\n'
    config_path = config_for(tmp_path, source, spark, database, tables=layout + bad, target=target)
    with pytest.raises(ConfigError, match="names the column 'at'") as caught:
        replicate_in_process(config_path, spark)
    assert caught.value.field == f'tables.layout."{database}.other".partition'
