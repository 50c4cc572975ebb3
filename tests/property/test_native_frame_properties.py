"""The C framer (``_frame.c``) gives what ``EventStream``'s Python step gives, for any bytes.

When the compiled modules run, ``EventStream`` offers each event to the C framer first: it
checks the header, the sizes and the CRC32, builds rows events whole, and hands anything
doubtful back to the Python step, the reference (``reference=True`` runs it alone). For logs of
transactions with rows events of every kind (v1 and v2, extra data, partial bitmaps), damaged
in any way (a bit flipped, bytes overwritten and the event's CRC32 made right again so that
its body is what is wrong, a size changed, a cut), both must yield the same events and stop
with the same error (type, message, offset, event type, hint), at the same
``last_good_offset``, in the same format context.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.binlog.codec import BinlogEvent
from binlake.binlog.constants import ChecksumAlg, ColumnType, EventType
from binlake.binlog.errors import BinlogFormatError
from binlake.binlog.events import (
    FL_DDL,
    FL_GROUP_COMMIT_ID,
    FL_STANDALONE,
    FL_TRANSACTIONAL,
    AnnotateRowsEvent,
    MariaGtidEvent,
    XidEvent,
)
from binlake.binlog.header import event_crc, with_crc
from binlake.binlog.rows import Kind, make_rows_event
from binlake.binlog.stream import NATIVE, EventStream, classify_problem
from binlog_builder import MARIADB_CTX, LogBuilder
from binlog_fixtures import TYPES_BINLOG, UTF8MB4, table_map

pytestmark = pytest.mark.skipif(
    NATIVE is None,
    reason="the C framer is not loaded (pure Python: BINLAKE_PURE_PYTHON=1 or no current "
    "build); this run reads every event with the Python step alone",
)

XID, ANNOTATE_ROWS, MARIADB_GTID = EventType.XID, EventType.ANNOTATE_ROWS, EventType.MARIADB_GTID
KINDS: tuple[Kind, ...] = ("write", "update", "delete")
NO_CHECKSUM_CTX = dataclasses.replace(MARIADB_CTX, checksum_alg=ChecksumAlg.OFF)
TABLE = dataclasses.replace(
    table_map(
        (ColumnType.LONG, ColumnType.VARCHAR, ColumnType.LONGLONG),
        (0, 40, 0),
        charsets=(None, UTF8MB4, None),
    ),
    table_id=0x1_0000_0007,  # six bytes of table id
)
ROWS = st.lists(
    st.tuples(
        st.integers(-(2**31), 2**31 - 1), st.text(max_size=10), st.integers(-(2**63), 2**63 - 1)
    ),
    min_size=0,
    max_size=4,
)


def outcome(buf: bytes, **options: Any) -> tuple[list[BinlogEvent], Any, int, Any]:
    """The events a stream yields, what it raises (type, text, offset, event type, hint, and
    torn tail or corruption), its ``last_good_offset`` and its format context."""
    stream = EventStream(buf, **options)
    events: list[BinlogEvent] = []
    error: Any = None
    try:
        for event in stream:
            events.append(event)
    except Exception as exc:  # any error at all, typed or not, must be the same
        details = [getattr(exc, name, None) for name in ("offset", "event_type", "hint")]
        kind = (
            classify_problem(buf, exc, stream.ctx) if isinstance(exc, BinlogFormatError) else None
        )
        error = (type(exc), str(exc), *details, kind)
    return events, error, stream.last_good_offset, stream.ctx


def assert_same(buf: bytes, **options: Any) -> None:
    native = outcome(buf, **options)
    reference = outcome(buf, reference=True, **options)
    assert native == reference


@st.composite
def gtids(draw: st.DrawFn, seq_no: int) -> MariaGtidEvent:
    """A MariaDB GTID: the usual shape (flags, padding), or one with a commit id or extra."""
    flags2 = draw(st.sampled_from([0, FL_STANDALONE, FL_TRANSACTIONAL, FL_DDL | FL_STANDALONE]))
    if draw(st.booleans()):
        return MariaGtidEvent(seq_no, draw(st.integers(0, 2**32 - 1)), flags2, None, None, b"")
    if draw(st.booleans()):
        return MariaGtidEvent(seq_no, 0, flags2 | FL_GROUP_COMMIT_ID, seq_no, None, b"")
    return MariaGtidEvent(seq_no, 0, flags2, None, None, draw(st.binary(min_size=1, max_size=8)))


@st.composite
def logs(draw: st.DrawFn) -> LogBuilder:
    """A log of transactions: GTID, ANNOTATE_ROWS, TABLE_MAP, rows events of any kind and
    version, XID."""
    ctx = draw(st.sampled_from([MARIADB_CTX, NO_CHECKSUM_CTX]))
    log = LogBuilder(ctx=ctx).header()
    for seq_no in range(draw(st.integers(1, 3))):
        log.add(draw(gtids(seq_no + 1)))
        if draw(st.booleans()):
            log.add(AnnotateRowsEvent(draw(st.binary(max_size=40))))
        log.add(TABLE)
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(KINDS))
            version = draw(st.sampled_from([1, 2]))
            rows = [
                (None if kind == "write" else row, None if kind == "delete" else row)
                for row in draw(ROWS)
            ]
            present = draw(st.sampled_from([None, 0b111, 0b101]))
            event = make_rows_event(
                kind,
                TABLE,
                rows if present in (None, 0b111) else [],
                version=version,
                columns_present=present,
                extra_data=draw(st.binary(max_size=4)) if version == 2 else b"",
            )
            log.add(event)
        log.add(XidEvent(seq_no + 1))
    return log


def reseal(buf: bytearray, offsets: list[int], position: int) -> None:
    """Make the CRC32 of the event holding ``position`` right again for its bytes as they are."""
    starts = [o for o in offsets if o <= position]
    if not starts:
        return
    start = starts[-1]
    size = struct.unpack_from("<I", buf, start + 9)[0]
    if size < 23 or start + size > len(buf):
        return
    event = bytes(buf[start : start + size])
    buf[start + size - 4 : start + size] = struct.pack("<I", event_crc(event))


@settings(max_examples=300, deadline=None)
@given(log=logs(), data=st.data())
def test_the_c_framer_reads_any_damaged_log_as_the_python_step_does(
    log: LogBuilder, data: st.DataObject
) -> None:
    buf = bytearray(log.bytes())
    damage = data.draw(st.sampled_from(["none", "flip", "overwrite", "size", "cut"]))
    position = data.draw(st.integers(4, len(buf) - 1))
    if damage == "flip":
        buf[position] ^= 1 << data.draw(st.integers(0, 7))
    elif damage == "overwrite":
        patch = data.draw(st.binary(min_size=1, max_size=12))
        buf[position : position + len(patch)] = patch
        if data.draw(st.booleans()):
            reseal(buf, log.offsets, position)
    elif damage == "size":
        start = data.draw(st.sampled_from(log.offsets))
        size = data.draw(st.sampled_from([0, 18, 19, 22, 23, 24, 2**30, 2**30 + 1, 2**32 - 1]))
        struct.pack_into("<I", buf, start + 9, size)
    elif damage == "cut":
        del buf[position:]
    assert_same(bytes(buf))
    assert_same(bytes(buf[4:]), ctx=log.ctx, expect_magic=False)
    assert_same(bytes(buf), start=data.draw(st.sampled_from(log.offsets)))


POST_HEADER_BYTES = [0, 1, 2, 3, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF]


def rows_starts(log: LogBuilder) -> list[int]:
    return [o for o in log.offsets if log.buf[o + 4] in (23, 24, 25, 30, 31, 32)]


def test_a_rows_post_header_that_does_not_frame_is_the_python_steps_error() -> None:
    """Each byte of each rows event's table id, flags, extra data length, column count and
    bitmaps set to each value that matters, its CRC32 right: the C framer hands the event
    back, and the Python step raises the precise error (or reads it, as the C framer would)."""
    log = LogBuilder().header()
    log.add(TABLE)
    for kind in KINDS:
        for version, extra in ((1, b""), (2, b""), (2, b"\x01\x02")):
            row = (7, "x", -1)
            change = (None if kind == "write" else row, None if kind == "delete" else row)
            log.add(make_rows_event(kind, TABLE, [change], version=version, extra_data=extra))
    for start in rows_starts(log):
        for at in range(start + 19, start + 19 + 16):
            for value in POST_HEADER_BYTES:
                buf = bytearray(log.buf)
                buf[at] = value
                reseal(buf, log.offsets, at)
                assert_same(bytes(buf))


def sealed(code: int, body: bytes, offset: int) -> bytes:
    """A whole event of type ``code`` holding ``body``, its CRC32 right."""
    size = 19 + len(body) + 4
    return with_crc(struct.pack("<IBIIIH", 1_700_000_000, code, 1, size, offset + size, 0) + body)


def test_a_transactions_control_events_of_any_shape_are_the_python_steps() -> None:
    """The GTID (every flags2 value over the usual body, with its padding's bytes set or not),
    the XID (bodies of 0 to 12 bytes) and the ANNOTATE_ROWS (empty or not) that the C framer
    decodes in place, or hands back: the Python step's events."""
    head = LogBuilder().header().bytes()
    bodies = [(XID, bytes(range(n))) for n in range(13)]
    bodies += [(ANNOTATE_ROWS, b""), (ANNOTATE_ROWS, b"INSERT INTO t VALUES (1)\0")]
    for flags2 in range(256):
        for padding in (b"\0" * 6, b"\0" * 5 + b"\x01", b"\x02" + b"\0" * 5):
            bodies.append((MARIADB_GTID, struct.pack("<QIB", 9, 3, flags2) + padding))
        bodies.append((MARIADB_GTID, struct.pack("<QIB", 9, 3, flags2) + b"\0" * 14))
    for code, body in bodies:
        assert_same(head + sealed(code, body, len(head)))


@settings(max_examples=200, deadline=None)
@given(log=logs(), data=st.data())
def test_a_rows_body_that_does_not_frame_is_the_python_steps_error(
    log: LogBuilder, data: st.DataObject
) -> None:
    """Bytes of a rows event's post-header and bitmaps overwritten, its CRC32 right: the C
    framer hands it back, and the Python step raises the precise error."""
    buf = bytearray(log.bytes())
    start = data.draw(st.sampled_from(rows_starts(log)))
    at = start + 19 + data.draw(st.integers(0, 15))
    patch = data.draw(st.binary(min_size=1, max_size=4))
    buf[at : at + len(patch)] = patch
    reseal(buf, log.offsets, at)
    assert_same(bytes(buf))


def test_the_c_framer_reads_a_real_servers_log_as_the_python_step_does() -> None:
    raw = TYPES_BINLOG.read_bytes()
    events, error, end, _ = outcome(raw)
    assert error is None and end == len(raw)
    assert any(type(e.payload).__name__ == "RowsEvent" for e in events)
    assert_same(raw)
    for position in range(4, len(raw), 97):
        damaged = bytearray(raw)
        damaged[position] ^= 0x10
        assert_same(bytes(damaged))
