"""The design's type mapping: a TABLE_MAP column -> an Iceberg column, and its values, exactly.

==============================  ====================  ===============================
source column                   Iceberg type          value written
==============================  ====================  ===============================
TINYINT/SMALLINT/MEDIUMINT/INT  int                   ``int``
(signed or UNSIGNED; INT signed)
INT UNSIGNED, BIGINT            long                  ``int``
BIGINT UNSIGNED                 decimal(20,0)         ``Decimal``
DECIMAL(p,s), p <= 38           decimal(p,s)          ``Decimal`` (the column's scale)
DECIMAL(p,s), p > 38            string                plain text, scale kept (``1.50``)
FLOAT, DOUBLE                   float, double         ``float``
BIT(n), n <= 63                 long                  ``int``
BIT(64)                         decimal(20,0)         ``Decimal`` (a long cannot hold 2^64-1)
YEAR                            int                   ``int`` (YEAR 0000 is 0)
DATE                            date                  ``date``
DATETIME(fsp)                   timestamp (no zone)   naive ``datetime``
TIMESTAMP(fsp)                  timestamptz           ``datetime`` in UTC
TIME(fsp)                       long                  microseconds (negative, > 24 h kept)
CHAR/VARCHAR/TEXT, JSON         string                ``str`` (decoded with the column charset)
BINARY/VARBINARY/BLOB           binary                ``bytes`` (BINARY(n) NUL-padded as stored)
ENUM, SET                       string                the label(s)
UUID/INET4/INET6 (with a hint)  string                MariaDB's canonical text
GEOMETRY                        binary                WKB; EWKB (SRID flag) when SRID != 0
==============================  ====================  ===============================

Zero dates (``0000-00-00``, partly zero or invalid dates: ``ZeroDate``) become null; each one
is counted per column (``Counter`` keyed ``db.table.column``) so that callers report them.
Anything else raises ``UnsupportedTypeError`` naming the table and the column.

Pure: no pyspark here (the Spark types are ``binlake.lake.spark.types``), so the DDL parser
(``binlake.ddl``) can use the mapping without Spark; ``LakeColumn.arrow_type`` imports pyarrow
when first called.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.names import TableName
from binlake.binlog.rows import RowChange
from binlake.binlog.tablemap import TableMap
from binlake.binlog.values import ABSENT, ColumnSpec, Geometry, ZeroDate, column_spec
from binlake.errors import SourceConfigError, UnsupportedTypeError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "IcebergType",
    "LakeColumn",
    "LakeSchema",
    "RowConverter",
    "ZeroDateCounts",
    "geometry_wkb",
    "lake_column",
    "lake_schema",
    "row_converter",
    "to_row_values",
]

#: Zero dates nulled, per ``db.table.column``.
ZeroDateCounts = Counter[str]
Converter = Callable[[Any], Any]

_MAX_ICEBERG_PRECISION = 38
_ONE_MICROSECOND = dt.timedelta(microseconds=1)
#: The EWKB flag saying that a 4-byte SRID follows the geometry type.
_EWKB_SRID_FLAG = 0x20000000


class IcebergType(Enum):
    """Iceberg primitive types binlake writes; value: (Iceberg name, Spark SQL name)."""

    INT = ("int", "INT")
    LONG = ("long", "BIGINT")
    DECIMAL = ("decimal", "DECIMAL")
    FLOAT = ("float", "FLOAT")
    DOUBLE = ("double", "DOUBLE")
    DATE = ("date", "DATE")
    TIMESTAMP = ("timestamp", "TIMESTAMP_NTZ")
    TIMESTAMPTZ = ("timestamptz", "TIMESTAMP")
    STRING = ("string", "STRING")
    BINARY = ("binary", "BINARY")

    def __init__(self, iceberg_name: str, sql_name: str) -> None:
        self.iceberg_name = iceberg_name
        self.sql_name = sql_name


@dataclass(frozen=True, slots=True)
class LakeColumn:
    """One Iceberg column made from one source column."""

    name: str
    #: Position of the source column in the TABLE_MAP.
    index: int
    #: The source type as MariaDB would spell it (``BIGINT UNSIGNED``, ``DATETIME(3)``).
    source_type: str
    type: IcebergType
    nullable: bool = True
    precision: int = 0
    scale: int = 0

    @property
    def iceberg_type(self) -> str:
        """The Iceberg type name: ``long``, ``decimal(20,0)``, ``timestamptz``..."""
        if self.type is IcebergType.DECIMAL:
            return f"decimal({self.precision},{self.scale})"
        return self.type.iceberg_name

    @property
    def sql_type(self) -> str:
        """The Spark SQL type for DDL: ``BIGINT``, ``DECIMAL(20,0)``, ``TIMESTAMP_NTZ``..."""
        if self.type is IcebergType.DECIMAL:
            return f"DECIMAL({self.precision},{self.scale})"
        return self.type.sql_name

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        if self.type is IcebergType.DECIMAL:
            return pa.decimal128(self.precision, self.scale)
        factories: dict[IcebergType, Callable[[], pa.DataType]] = {
            IcebergType.INT: pa.int32,
            IcebergType.LONG: pa.int64,
            IcebergType.FLOAT: pa.float32,
            IcebergType.DOUBLE: pa.float64,
            IcebergType.DATE: pa.date32,
            IcebergType.TIMESTAMP: lambda: pa.timestamp("us"),
            IcebergType.TIMESTAMPTZ: lambda: pa.timestamp("us", tz="UTC"),
            IcebergType.STRING: pa.string,
            IcebergType.BINARY: pa.binary,
        }
        return factories[self.type]()


@dataclass(frozen=True, slots=True)
class LakeSchema:
    """The Iceberg schema of one source table, in source column order."""

    #: The source table.
    source_table: TableName
    columns: tuple[LakeColumn, ...]
    #: Names of the primary key columns in key order (Iceberg identifier fields); () if none.
    key: tuple[str, ...]

    def arrow_schema(self) -> pa.Schema:
        import pyarrow as pa

        return pa.schema(
            [pa.field(c.name, c.arrow_type(), nullable=c.nullable) for c in self.columns]
        )


# ---- the mapping ------------------------------------------------------------------------------

_INT_NAMES: dict[int, str] = {
    T.TINY: "TINYINT",
    T.SHORT: "SMALLINT",
    T.INT24: "MEDIUMINT",
    T.LONG: "INT",
}
_TEXT_NAMES: dict[int, tuple[str, str]] = {
    T.STRING: ("CHAR", "BINARY"),
    T.VARCHAR: ("VARCHAR", "VARBINARY"),
    T.VAR_STRING: ("VARCHAR", "VARBINARY"),
    T.TINY_BLOB: ("TINYTEXT", "TINYBLOB"),
    T.BLOB: ("TEXT", "BLOB"),
    T.MEDIUM_BLOB: ("MEDIUMTEXT", "MEDIUMBLOB"),
    T.LONG_BLOB: ("LONGTEXT", "LONGBLOB"),
}
#: BLOB columns log their length-prefix size as metadata, not a distinct type code.
_BLOB_NAMES: dict[int, int] = {1: T.TINY_BLOB, 2: T.BLOB, 3: T.MEDIUM_BLOB, 4: T.LONG_BLOB}
_SIMPLE: dict[int, tuple[str, IcebergType]] = {
    T.FLOAT: ("FLOAT", IcebergType.FLOAT),
    T.DOUBLE: ("DOUBLE", IcebergType.DOUBLE),
    T.YEAR: ("YEAR", IcebergType.INT),
    T.DATE: ("DATE", IcebergType.DATE),
    T.NEWDATE: ("DATE", IcebergType.DATE),
    T.ENUM: ("ENUM", IcebergType.STRING),
    T.SET: ("SET", IcebergType.STRING),
    T.JSON: ("JSON", IcebergType.STRING),
    T.GEOMETRY: ("GEOMETRY", IcebergType.BINARY),
}
_FSP_TYPES: dict[int, tuple[str, IcebergType]] = {
    T.DATETIME: ("DATETIME", IcebergType.TIMESTAMP),
    T.DATETIME2: ("DATETIME", IcebergType.TIMESTAMP),
    T.TIMESTAMP: ("TIMESTAMP", IcebergType.TIMESTAMPTZ),
    T.TIMESTAMP2: ("TIMESTAMP", IcebergType.TIMESTAMPTZ),
    T.TIME: ("TIME", IcebergType.LONG),
    T.TIME2: ("TIME", IcebergType.LONG),
}
_OLD_TEMPORAL = frozenset({T.DATETIME, T.TIMESTAMP, T.TIME})


def lake_column(tm: TableMap, column: int, hint: str | None = None) -> LakeColumn:
    """The Iceberg column for column ``column`` of ``tm``; ``hint`` as in
    ``binlake.binlog.values`` (``"uuid"``, ``"inet4"``, ``"inet6"``)."""
    spec = column_spec(tm, column, hint)  # raises UnsupportedTypeError naming table and column
    source_type, lake_type, precision, scale = _map_spec(spec)
    return LakeColumn(
        name=spec.name,
        index=column,
        source_type=source_type,
        type=lake_type,
        nullable=tm.nullable[column],
        precision=precision,
        scale=scale,
    )


def _map_spec(spec: ColumnSpec) -> tuple[str, IcebergType, int, int]:
    """(source type text, Iceberg type, precision, scale) of a decodable column."""
    if spec.type in _INT_NAMES or spec.type == T.LONGLONG:
        return _map_integer(spec)
    if spec.type == T.NEWDECIMAL:
        precision, scale = spec.metadata >> 8, spec.metadata & 0xFF
        text = f"DECIMAL({precision},{scale})" + (" UNSIGNED" if spec.unsigned else "")
        if precision > _MAX_ICEBERG_PRECISION:
            return text, IcebergType.STRING, 0, 0
        return text, IcebergType.DECIMAL, precision, scale
    if spec.type == T.BIT:
        if spec.length == 64:
            return "BIT(64)", IcebergType.DECIMAL, 20, 0
        return f"BIT({spec.length})", IcebergType.LONG, 0, 0
    if spec.type in _FSP_TYPES:
        name, lake_type = _FSP_TYPES[spec.type]
        fsp = 0 if spec.type in _OLD_TEMPORAL else spec.metadata
        return (f"{name}({fsp})" if fsp else name), lake_type, 0, 0
    if spec.type in _SIMPLE:
        name, lake_type = _SIMPLE[spec.type]
        return name, lake_type, 0, 0
    if spec.type in _TEXT_NAMES:
        return _map_text(spec)
    raise UnsupportedTypeError(
        f"column {spec.name} (#{spec.index + 1}): type code {spec.type} has no Iceberg mapping",
        table=spec.table,
    )


def _map_integer(spec: ColumnSpec) -> tuple[str, IcebergType, int, int]:
    name = _INT_NAMES.get(spec.type, "BIGINT") + (" UNSIGNED" if spec.unsigned else "")
    if spec.type == T.LONGLONG:
        if spec.unsigned:
            return name, IcebergType.DECIMAL, 20, 0
        return name, IcebergType.LONG, 0, 0
    if spec.type == T.LONG and spec.unsigned:
        return name, IcebergType.LONG, 0, 0
    return name, IcebergType.INT, 0, 0


def _map_text(spec: ColumnSpec) -> tuple[str, IcebergType, int, int]:
    if spec.hint is not None:
        return spec.hint.upper(), IcebergType.STRING, 0, 0
    type_code = _BLOB_NAMES.get(spec.length, T.BLOB) if spec.type == T.BLOB else spec.type
    text_name, binary_name = _TEXT_NAMES[type_code]
    if spec.codec is not None:
        return text_name, IcebergType.STRING, 0, 0
    return binary_name, IcebergType.BINARY, 0, 0


def lake_schema(tm: TableMap, hints: Mapping[int, str] | None = None) -> LakeSchema:
    """The Iceberg schema of a source table, from the TABLE_MAP in force; ``hints`` maps column
    indexes to ``"uuid"``, ``"inet4"`` or ``"inet6"``."""
    return _lake_schema(tm, _hint_key(hints))


def _hint_key(hints: Mapping[int, str] | None) -> tuple[tuple[int, str], ...]:
    return tuple(sorted(hints.items())) if hints else ()


@lru_cache(maxsize=1024)
def _lake_schema(tm: TableMap, hints: tuple[tuple[int, str], ...]) -> LakeSchema:
    if tm.column_names is None:
        raise SourceConfigError(
            f"table {tm.qualified_name}: the binlog has no column names",
            setting="binlog_row_metadata",
            hint="set binlog_row_metadata=FULL on the source (MariaDB 10.5+, MySQL 8.0.1+)",
        )
    by_column = dict(hints)
    columns = tuple(lake_column(tm, i, by_column.get(i)) for i in range(tm.column_count))
    key = tuple(columns[i].name for i in tm.primary_key or ())
    return LakeSchema(tm.name, columns, key)


# ---- values -----------------------------------------------------------------------------------


def _decimal(value: int) -> Decimal:
    return Decimal(value)


def _plain_text(value: Decimal) -> str:
    """A decimal as plain text with its scale: never an exponent (``0E-30`` is ``0.000...``)."""
    return format(value, "f")


def _microseconds(value: dt.timedelta) -> int:
    return value // _ONE_MICROSECOND


def geometry_wkb(value: Geometry) -> bytes:
    """The WKB of a geometry; with a non-zero SRID, EWKB (SRID flag set, SRID after the type)."""
    if value.srid == 0:
        return value.wkb
    order = "<" if value.wkb[:1] == b"\x01" else ">"
    (geometry_type,) = struct.unpack_from(order + "I", value.wkb, 1)
    head = value.wkb[:1] + struct.pack(order + "II", geometry_type | _EWKB_SRID_FLAG, value.srid)
    return head + value.wkb[5:]


def _value_converter(column: LakeColumn, type_code: int) -> Converter | None:
    """The conversion a column's decoded values need (None: they are written as they are)."""
    if column.type is IcebergType.DECIMAL and type_code in (T.LONGLONG, T.BIT):
        return _decimal
    if column.type is IcebergType.STRING and type_code == T.NEWDECIMAL:
        return _plain_text
    if type_code in (T.TIME, T.TIME2):
        return _microseconds
    if type_code == T.GEOMETRY:
        return geometry_wkb
    return None


_ZERO_DATE_TYPES = frozenset(
    {T.DATE, T.NEWDATE, T.DATETIME, T.DATETIME2, T.TIMESTAMP, T.TIMESTAMP2}
)


@dataclass(frozen=True, slots=True)
class RowConverter:
    """Turns decoded rows of one TABLE_MAP into values Spark and Arrow take for its schema."""

    schema: LakeSchema
    #: (column index, conversion, whether zero dates are possible) for columns that need work.
    steps: tuple[tuple[int, Converter | None, bool], ...]

    def convert(
        self, values: Sequence[Any], zero_dates: ZeroDateCounts | None = None
    ) -> tuple[Any, ...]:
        """The row's values for the Iceberg columns. NULL stays None, ``ABSENT`` (a column a
        MINIMAL/NOBLOB image left out) stays ``ABSENT`` for the caller to resolve; zero dates
        become None and are counted in ``zero_dates``."""
        out = list(values)
        for index, convert, zero_possible in self.steps:
            value = out[index]
            if value is None or value is ABSENT:
                continue
            if zero_possible and isinstance(value, ZeroDate):
                out[index] = None
                if zero_dates is not None:
                    zero_dates[self._column_key(index)] += 1
            elif convert is not None:
                out[index] = convert(value)
        return tuple(out)

    def convert_changes(
        self, changes: Sequence[RowChange], zero_dates: ZeroDateCounts | None = None
    ) -> list[RowChange]:
        """``convert`` of both images of each (before, after) row change."""
        convert = self.convert
        return [
            (
                None if before is None else convert(before, zero_dates),
                None if after is None else convert(after, zero_dates),
            )
            for before, after in changes
        ]

    def _column_key(self, index: int) -> str:
        return f"{self.schema.source_table}.{self.schema.columns[index].name}"


def row_converter(tm: TableMap, hints: Mapping[int, str] | None = None) -> RowConverter:
    """The (cached) converter for rows decoded with ``tm`` and ``hints``."""
    return _row_converter(tm, _hint_key(hints))


@lru_cache(maxsize=1024)
def _row_converter(tm: TableMap, hints: tuple[tuple[int, str], ...]) -> RowConverter:
    schema = _lake_schema(tm, hints)
    steps = []
    for column in schema.columns:
        type_code = tm.real_type(column.index)
        convert = _value_converter(column, type_code)
        zero_possible = type_code in _ZERO_DATE_TYPES
        if convert is not None or zero_possible:
            steps.append((column.index, convert, zero_possible))
    return RowConverter(schema, tuple(steps))


def to_row_values(
    values: Sequence[Any],
    table_map: TableMap,
    *,
    hints: Mapping[int, str] | None = None,
    zero_dates: ZeroDateCounts | None = None,
) -> tuple[Any, ...]:
    """One decoded row (``binlake.binlog.rows.decode_rows``) as Iceberg values; see
    ``RowConverter.convert``."""
    return row_converter(table_map, hints).convert(values, zero_dates)
