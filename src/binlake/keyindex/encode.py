"""A table's keys as bytes: one canonical encoding per Iceberg type, from Arrow columns.

The key index (``binlake.keyindex.store``) keys its entries by these bytes. They are made from the
values that are *written*: the Arrow columns after ``delta_files.fit`` (the Iceberg-typed values
of a batch), and the same columns read back from the table's Parquet files by Spark (a catch-up,
a rebuild). So one value gives one byte string whichever way it came, and two values of one key
type never give the same one (``tests/property/test_key_encoding_properties.py``):

==========================  ===============================================================
Iceberg type (Arrow)        bytes
==========================  ===============================================================
int, long (int8 .. int64)   the value, 8 bytes big-endian two's complement (an int widened
                            to a long keeps its bytes)
date (date32)               the day number, as an int
timestamp, timestamptz      the microseconds since the epoch, as an int (a zone is a label:
                            the instant is the same)
decimal(p, s)               the unscaled value, 16 bytes big-endian two's complement (a
                            widened precision keeps its bytes; the scale is in the key spec)
string                      UTF-8
binary                      the bytes
boolean                     one byte, 0 or 1
==========================  ===============================================================

A key of one column is its column's bytes; a key of several is each column's bytes preceded by
their length (4 bytes big-endian), so no two composite keys run together. A null or a type not
listed (float, double, nested: Iceberg refuses them as identifier fields) is a
``KeyIndexError``. ``key_spec`` names what the bytes mean (field ids and type families): an index
made for another spec is not used (``binlake.keyindex.store``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from binlake.errors import KeyIndexError

Column: TypeAlias = "pa.Array[Any] | pa.ChunkedArray[Any]"

_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
#: Iceberg's primitive types -> the family whose values share one encoding.
_FAMILIES = {
    "int": "int",
    "long": "int",
    "date": "int",
    "timestamp": "int",
    "timestamptz": "int",
    "string": "string",
    "binary": "binary",
    "boolean": "boolean",
}


def type_family(iceberg_type: object) -> str:
    """The encoding family of an Iceberg type (its JSON form): types of one family whose values
    Iceberg may widen into each other encode alike (int -> long; decimal(p, s) -> decimal(q, s))."""
    if isinstance(iceberg_type, str):
        match = _DECIMAL.fullmatch(iceberg_type)
        if match:
            return f"decimal/{match.group(2)}"
        family = _FAMILIES.get(iceberg_type)
        if family is not None:
            return family
    raise KeyIndexError(
        f"a key column of Iceberg type {iceberg_type} cannot be indexed",
        reason="key type",
        hint='set [applier] deletes = "equality" for this target, or key the table on '
        "columns of another type ([tables] key_columns)",
    )


def key_spec(columns: Sequence[tuple[int, object]]) -> str:
    """The spec of a key: its columns' (field id, Iceberg type) in key order, as text."""
    return ",".join(f"{field_id}:{type_family(kind)}" for field_id, kind in columns)


def encode_keys(columns: Sequence[Column]) -> list[bytes]:
    """Each row's key bytes, for the key ``columns`` (Arrow, one per key column, in key order)."""
    if not columns:
        raise ValueError("a key has at least one column")
    parts = [_column_bytes(column) for column in columns]
    if len(parts) == 1:
        return parts[0]
    out = []
    for values in zip(*parts, strict=True):
        out.append(b"".join(len(value).to_bytes(4, "big") + value for value in values))
    return out


def _column_bytes(column: Column) -> list[bytes]:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if array.null_count:
        raise KeyIndexError(
            "a key value is null: a key column holds no nulls",
            reason="null key",
            hint="the Iceberg table's key columns must be NOT NULL (identifier fields)",
        )
    kind = array.type
    if pa.types.is_dictionary(kind):
        return _column_bytes(array.dictionary_decode())
    if pa.types.is_integer(kind) or pa.types.is_date32(kind) or pa.types.is_timestamp(kind):
        return _fixed(_as_int64(array).to_numpy(zero_copy_only=False).astype(">i8"), 8)
    if pa.types.is_decimal128(kind):
        return _decimal_bytes(array)
    if pa.types.is_string(kind):
        return pc.cast(array, pa.binary()).to_pylist()  # type: ignore[no-any-return]
    if pa.types.is_large_string(kind):
        return pc.cast(array, pa.large_binary()).to_pylist()  # type: ignore[no-any-return]
    if (
        pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_fixed_size_binary(kind)
    ):
        return array.to_pylist()  # type: ignore[no-any-return]
    if pa.types.is_boolean(kind):
        return [b"\x01" if value else b"\x00" for value in array.to_pylist()]
    raise KeyIndexError(
        f"a key column of Arrow type {kind} cannot be indexed",
        reason="key type",
        hint='set [applier] deletes = "equality" for this target',
    )


def _as_int64(array: pa.Array) -> pa.Array:
    kind = array.type
    if pa.types.is_timestamp(kind):
        if kind.unit != "us":  # Iceberg's unit; another one is converted exactly or refused
            array = array.cast(pa.timestamp("us", tz=kind.tz), safe=True)
        return array.view(pa.int64())
    if pa.types.is_date32(kind):
        return array.view(pa.int32()).cast(pa.int64())
    if pa.types.is_unsigned_integer(kind) and kind.bit_width == 64:
        return array.cast(pa.int64(), safe=True)  # refuses values above 2^63 - 1
    return array.cast(pa.int64())


def _fixed(values: np.ndarray, width: int) -> list[bytes]:
    raw = values.tobytes()
    return [raw[at : at + width] for at in range(0, len(raw), width)]


def _decimal_bytes(array: pa.Array) -> list[bytes]:
    """The unscaled values of a decimal128 array: Arrow keeps them as 16-byte little-endian
    two's complement; reversed per value, big-endian."""
    count = len(array)
    buffer = array.buffers()[1]
    assert buffer is not None
    raw = np.frombuffer(buffer, dtype=np.uint8, count=count * 16, offset=array.offset * 16)
    return _fixed(np.ascontiguousarray(raw.reshape(count, 16)[:, ::-1]), 16)
