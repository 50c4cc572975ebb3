"""The normal form the tests' lake readers (``binlake_dev.readers``) bring every value to: one
Python type per Iceberg type, exact, a value of any other type refused."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal, Inexact
from zoneinfo import ZoneInfo

import pytest

from binlake.typemap import IcebergType, LakeColumn
from binlake_dev.readers import differences, normal, normal_rows


def column(kind: IcebergType, scale: int = 0) -> LakeColumn:
    precision = 38 if kind is IcebergType.DECIMAL else 0
    return LakeColumn("c", 0, "", kind, precision=precision, scale=scale)


def test_a_decimal_comes_to_its_columns_scale_without_losing_a_digit() -> None:
    dec = column(IcebergType.DECIMAL, scale=10)
    assert str(normal(dec, Decimal("-1.00E-10"))) == "-1E-10"  # Spark's collect form
    assert normal(dec, Decimal("-1.00E-10")).as_tuple().exponent == -10
    assert str(normal(column(IcebergType.DECIMAL), 2**64 - 1)) == "18446744073709551615"
    with pytest.raises(Inexact):
        normal(dec, Decimal("1.00000000001"))


def test_timestamptz_is_the_instant_in_utc_from_micros_or_an_aware_datetime() -> None:
    tz = column(IcebergType.TIMESTAMPTZ)
    utc = dt.datetime(2024, 2, 29, 12, 0, 0, 5, tzinfo=dt.UTC)
    paris = utc.astimezone(ZoneInfo("Europe/Paris"))
    assert normal(tz, 1_709_208_000_000_005) == normal(tz, paris) == utc
    assert normal(tz, paris).tzinfo is dt.UTC
    with pytest.raises(TypeError, match="naive"):
        normal(tz, utc.replace(tzinfo=None))


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        (IcebergType.INT, True),
        (IcebergType.LONG, 1.0),
        (IcebergType.DOUBLE, Decimal("1.5")),
        (IcebergType.DATE, dt.datetime(2024, 1, 1)),
        (IcebergType.TIMESTAMP, dt.datetime(2024, 1, 1, tzinfo=dt.UTC)),
        (IcebergType.STRING, b"text"),
        (IcebergType.BINARY, "bytes"),
        (IcebergType.DECIMAL, "1.5"),
    ],
)
def test_a_value_of_another_type_is_refused(kind: IcebergType, value: object) -> None:
    with pytest.raises(TypeError, match="column c"):
        normal(column(kind), value)


def test_rows_sort_by_their_canonical_encoding_nulls_included() -> None:
    columns = [column(IcebergType.INT), column(IcebergType.BINARY)]
    rows = normal_rows(columns, [(2, bytearray(b"b")), (None, None), (1, memoryview(b"a"))])
    assert rows == [(1, b"a"), (2, b"b"), (None, None)]


def test_differences_name_the_reader_the_table_and_the_rows_apart() -> None:
    assert differences("duckdb", "lake.db.t", [(1,), (2,)], [(1,), (2,)]) == ""
    text = differences("duckdb", "lake.db.t", [(1,), (3,)], [(1,), (2,)])
    assert text.splitlines() == [
        "duckdb read 2 rows of lake.db.t, the source has 2",
        "missing: (2,)",
        "extra: (3,)",
    ]
    twice = differences("pyiceberg", "lake.db.t", [(1,), (1,)], [(1,)])
    assert twice.endswith("the same rows, some a different number of times")
