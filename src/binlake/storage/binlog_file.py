"""Reading binlog files from disk: events and whole transactions.

``BinlogFileReader`` takes an open binary file object. It maps the file (or reads it, for objects
without a file descriptor) and walks it with the pure ``EventStream``; errors get the file name,
and ``last_good_offset`` says how far the file was valid. ``storage.tail_scan`` builds on it to
judge a file's tail.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Iterator
from typing import BinaryIO

from binlake.binlog.codec import BinlogEvent
from binlake.binlog.constants import IN_USE_FLAG_FILE_OFFSET, MAGIC, EventFlag
from binlake.binlog.errors import BinlogFormatError
from binlake.binlog.format import FormatContext
from binlake.binlog.stream import EventStream
from binlake.binlog.transactions import EventGroup, TransactionGrouper


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


def _size_of(fileobj: BinaryIO, fd: int) -> int:
    if fd >= 0:
        return os.fstat(fd).st_size
    here = fileobj.tell()
    size = fileobj.seek(0, 2)
    fileobj.seek(here)
    return size
