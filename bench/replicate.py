"""Applier speed: `binlake replicate` against python-mysql-replication + plain Spark appends,
and what a batch costs as the table grows.

Sections (``--sections``, all by default), each on the same sandbox MariaDB and the same warmed
Spark session (``local[2]``, the embedded Hadoop catalog), every figure printed with the
1-minute load average:

1. ``throughput``: a backlog of ``--rows`` inserted rows into ``bench.orders`` (transactions of
   ``--rows-per-transaction``) plus updates of a fifth of them; binlake
   (``Replicator(..., until_caught_up=True)`` in this process: receiver thread, relay log with
   grouped fsync, decode, net change per key, one commit per table and batch carrying the
   position) against python-mysql-replication reading the same binlog and appending the after
   images (``createDataFrame`` + ``writeTo().append()`` per ``--reference-batch`` rows): no
   relay log, no merge, no position, no exactly-once.
2. ``lag``: ``--rate`` rows/s of inserts for ``--seconds`` s while each replicator runs live; a
   transaction's lag is the time from its commit on the source to the first lake commit holding
   it (binlake: the first snapshot whose ``binlake.position`` is at or past it; the reference:
   the first append done after it read it). p50, p95, max. binlake's workload starts once it
   is streaming (it has applied a first update), so its start is not counted.
3. ``scale``: random-key updates (``--updates`` rows in transactions of ``--update-rows``) into
   ``bench.small`` (``--small-rows``) and ``bench.big`` (``--big-rows``), both preloaded on the
   source and in the lake without the binlog (``_scale.py``), each with ``[applier]
   max_transactions = 50`` and with the default batch bounds: rows/s, batches, seconds per
   batch, and big / small (medians of ``--scale-repeat`` runs per side, the sides
   alternating). Then reads of ``bench.big`` (count, point lookup) and its delete
   files. ``--layouts`` repeats it for partitioned tables (``bucket``: ``bucket(16, id)``,
   ``days``: ``days(ts)``; ``none``, the default, is unpartitioned), each on tables of its own
   (``bench.small_bucket``, ``bench.big_bucket``...). Under ``days`` the small table's rows are
   spread over the days the big one's span (its ``ts`` further apart), so a batch's updates,
   which move rows to today, delete from as many partitions on both sides.
4. ``mixed``: a sustained mixed workload over three tables (``_scale.MixedWorkload``: order
   inserts with three lines each, customer updates at random keys, order updates, deletes of
   random lines and orders; ``--mixed-transactions``), binlake against python-mysql-replication
   appending every row image of the three tables (``_scale.reference_mixed``).
   ``--mixed-received-first``: the backlog received into the relay log first (timed apart), so
   that the timed replicate is the applier alone: what a receiver in a process of its own
   could leave the applier at best.
5. ``lag-big``: ``--big-rate`` rows/s of random-key updates into ``bench.big`` for
   ``--big-seconds`` s (``[applier] max_seconds = --big-max-seconds``), lag p50/p95/max,
   from once binlake is streaming (as in ``lag``).

Not a test. Defaults are the figures docs/benchmarks.md reports (10 M rows: minutes to load);
a quick check of the script: ``--rows 20000 --seconds 5 --big-rows 200000 --small-rows 20000
--updates 5000 --mixed-transactions 100 --big-seconds 5``.

    .venv/bin/python bench/replicate.py [--sections scale,mixed] [...]
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

from _scale import (
    MixedWorkload,
    Paced,
    binlog_reader,
    describe_lag,
    fill_lake,
    fill_source,
    lags,
    lake_commits,
    load_average,
    random_updates,
    reference_mixed,
)
from binlake.apply.progress import ApplyResult
from binlake.apply.replicate import Replicator
from binlake.config import load_config
from binlake.console import Console
from binlake.lake.catalog.metadata import read_table
from binlake.lake.spark.session import SparkSettings, build_session, stop_session
from binlake.source.progress import Progress
from binlake.source.receiver import Receiver
from binlake_dev.sandbox import MariaDBSandbox

SECTIONS = ("throughput", "lag", "scale", "mixed", "lag-big")
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
#: ``[applier]`` of the scale section's bounded run (the issue's measurement).
BOUNDED = "max_transactions = 50\n"


def say(line: str) -> None:
    print(f"{line}  [load {load_average()}]", flush=True)


@dataclass
class Source:
    sandbox: MariaDBSandbox
    next_id: int = 1
    #: (commit time, (binlog file number, offset after the commit)) of paced transactions.
    commits: list[tuple[float, tuple[int, int]]] = field(default_factory=list)

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
    """``rate`` rows/s for ``seconds`` s; records each commit's time and binlog position."""
    interval = per_transaction / rate
    with source.sandbox.connect("bench", autocommit=False) as conn, conn.cursor() as cursor:
        start = time.monotonic()
        n = 0
        while time.monotonic() - start < seconds:
            source.transaction(cursor, per_transaction, update_every=0)
            conn.commit()
            file, offset = source.position(cursor)
            source.commits.append((time.time(), (int(file.rsplit(".", 1)[1]), offset)))
            n += 1
            time.sleep(max(0.0, start + n * interval - time.monotonic()))


# ---- binlake ----------------------------------------------------------------------------------


def write_config(
    folder: Path,
    source: Source,
    warehouse: Path,
    *,
    tables: tuple[str, ...],
    applier: str = "max_seconds = 1.0\nmax_transactions = 100000\n",
    name: str = "binlake.toml",
    layouts: dict[str, str] | None = None,
    maintenance: str = "schedule_s = 0\n",
) -> Path:
    """A config whose state folder is ``folder/state``; ``tables`` of database ``bench``, those
    in ``layouts`` created partitioned by the field it gives them. ``maintenance``: the body of
    ``[maintenance]``; by default no rounds inside ``replicate`` (on by default in binlake):
    these sections measure the batches (bench/maintain.py measures the rounds)."""
    path = folder / name
    include = ", ".join(f'"bench.{t}"' for t in tables)
    partitioned = "".join(
        f'[tables.layout."bench.{table}"]\npartition = ["{field}"]\n'
        for table, field in (layouts or {}).items()
    )
    path.write_text(
        f'[source]\nhost = "127.0.0.1"\nport = {source.sandbox.port}\nuser = "root"\n'
        f'server_id = 4242\n[state]\ndir = "{folder / "state"}"\n'
        f'[target]\nwarehouse = "{warehouse}"\n[tables]\ninclude = [{include}]\n'
        f"[applier]\n{applier}[snapshot]\ninitial = false\n"
        f"[maintenance]\n{maintenance}{partitioned}"
    )
    return path


def replicate(config: Path, spark: SparkSession) -> tuple[float, ApplyResult]:
    """``binlake replicate --until-caught-up`` in this process: seconds, what it applied."""
    replicator = Replicator(
        load_config(config), until_caught_up=True, spark=spark, console=Console(io.StringIO())
    )
    started = time.monotonic()
    result = replicator.run()
    return time.monotonic() - started, result.applied


def receive_all(config: Path) -> float:
    """``binlake receive --until-caught-up`` in this process: seconds."""
    started = time.monotonic()
    Receiver(load_config(config), until_caught_up=True, progress=Progress(io.StringIO())).run()
    return time.monotonic() - started


class Stamped(io.StringIO):
    """A console stream that writes each line to ``path`` with the seconds since it opened
    (``--console``: what the replicator said, when; a stall shows as a gap)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self._out = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed with the run
        self._started = time.monotonic()

    def write(self, text: str) -> int:
        for line in text.splitlines(keepends=True):
            self._out.write(f"{time.monotonic() - self._started:8.1f} {line}")
        self._out.flush()
        return len(text)


def binlake_live(
    config: Path,
    spark: SparkSession,
    workload: Callable[[], None],
    table: str,
    prime: str,
    console_path: str | None = None,
) -> None:
    """Run the replicator live while ``workload`` runs; stop once ``bench.table`` has it all.

    The workload starts once the replicator is streaming: ``prime`` (a statement changing
    ``bench.table``) is run first and the workload waits until the lake holds it, so that the
    lags measure replication, not the replicator's start (bench/recovery.py measures that) or
    its way through an earlier section's binlog, which this state folder skips."""
    loaded = load_config(config)
    stream = Stamped(console_path) if console_path else io.StringIO()
    replicator = Replicator(loaded, spark=spark, console=Console(stream, live=False))
    started = time.monotonic()

    def drive() -> None:
        primed = execute_at_end(loaded, prime)
        while lake_position(loaded.target.warehouse, table) < primed:
            time.sleep(0.1)
        say(f"  binlake replicate streaming {time.monotonic() - started:.1f} s after its start")
        workload()
        final = source_end(loaded)
        while lake_position(loaded.target.warehouse, table) < final:
            time.sleep(0.1)
        replicator.request_stop()

    thread = threading.Thread(target=drive)
    thread.start()
    replicator.run()
    thread.join()


def execute_at_end(config: Any, statement: str) -> tuple[int, int]:
    """Run ``statement`` on the source (autocommit); the binlog's end after it."""
    import pymysql

    connection = pymysql.connect(host="127.0.0.1", port=config.source.port, user="root")
    with connection as conn, conn.cursor() as cursor:
        cursor.execute(statement)
        conn.commit()
    return source_end(config)


def source_end(config: Any) -> tuple[int, int]:
    import pymysql

    connection = pymysql.connect(host="127.0.0.1", port=config.source.port, user="root")
    with connection as conn, conn.cursor() as cursor:
        cursor.execute("SHOW MASTER STATUS")
        file, offset = cursor.fetchone()[:2]
        return int(str(file).rsplit(".", 1)[1]), int(offset)


def lake_position(warehouse: Path, table: str) -> tuple[int, int]:
    commits = lake_commits(warehouse, table) if read_table(warehouse, ("bench", table)) else []
    return commits[-1][1] if commits else (0, 0)


# ---- the reference ----------------------------------------------------------------------------


def reader(source: Source, start: tuple[str, int], blocking: bool) -> BinLogStreamReader:
    events = [WriteRowsEvent, UpdateRowsEvent, HeartbeatLogEvent]
    port = source.sandbox.port
    return binlog_reader(port, start, events, ["orders"], server_id=99, blocking=blocking)


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
) -> list[tuple[float, tuple[int, int]]]:
    """Read live, append once a second; (append done time, source position read) per append."""
    done = threading.Event()
    thread = threading.Thread(target=lambda: (workload(), done.set()))
    thread.start()
    stream = reader(source, start, blocking=True)
    appends: list[tuple[float, tuple[int, int]]] = []
    rows: list[tuple[Any, ...]] = []
    last = time.monotonic()
    final: tuple[int, int] | None = None
    for event in stream:  # heartbeats wake the loop up when the source is quiet
        if isinstance(event, WriteRowsEvent):
            rows += [row_of(r["values"]) for r in event.rows]
        if done.is_set() and final is None:
            final = source.commits[-1][1]
        here = (int(stream.log_file.rsplit(".", 1)[1]), stream.log_pos)
        reached = final is not None and here >= final
        if rows and (time.monotonic() - last >= 1.0 or reached):
            append(spark, rows)
            rows, last = [], time.monotonic()
            appends.append((time.time(), here))
        if reached and not rows:
            break
    stream.close()
    thread.join()
    return appends


# ---- sections ---------------------------------------------------------------------------------


@dataclass
class Run:
    folder: Path
    source: Source
    spark: SparkSession
    args: argparse.Namespace

    @property
    def warehouse(self) -> Path:
        return self.folder / "warehouse"

    def state(self, name: str) -> Path:
        folder = self.folder / name
        folder.mkdir(exist_ok=True)
        return folder


def section_throughput(run: Run) -> None:
    args, source, spark = run.args, run.source, run.spark
    run.source.sandbox.execute(DDL)
    with source.sandbox.connect() as conn, conn.cursor() as cursor:
        start = source.position(cursor)
    changes = backlog(source, args.rows, args.rows_per_transaction)
    say(f"throughput backlog: {changes:,} row changes ({args.rows:,} inserts + updates)")
    config = write_config(run.state("throughput"), source, run.warehouse, tables=("orders",))
    seconds, applied = replicate(config, spark)
    say(
        f"binlake replicate: {applied.row_changes:,} row changes in {seconds:.1f} s = "
        f"{applied.row_changes / seconds:,.0f} rows/s (exactly once, {applied.batches} batches)"
    )
    seconds, written = reference_throughput(source, spark, start, args.reference_batch)
    say(
        f"python-mysql-replication + Spark appends: {written:,} rows in {seconds:.1f} s = "
        f"{written / seconds:,.0f} rows/s (no exactly-once)"
    )


def section_lag(run: Run) -> None:
    args, source, spark = run.args, run.source, run.spark
    config = run.state("throughput") / "binlake.toml"
    if not config.exists():
        section_throughput(run)

    def workload() -> None:
        paced(source, args.rate, args.seconds, args.rows_per_transaction)

    say(f"lag at {args.rate:,.0f} rows/s for {args.seconds:.0f} s:")
    source.commits.clear()
    prime = "UPDATE bench.orders SET customer = customer + 1 WHERE id = 1"
    binlake_live(config, spark, workload, "orders", prime)
    ours = lags(source.commits, lake_commits(run.warehouse, "orders"))
    say("  " + describe_lag("binlake replicate", ours, len(source.commits)))
    with source.sandbox.connect() as conn, conn.cursor() as cursor:
        start = source.position(cursor)
    source.commits.clear()
    appends = reference_live(source, spark, start, workload)
    theirs = lags(source.commits, appends)
    say("  " + describe_lag("python-mysql-replication + appends", theirs, len(source.commits)))


#: ``--layouts``: the partition field of the scale section's tables, by name.
LAYOUTS: dict[str, str | None] = {"none": None, "bucket": "bucket(16, id)", "days": "days(ts)"}


def scale_tables(layout: str) -> tuple[str, str]:
    """The small and the big table of ``layout`` (``small``/``big`` when unpartitioned)."""
    suffix = "" if layout == "none" else f"_{layout}"
    return f"small{suffix}", f"big{suffix}"


def preload_scale(run: Run, layout: str = "none") -> Path:
    """``layout``'s small and big tables on both sides (``_scale.py``); the default config."""
    folder = run.state(f"scale-{layout}")
    config = folder / "binlake.toml"
    if config.exists():
        return config
    args = run.args
    small, big = scale_tables(layout)
    sizes = ((small, args.small_rows), (big, args.big_rows))
    # days(ts): the small table's rows spread over the big one's days, so that a batch of random
    # updates deletes from as many partitions on both sides (like for like).
    apart = {name: _apart(layout, rows, args.big_rows) for name, rows in sizes}
    for name, rows in sizes:
        started = time.monotonic()
        fill_source(run.source.sandbox, name, rows, apart[name])
        say(f"source bench.{name}: {rows:,} rows in {time.monotonic() - started:.1f} s")
    partition = LAYOUTS[layout]
    layouts = {name: partition for name in (small, big)} if partition else {}
    for applier, file in (("", "binlake.toml"), (BOUNDED, "bounded.toml")):
        write_config(folder, run.source, run.warehouse, tables=(small, big), applier=applier,
                     name=file, layouts=layouts)  # fmt: skip
    replicate(config, run.spark)
    for name, rows in sizes:
        started = time.monotonic()
        fill_lake(run.spark, name, rows, apart[name])
        say(f"lake bench.{name}: {rows:,} rows in {time.monotonic() - started:.1f} s")
    return config


def _apart(layout: str, rows: int, big_rows: int) -> int:
    """Seconds between neighbouring rows' ``ts``: 1, or under ``days(ts)`` what spreads
    ``rows`` over the days ``big_rows`` span."""
    return max(1, big_rows // rows) if layout == "days" else 1


def section_scale(run: Run) -> None:
    for layout in run.args.layouts.split(","):
        scale_layout(run, layout.strip())


def scale_layout(run: Run, layout: str) -> None:
    """The scale section on ``layout``'s tables."""
    args = run.args
    defaults = preload_scale(run, layout)
    small_table, big_table = scale_tables(layout)
    shape = f"partitioned by {LAYOUTS[layout]}" if LAYOUTS[layout] else "unpartitioned"
    if _apart(layout, args.small_rows, args.big_rows) > 1:
        days = args.big_rows / 86_400
        shape += f", both tables' rows over the same {days:.0f} days"
    for label, config in (("max_transactions 50", defaults.with_name("bounded.toml")),
                          ("default bounds", defaults)):  # fmt: skip
        rates: dict[str, list[float]] = {small_table: [], big_table: []}
        for _ in range(args.scale_repeat):  # the two sides alternate
            for name, rows in ((small_table, args.small_rows), (big_table, args.big_rows)):
                seed = sum(map(len, rates.values())) + (100 if config == defaults else 0)
                rates[name].append(scale_run(run, config, label, name, rows, seed))
        small = statistics.median(rates[small_table])
        big = statistics.median(rates[big_table])
        say(
            f"scale, {shape}, {label}: rate into {args.big_rows:,} rows / rate into "
            f"{args.small_rows:,} rows (the reference, same run; medians of "
            f"{args.scale_repeat}) = {big / small:.2f}x (goal: 0.8x or more)"
        )
    reads(run, big_table, args.big_rows)


def scale_run(run: Run, config: Path, label: str, name: str, rows: int, seed: int) -> float:
    """Random-key updates into ``bench.name``, then replicated until caught up: rows/s."""
    args = run.args
    changed = random_updates(run.source.sandbox, name, rows, args.updates, args.update_rows, seed)
    seconds, applied = replicate(config, run.spark)
    rate = applied.row_changes / seconds
    per_batch = seconds / max(applied.batches, 1)
    say(
        f"scale, {label}: {changed:,} random-key updates into {rows:,} rows: "
        f"{rate:,.0f} rows/s, {applied.batches} batches, {per_batch:.2f} s per batch"
    )
    return rate


def reads(run: Run, name: str, rows: int) -> None:
    """Warm reads of ``bench.name`` (median of 3) and its delete files."""
    table = f"lake.bench.{name}"
    run.spark.sql(f"REFRESH TABLE {table}")
    queries = {
        "count(*)": f"SELECT count(*) FROM {table}",
        "point lookup": f"SELECT * FROM {table} WHERE id = {rows // 2}",
    }
    for label, query in queries.items():
        run.spark.sql(query).collect()
        times = []
        for _ in range(3):
            started = time.monotonic()
            run.spark.sql(query).collect()
            times.append(time.monotonic() - started)
        say(f"read {table} {label}: {sorted(times)[1]:.2f} s")
    summary = run.spark.sql(
        f"SELECT summary FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).collect()[0]["summary"]
    say(
        f"{table}: {summary.get('total-delete-files')} delete files, "
        f"{summary.get('total-equality-deletes')} equality-delete rows (until compaction)"
    )


def section_mixed(run: Run) -> None:
    args, spark = run.args, run.spark
    # A binlog (so a relay file) of its own: a restart reads again from the start of its
    # checkpoint's relay file (MDEV-181), and the timed run below is such a restart. Without
    # this, after `scale` it would first skip that section's 6,000 transactions (a third of
    # its time), which is the restart's cost (bench/recovery.py), not the workload's.
    run.source.sandbox.execute("FLUSH BINARY LOGS")
    workload = MixedWorkload(run.source.sandbox, customers=args.mixed_customers)
    workload.create()
    workload.run(5)
    tables = ("m_orders", "m_customers", "m_lines")
    config = write_config(run.state("mixed"), run.source, run.warehouse, tables=tables,
                          applier="")  # fmt: skip
    replicate(config, spark)  # the tables exist in the lake; the customers are there
    with run.source.sandbox.connect() as conn, conn.cursor() as cursor:
        start = run.source.position(cursor)
    started = time.monotonic()
    changes = workload.run(args.mixed_transactions)
    say(
        f"mixed backlog: {changes:,} row changes in {args.mixed_transactions:,} transactions "
        f"over 3 tables, written in {time.monotonic() - started:.1f} s"
    )
    if args.mixed_received_first:  # the receiver's share: the relay log filled before
        received = receive_all(config)
        say(f"binlake receive first (not counted below): the backlog in {received:.2f} s")
    seconds, applied = replicate(config, spark)
    ours = applied.row_changes / seconds
    alone = " over a relay log received first" if args.mixed_received_first else ""
    say(
        f"binlake replicate (default bounds){alone}: {applied.row_changes:,} row changes in "
        f"{seconds:.1f} s = {ours:,.0f} rows/s, {applied.batches} batches"
    )
    seconds, written = reference_mixed(run.source.sandbox, spark, start, args.reference_batch)
    theirs = written / seconds
    say(
        f"python-mysql-replication + appends: {written:,} row images in {seconds:.1f} s = "
        f"{theirs:,.0f} rows/s; binlake / reference = {ours / theirs:.2f}x"
    )


def section_lag_big(run: Run) -> None:
    args = run.args
    defaults = preload_scale(run)
    config = write_config(
        defaults.parent,
        run.source,
        run.warehouse,
        tables=("small", "big"),
        applier=f"max_seconds = {args.big_max_seconds}\n",
        name="lag.toml",
    )
    paced = Paced(run.source.sandbox, "big", args.big_rows)

    def workload() -> None:
        paced.run(args.big_rate, args.big_seconds, args.update_rows)

    say(
        f"lag at {args.big_rate:,.0f} rows/s of random-key updates into {args.big_rows:,} rows "
        f"for {args.big_seconds:.0f} s (max_seconds {args.big_max_seconds}):"
    )
    binlake_live(config, run.spark, workload, "big", "UPDATE bench.big SET a = a + 1 WHERE id = 1")
    ours = lags(paced.commits, lake_commits(run.warehouse, "big"))
    say("  " + describe_lag("binlake replicate", ours, len(paced.commits)))
    step = max(1, len(ours) // 12)  # where the worst lags were: at the start, or throughout
    spread = " ".join(f"{max(ours[i : i + step]):.1f}" for i in range(0, len(ours), step))
    say(f"  max lag per twelfth of the transactions, in order: {spread}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rows-per-transaction", type=int, default=200)
    parser.add_argument("--reference-batch", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=2000.0, help="rows/s for the lag test")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--big-rows", type=int, default=10_000_000)
    parser.add_argument("--small-rows", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=50_000)
    parser.add_argument("--update-rows", type=int, default=100, help="rows per transaction")
    parser.add_argument("--scale-repeat", type=int, default=3, help="runs per side in scale")
    parser.add_argument(
        "--layouts", default="none", help=f"scale's table layouts: {', '.join(LAYOUTS)}"
    )
    parser.add_argument("--mixed-transactions", type=int, default=3_000)
    parser.add_argument("--mixed-customers", type=int, default=100_000)
    parser.add_argument(
        "--mixed-received-first",
        action="store_true",
        help="mixed: receive the backlog into the relay log first, then time the applier alone",
    )
    parser.add_argument("--big-rate", type=float, default=5000.0)
    parser.add_argument("--big-seconds", type=float, default=60.0)
    parser.add_argument("--big-max-seconds", type=float, default=0.5)
    args = parser.parse_args()
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    odd = {layout.strip() for layout in args.layouts.split(",")} - set(LAYOUTS)
    if odd:
        parser.error(f"unknown layouts {sorted(odd)}; known: {', '.join(LAYOUTS)}")
    with tempfile.TemporaryDirectory(prefix="binlake-bench-") as tmp:
        run_sections(Path(tmp), args, sections)


def warm_up(spark: SparkSession) -> None:
    """One CREATE, MERGE and append first, so that no contender pays the JVM's warm-up."""
    spark.sql("CREATE TABLE lake.warmup.t (id BIGINT NOT NULL, v STRING) USING iceberg")
    spark.range(1000).selectExpr("id", "cast(id as string) v").createOrReplaceTempView("w")
    spark.sql("INSERT INTO lake.warmup.t SELECT * FROM w")
    spark.sql(
        "MERGE INTO lake.warmup.t t USING w s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )


def run_sections(folder: Path, args: argparse.Namespace, sections: list[str]) -> None:
    sandbox = MariaDBSandbox(folder / "mariadb").start()
    spark = build_session(SparkSettings(warehouse=folder / "warehouse"))
    try:
        warm_up(spark)
        sandbox.execute("CREATE DATABASE bench")
        run = Run(folder, Source(sandbox), spark, args)
        handlers = {
            "throughput": section_throughput,
            "lag": section_lag,
            "scale": section_scale,
            "mixed": section_mixed,
            "lag-big": section_lag_big,
        }
        for name in sections:
            say(f"== {name}")
            handlers[name](run)
    finally:
        stop_session(spark)
        sandbox.stop()


if __name__ == "__main__":
    main()
