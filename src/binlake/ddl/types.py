"""A column's type as a DDL statement writes it -> the Iceberg column its TABLE_MAP column gives.

``binlake.typemap`` maps TABLE_MAP columns; this module maps the type text of an ADD,
CHANGE or MODIFY column definition (``INT(11) UNSIGNED``, ``NATIONAL VARCHAR(20)``,
``DECIMAL(8)``, ``TIMESTAMP(3)``) to the same ``LakeColumn``: the same Iceberg type and the same
source type spelling (``INT UNSIGNED``, ``VARCHAR``, ``DECIMAL(8,0)``, ``TIMESTAMP(3)``), so that
the TABLE_MAP which follows finds nothing to change. It lets the applier evolve a table when the
ALTER is applied rather than at the table's next rows (``evolution.plan_from_statement``).

Where the text alone does not settle what the TABLE_MAP will say, the answer is None and the
TABLE_MAP decides: ``TEXT(n)`` and ``BLOB(n)`` (the size picks the type, in bytes for the
charset), types of ``sql_mode=ORACLE``, anything unknown. ``REAL`` follows ``REAL_AS_FLOAT``.
A text type is binary (``VARBINARY``, ``BLOB``...) when the definition says ``CHARACTER SET
binary`` (or ``CHAR BYTE``). The table's default charset is not in the statement: a text
column that names no charset, in a table whose character columns are all binary (as
``DEFAULT CHARSET=binary`` makes them), is left to the TABLE_MAP (``charset_unsure``). A table
with text columns but ``DEFAULT CHARSET=binary`` would still be mapped to text here and refused
at its next TABLE_MAP (``IncompatibleSchemaChangeError``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from binlake.ddl.statements import ColumnDefinition
from binlake.ddl.tokens import tokenize
from binlake.typemap import IcebergType, LakeColumn

__all__ = [
    "MODE_ORACLE",
    "MODE_REAL_AS_FLOAT",
    "TypeText",
    "charset_unsure",
    "declared_length",
    "lake_column_of",
]

MODE_REAL_AS_FLOAT = 1 << 0
MODE_ORACLE = 1 << 9
_MAX_ICEBERG_PRECISION = 38
_MODIFIERS = frozenset({"UNSIGNED", "SIGNED", "ZEROFILL", "BINARY", "ASCII", "UNICODE", "BYTE"})
_INTEGERS = {
    **dict.fromkeys(("TINYINT", "INT1", "BOOL", "BOOLEAN"), "TINYINT"),
    **dict.fromkeys(("SMALLINT", "INT2"), "SMALLINT"),
    **dict.fromkeys(("MEDIUMINT", "INT3", "MIDDLEINT"), "MEDIUMINT"),
    **dict.fromkeys(("INT", "INTEGER", "INT4"), "INT"),
    **dict.fromkeys(("BIGINT", "INT8"), "BIGINT"),
}
#: Text types -> (the name for a text charset, the name for the binary charset).
_STRINGS = {
    **dict.fromkeys(
        ("CHAR", "CHARACTER", "NCHAR", "NATIONAL CHAR", "NATIONAL CHARACTER"), ("CHAR", "BINARY")
    ),
    **dict.fromkeys(
        (
            "VARCHAR",
            "VARCHARACTER",
            "NVARCHAR",
            "CHAR VARYING",
            "CHARACTER VARYING",
            "NATIONAL VARCHAR",
            "NATIONAL CHAR VARYING",
            "NATIONAL CHARACTER VARYING",
            "NCHAR VARCHAR",
            "NCHAR VARYING",
        ),
        ("VARCHAR", "VARBINARY"),
    ),
    "TINYTEXT": ("TINYTEXT", "TINYBLOB"),
    "TEXT": ("TEXT", "BLOB"),
    "MEDIUMTEXT": ("MEDIUMTEXT", "MEDIUMBLOB"),
    "LONG": ("MEDIUMTEXT", "MEDIUMBLOB"),
    "LONG VARCHAR": ("MEDIUMTEXT", "MEDIUMBLOB"),
    "LONGTEXT": ("LONGTEXT", "LONGBLOB"),
    "JSON": ("LONGTEXT", "LONGBLOB"),  # MariaDB: LONGTEXT with a check (MySQL: the comment)
}
_BINARIES = {
    "BINARY": "BINARY",
    "VARBINARY": "VARBINARY",
    "TINYBLOB": "TINYBLOB",
    "BLOB": "BLOB",
    "MEDIUMBLOB": "MEDIUMBLOB",
    "LONG VARBINARY": "MEDIUMBLOB",
    "LONGBLOB": "LONGBLOB",
}
_SIMPLE: dict[str, tuple[str, IcebergType]] = {
    "YEAR": ("YEAR", IcebergType.INT),
    "DATE": ("DATE", IcebergType.DATE),
    "DOUBLE": ("DOUBLE", IcebergType.DOUBLE),
    "DOUBLE PRECISION": ("DOUBLE", IcebergType.DOUBLE),
    "ENUM": ("ENUM", IcebergType.STRING),
    "SET": ("SET", IcebergType.STRING),
    "UUID": ("UUID", IcebergType.STRING),
    "INET4": ("INET4", IcebergType.STRING),
    "INET6": ("INET6", IcebergType.STRING),
    **{
        name: ("GEOMETRY", IcebergType.BINARY)
        for name in (
            "GEOMETRY",
            "POINT",
            "LINESTRING",
            "POLYGON",
            "MULTIPOINT",
            "MULTILINESTRING",
            "MULTIPOLYGON",
            "GEOMETRYCOLLECTION",
        )
    },
}
_TEMPORAL = {
    "DATETIME": IcebergType.TIMESTAMP,
    "TIMESTAMP": IcebergType.TIMESTAMPTZ,
    "TIME": IcebergType.LONG,
}


@dataclass(frozen=True, slots=True)
class TypeText:
    """A type as written, split: ``NATIONAL VARCHAR(20) BINARY`` is name ``NATIONAL VARCHAR``,
    arguments ``("20",)``, modifiers ``{"BINARY"}``."""

    name: str
    arguments: tuple[str, ...]
    modifiers: frozenset[str]

    @classmethod
    def parse(cls, text: str) -> TypeText:
        words: list[str] = []
        arguments: list[str] = []
        modifiers: set[str] = set()
        depth = 0
        for token in tokenize(text):
            if token.kind == "punct" and token.value in "()":
                depth += 1 if token.value == "(" else -1
            elif depth > 0:
                if token.kind != "punct":
                    arguments.append(token.value)
            elif token.kind == "word" and token.value.upper() in _MODIFIERS and words:
                modifiers.add(token.value.upper())
            elif token.kind == "word" and not arguments and not modifiers:
                words.append(token.value.upper())
        return cls(" ".join(words), tuple(arguments), frozenset(modifiers))

    def number(self, index: int, default: int) -> int | None:
        """Argument ``index`` as an integer (``default`` when absent, None when not a number)."""
        if index >= len(self.arguments):
            return default
        value = self.arguments[index]
        return int(value) if value.isdigit() else None


def declared_length(definition: ColumnDefinition) -> int | None:
    """The length a ``CHAR(n)`` / ``BINARY(n)`` definition declares (1 without one)."""
    return TypeText.parse(definition.type_text).number(0, 1)


def lake_column_of(
    definition: ColumnDefinition,
    index: int,
    *,
    sql_mode: int = 0,
    explicit_timestamps: bool = True,
) -> LakeColumn | None:
    """The Iceberg column the TABLE_MAP column of ``definition`` maps to (``index``: its place),
    or None when the type text does not settle it (see the module docstring). Nullable as the
    definition says; a TIMESTAMP that does not say ``NULL`` is NOT NULL when the session had
    ``explicit_defaults_for_timestamp=OFF``."""
    if sql_mode & MODE_ORACLE:
        return None
    mapped = _mapped(TypeText.parse(definition.type_text), definition.charset, sql_mode)
    if mapped is None:
        return None
    source_type, lake_type, precision, scale = mapped
    implicit_not_null = (
        source_type.startswith("TIMESTAMP")
        and not explicit_timestamps
        and not definition.explicit_null
    )
    return LakeColumn(
        name=definition.name,
        index=index,
        source_type=source_type,
        type=lake_type,
        nullable=definition.nullable and not implicit_not_null,
        precision=precision,
        scale=scale,
    )


_TEXTS = frozenset({"CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT"})
_BYTES = frozenset({"BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"})


def charset_unsure(
    definition: ColumnDefinition, column: LakeColumn, table: Iterable[LakeColumn]
) -> bool:
    """Whether ``column`` (text, its definition naming no charset) may be binary after all:
    every character column the ``table`` has is binary, as the table's default charset
    ``binary`` makes them."""
    if column.source_type not in _TEXTS or definition.charset is not None:
        return False
    kinds = [c.source_type in _BYTES for c in table if c.source_type in _TEXTS | _BYTES]
    return bool(kinds) and all(kinds)


Mapped = tuple[str, IcebergType, int, int]


def _mapped(kind: TypeText, charset: str | None, sql_mode: int) -> Mapped | None:
    name = kind.name
    if name in _INTEGERS:
        return _integer(_INTEGERS[name], kind)
    if name in ("DECIMAL", "DEC", "NUMERIC", "FIXED"):
        return _decimal(kind)
    if name in ("FLOAT", "REAL"):
        return _float(kind, sql_mode)
    if name == "BIT":
        bits = kind.number(0, 1)
        if bits is None:
            return None
        if bits == 64:
            return "BIT(64)", IcebergType.DECIMAL, 20, 0
        return f"BIT({bits})", IcebergType.LONG, 0, 0
    if name in _TEMPORAL:
        fsp = kind.number(0, 0)
        return None if fsp is None else (f"{name}({fsp})" if fsp else name, _TEMPORAL[name], 0, 0)
    if name in _SIMPLE:
        source_type, lake_type = _SIMPLE[name]
        return source_type, lake_type, 0, 0
    return _string(kind, charset)


def _integer(name: str, kind: TypeText) -> Mapped:
    unsigned = bool(kind.modifiers & {"UNSIGNED", "ZEROFILL"})
    text = name + (" UNSIGNED" if unsigned else "")
    if name == "BIGINT":
        if unsigned:
            return text, IcebergType.DECIMAL, 20, 0
        return text, IcebergType.LONG, 0, 0
    if name == "INT" and unsigned:
        return text, IcebergType.LONG, 0, 0
    return text, IcebergType.INT, 0, 0


def _decimal(kind: TypeText) -> Mapped | None:
    precision, scale = kind.number(0, 10), kind.number(1, 0)
    if precision is None or scale is None:
        return None
    unsigned = bool(kind.modifiers & {"UNSIGNED", "ZEROFILL"})
    text = f"DECIMAL({precision},{scale})" + (" UNSIGNED" if unsigned else "")
    if precision > _MAX_ICEBERG_PRECISION:
        return text, IcebergType.STRING, 0, 0
    return text, IcebergType.DECIMAL, precision, scale


def _float(kind: TypeText, sql_mode: int) -> Mapped | None:
    if kind.name == "REAL":
        if sql_mode & MODE_REAL_AS_FLOAT:
            return "FLOAT", IcebergType.FLOAT, 0, 0
        return "DOUBLE", IcebergType.DOUBLE, 0, 0
    if len(kind.arguments) == 1:  # FLOAT(p): a double from 25 bits of precision on
        bits = kind.number(0, 0)
        if bits is None:
            return None
        if bits > 24:
            return "DOUBLE", IcebergType.DOUBLE, 0, 0
    return "FLOAT", IcebergType.FLOAT, 0, 0


def _string(kind: TypeText, charset: str | None) -> Mapped | None:
    name = kind.name
    binary = charset == "binary" or "BYTE" in kind.modifiers
    if name in _BINARIES and not kind.arguments[1:]:
        if name in ("TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB") and kind.arguments:
            return None  # BLOB(n): the size picks the type
        return _BINARIES[name], IcebergType.BINARY, 0, 0
    names = _STRINGS.get(name)
    if names is None:
        return None
    if kind.arguments and names[0].endswith("TEXT"):
        return None  # TEXT(n): the size in bytes for the charset picks the type
    if binary:
        return names[1], IcebergType.BINARY, 0, 0
    return names[0], IcebergType.STRING, 0, 0
