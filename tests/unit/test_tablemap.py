"""TABLE_MAP events: decoding MariaDB's bytes, optional metadata, and the byte-exact encoder."""

from __future__ import annotations

from dataclasses import replace

import pytest

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.constants import EventType
from binlake.binlog.errors import InvalidEventError, UnsupportedTypeError
from binlake.binlog.format import Flavor, FormatContext
from binlake.binlog.stream import EventStream
from binlake.binlog.tablemap import (
    TableMap,
    decode_table_map,
    encode_table_map,
    packed_int,
    read_packed_int,
    real_type_and_length,
)
from binlog_builder import MARIADB_CTX
from binlog_fixtures import TYPES_BINLOG, table_map

MYSQL_CTX = replace(FormatContext.default(), flavor=Flavor.MYSQL)

#: Body of a MariaDB 10.11 TABLE_MAP (binlog_row_metadata=FULL) for
#: t.u (id INT PRIMARY KEY, u UUID, i4 INET4, i6 INET6, b16 BINARY(16), g GEOMETRY, p POINT,
#: j JSON, e ENUM('a','b'), s SET('x','y'), c CHAR(10) latin1, v VARCHAR(300), bl BLOB,
#: tx TEXT, y YEAR, bt BIT(10)).
MARIADB_BODY = bytes.fromhex(
    "120000000000010001740001750010 03fefefefeffff fcfefefe0ffcfc0d10 17"
    "fe10fe04fe10fe10040404f701f801fe0ab0040202 0201 feff"
    "010140 02093f062e0708082d0a2d 07020001"
    "042802696401750269340269360362313601670170016a0165017301630176026"
    "26c027478017902627 4 0a012d 050502017801790605020161016208 0100".replace(" ", "")
)


def fixture_table_maps() -> list[tuple[int, bytes, TableMap]]:
    data = TYPES_BINLOG.read_bytes()
    out = []
    for event in EventStream(data):
        if isinstance(event.payload, TableMap):
            body = event.raw[19:-4]
            out.append((event.offset, body, event.payload))
    return out


def test_mariadb_full_metadata_table_map_decodes_every_field() -> None:
    tm = decode_table_map(MARIADB_BODY, MARIADB_CTX, 1256)
    assert (tm.table_id, tm.flags, tm.qualified_name, tm.column_count) == (18, 1, "t.u", 16)
    assert tm.column_types[:5] == (T.LONG, T.STRING, T.STRING, T.STRING, T.STRING)
    assert tm.column_metadata[1] == 0xFE10  # UUID: real type STRING, 16 bytes
    assert tm.column_metadata[15] == 1 << 8 | 2  # BIT(10): 1 byte + 2 bits
    assert tm.nullable == (False,) + (True,) * 15
    assert tm.column_names is not None and tm.column_names[:3] == ("id", "u", "i4")
    assert tm.primary_key == (0,) and tm.primary_key_prefixes is None
    assert tm.enum_labels is not None and tm.enum_labels[8] == (b"a", b"b")
    assert tm.set_labels is not None and tm.set_labels[9] == (b"x", b"y")
    assert tm.geometry_types is not None and tm.geometry_types[5:7] == (0, 1)
    assert tm.metadata_order == (1, 2, 7, 4, 10, 5, 6, 8)


def test_default_charset_with_exceptions_resolves_a_collation_per_column() -> None:
    tm = decode_table_map(MARIADB_BODY, MARIADB_CTX, 0)
    assert tm.default_charset == 63
    assert tm.column_charsets == (
        None, 63, 63, 63, 63, 63, 63, 46, None, None, 8, 45, 63, 45, None, None,
    )  # fmt: skip
    assert tm.collation(10) == 8  # CHAR(10) latin1
    assert tm.collation(8) == 45  # the ENUM, from ENUM_AND_SET_DEFAULT_CHARSET
    assert tm.collation(0) is None


def test_mariadb_uuid_and_inet_columns_look_like_binary_columns() -> None:
    tm = decode_table_map(MARIADB_BODY, MARIADB_CTX, 0)
    uuid, inet4, inet6, binary16 = 1, 2, 3, 4
    assert tm.column_metadata[uuid] == tm.column_metadata[inet6] == tm.column_metadata[binary16]
    assert real_type_and_length(T.STRING, tm.column_metadata[inet4]) == (T.STRING, 4)
    assert {tm.collation(c) for c in (uuid, inet4, inet6, binary16)} == {63}


def test_mariadb_logs_year_signedness_as_a_numeric_column() -> None:
    tm = decode_table_map(MARIADB_BODY, MARIADB_CTX, 0)
    assert tm.unsigned is not None
    assert tm.unsigned[0] is False and tm.unsigned[14] is True  # id INT, y YEAR (unsigned)


def test_mysql_flavor_does_not_count_year_or_geometry() -> None:
    tm = table_map(
        (T.YEAR, T.LONG, T.GEOMETRY, T.VARCHAR),
        (0, 0, 4, 40),
        unsigned=(False, True, False, False),
        charsets=(None, None, None, 8),
    )
    body = encode_table_map(tm, MYSQL_CTX)
    assert b"\x01\x01\x80" in body  # SIGNEDNESS: one numeric column (the INT), unsigned
    assert b"\x03\x01\x08" in body  # COLUMN_CHARSET: one character column (the VARCHAR)
    assert decode_table_map(body, MYSQL_CTX, 0) == replace(tm, metadata_order=(1, 3, 4))


def test_every_table_map_of_the_recorded_binlog_re_encodes_byte_for_byte() -> None:
    maps = fixture_table_maps()
    assert len(maps) > 10
    for offset, body, tm in maps:
        assert encode_table_map(tm, MARIADB_CTX) == body, f"table map at {offset}"


def test_long_char_real_type_rule() -> None:
    assert real_type_and_length(T.STRING, 0xCEFC) == (T.STRING, 1020)
    assert real_type_and_length(T.STRING, 0xFE0A) == (T.STRING, 10)
    assert real_type_and_length(T.STRING, 0xF701) == (T.ENUM, 1)
    assert real_type_and_length(T.STRING, 0xF808) == (T.SET, 8)
    assert real_type_and_length(T.VARCHAR, 1200) == (T.VARCHAR, 1200)


def test_unknown_optional_metadata_field_is_kept_raw_and_re_encoded() -> None:
    body = MARIADB_BODY + bytes((200, 3)) + b"xyz"
    tm = decode_table_map(body, MARIADB_CTX, 0)
    assert tm.unknown_metadata == ((200, b"xyz"),)
    assert encode_table_map(tm, MARIADB_CTX) == body


def test_table_map_without_optional_metadata_has_none_fields() -> None:
    tm = table_map((T.LONG, T.VARCHAR), (0, 40))
    plain = replace(tm, unsigned=None, column_names=None)
    tm2 = decode_table_map(encode_table_map(plain, MARIADB_CTX), MARIADB_CTX, 0)
    assert tm2 == plain
    assert (tm2.unsigned, tm2.column_charsets, tm2.column_names) == (None, None, None)
    assert tm2.column_name(1) == "@2"


def test_primary_key_with_prefix_round_trips() -> None:
    tm = table_map(
        (T.LONG, T.VARCHAR),
        (0, 400),
        charsets=(None, 45),
        primary_key=(1, 0),
        primary_key_prefixes=(10, 0),
    )
    body = encode_table_map(tm, MARIADB_CTX)
    assert bytes((9, 4, 1, 10, 0, 0)) in body
    decoded = decode_table_map(body, MARIADB_CTX, 0)
    assert (decoded.primary_key, decoded.primary_key_prefixes) == ((1, 0), (10, 0))


def test_column_visibility_bitmap_is_msb_first() -> None:
    tm = table_map((T.LONG, T.LONG, T.LONG), visibility=(True, False, True))
    body = encode_table_map(tm, MYSQL_CTX)
    assert body.endswith(bytes((12, 1, 0b10100000)))
    assert decode_table_map(body, MYSQL_CTX, 0).visibility == (True, False, True)


def test_four_byte_table_id_when_the_post_header_is_six_bytes() -> None:
    lengths = list(MARIADB_CTX.post_header_lengths)
    lengths[EventType.TABLE_MAP - 1] = 6
    old_ctx = replace(MARIADB_CTX, post_header_lengths=tuple(lengths))
    tm = table_map((T.LONG,))
    body = encode_table_map(tm, old_ctx)
    assert body[:4] == (7).to_bytes(4, "little") and body[4:6] == b"\x01\x00"
    assert decode_table_map(body, old_ctx, 0) == replace(tm, metadata_order=(1, 4))


@pytest.mark.parametrize("cut", [1, 7, 10, 14, 20, 40, 56, 59, 62, 100, 136])
def test_truncated_table_map_raises_invalid_event_error_with_offset(cut: int) -> None:
    with pytest.raises(InvalidEventError) as info:
        decode_table_map(MARIADB_BODY[:cut], MARIADB_CTX, 4242)
    assert info.value.offset == 4242
    assert info.value.event_type == "Table_map"


def test_metadata_block_length_that_does_not_match_the_types_is_rejected() -> None:
    tm = table_map((T.LONG, T.VARCHAR), (0, 40), charsets=(None, 45))
    body = bytearray(encode_table_map(tm, MARIADB_CTX))
    meta_len_at = 8 + 4 + 3 + 1 + 2  # table id+flags, "db", "t", count, 2 types
    assert body[meta_len_at] == 2
    body[meta_len_at] = 1
    with pytest.raises(InvalidEventError, match="metadata"):
        decode_table_map(bytes(body), MARIADB_CTX, 0)


def test_unknown_column_type_is_unsupported_and_names_the_table() -> None:
    tm = table_map((T.LONG,))
    body = bytearray(encode_table_map(tm, MARIADB_CTX))
    body[8 + 4 + 3 + 1] = 100  # the type byte of the only column
    with pytest.raises(UnsupportedTypeError) as info:
        decode_table_map(bytes(body), MARIADB_CTX, 99)
    assert (info.value.table, info.value.offset) == ("db.t", 99)


def test_charset_list_shorter_than_the_character_columns_is_rejected() -> None:
    tm = table_map((T.VARCHAR, T.VARCHAR), (40, 40), charsets=(45, 8))
    body = encode_table_map(tm, MARIADB_CTX)
    broken = body.replace(bytes((3, 2, 45, 8)), bytes((3, 1, 45)))
    with pytest.raises(InvalidEventError):
        decode_table_map(broken, MARIADB_CTX, 0)


@pytest.mark.parametrize("value", [0, 250, 251, 65535, 65536, 2**24 - 1, 2**24, 2**40])
def test_packed_integers_round_trip_in_their_shortest_form(value: int) -> None:
    data = packed_int(value)
    assert read_packed_int(data, 0) == (value, len(data))
    assert len(data) == (1 if value < 251 else 3 if value < 2**16 else 4 if value < 2**24 else 9)


def test_the_same_body_decodes_to_the_same_object() -> None:
    # A table map precedes every statement; decoding it again must cost a lookup, and the
    # row decoders cached per table map must be found by identity.
    first = decode_table_map(MARIADB_BODY, MARIADB_CTX, 0)
    assert decode_table_map(memoryview(bytes(MARIADB_BODY)), MARIADB_CTX, 10) is first
    with pytest.raises(InvalidEventError):  # memoized per flavor: MySQL's rules differ
        decode_table_map(MARIADB_BODY, replace(MARIADB_CTX, flavor=Flavor.MYSQL), 0)


def test_equal_table_maps_hash_equal_whatever_their_cached_hash() -> None:
    tm = table_map((T.LONG, T.VARCHAR), (0, 40), charsets=(None, 45))
    twin = replace(tm)
    assert hash(tm) == hash(twin) and tm == twin
    assert replace(tm, table="other") != tm
    assert "_hash" not in repr(tm)
