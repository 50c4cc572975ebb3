"""The applier's one retry policy: work that failed in a way waiting may cure is done again,
after every table's applied position and schema are read anew from the catalog.

Two failures qualify. Both leave each table either with the whole of its commit or without it,
but which one is known only from the table:

* the catalog failed (``CatalogUnreachableError``, ``CatalogCommitUnknownError``: its database
  stopped, restarted, or the network between dropped; a commit whose answer was lost may have
  landed): the catalog is probed with backoff until it answers; after ``[applier]
  catalog_give_up_s`` without an answer the last error is raised;
* another writer committed to a table first (``CommitConflictError``: Iceberg's optimistic
  concurrency; a maintenance job, an ``ALTER TABLE``, an analyst's ``DELETE``, a compaction):
  the failed commit changed nothing; after a backoff wait the work is planned again against
  the table's new metadata; after ``[applier] commit_retries`` conflicts in a row the conflict
  is raised (``CommitConflictError`` with ``attempts``).

``Retry.run(work, reload)`` is the loop, for a batch (``apply.lake_writes``); the snapshot copies
replicate runs in their own thread follow the same rule (``binlake.snapshot.runner``,
``waits_out``: they resume from their committed chunks after the backoff). One backoff (the
``[receiver] reconnect_*`` policy), then ``reload()`` (``Lake.reload``: the one place positions
are read again), then ``work()`` again, each table skipping by position what it already holds:
the rule a restart follows, so a retry is as safe as a restart. ``retries`` is how many times
the current work was tried again (``Lake.retries``: the commit that goes through carries it as
``binlake.retries``, counted by `binlake status`); each conflict retry is told to
``on_conflict`` (the console line and the ``binlake_commit_retries_total`` metric).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from binlake.console import Console
from binlake.errors import BinlakeError, CatalogError, CommitConflictError
from binlake.source.policy import Backoff

T = TypeVar("T")
#: Longest single sleep, so that a stop request is seen quickly.
_TICK_S = 0.2
#: Told each conflict retry: the conflict, the retry's number (1 = the first), the wait.
OnConflict = Callable[[CommitConflictError, int, float], None]


#: The branches this policy waits out; a retryable error of another branch (the source's, the
#: Spark master's) is left to whoever handles that branch.
LAKE_FAILURES = (CatalogError, CommitConflictError)


def retryable(error: BinlakeError) -> bool:
    """A failure of the lake that waiting may cure: a catalog outage, or another writer's
    commit."""
    return error.retryable and isinstance(error, LAKE_FAILURES)


class Retry:
    def __init__(
        self,
        probe: Callable[[], object],
        backoff: Backoff,
        give_up_s: float,
        console: Console,
        stop: threading.Event,
        *,
        conflicts: int = 10,
        on_conflict: OnConflict | None = None,
    ) -> None:
        self.probe = probe
        self.backoff = backoff
        self.give_up_s = give_up_s
        self.console = console
        self.stop = stop
        #: Conflicts in a row the work may meet before the conflict is raised.
        self.conflicts = conflicts
        self.on_conflict = on_conflict
        #: Times the current work was tried again (0 on its first try).
        self.retries = 0

    def run(self, work: Callable[[], T], reload: Callable[[], None]) -> T | None:
        """``work()`` until it goes through; None when a stop was requested while waiting
        (the work is abandoned: a restart does it again)."""
        self.retries = 0
        conflicts = 0
        self.backoff.reset()
        while True:
            try:
                return work()
            except CommitConflictError as error:
                conflicts += 1
                if conflicts > self.conflicts:
                    raise gave_up(error, conflicts) from error
                if not self.wait_conflict(error, conflicts):
                    return None
            except CatalogError as error:
                if not error.retryable:
                    raise
                if not self.wait(error):
                    return None
            self.retries += 1
            reload()

    def wait_conflict(self, error: CommitConflictError, retry: int) -> bool:
        """One backoff wait after another writer's commit; False when a stop came first."""
        pause = self.backoff.next_wait()
        if self.on_conflict is not None:
            self.on_conflict(error, retry, pause)
        return self._sleep(pause)

    def wait(self, error: CatalogError) -> bool:
        """Back off and probe until the catalog answers (True), or a stop is requested
        (False); ``error`` is raised once ``give_up_s`` passed without an answer."""
        started = time.monotonic()
        failure: BinlakeError = error
        while True:
            elapsed = time.monotonic() - started
            if elapsed >= self.give_up_s:
                raise failure
            pause = min(self.backoff.next_wait(), self.give_up_s - elapsed)
            self.console.message(
                "apply",
                f"catalog failed: {failure}; retrying in {pause:.1f} s "
                f"(gives up {self.give_up_s - elapsed:.0f} s from now)",
            )
            if not self._sleep(pause):
                return False
            try:
                self.probe()
            except BinlakeError as again:
                if not retryable(again):
                    raise
                failure = again
                continue
            self.console.message(
                "apply",
                "catalog answers again; re-reading every table's position before applying again",
            )
            return True

    def _sleep(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while not self.stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(left, _TICK_S))
        return False


def gave_up(error: CommitConflictError, attempts: int) -> CommitConflictError:
    return CommitConflictError(
        f"gave up after {attempts} commits: another writer committed first each time "
        f"({error.reason})",
        hint="find the writer that commits to this table without pause (a maintenance loop?) "
        "and slow it down, or raise [applier] commit_retries; a restart re-applies from the "
        "table's newest binlake snapshot",
        table=error.table,
        statement=error.statement,
        reason=error.reason,
        attempts=attempts,
    )
