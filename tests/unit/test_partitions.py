"""Partition values computed in binlake (``binlake.lake.write.partitions``), without a JVM: the
Iceberg spec's own examples of Murmur3 hashes and transforms (Appendix B, "Truncate Transform
Details"), a batch split by partition, and the single-value JSON of each partition. The same
transforms are checked against Iceberg's Java ones in
tests/integration/test_partition_transforms.py."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from binlake.lake.write.partitions import (
    FilePartition,
    PartitionSpec,
    SpecField,
    murmur3,
    parse_spec,
    transform,
)


def test_murmur3_gives_the_specs_example_hashes() -> None:
    """Appendix B: int and long 34, decimal 14.20, date 2017-11-16, string "iceberg", and the
    UTF-8 bytes of a string with a multi-byte character hashed as bytes."""
    long_34 = (34).to_bytes(8, "little", signed=True)
    days = (dt.date(2017, 11, 16) - dt.date(1970, 1, 1)).days.to_bytes(8, "little")
    decimal = (1420).to_bytes(2, "big", signed=True)
    hashes = murmur3([long_34, decimal, days, b"iceberg"]).astype(np.int64).tolist()
    signed = [h - (1 << 32) if h >= 1 << 31 else h for h in hashes]
    assert signed == [2017239379, -500754589, -653330422, 1210000089]


@pytest.mark.parametrize(
    ("values", "arrow_type", "name", "source", "expected"),
    [
        ([1, -1, None], pa.int32(), "truncate[10]", "int", [0, -10, None]),
        ([Decimal("10.65"), Decimal("-0.05")], pa.decimal128(5, 2), "truncate[50]",
         "decimal(5, 2)", [Decimal("10.50"), Decimal("-0.50")]),
        (["iceberg", "éé€x", None], pa.string(), "truncate[2]", "string", ["ic", "éé", None]),
        ([dt.date(2017, 11, 16), dt.date(1969, 12, 31)], pa.date32(), "year", "date", [47, -1]),
        ([dt.date(2017, 11, 16), dt.date(1969, 12, 31)], pa.date32(), "month", "date",
         [574, -1]),
        ([34, None], pa.int64(), "void", "long", [None, None]),
    ],
)  # fmt: skip
def test_transforms_give_the_specs_values(
    values: list[object], arrow_type: pa.DataType, name: str, source: str, expected: list[object]
) -> None:
    assert transform(pa.array(values, arrow_type), name, source).to_pylist() == expected


def test_a_batch_is_split_by_partition_each_with_its_single_value_json() -> None:
    spec = PartitionSpec(
        3,
        (
            SpecField(1000, "id_bucket", "bucket[4]", "id", "long"),
            SpecField(1001, "at_day", "day", "at", "timestamptz"),
        ),
    )
    at = pa.array([0, -1, 86_400_000_000, None, 5], pa.int64()).cast(pa.timestamp("us", "UTC"))
    rows = pa.table({"id": pa.array([1, 1, 1, 1, 1], pa.int64()), "at": at, "n": range(5)})
    split = list(spec.split(rows))
    bucket = json.loads(split[0][0].values)["1000"]
    assert [(json.loads(p.values), r.column("n").to_pylist()) for p, r in split] == [
        ({"1000": bucket, "1001": "1970-01-01"}, [0, 4]),
        ({"1000": bucket, "1001": "1969-12-31"}, [1]),
        ({"1000": bucket, "1001": "1970-01-02"}, [2]),
        ({"1000": bucket}, [3]),  # a null is left out, as Iceberg's SingleValueParser does
    ]
    assert {p.spec_id for p, _ in split} == {3}


def test_an_unpartitioned_spec_keeps_the_rows_whole() -> None:
    rows = pa.table({"id": [1, 2]})
    assert list(PartitionSpec(0).split(rows)) == [(FilePartition(0, "{}"), rows)]


@pytest.mark.parametrize(
    ("transform_name", "source_type"),
    [("zorder", "long"), ("bucket[4]", "double"), ("hour", "date"), ("identity", "double")],
)
def test_a_transform_binlake_does_not_compute_is_refused(
    transform_name: str, source_type: str
) -> None:
    spec = {"spec-id": 1, "fields": [
        {"name": "p", "transform": transform_name, "source-id": 1, "field-id": 1000}
    ]}  # fmt: skip
    with pytest.raises(ValueError, match="partition transform"):
        parse_spec(spec, {1: ("c", source_type)})
