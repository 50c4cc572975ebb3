"""Maintenance inside ``binlake replicate`` (``[maintenance] schedule_s``): at the start and every
``schedule_s`` seconds after, between two batches, each table the applier replicates gets what its
health calls for (``Maintainer.maintain``: the thresholds of ``[maintenance]``).

The ``orphans`` step (a listing of the table's folder, whose files become removable only after
``orphan_min_age_s``, at least a day) runs on a table at most once per ``orphans_every_s``: at
the run's first round, then in the first round that far after the last one that ran it. When
it last did is kept in memory for the run only: a restart lists once more, at its first round.

Replication waits while it runs (the open batch stays open; no position moves). A failure is
reported and replication goes on: the next round tries again, and a table's rows never depend
on maintenance.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from binlake.binlog.names import TableName
from binlake.config import Config
from binlake.console import Console
from binlake.errors import BinlakeError
from binlake.lake.session import SparkSession
from binlake.maintain.plan import orphans_due
from binlake.maintain.runner import Maintainer


class ScheduledMaintenance:
    def __init__(
        self, config: Config, spark: SparkSession, console: Console, stop: threading.Event
    ) -> None:
        self.every_s = config.maintenance.schedule_s
        self.console = console
        self._maintainer = Maintainer(config, spark, console, stop=stop) if self.every_s else None
        #: The first round is due at the first chance (the start), then every ``every_s``.
        self._last = -math.inf
        self._config = config.maintenance
        #: When each table's ``orphans`` step last ran (``time.monotonic``), this run only.
        self._orphans_last: dict[TableName, float] = {}
        #: Steps run so far (``compact``, ``expire``...), for the run's report and tests.
        self.steps: list[str] = []

    def due(self, now: float) -> bool:
        return self._maintainer is not None and now - self._last >= self.every_s

    def step(self, tables: Callable[[], list[TableName]]) -> None:
        """A round over ``tables()`` when one is due (else nothing)."""
        now = time.monotonic()
        if not self.due(now) or self._maintainer is None:
            return
        self._last = now
        for table in tables():
            orphans = orphans_due(self._orphans_last.get(table), now, self._config)
            try:
                report = self._maintainer.maintain(table, orphans_due=orphans)
            except BinlakeError as error:
                self.console.message("maintain", f"{table}: {error}; tried again next round")
                continue
            if orphans:  # it ran (a failing step raises): due again in orphans_every_s
                self._orphans_last[table] = now
            for run in report.runs:
                if run.planned.step.value != "orphans" or any(run.counts.values()):
                    self.steps.append(run.planned.step.value)
                    self.console.message(
                        "maintain",
                        f"{table}: {run.planned.step.value} in {run.seconds:.1f} s "
                        f"({run.planned.reason})",
                    )
