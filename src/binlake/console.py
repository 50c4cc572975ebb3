"""What ``binlake replicate`` prints: one live status line on a terminal, log lines elsewhere.

The receiver (its own thread) and the applier share one ``Console``: messages are whole lines
(``receive: ...``, ``apply: ...``) and end the live line first; only the applier draws the live
line (rows/s, lag in seconds and bytes, the receiver's durable position). Writes are serialized
by a lock. Nothing printed here ever holds a password: only positions, counts, table names and
error messages are passed in.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from binlake.errors import SourceError
from binlake.metrics import EVENTS_RECEIVED, Metrics
from binlake.position import SourcePosition
from binlake.source.progress import TERMINAL_REFRESH_S, Progress
from binlake.source.reconnect import Notify

MB = 1_000_000


class Console:
    def __init__(
        self, stream: TextIO | None = None, *, interval_s: float = 5.0, live: bool | None = None
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if live is None:
            try:
                live = self.stream.isatty()
            except (AttributeError, ValueError):
                live = False
        self.live = live
        self.interval_s = TERMINAL_REFRESH_S if live else interval_s
        self._lock = threading.Lock()
        self._line_open = False

    def message(self, who: str, text: str) -> None:
        with self._lock:
            if self._line_open:
                self.stream.write("\n")
                self._line_open = False
            self.stream.write(f"{who}: {text}\n")
            self.stream.flush()

    def status(self, text: str) -> None:
        with self._lock:
            if self.live:
                self.stream.write("\r\x1b[2K" + text)
                self._line_open = True
            else:
                self.stream.write(f"apply: {text}\n")
            self.stream.flush()

    def close(self) -> None:
        with self._lock:
            if self._line_open:
                self.stream.write("\n")
                self.stream.flush()
                self._line_open = False


class ReceiverProgress(Progress):
    """The receiver's ``Progress`` inside ``binlake replicate``: its messages go through the
    shared console; its status lines are logged only off a terminal (the applier's live line
    shows the receiver's position there); events received are counted in the metrics."""

    def __init__(self, console: Console, metrics: Metrics, interval_s: float) -> None:
        super().__init__(console.stream, interval_s=interval_s, live=False)
        self.console = console
        self.metrics = metrics
        self.durable: SourcePosition | None = None

    def count(self, events: int, nbytes: int, transactions: int) -> None:
        super().count(events, nbytes, transactions)
        if events:
            self.metrics.inc_counter(EVENTS_RECEIVED, None, events)

    def status(self, now: float, position: SourcePosition | None, behind: int) -> None:
        self.durable = position
        if self.console.live or self.total.events == self._last.events:
            self._last_at = now  # the applier's line shows it; an idle receiver says nothing
            return
        with self.console._lock:
            super().status(now, position, behind)

    def message(self, text: str) -> None:
        self.console.message("receive", text)


def reconnect_notice(console: Console, who: str, address: str) -> Notify:
    """What a connection to the source says while it waits to reconnect (``source.reconnect``):
    one line per attempt, like the receiver's."""

    def notify(error: SourceError, wait_s: float) -> None:
        console.message(who, f"{error.message}; reconnecting to {address} in {wait_s:.1f}s")

    return notify
