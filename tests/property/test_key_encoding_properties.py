"""The key index's encoding (``binlake.keyindex.encode``) is injective for every key type binlake
writes, composite keys included, and gives the same bytes for the values a row delta writes as
for the same values read back from its Parquet file (a catch-up or a rebuild reads them so)."""

from __future__ import annotations

import io
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from binlake.keyindex.encode import encode_keys
from binlake.lake.write.delta_files import FIELD_ID, parquet_options

#: (Arrow type as written, values of it); the Iceberg types a key column may have.
KEY_TYPES: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "int": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "long": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "string": (pa.string(), st.text(max_size=12)),
    "binary": (pa.binary(), st.binary(max_size=12)),
    "decimal": (
        pa.decimal128(38, 4),
        st.decimals(
            min_value=Decimal("-1e33"), max_value=Decimal("1e33"), places=4, allow_nan=False
        ),
    ),
    "date": (pa.date32(), st.dates(min_value=date(1, 1, 1), max_value=date(9999, 12, 31))),
    "timestamp": (
        pa.timestamp("us"),
        st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)),
    ),
    "boolean": (pa.bool_(), st.booleans()),
}


@st.composite
def keyed_rows(draw: Any) -> tuple[list[pa.DataType], list[tuple[Any, ...]]]:
    """A key of 1 to 3 columns of any key types, and up to 30 rows of it."""
    names = draw(st.lists(st.sampled_from(sorted(KEY_TYPES)), min_size=1, max_size=3))
    types = [KEY_TYPES[name][0] for name in names]
    row = st.tuples(*(KEY_TYPES[name][1] for name in names))
    return types, draw(st.lists(row, max_size=30))


def columns(types: list[pa.DataType], rows: list[tuple[Any, ...]]) -> list[pa.Array]:
    return [pa.array([r[i] for r in rows], kind) for i, kind in enumerate(types)]


@settings(max_examples=200, deadline=None)
@given(keyed_rows())
def test_distinct_keys_encode_to_distinct_bytes_and_equal_keys_to_equal_bytes(
    drawn: tuple[list[pa.DataType], list[tuple[Any, ...]]],
) -> None:
    types, rows = drawn
    encoded = encode_keys(columns(types, rows))
    assert len(encoded) == len(rows)
    by_bytes: dict[bytes, tuple[Any, ...]] = {}
    for row, key in zip(rows, encoded, strict=True):
        assert by_bytes.setdefault(key, row) == row  # one byte string, one key


@settings(max_examples=100, deadline=None)
@given(keyed_rows())
def test_keys_read_back_from_the_parquet_a_row_delta_writes_encode_the_same(
    drawn: tuple[list[pa.DataType], list[tuple[Any, ...]]],
) -> None:
    types, rows = drawn
    fields = [
        pa.field(f"k{i}", kind, nullable=False, metadata={FIELD_ID: str(i + 1)})
        for i, kind in enumerate(types)
    ]
    written = pa.Table.from_arrays(columns(types, rows), schema=pa.schema(fields))
    sink = io.BytesIO()
    pq.write_table(written, sink, **parquet_options({}, deletes=False))
    read = pq.read_table(io.BytesIO(sink.getvalue()))
    as_written = encode_keys(written.columns)
    assert encode_keys(read.columns) == as_written
    # Spark hands timestamps over with the session's zone as their label: the same bytes
    labelled = [
        c.cast(pa.timestamp("us", tz="UTC")) if pa.types.is_timestamp(c.type) else c
        for c in read.columns
    ]
    assert encode_keys(labelled) == as_written
