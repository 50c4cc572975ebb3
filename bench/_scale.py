"""The at-scale workloads of bench/replicate.py (not a bench: ``make bench`` runs
``bench/[!_]*.py``): a table preloaded on both sides without the binlog, random-key updates, a
mixed three-table workload with its python-mysql-replication reference, paced updates for lag.

Preloading. A table of N rows is filled on the source with ``sql_log_bin = 0`` (the rows are not
in the binlog: replicating millions of inserts first would measure bulk inserts, and take
minutes), one row is then updated with the binlog on, and ``binlake replicate`` creates the lake
table from that update's TABLE_MAP and commits the row. The other N - 1 rows are appended to the
lake table by Spark from the same formula the source used (an Iceberg snapshot binlake did not
make; binlake's position stays that of its own commit). Source and lake then hold the same rows,
and binlake follows the table from there, exactly as after a snapshot.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent
from pyspark.sql import SparkSession
from pyspark.sql import types as st

from binlake.lake.catalog.metadata import read_table
from binlake_dev.sandbox import MariaDBSandbox

#: The issue's table: a BIGINT key, INT, DECIMAL(10,2), VARCHAR(64), DATETIME(6).
KEYED = (
    "CREATE TABLE bench.{name} (id BIGINT PRIMARY KEY, a INT NOT NULL, "
    "d DECIMAL(10,2) NOT NULL, s VARCHAR(64), ts DATETIME(6) NOT NULL)"
)
FILL = (
    "INSERT INTO bench.{name} SELECT seq, seq % 1000, (seq % 10000000) / 100, "
    "CONCAT('row-', seq), TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq * {apart} SECOND "
    "FROM bench.seq_{first}_to_{last}"
)
#: The same rows as ``FILL``, in Spark (session time zone UTC).
LAKE_FILL = (
    "id",
    "CAST(id % 1000 AS INT) AS a",
    "CAST((id % 10000000) / 100 AS DECIMAL(10,2)) AS d",
    "concat('row-', CAST(id AS STRING)) AS s",
    "CAST(timestamp_seconds(1704067200 + id * {apart}) AS TIMESTAMP_NTZ) AS ts",
)
FILL_CHUNK = 1_000_000


def load_average() -> float:
    import os

    return round(os.getloadavg()[0], 2)


# ---- preloading --------------------------------------------------------------------------------


def fill_source(sandbox: MariaDBSandbox, name: str, rows: int, apart: int = 1) -> None:
    """``bench.name`` with ids 1..rows, not binlogged; then an update of id 1 that is.
    ``apart``: seconds between neighbouring rows' ``ts`` (a small table spread over the days a
    big one spans: as many ``days(ts)`` partitions on both sides)."""
    with sandbox.connect("bench", autocommit=True) as conn, conn.cursor() as cursor:
        cursor.execute(KEYED.format(name=name))
        cursor.execute("SET SESSION sql_log_bin = 0")
        for first in range(1, rows + 1, FILL_CHUNK):
            last = min(rows, first + FILL_CHUNK - 1)
            cursor.execute(FILL.format(name=name, first=first, last=last, apart=apart))
        cursor.execute("SET SESSION sql_log_bin = 1")
        cursor.execute(f"UPDATE bench.{name} SET a = a + 1 WHERE id = 1")


def fill_lake(spark: SparkSession, name: str, rows: int, apart: int = 1) -> None:
    """Append ids 2..rows to ``lake.bench.name`` (binlake made it, with id 1; ``apart`` as
    ``fill_source``'s)."""
    frame = spark.range(2, rows + 1, 1, 4).selectExpr(*(e.format(apart=apart) for e in LAKE_FILL))
    frame.writeTo(f"lake.bench.{name}").append()


# ---- random-key updates ------------------------------------------------------------------------


def random_updates(
    sandbox: MariaDBSandbox, name: str, rows: int, updates: int, per_transaction: int, seed: int
) -> int:
    """``updates`` rows of ``bench.name`` updated at random keys, ``per_transaction`` per
    transaction; the row changes made."""
    rng = random.Random(seed)
    changed = 0
    with sandbox.connect("bench", autocommit=False) as conn, conn.cursor() as cursor:
        for n in range(0, updates, per_transaction):
            keys = rng.sample(range(1, rows + 1), min(per_transaction, updates - n))
            changed += cursor.execute(
                f"UPDATE bench.{name} SET a = a + 1, s = CONCAT('u-', id, '-', {n}), "
                f"ts = NOW(6) WHERE id IN ({', '.join(map(str, keys))})"
            )
            conn.commit()
    return changed


# ---- the mixed workload ------------------------------------------------------------------------

MIXED_DDL = (
    KEYED.format(name="m_orders"),
    "CREATE TABLE bench.m_customers (id BIGINT PRIMARY KEY, name VARCHAR(40) NOT NULL, "
    "balance DECIMAL(12,2) NOT NULL, seen DATETIME(6))",
    "CREATE TABLE bench.m_lines (order_id BIGINT, line INT, sku VARCHAR(20) NOT NULL, "
    "qty INT NOT NULL, price DOUBLE, PRIMARY KEY (order_id, line))",
)
MIXED_SCHEMAS = {
    "m_orders": st.StructType(
        [
            st.StructField("id", st.LongType()),
            st.StructField("a", st.IntegerType()),
            st.StructField("d", st.DecimalType(10, 2)),
            st.StructField("s", st.StringType()),
            st.StructField("ts", st.TimestampNTZType()),
            st.StructField("op", st.StringType()),
        ]
    ),
    "m_customers": st.StructType(
        [
            st.StructField("id", st.LongType()),
            st.StructField("name", st.StringType()),
            st.StructField("balance", st.DecimalType(12, 2)),
            st.StructField("seen", st.TimestampNTZType()),
            st.StructField("op", st.StringType()),
        ]
    ),
    "m_lines": st.StructType(
        [
            st.StructField("order_id", st.LongType()),
            st.StructField("line", st.IntegerType()),
            st.StructField("sku", st.StringType()),
            st.StructField("qty", st.IntegerType()),
            st.StructField("price", st.DoubleType()),
            st.StructField("op", st.StringType()),
        ]
    ),
}


@dataclass
class MixedWorkload:
    """Transactions over three tables: new orders (inserts), their lines (inserts), customer
    updates at random keys, and deletes of random older lines and orders."""

    sandbox: MariaDBSandbox
    seed: int = 13
    customers: int = 100_000
    next_order: int = 1
    lines: list[tuple[int, int]] = field(default_factory=list)
    orders: list[int] = field(default_factory=list)

    def create(self) -> None:
        with self.sandbox.connect("bench", autocommit=True) as conn, conn.cursor() as cursor:
            for ddl in MIXED_DDL:
                cursor.execute(ddl)
            cursor.execute(
                "INSERT INTO bench.m_customers SELECT seq, CONCAT('customer ', seq), seq / 7, "
                f"NULL FROM bench.seq_1_to_{self.customers}"
            )

    def run(self, transactions: int, *, orders_per_transaction: int = 20) -> int:
        """Commit ``transactions`` transactions; the row changes they made."""
        rng = random.Random(self.seed + self.next_order)
        changed = 0
        with self.sandbox.connect("bench", autocommit=False) as conn, conn.cursor() as cursor:
            for _ in range(transactions):
                changed += self._transaction(cursor, rng, orders_per_transaction)
                conn.commit()
        return changed

    def _transaction(self, cursor: Any, rng: random.Random, orders: int) -> int:
        first, last = self.next_order, self.next_order + orders - 1
        self.next_order = last + 1
        changed = cursor.execute(FILL.format(name="m_orders", first=first, last=last, apart=1))
        changed += cursor.execute(
            "INSERT INTO bench.m_lines SELECT o.seq, l.seq, CONCAT('sku-', o.seq, '-', l.seq), "
            f"l.seq, o.seq / 3 FROM bench.seq_{first}_to_{last} o, bench.seq_1_to_3 l"
        )
        self.orders += range(first, last + 1)
        self.lines += [(o, line) for o in range(first, last + 1) for line in (1, 2, 3)]
        keys = rng.sample(range(1, self.customers + 1), orders * 2)
        changed += cursor.execute(
            "UPDATE bench.m_customers SET balance = balance + 1, seen = NOW(6) "
            f"WHERE id IN ({', '.join(map(str, keys))})"
        )
        changed += cursor.execute(
            "UPDATE bench.m_orders SET a = a + 1, s = 'updated' "
            f"WHERE id IN ({', '.join(map(str, rng.sample(self.orders, orders)))})"
        )
        for _ in range(orders // 2):
            if len(self.lines) > orders * 6:
                order, line = self.lines.pop(rng.randrange(len(self.lines)))
                changed += cursor.execute(
                    f"DELETE FROM bench.m_lines WHERE order_id = {order} AND line = {line}"
                )
        if len(self.orders) > orders * 6:
            gone = self.orders.pop(rng.randrange(len(self.orders)))
            changed += cursor.execute(f"DELETE FROM bench.m_orders WHERE id = {gone}")
        return int(changed)


def reference_mixed(
    sandbox: MariaDBSandbox, spark: SparkSession, start: tuple[str, int], batch: int
) -> tuple[float, int]:
    """python-mysql-replication reading the binlog from ``start``, every row image of the
    three tables appended (``createDataFrame`` + ``writeTo().append()`` per ``batch`` rows of a
    table, an ``op`` column saying insert/update/delete): no merge, no position."""
    for table, schema in MIXED_SCHEMAS.items():
        columns = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in schema.fields)
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS lake.bench_reference.{table} ({columns}) USING iceberg"
        )
    events = [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent]
    stream = binlog_reader(sandbox.port, start, events, list(MIXED_SCHEMAS), server_id=98)
    pending: dict[str, list[tuple[Any, ...]]] = {t: [] for t in MIXED_SCHEMAS}
    total = 0
    started = time.monotonic()
    for event in stream:
        table = event.table
        names = [f.name for f in MIXED_SCHEMAS[table].fields[:-1]]
        for op, values in _images(event):
            pending[table].append((*(values[n] for n in names), op))
        if len(pending[table]) >= batch:
            total += _append(spark, table, pending[table])
            pending[table] = []
    for table, rows in pending.items():
        total += _append(spark, table, rows)
    stream.close()
    return time.monotonic() - started, total


def binlog_reader(
    port: int,
    start: tuple[str, int],
    events: list[type],
    tables: list[str],
    *,
    server_id: int,
    blocking: bool = False,
) -> BinLogStreamReader:
    """python-mysql-replication reading ``events`` of ``bench.tables`` from ``start``."""
    return BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": port, "user": "root", "passwd": ""},
        server_id=server_id,
        blocking=blocking,
        resume_stream=True,
        log_file=start[0],
        log_pos=start[1],
        only_events=events,
        only_schemas=["bench"],
        only_tables=tables,
        slave_heartbeat=0.5 if blocking else None,
    )


def _images(event: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    for row in event.rows:
        if isinstance(event, WriteRowsEvent):
            yield "insert", row["values"]
        elif isinstance(event, UpdateRowsEvent):
            yield "update", row["after_values"]
        else:
            yield "delete", row["values"]


def _append(spark: SparkSession, table: str, rows: list[tuple[Any, ...]]) -> int:
    if rows:
        frame = spark.createDataFrame(rows, MIXED_SCHEMAS[table])
        frame.writeTo(f"lake.bench_reference.{table}").append()
    return len(rows)


# ---- paced updates and lag ---------------------------------------------------------------------


@dataclass
class Paced:
    """Random-key updates of ``bench.name`` at ``rate`` rows/s (``churn``: and in each
    transaction a delete of a random key and an insert of a new one); each commit's time and
    binlog position (file sequence, offset) recorded."""

    sandbox: MariaDBSandbox
    name: str
    rows: int
    commits: list[tuple[float, tuple[int, int]]] = field(default_factory=list)
    churn: bool = False
    #: The key of the next row ``churn`` inserts.
    next_id: int = field(init=False)

    def __post_init__(self) -> None:
        self.next_id = self.rows + 1

    def run(self, rate: float, seconds: float, per_transaction: int) -> None:
        rng = random.Random(7)
        interval = (per_transaction + (2 if self.churn else 0)) / rate
        with self.sandbox.connect("bench", autocommit=False) as conn, conn.cursor() as cursor:
            start = time.monotonic()
            n = 0
            while time.monotonic() - start < seconds:
                keys = rng.sample(range(1, self.rows + 1), per_transaction)
                cursor.execute(
                    f"UPDATE bench.{self.name} SET a = a + 1, ts = NOW(6) "
                    f"WHERE id IN ({', '.join(map(str, keys))})"
                )
                if self.churn:
                    churn(cursor, self.name, self.rows, rng, self.next_id)
                    self.next_id += 1
                conn.commit()
                cursor.execute("SHOW MASTER STATUS")
                file, offset = cursor.fetchone()[:2]
                self.commits.append((time.time(), (_sequence(str(file)), int(offset))))
                n += 1
                time.sleep(max(0.0, start + n * interval - time.monotonic()))


def churn(cursor: Any, name: str, rows: int, rng: random.Random, new_id: int) -> None:
    """Delete a random row of ``bench.name`` (a key up to ``rows``), insert row ``new_id``."""
    cursor.execute(f"DELETE FROM bench.{name} WHERE id = {rng.randint(1, rows)}")
    cursor.execute(f"INSERT INTO bench.{name} VALUES ({new_id}, 1, 1.00, 'new', NOW(6))")


def _sequence(name: str) -> int:
    return int(name.rsplit(".", 1)[1])


def lake_commits(warehouse: Any, name: str) -> list[tuple[float, tuple[int, int]]]:
    """(commit time, source position) of each binlake snapshot of ``bench.name``."""
    table = read_table(warehouse, ("bench", name))
    assert table is not None
    return [
        (s.timestamp_ms / 1000, (_sequence(s.position.file), s.position.offset))
        for s in reversed(table.binlake_snapshots)
        if s.position is not None
    ]


def lags(
    commits: list[tuple[float, tuple[int, int]]], lake: list[tuple[float, tuple[int, int]]]
) -> list[float]:
    """Per source commit: seconds until the first lake commit at or past its position."""
    ordered = sorted(lake, key=lambda commit: commit[1])
    positions = [reached for _, reached in ordered]
    #: earliest[i]: the first time a lake commit at or past positions[i] was made.
    earliest = list(accumulate(reversed([when for when, _ in ordered]), min))[::-1]
    out = []
    for committed, position in commits:
        first = bisect_left(positions, position)
        if first < len(ordered):
            out.append(max(0.0, earliest[first] - committed))
    return out


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def describe_lag(name: str, values: list[float], expected: int) -> str:
    if not values:
        return f"{name}: no transaction reached the lake"
    ordered = sorted(values)
    return (
        f"{name}: lag p50 {statistics.median(ordered):.2f} s, p95 {p95(ordered):.2f} s, max "
        f"{ordered[-1]:.2f} s ({len(values)} of {expected} transactions)"
    )


def while_running(
    work: Callable[[], None], until: Callable[[], bool], stop: Callable[[], None]
) -> threading.Thread:
    """Run ``work`` in a thread, then wait for ``until()`` and call ``stop()``."""

    def drive() -> None:
        work()
        while not until():
            time.sleep(0.1)
        stop()

    thread = threading.Thread(target=drive, name="bench-workload")
    thread.start()
    return thread
