"""A table's columns as a chunk task reads them: ``CopyColumn`` (small and picklable: it travels
to the executors with the chunk plan), built on the driver from the lake schema binlake gives
the table (``typemap``, through the TABLE_MAP ``source.table_shape`` builds) and the source's
information_schema, so that a copied value has exactly the type streaming writes.

What a chunk query selects per column (``select_expression``): the column itself, except FLOAT
(``CAST(c AS DOUBLE)``: the exact value of the stored float32, whatever the server's shortest
text for it) and BIT (``CAST(c AS UNSIGNED)``: its number). The session reads text with
``character_set_results = binary`` (every string in its column's own charset, never converted
or replaced by ``?``) and ``time_zone = '+00:00'`` (TIMESTAMP in UTC).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import pyarrow as pa

from binlake.source.table_shape import ColumnInfo
from binlake.typemap import IcebergType, LakeSchema

BINARY_CHARSET: Final = "binary"
GEOMETRY_KINDS: Final = frozenset(
    {
        "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
        "multipolygon", "geometrycollection",
    }
)  # fmt: skip
#: Charsets decoded column by column (Arrow validates UTF-8); others go value by value.
UTF8_CHARSETS: Final = frozenset({"utf8mb4", "utf8mb3", "utf8"})


@dataclass(frozen=True, slots=True)
class CopyColumn:
    """One column as a chunk task reads and writes it."""

    name: str
    #: information_schema DATA_TYPE, lower case (``int``, ``decimal``, ``datetime``, ``enum``).
    kind: str
    #: The Iceberg type (``binlake.typemap``).
    lake: IcebergType
    nullable: bool = True
    precision: int = 0
    scale: int = 0
    #: Fractional second digits of DATETIME, TIMESTAMP and TIME.
    fsp: int = 0
    #: The column's charset (``binary`` for binary strings and non-text columns).
    charset: str = BINARY_CHARSET

    def arrow_type(self) -> pa.DataType:
        simple = {
            IcebergType.INT: pa.int32(),
            IcebergType.LONG: pa.int64(),
            IcebergType.FLOAT: pa.float32(),
            IcebergType.DOUBLE: pa.float64(),
            IcebergType.DATE: pa.date32(),
            IcebergType.TIMESTAMP: pa.timestamp("us"),
            IcebergType.TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
            IcebergType.STRING: pa.string(),
            IcebergType.BINARY: pa.binary(),
        }
        if self.lake is IcebergType.DECIMAL:
            return pa.decimal128(self.precision, self.scale)
        return simple[self.lake]

    @property
    def is_text(self) -> bool:
        """A string column whose bytes are text in ``charset`` (decoded, validated)."""
        return self.lake is IcebergType.STRING and self.charset != BINARY_CHARSET

    @property
    def columnar(self) -> bool:
        """False when the column takes the per-value path (other charsets, GEOMETRY)."""
        if self.kind in GEOMETRY_KINDS:
            return False
        return not self.is_text or self.charset in UTF8_CHARSETS or self.charset == "ascii"


def quote(name: str) -> str:
    """A MySQL identifier in backquotes."""
    return "`" + name.replace("`", "``") + "`"


def select_expression(spec: CopyColumn) -> str:
    """What the chunk query selects for ``spec``."""
    if spec.kind == "float":
        return f"CAST({quote(spec.name)} AS DOUBLE)"
    if spec.kind == "bit":
        return f"CAST({quote(spec.name)} AS UNSIGNED)"
    return quote(spec.name)


def copy_columns(schema: LakeSchema, infos: Sequence[ColumnInfo]) -> tuple[CopyColumn, ...]:
    """One ``CopyColumn`` per column of ``schema`` (the lake schema of the table whose
    information_schema columns are ``infos``, in the same order)."""
    if len(infos) != len(schema.columns):
        raise ValueError(f"{schema.source_table}: {len(infos)} columns, lake schema has others")
    return tuple(
        CopyColumn(
            name=lake.name,
            kind=info.data_type.lower(),
            lake=lake.type,
            nullable=lake.nullable,
            precision=lake.precision,
            scale=lake.scale,
            fsp=info.datetime_precision or 0,
            charset=charset_of_collation(info.collation),
        )
        for lake, info in zip(schema.columns, infos, strict=True)
    )


def charset_of_collation(collation: str | None) -> str:
    """The charset a collation name belongs to (``utf8mb4_general_ci`` -> ``utf8mb4``; a
    collation name always starts with its charset's name, which holds no underscore)."""
    if not collation or collation == BINARY_CHARSET:
        return BINARY_CHARSET
    return collation.split("_", 1)[0].lower()
