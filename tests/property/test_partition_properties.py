"""A batch split by partition (``binlake.lake.write.partitions``): every row lands in exactly
one group, the groups are told apart by their partition's JSON, and every row of a group has
that group's values; Murmur3 of values of mixed lengths, hashed together by length, equals each
value hashed alone."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.lake.write.partitions import (
    PartitionSpec,
    SpecField,
    json_value,
    murmur3,
    transform,
)

SPEC = PartitionSpec(
    4,
    (
        SpecField(1000, "id_bucket", "bucket[8]", "id", "long"),
        SpecField(1001, "name_trunc", "truncate[2]", "name", "string"),
        SpecField(1002, "at_month", "month", "at", "timestamp"),
    ),
)
ROWS = st.lists(
    st.tuples(
        st.integers(-(2**63), 2**63 - 1),
        st.one_of(st.none(), st.text(max_size=5)),
        st.one_of(st.none(), st.integers(-(2**55), 2**55)),
    ),
    max_size=60,
)


def _table(rows: list[tuple[Any, ...]]) -> pa.Table:
    ids, names, ats = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array(names, pa.string()),
            "at": pa.array(ats, pa.int64()).cast(pa.timestamp("us")),
            "n": pa.array(range(len(rows)), pa.int64()),
        }
    )


@settings(max_examples=80, deadline=None)
@given(ROWS)
def test_every_row_lands_in_the_one_partition_its_values_name(rows: list[tuple[Any, ...]]) -> None:
    table = _table(rows)
    groups = list(SPEC.split(table)) if rows else []
    seen = sorted(n for _, part in groups for n in part.column("n").to_pylist())
    assert seen == list(range(len(rows)))
    assert len({p.values for p, _ in groups}) == len(groups)
    for partition, part in groups:
        values = {
            str(f.field_id): transform(part.column(f.source), f.transform, f.source_type)
            for f in SPEC.fields
        }
        for i in range(part.num_rows):
            row = {
                field: json_value(SPEC.fields[j].result_type, column[i].as_py())
                for j, (field, column) in enumerate(values.items())
                if column[i].is_valid
            }
            assert row == json.loads(partition.values)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=20), max_size=30))
def test_murmur3_of_many_values_is_each_values_own(values: list[bytes]) -> None:
    together = murmur3(values).tolist()
    assert together == [int(murmur3([v])[0]) for v in values]
