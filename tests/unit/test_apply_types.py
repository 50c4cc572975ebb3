"""The type mapping (design.md, "Type mapping"): every row, its edge values, and its errors."""

from __future__ import annotations

import dataclasses
import datetime as dt
import struct
from collections import Counter
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import types as st

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.tablemap import BLOB_COMPRESSED, VARCHAR_COMPRESSED
from binlake.binlog.values import ABSENT, Geometry, ZeroDate
from binlake.errors import SourceConfigError, UnsupportedTypeError
from binlake.lake.schema.sql import create_table_statements, quote, table_name
from binlake.lake.spark.types import spark_field, spark_schema, spark_type
from binlake.typemap import (
    IcebergType,
    LakeColumn,
    lake_column,
    lake_schema,
    row_converter,
    to_row_values,
)
from binlog_fixtures import BINARY, UTF8MB4, table_map
from lake_tables import (
    COLUMNS,
    HINTS,
    LAKE_ROWS,
    NAMES,
    SOURCE_ROWS,
    ZERO_DATES,
    Col,
    every_type_table_map,
)

ONE_MICRO = dt.timedelta(microseconds=1)


def one_column(
    type_code: int, metadata: int = 0, *, unsigned: bool = False, collation: int | None = None
) -> Any:
    return table_map((type_code,), (metadata,), unsigned=(unsigned,), charsets=(collation,))


def convert(tm: Any, value: Any, counts: Counter[str] | None = None) -> Any:
    return to_row_values((value,), tm, zero_dates=counts)[0]


# ---- every row of the mapping --------------------------------------------------------------


@pytest.mark.parametrize("col", COLUMNS, ids=NAMES)
def test_every_column_maps_to_its_iceberg_type(col: Col) -> None:
    column = lake_schema(every_type_table_map(), HINTS).columns[NAMES.index(col.name)]
    assert (column.iceberg_type, column.source_type) == (col.iceberg, col.source)


@pytest.mark.parametrize("index", range(len(SOURCE_ROWS)))
def test_every_row_converts_to_the_values_written_to_iceberg(index: int) -> None:
    got = to_row_values(SOURCE_ROWS[index], every_type_table_map(), hints=HINTS)
    want = LAKE_ROWS[index]
    for name, value, expected in zip(NAMES, got, want, strict=True):
        assert (name, type(value), value) == (name, type(expected), expected)
        if isinstance(value, Decimal):
            assert str(value) == str(expected), name  # the scale too, not just the number


def test_zero_dates_become_null_and_are_counted_per_column() -> None:
    counts: Counter[str] = Counter()
    tm = every_type_table_map()
    for row in SOURCE_ROWS:
        to_row_values(row, tm, hints=HINTS, zero_dates=counts)
    assert counts == ZERO_DATES


def test_schema_key_is_the_primary_key_and_key_columns_are_not_null() -> None:
    schema = lake_schema(every_type_table_map(), HINTS)
    assert schema.key == ("id",)
    assert [c.name for c in schema.columns if not c.nullable] == ["id"]


# ---- integers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_code", "unsigned", "iceberg", "extreme"),
    [
        (T.TINY, False, "int", -128),
        (T.TINY, True, "int", 255),
        (T.SHORT, True, "int", 65535),
        (T.INT24, False, "int", -8388608),
        (T.INT24, True, "int", 16777215),
        (T.LONG, False, "int", -(2**31)),
        (T.LONG, True, "long", 2**32 - 1),
        (T.LONGLONG, False, "long", -(2**63)),
    ],
)
def test_integers_map_to_the_narrowest_exact_type(
    type_code: int, unsigned: bool, iceberg: str, extreme: int
) -> None:
    tm = one_column(type_code, unsigned=unsigned)
    assert lake_column(tm, 0).iceberg_type == iceberg
    assert convert(tm, extreme) == extreme


def test_bigint_unsigned_is_decimal_20_0_and_keeps_its_maximum() -> None:
    tm = one_column(T.LONGLONG, unsigned=True)
    column = lake_column(tm, 0)
    assert (column.iceberg_type, column.sql_type) == ("decimal(20,0)", "DECIMAL(20,0)")
    assert convert(tm, 2**64 - 1) == Decimal("18446744073709551615")
    assert convert(tm, 0) == Decimal(0)


# ---- decimals, floats, BIT, YEAR --------------------------------------------------------------


def test_decimal_up_to_38_digits_is_an_iceberg_decimal() -> None:
    tm = one_column(T.NEWDECIMAL, 38 << 8 | 38)
    assert spark_type(lake_column(tm, 0)) == st.DecimalType(38, 38)
    value = Decimal("-0." + "9" * 38)
    assert convert(tm, value) is value


def test_decimal_65_30_is_plain_text_with_its_scale() -> None:
    tm = one_column(T.NEWDECIMAL, 65 << 8 | 30)
    assert lake_column(tm, 0).type is IcebergType.STRING
    assert convert(tm, Decimal("0E-30")) == "0." + "0" * 30
    assert convert(tm, Decimal("1.5E+3")) == "1500"
    big = "-" + "9" * 35 + "." + "9" * 30
    assert convert(tm, Decimal(big)) == big


def test_float_column_is_iceberg_float_and_keeps_its_float32_value() -> None:
    tm = one_column(T.FLOAT, 4)
    value = struct.unpack("<f", struct.pack("<f", 0.1))[0]
    assert lake_column(tm, 0).iceberg_type == "float"
    assert pa.array([convert(tm, value)], pa.float32()).to_pylist() == [value]


@pytest.mark.parametrize(("metadata", "bits"), [(1, 1), (1 << 8 | 2, 10), (7 << 8 | 7, 63)])
def test_bit_up_to_63_bits_is_long(metadata: int, bits: int) -> None:
    tm = one_column(T.BIT, metadata)
    assert (lake_column(tm, 0).iceberg_type, lake_column(tm, 0).source_type) == (
        "long",
        f"BIT({bits})",
    )
    assert convert(tm, 2**bits - 1) == 2**bits - 1


def test_bit_64_is_decimal_because_a_long_cannot_hold_its_maximum() -> None:
    tm = one_column(T.BIT, 8 << 8)
    assert lake_column(tm, 0).iceberg_type == "decimal(20,0)"
    assert convert(tm, 2**64 - 1) == Decimal(2**64 - 1)


def test_year_is_int_and_year_zero_stays_zero() -> None:
    tm = one_column(T.YEAR)
    assert lake_column(tm, 0).iceberg_type == "int"
    assert convert(tm, 0) == 0
    assert convert(tm, 2155) == 2155


# ---- dates and times --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_code", "fsp", "iceberg", "source"),
    [
        (T.DATE, 0, "date", "DATE"),
        (T.DATETIME, 0, "timestamp", "DATETIME"),
        (T.DATETIME2, 3, "timestamp", "DATETIME(3)"),
        (T.TIMESTAMP, 0, "timestamptz", "TIMESTAMP"),
        (T.TIMESTAMP2, 6, "timestamptz", "TIMESTAMP(6)"),
        (T.TIME, 0, "long", "TIME"),
        (T.TIME2, 2, "long", "TIME(2)"),
    ],
)
def test_temporal_types(type_code: int, fsp: int, iceberg: str, source: str) -> None:
    column = lake_column(one_column(type_code, fsp), 0)
    assert (column.iceberg_type, column.source_type) == (iceberg, source)


def test_datetime_is_timestamp_without_zone_and_timestamp_is_utc() -> None:
    ntz = lake_column(one_column(T.DATETIME2, 6), 0)
    tz = lake_column(one_column(T.TIMESTAMP2, 6), 0)
    assert (ntz.sql_type, spark_type(ntz)) == ("TIMESTAMP_NTZ", st.TimestampNTZType())
    assert (tz.sql_type, spark_type(tz)) == ("TIMESTAMP", st.TimestampType())
    assert ntz.arrow_type() == pa.timestamp("us")
    assert tz.arrow_type() == pa.timestamp("us", tz="UTC")


@pytest.mark.parametrize(
    ("value", "micros"),
    [
        (dt.timedelta(0), 0),
        (dt.timedelta(microseconds=-1), -1),
        (dt.timedelta(hours=-838, minutes=-59, seconds=-59), -3_020_399_000_000),
        (dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=999999), 3_020_399_999_999),
        (dt.timedelta(hours=25, microseconds=5), 90_000_000_005),
        (-dt.timedelta(hours=1, microseconds=500000), -3_600_500_000),
    ],
)
def test_time_becomes_exact_microseconds(value: dt.timedelta, micros: int) -> None:
    got = convert(one_column(T.TIME2, 6), value)
    assert (type(got), got) == (int, micros)
    assert dt.timedelta(microseconds=got) == value


@pytest.mark.parametrize(
    ("type_code", "zero"),
    [
        (T.DATE, ZeroDate(0, 0, 0, has_time=False)),
        (T.DATE, ZeroDate(2020, 0, 15, has_time=False)),
        (T.DATETIME2, ZeroDate(0, 0, 0, fsp=6)),
        (T.TIMESTAMP2, ZeroDate(0, 0, 0)),
        (T.DATETIME, ZeroDate(2021, 2, 30)),
    ],
)
def test_zero_dates_are_null_and_counted(type_code: int, zero: ZeroDate) -> None:
    counts: Counter[str] = Counter()
    tm = one_column(type_code)
    assert convert(tm, zero, counts) is None
    assert convert(tm, None, counts) is None
    assert counts == {"db.t.c0": 1}


def test_real_dates_pass_through_unchanged() -> None:
    when = dt.datetime(1, 1, 1, 0, 0, 0, 1)
    assert convert(one_column(T.DATETIME2, 6), when) is when


# ---- text, binary and the rest ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_code", "metadata", "collation", "iceberg", "source"),
    [
        (T.STRING, T.STRING << 8 | 40, UTF8MB4, "string", "CHAR"),
        (T.STRING, T.STRING << 8 | 16, BINARY, "binary", "BINARY"),
        (T.VARCHAR, 400, UTF8MB4, "string", "VARCHAR"),
        (T.VARCHAR, 400, BINARY, "binary", "VARBINARY"),
        (T.BLOB, 1, UTF8MB4, "string", "TINYTEXT"),
        (T.BLOB, 2, BINARY, "binary", "BLOB"),
        (T.BLOB, 3, UTF8MB4, "string", "MEDIUMTEXT"),
        (T.BLOB, 4, BINARY, "binary", "LONGBLOB"),
        (T.JSON, 4, None, "string", "JSON"),
        (T.GEOMETRY, 4, BINARY, "binary", "GEOMETRY"),
    ],
)
def test_text_and_binary_types(
    type_code: int, metadata: int, collation: int | None, iceberg: str, source: str
) -> None:
    column = lake_column(one_column(type_code, metadata, collation=collation), 0)
    assert (column.iceberg_type, column.source_type) == (iceberg, source)


def test_uuid_with_a_hint_is_text_and_without_is_binary() -> None:
    tm = one_column(T.STRING, T.STRING << 8 | 16, collation=BINARY)
    assert lake_schema(tm, {0: "uuid"}).columns[0].iceberg_type == "string"
    assert lake_schema(tm).columns[0].iceberg_type == "binary"


def test_geometry_with_srid_zero_is_plain_wkb() -> None:
    wkb = struct.pack("<BIdd", 1, 1, 1.0, 2.0)
    assert convert(one_column(T.GEOMETRY, 4, collation=BINARY), Geometry(0, wkb)) == wkb


@pytest.mark.parametrize("order", ["<", ">"])
def test_geometry_with_an_srid_is_ewkb_in_the_shapes_byte_order(order: str) -> None:
    flag = b"\x01" if order == "<" else b"\x00"
    wkb = flag + struct.pack(order + "Idd", 1, 1.0, 2.0)
    got = convert(one_column(T.GEOMETRY, 4, collation=BINARY), Geometry(4326, wkb))
    assert got == flag + struct.pack(order + "IIdd", 0x20000001, 4326, 1.0, 2.0)


def test_null_and_absent_values_pass_through() -> None:
    tm = table_map((T.LONGLONG, T.TIME2), (0, 0), unsigned=(True, False))
    assert to_row_values((None, ABSENT), tm) == (None, ABSENT)


def test_converters_are_cached_per_table_map() -> None:
    tm = every_type_table_map()
    assert row_converter(tm, HINTS) is row_converter(tm, dict(HINTS))


# ---- schemas in Spark and Arrow ---------------------------------------------------------------


SPARK_AND_ARROW = {
    "int": ("int", pa.int32()),
    "long": ("bigint", pa.int64()),
    "float": ("float", pa.float32()),
    "double": ("double", pa.float64()),
    "date": ("date", pa.date32()),
    "timestamp": ("timestamp_ntz", pa.timestamp("us")),
    "timestamptz": ("timestamp", pa.timestamp("us", tz="UTC")),
    "string": ("string", pa.string()),
    "binary": ("binary", pa.binary()),
}


@pytest.mark.parametrize("col", COLUMNS, ids=NAMES)
def test_spark_and_arrow_types_match_the_iceberg_type(col: Col) -> None:
    column = lake_schema(every_type_table_map(), HINTS).columns[NAMES.index(col.name)]
    if column.type is IcebergType.DECIMAL:
        p, s = column.precision, column.scale
        expected = (f"decimal({p},{s})", pa.decimal128(p, s))
    else:
        expected = SPARK_AND_ARROW[col.iceberg]
    assert (spark_type(column).simpleString(), column.arrow_type()) == expected


def test_spark_and_arrow_schemas_keep_order_and_nullability() -> None:
    schema = lake_schema(every_type_table_map(), HINTS)
    spark, arrow = spark_schema(schema), schema.arrow_schema()
    assert spark.names == list(NAMES) == arrow.names
    assert (
        [f.nullable for f in spark.fields]
        == [f.nullable for f in arrow]
        == [c.nullable for c in schema.columns]
    )


def test_arrow_takes_every_converted_value_exactly() -> None:
    schema = lake_schema(every_type_table_map(), HINTS).arrow_schema()
    table = pa.Table.from_pylist([dict(zip(NAMES, row, strict=True)) for row in LAKE_ROWS], schema)
    assert [tuple(r.values()) for r in table.to_pylist()] == list(LAKE_ROWS)


# ---- unsupported ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_code", "metadata", "words"),
    [
        (BLOB_COMPRESSED, 2, "compressed"),
        (VARCHAR_COMPRESSED, 40, "compressed"),
        (T.VECTOR, 4, "VECTOR"),
        (T.NULL, 0, "NULL"),
    ],
)
def test_unsupported_types_name_table_and_column(type_code: int, metadata: int, words: str) -> None:
    tm = table_map((T.LONG, type_code), (0, metadata), charsets=(None, UTF8MB4))
    with pytest.raises(UnsupportedTypeError) as caught:
        lake_schema(tm)
    message = str(caught.value)
    assert "db.t" in message and "c1" in message and words.lower() in message.lower()
    assert caught.value.table == "db.t"


def test_text_without_charset_metadata_is_refused_naming_the_column() -> None:
    with pytest.raises(UnsupportedTypeError, match="c0") as caught:
        lake_column(one_column(T.VARCHAR, 40), 0)
    assert "binlog_row_metadata=FULL" in caught.value.hint


def test_a_table_map_without_column_names_is_refused() -> None:
    tm = dataclasses.replace(table_map((T.LONG,)), column_names=None)
    with pytest.raises(SourceConfigError, match="column names"):
        lake_schema(tm)


# ---- DDL text ---------------------------------------------------------------------------------


def test_create_table_statements_use_v2_merge_on_read_and_the_key() -> None:
    table = table_name("lake", ["shop"], "every_type")
    create, identifier = create_table_statements(table, lake_schema(every_type_table_map(), HINTS))
    assert create.startswith("CREATE TABLE IF NOT EXISTS `lake`.`shop`.`every_type` (")
    assert "`id` INT NOT NULL COMMENT 'INT'" in create
    assert "`biu` DECIMAL(20,0) COMMENT 'BIGINT UNSIGNED'" in create
    assert "`dtm6` TIMESTAMP_NTZ COMMENT 'DATETIME(6)'" in create
    assert "'format-version'='2'" in create and "'write.merge.mode'='merge-on-read'" in create
    assert f"'write.parquet.row-group-size-bytes'='{16 << 20}'" in create
    assert identifier == "ALTER TABLE `lake`.`shop`.`every_type` SET IDENTIFIER FIELDS `id`"


def test_identifiers_are_quoted() -> None:
    assert quote("we`ird") == "`we``ird`"


def test_lake_column_is_a_plain_value() -> None:
    column = LakeColumn("x", 0, "INT", IcebergType.INT, nullable=False)
    assert spark_field(column) == st.StructField("x", st.IntegerType(), False)
