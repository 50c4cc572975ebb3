"""Lake health: a table after many binlake commits of mixed updates and deletes, before and after
`binlake maintain`, against the same rows written once by a plain ``createOrReplace``; and a live
`binlake replicate` run with scheduled maintenance on and off.

Sections (``--sections``, both by default), per size in ``--rows`` (comma-separated, e.g.
``100000,10000000``), on a sandbox MariaDB and one warmed Spark session (``local[2]``, the
embedded catalog):

``commits``:

1. ``bench.h<rows>`` preloaded on the source and in the lake without the binlog (``_scale.py``);
2. ``--commits`` source transactions, each updating ``--updates`` random rows, deleting one and
   inserting one, replicated with ``[applier] max_transactions = 1``: one binlake commit
   each (row deltas: data files and equality delete files pile up);
3. measured ("before"): data and delete files, manifests, snapshots, and the warm time (median
   of 3) of ``count(*)``, a point lookup by key and a ``GROUP BY``;
4. `binlake maintain` on the table (``Maintainer``, the default ``[maintenance]`` thresholds but
   ``snapshot_max_age_s = 0``), its steps and seconds, then measured again ("after");
5. the same rows written once (``createOrReplace`` of the table's current rows) and measured
   ("fresh"); the after / fresh ratio per query (the issue's goal: 1.2x or less).

Then the scaling between the largest and the smallest size.

``live`` (``live_size``): ``bench.on<rows>`` and ``bench.off<rows>`` preloaded with the same rows
(``_scale.py``), and their copy written once, ``lake.bench_fresh.live<rows>`` (createOrReplace
of the preloaded rows, made once before both runs: the workload keeps the row count, each
transaction deletes one row and inserts one). Then two runs of ``--minutes`` minutes, first with
maintenance on ``bench.on<rows>``, then without on ``bench.off<rows>``: `binlake replicate` live
(``Replicator`` in this process, bench/replicate.py's ``binlake_live``; ``[applier] max_seconds =
--max-seconds``) while ``_scale.Paced`` commits ``--rate`` rows/s, each transaction updating
``--live-updates`` random keys, deleting one and inserting one. With maintenance: ``[maintenance]
schedule_s = --schedule-s`` and ``snapshot_max_age_s = --snapshot-max-age-s`` (so that expiry
runs; the other thresholds are the defaults); without: ``schedule_s = 0``. Per run:

* every ``--sample-s`` s (back to back when a sample takes longer), on a Spark session of its own
  (``newSession``): the live table's data and delete files, and per query the warm time (one
  run, then the median of 3; a first run over ``SLOW_QUERY_S`` is the time) on the live table /
  the same on the fresh copy, one after the other; a live read is cancelled after
  ``--read-timeout-s`` (its ratio then a lower bound, printed ``>=``) or when the run ends;
* the lag of each source transaction: from its commit to the first lake commit holding it (the
  table's binlake snapshots, read every ``WATCH_S`` s: expiry drops old ones from its metadata);
  p50, p95, max;
* each scheduled maintenance round (the ``Maintainer`` of ``binlake.maintain.schedule``,
  recorded by a subclass put in its place for the run): when, the table's health, its steps with
  Iceberg's counts and seconds; then the rounds' seconds and the bytes their compactions
  rewrote in all;
* per query, the live / fresh ratios over the run: the median, the highest (the issue's goal
  with maintenance on: never above 2x) and how many samples were at or under 2x.

Then the lag p95 with maintenance against without (the reference: the same script run).

Not a test. Every line carries the 1-minute load average. A quick check of the script:
``--rows 2000 --commits 20 --minutes 0.5 --rate 200 --sample-s 5 --schedule-s 10``.

    .venv/bin/python bench/maintain.py [--sections commits,live] [--rows 100000,10000000]
        [--commits 2000] [--minutes 30] [--rate 1000]
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from _scale import (
    Paced,
    churn,
    describe_lag,
    fill_lake,
    fill_source,
    lags,
    lake_commits,
    load_average,
    p95,
)
from binlake.binlog.names import TableName
from binlake.config import load_config
from binlake.console import Console
from binlake.errors import BinlakeError
from binlake.lake.catalog.metadata import read_table
from binlake.lake.spark.session import SparkSettings, build_session, stop_session
from binlake.lake.tables.maintenance import table_health
from binlake.maintain import schedule
from binlake.maintain.runner import Maintainer, StepRun, TableReport
from binlake_dev.sandbox import MariaDBSandbox
from replicate import Run, Source, binlake_live, replicate, warm_up, write_config

SECTIONS = ("commits", "live")
#: ``[maintenance]`` of ``commits``: the default thresholds, but every snapshot older than now
#: expires (the newest 100 and the applied position's stay), and no rounds inside ``replicate``
#: (the section runs ``binlake maintain`` itself).
MAINTENANCE = "schedule_s = 0\nsnapshot_max_age_s = 0\n"
#: Spark's setting for Iceberg's aggregate push-down (``count(*)`` from the manifests when no
#: delete file applies): off in the ``count(*) scan`` reads, on both sides.
PUSH_DOWN = "spark.sql.iceberg.aggregate-push-down.enabled"
#: The read goals of a live run (issue 36): the median live / fresh ratio of the point lookup
#: and the ``GROUP BY`` at most ``MEDIAN_GOAL``, every sample of them and of ``count(*) scan``
#: at most ``SAMPLE_GOAL``.
MEDIAN_GOAL = 1.2
SAMPLE_GOAL = 1.5
#: One source transaction a batch: a binlake commit each (the relay log's opening events make
#: a first batch of their own that commits nothing).
APPLIER = "max_transactions = 1\nmax_seconds = 0.1\n"
#: Seconds between two reads of a live table's binlake snapshots (for the lag).
WATCH_S = 5.0


def say(line: str) -> None:
    print(f"{line}  [load {load_average()}]", flush=True)


def queries(table: str, rows: int) -> dict[str, str]:
    return {
        "count(*)": f"SELECT count(*) FROM {table}",
        "point lookup": f"SELECT * FROM {table} WHERE id = {rows // 2}",
        "GROUP BY": f"SELECT a % 10 AS g, count(*), sum(d) FROM {table} GROUP BY 1",
    }


#: A query whose first (warming) run takes longer than this is timed once more, not 3 times:
#: its time is the work (thousands of delete files), not the warm-up, and 3 runs of a minute
#: each made the unmaintained table's measurement the longest part of the bench.
SLOW_QUERY_S = 10.0


def warm_time(spark: SparkSession, query: str) -> float:
    """Seconds of ``query`` once warm: one run, then the median of 3 (a slow query: 1)."""
    started = time.monotonic()
    spark.sql(query).collect()
    runs = 1 if time.monotonic() - started > SLOW_QUERY_S else 3
    times = []
    for _ in range(runs):
        started = time.monotonic()
        spark.sql(query).collect()
        times.append(time.monotonic() - started)
    return sorted(times)[len(times) // 2]


#: A live read still running after this long is cancelled (its Spark jobs killed) and counted
#: as at least this long: the unmaintained table's reads grow with its commits (their first
#: 4 minutes took a count(*) from 0.9 to 11.6 s at 100,000 rows), and a read of many minutes
#: left running past a run's end held the run until it finished.
READ_TIMEOUT_S = 60.0


def bounded_run(
    spark: SparkSession, query: str, stop: threading.Event, timeout_s: float
) -> float | None:
    """Seconds of one run of ``query``, or None when it was cancelled: after ``timeout_s``
    (``--read-timeout-s``, default ``READ_TIMEOUT_S``), or at once when ``stop`` is set (the
    run is over)."""
    context = spark.sparkContext
    group = f"bench-read-{threading.get_ident()}-{time.monotonic_ns()}"
    context.setJobGroup(group, "bench/maintain.py live read", interruptOnCancel=True)
    done = threading.Event()

    def cancel_when_due() -> None:
        # Again every half second once due: a job the read starts after a cancel (its plan
        # was still being made on the driver) is not cancelled by it.
        deadline = time.monotonic() + timeout_s
        while not done.wait(0.5):
            if stop.is_set() or time.monotonic() > deadline:
                context.cancelJobGroup(group)

    watcher = threading.Thread(target=cancel_when_due, name="bench-read-timeout", daemon=True)
    started = time.monotonic()
    watcher.start()
    try:
        spark.sql(query).collect()
    except Exception:
        if stop.is_set() or time.monotonic() - started >= timeout_s:
            return None
        raise
    finally:
        done.set()
        watcher.join()
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return time.monotonic() - started


def bounded_warm_time(
    spark: SparkSession, query: str, stop: threading.Event, timeout_s: float
) -> float | None:
    """``warm_time`` with each run bounded (``bounded_run``); a first run over
    ``SLOW_QUERY_S`` is the time. None: cancelled."""
    first = bounded_run(spark, query, stop, timeout_s)
    if first is None or first > SLOW_QUERY_S:
        return first
    times = []
    for _ in range(3):
        took = bounded_run(spark, query, stop, timeout_s)
        if took is None:
            return None
        times.append(took)
    return sorted(times)[1]


def measure(spark: SparkSession, table: str, rows: int, label: str) -> dict[str, float]:
    """Files and warm read times (median of 3) of ``table``; the times by query."""
    spark.sql(f"REFRESH TABLE {table}")
    health = table_health(spark, table, 32 * 1024 * 1024)
    say(
        f"{label} {table}: {health.data_files} data files ({health.small_files} small), "
        f"{health.delete_files} delete files (and {health.dangling_deletes} dangling), "
        f"{health.manifests} manifests, "
        f"{health.snapshots} snapshots"
    )
    out = {}
    for name, query in queries(table, rows).items():
        out[name] = warm_time(spark, query)
        say(f"{label} {table} {name}: {out[name]:.3f} s")
    return out


def step_counts(run: StepRun) -> str:
    """Iceberg's non-zero counts of a maintenance step, or 'nothing'."""
    return ", ".join(f"{k} {v:,}" for k, v in run.counts.items() if v) or "nothing"


def mixed_commits(
    sandbox: MariaDBSandbox, name: str, rows: int, commits: int, updates: int
) -> None:
    """``commits`` transactions: ``updates`` random-key updates, one delete, one insert each."""
    rng = random.Random(rows)
    next_id = rows + 1
    with sandbox.connect("bench", autocommit=False) as conn, conn.cursor() as cursor:
        for n in range(commits):
            keys = ", ".join(str(k) for k in rng.sample(range(1, rows + 1), updates))
            cursor.execute(f"UPDATE bench.{name} SET a = a + 1, s = 'u-{n}' WHERE id IN ({keys})")
            churn(cursor, name, rows, rng, next_id)
            next_id += 1
            conn.commit()


def one_size(
    folder: Path, source: Source, spark: SparkSession, rows: int, args: argparse.Namespace
) -> dict[str, dict[str, float]]:
    name = f"h{rows}"
    table = f"lake.bench.{name}"
    state = folder / name
    state.mkdir()
    started = time.monotonic()
    fill_source(source.sandbox, name, rows)
    warehouse = folder / "warehouse"
    config = write_config(
        state, source, warehouse, tables=(name,), applier=APPLIER, maintenance=MAINTENANCE
    )
    replicate(config, spark)
    fill_lake(spark, name, rows)
    say(f"{table}: {rows:,} rows preloaded in {time.monotonic() - started:.1f} s")
    mixed_commits(source.sandbox, name, rows, args.commits, args.updates)
    seconds, applied = replicate(config, spark)
    say(
        f"{table}: {applied.batches} binlake commits ({applied.row_changes:,} row changes) "
        f"in {seconds:.1f} s"
    )
    times = {"before": measure(spark, table, rows, "before")}
    maintainer = Maintainer(load_config(config), spark, Console(io.StringIO(), live=False))
    report = maintainer.maintain(maintainer.tables()[0])
    for run in report.runs:
        say(
            f"maintain {table} {run.planned.step.value}: {step_counts(run)} "
            f"in {run.seconds:.1f} s ({run.planned.reason})"
        )
    times["after"] = measure(spark, table, rows, "after")
    fresh = f"lake.bench_fresh.{name}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench_fresh")
    spark.table(table).writeTo(fresh).using("iceberg").createOrReplace()
    times["fresh"] = measure(spark, fresh, rows, "fresh")
    for query in times["fresh"]:
        ratio = times["after"][query] / max(times["fresh"][query], 1e-9)
        before = times["before"][query] / max(times["fresh"][query], 1e-9)
        say(
            f"{table} {query}: before / fresh {before:.2f}x, after / fresh {ratio:.2f}x "
            "(goal: 1.2x or less)"
        )
    return times


def scaling(results: dict[int, dict[str, dict[str, float]]]) -> None:
    """The largest size's times against the smallest's."""
    sizes = sorted(results)
    small, big = results[sizes[0]], results[sizes[-1]]
    for stage in ("before", "after", "fresh"):
        for query in big[stage]:
            ratio = big[stage][query] / max(small[stage][query], 1e-9)
            say(f"scaling {sizes[-1]:,} / {sizes[0]:,} rows, {stage} {query}: {ratio:.2f}x")


# ---- live: replicate with scheduled maintenance on and off -----------------------------------


def every(seconds: float, stop: threading.Event, work: Callable[[float], None]) -> threading.Thread:
    """A thread calling ``work(seconds since it started)`` every ``seconds`` s (at once when the
    previous call took longer) until ``stop`` is set; a call that fails is reported, the next
    one made all the same (e.g. a read of files an expiry has just removed)."""
    started = time.monotonic()

    def loop() -> None:
        due = seconds
        while not stop.wait(max(0.0, started + due - time.monotonic())):
            at = time.monotonic() - started
            try:
                work(at)
            except Exception as error:
                first = next(iter(str(error).splitlines()), "")
                say(f"  {at:6.0f} s: {type(error).__name__}: {first}")
            due = max(due + seconds, time.monotonic() - started)

    thread = threading.Thread(target=loop, name="bench-every", daemon=True)
    thread.start()
    return thread


@dataclass
class LakeWatch:
    """The binlake commits of ``bench.name`` (time, source position), gathered by polling:
    snapshot expiry takes old ones out of the table's metadata."""

    warehouse: Path
    name: str
    seen: set[tuple[float, tuple[int, int]]] = field(default_factory=set)
    #: Bytes of the files each binlake snapshot added (data and delete files), by snapshot.
    added: dict[int, int] = field(default_factory=dict)

    def poll(self, _at: float = 0.0) -> None:
        self.seen.update(lake_commits(self.warehouse, self.name))
        table = read_table(self.warehouse, ("bench", self.name))
        for snapshot in table.binlake_snapshots if table is not None else ():
            # Iceberg's added-files-size counts the delete files too.
            size = int(snapshot.summary.get("added-files-size", 0))
            self.added.setdefault(snapshot.snapshot_id, size)


@dataclass
class Sampler:
    """Warm read times of the live ``lake.bench.name`` against the fresh copy ``fresh``: the
    queries of ``queries`` on ``spark`` (Iceberg's aggregate push-down on, as a user reads), and
    ``count(*) scan``, the same ``count(*)`` on ``scan`` (push-down off on both sides: both
    tables scanned, like with like)."""

    spark: SparkSession
    scan: SparkSession
    warehouse: Path
    name: str
    fresh: str
    rows: int
    stop: threading.Event
    timeout_s: float
    ratios: dict[str, list[float]] = field(default_factory=dict)

    def reads(self) -> list[tuple[str, SparkSession, str, str]]:
        """(query name, session, live text, fresh text) of each read of a sample."""
        live = queries(f"lake.bench.{self.name}", self.rows)
        fresh = queries(self.fresh, self.rows)
        out = [(query, self.spark, live[query], fresh[query]) for query in live]
        out.append(("count(*) scan", self.scan, live["count(*)"], fresh["count(*)"]))
        return out

    def sample(self, at: float) -> None:
        for session in (self.spark, self.scan):
            for table in (f"lake.bench.{self.name}", self.fresh):
                session.sql(f"REFRESH TABLE {table}")
        files = self.files()
        parts = []
        for query, session, live_text, fresh_text in self.reads():
            live_s = bounded_warm_time(session, live_text, self.stop, self.timeout_s)
            if live_s is None and self.stop.is_set():
                say(f"  {at:6.0f} s, {files}: the run ended during the {query} read")
                return
            fresh_s = warm_time(session, fresh_text)
            # A cancelled read counts as timeout_s long: its ratio is a lower bound (>=).
            ratio = (live_s or self.timeout_s) / max(fresh_s, 1e-9)
            self.ratios.setdefault(query, []).append(ratio)
            took = f"{live_s:.3f}" if live_s is not None else f">= {self.timeout_s:g}"
            bound = "" if live_s is not None else ">= "
            parts.append(f"{query} {took} / {fresh_s:.3f} s = {bound}{ratio:.2f}x")
        say(f"  {at:6.0f} s, {files}; live / fresh: " + ", ".join(parts))

    def files(self) -> str:
        table = read_table(self.warehouse, ("bench", self.name))
        if table is None or not table.lineage:
            return "no snapshot"
        summary = table.lineage[0].summary
        return (
            f"{summary.get('total-data-files', '?')} data files, "
            f"{summary.get('total-delete-files', '?')} delete files, "
            f"{len(table.lineage)} snapshots"
        )


@dataclass
class Rounds:
    """The scheduled maintenance rounds of a run: (seconds since ``started``, seconds taken,
    the table's report or the error)."""

    started: float
    done: list[tuple[float, float, TableReport | str]] = field(default_factory=list)

    @contextmanager
    def recording(self) -> Iterator[None]:
        """``binlake.maintain.schedule`` builds a ``Maintainer`` that records each round."""
        done, started = self.done, self.started

        class Recording(Maintainer):
            def maintain(
                self, table: TableName, *, dry_run: bool = False, orphans_due: bool = True
            ) -> TableReport:
                at = time.monotonic()
                try:
                    report = super().maintain(table, dry_run=dry_run, orphans_due=orphans_due)
                except BinlakeError as error:
                    done.append((at - started, time.monotonic() - at, str(error)))
                    raise
                done.append((at - started, time.monotonic() - at, report))
                return report

        names = vars(schedule)  # the module's globals: the name its rounds build from
        saved, names["Maintainer"] = names["Maintainer"], Recording
        try:
            yield
        finally:
            names["Maintainer"] = saved

    def describe(self) -> None:
        for at, seconds, report in self.done:
            if isinstance(report, str):
                say(f"  maintenance at {at:.0f} s failed after {seconds:.1f} s: {report}")
                continue
            health = report.health
            steps = "; ".join(
                f"{r.planned.step.value} {r.seconds:.1f} s ({step_counts(r)})" for r in report.runs
            )
            say(
                f"  maintenance at {at:.0f} s ({health.data_files} data files, "
                f"{health.delete_files} delete files, {health.snapshots} snapshots): "
                f"{seconds:.1f} s: {steps}"
            )
        longest = max((seconds for _, seconds, _ in self.done), default=0.0)
        total = sum(seconds for _, seconds, _ in self.done)
        rounds = len(self.done)
        say(f"  maintenance: {rounds} rounds, {total:.1f} s in all, the longest {longest:.1f} s")
        by_step: dict[str, list[int]] = {}
        for _, _, report in self.done:
            for run in () if isinstance(report, str) else report.runs:
                rewritten = run.counts.get(schedule.REWRITTEN_BYTES, 0)
                by_step.setdefault(run.planned.step.value, []).append(rewritten)
        for step, rewrites in by_step.items():
            if any(rewrites):
                say(f"  {step}: {len(rewrites)}, {sum(rewrites) / 1e6:,.1f} MB rewritten in all")

    def rewritten_bytes(self) -> int:
        """Bytes every step of every round rewrote (compactions, delete-file merges)."""
        return sum(
            run.counts.get(schedule.REWRITTEN_BYTES, 0)
            for _, _, report in self.done
            if not isinstance(report, str)
            for run in report.runs
        )


def live_config(live: Run, name: str, maintained: bool) -> Path:
    """``bench.name``'s config: ``[maintenance]`` scheduled (``maintained``) or never; with
    ``--defaults``, binlake's own ``[applier]`` and ``[maintenance]`` (rounds on by default)."""
    args = live.args
    if args.defaults:
        applier, maintenance = "", "" if maintained else "schedule_s = 0\n"
    else:
        applier = f"max_seconds = {args.max_seconds}\n"
        maintenance = (
            f"schedule_s = {args.schedule_s}\nsnapshot_max_age_s = {args.snapshot_max_age_s}\n"
            if maintained
            else "schedule_s = 0\n"
        )
    return write_config(
        live.state(name),
        live.source,
        live.warehouse,
        tables=(name,),
        applier=applier,
        maintenance=maintenance,
    )


def preload_live(live: Run, rows: int, fresh: str) -> dict[str, Path]:
    """``bench.on<rows>`` and ``bench.off<rows>`` with the same rows, and ``fresh`` a copy
    written once; the config of each table by name."""
    started = time.monotonic()
    configs = {}
    for name, maintained in ((f"on{rows}", True), (f"off{rows}", False)):
        fill_source(live.source.sandbox, name, rows)
        configs[name] = live_config(live, name, maintained)
        replicate(configs[name], live.spark)
        fill_lake(live.spark, name, rows)
    live.spark.sql("CREATE NAMESPACE IF NOT EXISTS lake.bench_fresh")
    copy = live.spark.table(f"lake.bench.on{rows}").writeTo(fresh).using("iceberg")
    copy.createOrReplace()
    say(
        f"live: bench.on{rows} and bench.off{rows} ({rows:,} rows each) and their copy {fresh} "
        f"preloaded in {time.monotonic() - started:.1f} s"
    )
    return configs


def live_run(
    live: Run, name: str, config: Path, rows: int, fresh: str
) -> tuple[list[float], dict[str, list[float]]]:
    """One live run on ``bench.name``: the lags, the live / fresh ratios of each query's
    samples."""
    args = live.args
    replicate(config, live.spark)  # past the other table's binlog: the run starts caught up
    paced = Paced(live.source.sandbox, name, rows, churn=True)
    watch = LakeWatch(live.warehouse, name)
    stop = threading.Event()
    session, scan = live.spark.newSession(), live.spark.newSession()
    scan.conf.set(PUSH_DOWN, "false")
    sampler = Sampler(session, scan, live.warehouse, name, fresh, rows, stop, args.read_timeout_s)
    rounds = Rounds(time.monotonic())
    threads = [every(args.sample_s, stop, sampler.sample), every(WATCH_S, stop, watch.poll)]

    def workload() -> None:
        try:
            paced.run(args.rate, args.minutes * 60, args.live_updates)
        finally:
            stop.set()

    with rounds.recording():
        # A preloaded row, there at the start.
        prime = f"UPDATE bench.{name} SET a = a + 1 WHERE id = 1"
        binlake_live(config, live.spark, workload, name, prime, args.console)
    for thread in threads:
        thread.join()
    watch.poll()
    changes = len(paced.commits) * (args.live_updates + 2)
    say(f"  {len(paced.commits):,} transactions, {changes / (args.minutes * 60):,.0f} rows/s")
    lag = lags(paced.commits, sorted(watch.seen))
    say("  " + describe_lag("binlake replicate", lag, len(paced.commits)))
    rounds.describe()
    rewrites(rounds.rewritten_bytes(), sum(watch.added.values()), table_bytes(live, fresh), args)
    return lag, sampler.ratios


def table_bytes(live: Run, fresh: str) -> int:
    """The size of the table's rows written once: the fresh copy's data files."""
    table = read_table(live.warehouse, tuple(fresh.split(".")[1:]))
    assert table is not None and table.lineage
    return int(table.lineage[0].summary.get("total-files-size", 0))


def rewrites(rewritten: int, written: int, table: int, args: argparse.Namespace) -> None:
    """The bytes the rounds rewrote per hour against the table's size (the issue's goal: at
    most that) and against what the batches wrote (data and delete files)."""
    hours = args.minutes / 60
    say(
        f"  rewritten by maintenance: {rewritten / 1e6:,.1f} MB, {rewritten / hours / 1e6:,.1f} "
        f"MB an hour = {rewritten / hours / max(table, 1):.2f}x the table's size an hour "
        f"({table / 1e6:,.1f} MB written once; goal: at most 1x); the batches wrote "
        f"{written / 1e6:,.1f} MB ({written / hours / max(table, 1):.2f}x the table an hour): "
        f"{rewritten / max(written, 1):.2f} bytes rewritten per byte written"
    )


#: The goals of each query's live / fresh ratios (median, every sample); None: none (push-down
#: on: ``count(*)`` from the manifests on the fresh table, a scan on a table with deletes).
GOALS: dict[str, tuple[float | None, float | None]] = {
    "count(*)": (None, None),
    "point lookup": (MEDIAN_GOAL, SAMPLE_GOAL),
    "GROUP BY": (MEDIAN_GOAL, SAMPLE_GOAL),
    "count(*) scan": (None, SAMPLE_GOAL),
}


def ratio_summary(query: str, ratios: list[float]) -> str:
    """A query's live / fresh ratios over a run: median, highest, samples at or under 1.5x
    and 2x, against its goals."""
    median, highest = statistics.median(ratios), max(ratios)
    median_goal, sample_goal = GOALS[query]
    met = []
    if median_goal is not None:
        met.append(f"median {'met' if median <= median_goal else 'NOT met'} (<= {median_goal}x)")
    if sample_goal is not None:
        verdict = "met" if highest <= sample_goal else "NOT met"
        met.append(f"every sample {verdict} (<= {sample_goal}x)")
    under = {bound: sum(1 for ratio in ratios if ratio <= bound) for bound in (1.5, 2.0)}
    goals = f"; {', '.join(met)}" if met else "; no goal"
    return (
        f"median {median:.2f}x, highest {highest:.2f}x, {under[1.5]} / {under[2.0]} of "
        f"{len(ratios)} at or under 1.5x / 2x{goals}"
    )


def live_size(live: Run, rows: int) -> None:
    args = live.args
    fresh = f"lake.bench_fresh.live{rows}"
    results = {}
    for name, config in preload_live(live, rows, fresh).items():
        maintained = name.startswith("on")
        if ("on" if maintained else "off") not in args.runs:
            continue
        how = (
            "no maintenance"
            if not maintained
            else "binlake's defaults"
            if args.defaults
            else f"maintenance every {args.schedule_s:g} s"
        )
        say(
            f"live bench.{name}: {args.rate:,.0f} rows/s ({args.live_updates} random-key updates, "
            f"a delete and an insert a transaction) for {args.minutes:g} min, {how}:"
        )
        results[maintained] = live_run(live, name, config, rows, fresh)
    for maintained, (_, samples) in results.items():
        how = "with" if maintained else "without"
        for query, ratios in samples.items():
            say(f"live {rows:,} rows, {how} maintenance, {query}: {ratio_summary(query, ratios)}")
    if len(results) < 2:  # --runs: one of the two
        return
    on, off = (p95(results[m][0]) if results[m][0] else float("nan") for m in (True, False))
    say(
        f"live {rows:,} rows: lag p95 with maintenance {on:.2f} s, without {off:.2f} s (the "
        f"reference, same run): {on / off if off else float('nan'):.2f}x"
    )


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--rows", default="100000", help="table sizes, comma-separated")
    parser.add_argument("--commits", type=int, default=2000, help="binlake commits per table")
    parser.add_argument("--updates", type=int, default=5, help="rows updated per commit")
    parser.add_argument("--minutes", type=float, default=30.0, help="length of a live run")
    parser.add_argument("--console", help="a file for the live replicator's console, stamped")
    parser.add_argument("--rate", type=float, default=1000.0, help="rows/s of a live run")
    parser.add_argument("--live-updates", type=int, default=20, help="updates per transaction")
    parser.add_argument("--sample-s", type=float, default=60.0, help="seconds between reads")
    parser.add_argument("--schedule-s", type=float, default=120.0, help="[maintenance]")
    parser.add_argument("--snapshot-max-age-s", type=float, default=60.0, help="[maintenance]")
    parser.add_argument("--max-seconds", type=float, default=1.0, help="[applier] of live runs")
    parser.add_argument(
        "--read-timeout-s", type=float, default=READ_TIMEOUT_S, help="a live read's bound"
    )
    parser.add_argument("--runs", default="on,off", help="live runs: maintenance on, off")
    parser.add_argument(
        "--defaults",
        action="store_true",
        help="live runs with binlake's own [applier] and [maintenance] (ignores --schedule-s, "
        "--snapshot-max-age-s and --max-seconds)",
    )
    args = parser.parse_args()
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    args.sizes = sorted(int(s) for s in args.rows.split(",") if s.strip())
    args.runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    if not args.runs or set(args.runs) - {"on", "off"}:
        parser.error(f"--runs: 'on', 'off' or both, not {args.runs}")
    return args


def main() -> None:
    args = arguments()
    with tempfile.TemporaryDirectory(prefix="binlake-bench-maintain-") as tmp:
        folder = Path(tmp)
        sandbox = MariaDBSandbox(folder / "mariadb").start()
        spark = build_session(SparkSettings(warehouse=folder / "warehouse"))
        try:
            warm_up(spark)
            sandbox.execute("CREATE DATABASE bench")
            source = Source(sandbox)
            if "commits" in args.sections:
                say("== commits")
                results = {rows: one_size(folder, source, spark, rows, args) for rows in args.sizes}
                if len(results) > 1:
                    scaling(results)
            if "live" in args.sections:
                say("== live")
                for rows in args.sizes:
                    live_size(Run(folder, source, spark, args), rows)
        finally:
            stop_session(spark)
            sandbox.kill()


if __name__ == "__main__":
    main()
