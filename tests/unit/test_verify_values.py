"""`verify` normalises both sides through one encoding: what the source's SQL returns and what
Spark returns for the lake must encode identically exactly when the values are equal."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal

import pytest

from binlake.typemap import IcebergType as T
from binlake.verify.canonical import (
    VerifyColumn,
    encode,
    exact_decimal,
    key_text,
    lake_value,
    mapping_problem,
    parse_date,
    parse_datetime,
    parse_time,
    row_hash,
    source_converter,
    source_expression,
)
from binlake.verify.compare import KeyedComparison, MultisetComparison

UTC = dt.UTC


def col(kind: T, source: str, scale: int = 0, name: str = "c") -> VerifyColumn:
    return VerifyColumn(name, kind, scale, source)


def same(column: VerifyColumn, source_value: object, lake: object) -> bool:
    """Whether a source SQL value and a Spark value encode the same after normalisation."""
    left = encode(column, source_converter(column)(source_value))
    right = encode(column, lake_value(column, lake))
    return left == right


def test_decimals_compare_by_value_whatever_their_scale_or_exponent() -> None:
    dec = col(T.DECIMAL, "decimal", 10)
    assert same(dec, Decimal("-1E-10"), Decimal("-1.00E-10"))
    assert same(dec, Decimal("0.0000000000"), Decimal("0E-10"))
    assert not same(dec, Decimal("1.0000000001"), Decimal("1.0000000002"))
    big = Decimal("9" * 28 + "." + "9" * 10)
    assert exact_decimal(big) == (0, int("9" * 38), -10), "no rounding to 28 digits"
    assert same(col(T.DECIMAL, "bigint", 0), 2**64 - 1, Decimal(2**64 - 1))


def test_decimal_65_30_is_plain_text_with_its_scale() -> None:
    text = col(T.STRING, "decimal")
    assert same(text, Decimal("0E-30"), "0." + "0" * 30)
    assert same(text, Decimal("-1.5" + "0" * 29), "-1.5" + "0" * 29)
    assert not same(text, Decimal("1.5" + "0" * 29), "1.5")


def test_float_is_compared_by_its_float32_bits_read_exactly_from_the_source() -> None:
    f = col(T.FLOAT, "float")
    assert source_expression(f) == "CAST(`c` AS DOUBLE)"
    exact = struct.unpack("<f", struct.pack("<f", 0.1))[0]
    assert same(f, exact, exact)
    assert not same(f, exact, struct.unpack("<f", struct.pack("<I", 0x3DCCCCCE))[0])
    assert same(f, 16777216.0, 16777216.0)
    assert same(col(T.DOUBLE, "double"), -0.0, 0.0)


def test_zero_and_invalid_dates_become_null_like_the_applier_writes_them() -> None:
    assert parse_date("0000-00-00") is None
    assert parse_date("2020-00-15") is None
    assert parse_date("2020-02-30") is None
    assert parse_date("0001-01-01") == dt.date(1, 1, 1)
    assert parse_datetime("0000-00-00 00:00:00.000000") is None
    assert parse_datetime("2024-02-29 23:59:58.12") == dt.datetime(2024, 2, 29, 23, 59, 58, 120000)
    assert same(col(T.DATE, "date"), "2020-00-15", None)


def test_time_keeps_sign_fraction_and_hours_past_24() -> None:
    assert parse_time("-838:59:59.999999") == -(838 * 3600 + 59 * 60 + 59) * 10**6 - 999999
    assert parse_time("25:00:00") == 25 * 3600 * 10**6
    assert parse_time("-00:00:01.5") == -1_500_000
    assert same(col(T.LONG, "time"), "-00:00:00.000001", -1)


def test_timestamps_compare_as_utc_instants_datetimes_as_wall_clock() -> None:
    tz = col(T.TIMESTAMPTZ, "timestamp")
    micros = 2_147_483_647_999_000
    assert same(tz, "2038-01-19 03:14:07.999", micros)
    assert not same(tz, "2038-01-19 03:14:07.999", micros + 1)
    ntz = col(T.TIMESTAMP, "datetime")
    assert same(ntz, "1000-01-01 00:00:00.000001", dt.datetime(1000, 1, 1, 0, 0, 0, 1))


def test_strings_binary_and_geometry() -> None:
    assert same(col(T.STRING, "varchar"), "ñ€😀", "ñ€😀")
    assert not same(col(T.STRING, "varchar"), "a", "a ")
    assert same(col(T.BINARY, "blob"), b"\x00\xff", bytearray(b"\x00\xff"))
    wkb = struct.pack("<BIdd", 1, 1, 1.0, 2.0)
    internal = (4326).to_bytes(4, "little") + wkb
    ewkb = struct.pack("<BIIdd", 1, 1 | 0x20000000, 4326, 1.0, 2.0)
    assert same(col(T.BINARY, "geometry"), internal, ewkb)
    assert same(col(T.BINARY, "point"), (0).to_bytes(4, "little") + wkb, wkb)


def test_null_differs_from_every_value() -> None:
    for column, value in [
        (col(T.STRING, "varchar"), ""),
        (col(T.BINARY, "blob"), b""),
        (col(T.INT, "int"), 0),
        (col(T.DECIMAL, "decimal", 2), Decimal("0.00")),
    ]:
        assert encode(column, None) != encode(column, value)


def test_row_hash_separates_values_across_column_boundaries() -> None:
    columns = [col(T.STRING, "varchar", name="a"), col(T.STRING, "varchar", name="b")]
    assert row_hash(columns, ["ab", "c"]) != row_hash(columns, ["a", "bc"])
    assert row_hash(columns, ["a", None]) != row_hash(columns, ["a", ""])


def test_key_text_is_equal_for_equal_keys_and_readable() -> None:
    columns = [col(T.DECIMAL, "decimal", 2, "d"), col(T.BINARY, "varbinary", name="b")]
    assert key_text(columns, [Decimal("1.50"), b"\x01"]) == key_text(
        columns, [Decimal("1.5"), bytearray(b"\x01")]
    )
    assert key_text(columns, [Decimal("-1.50"), b"\x01"]) == '["-1.5","0x01"]'


def test_a_lake_type_outside_the_mapping_is_named() -> None:
    assert mapping_problem(col(T.BINARY, "uuid", name="u")) == (
        "column u: source UUID is binary in the lake (the mapping gives string)"
    )
    assert mapping_problem(col(T.DOUBLE, "float")) is None
    assert "no lake mapping" in (mapping_problem(col(T.STRING, "vector")) or "")


@pytest.mark.parametrize("lake_extra", [False, True])
def test_keyed_comparison_lists_missing_extra_and_changed_keys(lake_extra: bool) -> None:
    compare = KeyedComparison(limit=2)
    for key in ("[1]", "[2]", "[3]", "[4]"):
        compare.add_source(key, key.encode().ljust(16, b"."))
    compare.add_lake("[1]", b"[1]".ljust(16, b"."))
    compare.add_lake("[2]", b"changed".ljust(16, b"."))
    compare.add_lake("[9]", b"[9]".ljust(16, b"."))
    if lake_extra:
        compare.add_lake("[1]", b"[1]".ljust(16, b"."))
    d = compare.finish()
    assert (d.missing_in_lake, d.missing_count) == (["[3]", "[4]"], 2)
    assert d.changed == ["[2]"]
    assert d.extra_in_lake == (["[1]", "[9]"] if lake_extra else ["[9]"])
    assert compare.source.rows == 4 and compare.lake.rows == (4 if lake_extra else 3)


def test_multiset_comparison_counts_duplicates_and_checksums_do_not_cancel() -> None:
    compare = MultisetComparison(limit=5)
    row = b"r" * 16
    compare.add_source(row)
    compare.add_source(row)
    compare.add_lake(row)
    d = compare.finish()
    assert d.missing_count == 1 and d.missing_in_lake == [f"row {row.hex()} x1"]
    assert compare.source.checksum != compare.lake.checksum
    twice = MultisetComparison(limit=5)
    twice.add_source(row)
    twice.add_source(row)
    assert twice.source.checksum != 0, "a sum, not an XOR: a row twice does not cancel out"
