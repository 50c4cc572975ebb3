"""Riding out a catalog that fails in the middle of a batch (its database stopped, restarted,
or the network between dropped).

A statement that fails with a retryable catalog error (``CatalogUnreachableError``,
``CatalogCommitUnknownError``) leaves each table either with the whole batch or without it,
but which one is known only from the table: a commit whose answer was lost may have landed.
So the applier never retries blindly: ``CatalogRetry.wait`` backs off (the ``[receiver]
reconnect_*`` policy) and probes the catalog until it answers again, then the applier reads
every table's applied position (and schema) from the catalog again (``Lake.reload``) and
applies the batch again, each table skipping, by position, what it already holds: the same
rule as a restart. After ``[applier] catalog_give_up_s`` without an answer the error is
raised (``binlake replicate`` exits with its hint; nothing is lost, a restart resumes).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from binlake.console import Console
from binlake.errors import BinlakeError, CatalogError
from binlake.source.policy import Backoff

#: Longest single sleep, so that a stop request is seen quickly.
_TICK_S = 0.2


def retryable(error: BinlakeError) -> bool:
    """A catalog failure that waiting may cure."""
    return isinstance(error, CatalogError) and type(error).retryable


class CatalogRetry:
    def __init__(
        self,
        probe: Callable[[], object],
        backoff: Backoff,
        give_up_s: float,
        console: Console,
        stop: threading.Event,
    ) -> None:
        self.probe = probe
        self.backoff = backoff
        self.give_up_s = give_up_s
        self.console = console
        self.stop = stop
        self.retries = 0

    def wait(self, error: CatalogError) -> bool:
        """Back off and probe until the catalog answers (True), or a stop is requested
        (False); ``error`` is raised once ``give_up_s`` passed without an answer."""
        self.retries += 1
        started = time.monotonic()
        self.backoff.reset()
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
                "catalog answers again; re-reading every table's position before applying "
                "the batch again",
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
