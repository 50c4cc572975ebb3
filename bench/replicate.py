"""Applier speed: `binlake replicate` against python-mysql-replication + plain Spark appends.

On a sandbox MariaDB, one table ``bench.orders`` (BIGINT key, INT, DECIMAL, VARCHAR, DATETIME):

1. **Sustained rows/s.** A backlog of ``--rows`` inserted rows (transactions of
   ``--rows-per-transaction``, the SEQUENCE engine) plus updates of a fifth of them, then:
   - binlake: ``Replicator(..., until_caught_up=True)`` in this process (receiver thread,
     relay log with grouped fsync, decode, net change per key, one MERGE INTO per batch with the
     position in the same Iceberg commit: exactly once);
   - the reference: python-mysql-replication reading the same binlog (file/position mode) and
     writing the same row images with plain Spark appends (``createDataFrame`` +
     ``writeTo().append()``, batches of ``--reference-batch`` rows): no relay log, no merge, no
     position, no exactly-once.
2. **Lag at a fixed rate.** ``--rate`` rows/s for ``--seconds`` s (transactions of
   ``--rows-per-transaction``), while each replicator runs live. A transaction's lag is the time
   from its commit on the source to the first lake commit holding it (binlake: the first
   snapshot whose ``binlake.position`` is at or past it; the reference: the first append done
   after it read it). Reports p50, p95 and max.

One Spark session (``local[2]``, the embedded Hadoop catalog) serves both. Not a test.

    .venv/bin/python bench/replicate.py [--rows 200000] [--rate 2000] [--seconds 30]
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import HeartbeatLogEvent
from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent
from pyspark.sql import SparkSession
from pyspark.sql import types as st

from binlake.apply.replicate import Replicator
from binlake.config import load_config
from binlake.console import Console
from binlake.lake.iceberg_meta import read_table
from binlake.lake.session import SparkSettings, build_session, stop_session
from binlake_dev.sandbox import MariaDBSandbox

DDL = (
    "CREATE TABLE bench.orders (id BIGINT PRIMARY KEY, customer INT NOT NULL, "
    "amount DECIMAL(10,2) NOT NULL, note VARCHAR(64), updated DATETIME(6) NOT NULL)"
)
INSERT = (
    "INSERT INTO bench.orders SELECT seq, seq % 1000, (seq % 100000) / 100, "
    "REPEAT('x', 40), NOW(6) FROM seq_{first}_to_{last}"
)
UPDATE = "UPDATE bench.orders SET amount = amount + 1, updated = NOW(6) WHERE id BETWEEN %s AND %s"
REFERENCE_SCHEMA = st.StructType(
    [
        st.StructField("id", st.LongType()),
        st.StructField("customer", st.IntegerType()),
        st.StructField("amount", st.DecimalType(10, 2)),
        st.StructField("note", st.StringType()),
        st.StructField("updated", st.TimestampNTZType()),
    ]
)
REFERENCE_TABLE = "lake.bench_reference.orders"


@dataclass
class Source:
    sandbox: MariaDBSandbox
    next_id: int = 1
    #: (commit time, binlog offset after the commit) of the paced workload's transactions.
    commits: list[tuple[float, int]] = field(default_factory=list)

    def transaction(self, cursor: Any, rows: int, update_every: int = 5) -> int:
        """Insert ``rows`` rows (and update a fifth of them) in one transaction; row changes."""
        first, last = self.next_id, self.next_id + rows - 1
        cursor.execute(INSERT.format(first=first, last=last))
        changes = rows
        if update_every:
            cursor.execute(UPDATE, (first, first + rows // update_every - 1))
            changes += rows // update_every
        self.next_id = last + 1
        return changes

    def position(self, cursor: Any) -> tuple[str, int]:
        cursor.execute("SHOW MASTER STATUS")
        file, offset = cursor.fetchone()[:2]
        return str(file), int(offset)


def backlog(source: Source, rows: int, per_transaction: int) -> int:
    changes = 0
    with source.sandbox.connect("bench", autocommit=False) as conn, conn.cursor() as cursor:
        while source.next_id <= rows:
            changes += source.transaction(cursor, per_transaction)
            conn.commit()
    return changes


def paced(source: Source, rate: float, seconds: float, per_transaction: int) -> None:
    """``rate`` rows/s for ``seconds`` s; records each commit's time and binlog offset."""
    interval = per_transaction / rate
    with source.sandbox.connect("bench", autocommit=False) as conn, conn.cursor() as cursor:
        start = time.monotonic()
        n = 0
        while time.monotonic() - start < seconds:
            source.transaction(cursor, per_transaction, update_every=0)
            conn.commit()
            source.commits.append((time.time(), source.position(cursor)[1]))
            n += 1
            time.sleep(max(0.0, start + n * interval - time.monotonic()))


# ---- binlake ----------------------------------------------------------------------------------


def write_config(folder: Path, source: Source, warehouse: Path) -> Path:
    path = folder / "binlake.toml"
    path.write_text(
        f'[source]\nhost = "127.0.0.1"\nport = {source.sandbox.port}\nuser = "root"\n'
        f'server_id = 4242\n[state]\ndir = "{folder / "state"}"\n'
        f'[target]\nwarehouse = "{warehouse}"\n[tables]\ninclude = ["bench.orders"]\n'
        "[applier]\nmax_seconds = 1.0\nmax_transactions = 100000\n"
        "[snapshot]\ninitial = false\n"
    )
    return path


def binlake_throughput(config: Path, spark: SparkSession) -> tuple[float, int]:
    replicator = Replicator(
        load_config(config), until_caught_up=True, spark=spark, console=Console(io.StringIO())
    )
    started = time.monotonic()
    result = replicator.run()
    return time.monotonic() - started, result.applied.row_changes


def binlake_live(config: Path, spark: SparkSession, workload: Callable[[], None]) -> None:
    """Run the replicator live while ``workload`` runs; stop once the lake has it all."""
    loaded = load_config(config)
    replicator = Replicator(loaded, spark=spark, console=Console(io.StringIO()))

    def drive() -> None:
        workload()
        final = source_end(loaded)
        while lake_offset(loaded.target.warehouse) < final:
            time.sleep(0.1)
        replicator.request_stop()

    thread = threading.Thread(target=drive)
    thread.start()
    replicator.run()
    thread.join()


def source_end(config: Any) -> int:
    import pymysql

    connection = pymysql.connect(host="127.0.0.1", port=config.source.port, user="root")
    with connection as conn, conn.cursor() as cursor:
        cursor.execute("SHOW MASTER STATUS")
        return int(cursor.fetchone()[1])


def lake_offset(warehouse: Path) -> int:
    table = read_table(warehouse, ("bench", "orders"))
    snapshots = table.binlake_snapshots if table is not None else ()
    position = snapshots[0].position if snapshots else None
    return position.offset if position is not None else 0


def binlake_commits(warehouse: Path) -> list[tuple[float, int]]:
    """(commit time, source offset) of each binlake snapshot, oldest first."""
    table = read_table(warehouse, ("bench", "orders"))
    assert table is not None
    return [
        (s.timestamp_ms / 1000, s.position.offset)
        for s in reversed(table.binlake_snapshots)
        if s.position is not None
    ]


# ---- the reference ----------------------------------------------------------------------------


def reader(source: Source, start: tuple[str, int], blocking: bool) -> BinLogStreamReader:
    settings = {"host": "127.0.0.1", "port": source.sandbox.port, "user": "root", "passwd": ""}
    return BinLogStreamReader(
        connection_settings=settings,
        server_id=99,
        blocking=blocking,
        resume_stream=True,
        log_file=start[0],
        log_pos=start[1],
        only_events=[WriteRowsEvent, UpdateRowsEvent, HeartbeatLogEvent],
        only_schemas=["bench"],
        slave_heartbeat=0.5 if blocking else None,
    )


def row_of(values: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(values[f.name] for f in REFERENCE_SCHEMA.fields)


def create_reference_table(spark: SparkSession) -> None:
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {REFERENCE_TABLE} (id BIGINT, customer INT, "
        "amount DECIMAL(10,2), note STRING, updated TIMESTAMP_NTZ) USING iceberg"
    )


def reference_throughput(
    source: Source, spark: SparkSession, start: tuple[str, int], batch: int
) -> tuple[float, int]:
    create_reference_table(spark)
    started = time.monotonic()
    stream = reader(source, start, blocking=False)
    rows: list[tuple[Any, ...]] = []
    total = 0
    for event in stream:
        for row in getattr(event, "rows", ()):
            values = row["values"] if isinstance(event, WriteRowsEvent) else row["after_values"]
            rows.append(row_of(values))
        if len(rows) >= batch:
            total += append(spark, rows)
            rows = []
    total += append(spark, rows)
    stream.close()
    return time.monotonic() - started, total


def append(spark: SparkSession, rows: list[tuple[Any, ...]]) -> int:
    if rows:
        spark.createDataFrame(rows, REFERENCE_SCHEMA).writeTo(REFERENCE_TABLE).append()
    return len(rows)


def reference_live(
    source: Source, spark: SparkSession, start: tuple[str, int], workload: Callable[[], None]
) -> list[tuple[float, int]]:
    """Read live, append once a second; (append done time, source offset read) per append."""
    done = threading.Event()
    thread = threading.Thread(target=lambda: (workload(), done.set()))
    thread.start()
    stream = reader(source, start, blocking=True)
    appends: list[tuple[float, int]] = []
    rows: list[tuple[Any, ...]] = []
    last = time.monotonic()
    final: int | None = None
    for event in stream:  # heartbeats wake the loop up when the source is quiet
        if isinstance(event, WriteRowsEvent):
            rows += [row_of(r["values"]) for r in event.rows]
        if done.is_set() and final is None:
            final = source.commits[-1][1]
        reached = final is not None and stream.log_pos >= final
        if rows and (time.monotonic() - last >= 1.0 or reached):
            append(spark, rows)
            rows, last = [], time.monotonic()
            appends.append((time.time(), stream.log_pos))
        if reached and not rows:
            break
    stream.close()
    thread.join()
    return appends


# ---- lag ------------------------------------------------------------------------------------


def lags(commits: list[tuple[float, int]], lake: list[tuple[float, int]]) -> list[float]:
    out = []
    for committed, offset in commits:
        holding = [when for when, reached in lake if reached >= offset]
        if holding:
            out.append(max(0.0, min(holding) - committed))
    return out


def describe_lag(name: str, values: list[float], expected: int) -> str:
    if not values:
        return f"{name}: no transaction reached the lake"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return (
        f"{name}: lag p50 {statistics.median(ordered):.2f} s, p95 {p95:.2f} s, max "
        f"{ordered[-1]:.2f} s ({len(values)} of {expected} transactions)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rows-per-transaction", type=int, default=200)
    parser.add_argument("--reference-batch", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=2000.0, help="rows/s for the lag test")
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="binlake-bench-") as tmp:
        run(Path(tmp), args)


def warm_up(spark: SparkSession) -> None:
    """One CREATE, MERGE and append first, so that neither contender pays the JVM's warm-up."""
    spark.sql("CREATE TABLE lake.warmup.t (id BIGINT NOT NULL, v STRING) USING iceberg")
    spark.range(1000).selectExpr("id", "cast(id as string) v").createOrReplaceTempView("w")
    spark.sql("INSERT INTO lake.warmup.t SELECT * FROM w")
    spark.sql(
        "MERGE INTO lake.warmup.t t USING w s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )


def run(folder: Path, args: argparse.Namespace) -> None:
    sandbox = MariaDBSandbox(folder / "mariadb").start()
    spark = build_session(SparkSettings(warehouse=folder / "warehouse"))
    try:
        warm_up(spark)
        sandbox.execute("CREATE DATABASE bench")
        sandbox.execute(DDL)
        source = Source(sandbox)
        with sandbox.connect() as conn, conn.cursor() as cursor:
            start = source.position(cursor)
        changes = backlog(source, args.rows, args.rows_per_transaction)
        print(f"backlog: {changes:,} row changes ({args.rows:,} inserts + updates)")
        config = write_config(folder, source, folder / "warehouse")
        seconds, applied = binlake_throughput(config, spark)
        print(
            f"binlake replicate: {applied:,} row changes in {seconds:.1f} s = "
            f"{applied / seconds:,.0f} rows/s (exactly once, MERGE per batch)"
        )
        seconds, written = reference_throughput(source, spark, start, args.reference_batch)
        print(
            f"python-mysql-replication + Spark appends: {written:,} rows in {seconds:.1f} s = "
            f"{written / seconds:,.0f} rows/s (no exactly-once)"
        )
        lag_test(folder, source, spark, config, args)
    finally:
        stop_session(spark)
        sandbox.stop()


def lag_test(
    folder: Path, source: Source, spark: SparkSession, config: Path, args: argparse.Namespace
) -> None:
    def workload() -> None:
        paced(source, args.rate, args.seconds, args.rows_per_transaction)

    print(f"lag at {args.rate:,.0f} rows/s for {args.seconds:.0f} s:")
    binlake_live(config, spark, workload)
    ours = lags(source.commits, binlake_commits(folder / "warehouse"))
    print("  " + describe_lag("binlake replicate", ours, len(source.commits)))
    with source.sandbox.connect() as conn, conn.cursor() as cursor:
        start = source.position(cursor)
    source.commits.clear()
    appends = reference_live(source, spark, start, workload)
    theirs = lags(source.commits, appends)
    print("  " + describe_lag("python-mysql-replication + appends", theirs, len(source.commits)))


if __name__ == "__main__":
    main()
