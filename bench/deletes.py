"""What a table's delete files cost its readers: equality deletes (binlake's row deltas) against
position deletes, at each size, against the same rows with no deletes.

Per size in ``--rows`` (default ``100000,10000000``), one Spark session (``local[2]``, the
embedded catalog, binlake's table properties: 16 MiB row groups, merge-on-read), one table
``lake.bench_deletes.t`` with the lake rows of bench/_scale.py (``LAKE_FILL``, in 4 files).
For each count of batches in ``--batches`` (default ``1,30,120``; a batch is ``--keys`` random
keys updated, default 100: one binlake commit a second for two minutes is 120 batches), the
table rolled back to its first snapshot before each arm:

* ``fresh``: no batch at all (the reference of every ratio);
* ``equality``: the batches as binlake commits them (``RowDeltaWriter``: the new rows and an
  equality-delete file on the key, one commit each);
* ``position``: the same updates by Spark SQL ``UPDATE`` (Iceberg's own merge-on-read writer:
  it scans the table for the rows' positions, and keeps one position-delete file per data file);
* ``converted``: the ``equality`` batches, then their equality deletes turned into position
  deletes in one commit by this script's ``convert`` (a harness, not a binlake step: the rows
  each delete file's keys hide found by a Spark join of the key column of every older data file,
  read raw, with the row positions; the table's rows are checked unchanged by it), and the time
  that took against a compaction of the same table (``rewrite_data_files``, what binlake's
  ``compact`` step runs).

For each: the data and delete files, and the warm time (the median of 3 after one run) of
``count(*)``, a point lookup by key and a ``GROUP BY``, and its ratio to ``fresh``.

Not a test; a quick check: ``--rows 20000 --batches 1,3``.

    .venv/bin/python bench/deletes.py [--rows 100000,10000000] [--batches 1,30,120] [--keys 100]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession, functions

from _scale import LAKE_FILL
from binlake.lake.schema.sql import TABLE_PROPERTIES
from binlake.lake.spark.session import SparkSettings, build_session, stop_session
from binlake.lake.write.row_delta import RowDeltaWriter
from maintain import queries, say, warm_time

TABLE = "lake.bench_deletes.t"
IDENTIFIER = "bench_deletes.t"
#: Iceberg's reserved field ids of a position-delete file's two columns.
POSITION_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": b"2147483546"}),
        pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": b"2147483545"}),
    ]
)
ROWS_CHECK = f"SELECT count(*), sum(a), sum(hash(s)) FROM {TABLE}"


def create(spark: SparkSession, rows: int) -> int:
    """The table with ``rows`` rows; its first snapshot's id."""
    props = ", ".join(f"'{k}'='{v}'" for k, v in TABLE_PROPERTIES.items())
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench_deletes")
    spark.sql(f"DROP TABLE IF EXISTS {TABLE} PURGE")
    spark.sql(
        f"CREATE TABLE {TABLE} (id BIGINT NOT NULL, a INT, d DECIMAL(10,2), s STRING, "
        f"ts TIMESTAMP_NTZ) USING iceberg TBLPROPERTIES ({props})"
    )
    spark.sql(f"ALTER TABLE {TABLE} SET IDENTIFIER FIELDS id")
    spark.range(1, rows + 1, 1, 4).selectExpr(*LAKE_FILL).writeTo(TABLE).append()
    return int(spark.sql(f"SELECT snapshot_id FROM {TABLE}.snapshots").collect()[0][0])


def roll_back(spark: SparkSession, snapshot: int) -> None:
    spark.sql(f"CALL lake.system.rollback_to_snapshot('{IDENTIFIER}', {snapshot})")


def measure(
    spark: SparkSession, rows: int, label: str, fresh: dict[str, float] | None
) -> dict[str, float]:
    spark.sql(f"REFRESH TABLE {TABLE}")
    kinds = dict(spark.sql(f"SELECT content, count(*) FROM {TABLE}.files GROUP BY 1").collect())
    out = {name: warm_time(spark, query) for name, query in queries(TABLE, rows).items()}
    files = (
        f"{kinds.get(0, 0)} data, {kinds.get(1, 0)} position-delete, "
        f"{kinds.get(2, 0)} equality-delete files"
    )
    shown = "  ".join(
        f"{n} {t:.3f} s" + ("" if fresh is None else f" ({t / fresh[n]:.2f}x)")
        for n, t in out.items()
    )
    say(f"{rows:,} rows, {label}: {files}; {shown}")
    return out


def batches(rows: int, count: int, keys: int) -> list[list[int]]:
    rng = random.Random(count)
    return [sorted(rng.sample(range(1, rows + 1), keys)) for _ in range(count)]


def apply_equality(spark: SparkSession, keys_list: list[list[int]]) -> None:
    writer = RowDeltaWriter(spark)
    for n, keys in enumerate(keys_list):
        target = writer.open(TABLE, ("id",), IDENTIFIER)
        rows = pa.table(
            {
                "id": pa.array(keys, pa.int64()),
                "a": pa.array([k % 1000 + 1 for k in keys], pa.int32()),
                "d": pa.array([None] * len(keys), pa.decimal128(10, 2)),
                "s": pa.array([f"u-{k}-{n}" for k in keys]),
                "ts": pa.array([None] * len(keys), pa.timestamp("us")),
            }
        )
        staged = writer.stage(target, [(rows, pa.table({"id": rows.column("id")}))], IDENTIFIER)
        writer.commit(staged, {"binlake.bench": str(n)}, IDENTIFIER)


def apply_position(spark: SparkSession, keys_list: list[list[int]]) -> None:
    for n, keys in enumerate(keys_list):
        spark.sql(
            f"UPDATE {TABLE} SET a = a + 1, s = concat('u-', id, '-{n}') "
            f"WHERE id IN ({', '.join(map(str, keys))})"
        )


def local(path: str) -> str:
    return re.sub(r"^file:/+", "/", path)


def scan_files(table: Any) -> tuple[dict[str, int], dict[str, tuple[int, Any]]]:
    """The current snapshot's data files (location: sequence number) and equality-delete files
    (location: sequence number and the Java file)."""
    data: dict[str, int] = {}
    equality: dict[str, tuple[int, Any]] = {}
    tasks = table.newScan().planFiles().iterator()
    while tasks.hasNext():
        task = tasks.next()
        data[str(task.file().location())] = int(task.file().dataSequenceNumber())
        for delete in task.deletes():
            if str(delete.content().name()) == "EQUALITY_DELETES":
                equality[str(delete.location())] = (int(delete.dataSequenceNumber()), delete)
    return data, equality


def hidden_rows(
    spark: SparkSession, data: dict[str, int], equality: dict[str, tuple[int, Any]]
) -> list[tuple[str, int]]:
    """(data file, row position) of every row an equality delete hides: its key in a delete
    file whose sequence number is above the data file's."""
    keys = [
        (k, seq)
        for path, (seq, _) in equality.items()
        for k in pq.read_table(local(path), columns=["id"]).column(0).to_pylist()
    ]
    deleted = spark.createDataFrame(keys, "id long, delete_seq long")
    files = spark.createDataFrame(
        [(local(p), p, s) for p, s in data.items()], "local string, path string, seq long"
    )
    rows = spark.read.parquet(*data).select("id", "_metadata.file_path", "_metadata.row_index")
    rows = rows.withColumn("local", functions.regexp_replace("file_path", "^file:/+", "/"))
    hits = rows.join(functions.broadcast(deleted), "id").join(functions.broadcast(files), "local")
    hits = hits.where("seq < delete_seq").select("path", "row_index").distinct()
    return sorted((str(r[0]), int(r[1])) for r in hits.collect())


def convert(spark: SparkSession, name: str = TABLE) -> tuple[int, int]:
    """Table ``name``'s equality deletes (on ``id``) replaced by position deletes in one commit
    (a harness: local warehouse, unpartitioned table); the files replaced and the positions
    written. Another writer's commit meanwhile is settled by Iceberg's retry: the files this
    replaces are still there, and the deletes committed after its scan are left as they are."""
    jvm: Any = spark.sparkContext._jvm
    ice = jvm.org.apache.iceberg
    table = ice.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, name)
    snapshot = table.currentSnapshot().snapshotId()
    data, equality = scan_files(table)
    if not equality:
        return 0, 0
    found = hidden_rows(spark, data, equality)
    out = os.path.join(
        local(str(table.location())), "data", f"converted-{uuid.uuid4().hex}.parquet"
    )
    columns = [
        pa.array([p for p, _ in found], pa.string()),
        pa.array([q for _, q in found], pa.int64()),
    ]
    pq.write_table(pa.table(columns, schema=POSITION_SCHEMA), out)
    metrics = ice.parquet.ParquetUtil.fileMetrics(
        ice.Files.localInput(out), ice.MetricsConfig.forPositionDelete(table)
    )
    builder = ice.FileMetadata.deleteFileBuilder(table.spec()).ofPositionDeletes().withPath(out)
    builder = builder.withFileSizeInBytes(os.path.getsize(out)).withFormat(ice.FileFormat.PARQUET)
    rewrite = table.newRewrite()
    for _, java in equality.values():
        rewrite = rewrite.deleteFile(java)
    rewrite.addFile(builder.withMetrics(metrics).build()).validateFromSnapshot(snapshot).commit()
    return len(equality), len(found)


def converted_arm(
    spark: SparkSession, rows: int, base: int, keys_list: list[list[int]], fresh: dict[str, float]
) -> None:
    roll_back(spark, base)
    apply_equality(spark, keys_list)
    before = spark.sql(ROWS_CHECK).collect()
    started = time.monotonic()
    replaced, positions = convert(spark)
    took = time.monotonic() - started
    spark.sql(f"REFRESH TABLE {TABLE}")
    assert spark.sql(ROWS_CHECK).collect() == before, "the conversion changed the table's rows"
    say(
        f"{rows:,} rows: {replaced} equality-delete files turned into {positions:,} positions "
        f"in {took:.2f} s"
    )
    measure(spark, rows, f"{len(keys_list)} batches, converted", fresh)
    roll_back(spark, base)
    apply_equality(spark, keys_list)
    started = time.monotonic()
    spark.sql(
        f"CALL lake.system.rewrite_data_files(table => '{IDENTIFIER}', "
        "options => map('delete-file-threshold', '1'))"
    ).collect()
    say(
        f"{rows:,} rows: the same table compacted (rewrite_data_files) "
        f"in {time.monotonic() - started:.2f} s"
    )


def size(spark: SparkSession, rows: int, counts: list[int], keys: int) -> None:
    base = create(spark, rows)
    for n in range(3):  # the JVM's code warms over several runs of each query
        measure(spark, rows, f"warm-up {n + 1}", None)
    fresh = measure(spark, rows, "fresh", None)
    for count in counts:
        keys_list = batches(rows, count, keys)
        roll_back(spark, base)
        apply_equality(spark, keys_list)
        measure(spark, rows, f"{count} batches, equality", fresh)
        roll_back(spark, base)
        apply_position(spark, keys_list)
        measure(spark, rows, f"{count} batches, position", fresh)
        converted_arm(spark, rows, base, keys_list, fresh)
    roll_back(spark, base)
    measure(spark, rows, "fresh again", fresh)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="100000,10000000")
    parser.add_argument("--batches", default="1,30,120")
    parser.add_argument("--keys", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="binlake-bench-deletes-") as folder:
        spark = build_session(SparkSettings(warehouse=Path(folder) / "warehouse"))
        try:
            for rows in (int(r) for r in args.rows.split(",")):
                size(spark, rows, [int(c) for c in args.batches.split(",")], args.keys)
        finally:
            stop_session(spark)


if __name__ == "__main__":
    main()
