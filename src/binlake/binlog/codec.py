"""Whole events: header + body + CRC32, to and from bytes.

``decode_event`` checks the CRC32 (when the format context declares one) before it looks at the
body: a bad event is reported, never interpreted.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from binlake.binlog.constants import (
    CHECKSUM_LEN,
    HEADER_LEN,
    ROWS_TYPES,
    ChecksumAlg,
    EventType,
)
from binlake.binlog.errors import ChecksumMismatchError, InvalidEventError
from binlake.binlog.events import (
    FL_COMPLETED_XA,
    FL_GROUP_COMMIT_ID,
    FL_PREPARED_XA,
    MARIA_GTID_MIN_BODY,
    AnnotateRowsEvent,
    ControlPayload,
    MariaGtidEvent,
    XidEvent,
    decode_control,
    encode_control,
)
from binlake.binlog.format import (
    FormatContext,
    decode_format_description,
    encode_format_description_body,
    has_checksum_trailer,
)
from binlake.binlog.header import (
    HEADER_STRUCT,
    EventHeader,
    decode_header,
    event_crc,
    stored_crc,
    with_crc,
)
from binlake.binlog.rows import (
    RowsEvent,
    RowsFrame,
    decode_rows_event,
    encode_rows_event,
    flags_offset,
    frame_rows_event,
)
from binlake.binlog.tablemap import TableMap, decode_table_map, encode_table_map

Payload = ControlPayload | FormatContext | TableMap | RowsEvent | RowsFrame
#: An event header's size field (at offset 9).
_SIZE_AT = struct.Struct("<I").unpack_from
#: A MariaDB GTID body's fixed head (seq_no, domain_id, flags2) and an XID body.
_GTID_HEAD = struct.Struct("<QIB")
_XID_BODY = struct.Struct("<Q")
#: GTID flags after which more fields follow the fixed head.
_GTID_MORE = FL_GROUP_COMMIT_ID | FL_PREPARED_XA | FL_COMPLETED_XA
_XID, _ANNOTATE_ROWS, _MARIA_GTID, _TABLE_MAP = (
    int(EventType.XID),
    int(EventType.ANNOTATE_ROWS),
    int(EventType.MARIADB_GTID),
    int(EventType.TABLE_MAP),
)
#: At most this many TABLE_MAP bodies are kept decoded (more tables than that: the rest are
#: decoded each time).
_TABLE_MAPS_KEPT = 4096


class BinlogEvent(NamedTuple):
    """One event as found at ``offset``: its header, its decoded payload and its exact bytes
    (a named tuple, as ``EventHeader``: one is made per event)."""

    offset: int
    header: EventHeader
    payload: Payload
    raw: bytes

    @property
    def end_offset(self) -> int:
        return self.offset + self.header.event_size

    @property
    def type_name(self) -> str:
        return self.header.type_name


def verify_checksum(event: bytes | memoryview, offset: int, alg: int) -> None:
    if alg != ChecksumAlg.CRC32:
        return
    if len(event) < HEADER_LEN + CHECKSUM_LEN:
        raise InvalidEventError(
            f"event of {len(event)} bytes has no room for its CRC32", offset=offset
        )
    stored, computed = stored_crc(event), event_crc(event)
    if stored != computed:
        header = decode_header(event)
        raise ChecksumMismatchError(
            f"CRC32 stored {stored:#010x}, computed {computed:#010x}",
            offset=offset,
            event_type=header.type_name,
        )


def decode_event(
    event: bytes | memoryview,
    ctx: FormatContext,
    offset: int = 0,
    header: EventHeader | None = None,
    *,
    crc_checked: bool = False,
    rows_images: bool = True,
) -> BinlogEvent:
    """Decode one whole event (exactly ``event_size`` bytes), checking its CRC32 first.

    ``header``: the event's header when the caller has already decoded it. ``crc_checked``: the
    caller has verified this very buffer's CRC32 already (it is not computed twice).
    ``rows_images`` False: a rows event's payload is a ``RowsFrame`` (its flags), not its
    images: for a writer that stores events verbatim and only groups them.
    A FORMAT_DESCRIPTION's own CRC32 is always checked (servers always write it), so a damaged
    checksum-algorithm byte cannot switch verification off for the events after it.
    """
    if header is None:
        header = decode_header(event)
    if header.event_size != len(event):
        raise InvalidEventError(
            f"event declares {header.event_size} bytes but {len(event)} were given",
            offset=offset,
            event_type=header.type_name,
        )
    if header.type_code == EventType.FORMAT_DESCRIPTION:
        new_ctx = decode_format_description(memoryview(event)[HEADER_LEN:], offset)
        own_alg = ChecksumAlg.CRC32 if has_checksum_trailer(new_ctx) else ChecksumAlg.OFF
        verify_checksum(event, offset, own_alg)
        return BinlogEvent(offset, header, new_ctx, bytes(event))
    if not crc_checked:
        verify_checksum(event, offset, ctx.checksum_alg)
    body = memoryview(event)[HEADER_LEN : len(event) - ctx.checksum_len]
    if not rows_images and header.type_code in ROWS_TYPES:
        payload: Payload = frame_rows_event(header.type_code, body, ctx, offset)
    else:
        payload = decode_payload(header.type_code, body, ctx, offset)
    return BinlogEvent(offset, header, payload, event if type(event) is bytes else bytes(event))


class EventFramer:
    """Events whose CRC32 the caller has just checked, framed for grouping: what
    ``decode_event(event, ctx, offset, crc_checked=True, rows_images=False)`` gives, with fast
    paths for the bulk of a stream: rows events (one header unpack, their flags read in place),
    the GTID, ANNOTATE_ROWS and XID of each transaction (decoded in place), and TABLE_MAPs whose
    body was decoded before (kept per format context).

    The relay log writer frames every received event with it; ``context`` follows the stream's
    FORMAT_DESCRIPTIONs (the caller sets it)."""

    def __init__(self, ctx: FormatContext) -> None:
        self._ctx = ctx
        self._flags_at: dict[int, int] = {}
        self.context = ctx

    @property
    def context(self) -> FormatContext:
        return self._ctx

    @context.setter
    def context(self, ctx: FormatContext) -> None:
        self._ctx = ctx
        self._trailer = ctx.checksum_len
        #: TABLE_MAP bodies decoded in this context -> their payload (a table's TABLE_MAP
        #: repeats in every transaction that changes it; only the header and CRC32 differ).
        self._table_maps: dict[bytes, TableMap] = {}
        #: Per rows event type: where its flags are in the event.
        self._flags_at = {}
        for code in ROWS_TYPES:
            at = flags_offset(code, ctx)
            if at is not None:
                self._flags_at[int(code)] = HEADER_LEN + at
        #: Per rows event type: the shortest such event (its flags and its checksum in it).
        self._rows_min = {code: at + 2 + self._trailer for code, at in self._flags_at.items()}
        #: What ``rows_run_end`` takes besides them: ANNOTATE_ROWS, a statement's text, which
        #: has nothing to frame but its size.
        self._run_min = {**self._rows_min, _ANNOTATE_ROWS: HEADER_LEN + self._trailer}
        #: The type codes ``rows_run_end`` may take: a caller's cheap first test.
        self.run_codes = frozenset(self._run_min)

    @property
    def table_maps(self) -> dict[bytes, TableMap]:
        """The TABLE_MAP bodies decoded in this context -> their payload (what the C framer of
        ``EventStream`` looks a TABLE_MAP up in; this framer fills it)."""
        return self._table_maps

    def is_rows_frame(self, event: bytes) -> bool:
        """Whether ``event`` is a rows event that ``frame`` takes on its fast path (its declared
        size is its length, and its flags are within it): what framing checks of such an
        event, without building the event."""
        size = len(event)
        if size < HEADER_LEN:
            return False
        shortest = self._rows_min.get(event[4])
        return shortest is not None and size >= shortest and _SIZE_AT(event, 9)[0] == size

    def rows_run_end(self, events: Sequence[object], start: int) -> int:
        """The end of the run of events from ``events[start]`` that ``is_rows_frame`` takes, or
        that are ANNOTATE_ROWS with their declared size (``start`` when the first is neither):
        the same test, one loop for the run. Inside a transaction none of them ends it or
        opens another."""
        rows_min, size_at = self._run_min, _SIZE_AT
        for end in range(start, len(events)):
            # objects, not bytes: compiled (mypyc), a bytes annotation raises on a bytearray
            event = events[end]
            if type(event) is not bytes:
                return end
            size = len(event)
            if size < HEADER_LEN:
                return end
            shortest = rows_min.get(event[4])
            if shortest is None or size < shortest or size_at(event, 9)[0] != size:
                return end
        return len(events)

    def frame(self, event: bytes, offset: int) -> BinlogEvent:
        if self.is_rows_frame(event):
            header = EventHeader(*HEADER_STRUCT.unpack_from(event))
            at = self._flags_at[header.type_code]
            rows = RowsFrame(header.type_code, event[at] | (event[at + 1] << 8))
            return BinlogEvent(offset, header, rows, event)
        framed = self._frame_control(event, offset)
        if framed is None:
            framed = decode_event(event, self._ctx, offset, crc_checked=True, rows_images=False)
            self._keep(event, framed)
        return framed

    def decode(self, event: bytes, offset: int, header: EventHeader) -> BinlogEvent:
        """What ``decode_event(event, ctx, offset, header, crc_checked=True)`` gives (a rows
        event with its images), through ``frame``'s fast paths for the GTID, ANNOTATE_ROWS,
        XID and known TABLE_MAP of a transaction: for a reader that has checked the event's
        size and CRC32 (``EventStream`` behind the C framer). ``header``: the event's."""
        framed = self._frame_control(event, offset, header)
        if framed is None:
            framed = decode_event(event, self._ctx, offset, header, crc_checked=True)
            self._keep(event, framed)
        return framed

    def _keep(self, event: bytes, framed: BinlogEvent) -> None:
        """A TABLE_MAP just decoded is kept for the next event of the same body."""
        table_map = framed.payload
        if isinstance(table_map, TableMap) and len(self._table_maps) < _TABLE_MAPS_KEPT:
            self._table_maps[event[HEADER_LEN : len(event) - self._trailer]] = table_map

    def _frame_control(
        self, event: bytes, offset: int, header: EventHeader | None = None
    ) -> BinlogEvent | None:
        """The events every MariaDB transaction brings besides its rows (a GTID with no commit
        id and no XA, an ANNOTATE_ROWS, an XID) in their usual shapes, decoded in place, and a
        TABLE_MAP whose body was decoded before: what ``decode_event`` gives for them. None
        for anything else, which ``decode_event`` decodes (and where anything is wrong, raises
        the precise error). ``header``: the event's, when the caller has decoded it."""
        size = len(event)
        if size < HEADER_LEN:
            return None
        if header is None:
            header = EventHeader(*HEADER_STRUCT.unpack_from(event))
        code, body_end = header.type_code, size - self._trailer
        payload: Payload
        if header.event_size != size or body_end < HEADER_LEN:
            return None
        if code == _XID and body_end - HEADER_LEN == _XID_BODY.size:
            payload = XidEvent(*_XID_BODY.unpack_from(event, HEADER_LEN))
        elif code == _ANNOTATE_ROWS:
            payload = AnnotateRowsEvent(event[HEADER_LEN:body_end])
        elif code == _TABLE_MAP:
            known = self._table_maps.get(event[HEADER_LEN:body_end])
            if known is None:
                return None
            payload = known
        elif code == _MARIA_GTID and body_end - HEADER_LEN == MARIA_GTID_MIN_BODY:
            seq_no, domain_id, flags2 = _GTID_HEAD.unpack_from(event, HEADER_LEN)
            if flags2 & _GTID_MORE:
                return None
            extra = event[HEADER_LEN + _GTID_HEAD.size : body_end].rstrip(b"\0")  # the padding
            payload = MariaGtidEvent(seq_no, domain_id, flags2, None, None, extra)
        else:
            return None
        return BinlogEvent(offset, header, payload, event)


def decode_payload(type_code: int, body: memoryview, ctx: FormatContext, offset: int) -> Payload:
    if type_code == EventType.TABLE_MAP:
        return decode_table_map(body, ctx, offset)
    if type_code in ROWS_TYPES:
        return decode_rows_event(type_code, body, ctx, offset)
    return decode_control(type_code, body, ctx, offset)


def encode_body(payload: Payload, ctx: FormatContext) -> bytes:
    if isinstance(payload, RowsFrame):
        raise TypeError("a RowsFrame has no images to encode")
    if isinstance(payload, FormatContext):
        return encode_format_description_body(payload)
    if isinstance(payload, TableMap):
        return encode_table_map(payload, ctx)
    if isinstance(payload, RowsEvent):
        return encode_rows_event(payload, ctx)
    return encode_control(payload)


def payload_type_code(payload: Payload) -> int:
    if isinstance(payload, FormatContext):
        return int(EventType.FORMAT_DESCRIPTION)
    if isinstance(payload, TableMap):
        return int(EventType.TABLE_MAP)
    return int(payload.type_code)


def encode_event(
    payload: Payload,
    ctx: FormatContext,
    *,
    timestamp: int = 0,
    server_id: int = 1,
    log_pos: int = 0,
    flags: int = 0,
) -> bytes:
    """Frame ``payload`` as a whole event; ``log_pos`` is the end offset to store in the header.

    A FORMAT_DESCRIPTION always ends with a CRC32, whatever algorithm it declares for the events
    after it; other events carry one when ``ctx`` declares CRC32.
    """
    body = encode_body(payload, ctx)
    has_crc = isinstance(payload, FormatContext) or ctx.has_checksum
    size = HEADER_LEN + len(body) + (CHECKSUM_LEN if has_crc else 0)
    header = EventHeader(timestamp, payload_type_code(payload), server_id, size, log_pos, flags)
    unframed = header.encode() + body
    return with_crc(unframed) if has_crc else unframed
