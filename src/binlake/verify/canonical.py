"""One normal form for the values of a lake column, and the row hash `verify` compares.

`verify` reads the source through SQL (PyMySQL) and the lake through Spark. Both sides are first
brought to the values binlake writes (the design's type mapping, ``binlake.typemap``):

* ``source_value``: an SQL result -> the lake value (the SELECT expression of each column,
  ``source_expression``, asks MariaDB for an exact text or number where PyMySQL's own conversion
  would lose something: FLOAT is read as ``CAST(c AS DOUBLE)`` (its exact float32 value; the
  text form has 6 digits), temporal types as text (zero and invalid dates -> null, TIME with its
  sign and > 24 h), BIT as an unsigned integer, TIMESTAMP in a UTC session);
* ``lake_value``: a Spark row value -> the lake value (``timestamptz`` is selected as
  ``unix_micros``: ``collect`` would give local wall-clock times);

and then both go through the same ``encode``: decimals exact (scale-independent digits and
exponent, never through a Decimal context), floats by their IEEE bits (-0.0 as 0.0), dates by
day number, timestamps in microseconds (UTC for timestamptz), strings as UTF-8, binary as is,
NULL distinct from every value. ``row_hash`` is BLAKE2b-128 of the length-prefixed encodings in
column-name order; ``key_text`` is the JSON form of a primary key used to list differences.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from binlake.binlog.values import Geometry
from binlake.typemap import IcebergType, geometry_wkb

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_NAIVE_EPOCH = dt.datetime(1970, 1, 1)
_MICRO = dt.timedelta(microseconds=1)
_LENGTH = struct.Struct(">I")

INTEGER = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
TEXT = frozenset(
    {
        "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json",
        "uuid", "inet4", "inet6",
    }
)  # fmt: skip
BINARY = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
GEOMETRY = frozenset(
    {
        "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
        "multipolygon", "geometrycollection",
    }
)  # fmt: skip
IT = IcebergType
#: Source DATA_TYPE -> the lake types it may map to (the mapping, plus Iceberg's widenings).
_ALLOWED: dict[str, frozenset[IcebergType]] = {
    **dict.fromkeys(INTEGER, frozenset({IT.INT, IT.LONG, IT.DECIMAL})),
    "float": frozenset({IT.FLOAT, IT.DOUBLE}),
    **dict.fromkeys(("double", "real", "double precision"), frozenset({IT.DOUBLE})),
    **dict.fromkeys(("decimal", "numeric", "fixed"), frozenset({IT.DECIMAL, IT.STRING})),
    "bit": frozenset({IT.LONG, IT.DECIMAL}),
    "year": frozenset({IT.INT, IT.LONG}),
    "date": frozenset({IT.DATE}),
    "datetime": frozenset({IT.TIMESTAMP}),
    "timestamp": frozenset({IT.TIMESTAMPTZ}),
    "time": frozenset({IT.LONG}),
    **dict.fromkeys(TEXT, frozenset({IT.STRING})),
    **dict.fromkeys(BINARY | GEOMETRY, frozenset({IT.BINARY})),
}


@dataclass(frozen=True, slots=True)
class VerifyColumn:
    """A column as both sides are read: its lake type and its source DATA_TYPE."""

    name: str
    type: IcebergType
    #: For decimals: the lake column's scale.
    scale: int
    #: information_schema DATA_TYPE, lower case (``bigint``, ``datetime``, ``uuid``...).
    source_type: str


def mapping_problem(column: VerifyColumn) -> str | None:
    """Why a source type and a lake type cannot hold the same values (None when they can)."""
    allowed = _ALLOWED.get(column.source_type)
    if allowed is None:
        return f"column {column.name}: source type {column.source_type} has no lake mapping"
    if column.type not in allowed:
        wanted = " or ".join(sorted(t.iceberg_name for t in allowed))
        return (
            f"column {column.name}: source {column.source_type.upper()} is "
            f"{column.type.iceberg_name} in the lake (the mapping gives {wanted})"
        )
    return None


# ---- the source side ----------------------------------------------------------------------


def quote_sql(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def source_expression(column: VerifyColumn) -> str:
    """The SELECT expression that reads ``column`` exactly from MariaDB."""
    name = quote_sql(column.name)
    kind = column.source_type
    if kind == "float":
        return f"CAST({name} AS DOUBLE)"
    if kind == "bit":
        return f"CAST({name} AS UNSIGNED)"
    if kind in ("date", "datetime", "timestamp", "time"):
        return f"CAST({name} AS CHAR)"
    return name


def parse_date(text: str) -> dt.date | None:
    """``YYYY-MM-DD``; zero, partly zero and invalid dates are None (as the applier writes)."""
    try:
        return dt.date(int(text[0:4]), int(text[5:7]), int(text[8:10]))
    except ValueError:
        return None


def parse_datetime(text: str) -> dt.datetime | None:
    """``YYYY-MM-DD HH:MM:SS[.ffffff]``; zero or invalid dates are None."""
    day = parse_date(text)
    if day is None:
        return None
    clock, _, fraction = text[11:].partition(".")
    hour, minute, second = (int(part) for part in clock.split(":"))
    micro = int(fraction.ljust(6, "0")) if fraction else 0
    return dt.datetime(day.year, day.month, day.day, hour, minute, second, micro)


def parse_time(text: str) -> int:
    """``[-]H:MM:SS[.ffffff]`` (hours may exceed 24) -> microseconds."""
    sign = -1 if text.startswith("-") else 1
    clock, _, fraction = text.lstrip("-").partition(".")
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    micro = int(fraction.ljust(6, "0")) if fraction else 0
    return sign * (((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + micro)


def _geometry(value: bytes) -> bytes:
    """MariaDB's internal geometry (4-byte little-endian SRID + WKB) -> what the applier writes."""
    srid = int.from_bytes(value[:4], "little")
    return geometry_wkb(Geometry(srid, bytes(value[4:])))


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes | bytearray) else str(value)


def _timestamp(text: str) -> dt.datetime | None:
    value = parse_datetime(text)
    return None if value is None else value.replace(tzinfo=dt.UTC)


def _decimal(column: VerifyColumn) -> Callable[[Any], Any]:
    if column.type is IT.STRING:
        return lambda value: format(value, "f")
    return lambda value: value


def source_converter(column: VerifyColumn) -> Callable[[Any], Any]:
    """Turns the value ``source_expression`` reads into the value the applier writes."""
    kind = column.source_type
    by_kind: dict[str, Callable[[Any], Any]] = {
        "date": lambda v: parse_date(_text(v)),
        "datetime": lambda v: parse_datetime(_text(v)),
        "timestamp": lambda v: _timestamp(_text(v)),
        "time": lambda v: parse_time(_text(v)),
    }
    if kind in by_kind:
        return by_kind[kind]
    if kind in ("decimal", "numeric", "fixed"):
        return _decimal(column)
    if kind in TEXT:
        return _text
    if kind in GEOMETRY:
        return lambda v: _geometry(bytes(v))
    if kind in BINARY:
        return bytes
    return lambda value: value


def source_values(columns: Sequence[VerifyColumn], row: Sequence[Any]) -> list[Any]:
    converters = [source_converter(c) for c in columns]
    return [None if v is None else f(v) for f, v in zip(converters, row, strict=True)]


# ---- the lake side ------------------------------------------------------------------------


def lake_expression(column: VerifyColumn) -> str:
    """The Spark SQL expression that reads ``column`` exactly."""
    name = quote_sql(column.name)
    if column.type is IT.TIMESTAMPTZ:
        return f"unix_micros({name}) AS {name}"
    return name


def lake_value(column: VerifyColumn, value: Any) -> Any:
    if value is None:
        return None
    if column.type is IT.TIMESTAMPTZ:
        return EPOCH + dt.timedelta(microseconds=int(value))
    if column.type is IT.BINARY:
        return bytes(value)
    return value


# ---- the one encoding both sides share ----------------------------------------------------


def exact_decimal(value: int | Decimal) -> tuple[int, int, int]:
    """(sign, digits, exponent) with no trailing zeros in ``digits``: equal numbers are equal
    tuples whatever their scale; computed without any Decimal context (no rounding)."""
    if isinstance(value, int):
        sign, digits, exponent = int(value < 0), abs(value), 0
    else:
        if not value.is_finite():
            raise ValueError(f"{value} is not a number binlake writes")
        parts = value.as_tuple()
        sign = parts.sign
        digits = int("".join(map(str, parts.digits)) or "0")
        exponent = int(parts.exponent)
    if digits == 0:
        return 0, 0, 0
    while digits % 10 == 0:
        digits //= 10
        exponent += 1
    return sign, digits, exponent


def _float_bits(fmt: str, value: float) -> bytes:
    return struct.pack(fmt, 0.0 if value == 0 else value)


def _naive_micros(value: dt.datetime) -> int:
    return (value - _NAIVE_EPOCH) // _MICRO


def _aware_micros(value: dt.datetime) -> int:
    return (value - EPOCH) // _MICRO


_ENCODERS: dict[IcebergType, Callable[[Any], bytes]] = {
    IT.INT: lambda v: b"I%d" % v,
    IT.LONG: lambda v: b"I%d" % v,
    IT.DECIMAL: lambda v: b"D%d,%d,%d" % exact_decimal(v),
    IT.FLOAT: lambda v: b"F" + _float_bits("<f", v),
    IT.DOUBLE: lambda v: b"G" + _float_bits("<d", v),
    IT.DATE: lambda v: b"d%d" % v.toordinal(),
    IT.TIMESTAMP: lambda v: b"t%d" % _naive_micros(v),
    IT.TIMESTAMPTZ: lambda v: b"z%d" % _aware_micros(v),
    IT.STRING: lambda v: b"S" + v.encode("utf-8"),
    IT.BINARY: lambda v: b"B" + bytes(v),
}


def encode(column: VerifyColumn, value: Any) -> bytes:
    """The canonical bytes of one lake value (``None`` is NULL)."""
    if value is None:
        return b"N"
    return _ENCODERS[column.type](value)


def row_hash(columns: Sequence[VerifyColumn], values: Sequence[Any]) -> bytes:
    """BLAKE2b-128 of the row's canonical encodings, length-prefixed, in the given order."""
    digest = hashlib.blake2b(digest_size=16, person=b"binlake-verify1")
    for column, value in zip(columns, values, strict=True):
        encoded = encode(column, value)
        digest.update(_LENGTH.pack(len(encoded)))
        digest.update(encoded)
    return digest.digest()


def _key_part(column: VerifyColumn, value: Any) -> Any:
    if value is None or column.type in (IT.INT, IT.LONG, IT.STRING):
        return value
    if column.type is IT.DECIMAL:
        sign, digits, exponent = exact_decimal(value)
        return format(Decimal((sign, tuple(map(int, str(digits))), exponent)), "f")
    if column.type in (IT.FLOAT, IT.DOUBLE):
        return repr(0.0 if value == 0 else float(value))
    if column.type is IT.BINARY:
        return "0x" + bytes(value).hex()
    if column.type is IT.TIMESTAMPTZ:
        return str(value.astimezone(dt.UTC).isoformat())
    return str(value.isoformat())


def key_text(columns: Sequence[VerifyColumn], values: Sequence[Any]) -> str:
    """The primary key as a JSON array: equal keys give equal text, and it is what is listed."""
    parts = [_key_part(c, v) for c, v in zip(columns, values, strict=True)]
    return json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
