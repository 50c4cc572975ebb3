"""Maintenance inside ``binlake replicate`` (``[maintenance] schedule_s``, on by default): every
``schedule_s`` seconds, the first round ``schedule_s`` after the start, each table the applier
replicates gets what its health calls for (``Maintainer.maintain``: the thresholds of
``[maintenance]``). Not at the start: a run that starts behind catches up first, and a run
shorter than ``schedule_s`` (a ``--until-caught-up`` run from cron) never maintains (``binlake
maintain`` does that).

A round runs on a thread of its own (``binlake-maintenance``), beside the batches: replication
never waits for it. Its Spark jobs run in the scheduler pool ``POOL`` (binlake's sessions set
``spark.scheduler.mode = FAIR``), so a core one of its tasks frees goes first to the applier's
statements, which wait at most one task, never a whole compaction. Running beside the applier
is what running beside another ``binlake replicate`` process is (``maintain/runner.py``): no step
changes a row or moves a position, each is one Iceberg commit, and a commit either side lost to
the other is retried from the table's current metadata. A round is due only once the one before
it has ended.

The ``orphans`` step (a listing of the table's folder, whose files become removable only after
``orphan_min_age_s``, at least a day) runs on a table at most once per ``orphans_every_s``: at
the run's first round, then in the first round that far after the last one that ran it. When
it last did is kept in memory for the run only: a restart lists once more, at its first round.

A step's failure is reported and replication goes on: the next round tries again, and a
table's rows never depend on maintenance. Anything else a round raises (a bug) is raised in
the applier's thread at its next ``step`` or at ``close``. ``close`` ends the run's maintenance:
stopping, it cancels the round's Spark jobs (a cancelled step commits nothing); at the end of
a run that caught up, it waits for the round to finish.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable

from binlake.binlog.names import TableName
from binlake.config import Config
from binlake.console import Console
from binlake.errors import BinlakeError
from binlake.lake.spark.session import SparkSession
from binlake.lake.tables.turns import CompactionTurns
from binlake.maintain.plan import orphans_due
from binlake.maintain.runner import Maintainer, TableReport
from binlake.metrics import MAINTENANCE_REWRITTEN_BYTES, MAINTENANCE_STEPS, Metrics
from binlake.storage.expiry_lock import ExpiryLock

#: The count of a step's report that is the bytes it rewrote (compactions, delete merges).
REWRITTEN_BYTES = "rewritten_bytes_count"
#: The Spark scheduler pool a round's jobs run in.
POOL = "binlake-maintenance"
_rounds = itertools.count(1)


class ScheduledMaintenance:
    def __init__(
        self,
        config: Config,
        spark: SparkSession,
        console: Console,
        stop: threading.Event,
        metrics: Metrics | None = None,
        turns: CompactionTurns | None = None,
    ) -> None:
        self.every_s = config.maintenance.schedule_s
        self.console = console
        self.metrics = metrics
        self.spark = spark
        self._stop = stop
        #: Held by a round's expiry step (or another process's, ``binlake maintain``); the
        #: applier's cut recording waits for it (``binlake.apply.cuts.CutRecorder.expiry``).
        self.expiry = ExpiryLock(config.state.dir)
        self._maintainer = (
            Maintainer(config, spark, console, stop=stop, expiry=self.expiry, turns=turns)
            if self.every_s
            else None
        )
        #: The first round is due ``every_s`` after the start, then ``every_s`` after the last.
        self._last = time.monotonic()
        self._config = config.maintenance
        #: When each table's ``orphans`` step last ran (``time.monotonic``), this run only.
        self._orphans_last: dict[TableName, float] = {}
        #: Steps run so far (``compact``, ``expire``...), for the run's report and tests.
        self.steps: list[str] = []
        #: Rounds ended so far (a round's thread counts, the applier's thread reads).
        self.rounds = 0
        #: Bytes the rounds rewrote so far (data and delete files).
        self.rewritten_bytes = 0
        self._thread: threading.Thread | None = None
        self._group = POOL  # the running round's Spark job group (``close`` cancels it)
        self._failure: BaseException | None = None
        #: Set by ``close(cancel=True)``: the round ends at its next table.
        self._stopping = threading.Event()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def due(self, now: float) -> bool:
        return self._maintainer is not None and now - self._last >= self.every_s

    def step(self, tables: Callable[[], list[TableName]]) -> None:
        """Start a round over ``tables()`` on its thread when one is due and none is running
        (else nothing); raises what an earlier round raised that is not a step's failure."""
        self._raise_failure()
        now = time.monotonic()
        if self.running or not self.due(now) or self._stop.is_set():
            return
        self._last = now
        self._group = f"binlake-maintenance-{next(_rounds)}-{uuid.uuid4().hex[:8]}"
        self._thread = threading.Thread(
            target=self._round, args=(tables(), now), name="binlake-maintenance", daemon=True
        )
        self._thread.start()

    def close(self, *, cancel: bool, raise_failure: bool = True) -> None:
        """End the run's maintenance: ``cancel`` (stopping, or the run failing) cancels a
        running round's Spark jobs first; either way the round's thread is waited for. What a
        round raised that is not a step's failure is raised (``raise_failure`` False: written
        to the console, for a run already ending on an error of its own)."""
        thread = self._thread
        if thread is not None:
            if cancel:
                self._stopping.set()
                self.spark.sparkContext.cancelJobGroup(self._group)
            thread.join()
            self._thread = None
        if raise_failure:
            self._raise_failure()
        elif self._failure is not None:
            self.console.message("maintain", f"the last round failed: {self._failure!r}")
            self._failure = None

    def _raise_failure(self) -> None:
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def _round(self, tables: list[TableName], now: float) -> None:
        context = self.spark.sparkContext
        context.setJobGroup(self._group, "binlake maintenance", interruptOnCancel=True)
        context.setLocalProperty("spark.scheduler.pool", POOL)
        try:
            for table in tables:
                if self._stopping.is_set() or self._stop.is_set():
                    return
                self._maintain(table, now)
        except BaseException as failure:
            if self._stopping.is_set() or self._stop.is_set():  # its Spark job cancelled
                self.console.message("maintain", f"round stopped with the run ({failure!r})")
            else:  # a bug: raised in the applier's thread
                self._failure = failure
        finally:
            self.rounds += 1
            context.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]
            context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]

    def _maintain(self, table: TableName, now: float) -> None:
        assert self._maintainer is not None
        orphans = orphans_due(self._orphans_last.get(table), now, self._config)
        try:
            report = self._maintainer.maintain(table, orphans_due=orphans)
        except BinlakeError as error:
            if self._stopping.is_set() or self._stop.is_set():
                self.console.message("maintain", f"{table}: stopped with the run")
            else:
                self.console.message("maintain", f"{table}: {error}; tried again next round")
            return
        if orphans:  # it ran (a failing step raises): due again in orphans_every_s
            self._orphans_last[table] = now
        self._report(table, report)

    def _report(self, table: TableName, report: TableReport) -> None:
        for run in report.runs:
            step = run.planned.step.value
            if step == "orphans" and not any(run.counts.values()):
                continue
            self.steps.append(step)
            rewritten = run.counts.get(REWRITTEN_BYTES, 0)
            self.rewritten_bytes += rewritten
            wrote = f", {rewritten / 1e6:,.1f} MB rewritten" if rewritten else ""
            self.console.message(
                "maintain", f"{table}: {step} in {run.seconds:.1f} s{wrote} ({run.planned.reason})"
            )
            if self.metrics is not None:
                labels = {"table": str(table), "step": step}
                self.metrics.inc_counter(MAINTENANCE_STEPS, labels)
                self.metrics.inc_counter(MAINTENANCE_REWRITTEN_BYTES, labels, rewritten)
