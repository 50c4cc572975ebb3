"""Column values: bytes of one value <-> exact Python values, type by type."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from typing import Any

import pytest

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.encodings import temporal
from binlake.binlog.encodings.charsets import COLLATIONS, codec_for_collation, decode_text
from binlake.binlog.encodings.decimals import decimal_size, decode_decimal, encode_decimal
from binlake.binlog.errors import InvalidEventError, UnsupportedTypeError, ValueDecodeError
from binlake.binlog.tablemap import BLOB_COMPRESSED
from binlake.binlog.values import (
    ABSENT,
    ColumnSpec,
    Geometry,
    ZeroDate,
    decode_value,
    encode_value,
    format_inet4,
    format_inet6,
    format_uuid,
)
from binlog_fixtures import BINARY, LATIN1, UTF8MB4, spec

UTC = dt.UTC


def roundtrip(column: ColumnSpec, value: object) -> Any:
    data = encode_value(column, value)
    decoded, end = decode_value(column, data, 0)
    assert end == len(data)
    return decoded


# ---- integers and floats ----------------------------------------------------------------------


def test_unsigned_bigint_max_decodes_exactly() -> None:
    column = spec(T.LONGLONG, unsigned=True)
    assert decode_value(column, b"\xff" * 8, 0) == (2**64 - 1, 8)


def test_signed_bigint_min_decodes_exactly() -> None:
    assert decode_value(spec(T.LONGLONG), b"\x00" * 7 + b"\x80", 0) == (-(2**63), 8)


@pytest.mark.parametrize(
    ("type_code", "data", "signed", "unsigned"),
    [
        (T.TINY, b"\xff", -1, 255),
        (T.SHORT, b"\x00\x80", -32768, 32768),
        (T.INT24, b"\xff\xff\xff", -1, 16777215),
        (T.INT24, b"\x00\x00\x80", -8388608, 8388608),
        (T.LONG, b"\xff\xff\xff\x7f", 2**31 - 1, 2**31 - 1),
        (T.LONG, b"\x00\x00\x00\x80", -(2**31), 2**31),
    ],
)
def test_integer_signedness_follows_the_signedness_metadata(
    type_code: int, data: bytes, signed: int, unsigned: int
) -> None:
    assert decode_value(spec(type_code), data, 0)[0] == signed
    assert decode_value(spec(type_code, unsigned=True), data, 0)[0] == unsigned


def test_integers_are_signed_when_the_table_map_has_no_signedness() -> None:
    column = spec(T.TINY, unsigned=False)
    assert decode_value(column, b"\x80", 0)[0] == -128


def test_float_column_yields_the_exact_value_of_its_four_bytes() -> None:
    data = struct.pack("<f", 0.1)
    value = decode_value(spec(T.FLOAT, 4), data, 0)[0]
    assert value == struct.unpack("<f", data)[0]
    assert value != 0.1  # the float32 nearest to 0.1, not the double
    assert encode_value(spec(T.FLOAT, 4), value) == data


def test_double_round_trips_bit_for_bit() -> None:
    for value in (5e-324, -1.7976931348623157e308, -0.0):
        assert struct.pack("<d", roundtrip(spec(T.DOUBLE, 8), value)) == struct.pack("<d", value)


def test_bit_64_all_ones_is_an_exact_int() -> None:
    column = spec(T.BIT, 8 << 8)
    assert decode_value(column, b"\xff" * 8, 0) == (2**64 - 1, 8)


def test_bit_10_uses_two_bytes_big_endian() -> None:
    column = spec(T.BIT, 1 << 8 | 2)
    assert decode_value(column, b"\x03\xff", 0) == (1023, 2)


def test_bit_value_wider_than_the_column_raises_value_decode_error() -> None:
    with pytest.raises(ValueDecodeError, match="BIT"):
        decode_value(spec(T.BIT, 1), b"\x03", 0)


@pytest.mark.parametrize(("raw", "year"), [(0, 0), (1, 1901), (100, 2000), (255, 2155)])
def test_year_byte_is_offset_from_1900_except_zero(raw: int, year: int) -> None:
    assert decode_value(spec(T.YEAR), bytes((raw,)), 0)[0] == year
    assert encode_value(spec(T.YEAR), year) == bytes((raw,))


# ---- decimals -----------------------------------------------------------------------------------


def test_decimal_65_30_decodes_every_digit() -> None:
    text = "-" + "9" * 35 + "." + "9" * 30
    column = spec(T.NEWDECIMAL, 65 << 8 | 30)
    assert str(roundtrip(column, Decimal(text))) == text


def test_decimal_keeps_the_column_scale() -> None:
    data = bytes.fromhex("800132")  # DECIMAL(5,2) 1.50, as MariaDB wrote it
    value, end = decode_value(spec(T.NEWDECIMAL, 5 << 8 | 2), data, 0)
    assert (str(value), end) == ("1.50", 3)


def test_negative_decimal_has_inverted_bytes() -> None:
    assert encode_decimal(Decimal("-1.50"), 5, 2) == bytes.fromhex("7ffecd")
    assert decode_decimal(bytes.fromhex("7ffecd"), 0, 5, 2) == (Decimal("-1.50"), 3)


def test_decimal_without_integer_digits() -> None:
    assert str(roundtrip(spec(T.NEWDECIMAL, 5 << 8 | 5), Decimal("-0.99999"))) == "-0.99999"


def test_decimal_value_ignores_the_decimal_context_precision() -> None:
    value = roundtrip(spec(T.NEWDECIMAL, 40 << 8), Decimal("1" * 40))
    assert value == Decimal("1" * 40)


def test_decimal_group_with_too_many_digits_raises_value_decode_error() -> None:
    data = bytes.fromhex("80ffffffff")  # DECIMAL(10,0): a 9-digit group holding 4294967295
    with pytest.raises(ValueDecodeError, match="DECIMAL"):
        decode_value(spec(T.NEWDECIMAL, 10 << 8), data, 0)


def test_decimal_sizes_match_the_server_formula() -> None:
    assert decimal_size(10, 2) == 5
    assert decimal_size(65, 30) == 30
    assert decimal_size(20, 0) == 9


def test_impossible_decimal_declaration_is_rejected() -> None:
    with pytest.raises(ValueDecodeError):
        spec(T.NEWDECIMAL, 5 << 8 | 6)


# ---- dates and times ----------------------------------------------------------------------------


@pytest.mark.parametrize("fsp", range(7))
def test_datetime2_round_trips_at_every_precision(fsp: int) -> None:
    micro = 123456 // 10 ** (6 - fsp) * 10 ** (6 - fsp)
    value = dt.datetime(2024, 2, 29, 23, 59, 58, micro)
    column = spec(T.DATETIME2, fsp)
    assert len(encode_value(column, value)) == temporal.datetime2_size(fsp)
    assert roundtrip(column, value) == value


def test_zero_datetime_is_a_zero_date_with_the_server_text() -> None:
    value = decode_value(spec(T.DATETIME2, 3), bytes.fromhex("80000000000000"), 0)[0]
    assert value == ZeroDate(0, 0, 0, fsp=3)
    assert value.text == "0000-00-00 00:00:00.000"


def test_partial_zero_date_is_kept_with_its_fields() -> None:
    value = roundtrip(spec(T.DATE), ZeroDate(2020, 0, 15, has_time=False))
    assert isinstance(value, ZeroDate)
    assert (value.year, value.month, value.day, str(value)) == (2020, 0, 15, "2020-00-15")


def test_invalid_calendar_date_is_a_zero_date_not_a_guess() -> None:
    data = bytes.fromhex("5ec80f")  # 2020-02-30 from an ALLOW_INVALID_DATES table
    value = decode_value(spec(T.DATE), data, 0)[0]
    assert isinstance(value, ZeroDate)
    assert value.text == "2020-02-30"


def test_datetime2_with_minute_61_raises_value_decode_error() -> None:
    data = temporal.encode_datetime2(ZeroDate(2020, 1, 1, 0, 61, 0), 0)
    with pytest.raises(ValueDecodeError, match="out of range"):
        decode_value(spec(T.DATETIME2, 0), data, 0)


def test_datetime2_fraction_beyond_one_second_raises_value_decode_error() -> None:
    data = temporal.encode_datetime2(dt.datetime(2020, 1, 1), 0) + b"\xff"
    with pytest.raises(ValueDecodeError):
        decode_value(spec(T.DATETIME2, 2), data, 0)


def test_timestamp2_is_utc_aware() -> None:
    value = decode_value(spec(T.TIMESTAMP2, 0), (2**31 - 1).to_bytes(4, "big"), 0)[0]
    assert value == dt.datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC)
    assert value.tzinfo is UTC


def test_timestamp2_zero_is_the_zero_date() -> None:
    value = decode_value(spec(T.TIMESTAMP2, 6), bytes(7), 0)[0]
    assert value == ZeroDate(0, 0, 0, fsp=6)


@pytest.mark.parametrize("fsp", range(7))
def test_negative_time2_with_fraction_round_trips(fsp: int) -> None:
    micro = 999999 // 10 ** (6 - fsp) * 10 ** (6 - fsp)
    value = -dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=micro)
    assert roundtrip(spec(T.TIME2, fsp), value) == value


def test_time2_minus_half_second_matches_the_server_bytes() -> None:
    # TIME(1) '-00:00:00.5' is int part -1 (0x7fffff) and fraction byte 0xce (= -50)
    data = bytes.fromhex("7fffffce")
    assert decode_value(spec(T.TIME2, 1), data, 0)[0] == -dt.timedelta(milliseconds=500)
    assert encode_value(spec(T.TIME2, 1), -dt.timedelta(milliseconds=500)) == data


def test_time2_beyond_24_hours() -> None:
    assert roundtrip(spec(T.TIME2, 0), dt.timedelta(hours=100)) == dt.timedelta(hours=100)


def test_old_datetime_is_an_integer_yyyymmddhhmmss() -> None:
    data = (20200015010203).to_bytes(8, "little")
    value = decode_value(spec(T.DATETIME), data, 0)[0]
    assert value == ZeroDate(2020, 0, 15, 1, 2, 3)
    assert roundtrip(spec(T.DATETIME), dt.datetime(2021, 12, 31, 23, 59, 59)) == dt.datetime(
        2021, 12, 31, 23, 59, 59
    )


def test_old_time_and_timestamp() -> None:
    data = (-8385959).to_bytes(3, "little", signed=True)
    assert decode_value(spec(T.TIME), data, 0)[0] == -dt.timedelta(hours=838, seconds=3599)
    assert decode_value(spec(T.TIMESTAMP), bytes(4), 0)[0] == ZeroDate(0, 0, 0)
    stamp = dt.datetime(2021, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert roundtrip(spec(T.TIMESTAMP), stamp) == stamp


def test_fractional_digits_above_six_are_an_invalid_table_map() -> None:
    with pytest.raises(InvalidEventError):
        spec(T.DATETIME2, 7)


# ---- strings ------------------------------------------------------------------------------------


def test_utf8mb4_four_byte_characters_decode() -> None:
    column = spec(T.VARCHAR, 400, collation=UTF8MB4)
    assert roundtrip(column, "a😀𝄞") == "a😀𝄞"


def test_invalid_utf8_in_varchar_raises_value_decode_error() -> None:
    column = spec(T.VARCHAR, 40, collation=UTF8MB4)
    with pytest.raises(ValueDecodeError, match=r"c0 .*not valid utf-8"):
        decode_value(column, b"\x03a\xc0b", 0)


def test_latin1_is_cp1252_with_the_holes_filled_as_mariadb_does() -> None:
    column = spec(T.VARCHAR, 40, collation=LATIN1)
    assert decode_value(column, b"\x03\x80\x81\xff", 0)[0] == "€\x81ÿ"


def test_varchar_longer_than_255_bytes_has_a_two_byte_length() -> None:
    column = spec(T.VARCHAR, 1200, collation=UTF8MB4)
    assert encode_value(column, "ab") == b"\x02\x00ab"


def test_binary_char_is_padded_back_to_its_length() -> None:
    column = spec(T.STRING, T.STRING << 8 | 8, collation=BINARY)
    assert decode_value(column, b"\x02ab", 0)[0] == b"ab" + bytes(6)
    assert encode_value(column, b"ab" + bytes(6)) == b"\x02ab"


def test_long_char_length_bits_come_from_the_real_type_byte() -> None:
    # CHAR(255) utf8mb4 = 1020 bytes: MariaDB writes 0xCEFC (0xFE with 0x300 >> 4 XOR-ed in)
    column = spec(T.STRING, 0xCEFC, collation=UTF8MB4)
    assert (column.type, column.length) == (T.STRING, 1020)
    assert decode_value(column, b"\x03\x00abc", 0) == ("abc", 5)


def test_blob_pack_length_three_reads_a_24_bit_length() -> None:
    column = spec(T.BLOB, 3, collation=BINARY)
    assert decode_value(column, b"\x02\x00\x00xy", 0) == (b"xy", 5)


def test_text_without_charset_metadata_asks_for_full_row_metadata() -> None:
    with pytest.raises(UnsupportedTypeError) as info:
        spec(T.VARCHAR, 40, collation=None)
    assert "binlog_row_metadata=FULL" in info.value.hint


def test_charset_without_exact_python_codec_is_unsupported() -> None:
    armscii8 = next(cid for cid, (cs, _) in COLLATIONS.items() if cs == "armscii8")
    with pytest.raises(UnsupportedTypeError, match="armscii8"):
        codec_for_collation(armscii8)


def test_collation_table_covers_mariadb_ids() -> None:
    assert COLLATIONS[45] == ("utf8mb4", "utf8mb4_general_ci")
    assert COLLATIONS[63] == ("binary", "binary")
    assert codec_for_collation(63) is None
    assert codec_for_collation(224) == "utf-8"  # utf8mb4_unicode_ci


@pytest.mark.parametrize(
    ("charset", "data", "text"),
    [
        ("sjis", b"\x81\x5f", "\\"),
        ("cp932", b"\x81\x5f", "\uff3c"),  # FULLWIDTH REVERSE SOLIDUS
        ("euckr", b"\x81\x41", "갂"),
        ("ucs2", b"\x03\xa9", "Ω"),
        ("utf16", b"\xd8\x34\xdd\x1e", "𝄞"),
        ("big5", b"\xf9\xd6", "碁"),
        ("greek", b"\xa1", "\u02bd"),  # MODIFIER LETTER REVERSED COMMA
    ],
)
def test_charset_codecs_match_mariadb(charset: str, data: bytes, text: str) -> None:
    assert decode_text(data, charset) == text


def test_ucs2_surrogate_pair_is_two_code_points_and_undecodable() -> None:
    with pytest.raises(ValueDecodeError):
        decode_text(b"\xd8\x34\xdd\x1e", "ucs2")


def test_cp932_rejects_the_single_bytes_mariadb_rejects() -> None:
    with pytest.raises(ValueDecodeError):
        decode_text(b"a\x80", "cp932")


# ---- ENUM, SET, GEOMETRY, JSON, MariaDB binary types --------------------------------------------


def enum_column(labels: tuple[bytes, ...], kind: int = T.ENUM, size: int = 1) -> ColumnSpec:
    per_column: dict[str, Any] = {"enum_labels" if kind == T.ENUM else "set_labels": (labels,)}
    return spec(T.STRING, kind << 8 | size, enum_set_charsets=(UTF8MB4,), **per_column)


def test_enum_decodes_to_its_label() -> None:
    column = enum_column((b"small", "mëdium".encode(), b"large"))
    assert decode_value(column, b"\x02", 0)[0] == "mëdium"


def test_enum_index_zero_is_the_empty_error_value() -> None:
    assert decode_value(enum_column((b"a",)), b"\x00", 0)[0] == ""


def test_enum_index_beyond_the_labels_raises_value_decode_error() -> None:
    with pytest.raises(ValueDecodeError):
        decode_value(enum_column((b"a",)), b"\x02", 0)


def test_set_joins_members_in_declared_order() -> None:
    column = enum_column((b"red", b"green", b"blue"), T.SET)
    assert decode_value(column, b"\x05", 0)[0] == "red,blue"
    assert encode_value(column, "blue,red") == b"\x05"


def test_set_bits_beyond_its_members_raise_value_decode_error() -> None:
    with pytest.raises(ValueDecodeError, match="SET"):
        decode_value(enum_column((b"a",), T.SET), b"\x02", 0)


def test_enum_label_invalid_in_its_charset_raises_value_decode_error() -> None:
    with pytest.raises(ValueDecodeError, match="label"):
        enum_column((b"\xff",))


def test_enum_without_labels_asks_for_full_row_metadata() -> None:
    with pytest.raises(UnsupportedTypeError) as info:
        spec(T.STRING, T.ENUM << 8 | 1)
    assert "binlog_row_metadata=FULL" in info.value.hint
    assert info.value.table == "db.t"


def test_geometry_is_srid_and_wkb() -> None:
    wkb = struct.pack("<BIdd", 1, 1, 1.5, -2.5)
    data = (25).to_bytes(4, "little") + (4326).to_bytes(4, "little") + wkb
    value = decode_value(spec(T.GEOMETRY, 4), data, 0)[0]
    assert value == Geometry(4326, wkb)


def test_geometry_shorter_than_an_srid_raises_value_decode_error() -> None:
    with pytest.raises(ValueDecodeError, match="SRID"):
        decode_value(spec(T.GEOMETRY, 4), b"\x02\x00\x00\x00ab", 0)


def test_mysql_json_column_is_decoded_to_text() -> None:
    literal_true = b"\x04\x01"  # MySQL binary JSON: literal, true
    data = len(literal_true).to_bytes(4, "little") + literal_true
    assert decode_value(spec(T.JSON, 4), data, 0)[0] == "true"


def test_mysql_json_text_round_trips_through_the_binary_form() -> None:
    column = spec(T.JSON, 4)
    text = '{"a": [1, "x", null, true]}'
    assert roundtrip(column, text) == text


def test_uuid_hint_gives_mariadb_canonical_text() -> None:
    column = spec(T.STRING, T.STRING << 8 | 16, collation=BINARY, hint="uuid")
    data = b"\x0e" + bytes.fromhex("123e4567e89b12d3a45642665544")  # trailing zeros stripped
    assert decode_value(column, data, 0)[0] == "123e4567-e89b-12d3-a456-426655440000"
    assert encode_value(column, "123e4567-e89b-12d3-a456-426655440000") == data


def test_uuid_column_without_hint_is_its_padded_bytes() -> None:
    column = spec(T.STRING, T.STRING << 8 | 16, collation=BINARY)
    assert decode_value(column, b"\x01\x12", 0)[0] == b"\x12" + bytes(15)


def test_hint_on_a_column_of_the_wrong_size_is_rejected() -> None:
    with pytest.raises(UnsupportedTypeError, match="hint"):
        spec(T.STRING, T.STRING << 8 | 8, collation=BINARY, hint="uuid")


@pytest.mark.parametrize(
    ("hexed", "text"),
    [
        ("00000000000000000000000000000000", "::"),
        ("00000000000000000000000000000001", "::1"),
        ("00000000000000000000000001020304", "::1.2.3.4"),
        ("00000000000000000000ffff01020304", "::ffff:1.2.3.4"),
        ("00000000000000000000ffff00000000", "::ffff:0.0.0.0"),
        ("00000000000000000000000000000100", "::100"),
        ("00000000000000000000000000010000", "::0.1.0.0"),
        ("00010000000000010000000000000001", "1:0:0:1::1"),
        ("00010000000000000001000000000001", "1::1:0:0:1"),
        ("fe800000000000000001000000000000", "fe80::1:0:0:0"),
        ("00000000000000000000000100000000", "::1:0:0"),
        ("20010db8000000000001000000000001", "2001:db8::1:0:0:1"),
        ("00010002000300040005000600070008", "1:2:3:4:5:6:7:8"),
    ],
)
def test_inet6_text_matches_mariadb(hexed: str, text: str) -> None:
    # expected texts are what MariaDB 10.11 SELECTs for these values
    assert format_inet6(bytes.fromhex(hexed)) == text


def test_inet4_and_uuid_text() -> None:
    assert format_inet4(b"\xc0\xa8\x01\x02") == "192.168.1.2"
    assert format_uuid(b"\xff" * 16) == "ffffffff-ffff-ffff-ffff-ffffffffffff"


def test_compressed_columns_are_unsupported_with_a_remedy() -> None:
    with pytest.raises(UnsupportedTypeError) as info:
        spec(BLOB_COMPRESSED, 2, collation=BINARY)
    assert "COMPRESSED" in info.value.hint


def test_absent_is_a_singleton_with_a_clean_repr() -> None:
    import copy
    import pickle

    assert repr(ABSENT) == "ABSENT"
    assert copy.deepcopy(ABSENT) is ABSENT
    assert pickle.loads(pickle.dumps(ABSENT)) is ABSENT
    assert not ABSENT


def test_value_running_past_the_buffer_raises_value_decode_error() -> None:
    column = spec(T.VARCHAR, 40, collation=UTF8MB4)
    with pytest.raises(ValueDecodeError, match="past"):
        decode_value(column, b"\x05ab", 0)
