"""A table's shape as a TABLE_MAP, read from the source's information_schema.

The initial snapshot creates Iceberg tables before any row event of theirs was seen. To give
them exactly the schema the applier would give them from a binlog TABLE_MAP (so that streaming
later finds nothing to evolve), the snapshot builds the TABLE_MAP MariaDB would write for the
table under ``binlog_row_metadata=FULL``: type codes, metadata, nullability, signedness,
collations, column names, ENUM/SET labels and the primary key. ``table_map_from_columns`` is
pure (tests compare it with the TABLE_MAP of the same table in a real binlog);
``describe_table`` runs the two information_schema queries.

Type codes and metadata follow MariaDB's TABLE_MAP: integers carry none; FLOAT 4, DOUBLE 8;
NEWDECIMAL ``precision << 8 | scale``; BIT ``bytes << 8 | bits``; DATETIME2 / TIMESTAMP2 /
TIME2 their fractional digits; VARCHAR its maximum byte length; BLOB/TEXT (and JSON, a
LONGTEXT in MariaDB) and GEOMETRY their length-prefix size; CHAR, ENUM and SET are STRING with
the real type in the first metadata byte (CHAR lengths over 255 keep bits 8-9 there, XOR-ed into
bits 4-5).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.encodings.charsets import codec_for_collation
from binlake.binlog.tablemap import TableMap
from binlake.errors import UnsupportedTypeError

#: The collation id of binary strings.
BINARY_COLLATION = 63

_INTEGERS = {
    "tinyint": T.TINY,
    "smallint": T.SHORT,
    "mediumint": T.INT24,
    "int": T.LONG,
    "integer": T.LONG,
    "bigint": T.LONGLONG,
}
_BLOBS = {
    "tinyblob": 1, "tinytext": 1, "blob": 2, "text": 2, "mediumblob": 3, "mediumtext": 3,
    "longblob": 4, "longtext": 4, "json": 4,
}  # fmt: skip
_GEOMETRY = frozenset(
    {
        "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
        "multipolygon", "geometrycollection",
    }
)  # fmt: skip
#: MariaDB's own types logged as BINARY(n) (their values need a hint to be read as text).
_HINTED = {"uuid": 16, "inet4": 4, "inet6": 16}
_LABEL = re.compile(r"'((?:[^'\\]|''|\\.)*)'")


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    """One row of information_schema.COLUMNS (the fields the shape needs)."""

    name: str
    data_type: str
    column_type: str
    nullable: bool
    octet_length: int | None = None
    numeric_precision: int | None = None
    numeric_scale: int | None = None
    datetime_precision: int | None = None
    collation: str | None = None


@dataclass(frozen=True, slots=True)
class _Column:
    type: int
    metadata: int
    collation: int | None = None
    labels: tuple[bytes, ...] | None = None


def table_map_from_columns(
    database: str,
    table: str,
    columns: Sequence[ColumnInfo],
    key: Sequence[str],
    collations: Mapping[str, int],
) -> TableMap:
    """The TABLE_MAP MariaDB logs for ``database.table`` (FULL row metadata)."""
    mapped = [_column(f"{database}.{table}", c, collations) for c in columns]
    names = tuple(c.name for c in columns)
    by_name = {name.casefold(): i for i, name in enumerate(names)}
    is_enum_set = [m.labels is not None for m in mapped]
    return TableMap(
        table_id=0,
        flags=0,
        schema=database,
        table=table,
        column_types=tuple(m.type for m in mapped),
        column_metadata=tuple(m.metadata for m in mapped),
        nullable=tuple(c.nullable for c in columns),
        unsigned=tuple("unsigned" in c.column_type.lower() for c in columns),
        column_charsets=tuple(
            None if enum_set else m.collation
            for m, enum_set in zip(mapped, is_enum_set, strict=True)
        ),
        enum_set_charsets=tuple(
            m.collation if enum_set else None
            for m, enum_set in zip(mapped, is_enum_set, strict=True)
        ),
        column_names=names,
        enum_labels=tuple(
            m.labels if m.labels is not None and m.metadata >> 8 == T.ENUM else None for m in mapped
        ),
        set_labels=tuple(
            m.labels if m.labels is not None and m.metadata >> 8 == T.SET else None for m in mapped
        ),
        primary_key=tuple(by_name[k.casefold()] for k in key),
    )


def _column(table: str, column: ColumnInfo, collations: Mapping[str, int]) -> _Column:
    kind = column.data_type.lower()
    collation = collations.get(column.collation) if column.collation else None
    text_or_binary = collation if collation is not None else BINARY_COLLATION
    if kind in _INTEGERS:
        return _Column(_INTEGERS[kind], 0)
    simple = _simple(kind, column)
    if simple is not None:
        return simple
    if kind in ("char", "binary", "varchar", "varbinary"):
        length = column.octet_length or 0
        if kind in ("varchar", "varbinary"):
            return _Column(T.VARCHAR, length, text_or_binary)
        return _Column(T.STRING, _string_metadata(T.STRING, length), text_or_binary)
    if kind in _HINTED:
        return _Column(T.STRING, _string_metadata(T.STRING, _HINTED[kind]), BINARY_COLLATION)
    if kind in _BLOBS:
        return _Column(T.BLOB, _BLOBS[kind], text_or_binary)
    if kind in _GEOMETRY:
        return _Column(T.GEOMETRY, 4)
    if kind in ("enum", "set"):
        codec = codec_for_collation(text_or_binary) or "latin-1"  # binary labels: char -> byte
        labels = tuple(_unquote(label).encode(codec) for label in _labels(column.column_type))
        real = T.ENUM if kind == "enum" else T.SET
        size = (1 if len(labels) < 256 else 2) if kind == "enum" else _set_bytes(len(labels))
        return _Column(T.STRING, real << 8 | size, text_or_binary, labels)
    raise UnsupportedTypeError(
        f"column {column.name}: source type {column.column_type} has no Iceberg mapping",
        table=table,
    )


def _simple(kind: str, column: ColumnInfo) -> _Column | None:
    fsp = column.datetime_precision or 0
    if kind in ("decimal", "numeric", "fixed"):
        return _Column(
            T.NEWDECIMAL, (column.numeric_precision or 0) << 8 | (column.numeric_scale or 0)
        )
    if kind == "bit":
        bits = column.numeric_precision or 1
        return _Column(T.BIT, (bits // 8) << 8 | (bits % 8))
    fixed: dict[str, _Column] = {
        "float": _Column(T.FLOAT, 4),
        "double": _Column(T.DOUBLE, 8),
        "real": _Column(T.DOUBLE, 8),
        "year": _Column(T.YEAR, 0),
        "date": _Column(T.DATE, 0),
        "datetime": _Column(T.DATETIME2, fsp),
        "timestamp": _Column(T.TIMESTAMP2, fsp),
        "time": _Column(T.TIME2, fsp),
    }
    return fixed.get(kind)


def _string_metadata(real: int, length: int) -> int:
    """STRING metadata: the real type, with bits 8-9 of a long length XOR-ed into bits 4-5."""
    byte0 = real ^ (((length >> 8) & 0x3) << 4)
    return byte0 << 8 | (length & 0xFF)


def _set_bytes(labels: int) -> int:
    size = (labels + 7) // 8
    return 8 if size > 4 else size


def _labels(column_type: str) -> list[str]:
    inside = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    return [m.group(1) for m in _LABEL.finditer(inside)]


def _unquote(label: str) -> str:
    out, i = [], 0
    escapes = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "Z": "\x1a", "b": "\b"}
    while i < len(label):
        char = label[i]
        if char == "'" and label[i + 1 : i + 2] == "'":
            out.append("'")
            i += 2
        elif char == "\\" and i + 1 < len(label):
            out.append(escapes.get(label[i + 1], label[i + 1]))
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


# ---- the queries ------------------------------------------------------------------------------

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]

_COLUMNS = (
    "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, CHARACTER_OCTET_LENGTH, "
    "NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, COLLATION_NAME "
    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
    "ORDER BY ORDINAL_POSITION"
)
_KEY = (
    "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s "
    "AND TABLE_NAME = %s AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX"
)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def read_columns(query: Query, database: str, table: str) -> tuple[list[ColumnInfo], list[str]]:
    """The columns (in order) and primary key of ``database.table``; ([], []) when absent."""
    rows = query(_COLUMNS, (database, table))
    columns = [
        ColumnInfo(
            name=str(name),
            data_type=str(data_type),
            column_type=_text(column_type),
            nullable=str(nullable).upper() == "YES",
            octet_length=_int(octets),
            numeric_precision=_int(precision),
            numeric_scale=_int(scale),
            datetime_precision=_int(fsp),
            collation=None if collation is None else str(collation),
        )
        for name, data_type, column_type, nullable, octets, precision, scale, fsp, collation in rows
    ]
    key = [str(row[0]) for row in query(_KEY, (database, table))] if columns else []
    return columns, key


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes | bytearray) else str(value)


def read_collations(query: Query) -> dict[str, int]:
    """Collation name -> id, from the server (ids differ between MariaDB and MySQL)."""
    rows = query("SELECT COLLATION_NAME, ID FROM information_schema.COLLATIONS", ())
    return {str(name): int(number) for name, number in rows if number is not None}
