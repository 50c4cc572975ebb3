"""A partitioned table's rows split by partition, computed here as Iceberg computes them (pure:
pyarrow and numpy), so that a row delta writes one data file per partition.

The facts are the Iceberg spec's ("Partition Transforms", "Appendix B: 32-bit Hash
Requirements", "Appendix D: Single-value serialization"); tests check each transform against
Iceberg's own Java transforms (``org.apache.iceberg.transforms.Transforms``) on the same values:

* ``identity``: the value;
* ``bucket[N]``: Murmur3 x86_32 (seed 0) of the value's hash bytes, ``(hash & 0x7fffffff) % N``.
  The hash bytes: an int, long, date, time or timestamp as its 8-byte little-endian long
  (microseconds for times); a string as its UTF-8 bytes; binary as it is; a decimal as its
  unscaled value's two's-complement big-endian bytes, as few as hold it;
* ``truncate[W]``: an int or long ``v - floorMod(v, W)``; a decimal the same on its unscaled
  value; a string its first W code points; binary its first W bytes;
* ``year``/``month``/``day``/``hour``: a date's or timestamp's years, months, days or hours from
  1970-01-01 00:00 UTC, rounded down (a day is a ``date``, the others ``int``);
* ``void``: null.

A partition's values are kept as Iceberg's single-value JSON of the spec's partition struct
(``SingleValueParser``: an object keyed by partition field id, a null left out; an int or long a
number, a date ``YYYY-MM-DD``, a timestamp ISO 8601 with microseconds (``+00:00`` for
timestamptz), a decimal a string of its scale's digits, binary hexadecimal): the key index stores
it, ``row_delta`` hands it to ``SingleValueParser.fromJson`` for the file's partition, and reads
the partition of a file Iceberg lists with ``SingleValueParser.toJson``.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_WIDTH = re.compile(r"(bucket|truncate)\[(\d+)\]")
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_INT4 = ("int", "date")
_INT8 = ("long", "time", "timestamp", "timestamptz")
_MICROS_PER_HOUR = 3_600_000_000
_MICROS_PER_DAY = 24 * _MICROS_PER_HOUR
#: Exact for any decimal(38, s) scaled either way.
_EXACT = Context(prec=80)


@dataclass(frozen=True)
class FilePartition:
    """A data or delete file's partition: its spec's id and its values as single-value JSON
    (an unpartitioned file's: ``{}``). Two texts may name one partition (the key order of a
    JSON object): a batch's position deletes are grouped by text, so at worst one partition
    gets two delete files."""

    spec_id: int
    values: str = "{}"


@dataclass(frozen=True)
class SpecField:
    #: The partition field's id and name, and the source column's name and Iceberg type.
    field_id: int
    name: str
    transform: str
    source: str
    source_type: str

    @property
    def result_type(self) -> str:
        """The Iceberg type of the field's values."""
        if self.transform in ("identity", "void") or self.transform.startswith("truncate"):
            return self.source_type
        return "date" if self.transform == "day" else "int"


@dataclass(frozen=True)
class PartitionSpec:
    """A table's current partition spec, as its rows need it (no fields: unpartitioned)."""

    spec_id: int
    fields: tuple[SpecField, ...] = ()

    def split(self, rows: pa.Table) -> Iterator[tuple[FilePartition, pa.Table]]:
        """``rows`` grouped by partition, in the order each partition is first met."""
        if not self.fields or not rows.num_rows:
            yield FilePartition(self.spec_id), rows
            return
        columns = {
            f"p{i}": transform(rows.column(f.source), f.transform, f.source_type)
            for i, f in enumerate(self.fields)
        }
        columns["row"] = pa.array(np.arange(rows.num_rows, dtype=np.int64))
        groups = pa.table(columns).group_by(list(columns)[:-1], use_threads=False)
        grouped = groups.aggregate([("row", "list")])
        for values in grouped.to_pylist():
            partition = {
                str(f.field_id): json_value(f.result_type, values[f"p{i}"])
                for i, f in enumerate(self.fields)
                if values[f"p{i}"] is not None
            }
            picked = pa.array(values["row_list"], pa.int64())
            yield FilePartition(self.spec_id, json.dumps(partition)), rows.take(picked)


def parse_spec(spec: Mapping[str, Any], columns: Mapping[int, tuple[str, object]]) -> PartitionSpec:
    """The spec from Iceberg's JSON form (``PartitionSpecParser``); ``columns``: the schema's
    (name, type) by field id. ``ValueError`` for a transform or source this module cannot
    compute (the table then takes MERGE)."""
    fields = []
    for item in spec.get("fields", []):
        if not {"source-id", "field-id", "name", "transform"} <= set(item):
            raise ValueError(f"a partition field of an unknown form: {item}")
        source = columns.get(int(item["source-id"]))
        if source is None or not isinstance(source[1], str):
            raise ValueError(f"partition field {item['name']} has a source binlake cannot read")
        transform = str(item["transform"])
        _check_transform(transform, source[1])
        field = SpecField(int(item["field-id"]), str(item["name"]), transform, source[0], source[1])
        fields.append(field)
    return PartitionSpec(int(spec.get("spec-id", 0)), tuple(fields))


def _check_transform(transform: str, source_type: str) -> None:
    width = _WIDTH.fullmatch(transform)
    kind = width.group(1) if width else transform
    decimal = _DECIMAL.fullmatch(source_type) is not None
    allowed = {
        "identity": source_type not in ("float", "double"),  # NaN has no JSON form
        "void": True,
        "bucket": source_type in (*_INT4, *_INT8, "string", "binary") or decimal,
        "truncate": source_type in ("int", "long", "string", "binary") or decimal,
        "year": source_type in ("date", "timestamp", "timestamptz"),
        "month": source_type in ("date", "timestamp", "timestamptz"),
        "day": source_type in ("date", "timestamp", "timestamptz"),
        "hour": source_type in ("timestamp", "timestamptz"),
    }
    if not allowed.get(kind, False):
        raise ValueError(f"the partition transform {transform} of a {source_type} column")


# ---- transforms ---------------------------------------------------------------------------


def transform(column: pa.ChunkedArray | pa.Array, name: str, source_type: str) -> pa.Array:
    """The partition values of ``column`` (in ``delta_files``' Arrow type for ``source_type``)
    under the transform ``name``; dates and times as their integer counts (days, micros)."""
    values = _internal(pa.chunked_array([column]) if isinstance(column, pa.Array) else column)
    if name == "identity":
        return values
    if name == "void":
        return pa.nulls(len(values), values.type)
    width = _WIDTH.fullmatch(name)
    if width and width.group(1) == "bucket":
        return bucket(values, source_type, int(width.group(2)))
    if width:
        return truncate(values, source_type, int(width.group(2)))
    return _time_unit(values, name, source_type)


def _internal(column: pa.ChunkedArray) -> pa.Array:
    array = column.combine_chunks()
    if pa.types.is_date32(array.type):
        return array.cast(pa.int32())
    if pa.types.is_timestamp(array.type) or pa.types.is_time64(array.type):
        return array.view(pa.int64())
    return array


def _ints(values: pa.Array) -> np.ndarray:
    """Integer values as int64 (a null as 0: the caller masks it)."""
    ints: np.ndarray = values.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return ints


def _time_unit(values: pa.Array, name: str, source_type: str) -> pa.Array:
    ints = _ints(values)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    days = ints if source_type == "date" else np.floor_divide(ints, _MICROS_PER_DAY)
    if name == "hour":
        out = np.floor_divide(ints, _MICROS_PER_HOUR)
    elif name == "day":
        out = days
    else:
        dates = days.astype("datetime64[D]")
        years = dates.astype("datetime64[Y]").astype(np.int64)
        months = dates.astype("datetime64[M]").astype(np.int64)
        out = years if name == "year" else months
    return pa.array(out.astype(np.int32), pa.int32(), mask=~valid)


def truncate(values: pa.Array, source_type: str, width: int) -> pa.Array:
    """Iceberg's ``truncate[width]`` of ``values`` (``_internal`` form)."""
    if source_type in ("int", "long"):
        ints = _ints(values)
        valid = values.is_valid().to_numpy(zero_copy_only=False)
        out = ints - np.mod(ints, width)
        if source_type == "int":  # in 32 bits, as Java computes it: the lowest int wraps
            out = out.astype(np.int32)
        return pa.array(out, values.type, mask=~valid)
    if source_type == "string":
        return pc.utf8_slice_codeunits(values, 0, width)
    if source_type == "binary":
        return pc.binary_slice(values, 0, width)
    scale = values.type.scale
    out = []
    for value in values.to_pylist():
        if value is None:
            out.append(None)
            continue
        unscaled = _unscaled(value, scale)
        out.append(Decimal(unscaled - unscaled % width).scaleb(-scale, _EXACT))
    # Rounding down may need one digit more than the column has (as Java's BigDecimal does).
    return pa.array(out, pa.decimal128(38, scale))


def bucket(values: pa.Array, source_type: str, count: int) -> pa.Array:
    """Iceberg's ``bucket[count]`` of ``values`` (``_internal`` form)."""
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    if source_type in (*_INT4, *_INT8):
        longs = _ints(values).astype("<i8")
        hashes = murmur3_fixed(longs.view(np.uint8).reshape(-1, 8))
    else:
        hashes = murmur3(_hash_bytes(values, source_type))
    out = (hashes & np.uint32(0x7FFFFFFF)).astype(np.int64) % count
    return pa.array(out.astype(np.int32), pa.int32(), mask=~valid)


def _hash_bytes(values: pa.Array, source_type: str) -> list[bytes]:
    if source_type == "string":
        return [b"" if v is None else v.encode() for v in values.to_pylist()]
    if source_type == "binary":
        return [b"" if v is None else v for v in values.to_pylist()]
    scale = values.type.scale
    return [b"" if v is None else _min_bytes(_unscaled(v, scale)) for v in values.to_pylist()]


def _unscaled(value: Decimal, scale: int) -> int:
    return int(value.scaleb(scale, _EXACT))


def _min_bytes(unscaled: int) -> bytes:
    """Two's-complement big-endian bytes, as few as hold the value (Java's
    ``BigInteger.toByteArray``)."""
    bits = (unscaled if unscaled >= 0 else ~unscaled).bit_length()
    return unscaled.to_bytes(bits // 8 + 1, "big", signed=True)


# ---- Murmur3 x86_32, seed 0 -------------------------------------------------------------------

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix(k: np.ndarray) -> np.ndarray:
    return _rotl(k * _C1, 15) * _C2


def murmur3_fixed(data: np.ndarray) -> np.ndarray:
    """Murmur3 x86_32 (seed 0) of each row of ``data`` (uint8, rows of one length)."""
    rows, length = data.shape
    h = np.zeros(rows, np.uint32)
    blocks = length // 4
    if blocks:
        words = np.ascontiguousarray(data[:, : blocks * 4]).view("<u4").astype(np.uint32)
        for i in range(blocks):
            h = _rotl(h ^ _mix(words[:, i]), 13) * np.uint32(5) + np.uint32(0xE6546B64)
    tail = length - blocks * 4
    if tail:
        k = np.zeros(rows, np.uint32)
        for i in reversed(range(tail)):
            k = (k << np.uint32(8)) | data[:, blocks * 4 + i].astype(np.uint32)
        h ^= _mix(k)
    h ^= np.uint32(length & 0xFFFFFFFF)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


def murmur3(values: Sequence[bytes]) -> np.ndarray:
    """Murmur3 x86_32 (seed 0) of each value, values of one length hashed together."""
    out = np.zeros(len(values), np.uint32)
    by_length: dict[int, list[int]] = {}
    for i, value in enumerate(values):
        by_length.setdefault(len(value), []).append(i)
    for length, rows in by_length.items():
        joined = b"".join(values[i] for i in rows)
        data = np.frombuffer(joined, np.uint8).reshape(len(rows), length)
        out[np.array(rows, np.int64)] = murmur3_fixed(data)
    return out


# ---- single-value JSON -----------------------------------------------------------------------

_EPOCH = datetime.datetime(1970, 1, 1)


def json_value(iceberg_type: str, value: object) -> object:
    """A partition value (as Arrow gives ``transform``'s output: dates and times as integer
    counts) in the JSON form ``SingleValueParser.fromJson`` reads for ``iceberg_type``."""
    if iceberg_type in ("int", "long", "boolean", "string"):
        return value
    if iceberg_type == "date":
        assert isinstance(value, int)
        return (_EPOCH + datetime.timedelta(days=value)).date().isoformat()
    if iceberg_type in ("timestamp", "timestamptz"):
        assert isinstance(value, int)
        text = (_EPOCH + datetime.timedelta(microseconds=value)).isoformat(timespec="microseconds")
        return text + "+00:00" if iceberg_type == "timestamptz" else text
    if iceberg_type == "binary":
        assert isinstance(value, bytes)
        return value.hex()
    if _DECIMAL.fullmatch(iceberg_type) and isinstance(value, Decimal):
        return format(value, "f")
    raise ValueError(f"a partition value of Iceberg type {iceberg_type}: {value!r}")
