"""WRITE/UPDATE/DELETE_ROWS events (v1 and v2) and the rows inside them.

An event body is: table id (6 bytes, 4 in pre-5.1 formats), 2 flag bytes, in v2 a 2-byte length
(counting itself) and that much "extra data", the column count (packed integer), the bitmap of
columns present in the before image (or the only image), for updates the bitmap of the after
image, then the row images back to back (``binlake.binlog.rowcodec``). ``decode_rows_event``
keeps the images as undecoded bytes; ``decode_rows`` turns them into value tuples with the
TABLE_MAP in force.

With ``binlog_row_image=MINIMAL`` or ``NOBLOB`` the bitmaps are partial: columns outside them hold
``ABSENT`` in the decoded rows.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntFlag
from typing import Literal, NamedTuple

from binlake.binlog.constants import COMPRESSED_ROWS_TYPES, EventType, event_type_name
from binlake.binlog.errors import BinlakeError, InvalidEventError, UnsupportedTypeError
from binlake.binlog.format import FormatContext
from binlake.binlog.rowcodec import (
    DECODE_FAILURES,
    Hints,
    Row,
    encode_image,
    generated_rows_decoder,
    image_specs,
    rows_decoder,
    walk_image,
)
from binlake.binlog.tablemap import TableMap, packed_int, read_packed_int
from binlake.binlog.values import ABSENT

__all__ = [
    "ABSENT",
    "Row",
    "RowsEvent",
    "RowsFlag",
    "decode_rows",
    "decode_rows_event",
    "encode_rows",
    "encode_rows_event",
    "make_rows_event",
]

Kind = Literal["write", "update", "delete"]
RowChange = tuple[Row | None, Row | None]

_TYPES: dict[int, tuple[Kind, int]] = {
    EventType.WRITE_ROWS_V1: ("write", 1),
    EventType.UPDATE_ROWS_V1: ("update", 1),
    EventType.DELETE_ROWS_V1: ("delete", 1),
    EventType.WRITE_ROWS_V2: ("write", 2),
    EventType.UPDATE_ROWS_V2: ("update", 2),
    EventType.DELETE_ROWS_V2: ("delete", 2),
}
_CODES = {value: code for code, value in _TYPES.items()}


class RowsFlag(IntFlag):
    STMT_END = 0x0001
    NO_FOREIGN_KEY_CHECKS = 0x0002
    RELAXED_UNIQUE_CHECKS = 0x0004
    COMPLETE_ROWS = 0x0008
    NO_CHECK_CONSTRAINT_CHECKS = 0x0080  # MariaDB


@dataclass(frozen=True, slots=True)
class RowsEvent:
    """A rows event with its row images still encoded (``rows``)."""

    type_code: int
    kind: Kind
    version: int
    table_id: int
    flags: int
    #: v2 extra data (after its 2-byte length); empty in v1.
    extra_data: bytes
    column_count: int
    #: Bit i set: column i is in the before image (the only image of writes and deletes).
    columns_present: int
    #: Updates only: bit i set: column i is in the after image.
    columns_present_after: int | None
    rows: bytes

    @property
    def type_name(self) -> str:
        return event_type_name(self.type_code)

    @property
    def is_statement_end(self) -> bool:
        return bool(self.flags & RowsFlag.STMT_END)

    @property
    def whole_images(self) -> bool:
        """Every row image holds every column (full column bitmaps): no value is ``ABSENT``."""
        every = (1 << self.column_count) - 1
        after = self.columns_present_after
        return self.columns_present == every and (after is None or after == every)


class RowsFrame(NamedTuple):
    """A rows event taken in without its images (``frame_rows_event``): what grouping needs.

    The relay log writer stores events verbatim and only has to know where transactions end;
    the applier decodes the whole event (``decode_rows_event``) when it reads the relay log."""

    type_code: int
    flags: int

    @property
    def is_statement_end(self) -> bool:
        return bool(self.flags & RowsFlag.STMT_END)


def frame_rows_event(
    type_code: int, body: memoryview | bytes, ctx: FormatContext, offset: int
) -> RowsFrame | RowsEvent:
    """The flags of a rows event (its table id and flags are the post-header's first bytes);
    a compressed or unknown rows event is decoded in full (which refuses it)."""
    at = flags_offset(type_code, ctx)
    if at is None or len(body) < at + 2:
        return decode_rows_event(type_code, body, ctx, offset)  # refuses it, precisely
    return RowsFrame(type_code, body[at] | (body[at + 1] << 8))


def flags_offset(type_code: int, ctx: FormatContext) -> int | None:
    """Where a rows event's flags are in its body (after the table id), for the rows events
    binlake frames in place; None for others (compressed, unknown, an odd post-header)."""
    layout = rows_layout(type_code, ctx)
    return None if layout is None else layout[2]


def rows_layout(type_code: int, ctx: FormatContext) -> tuple[Kind, int, int] | None:
    """A rows event type's kind, version and table id length in ``ctx``, for the rows events
    binlake frames in place; None for others (compressed, unknown, an odd post-header)."""
    versioned = _TYPES.get(type_code)
    if versioned is None or type_code in COMPRESSED_ROWS_TYPES:
        return None
    kind, version = versioned
    id_len = ctx.post_header_len(type_code) - (4 if version == 2 else 2)
    return (kind, version, id_len) if id_len in (4, 6) else None


def decode_rows_event(
    type_code: int, body: memoryview | bytes, ctx: FormatContext, offset: int
) -> RowsEvent:
    """Decode a rows event body (after the common header, CRC trailer removed)."""
    name = event_type_name(type_code)
    if type_code in COMPRESSED_ROWS_TYPES:
        raise UnsupportedTypeError(
            f"{name} events (MariaDB binlog compression) are not supported",
            hint="set log_bin_compress=OFF on the source; events written since then are plain",
            offset=offset,
            event_type=name,
        )
    if type_code not in _TYPES:
        raise UnsupportedTypeError(f"{name} is not a rows event binlake reads", offset=offset)
    kind, version = _TYPES[type_code]
    buf = bytes(body)
    try:
        return _decode_event(buf, type_code, kind, version, ctx)
    except (IndexError, ValueError, struct.error) as error:
        raise InvalidEventError(
            f"rows event body of {len(buf)} bytes is malformed: {error}",
            offset=offset,
            event_type=name,
        ) from None


def _decode_event(
    buf: bytes, type_code: int, kind: Kind, version: int, ctx: FormatContext
) -> RowsEvent:
    id_len = ctx.post_header_len(type_code) - (4 if version == 2 else 2)
    if id_len not in (4, 6):
        raise ValueError(f"post-header length {ctx.post_header_len(type_code)}")
    table_id = int.from_bytes(buf[:id_len], "little")
    flags, pos = struct.unpack_from("<H", buf, id_len)[0], id_len + 2
    extra = b""
    if version == 2:
        extra_len = struct.unpack_from("<H", buf, pos)[0]
        if extra_len < 2 or pos + extra_len > len(buf):
            raise ValueError(f"extra data length {extra_len}")
        extra, pos = buf[pos + 2 : pos + extra_len], pos + extra_len
    count, pos = read_packed_int(buf, pos)
    width = (count + 7) // 8
    images = 2 if kind == "update" else 1
    if pos + images * width > len(buf):
        raise ValueError(f"column bitmaps for {count} columns run past the end")
    present = int.from_bytes(buf[pos : pos + width], "little")
    after = int.from_bytes(buf[pos + width : pos + 2 * width], "little") if images == 2 else None
    rows = buf[pos + images * width :]
    return RowsEvent(type_code, kind, version, table_id, flags, extra, count, present, after, rows)


def encode_rows_event(ev: RowsEvent, ctx: FormatContext) -> bytes:
    """The body of ``ev`` (no common header, no CRC): the inverse of ``decode_rows_event``."""
    id_len = ctx.post_header_len(ev.type_code) - (4 if ev.version == 2 else 2)
    out = bytearray(ev.table_id.to_bytes(id_len, "little"))
    out += struct.pack("<H", ev.flags)
    if ev.version == 2:
        out += struct.pack("<H", len(ev.extra_data) + 2) + ev.extra_data
    width = (ev.column_count + 7) // 8
    out += packed_int(ev.column_count) + ev.columns_present.to_bytes(width, "little")
    if ev.columns_present_after is not None:
        out += ev.columns_present_after.to_bytes(width, "little")
    return bytes(out + ev.rows)


# ---- rows -----------------------------------------------------------------------------------


def _hints(hints: Mapping[int, str] | None) -> Hints:
    return tuple(sorted(hints.items())) if hints else ()


def _check_table(ev: RowsEvent, tm: TableMap) -> None:
    if ev.column_count != tm.column_count or ev.table_id != tm.table_id:
        raise InvalidEventError(
            f"rows event for table id {ev.table_id} with {ev.column_count} columns does not "
            f"match the table map of {tm.qualified_name} (id {tm.table_id}, "
            f"{tm.column_count} columns)",
            event_type=ev.type_name,
            table=tm.qualified_name,
        )


def decode_rows(
    ev: RowsEvent,
    tm: TableMap,
    hints: Mapping[int, str] | None = None,
    *,
    offset: int | None = None,
    reference: bool = False,
) -> list[RowChange]:
    """The (before, after) images of each row: ``(None, row)`` for writes, ``(row, None)`` for
    deletes, ``(row, row)`` for updates. ``hints`` maps column indexes to ``"uuid"``,
    ``"inet4"`` or ``"inet6"`` (see ``binlake.binlog.values``); ``offset`` is the event's
    position, for error messages. ``reference`` decodes with the generated Python decoder even
    when the C one is loaded (what the tests compare the C one with)."""
    _check_table(ev, tm)
    full = (1 << tm.column_count) - 1
    key = _hints(hints) if hints else ()
    bitmaps = [ev.columns_present & full]
    if ev.kind == "update":
        bitmaps.append((ev.columns_present_after or 0) & full)
    if ev.rows and 0 in bitmaps:
        raise InvalidEventError(
            "rows event has rows but an empty column bitmap",
            offset=offset,
            event_type=ev.type_name,
            table=tm.qualified_name,
        )
    try:
        pick = generated_rows_decoder if reference else rows_decoder
        decoder = pick(tm, ev.kind, bitmaps[0], bitmaps[-1], key)
    except BinlakeError as error:
        raise error.with_location(offset=offset) from None
    out: list[RowChange] = []
    try:
        end = decoder(ev.rows, len(ev.rows), out)
    except DECODE_FAILURES:
        raise _diagnose(ev, tm, bitmaps, key, offset) from None
    if end != len(ev.rows):
        raise _diagnose(ev, tm, bitmaps, key, offset)
    return out


def _diagnose(
    ev: RowsEvent, tm: TableMap, bitmaps: Sequence[int], key: Hints, offset: int | None
) -> BinlakeError:
    """The precise error for rows data the fast decoder failed on or overran."""
    images = [image_specs(tm, bitmap, key) for bitmap in bitmaps]
    pos = 0
    try:
        while pos < len(ev.rows):
            for specs in images:
                pos = walk_image(specs, ev.rows, pos, offset, ev.type_name)
    except BinlakeError as error:
        return error
    return InvalidEventError(
        "rows data could not be decoded although every value can",
        offset=offset,
        event_type=ev.type_name,
        table=tm.qualified_name,
    )


def encode_rows(
    kind: Kind,
    tm: TableMap,
    rows: Sequence[RowChange],
    columns_present: int | None = None,
    columns_present_after: int | None = None,
    hints: Mapping[int, str] | None = None,
) -> bytes:
    """The row images of ``rows`` (shaped as ``decode_rows`` returns them), back to back.

    Bitmaps default to all columns."""
    full = (1 << tm.column_count) - 1
    key = _hints(hints)
    before_specs = image_specs(tm, full if columns_present is None else columns_present, key)
    after_bitmap = full if columns_present_after is None else columns_present_after
    after_specs = image_specs(tm, after_bitmap, key)
    parts = []
    for before, after in rows:
        if kind == "write":
            parts.append(encode_image(before_specs, _require(after, kind, "after")))
        elif kind == "delete":
            parts.append(encode_image(before_specs, _require(before, kind, "before")))
        else:
            parts.append(encode_image(before_specs, _require(before, kind, "before")))
            parts.append(encode_image(after_specs, _require(after, kind, "after")))
    return b"".join(parts)


def _require(row: Row | None, kind: str, which: str) -> Row:
    if row is None:
        raise ValueError(f"a {kind} row needs a {which} image")
    return row


def make_rows_event(
    kind: Kind,
    tm: TableMap,
    rows: Sequence[RowChange],
    *,
    version: int = 1,
    flags: int = RowsFlag.STMT_END,
    columns_present: int | None = None,
    columns_present_after: int | None = None,
    extra_data: bytes = b"",
    hints: Mapping[int, str] | None = None,
) -> RowsEvent:
    """A rows event for ``tm`` holding ``rows`` (for tests and relay-log tooling)."""
    full = (1 << tm.column_count) - 1
    present = full if columns_present is None else columns_present
    after = None
    if kind == "update":
        after = full if columns_present_after is None else columns_present_after
    payload = encode_rows(kind, tm, rows, present, after, hints)
    return RowsEvent(
        _CODES[(kind, version)],
        kind,
        version,
        tm.table_id,
        flags,
        extra_data if version == 2 else b"",
        tm.column_count,
        present,
        after,
        payload,
    )
