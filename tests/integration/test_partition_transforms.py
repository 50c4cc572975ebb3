"""binlake's partition transforms (``binlake.lake.write.partitions``) against Iceberg's own Java
ones (``org.apache.iceberg.transforms.Transforms``) on the same values: for each source type and
transform, the values binlake computes, in the single-value JSON it hands to Iceberg, read back
by Iceberg's ``SingleValueParser``, equal Iceberg's transform of the same values (nulls,
negative numbers, the extremes of each type, multi-byte UTF-8, decimals, dates and timestamps
before 1970 included). Everything runs on the JVM of the tests' Spark session: the values go to
Java as one JSON list, the transform is mapped over it there."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from binlake.lake.write.partitions import SpecField, json_value, transform

EPOCH = dt.datetime(1970, 1, 1)
MICROS = [
    0,
    1,
    -1,
    1_510_871_468_000_001,  # 2017-11-16T22:31:08.000001
    -86_400_000_001,
    -3_600_000_000,
    -31_536_000_000_000,  # 1969-01-01
    253_402_300_799_999_999,  # 9999-12-31T23:59:59.999999
    -30_610_224_000_000_000,  # 1000-01-01
    None,
]
DATES = [
    dt.date(1970, 1, 1),
    dt.date(1969, 12, 31),
    dt.date(1969, 1, 1),
    dt.date(2017, 11, 16),
    dt.date(1000, 1, 1),
    dt.date(9999, 12, 31),
    dt.date(2024, 2, 29),
    None,
]
TIMES = ["year", "month", "day", "hour", "bucket[16]", "identity"]
CASES: list[tuple[str, pa.DataType, list[Any], list[str]]] = [
    (
        "int",
        pa.int32(),
        [0, 1, -1, 34, 2**31 - 1, -(2**31), -7, None],
        ["identity", "bucket[16]", "bucket[7]", "truncate[10]", "truncate[1]", "void"],
    ),
    (
        "long",
        pa.int64(),
        [0, 34, -1, 2**63 - 1, -(2**63) + 10, -123_456_789_012, None],
        ["identity", "bucket[16]", "bucket[1000]", "truncate[10]", "truncate[7]"],
    ),
    (
        "string",
        pa.string(),
        ["", "iceberg", "ümlaut", "日本語テキスト", "😀x😀", "a/b=c %", None],
        ["identity", "bucket[16]", "bucket[3]", "truncate[1]", "truncate[2]", "truncate[4]"],
    ),
    (
        "binary",
        pa.binary(),
        [b"", b"\x00\xff", bytes(range(10)), "é".encode(), None],
        ["identity", "bucket[16]", "truncate[3]"],
    ),
    (
        "decimal(9, 2)",
        pa.decimal128(9, 2),
        [Decimal(v) for v in ("14.20", "-0.05", "0.00", "-1.28", "9999999.99", "-9999999.99")]
        + [Decimal("1.27"), None],
        ["identity", "bucket[16]", "truncate[50]", "truncate[3]"],
    ),
    (
        "decimal(38, 10)",
        pa.decimal128(38, 10),
        [Decimal("9" * 28 + "." + "9" * 10), Decimal("-1234567890123456789.0123456789"), None],
        ["identity", "bucket[16]", "truncate[1000]"],
    ),
    ("date", pa.date32(), DATES, ["year", "month", "day", "bucket[16]", "identity", "void"]),
    ("timestamp", pa.timestamp("us"), MICROS, TIMES),
    ("timestamptz", pa.timestamp("us", tz="UTC"), MICROS, TIMES),
]


def _source_json(iceberg_type: str, values: list[Any]) -> str:
    """The source values as the single-value JSON of a list."""
    if iceberg_type == "date":
        return json.dumps([None if v is None else v.isoformat() for v in values])
    return json.dumps([None if v is None else json_value(iceberg_type, v) for v in values])


def _arrow(arrow_type: pa.DataType, values: list[Any]) -> pa.Array:
    if pa.types.is_timestamp(arrow_type):
        return pa.array(values, pa.int64()).cast(arrow_type)
    return pa.array(values, arrow_type)


@pytest.mark.parametrize(
    ("iceberg_type", "arrow_type", "values", "name"),
    [(t, a, v, name) for t, a, v, names in CASES for name in names],
    ids=lambda p: str(p) if isinstance(p, str) else "",
)
def test_each_transform_computes_what_icebergs_java_transform_does(
    spark: Any, iceberg_type: str, arrow_type: pa.DataType, values: list[Any], name: str
) -> None:
    jvm = spark.sparkContext._jvm
    iceberg = jvm.org.apache.iceberg
    parser = iceberg.SingleValueParser
    source = iceberg.types.Types.fromPrimitiveString(iceberg_type)
    java_transform = iceberg.transforms.Transforms.fromString(source, name)
    result = java_transform.getResultType(source)
    field = SpecField(1000, "p", name, "c", iceberg_type)
    assert str(result).replace(" ", "") == field.result_type.replace(" ", "")
    as_list = iceberg.types.Types.ListType
    sources = parser.fromJson(as_list.ofOptional(1, source), _source_json(iceberg_type, values))
    collectors = jvm.java.util.stream.Collectors
    expected = sources.stream().map(java_transform.bind(source)).collect(collectors.toList())
    ours = transform(_arrow(arrow_type, values), name, iceberg_type).to_pylist()
    ours_json = json.dumps([None if v is None else json_value(field.result_type, v) for v in ours])
    result_list = as_list.ofOptional(2, result)
    parsed = parser.fromJson(result_list, ours_json)
    assert str(parser.toJson(result_list, parsed)) == str(parser.toJson(result_list, expected))
