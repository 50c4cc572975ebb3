"""What the receiver tells an applier in the same process: how far the relay log is durable.

``binlake replicate`` runs the receiver in a thread and the applier in the main thread. They
share one ``RelayProgress``:

* the receiver publishes the relay log's end after recovery (``on_recovered``, with the restart
  point it derived), after every group fsync (``on_synced``: a transaction boundary) and after
  every rotation; the applier reads only up to the newest published position, so it never sees
  a partial transaction or a byte a crash could still take away (what a power loss takes
  anyway is fetched again, WL#4621, and skipped per table by position);
* the receiver's thread ends with ``finish`` (its outcome, or the error that ended it);
* ``index_lock`` serializes every change of the relay index: the receiver holds it while it
  recovers the relay log, opens a writer and syncs (a sync may rotate), the applier while it
  purges. The writer owns the index; the applier only borrows it for a purge.

Waiting is a condition variable: ``wait_past(position, timeout)`` returns as soon as something
newer than ``position`` is published or the receiver finished.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from binlake.position import RelayPosition, before
from binlake.relay.restart import RestartPoint


@dataclass(frozen=True)
class RelayState:
    """A snapshot of what the receiver has published."""

    #: The newest durable transaction boundary in the relay log (None: nothing yet).
    durable: RelayPosition | None
    #: The restart point recovery derived at the receiver's start (None: not recovered yet).
    restart: RestartPoint | None
    #: The receiver's thread has ended (see ``outcome`` and ``error``).
    finished: bool
    #: ``"caught up"`` or ``"stopped"`` when it ended normally.
    outcome: str | None
    error: BaseException | None


class RelayProgress:
    """Thread-safe hand-off of the relay log's durable end from the receiver to the applier."""

    def __init__(self) -> None:
        self.index_lock = threading.RLock()
        self._changed = threading.Condition()
        self._durable: RelayPosition | None = None
        self._restart: RestartPoint | None = None
        self._finished = False
        self._outcome: str | None = None
        self._error: BaseException | None = None

    # ---- the receiver's side -----------------------------------------------------------------

    def on_recovered(self, restart: RestartPoint, end: RelayPosition | None) -> None:
        """Recovery ran: the relay log ends at ``end`` (a transaction boundary)."""
        with self._changed:
            if self._restart is None:
                self._restart = restart
            self._advance(end)
            self._changed.notify_all()

    def on_synced(self, position: RelayPosition) -> None:
        """Everything up to ``position`` (a transaction boundary) is durable."""
        with self._changed:
            self._advance(position)

    def finish(self, outcome: str | None = None, error: BaseException | None = None) -> None:
        with self._changed:
            self._finished = True
            self._outcome = outcome
            self._error = error
            self._changed.notify_all()

    def _advance(self, position: RelayPosition | None) -> None:
        if position is None:
            return
        if before(self._durable, position):
            self._durable = position
            self._changed.notify_all()

    # ---- the applier's side ------------------------------------------------------------------

    def state(self) -> RelayState:
        with self._changed:
            return self._state()

    def _state(self) -> RelayState:
        return RelayState(self._durable, self._restart, self._finished, self._outcome, self._error)

    def wait_past(self, position: RelayPosition | None, timeout: float) -> RelayState:
        """Wait until a position newer than ``position`` is durable, the receiver finished, or
        ``timeout`` seconds passed; return the state then."""

        def ready() -> bool:
            return before(position, self._durable) or self._finished

        with self._changed:
            self._changed.wait_for(ready, timeout)
            return self._state()

    def wait_recovered(self, timeout: float) -> RelayState:
        """Wait until the receiver has recovered the relay log (or finished)."""
        with self._changed:
            self._changed.wait_for(lambda: self._restart is not None or self._finished, timeout)
            return self._state()
