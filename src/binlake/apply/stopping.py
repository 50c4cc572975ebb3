"""When the applier stops, and only ever between batches.

Two ways. A stop is requested (SIGINT/SIGTERM, ``Replicator.request_stop``): the batch being
committed finishes, an open batch is abandoned, never half committed (its transactions are read
again at the next start). Or the run is caught up: the receiver has finished (``--until-caught-up``
reached the source's binlog end as it was at start, or the receiver failed) and the applier has
read the relay log to its durable end, with no copy running or waiting to be caught up; the open
batch is then committed, and the receiver's error, if any, raised.

The request is a ``threading.Event`` because other threads set it and other waits watch it: the
source's reconnects (``source.hints``), the catalog retries (``binlake.retry``) and the
maintenance rounds (``maintain.schedule``) give up their waits once it is set.
"""

from __future__ import annotations

import threading

from binlake.position import RelayPosition, at_or_before
from binlake.relay.handoff import RelayState


class StopPolicy:
    def __init__(self, requested: threading.Event | None = None) -> None:
        #: Set once a stop is requested (from any thread: a signal handler's).
        self.event = requested if requested is not None else threading.Event()

    def request(self) -> None:
        """Stop after the batch being committed."""
        self.event.set()

    @property
    def requested(self) -> bool:
        return self.event.is_set()

    def caught_up(self, state: RelayState, read_to: RelayPosition, *, copying: bool) -> bool:
        """The receiver has finished, the relay log is read to its durable end (``read_to``:
        where the applier's reading stands), and no copy runs or waits (``copying``)."""
        read_all = state.durable is None or at_or_before(state.durable, read_to)
        return state.finished and read_all and not copying
