"""The applier's writes to the lake, each under the one retry policy (``binlake.retry``): a
batch applied to every table it changes (``batch_apply``), the consistent cut after it
(``apply.cuts``), and the cuts that come due between batches.

A write that meets a failing catalog or another writer's commit is done again after the backoff,
once every table's position and schema are read again (``Lake.reload``) and the cut recorder
reads every table again: each table skips by position what it holds, so a commit that landed
before its answer was lost is not applied twice. A stop requested while waiting abandons the
write (None): the batch is read again at the next start.

Batches are numbered here (``binlake.batch`` on every commit): from the newest number in the
lake + 1 at each reading's start, one more per batch (a batch abandoned keeps its number: the
next batch takes the one after).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from binlake.apply.batch_apply import BatchResult
from binlake.apply.cuts import BatchEnd, CutRecorder
from binlake.apply.holds import CopyHolds
from binlake.apply.plan import Batch
from binlake.apply.reading import Reading
from binlake.console import Console
from binlake.errors import CommitConflictError, KeyIndexUntrustedError
from binlake.lake.tables.lake import Lake
from binlake.lake.write.key_positions import Notice
from binlake.metrics import COMMIT_RETRIES, KEY_INDEX_REBUILDS, Metrics
from binlake.retry import OnConflict, Retry

T = TypeVar("T")


class LakeWrites:
    def __init__(self, lake: Lake, cuts: CutRecorder, retry: Retry) -> None:
        self.lake = lake
        self.cuts = cuts
        self.retry = retry
        #: The next batch's number.
        self.next_batch = 1

    def continue_after(self, max_batch: int) -> None:
        """The lake's newest batch is ``max_batch``: number the next batches after it."""
        self.next_batch = max(self.next_batch, max_batch + 1)

    def batch(self, reading: Reading, batch: Batch) -> BatchResult | None:
        """``batch`` applied to the lake's tables, then the cut after it recorded when one is
        due; None: a stop was requested while waiting (see the module docstring)."""
        number = self.next_batch
        self.next_batch += 1

        def apply() -> BatchResult:
            with reading.warehouse_sync.committing():
                return reading.batches.apply(batch, number)

        result = self._retrying(apply)
        if result is None:
            return None
        if batch.transactions and self._cut_after(reading, batch, number, result) is None:
            return None
        return result

    def due_cut(self, holds: CopyHolds, *, now: bool = False) -> None:
        """The cut after the last batch, when ``[cuts] every_s`` has passed since the last
        (``now``: whatever it says, after the run's last batch)."""
        self._retrying(lambda: self.cuts.step(holds, now=now))

    def _cut_after(
        self, reading: Reading, batch: Batch, number: int, result: BatchResult
    ) -> bool | None:
        end = BatchEnd(
            number,
            batch.position,
            batch.last.gtid_state,
            batch.last.group.events[-1].header.timestamp,
        )
        holds = reading.batches.copy_holds

        def record() -> bool:
            self.cuts.after_batch(end, result.committed, ddl=batch.is_ddl, holds=holds)
            return True

        return self._retrying(record)

    def _retrying(self, work: Callable[[], T]) -> T | None:
        """``work()`` under the retry policy; ``Lake.retries`` tells its commits how many times
        it was tried again."""

        def reload() -> None:
            self.cuts.reset()
            self.lake.reload()
            self.lake.retries = self.retry.retries

        try:
            return self.retry.run(work, reload)
        finally:
            self.lake.retries = 0


def commit_retry_notice(console: Console, metrics: Metrics, limit: int) -> OnConflict:
    """What the applier says of each retry after another writer's commit: a console line, and
    the ``binlake_commit_retries_total`` metric."""

    def notice(conflict: CommitConflictError, retry: int, wait_s: float) -> None:
        table = conflict.table or "?"
        metrics.inc_counter(COMMIT_RETRIES, {"table": table}, 1)
        console.message(
            "apply",
            f"{table}: {conflict.reason}; re-planning and committing again in {wait_s:.1f}s "
            f"(retry {retry} of {limit})",
        )

    return notice


def key_index_notice(console: Console, metrics: Metrics) -> Notice:
    """What the applier says of a key index it rebuilds (``binlake.lake.write.key_positions``):
    a console line with the reason, and the ``binlake_key_index_rebuilds_total`` metric."""

    def notice(error: KeyIndexUntrustedError) -> None:
        table = error.table or "?"
        metrics.inc_counter(KEY_INDEX_REBUILDS, {"table": table, "reason": error.reason or ""}, 1)
        console.message("apply", f"{table}: {error.message}")

    return notice
