"""Spark and Iceberg for real: tables binlake creates, commits that carry its position, exact
values for every mapped type, and the driver's console log. One local Spark session for the run
(the ``spark`` fixture).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from binlake.binlog.constants import ColumnType as T
from binlake.config.layout import PartitionField, SortField, TableLayout
from binlake.errors import SparkStatementError
from binlake.lake.catalog.metadata import catalog_rows
from binlake.lake.schema.sql import TABLE_PROPERTIES, create_table_statements, table_name
from binlake.lake.spark.callbacks import close_callbacks
from binlake.lake.spark.frames import dataframe_from_arrow
from binlake.lake.spark.lineage import current_lineage, latest_binlake_summary, refs, snapshots
from binlake.lake.spark.types import spark_schema
from binlake.lake.tables.create import create_table
from binlake.lake.write.commit import append_with_commit_properties, execute_with_commit_properties
from binlake.lake.write.deletion_vectors import decode_vector, puffin_blobs
from binlake.typemap import IcebergType, LakeSchema, lake_schema
from binlake_dev.readers import (
    READERS,
    WarehouseTable,
    differences,
    normal_rows,
    read_rows,
)
from binlog_fixtures import UTF8MB4, table_map
from lake_tables import HINTS, LAKE_ROWS, NAMES, every_type_table_map

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
ONE_MICRO = dt.timedelta(microseconds=1)


def batch(n: int) -> dict[str, str]:
    return {
        "binlake.position": f"mariadb-bin.000001:{1000 + n}",
        "binlake.gtid": f"0-1-{n}",
        "binlake.relay": f"relay-bin.000001:{500 + n}",
        "binlake.batch": str(n),
    }


def create(spark: SparkSession, schema: LakeSchema) -> str:
    """A new table for ``schema`` in a namespace of its own; returns its name."""
    name = table_name("lake", [f"t_{uuid.uuid4().hex[:10]}"], schema.source_table.table)
    for statement in create_table_statements(name, schema):
        spark.sql(statement)
    return name


def keyed_schema() -> LakeSchema:
    """``shop.kv``: ``id INT PRIMARY KEY, v VARCHAR(10)``."""
    tm = table_map((T.LONG, T.VARCHAR), (0, 40), charsets=(None, UTF8MB4))
    return lake_schema(
        replace(
            tm,
            schema="shop",
            table="kv",
            column_names=("id", "v"),
            primary_key=(0,),
            nullable=(False, True),
        )
    )


def rows(spark: SparkSession, table: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in spark.sql(f"SELECT * FROM {table} ORDER BY 1").collect()]


def changes(spark: SparkSession, data: list[tuple[int, str | None, str]]) -> str:
    """A temp view of (id, v, op) change rows; returns its name."""
    view = f"changes_{uuid.uuid4().hex[:8]}"
    spark.createDataFrame(data, "id INT, v STRING, op STRING").createOrReplaceTempView(view)
    return view


def merge_sql(table: str, view: str) -> str:
    return (
        f"MERGE INTO {table} t USING {view} s ON t.id = s.id "
        "WHEN MATCHED AND s.op = 'd' THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET t.v = s.v "
        "WHEN NOT MATCHED AND s.op != 'd' THEN INSERT (id, v) VALUES (s.id, s.v)"
    )


# ---- the driver's log --------------------------------------------------------------------------


def test_the_drivers_log_writes_a_java_exception_as_one_line_without_its_stack(
    spark: SparkSession,
) -> None:
    """What Spark's network and scheduler classes log when an executor dies (an exception with
    its stack, or a stack written into the message, as in "Lost task"): the console appender
    binlake's log4j2.properties gives the driver prints the message and the exception's first
    line, never a stack frame."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    log4j = jvm.org.apache.logging.log4j
    console = log4j.LogManager.getContext(False).getConfiguration().getAppender("console")
    error = jvm.java.lang.IllegalStateException(
        "Failed to send RPC", jvm.java.io.IOException("Connection reset by peer")
    )
    stack = jvm.org.apache.spark.util.Utils.exceptionString(error)
    assert "\tat " in stack

    def line(message: str, thrown: Any = None) -> str:
        event = log4j.core.impl.Log4jLogEvent.newBuilder().setLoggerName("org.apache.spark.x.Y")
        event = event.setLevel(log4j.Level.ERROR).setMessage(log4j.message.SimpleMessage(message))
        return str(console.getLayout().toSerializable(event.setThrown(thrown).build()))

    assert line("Error sending result", error).endswith(
        " ERROR Y: Error sending result: java.lang.IllegalStateException: Failed to send RPC\n"
    )
    assert line(f"Lost task 1.0: {stack}").endswith(
        " ERROR Y: Lost task 1.0: java.lang.IllegalStateException: Failed to send RPC\n"
        "Caused by: java.io.IOException: Connection reset by peer\n"
    )
    assert line("Lost executor 0 on 127.0.0.1").endswith(" Lost executor 0 on 127.0.0.1\n")


# ---- tables -----------------------------------------------------------------------------------


def test_created_table_is_v2_merge_on_read_keyed_by_the_primary_key(spark: SparkSession) -> None:
    schema = lake_schema(every_type_table_map(), HINTS)
    table = create(spark, schema)

    def shape(fields: Any) -> list[tuple[str, Any, bool]]:
        return [(f.name, f.dataType, f.nullable) for f in fields]

    assert shape(spark.table(table).schema.fields) == shape(spark_schema(schema).fields)
    assert spark.table(table).schema["biu"].metadata == {"comment": "BIGINT UNSIGNED"}
    namespace, name = table.replace("`", "").split(".")[1:]
    metadata = _current_metadata(
        Path(spark.conf.get("spark.sql.catalog.lake.warehouse") or ""), namespace, name
    )
    assert metadata["format-version"] == 2
    props = metadata["properties"]
    assert {props[f"write.{op}.mode"] for op in ("delete", "update", "merge")} == {"merge-on-read"}
    assert props["write.parquet.row-group-size-bytes"] == str(16 << 20)
    current = next(
        s for s in metadata["schemas"] if s["schema-id"] == metadata["current-schema-id"]
    )
    assert current["identifier-field-ids"] == [1]
    assert current["fields"][0]["name"] == "id"
    # Running the statements again (a crash between them) changes nothing.
    for statement in create_table_statements(table, schema):
        spark.sql(statement)


@pytest.mark.parametrize(
    "layout",
    [
        None,
        TableLayout(
            'tables.layout."shop.t"',
            (PartitionField("days", "TS6"), PartitionField("bucket", "id", 16)),
            (SortField("S", descending=True), SortField("id", nulls_first=False)),
        ),
    ],
    ids=["plain", "partitioned-and-sorted"],
)
def test_a_table_made_in_one_catalog_call_is_the_one_spark_sql_makes(
    spark: SparkSession, layout: TableLayout | None
) -> None:
    """``lake.tables.create`` (the catalog's API, one metadata version) makes the table Spark
    SQL's CREATE TABLE, SET IDENTIFIER FIELDS and WRITE ORDERED BY make: same columns, ids,
    docs, key, partition fields (Spark's names), sort order and table properties."""
    schema = lake_schema(every_type_table_map(), HINTS)
    namespace = f"t_{uuid.uuid4().hex[:10]}"
    by_sql, by_api = (
        table_name("lake", [namespace], "by_sql"),
        table_name("lake", [namespace], "by_api"),
    )
    spark.sql(f"CREATE NAMESPACE lake.{namespace}")
    for statement in create_table_statements(by_sql, schema, layout=layout):
        spark.sql(statement)
    assert create_table(spark, by_api, schema, layout, TABLE_PROPERTIES, "shop.t")
    assert not create_table(spark, by_api, schema, layout, TABLE_PROPERTIES, "shop.t")
    warehouse = Path(spark.conf.get("spark.sql.catalog.lake.warehouse") or "")
    sql_made, api_made = (_current_metadata(warehouse, namespace, t) for t in ("by_sql", "by_api"))

    def current(metadata: dict[str, Any], key: str, id_key: str, default: str) -> Any:
        return next(x for x in metadata[key] if x[id_key] == metadata[default])["fields"]

    assert _schema(sql_made) == _schema(api_made)
    for key, id_key, default in (
        ("partition-specs", "spec-id", "default-spec-id"),
        ("sort-orders", "order-id", "default-sort-order-id"),
    ):
        made = current(api_made, key, id_key, default)
        assert current(sql_made, key, id_key, default) == made
        assert bool(made) is (layout is not None)
    spark_own = {"owner", "provider", "current-snapshot-id"}  # Spark SQL's bookkeeping
    sql_props = {k: v for k, v in sql_made["properties"].items() if k not in spark_own}
    assert sql_props == {k: v for k, v in api_made["properties"].items() if k not in spark_own}
    assert api_made["format-version"] == sql_made["format-version"] == 2


def _schema(metadata: dict[str, Any]) -> dict[str, Any]:
    found = next(s for s in metadata["schemas"] if s["schema-id"] == metadata["current-schema-id"])
    return {k: v for k, v in found.items() if k != "schema-id"}


def _current_metadata(warehouse: Path, namespace: str, table: str) -> dict[str, Any]:
    """The metadata file the embedded catalog's row for the table names."""
    [(_, location)] = catalog_rows(warehouse, "lake", (namespace, table))
    return json.loads(Path(location).read_text())  # type: ignore[no-any-return]


# ---- commits that carry binlake's position ---------------------------------------------------


def test_merge_commit_carries_the_batch_position(spark: SparkSession) -> None:
    table = create(spark, keyed_schema())
    execute_with_commit_properties(
        spark, f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')", batch(1), table
    )
    view = changes(spark, [(1, "A", "u"), (2, None, "d"), (3, "c", "i")])
    execute_with_commit_properties(spark, merge_sql(table, view), batch(2), table)

    assert rows(spark, table) == [(1, "A"), (3, "c")]
    newest = current_lineage(spark, table)[0]
    assert newest.binlake == batch(2)
    assert newest.operation == "overwrite"
    assert int(newest.summary.get("added-position-delete-files", "0")) > 0  # merge-on-read
    assert latest_binlake_summary(spark, table) == batch(2)


def test_commits_work_again_after_the_callback_server_was_closed(spark: SparkSession) -> None:
    table = create(spark, keyed_schema())
    execute_with_commit_properties(spark, f"INSERT INTO {table} VALUES (1, 'a')", batch(1), table)
    close_callbacks(spark)
    execute_with_commit_properties(spark, f"DELETE FROM {table} WHERE id = 1", batch(2), table)
    assert rows(spark, table) == []
    assert latest_binlake_summary(spark, table) == batch(2)


def test_failed_merge_commits_nothing(spark: SparkSession) -> None:
    table = create(spark, keyed_schema())
    execute_with_commit_properties(spark, f"INSERT INTO {table} VALUES (1, 'a')", batch(1), table)
    before = snapshots(spark, table)
    # Two source rows for one target row: Spark fails the write tasks mid-MERGE.
    view = changes(spark, [(1, "x", "u"), (1, "y", "u"), (2, "n", "i")])
    with pytest.raises(SparkStatementError, match="MERGE_CARDINALITY_VIOLATION") as caught:
        execute_with_commit_properties(spark, merge_sql(table, view), batch(2), table)
    assert caught.value.statement is not None and caught.value.statement.startswith("MERGE INTO")
    assert snapshots(spark, table) == before
    assert rows(spark, table) == [(1, "a")]
    assert latest_binlake_summary(spark, table) == batch(1)


def test_latest_summary_skips_snapshots_binlake_did_not_make(spark: SparkSession) -> None:
    table = create(spark, keyed_schema())
    assert latest_binlake_summary(spark, table) is None  # no snapshot at all
    spark.sql(f"INSERT INTO {table} VALUES (9, 'z')")
    assert latest_binlake_summary(spark, table) is None  # only a foreign one
    execute_with_commit_properties(spark, f"INSERT INTO {table} VALUES (1, 'a')", batch(1), table)
    spark.sql(f"INSERT INTO {table} VALUES (2, 'b')")
    ident = table.replace("`", "").split(".", 1)[1]
    compaction = spark.sql(
        f"CALL lake.system.rewrite_data_files(table => '{ident}', "
        "options => map('min-input-files', '2'))"
    ).collect()
    assert compaction[0]["rewritten_data_files_count"] >= 2
    lineage = current_lineage(spark, table)
    assert [s.operation for s in lineage[:2]] == ["replace", "append"]
    assert latest_binlake_summary(spark, table) == batch(1)


def test_latest_summary_follows_the_current_lineage_not_the_newest_commit(
    spark: SparkSession,
) -> None:
    table = create(spark, keyed_schema())
    execute_with_commit_properties(spark, f"INSERT INTO {table} VALUES (1, 'a')", batch(1), table)
    kept = current_lineage(spark, table)[0].snapshot_id
    execute_with_commit_properties(spark, f"INSERT INTO {table} VALUES (2, 'b')", batch(2), table)
    ident = table.replace("`", "").split(".", 1)[1]
    spark.sql(f"CALL lake.system.rollback_to_snapshot('{ident}', {kept})")
    assert max(snapshots(spark, table).values(), key=lambda s: s.committed_at).binlake == batch(2)
    assert latest_binlake_summary(spark, table) == batch(1)


def test_a_lineage_read_runs_no_spark_job_and_shows_what_the_metadata_tables_show(
    spark: SparkSession,
) -> None:
    # On a cluster a Spark job waits for an executor: a restart reads every table's lineage.
    table = create(spark, keyed_schema())
    execute_with_commit_properties(spark, f"INSERT INTO {table} VALUES (1, 'a')", batch(1), table)
    spark.sql(f"DELETE FROM {table} WHERE id = 1")
    spark.sql(f"ALTER TABLE {table} CREATE TAG kept")
    lineage_group, sql_group = (f"{n}-{uuid.uuid4().hex}" for n in ("lineage", "sql"))
    tracker = spark.sparkContext.statusTracker()
    try:
        spark.sparkContext.setJobGroup(lineage_group, "the lineage read")
        by_id, table_refs = snapshots(spark, table), refs(spark, table)
        lineage = current_lineage(spark, table)
        spark.sparkContext.setJobGroup(sql_group, "the metadata tables")
        columns = "snapshot_id, parent_id, committed_at, operation, summary"
        shown = spark.sql(f"SELECT {columns} FROM {table}.snapshots").collect()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert list(tracker.getJobIdsForGroup(lineage_group)) == []
    assert list(tracker.getJobIdsForGroup(sql_group)), "a metadata table's query runs a job"
    assert {r["snapshot_id"]: (r["parent_id"], r["committed_at"], r["operation"], r["summary"])
            for r in shown} == {
        i: (s.parent_id, s.committed_at, s.operation, s.summary) for i, s in by_id.items()
    }  # fmt: skip
    shown_refs = spark.sql(f"SELECT name, type, snapshot_id FROM {table}.refs").collect()
    assert {r["name"]: (r["type"].lower(), r["snapshot_id"]) for r in shown_refs} == table_refs
    assert set(table_refs) == {"main", "kept", "binlake-applied"}
    assert [s.operation for s in lineage] == ["delete", "append"]
    assert lineage[1].binlake == batch(1)


# ---- exact values of every type ---------------------------------------------------------------


@dataclass(frozen=True)
class EveryType:
    """A table of every mapped type, written once for the module: ``LAKE_ROWS`` through
    binlake's Arrow path, then the same values once more through pyspark's row path under
    ids + 10 (``rows``: both, in id order)."""

    name: str
    table: WarehouseTable
    schema: LakeSchema
    rows: tuple[tuple[Any, ...], ...]


@pytest.fixture(scope="module")
def every_type(spark: SparkSession) -> EveryType:
    schema = lake_schema(every_type_table_map(), HINTS)
    table = create(spark, schema)
    arrow = pa.Table.from_pylist(
        [dict(zip(NAMES, row, strict=True)) for row in LAKE_ROWS], schema.arrow_schema()
    )
    frame = dataframe_from_arrow(spark, arrow, spark_schema(schema))
    append_with_commit_properties(frame, table, batch(1))
    again = tuple((row[0] + 10, *row[1:]) for row in LAKE_ROWS)
    append_with_commit_properties(
        spark.createDataFrame(list(again), spark_schema(schema)), table, batch(2)
    )
    _, namespace, name = (part.strip("`") for part in table.split("."))
    warehouse = Path(spark.conf.get("spark.sql.catalog.lake.warehouse"))
    located = WarehouseTable(warehouse, "lake", namespace, name)
    return EveryType(table, located, schema, (*LAKE_ROWS, *again))


def test_every_type_round_trips_exactly_through_iceberg(
    spark: SparkSession, every_type: EveryType
) -> None:
    got = _read_exact(spark, every_type.name, every_type.schema)
    want = [_exact(every_type.schema, row) for row in every_type.rows]
    assert [r[0] for r in got] == [r[0] for r in want]
    for got_row, want_row in zip(got, want, strict=True):
        for name, got_value, want_value in zip(NAMES, got_row, want_row, strict=True):
            assert (name, got_value) == (name, want_value)
    assert latest_binlake_summary(spark, every_type.name) == batch(2)


@pytest.mark.parametrize("reader", READERS)
def test_every_type_reads_back_exactly_through_every_reader(
    spark: SparkSession, every_type: EveryType, reader: str
) -> None:
    """The same table through Spark, PyIceberg and DuckDB: every extreme value (year 1 and
    9999 timestamps, DECIMAL(38,10) at both ends, float32 max, a 70,000-byte blob, EWKB,
    NULLs) comes back as written, in the readers' common normal form."""
    columns = every_type.table.columns()
    want = normal_rows(columns, every_type.rows)
    got = read_rows(reader, every_type.table, spark)
    problem = differences(reader, every_type.table, got, want)
    assert not problem, problem


@pytest.fixture(scope="module")
def format_3_table(spark: SparkSession) -> WarehouseTable:
    """A format-version 3 table (binlake makes v2 ones; a user may upgrade) with deletion
    vectors: a row deleted and one updated by merge-on-read, Spark's v3 way."""
    namespace = f"t_{uuid.uuid4().hex[:10]}"
    name = table_name("lake", [namespace], "dv")
    modes = ", ".join(f"'write.{m}.mode' = 'merge-on-read'" for m in ("delete", "update"))
    spark.sql(f"CREATE NAMESPACE lake.{namespace}")
    spark.sql(
        f"CREATE TABLE {name} (id INT, v STRING, at TIMESTAMP) USING iceberg "
        f"TBLPROPERTIES ('format-version' = '3', {modes})"
    )
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a', TIMESTAMP '2024-02-29 12:00:00 UTC'), "
              "(2, 'b', NULL), (3, 'c', NULL), (4, 'd', NULL)")  # fmt: skip
    spark.sql(f"DELETE FROM {name} WHERE id = 2")
    spark.sql(f"UPDATE {name} SET v = 'C' WHERE id = 3")
    warehouse = Path(spark.conf.get("spark.sql.catalog.lake.warehouse"))
    return WarehouseTable(warehouse, "lake", namespace, "dv")


@pytest.mark.parametrize("reader", READERS)
def test_deletion_vectors_of_a_format_3_table_are_applied_by_every_reader(
    spark: SparkSession, format_3_table: WarehouseTable, reader: str
) -> None:
    formats = spark.sql(f"SELECT file_format FROM {format_3_table.spark_name}.delete_files")
    assert {r[0] for r in formats.collect()} == {"PUFFIN"}, "deletion vectors, in Puffin files"
    at = dt.datetime(2024, 2, 29, 12, tzinfo=dt.UTC)
    want = normal_rows(format_3_table.columns(), [(1, "a", at), (3, "C", None), (4, "d", None)])
    got = read_rows(reader, format_3_table, spark)
    problem = differences(reader, format_3_table, got, want)
    assert not problem, problem


def test_deletion_vectors_spark_wrote_read_with_binlakes_reader_as_spark_reads_them(
    spark: SparkSession, format_3_table: WarehouseTable
) -> None:
    """Each Puffin file Spark wrote, read with binlake's reader (footer, then each blob's
    length, magic, buckets and CRC): the DVs name the positions Spark's own
    ``position_deletes`` table lists, and the cardinality each manifest entry records."""
    name = format_3_table.spark_name
    spark.sql(f"REFRESH TABLE {name}")
    entries = spark.sql(
        f"SELECT file_path, referenced_data_file, record_count, content_offset, "
        f"content_size_in_bytes FROM {name}.delete_files"
    ).collect()
    ours: set[tuple[str, int]] = set()
    for puffin in {str(e[0]) for e in entries}:
        data = Path(puffin.removeprefix("file:")).read_bytes()
        for blob in puffin_blobs(data, puffin):
            positions = decode_vector(data[blob.offset : blob.offset + blob.length], puffin)
            assert len(positions) == blob.cardinality
            ours |= {(blob.data_file, pos) for pos in positions}
            entry = next(e for e in entries if e[1] == blob.data_file and str(e[0]) == puffin)
            assert (entry[2], entry[3], entry[4]) == (blob.cardinality, blob.offset, blob.length)
    sparks = spark.sql(f"SELECT file_path, pos FROM {name}.position_deletes").collect()
    assert ours == {(str(r[0]), int(r[1])) for r in sparks} and ours


def _read_exact(spark: SparkSession, table: str, schema: LakeSchema) -> list[tuple[Any, ...]]:
    """Rows read back, each value tagged with its type. timestamptz as microseconds since the
    epoch (collect() gives local wall-clock times) and decimals as Spark's text, which like
    ``str(Decimal)`` shows the scale (collect() turns -1E-10 at scale 10 into -1.00E-10)."""
    select = ", ".join(_exact_expression(c.name, c.type) for c in schema.columns)
    collected = spark.sql(f"SELECT {select} FROM {table} ORDER BY id").collect()
    return [tuple(_tag(v) for v in row) for row in collected]


def _exact_expression(name: str, kind: IcebergType) -> str:
    if kind is IcebergType.TIMESTAMPTZ:
        return f"unix_micros(`{name}`)"
    if kind is IcebergType.DECIMAL:
        return f"CAST(`{name}` AS STRING)"
    return f"`{name}`"


def _exact(schema: LakeSchema, row: tuple[Any, ...]) -> tuple[Any, ...]:
    """The expected values in the form ``_read_exact`` reads them."""
    out = []
    for column, value in zip(schema.columns, row, strict=True):
        if column.type is IcebergType.TIMESTAMPTZ and value is not None:
            value = (value - EPOCH) // ONE_MICRO
        elif column.type is IcebergType.DECIMAL and value is not None:
            value = str(value)  # scientific form below 1E-6: still exact (unscaled, scale)
        out.append(_tag(value))
    return tuple(out)


def _tag(value: Any) -> Any:
    """A value in a form where equal means identical: its type, and a float's bits."""
    if isinstance(value, bytearray):
        value = bytes(value)
    if isinstance(value, float):
        return ("float", value.hex())
    return (type(value).__name__, value)
