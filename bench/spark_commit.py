"""Spark/Iceberg foundation timings: session start, CREATE TABLE, MERGE with commit properties.

On a local Spark session (the embedded default: ``local[2]``, Hadoop catalog in a temp folder)
with an orders-shaped table (BIGINT UNSIGNED key, INT, VARCHAR, DECIMAL(12,2), DATETIME(3)):

- session start (``build_session``, the Iceberg jars already cached);
- CREATE TABLE + SET IDENTIFIER FIELDS (cold, then a second table warm);
- an Arrow table of N rows to a DataFrame (``dataframe_from_arrow``) and its append;
- MERGE of N change rows (a quarter deletes, a quarter updates, half inserts) carrying
  binlake.* snapshot properties, cold then warm;
- ``latest_binlake_summary``.

Not a test: nothing is asserted. ``.venv/bin/python bench/spark_commit.py [--rows 100000]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.tablemap import TableMap
from binlake.lake.schema.sql import create_table_statements, table_name
from binlake.lake.spark.frames import dataframe_from_arrow
from binlake.lake.spark.lineage import latest_binlake_summary
from binlake.lake.spark.session import SparkSettings, build_session, stop_session
from binlake.lake.spark.types import spark_schema
from binlake.lake.write.commit import append_with_commit_properties, execute_with_commit_properties
from binlake.typemap import LakeSchema, lake_schema

UTF8MB4 = 45
COLUMNS = ("id", "customer", "status", "total", "placed")


def orders_schema(table: str) -> LakeSchema:
    tm = TableMap(
        table_id=1,
        flags=1,
        schema="bench",
        table=table,
        column_types=(T.LONGLONG, T.LONG, T.VARCHAR, T.NEWDECIMAL, T.DATETIME2),
        column_metadata=(0, 0, 64, 12 << 8 | 2, 3),
        nullable=(False, True, True, True, True),
        unsigned=(True, False, False, False, False),
        column_charsets=(None, None, UTF8MB4, None, None),
        column_names=COLUMNS,
        primary_key=(0,),
    )
    return lake_schema(tm)


def rows(first: int, count: int, version: int) -> list[tuple[Any, ...]]:
    base = dt.datetime(2024, 1, 1)
    return [
        (
            Decimal(i),
            i % 1000,
            f"status-{version}",
            Decimal(f"{i % 100000}.{version % 100:02d}"),
            base + dt.timedelta(milliseconds=i),
        )
        for i in range(first, first + count)
    ]


def timed(label: str, action: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    result = action()
    print(f"{label:<48} {time.perf_counter() - started:7.2f} s")
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    n = parser.parse_args().rows
    with tempfile.TemporaryDirectory(prefix="binlake-bench-") as folder:
        settings = SparkSettings(app_name="binlake-bench", warehouse=Path(folder))
        spark = timed("session start (jars cached)", lambda: build_session(settings))
        try:
            run(spark, n)
        finally:
            stop_session(spark)


def run(spark: Any, n: int) -> None:
    schema = orders_schema("orders")
    table = table_name("lake", ["bench"], "orders")
    timed("CREATE TABLE + identifier fields (cold)", lambda: create(spark, table, schema))
    other = table_name("lake", ["bench"], "orders2")
    timed("CREATE TABLE + identifier fields (warm)", lambda: create(spark, other, schema))

    def frame(data: list[tuple[Any, ...]]) -> Any:
        arrow = pa.Table.from_pylist(
            [dict(zip(COLUMNS, r, strict=True)) for r in data], schema.arrow_schema()
        )
        return dataframe_from_arrow(spark, arrow, spark_schema(schema))

    base = timed(f"Arrow -> DataFrame, {n} rows", lambda: frame(rows(0, n, 0)))
    timed(f"append {n} rows with commit properties", lambda: append(base, table, 1))
    for batch, label in ((2, "cold"), (3, "warm")):
        view = f"changes_{batch}"
        changes = rows(n // 2, n, batch)  # ids n/2..3n/2: half exist (deleted or updated)
        frame(changes).createOrReplaceTempView(view)
        delete_below = n // 4
        statement = (
            f"MERGE INTO {table} t USING {view} s ON t.id = s.id "
            f"WHEN MATCHED AND s.id < {n // 2 + delete_below} THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        )
        timed(
            f"MERGE {n} change rows with properties ({label})",
            lambda s=statement, b=batch: execute_with_commit_properties(spark, s, props(b)),
        )
    summary = timed("latest_binlake_summary", lambda: latest_binlake_summary(spark, table))
    print(f"newest binlake summary: {summary}")


def create(spark: Any, table: str, schema: LakeSchema) -> None:
    for statement in create_table_statements(table, schema):
        spark.sql(statement)


def append(frame: Any, table: str, batch: int) -> None:
    append_with_commit_properties(frame, table, props(batch))


def props(batch: int) -> dict[str, str]:
    return {"binlake.position": f"mariadb-bin.000001:{batch * 1000}", "binlake.batch": str(batch)}


if __name__ == "__main__":
    main()
