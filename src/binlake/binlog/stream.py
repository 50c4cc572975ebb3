"""Walking the events of one binlog held in memory, and telling a torn tail from corruption.

``EventStream`` yields events in order and raises at the first bad byte (short header, impossible
length, CRC mismatch, malformed body); ``last_good_offset`` is then the end of the last event that
was whole and valid. It never skips a bad event.

``classify_problem`` applies the design's rule: a bad event with no valid event anywhere after it
is a torn tail (what a crash leaves); a bad event followed by valid data is corruption.

When the compiled modules run, each step is first offered to the C framer (``_frame.c``): it
checks the header, the sizes and the CRC32 of an event and builds a rows event (and a
transaction's GTID, ANNOTATE_ROWS and XID) whole, and hands anything doubtful back to the Python
step below, the reference, which raises the precise error.
"""

from __future__ import annotations

import importlib
import mmap
import struct
from collections.abc import Iterator
from enum import Enum
from types import ModuleType
from typing import Any

from zlib_ng.zlib_ng import crc32 as _zlib_ng_crc32

from binlake.binlog import rowplan
from binlake.binlog.codec import BinlogEvent, EventFramer, decode_event
from binlake.binlog.constants import (
    CHECKSUM_LEN,
    EVENT_TYPE_NAMES,
    HEADER_LEN,
    MAGIC,
    MAX_EVENT_SIZE,
    ROWS_TYPES,
    ChecksumAlg,
    EventType,
)
from binlake.binlog.errors import (
    BinlogFormatError,
    InvalidEventError,
    NotABinlogError,
    OrphanEventError,
    TruncatedEventError,
)
from binlake.binlog.events import (
    FL_COMPLETED_XA,
    FL_GROUP_COMMIT_ID,
    FL_PREPARED_XA,
    AnnotateRowsEvent,
    MariaGtidEvent,
    XidEvent,
)
from binlake.binlog.format import FormatContext
from binlake.binlog.header import EventHeader, decode_header, event_crc, stored_crc
from binlake.binlog.rows import RowsEvent, rows_layout

#: Anything the stream can view without copying (a file mapped by the caller included).
Buffer = bytes | bytearray | memoryview | mmap.mmap
_TYPE_AND_SIZE = struct.Struct("<4xBxxxxI")


def load_native() -> ModuleType | None:
    """The C framer when this process runs the compiled modules (read off the C row decoder,
    ``rowplan.NATIVE``: both are built and recorded together), else None."""
    if rowplan.NATIVE is None:
        return None
    return importlib.import_module("binlake.binlog._frame")


#: The C framer, or None: pure Python (``BINLAKE_PURE_PYTHON=1``, no build, a stale build).
NATIVE = load_native()


#: The framers of each format context met, C and Python (made once: about 14 us, more than a
#: short stream's events take; a context's TABLE_MAPs are kept across streams); at most
#: ``_FRAMERS_KEPT`` contexts are kept.
_FRAMERS: dict[tuple[FormatContext, bool], tuple[Any, EventFramer]] = {}
_FRAMERS_KEPT = 16


def native_framers(ctx: FormatContext, expect_magic: bool) -> tuple[Any, EventFramer]:
    """The C framer of events in ``ctx`` (``expect_magic``: the FORMAT_DESCRIPTION must be at
    offset 4) and the Python framer it hands checked events to; the C one is None without the
    extension."""
    key = (ctx, expect_magic)
    framers = _FRAMERS.get(key)
    if framers is None:
        if len(_FRAMERS) >= _FRAMERS_KEPT:
            _FRAMERS.clear()
        control = EventFramer(ctx)
        framers = _FRAMERS[key] = (native_framer(ctx, expect_magic, control), control)
    return framers


def native_framer(ctx: FormatContext, expect_magic: bool, control: EventFramer) -> Any:
    """A new C framer of events in ``ctx``, or None without the extension; it takes a TABLE_MAP
    that ``control`` decoded before from those it keeps."""
    if NATIVE is None:
        return None
    rows_types = {}
    for code in ROWS_TYPES:
        layout = rows_layout(code, ctx)
        if layout is not None:
            rows_types[int(code)] = layout
    return NATIVE.Framer(
        crc32=_zlib_ng_crc32,  # over 4 KiB pieces, as header.crc32
        header_type=EventHeader,
        event_type=BinlogEvent,
        rows_type=RowsEvent,
        trailer=ctx.checksum_len,
        first=len(MAGIC) if expect_magic else -1,
        rows_types=rows_types,
        xid_type=XidEvent,
        annotate_type=AnnotateRowsEvent,
        gtid_type=MariaGtidEvent,
        gtid_more=FL_GROUP_COMMIT_ID | FL_PREPARED_XA | FL_COMPLETED_XA,
        table_maps=control.table_maps,
    )


class EventStream:
    """The events of one binlog (or of a replication stream's bytes) in ``buf``.

    ``start``: offset of the first event to yield. In a file (``expect_magic``), the
    FORMAT_DESCRIPTION at offset 4 is always read first so that later events can be decoded,
    and yielded only if ``start`` is at or before it. ``reference``: every event is read by the
    Python step even when the C framer is loaded (what the tests compare the C one with).
    """

    def __init__(
        self,
        buf: Buffer,
        *,
        start: int | None = None,
        ctx: FormatContext | None = None,
        expect_magic: bool = True,
        reference: bool = False,
    ) -> None:
        self.buf = memoryview(buf)
        self.ctx = ctx if ctx is not None else FormatContext.default()
        self.expect_magic = expect_magic
        self.start = start
        self.last_good_offset = 0
        self.saw_format_description = ctx is not None
        self._native = NATIVE is not None and not reference
        #: The C framer of ``_framer_ctx``, made again when ``ctx`` changes.
        self._framer: Any = None
        self._framer_ctx: FormatContext | None = None
        #: The Python framer of the events the C one hands back checked (in ``_framer_ctx``).
        self._control: EventFramer | None = None

    def __iter__(self) -> Iterator[BinlogEvent]:
        pos = 0
        if self.expect_magic:
            self._check_magic()
            pos = self.last_good_offset = len(MAGIC)
        start = pos if self.start is None else self.start
        if self.expect_magic and start > pos:
            first = self._next_event(pos)
            if first.header.type_code != EventType.FORMAT_DESCRIPTION:
                raise NotABinlogError(
                    f"first event is {first.type_name}, not Format_desc", offset=pos
                )
            self.ctx = first.payload  # type: ignore[assignment]
            pos = start
            self.last_good_offset = pos
        end = len(self.buf)
        while pos < end:
            event = self._next_event(pos)
            if isinstance(event.payload, FormatContext):
                self.ctx = event.payload
                self.saw_format_description = True
            pos = self.last_good_offset = event.end_offset
            yield event

    def _check_magic(self) -> None:
        head = bytes(self.buf[: len(MAGIC)])
        if head != MAGIC:
            if len(head) < len(MAGIC) and MAGIC.startswith(head):
                raise TruncatedEventError(
                    f"file is {len(head)} bytes, shorter than the 4-byte magic", offset=0
                )
            raise NotABinlogError(f"file starts with {head.hex()}, not the binlog magic fe62696e")

    def _next_event(self, pos: int) -> BinlogEvent:
        if self._native:
            if self._framer_ctx is not self.ctx:
                self._framer, self._control = native_framers(self.ctx, self.expect_magic)
                self._framer_ctx = self.ctx
            framed = self._framer.frame(self.buf, pos)
            if type(framed) is BinlogEvent:
                return framed
            if framed is not None:  # an EventHeader: a whole event, its CRC32 checked
                return self._decode_control(pos, framed)
        return self._reference_event(pos)

    def _decode_control(self, pos: int, header: EventHeader) -> BinlogEvent:
        """The event at ``pos`` whose size and CRC32 the C framer has checked."""
        control = self._control
        assert control is not None, "made with the C framer"
        try:
            return control.decode(bytes(self.buf[pos : pos + header.event_size]), pos, header)
        except BinlogFormatError as exc:
            raise exc.with_location(offset=pos) from None

    def _reference_event(self, pos: int) -> BinlogEvent:
        """The Python step: the event at ``pos``, or the precise error."""
        header = decode_header(self.buf, pos)
        size = header.event_size
        if size > MAX_EVENT_SIZE:
            raise InvalidEventError(
                f"event size {size} is impossible", offset=pos, event_type=header.type_name
            )
        if pos + size > len(self.buf):
            raise TruncatedEventError(
                f"event of {size} bytes runs past the end ({len(self.buf) - pos} bytes remain)",
                offset=pos,
                event_type=header.type_name,
            )
        if (
            self.expect_magic
            and pos == len(MAGIC)
            and header.type_code != EventType.FORMAT_DESCRIPTION
        ):
            raise NotABinlogError(f"first event is {header.type_name}, not Format_desc", offset=pos)
        try:
            return decode_event(self.buf[pos : pos + size], self.ctx, pos, header)
        except BinlogFormatError as exc:
            raise exc.with_location(offset=pos) from None


class ProblemKind(Enum):
    TORN_TAIL = "torn_tail"
    CORRUPTION = "corruption"


def find_next_valid_event(buf: Buffer, after: int, checksum_alg: int) -> int | None:
    """The first offset past ``after`` where a whole event with a correct CRC32 starts, if any.

    Without CRC32 nothing can be proven valid, so the answer is always None.
    """
    if checksum_alg != ChecksumAlg.CRC32:
        return None
    view = memoryview(buf)
    end = len(view)
    min_size = HEADER_LEN + CHECKSUM_LEN
    known = EVENT_TYPE_NAMES
    unpack = _TYPE_AND_SIZE.unpack_from
    for pos in range(after + 1, end - min_size + 1):
        type_code, size = unpack(view, pos)
        if type_code not in known or size < min_size or pos + size > end:
            continue
        event = view[pos : pos + size]
        if stored_crc(event) == event_crc(event):
            return pos
    return None


def classify_problem(buf: Buffer, error: BinlogFormatError, ctx: FormatContext) -> ProblemKind:
    """Torn tail if nothing valid follows the bad event, else corruption.

    Without CRC32 nothing after the bad event can be proven valid, so only an event that runs past
    the end of the buffer counts as torn; any other bad event is corruption.
    """
    bad_offset = error.offset if error.offset is not None else 0
    if isinstance(error, NotABinlogError | OrphanEventError):
        return ProblemKind.CORRUPTION
    if ctx.checksum_alg != ChecksumAlg.CRC32:
        torn = isinstance(error, TruncatedEventError)
        return ProblemKind.TORN_TAIL if torn else ProblemKind.CORRUPTION
    if is_whole_valid_event(buf, bad_offset):
        return ProblemKind.CORRUPTION  # its bytes are as written: not a torn write
    if find_next_valid_event(buf, bad_offset, ctx.checksum_alg) is None:
        return ProblemKind.TORN_TAIL
    return ProblemKind.CORRUPTION


def is_whole_valid_event(buf: Buffer, pos: int) -> bool:
    """Whether a whole event with a correct CRC32 starts at ``pos``."""
    view = memoryview(buf)
    if len(view) - pos < HEADER_LEN + CHECKSUM_LEN:
        return False
    _type_code, size = _TYPE_AND_SIZE.unpack_from(view, pos)
    if size < HEADER_LEN + CHECKSUM_LEN or pos + size > len(view):
        return False
    event = view[pos : pos + size]
    return stored_crc(event) == event_crc(event)
