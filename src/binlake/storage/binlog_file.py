"""Reading binlog files from disk: events, whole transactions, and a verdict on the file's tail.

``BinlogFileReader`` takes an open binary file object. It maps the file (or reads it, for objects
without a file descriptor) and walks it with the pure ``EventStream``; errors get the file name.
``scan()`` reads the whole file once and reports how far it is valid and what stopped it.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from binlake.binlog.codec import BinlogEvent
from binlake.binlog.constants import IN_USE_FLAG_FILE_OFFSET, MAGIC, EventFlag
from binlake.binlog.errors import BinlogFormatError, TruncatedEventError
from binlake.binlog.format import FormatContext
from binlake.binlog.stream import EventStream, ProblemKind, classify_problem
from binlake.binlog.transactions import EventGroup, TransactionGrouper


@dataclass(frozen=True, slots=True)
class Problem:
    kind: ProblemKind
    offset: int
    error: BinlogFormatError

    def describe(self) -> str:
        return f"{self.kind.value} at offset {self.offset}: {self.error.message}"

    @property
    def hint(self) -> str:
        if self.kind is ProblemKind.TORN_TAIL:
            return (
                "a crash left an incomplete tail; `binlake binlog recover DIR` trims the file "
                "to its last complete transaction"
            )
        return (
            f"valid events follow the damage, so this is not a torn write: nothing past offset "
            f"{self.offset} can be trusted; restore the file from a copy or re-fetch it"
        )


@dataclass(frozen=True, slots=True)
class FileScan:
    path: str
    size: int
    events: int
    transactions: int
    #: End of the last whole, valid event.
    last_good_offset: int
    #: End of the last complete group: the longest valid prefix ending at a transaction boundary.
    boundary: int
    in_use: bool
    format: FormatContext | None
    first_gtid: str | None
    last_gtid: str | None
    problem: Problem | None

    @property
    def clean(self) -> bool:
        return self.problem is None


class BinlogFileReader:
    """Events and transactions of one binlog file, read through a file object."""

    def __init__(self, fileobj: BinaryIO, name: str | None = None) -> None:
        self.name = name if name is not None else str(getattr(fileobj, "name", "<binlog>"))
        self._map: mmap.mmap | None = None
        self.buf: bytes | mmap.mmap
        try:
            fd = fileobj.fileno()
        except (OSError, AttributeError, ValueError):
            fd = -1
        size = _size_of(fileobj, fd)
        if fd >= 0 and size > 0:
            self._map = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
            self.buf = self._map
        else:
            fileobj.seek(0)
            self.buf = fileobj.read()
        self.last_good_offset = 0
        self.ctx: FormatContext | None = None

    def close(self) -> None:
        """Unmap the file; if events still view the map, it is unmapped when they are freed."""
        if self._map is not None:
            with contextlib.suppress(BufferError):
                self._map.close()
            self._map = None

    def __enter__(self) -> BinlogFileReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def in_use(self) -> bool:
        if len(self.buf) <= IN_USE_FLAG_FILE_OFFSET or self.buf[: len(MAGIC)] != MAGIC:
            return False
        return bool(self.buf[IN_USE_FLAG_FILE_OFFSET] & EventFlag.BINLOG_IN_USE)

    def events(self, start: int | None = None) -> Iterator[BinlogEvent]:
        """Events from ``start``; raises at the first bad byte with this file's name attached."""
        stream = EventStream(self.buf, start=start)
        try:
            for event in stream:
                self.last_good_offset = stream.last_good_offset
                self.ctx = stream.ctx
                yield event
        except BinlogFormatError as exc:
            self.last_good_offset = stream.last_good_offset
            self.ctx = stream.ctx
            raise exc.with_location(file=self.name) from None

    def groups(self, grouper: TransactionGrouper | None = None) -> Iterator[EventGroup]:
        grouper = grouper if grouper is not None else TransactionGrouper()
        for event in self.events():
            group = grouper.feed(event)
            if group is not None:
                yield group

    def scan(self) -> FileScan:
        grouper = TransactionGrouper()
        counts = {"events": 0, "transactions": 0}
        gtids: list[str] = []
        problem = None
        try:
            for event in self.events():
                counts["events"] += 1
                group = grouper.feed(event)
                if group is not None and group.is_transaction:
                    counts["transactions"] += 1
                    if group.gtid is not None:
                        gtids[min(len(gtids), 1) :] = [group.gtid]
        except BinlogFormatError as exc:
            ctx = self.ctx if self.ctx is not None else FormatContext.default()
            problem = Problem(classify_problem(self.buf, exc, ctx), exc.offset or 0, exc)
        if problem is None and grouper.in_group:
            start = grouper.open_events[0].offset
            error = TruncatedEventError(
                f"the file ends inside a transaction that started at offset {start}",
                file=self.name,
                offset=start,
            )
            problem = Problem(ProblemKind.TORN_TAIL, start, error)
        return self._scan_result(counts, grouper, gtids, problem)

    def _scan_result(
        self,
        counts: dict[str, int],
        grouper: TransactionGrouper,
        gtids: list[str],
        problem: Problem | None,
    ) -> FileScan:
        boundary = grouper.boundary if grouper.boundary is not None else min(4, len(self.buf))
        return FileScan(
            path=self.name,
            size=len(self.buf),
            events=counts["events"],
            transactions=counts["transactions"],
            last_good_offset=self.last_good_offset,
            boundary=boundary,
            in_use=self.in_use,
            format=self.ctx,
            first_gtid=gtids[0] if gtids else None,
            last_gtid=gtids[-1] if gtids else None,
            problem=problem,
        )


def _size_of(fileobj: BinaryIO, fd: int) -> int:
    if fd >= 0:
        return os.fstat(fd).st_size
    here = fileobj.tell()
    size = fileobj.seek(0, 2)
    fileobj.seek(here)
    return size
