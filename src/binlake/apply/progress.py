"""What an applier run has done, as it goes: the tally (``ApplyResult``, what ``binlake
replicate`` reports at its end), the metrics (``binlake.metrics``) and the status line.

The status line, at most every ``Console.interval_s`` (and once more at a caught-up end): the
rows applied per second since the last line, the lag (seconds since the newest applied commit's
source time while behind, and relay-log bytes durable but not applied) and a running copy's
progress. The lag is also the ``LAG_SECONDS`` and ``LAG_BYTES`` gauges.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from binlake.apply.batch_apply import BatchResult
from binlake.apply.plan import Batch
from binlake.binlog.names import TableName
from binlake.console import MB, Console
from binlake.metrics import (
    BATCH_SECONDS,
    BATCH_TABLES,
    COMMITS,
    LAG_BYTES,
    LAG_SECONDS,
    ROWS_APPLIED,
    TRANSACTIONS_APPLIED,
    Metrics,
)
from binlake.position import RelayPosition, at_or_before
from binlake.relay import INDEX_NAME
from binlake.relay.handoff import RelayState
from binlake.snapshot.copier import TableCopy
from binlake.storage.index import LogIndex


@dataclass
class ApplyResult:
    batches: int = 0
    transactions: int = 0
    row_changes: int = 0
    #: Commits per table.
    commits: Counter[TableName] | None = None
    #: Zero dates written as null, per ``db.table.column``.
    zero_dates: Counter[str] | None = None
    #: Relay files purged.
    purged: int = 0


class ApplyProgress:
    def __init__(
        self,
        console: Console,
        metrics: Metrics,
        relay_dir: Path,
        *,
        copy_status: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.console = console
        self.metrics = metrics
        self.relay_dir = relay_dir
        #: The running copy's progress line, shown beside the status (``SnapshotRunner.status``).
        self.copy_status = copy_status
        self.result = ApplyResult(commits=Counter(), zero_dates=Counter())
        self._applied_relay: RelayPosition | None = None
        self._last_timestamp: int | None = None
        self._status_at = time.monotonic()
        self._status_rows = 0

    @property
    def zero_dates(self) -> Counter[str]:
        """Zero dates written as null, per ``db.table.column`` (counted as rows are converted)."""
        zero_dates = self.result.zero_dates
        assert zero_dates is not None
        return zero_dates

    def on_commit_time(self, applied: BatchResult, seconds: float) -> None:
        """A batch took ``seconds`` to commit its tables: the width and pace metrics."""
        self.metrics.set_gauge(BATCH_TABLES, None, len(applied.committed))
        self.metrics.set_gauge(BATCH_SECONDS, None, seconds)

    def on_batch(self, batch: Batch, applied: BatchResult) -> None:
        """A batch committed: its messages, then the tally and the metrics."""
        for line in applied.messages:
            self.console.message("apply", line)
        out = self.result
        out.batches += 1
        out.transactions += batch.transactions
        rows = sum(applied.committed.values())
        out.row_changes += rows
        assert out.commits is not None
        out.commits.update(dict.fromkeys(applied.committed, 1))
        self.metrics.inc_counter(TRANSACTIONS_APPLIED, None, batch.transactions)
        for table, count in applied.committed.items():
            self.metrics.inc_counter(ROWS_APPLIED, {"table": str(table)}, count)
        self._applied_relay = batch.last.relay
        self._last_timestamp = batch.last.group.events[-1].header.timestamp
        for table, write in applied.writes.items():
            labels = {"table": str(table), "write": write.path.value, "reason": write.reason or ""}
            self.metrics.inc_counter(COMMITS, labels)

    def on_copied(self, copy: TableCopy) -> None:
        zero = sum(copy.zero_dates.values())
        self.zero_dates.update(copy.zero_dates)
        self.console.message(
            "apply",
            f"{copy.table}: copy {copy.outcome} ({copy.rows:,} rows"
            + (f", {zero:,} zero dates written as null" if zero else "")
            + "); it catches up from its copy's position",
        )

    def on_purged(self, files: int) -> None:
        self.result.purged += files

    def report(self, state: RelayState, reading: RelayPosition, *, force: bool = False) -> None:
        """The status line and the lag gauges, when ``interval_s`` has passed (``force``:
        now); ``reading``: where the applier's reading of the relay log stands."""
        now = time.monotonic()
        if not force and now - self._status_at < self.console.interval_s:
            return
        elapsed = max(now - self._status_at, 1e-9)
        rate = (self.result.row_changes - self._status_rows) / elapsed
        self._status_at, self._status_rows = now, self.result.row_changes
        behind = self._behind_bytes(state.durable, reading)
        lag_s = (
            max(0.0, time.time() - self._last_timestamp) if behind and self._last_timestamp else 0.0
        )
        self.metrics.set_gauge(LAG_BYTES, None, behind)
        self.metrics.set_gauge(LAG_SECONDS, None, lag_s)
        copy = self.copy_status()
        self.console.status(
            f"{rate:,.0f} rows/s  lag {lag_s:.1f} s / {behind / MB:.1f} MB  "
            f"({self.result.row_changes:,} row changes, {self.result.transactions:,} "
            f"transactions, {self.result.batches:,} batches)" + (f"  | {copy}" if copy else "")
        )

    def _behind_bytes(self, durable: RelayPosition | None, reading: RelayPosition) -> int:
        """Relay-log bytes durable but not yet applied (before the first batch: from the start
        of the file the reading stands in)."""
        applied = self._applied_relay or RelayPosition(reading.file, 0)
        if durable is None or at_or_before(durable, applied):
            return 0
        if applied.file == durable.file:
            return durable.offset - applied.offset
        names = LogIndex(self.relay_dir / INDEX_NAME).names()
        if applied.file not in names or durable.file not in names:
            return 0
        total = durable.offset - applied.offset
        for name in names[names.index(applied.file) : names.index(durable.file)]:
            try:
                total += (self.relay_dir / name).stat().st_size
            except OSError:
                continue
        return max(total, 0)
