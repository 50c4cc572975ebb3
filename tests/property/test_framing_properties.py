"""The relay log writer's framer gives what ``decode_event`` gives, for any bytes.

``EventFramer.frame`` decodes the events of every transaction (rows events, and a MariaDB GTID,
ANNOTATE_ROWS and XID in their usual shapes) in place instead of through ``decode_event``, and
takes a TABLE_MAP whose body it decoded before from what it kept; for any event, well formed
or not, the two must agree: the same event, or the same error.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from functools import partial

from hypothesis import example, given
from hypothesis import strategies as st

from binlake.binlog.codec import BinlogEvent, EventFramer, decode_event, encode_event
from binlake.binlog.constants import HEADER_LEN, ChecksumAlg, ColumnType, EventType
from binlake.binlog.errors import BinlakeError
from binlake.binlog.format import FormatContext
from binlog_builder import MARIADB_CTX
from binlog_fixtures import table_map

NO_CHECKSUM_CTX = dataclasses.replace(MARIADB_CTX, checksum_alg=ChecksumAlg.OFF)
HEADER = struct.Struct("<IBIIIH")
FAST_TYPES = (EventType.MARIADB_GTID, EventType.ANNOTATE_ROWS, EventType.XID)
OTHER_TYPES = (EventType.QUERY, EventType.TABLE_MAP, EventType.WRITE_ROWS_V1, EventType.ROTATE)
GTID_FLAGS = st.sampled_from([0, 1, 2, 4, 8, 32, 64, 128, 0x0D, 0xFF])


def outcome(call: Callable[[], BinlogEvent]) -> BinlogEvent | tuple[type[BaseException], str]:
    """What a framing call returns, or the type and text of what it raises."""
    try:
        result = call()
    except BinlakeError as error:
        return type(error), str(error)
    assert isinstance(result, BinlogEvent)
    return result


def gtid_body(seq_no: int, domain: int, flags2: int, tail: bytes) -> bytes:
    return struct.pack("<QIB", seq_no, domain, flags2) + tail


@st.composite
def events(draw: st.DrawFn, trailer_len: int = 4) -> bytes:
    """An event of a type the framer decodes in place (or another), a body of a usual or
    unusual length, its declared size right or wrong."""
    code = draw(st.sampled_from(FAST_TYPES + OTHER_TYPES))
    if code == EventType.MARIADB_GTID and draw(st.booleans()):
        pad = draw(st.sampled_from([b"\0" * 6, b"\0" * 5 + b"\x07", b"\x01" + b"\0" * 5, b""]))
        body = gtid_body(
            draw(st.integers(0, 2**64 - 1)),
            draw(st.integers(0, 2**32 - 1)),
            draw(GTID_FLAGS),
            pad + draw(st.binary(max_size=12)),
        )
    elif code == EventType.XID and draw(st.booleans()):
        body = struct.pack("<Q", draw(st.integers(0, 2**64 - 1)))
    else:
        body = draw(st.binary(max_size=40))
    trailer = draw(st.binary(min_size=trailer_len, max_size=trailer_len))
    size = HEADER_LEN + len(body) + len(trailer)
    declared = size if draw(st.booleans()) else draw(st.integers(0, size + 8))
    header = HEADER.pack(1_700_000_000, int(code), 1, declared, 4096, 0)
    cut = draw(st.integers(0, 3))  # sometimes a short event
    event = header + body + trailer
    return event[: len(event) - cut] if cut and draw(st.booleans()) else event


def framed_as_decoded(event: bytes, ctx: FormatContext, offset: int) -> None:
    framed = outcome(lambda: EventFramer(ctx).frame(event, offset))
    decoded = outcome(lambda: decode_event(event, ctx, offset, crc_checked=True, rows_images=False))
    assert framed == decoded


@given(event=events(), offset=st.integers(0, 2**32))
@example(event=HEADER.pack(0, int(EventType.XID), 1, 31, 0, 0) + bytes(12), offset=4)
@example(event=HEADER.pack(0, int(EventType.MARIADB_GTID), 1, 42, 0, 0) + bytes(23), offset=4)
def test_an_event_framed_in_place_is_the_event_decode_event_gives(
    event: bytes, offset: int
) -> None:
    framed_as_decoded(event, MARIADB_CTX, offset)


@given(event=events(trailer_len=0), offset=st.integers(0, 2**32))
def test_without_a_checksum_trailer_framing_still_agrees_with_decode_event(
    event: bytes, offset: int
) -> None:
    framed_as_decoded(event, NO_CHECKSUM_CTX, offset)


TABLE_SHAPES = st.lists(
    st.sampled_from([ColumnType.LONG, ColumnType.LONGLONG, ColumnType.TINY, ColumnType.DOUBLE]),
    min_size=1,
    max_size=6,
).map(tuple)


@given(
    shapes=st.lists(TABLE_SHAPES, min_size=1, max_size=3),
    order=st.lists(st.integers(0, 2), min_size=1, max_size=8),
    flip=st.one_of(st.none(), st.integers(0, 60)),
)
def test_a_table_map_framed_again_is_the_table_map_decode_event_gives(
    shapes: list[tuple[int, ...]], order: list[int], flip: int | None
) -> None:
    """One framer sees the same tables' TABLE_MAPs again and again (each with its own header),
    as a stream does; one of them perhaps with a byte changed (a body never seen, or a
    declared size that lies): each framed event is the one ``decode_event`` gives."""
    framer = EventFramer(MARIADB_CTX)
    for at, pick in enumerate(order):
        shape = shapes[pick % len(shapes)]
        event = bytearray(encode_event(table_map(shape), MARIADB_CTX, log_pos=1000 + at * 64))
        if flip is not None and at == len(order) - 1:
            event[flip % len(event)] ^= 0x40
        data, offset = bytes(event), at * 64
        framed = outcome(partial(framer.frame, data, offset))
        decoded = outcome(
            partial(decode_event, data, MARIADB_CTX, offset, crc_checked=True, rows_images=False)
        )
        assert framed == decoded
