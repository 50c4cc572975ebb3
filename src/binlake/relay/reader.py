"""The applier's reader: whole groups of the relay log, in order, up to a durable boundary.

``RelayReader`` starts at the beginning of one relay file (the recorded checkpoint, MDEV-181)
and reads forward across files in index order. Each ``read(limit)`` returns the complete groups
between where it stands and ``limit`` (the newest durable boundary the receiver published,
relay/handoff.py), each with its source position (the rules of
``binlake.relay.restart.SourceTracker``: the relay files' context preambles and the events'
``end_log_pos``), its GTID state and its relay position. Bytes are read with ``pread`` in
chunks, each parsed once: a group larger than a chunk is carried over to the next one as the
events it has so far (a big transaction is not read again from its start with a larger chunk),
and a file is resumed with the format context saved at the last boundary. A rows event's
``raw`` bytes are not kept (``b""``): its payload holds its images, which is all the applier
reads, and a transaction of a million rows is held once, not twice. A group whose images pass
``hold_bytes`` keeps no rows event (its other events, the TABLE_MAPs among them, it keeps; of a
non-transactional engine's row statement, the rows event that ends it, which closes the
group), and says so (``RelayGroup.aside_context``); ``group_events`` reads the group's events
again from the relay file, whole and CRC32-checked, each time the applier goes through its
rows. So a transaction of any size costs the applier the same memory: a chunk of the relay
file, not a record per row or per event.

Everything before ``limit`` is complete: a file older than the limit's file ends at a group
boundary (rotation happens only there), and the limit itself is a boundary. So a group cut by
``limit``, a bad byte, or a file ending inside a transaction is corruption, never a torn tail
(recovery, which runs before the reader starts, already trimmed the tail).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from binlake.binlog.codec import BinlogEvent
from binlake.binlog.errors import BinlogFormatError, TruncatedEventError
from binlake.binlog.format import FormatContext
from binlake.binlog.rows import RowsEvent
from binlake.binlog.stream import EventStream
from binlake.binlog.transactions import EventGroup, TransactionGrouper
from binlake.config.applier import ApplierConfig
from binlake.errors import LogCorruptionError
from binlake.position import RelayPosition, SourcePosition, at_or_before, before
from binlake.relay import INDEX_NAME
from binlake.relay.restart import OWN_FORMAT_DESCRIPTION_OFFSET, SourceTracker
from binlake.storage.durable import raise_os_error
from binlake.storage.index import LogIndex

CHUNK = 16 * 1024 * 1024
#: Bytes of row images a group may hold before they are left in the relay file: the applier's
#: batch bound by default (the applier passes its configured one).
HOLD_BYTES = ApplierConfig.max_bytes


@dataclass(slots=True)
class _Parse:
    """Where the reader parses a file: the next event's offset, the format context in force,
    and the group in progress (it may span chunks): its row images' bytes held so far, or
    (``aside``) that it holds none."""

    at: int
    ctx: FormatContext | None
    grouper: TransactionGrouper
    held: int = 0
    aside: bool = False


@dataclass(frozen=True, slots=True)
class RelayGroup:
    """One complete group of the relay log (a transaction, a statement or a control event)."""

    group: EventGroup
    relay_file: str
    #: Offset in ``relay_file`` right after the group.
    relay_end: int
    #: The source position right after the group (None before any source context).
    position: SourcePosition | None
    #: The GTID state after the group, as text ("" when unknown).
    gtid_state: str
    #: Bytes the group occupies in the relay log.
    size: int
    #: None: the group holds its rows events, with their images. Else the group was larger
    #: than the reader's ``hold_bytes`` and holds no rows event (but a row statement's last,
    #: which closed it): ``group_events`` reads its
    #: events again from the relay file, in this format context.
    aside_context: FormatContext | None = None

    @property
    def relay(self) -> RelayPosition:
        return RelayPosition(self.relay_file, self.relay_end)


class RelayReader:
    """Reads the relay log in ``relay_dir`` forward from the start of ``start_file``."""

    def __init__(
        self,
        relay_dir: Path,
        start_file: str,
        *,
        index_name: str = INDEX_NAME,
        chunk: int = CHUNK,
        hold_bytes: int = HOLD_BYTES,
    ) -> None:
        self.relay_dir = relay_dir
        self.hold_bytes = hold_bytes
        self._index = LogIndex(relay_dir / index_name)
        self._file = start_file
        self._offset = 0
        self._ctx: FormatContext | None = None
        self._tracker = SourceTracker()
        self._chunk = chunk

    @property
    def position(self) -> RelayPosition:
        """Where the reader stands: the end of the last group read (a boundary)."""
        return RelayPosition(self._file, self._offset)

    @property
    def source_position(self) -> SourcePosition | None:
        return self._tracker.position

    def read(self, limit: RelayPosition) -> Iterator[RelayGroup]:
        """The complete groups up to ``limit``, in order (the reader moves past each one as it
        is yielded)."""
        while True:
            end = self._readable_end(limit)
            if end > self._offset:
                yield from self._read_file(end)
            if self._file == limit.file or at_or_before(limit, self.position):
                return
            if not self._next_file():
                return

    def _readable_end(self, limit: RelayPosition) -> int:
        if limit.file == self._file:
            return limit.offset
        if before(limit, RelayPosition(self._file, 0)):
            return self._offset  # the limit is behind this file: nothing to read
        path = self.relay_dir / self._file
        try:
            return path.stat().st_size  # an older file than the limit's: complete
        except OSError as exc:
            raise_os_error(exc, path, "reading the relay log")

    def _next_file(self) -> bool:
        names = self._index.names()
        if self._file not in names:
            raise LogCorruptionError(
                f"relay file {self._file} left the relay index while the applier read it",
                file=self._file,
                hint="only files older than the recorded checkpoint may be purged; restart "
                "binlake replicate to re-read from the checkpoint",
            )
        here = names.index(self._file)
        if here + 1 >= len(names):
            return False
        self._file, self._offset, self._ctx = names[here + 1], 0, None
        return True

    # ---- one file ---------------------------------------------------------------------------

    def _read_file(self, end: int) -> Iterator[RelayGroup]:
        path = self.relay_dir / self._file
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise_os_error(exc, path, "opening a relay file")
        try:
            chunk = self._chunk
            parse = _Parse(self._offset, self._ctx, TransactionGrouper())
            while parse.at < end:
                data = _pread(fd, min(chunk, end - parse.at), parse.at, path)
                before_chunk = parse.at
                yield from self._groups(data, parse, whole=parse.at + len(data) >= end)
                if parse.at == before_chunk:
                    chunk *= 2  # one event larger than the chunk: read it whole next time
        finally:
            os.close(fd)

    def _groups(self, data: bytes, parse: _Parse, *, whole: bool) -> Iterator[RelayGroup]:
        """The complete groups in ``data`` (read at ``parse.at``, where an event starts); a
        group may have begun in an earlier chunk (``parse.grouper`` holds its events, not the
        chunk: a transaction larger than a chunk is read once, never read again from its
        start). ``parse.at`` moves to the end of the last whole event. ``whole``: ``data``
        reaches the readable end, so a cut event is corruption, not the chunk's edge."""
        base = parse.at
        stream = (
            EventStream(data) if base == 0 else EventStream(data, ctx=parse.ctx, expect_magic=False)
        )
        grouper = parse.grouper
        try:
            for event in stream:
                raw = b"" if type(event.payload) is RowsEvent else event.raw
                if base or not raw:
                    event = BinlogEvent(event.offset + base, event.header, event.payload, raw)
                if isinstance(event.payload, FormatContext):
                    parse.ctx = event.payload
                elif type(event.payload) is RowsEvent:
                    self._hold(event.payload, parse)
                group = grouper.feed(event)
                if group is None and parse.aside and type(event.payload) is RowsEvent:
                    grouper.open_events.pop()  # a set-aside group keeps no rows event
                if group is not None:
                    aside, parse.held, parse.aside = parse.aside, 0, False
                    yield self._relay_group(group, parse.ctx, aside=aside)
        except TruncatedEventError as error:
            if whole:
                raise self._damaged(error, base) from None
        except BinlogFormatError as error:
            raise self._damaged(error, base) from None
        finally:
            parse.at = base + stream.last_good_offset
        if whole and grouper.in_group:
            raise LogCorruptionError(
                "the relay log ends inside a transaction before a durable boundary",
                file=self._file,
                offset=grouper.open_events[0].offset,
                hint="run `binlake binlog recover` on the relay folder while binlake is stopped",
            )

    def _hold(self, payload: RowsEvent, parse: _Parse) -> None:
        """Count a rows event's images into the open group; once they pass ``hold_bytes`` the
        group is set aside: it drops the rows events it holds and keeps no more
        (``group_events`` reads them again)."""
        if parse.aside:
            return
        parse.held += len(payload.rows)
        if parse.held > self.hold_bytes:
            parse.aside = True
            events = parse.grouper.open_events
            events[1:] = [e for e in events[1:] if type(e.payload) is not RowsEvent]

    def _relay_group(
        self, group: EventGroup, ctx: FormatContext | None, *, aside: bool
    ) -> RelayGroup:
        """The reader moves past ``group``; returns it with its positions (``aside``: its
        row images were left in the relay file)."""
        start = self._offset
        self._offset, self._ctx = group.end_offset, ctx
        if group.events[0].offset != OWN_FORMAT_DESCRIPTION_OFFSET:
            self._tracker.on_group(group)
        state = self._tracker.gtid_state
        return RelayGroup(
            group,
            self._file,
            group.end_offset,
            self._tracker.position,
            state.text() if state is not None else "",
            group.end_offset - start,
            (ctx or FormatContext.default()) if aside else None,  # the stream's default
        )

    def _damaged(self, error: BinlogFormatError, base: int) -> LogCorruptionError:
        offset = base + error.offset if error.offset is not None else base  # chunk -> file
        return _corruption(error, self._file, offset, error.event_type)


def _pread(fd: int, size: int, offset: int, path: Path) -> bytes:
    try:
        data = os.pread(fd, size, offset)
    except OSError as exc:
        raise_os_error(exc, path, "reading the relay log")
    if len(data) < size:
        raise LogCorruptionError(
            f"the relay file is shorter ({offset + len(data)} bytes) than its durable end "
            f"({offset + size})",
            file=path.name,
            offset=offset + len(data),
            hint="a relay file lost its tail under a running binlake; restart it",
        )
    return data


def _corruption(
    error: BinlogFormatError, file: str, offset: int, event_type: str | None
) -> LogCorruptionError:
    """A bad event before a durable boundary of the relay log: corruption, never a torn tail."""
    return LogCorruptionError(
        f"the relay log is damaged before a durable boundary: {error.message}",
        file=file,
        offset=offset,
        event_type=event_type,
        hint="run `binlake binlog recover` on the relay folder while binlake is stopped",
    )


def group_events(relay_dir: Path, group: RelayGroup, chunk: int = CHUNK) -> Iterator[BinlogEvent]:
    """The events of ``group`` (set aside: ``aside_context`` is not None) read again from its
    relay file, in order, each whole and CRC32-checked, its rows event's images included (its
    ``raw`` bytes are not kept, as ``RelayReader`` keeps none). ``chunk`` bytes are held at a
    time. A damaged byte is ``LogCorruptionError``."""
    ctx = group.aside_context
    assert ctx is not None, "the group holds its events"
    path = relay_dir / group.relay_file
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise_os_error(exc, path, "opening a relay file")
    try:
        at, end, size = group.group.start_offset, group.relay_end, chunk
        while at < end:
            data = _pread(fd, min(size, end - at), at, path)
            stream = EventStream(data, ctx=ctx, expect_magic=False)
            try:
                for event in stream:
                    raw = b"" if type(event.payload) is RowsEvent else event.raw
                    yield BinlogEvent(event.offset + at, event.header, event.payload, raw)
            except TruncatedEventError as error:
                if at + len(data) >= end:
                    cut = at + stream.last_good_offset
                    raise _corruption(error, group.relay_file, cut, error.event_type) from None
            except BinlogFormatError as error:
                offset = at + (error.offset or 0)
                raise _corruption(error, group.relay_file, offset, error.event_type) from None
            size = size * 2 if stream.last_good_offset == 0 else chunk
            at += stream.last_good_offset
    finally:
        os.close(fd)
