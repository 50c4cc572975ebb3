"""What the receiver tells its user while it runs: a live line on a terminal, log lines elsewhere.

On a terminal (``isatty``) one status line is redrawn in place a few times a second: events/s,
MB/s, the durable source position and how far behind the source's binlog end it is (the end as
SHOW BINARY LOGS listed it at the last connect; 0 once passed). Otherwise (a log
file, a pipe, systemd) a plain line every ``interval_s`` seconds. Messages (connected, reconnect,
stopped) are whole lines either way. Nothing printed here ever contains a password: the
receiver only passes positions, counts, host names and error messages, and no error message
carries the password (config.Secret).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TextIO

from binlake.position import SourcePosition, sequence_number

TERMINAL_REFRESH_S = 0.25
MB = 1_000_000


@dataclass
class Counters:
    events: int = 0
    bytes: int = 0
    transactions: int = 0


def behind_bytes(position: SourcePosition | None, binlog_files: tuple[tuple[str, int], ...]) -> int:
    """Bytes from ``position`` to the end of the source's binlogs as last listed (never < 0).

    Files are compared by sequence number; a position in a file the list does not have (newer
    than the list) counts as caught up.
    """
    if position is None:
        return sum(size for _name, size in binlog_files)
    mine = sequence_number(position.file) or 0
    behind = 0
    for name, size in binlog_files:
        seq = sequence_number(name) or 0
        if seq > mine:
            behind += size
        elif seq == mine:
            behind += max(0, size - position.offset)
    return behind


class Progress:
    def __init__(
        self, stream: TextIO | None = None, *, interval_s: float = 5.0, live: bool | None = None
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = live if live is not None else _isatty(self.stream)
        self.interval_s = TERMINAL_REFRESH_S if self.live else interval_s
        self.total = Counters()
        self._last_at = time.monotonic()
        self._last = Counters()
        self._line_open = False

    def count(self, events: int, nbytes: int, transactions: int) -> None:
        self.total.events += events
        self.total.bytes += nbytes
        self.total.transactions += transactions

    def due(self, now: float) -> bool:
        return now - self._last_at >= self.interval_s

    def status(self, now: float, position: SourcePosition | None, behind: int) -> None:
        """Report rates since the previous status; call when ``due``."""
        elapsed = max(now - self._last_at, 1e-9)
        events = (self.total.events - self._last.events) / elapsed
        rate = (self.total.bytes - self._last.bytes) / elapsed / MB
        self._last_at = now
        self._last = Counters(self.total.events, self.total.bytes, self.total.transactions)
        where = str(position) if position is not None else "-"
        text = (
            f"{where}  {events:,.0f} events/s  {rate:.1f} MB/s  behind {behind / MB:.1f} MB  "
            f"({self.total.transactions:,} transactions, {self.total.bytes / MB:.1f} MB received)"
        )
        if self.live:
            self.stream.write("\r\x1b[2K" + text)
            self._line_open = True
        else:
            self.stream.write(f"receive: {text}\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        """A whole line (ends a live status line first)."""
        if self._line_open:
            self.stream.write("\n")
            self._line_open = False
        self.stream.write(f"receive: {text}\n")
        self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
