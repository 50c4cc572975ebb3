"""Copies beside streaming: the snapshot runner (``binlake.snapshot.runner``) as the applier sees
it between batches.

At the start, the tables owed a snapshot are planned: all of them on a new state folder (the
relay log was empty), else those left in the plan by a crash or asked for by ``binlake
snapshot``; their copies run one after the other in a thread of their own while the applier
streams the other tables. Between batches the applier asks which copies are done (it then
commits the open batch, releases their tables and opens a new reading: ``apply.reading``) and,
at most every ``REQUEST_CHECK_S``, whether ``binlake snapshot`` asked for tables meanwhile
(their changes are held from then on: ``apply.holds``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from binlake.binlog.names import TableName
from binlake.position import SourcePosition
from binlake.relay.handoff import RelayState
from binlake.snapshot.copier import TableCopy
from binlake.snapshot.runner import SnapshotRunner

#: Seconds between looks for ``binlake snapshot`` requests while streaming.
REQUEST_CHECK_S = 1.0


class StreamingCopies:
    def __init__(
        self, runner: SnapshotRunner, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.runner = runner
        self.clock = clock
        self._requests_checked = 0.0

    def plan(self, state: RelayState, positions: Mapping[TableName, SourcePosition]) -> None:
        """The tables owed a snapshot at the start (``positions``: what the lake holds)."""
        empty_relay = state.restart is not None and state.restart.position is None
        if empty_relay or not positions:  # no position at all: a crash may have come before
            self.runner.plan_initial(positions)  # the plan was written
        self.runner.take_requests()

    def start(self) -> None:
        """Copy the planned tables in the runner's thread (if any, and none runs)."""
        self.runner.start()

    @property
    def busy(self) -> bool:
        """A copy runs, or a table is planned or copied and not yet released."""
        return self.runner.running or bool(self.runner.held())

    def held(self) -> frozenset[TableName]:
        """Tables whose changes streaming must hold (``SnapshotRunner.held``)."""
        return self.runner.held()

    def finished(self) -> list[TableCopy]:
        """Copies done since the last call (the runner's error raised)."""
        return self.runner.finished()

    def release(self, done: list[TableCopy]) -> None:
        """Their tables are applied from their copies' positions from now on."""
        self.runner.release([copy.table for copy in done])

    def requested(self) -> bool:
        """Tables ``binlake snapshot`` asked for since the last look (at most one look every
        ``REQUEST_CHECK_S``), now in the plan."""
        now = self.clock()
        if now - self._requests_checked < REQUEST_CHECK_S:
            return False
        self._requests_checked = now
        return bool(self.runner.take_requests())

    def status(self) -> str | None:
        return self.runner.status()

    def close(self) -> None:
        self.runner.close()
