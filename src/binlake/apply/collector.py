"""CPython's cyclic garbage collector, run by the applier between its batches, on a clock.

A batch holds every event, row image and net change it read until its tables commit: at
450,000 row changes, about a million objects. None of them is in a reference cycle; they go by
reference counts when the batch is done. Left to itself, the collector counts their allocations
and, past its thresholds, scans every object it has not frozen, the open batch's again and again
as it grows: 23% of the applier process's time under the GIL on `bench/replicate.py --sections
mixed` (py-spy `--gil --native`: `gc_collect_main`), 5.0 s against 3.9 s for that workload
(docs/benchmarks.md, issue 37's table).

So while an applier runs (``BatchCollector``, a context):

- at its start, what is alive (modules, the Spark session's py4j objects) is frozen
  (``gc.freeze``): no collection scans it;
- the automatic collector is off;
- between batches (``collect_due``, called where the applier holds no batch), one full
  collection once ``every_s`` passed since the last: what was left in a cycle since goes then.
  A collection scans what is alive and not frozen, little between batches (a millisecond on
  the mixed workload), more when the next batch is being read (0.1 s with 3,000 transactions
  read ahead): at most that once per ``every_s``;
- at its end, the collector as it was, and nothing frozen (several appliers of one process, as
  the tests run them, share one pause: the last to end ends it).
"""

from __future__ import annotations

import gc
import threading
import time
from types import TracebackType

#: The least time between two collections (seconds).
COLLECT_EVERY_S = 10.0

_lock = threading.Lock()
#: Appliers of this process running now, and whether the collector was on before the first.
_running = 0
_was_enabled = True


def _pause() -> None:
    global _running, _was_enabled
    with _lock:
        if _running == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
            gc.freeze()
        _running += 1


def _resume() -> None:
    global _running
    with _lock:
        _running -= 1
        if _running == 0:
            gc.unfreeze()
            if _was_enabled:
                gc.enable()


class BatchCollector:
    """The collector of one applier run (see the module docstring)."""

    def __init__(self, every_s: float = COLLECT_EVERY_S) -> None:
        self.every_s = every_s
        self._last = time.monotonic()
        #: Collections run so far.
        self.collections = 0

    def __enter__(self) -> BatchCollector:
        _pause()
        self._last = time.monotonic()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        _resume()

    def collect_due(self) -> None:
        """One full collection when ``every_s`` passed since the last (or the start)."""
        now = time.monotonic()
        if now - self._last < self.every_s:
            return
        gc.collect()
        self.collections += 1
        self._last = time.monotonic()
