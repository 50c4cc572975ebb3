"""Rows events and the rows in them, on MariaDB's own bytes and on constructed events."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from decimal import Decimal

import pytest

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.constants import EventType
from binlake.binlog.errors import InvalidEventError, UnsupportedTypeError, ValueDecodeError
from binlake.binlog.rowcodec import image_decoder
from binlake.binlog.rows import (
    ABSENT,
    RowsEvent,
    RowsFlag,
    decode_rows,
    decode_rows_event,
    encode_rows,
    encode_rows_event,
    make_rows_event,
)
from binlake.binlog.stream import EventStream
from binlake.binlog.tablemap import TableMap
from binlog_builder import MARIADB_CTX
from binlog_fixtures import (
    TYPES_BINLOG,
    UTF8MB4,
    decoded_changes,
    load_expected,
    strict,
    table_map,
)

TM = table_map(
    (T.LONG, T.VARCHAR, T.DATETIME2, T.NEWDECIMAL),
    (0, 40, 3, 10 << 8 | 2),
    charsets=(None, UTF8MB4, None, None),
)
ROW_1 = (1, "één", dt.datetime(2020, 5, 6, 7, 8, 9, 123000), Decimal("-12.30"))
ROW_2 = (2, None, None, Decimal("0.01"))


# ---- the recorded MariaDB binlog ----------------------------------------------------------------


def test_recorded_binlog_decodes_to_exactly_the_values_written() -> None:
    expected, hints = load_expected()
    got = [change for _, change in decoded_changes(TYPES_BINLOG.read_bytes(), hints)]
    assert len(got) == len(expected)
    for index, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        assert strict(mine) == strict(theirs), f"change #{index} of {theirs.table}"


def test_every_rows_event_of_the_recorded_binlog_re_encodes_byte_for_byte() -> None:
    maps: dict[int, TableMap] = {}
    count = 0
    for event in EventStream(TYPES_BINLOG.read_bytes()):
        payload = event.payload
        if isinstance(payload, TableMap):
            maps[payload.table_id] = payload
        if not isinstance(payload, RowsEvent):
            continue
        count += 1
        body = event.raw[19:-4]
        assert encode_rows_event(payload, MARIADB_CTX) == body
        tm = maps[payload.table_id]
        rows = decode_rows(payload, tm)
        again = encode_rows(
            payload.kind, tm, rows, payload.columns_present, payload.columns_present_after
        )
        assert again == payload.rows, f"rows event at {event.offset}"
    assert count > 30


def test_mariadb_writes_v1_rows_events_with_statement_end_flags() -> None:
    kinds = set()
    for event in EventStream(TYPES_BINLOG.read_bytes()):
        if isinstance(event.payload, RowsEvent):
            kinds.add((event.payload.type_code, event.payload.version))
            assert event.payload.is_statement_end
    assert kinds == {(23, 1), (24, 1), (25, 1)}


def test_minimal_row_image_leaves_unlogged_columns_absent() -> None:
    _, hints = load_expected()
    changes = [c for _, c in decoded_changes(TYPES_BINLOG.read_bytes(), hints)]
    minimal = [c for c in changes if c.table.endswith(".minimal")]
    update = next(c for c in minimal if c.kind == "update")
    assert update.before == (1, ABSENT, ABSENT, ABSENT, ABSENT)
    assert update.after == (ABSENT, 5, ABSENT, ABSENT, ABSENT)


# ---- constructed events -------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("kind", ["write", "update", "delete"])
def test_rows_event_round_trips(kind: str, version: int) -> None:
    rows = {
        "write": [(None, ROW_1), (None, ROW_2)],
        "delete": [(ROW_1, None)],
        "update": [(ROW_1, ROW_2), (ROW_2, ROW_1)],
    }[kind]
    extra = b"\x00\x01\x02" if version == 2 else b""
    ev = make_rows_event(kind, TM, rows, version=version, extra_data=extra)  # type: ignore[arg-type]
    body = encode_rows_event(ev, MARIADB_CTX)
    decoded = decode_rows_event(ev.type_code, body, MARIADB_CTX, 0)
    assert decoded == ev
    assert decoded.extra_data == extra
    assert decode_rows(decoded, TM) == rows


def test_v2_type_codes_and_extra_data_length_includes_itself() -> None:
    ev = make_rows_event("write", TM, [(None, ROW_2)], version=2, extra_data=b"ab")
    assert ev.type_code == EventType.WRITE_ROWS_V2
    body = encode_rows_event(ev, MARIADB_CTX)
    assert body[8:12] == b"\x04\x00ab"


def test_partial_bitmaps_put_absent_in_the_missing_columns() -> None:
    before, after = 0b0001, 0b1010
    rows = [((1, ABSENT, ABSENT, ABSENT), (ABSENT, "x", ABSENT, Decimal("1.00")))]
    ev = make_rows_event("update", TM, rows, columns_present=before, columns_present_after=after)
    assert (ev.columns_present, ev.columns_present_after) == (before, after)
    assert decode_rows(ev, TM) == rows


def test_only_full_bitmaps_make_whole_images() -> None:
    assert make_rows_event("update", TM, [(ROW_1, ROW_2)]).whole_images
    assert make_rows_event("write", TM, [(None, ROW_1)]).whole_images
    minimal_after = [(ROW_1, (ABSENT, "x", ABSENT, Decimal("1.00")))]
    ev = make_rows_event("update", TM, minimal_after, columns_present_after=0b1010)
    assert not ev.whole_images
    ev = make_rows_event("delete", TM, [((1, ABSENT, ABSENT, ABSENT), None)], columns_present=1)
    assert not ev.whole_images


def test_update_before_and_after_images_are_paired() -> None:
    ev = make_rows_event("update", TM, [(ROW_1, ROW_2)])
    ((before, after),) = decode_rows(ev, TM)
    assert (before, after) == (ROW_1, ROW_2)


def test_statement_end_flag() -> None:
    ev = make_rows_event("write", TM, [(None, ROW_1)], flags=RowsFlag.NO_FOREIGN_KEY_CHECKS)
    assert not ev.is_statement_end
    assert make_rows_event("write", TM, [(None, ROW_1)]).is_statement_end


def test_truncated_rows_data_raises_invalid_event_error_with_offset() -> None:
    ev = make_rows_event("write", TM, [(None, ROW_1), (None, ROW_1)])
    short = replace(ev, rows=ev.rows[:-3])
    with pytest.raises(InvalidEventError) as info:
        decode_rows(short, TM, offset=777)
    assert info.value.offset == 777
    assert info.value.table == "db.t"


def test_leftover_bytes_after_the_last_row_raise() -> None:
    ev = make_rows_event("write", TM, [(None, ROW_2)])
    with pytest.raises(InvalidEventError) as info:
        decode_rows(replace(ev, rows=ev.rows + b"\x00"), TM, offset=5)
    assert info.value.offset == 5


def test_invalid_text_names_the_column() -> None:
    ev = make_rows_event("write", TM, [(None, (1, "ab", None, None))])
    broken = replace(ev, rows=ev.rows.replace(b"ab", b"a\xff"))
    with pytest.raises(ValueDecodeError) as info:
        decode_rows(broken, TM, offset=12)
    assert "c1" in info.value.message and info.value.offset == 12


def test_rows_event_for_another_table_shape_is_rejected() -> None:
    ev = make_rows_event("write", TM, [(None, ROW_1)])
    other = replace(TM, column_types=TM.column_types[:3], column_metadata=TM.column_metadata[:3])
    with pytest.raises(InvalidEventError, match="does not match"):
        decode_rows(ev, replace(other, nullable=(True,) * 3, column_charsets=None))


def test_empty_column_bitmap_with_rows_is_rejected_not_looped_on() -> None:
    ev = make_rows_event("write", TM, [(None, ROW_1)])
    with pytest.raises(InvalidEventError, match="empty column bitmap"):
        decode_rows(replace(ev, columns_present=0), TM)


@pytest.mark.parametrize(
    "type_code",
    [
        EventType.WRITE_ROWS_COMPRESSED_V1,
        EventType.UPDATE_ROWS_COMPRESSED_V1,
        EventType.DELETE_ROWS_COMPRESSED,
    ],
)
def test_compressed_rows_events_are_unsupported_with_the_remedy(type_code: int) -> None:
    with pytest.raises(UnsupportedTypeError) as info:
        decode_rows_event(type_code, b"\x00" * 20, MARIADB_CTX, 300)
    assert "log_bin_compress=OFF" in info.value.hint
    assert info.value.event_type is not None and "compressed" in info.value.event_type.lower()
    assert info.value.offset == 300


@pytest.mark.parametrize("cut", [0, 3, 7, 8, 9, 10])
def test_truncated_rows_event_header_raises(cut: int) -> None:
    body = encode_rows_event(make_rows_event("update", TM, [(ROW_1, ROW_2)]), MARIADB_CTX)
    with pytest.raises(InvalidEventError) as info:
        decode_rows_event(EventType.UPDATE_ROWS_V1, body[:cut], MARIADB_CTX, 64)
    assert info.value.offset == 64


def test_hints_are_part_of_the_compiled_decoder() -> None:
    tm = table_map((T.STRING,), (T.STRING << 8 | 4,), charsets=(63,))
    ev = make_rows_event("write", tm, [(None, (b"\x01\x02\x03\x04",))])
    assert decode_rows(ev, tm) == [(None, (b"\x01\x02\x03\x04",))]
    assert decode_rows(ev, tm, {0: "inet4"}) == [(None, ("1.2.3.4",))]


def test_image_decoder_decodes_a_single_image() -> None:
    ev = make_rows_event("write", TM, [(None, ROW_1)])
    row, end = image_decoder(TM, 0b1111)(ev.rows, 0)
    assert (row, end) == (ROW_1, len(ev.rows))


def test_null_bitmap_padding_bits_are_set_like_mariadb_writes_them() -> None:
    ev = make_rows_event("write", TM, [(None, ROW_2)])
    assert ev.rows[0] == 0b11110110  # columns 1 and 2 NULL; bits 4-7 are padding
