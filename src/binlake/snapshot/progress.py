"""A table copy's progress as the console shows it: rows copied, rows per second and the time
left, per table; a live line on a terminal, a log line every ``interval_s`` elsewhere.

Rows count when a chunk's task has written them (before their commit: the commits follow in key
order). The time left is the rows left at the rate so far; the rows left are the planned
estimate less the rows copied, or, once chunks are done, the chunks left times the mean rows of
a done chunk, whichever is larger (InnoDB's row estimate can be far off after a bulk load).
"""

from __future__ import annotations

import time

from binlake.console import Console


class CopyProgress:
    WIDTH = 24

    def __init__(
        self, console: Console, table: str, *, estimated: int, chunks: int, already: int = 0
    ) -> None:
        self.console, self.table = console, table
        self.estimated, self.chunks = estimated, chunks
        self.started = time.monotonic()
        self.already = already
        self.rows = 0
        self.done = 0
        self._shown = 0.0

    def chunk_done(self, rows: int) -> None:
        self.rows += rows
        self.done += 1
        self.show()

    def total(self) -> int:
        """The rows this run is expected to copy in all."""
        left = self.chunks - self.done
        by_chunks = self.rows + (left * self.rows // self.done if self.done else 0)
        return max(self.estimated, self.rows, by_chunks)

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = self.rows / elapsed
        total = self.total()
        left = (total - self.rows) / rate if rate > 0 else 0.0
        return (
            f"{self.already + self.rows:,}/~{self.already + total:,} rows, {rate:,.0f} rows/s, "
            f"ETA {left:,.0f} s ({self.done}/{self.chunks} chunks)"
        )

    def show(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._shown < self.console.interval_s:
            return
        self._shown = now
        if self.console.live:
            total = self.total()
            filled = int(self.WIDTH * self.rows / total) if total else self.WIDTH
            bar = "#" * filled + "." * (self.WIDTH - filled)
            self.console.status(f"snapshot {self.table} [{bar}] {self.line()}")
        else:
            self.console.message("snapshot", f"{self.table}: {self.line()}")

    def close(self) -> None:
        elapsed = time.monotonic() - self.started
        rate = self.rows / max(elapsed, 1e-6)
        self.console.message(
            "snapshot",
            f"{self.table}: {self.already + self.rows:,} rows copied in {elapsed:,.1f} s "
            f"({rate:,.0f} rows/s)",
        )
