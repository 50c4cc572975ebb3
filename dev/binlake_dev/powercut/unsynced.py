"""One file's data that a power cut would take: what changed since the file's last fsync.

The file is changed in place on the backing folder (reads pass straight through); before a
write or a truncation touches bytes that were durable (below the size at the last fsync), those
bytes are read and kept, once per byte. A cut puts them back and truncates the file to its
synced size, so that the file holds exactly what it held at its last fsync. Bytes appended past
the synced size need nothing kept: the truncation drops them.

The kept bytes live in memory: the pipeline appends (relay files, SQLite's WAL) or writes new
files (the warehouse), and overwrites of durable bytes (SQLite's pages at a checkpoint, a
truncated WAL) are small at test scale. ``held`` says how many bytes are kept.
"""

from __future__ import annotations

import os
from bisect import bisect_right


class UnsyncedData:
    """What one file (an inode) lost since its last fsync, and how to put it back.

    ``fd`` is the file's own read-write descriptor (opened when the first change after an fsync
    arrives, so that the kept bytes can be read whatever the writer's access mode, and the file
    reverted wherever its name is by then); ``synced_size`` its size at the last fsync; ``path``
    its name under the mount when first changed, for reports. ``last_write`` is the newest
    sequential write since the fsync, the candidate for a torn tail: (sequence number of its
    newest request, offset, length). A write request that starts where the previous one ended
    extends it: the kernel splits one write(2) into requests at page boundaries, and appends
    follow each other.
    """

    def __init__(self, fd: int, synced_size: int, path: str) -> None:
        self.fd = fd
        self.synced_size = synced_size
        self.path = path
        self.last_write: tuple[int, int, int] | None = None
        self.held = 0
        # Kept durable bytes: sorted, non-overlapping ranges (start, bytes), never merged.
        self._starts: list[int] = []
        self._kept: list[bytes] = []

    def before_change(self, start: int, end: int) -> None:
        """Keep the durable bytes of [start, end) that are not kept yet, before they change."""
        end = min(end, self.synced_size)
        if start >= end:
            return
        for gap_start, gap_end in self._gaps(start, end):
            data = os.pread(self.fd, gap_end - gap_start, gap_start)
            if data:
                at = bisect_right(self._starts, gap_start)
                self._starts.insert(at, gap_start)
                self._kept.insert(at, data)
                self.held += len(data)

    def _gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of [start, end) that no kept range covers."""
        gaps: list[tuple[int, int]] = []
        cursor = start
        at = max(bisect_right(self._starts, start) - 1, 0)
        while at < len(self._starts) and self._starts[at] < end:
            kept_start = self._starts[at]
            kept_end = kept_start + len(self._kept[at])
            if kept_start > cursor:
                gaps.append((cursor, kept_start))
            cursor = max(cursor, kept_end)
            at += 1
        if cursor < end:
            gaps.append((cursor, end))
        return gaps

    def wrote(self, sequence: int, offset: int, length: int) -> None:
        """A write request of ``length`` bytes at ``offset`` (the ``sequence``-th) was done."""
        last = self.last_write
        if last is not None and last[1] + last[2] == offset:
            self.last_write = (sequence, last[1], last[2] + length)
        else:
            self.last_write = (sequence, offset, length)

    def revert(self) -> int:
        """Put the file back to its content at the last fsync; the bytes it loses past the
        synced size (appended since)."""
        size = os.fstat(self.fd).st_size
        os.ftruncate(self.fd, self.synced_size)
        for start, data in zip(self._starts, self._kept, strict=True):
            os.pwrite(self.fd, data, start)
        return max(size - self.synced_size, 0)

    def close(self) -> None:
        os.close(self.fd)
