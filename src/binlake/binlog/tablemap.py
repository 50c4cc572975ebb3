"""TABLE_MAP events: the column layout that the rows events after them refer to.

A TABLE_MAP body is: table id (4 or 6 bytes, per the FORMAT_DESCRIPTION), 2 flag bytes, the
schema and table names (length byte, bytes, NUL), the column count (packed integer), one type
byte per column, the per-type metadata block (packed length, then bytes), the nullability bitmap
and, to the end of the body, the optional metadata fields (MariaDB 10.5+ / MySQL 8.0
``binlog_row_metadata=MINIMAL|FULL``): ``type byte, packed length, value`` triples.

``column_metadata`` holds one integer per column, the way the servers' ``table_def`` keeps it:
one-byte metadata as is; VARCHAR max length and BIT ``bytes << 8 | bits`` little-endian;
NEWDECIMAL ``precision << 8 | scale`` and STRING/ENUM/SET ``byte0 << 8 | byte1`` big-endian.

Per-column optional metadata is resolved to tuples of length ``column_count`` with ``None`` where
a field does not apply to a column. Which columns a field covers differs by flavor: MariaDB counts
YEAR as numeric (it logs its signedness) and GEOMETRY (and its compressed types) as character
columns; MySQL does neither.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from binlake.binlog.constants import ColumnType, EventType
from binlake.binlog.errors import InvalidEventError, UnsupportedTypeError
from binlake.binlog.format import Flavor, FormatContext
from binlake.binlog.names import TableName

EVENT_NAME = "Table_map"
_T = TypeVar("_T")

#: MariaDB's column-compressed types (``COMPRESSED`` attribute); only in MariaDB table maps.
BLOB_COMPRESSED = 140
VARCHAR_COMPRESSED = 141

# Optional metadata field types.
SIGNEDNESS = 1
DEFAULT_CHARSET = 2
COLUMN_CHARSET = 3
COLUMN_NAME = 4
SET_STR_VALUE = 5
ENUM_STR_VALUE = 6
GEOMETRY_TYPE = 7
SIMPLE_PRIMARY_KEY = 8
PRIMARY_KEY_WITH_PREFIX = 9
ENUM_AND_SET_DEFAULT_CHARSET = 10
ENUM_AND_SET_COLUMN_CHARSET = 11
COLUMN_VISIBILITY = 12

#: Field order each server writes (MariaDB: ``Table_map_log_event::init_metadata_fields``).
_CANONICAL_ORDER = {
    Flavor.MARIADB: (1, 2, 3, 7, 4, 10, 11, 5, 6, 8, 9, 12),
    Flavor.MYSQL: (1, 2, 3, 7, 4, 5, 6, 8, 9, 10, 11, 12),
}


def _types(names: str) -> frozenset[int]:
    return frozenset(ColumnType[name] for name in names.split())


_NO_METADATA = _types(
    "DECIMAL TINY SHORT LONG NULL TIMESTAMP LONGLONG INT24 DATE TIME DATETIME YEAR NEWDATE"
)
_ONE_BYTE = _types(
    "FLOAT DOUBLE BLOB TINY_BLOB MEDIUM_BLOB LONG_BLOB GEOMETRY JSON VECTOR TIME2 DATETIME2"
) | {ColumnType.TIMESTAMP2, BLOB_COMPRESSED}
_TWO_BYTES = _types("VARCHAR VAR_STRING BIT NEWDECIMAL STRING ENUM SET") | {VARCHAR_COMPRESSED}
#: Bytes of per-column metadata, by column type code.
_METADATA_WIDTH: dict[int, int] = {
    **dict.fromkeys(_NO_METADATA, 0),
    **dict.fromkeys(_ONE_BYTE, 1),
    **dict.fromkeys(_TWO_BYTES, 2),
}
_BIG_ENDIAN_META = _types("NEWDECIMAL STRING ENUM SET")
_NUMERIC = _types("TINY SHORT INT24 LONG LONGLONG NEWDECIMAL FLOAT DOUBLE")
_CHARACTER = {
    Flavor.MYSQL: _types("STRING VAR_STRING VARCHAR BLOB VECTOR"),
    Flavor.MARIADB: _types("STRING VAR_STRING VARCHAR BLOB GEOMETRY")
    | {BLOB_COMPRESSED, VARCHAR_COMPRESSED},
}


def real_type_and_length(type_code: int, metadata: int) -> tuple[int, int]:
    """The real type of a column and its declared length for STRING-coded columns.

    A STRING (254) column's first metadata byte holds the real type (STRING, ENUM or SET). CHAR
    columns longer than 255 bytes keep bits 8-9 of their length in that byte, XOR-ed into bits
    4-5 (which are always set in a real type code). Other types are returned unchanged with their
    metadata as the length.
    """
    if type_code != ColumnType.STRING or metadata < 256:
        return type_code, metadata
    byte0, byte1 = metadata >> 8, metadata & 0xFF
    if byte0 & 0x30 != 0x30:
        return byte0 | 0x30, byte1 | (((byte0 & 0x30) ^ 0x30) << 4)
    return byte0, byte1


@dataclass(frozen=True, slots=True)
class TableMap:
    """A decoded TABLE_MAP event; optional metadata fields are ``None`` when not logged."""

    table_id: int
    flags: int
    schema: str
    table: str
    column_types: tuple[int, ...]
    column_metadata: tuple[int, ...]
    nullable: tuple[bool, ...]
    #: Per column: True for UNSIGNED numeric columns (SIGNEDNESS); False elsewhere.
    unsigned: tuple[bool, ...] | None = None
    #: The default collation of DEFAULT_CHARSET; ``None`` when COLUMN_CHARSET was logged instead.
    default_charset: int | None = None
    #: Per column collation id of character columns (binary is 63); None for other columns.
    column_charsets: tuple[int | None, ...] | None = None
    column_names: tuple[str, ...] | None = None
    #: Per column: the SET member labels (raw bytes, in the column charset); None elsewhere.
    set_labels: tuple[tuple[bytes, ...] | None, ...] | None = None
    enum_labels: tuple[tuple[bytes, ...] | None, ...] | None = None
    #: Per column: the geometry subtype (0 GEOMETRY, 1 POINT, 2 LINESTRING, ...); None elsewhere.
    geometry_types: tuple[int | None, ...] | None = None
    #: Column indexes of the primary key, in key order.
    primary_key: tuple[int, ...] | None = None
    #: Prefix lengths of ``primary_key`` (0 = whole column), set when PRIMARY_KEY_WITH_PREFIX
    #: was logged; None with SIMPLE_PRIMARY_KEY.
    primary_key_prefixes: tuple[int, ...] | None = None
    enum_set_default_charset: int | None = None
    #: Per column collation id of ENUM and SET columns; None for other columns.
    enum_set_charsets: tuple[int | None, ...] | None = None
    #: Per column: True when visible (MySQL COLUMN_VISIBILITY).
    visibility: tuple[bool, ...] | None = None
    #: Optional metadata fields of types binlake does not know: (type, raw value).
    unknown_metadata: tuple[tuple[int, bytes], ...] = ()
    #: Optional field types in the order they were logged (empty: the flavor's own order).
    metadata_order: tuple[int, ...] = ()
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        # Row decoders are cached per table map: hash the fields once, not at every event.
        if not self._hash:
            fields = tuple(getattr(self, f.name) for f in _HASHED_FIELDS)
            object.__setattr__(self, "_hash", hash(fields) or 1)
        return self._hash

    @property
    def name(self) -> TableName:
        """The table's (database, table) pair."""
        return TableName(self.schema, self.table)

    @property
    def qualified_name(self) -> str:
        """``db.table`` for display (``TableName.display``: parts quoted when needed)."""
        return self.name.display

    @property
    def column_count(self) -> int:
        return len(self.column_types)

    def real_type(self, column: int) -> int:
        return real_type_and_length(self.column_types[column], self.column_metadata[column])[0]

    def column_name(self, column: int) -> str:
        """The column's name, or ``@N`` (1-based, as mariadb-binlog prints) when not logged."""
        if self.column_names is not None:
            return self.column_names[column]
        return f"@{column + 1}"

    def collation(self, column: int) -> int | None:
        """The collation of a character, ENUM or SET column, if logged."""
        for per_column in (self.column_charsets, self.enum_set_charsets):
            if per_column is not None and per_column[column] is not None:
                return per_column[column]
        return None


_HASHED_FIELDS = tuple(f for f in fields(TableMap) if f.compare)


# ---- packed integers ------------------------------------------------------------------------


def read_packed_int(buf: bytes, pos: int) -> tuple[int, int]:
    """A length-encoded integer at ``pos``: (value, position after it). Raises IndexError or
    struct.error when the buffer ends early."""
    first = buf[pos]
    if first < 251:
        return first, pos + 1
    if first == 252:
        return struct.unpack_from("<H", buf, pos + 1)[0], pos + 3
    if first == 253:
        low, high = struct.unpack_from("<HB", buf, pos + 1)
        return low | high << 16, pos + 4
    if first == 254:
        return struct.unpack_from("<Q", buf, pos + 1)[0], pos + 9
    raise ValueError(f"invalid packed integer lead byte {first:#x}")


def packed_int(value: int) -> bytes:
    """The shortest length-encoded form of ``value``, as the servers write it."""
    if value < 251:
        return bytes((value,))
    if value < 1 << 16:
        return b"\xfc" + struct.pack("<H", value)
    if value < 1 << 24:
        return b"\xfd" + struct.pack("<I", value)[:3]
    return b"\xfe" + struct.pack("<Q", value)


# ---- decoding -------------------------------------------------------------------------------


#: Recently decoded bodies: a table map is logged again before every statement on its table.
_MEMO: dict[tuple[bytes, int, Flavor], TableMap] = {}
_MEMO_LIMIT = 4096


def decode_table_map(body: memoryview | bytes, ctx: FormatContext, offset: int) -> TableMap:
    """Decode a TABLE_MAP body (after the common header, CRC trailer removed)."""
    buf = bytes(body)
    key = (buf, ctx.post_header_len(EventType.TABLE_MAP), ctx.flavor)
    known = _MEMO.get(key)
    if known is not None:
        return known
    tm = _decode_checked(buf, ctx, offset)
    if len(_MEMO) >= _MEMO_LIMIT:
        _MEMO.clear()
    _MEMO[key] = tm
    return tm


def _decode_checked(buf: bytes, ctx: FormatContext, offset: int) -> TableMap:
    try:
        return _decode(buf, ctx)
    except UnsupportedTypeError as error:
        error.with_location(offset=offset)
        raise
    except InvalidEventError as error:
        raise error.with_location(offset=offset) from None
    except (IndexError, ValueError, struct.error, UnicodeDecodeError) as error:
        raise InvalidEventError(
            f"table map body of {len(buf)} bytes is malformed: {error}",
            offset=offset,
            event_type=EVENT_NAME,
        ) from None


def _bad(message: str) -> InvalidEventError:
    return InvalidEventError(message, event_type=EVENT_NAME)


def _read_name(buf: bytes, pos: int) -> tuple[str, int]:
    length = buf[pos]
    end = pos + 1 + length
    if end >= len(buf) or buf[end] != 0:
        raise _bad("schema or table name is not NUL-terminated where its length says")
    return buf[pos + 1 : end].decode("utf-8"), end + 1


def _decode(buf: bytes, ctx: FormatContext) -> TableMap:
    id_len = 4 if ctx.post_header_len(EventType.TABLE_MAP) == 6 else 6
    table_id = int.from_bytes(buf[:id_len], "little")
    flags = struct.unpack_from("<H", buf, id_len)[0]
    schema, pos = _read_name(buf, id_len + 2)
    table, pos = _read_name(buf, pos)
    count, pos = read_packed_int(buf, pos)
    if pos + count > len(buf):
        raise _bad(f"column count {count} exceeds the event")
    types = tuple(buf[pos : pos + count])
    meta_len, pos = read_packed_int(buf, pos + count)
    metadata = _decode_column_metadata(buf[pos : pos + meta_len], types, schema, table)
    pos += meta_len
    null_len = (count + 7) // 8
    if pos + null_len > len(buf):
        raise _bad("the nullability bitmap runs past the end of the event")
    null_bits = int.from_bytes(buf[pos : pos + null_len], "little")
    nullable = tuple(bool(null_bits >> i & 1) for i in range(count))
    tm = TableMap(table_id, flags, schema, table, types, metadata, nullable)
    fields = _split_optional(buf, pos + null_len)
    return _apply_optional(tm, fields, ctx.flavor)


def _decode_column_metadata(
    block: bytes, types: tuple[int, ...], schema: str, table: str
) -> tuple[int, ...]:
    out = []
    pos = 0
    for column, type_code in enumerate(types):
        width = _metadata_width(type_code, schema, table, column)
        if pos + width > len(block):
            raise _bad(f"metadata block of {len(block)} bytes is too short for column {column}")
        out.append(_meta_value(type_code, block[pos : pos + width]))
        pos += width
    if pos != len(block):
        raise _bad(f"metadata block is {len(block)} bytes, the column types need {pos}")
    return tuple(out)


def _metadata_width(type_code: int, schema: str, table: str, column: int) -> int:
    width = _METADATA_WIDTH.get(type_code)
    if width is None:
        raise UnsupportedTypeError(
            f"column {column + 1} has type code {type_code}, which binlake does not know",
            event_type=EVENT_NAME,
            table=f"{schema}.{table}",
        )
    return width


def _meta_value(type_code: int, raw: bytes) -> int:
    if len(raw) == 2 and type_code not in _BIG_ENDIAN_META:
        return raw[0] | raw[1] << 8
    return int.from_bytes(raw, "big")


def _split_optional(buf: bytes, pos: int) -> list[tuple[int, bytes]]:
    fields = []
    while pos < len(buf):
        field_type = buf[pos]
        length, pos = read_packed_int(buf, pos + 1)
        if pos + length > len(buf):
            raise _bad(f"optional metadata field {field_type} runs past the end of the event")
        fields.append((field_type, buf[pos : pos + length]))
        pos += length
    return fields


def _covered(tm: TableMap, flavor: Flavor) -> tuple[list[int], list[int], list[int]]:
    """Column indexes covered by the numeric, character and ENUM/SET fields."""
    numeric, character, enum_set = [], [], []
    numeric_types = _NUMERIC | {ColumnType.YEAR} if flavor is Flavor.MARIADB else _NUMERIC
    character_types = _CHARACTER[flavor]
    for column, type_code in enumerate(tm.column_types):
        real = tm.real_type(column)
        if real in (ColumnType.ENUM, ColumnType.SET):
            enum_set.append(column)
        elif type_code in numeric_types:
            numeric.append(column)
        elif type_code in character_types:
            character.append(column)
    return numeric, character, enum_set


def _columns_of(tm: TableMap, real_type: int) -> list[int]:
    return [c for c in range(tm.column_count) if tm.real_type(c) == real_type]


def _apply_optional(tm: TableMap, fields: list[tuple[int, bytes]], flavor: Flavor) -> TableMap:
    numeric, character, enum_set = _covered(tm, flavor)
    n = tm.column_count
    values: dict[str, Any] = {}
    unknown = []
    for field_type, raw in fields:
        if field_type == SIGNEDNESS:
            values["unsigned"] = _spread(n, numeric, _msb_bits(raw, len(numeric)), False)
        elif field_type in (DEFAULT_CHARSET, ENUM_AND_SET_DEFAULT_CHARSET):
            cols = character if field_type == DEFAULT_CHARSET else enum_set
            default, per_column = _default_charsets(raw, len(cols))
            prefix = "" if field_type == DEFAULT_CHARSET else "enum_set_"
            values[f"{prefix}default_charset"] = default
            values[f"{prefix}charsets" if prefix else "column_charsets"] = _spread(
                n, cols, per_column, None
            )
        elif field_type in (COLUMN_CHARSET, ENUM_AND_SET_COLUMN_CHARSET):
            cols = character if field_type == COLUMN_CHARSET else enum_set
            key = "column_charsets" if field_type == COLUMN_CHARSET else "enum_set_charsets"
            values[key] = _spread(n, cols, _packed_list(raw, len(cols)), None)
        elif field_type == COLUMN_NAME:
            names = _string_list(raw, n)
            values["column_names"] = tuple(name.decode("utf-8") for name in names)
        elif field_type in (SET_STR_VALUE, ENUM_STR_VALUE):
            real = ColumnType.SET if field_type == SET_STR_VALUE else ColumnType.ENUM
            cols = _columns_of(tm, real)
            key = "set_labels" if field_type == SET_STR_VALUE else "enum_labels"
            values[key] = _spread(n, cols, _label_lists(raw, len(cols)), None)
        elif field_type == GEOMETRY_TYPE:
            cols = _columns_of(tm, ColumnType.GEOMETRY)
            values["geometry_types"] = _spread(n, cols, _packed_list(raw, len(cols)), None)
        elif field_type == SIMPLE_PRIMARY_KEY:
            values["primary_key"] = tuple(_packed_list(raw, None))
        elif field_type == PRIMARY_KEY_WITH_PREFIX:
            pairs = _packed_list(raw, None)
            if len(pairs) % 2:
                raise _bad("PRIMARY_KEY_WITH_PREFIX has an odd number of integers")
            values["primary_key"] = tuple(pairs[0::2])
            values["primary_key_prefixes"] = tuple(pairs[1::2])
        elif field_type == COLUMN_VISIBILITY:
            values["visibility"] = tuple(_msb_bits(raw, n))
        else:
            unknown.append((field_type, raw))
    _check_columns(tm, values)
    order = tuple(field_type for field_type, _ in fields)
    return replace(tm, unknown_metadata=tuple(unknown), metadata_order=order, **values)


def _check_columns(tm: TableMap, values: dict[str, Any]) -> None:
    pk = values.get("primary_key")
    if isinstance(pk, tuple) and any(not 0 <= c < tm.column_count for c in pk):
        raise _bad(f"primary key names a column outside 0..{tm.column_count - 1}")


def _spread(n: int, columns: list[int], values: list[_T], fill: _T | None) -> tuple[_T | None, ...]:
    out: list[_T | None] = [fill] * n
    for column, value in zip(columns, values, strict=False):
        out[column] = value
    return tuple(out)


def _msb_bits(raw: bytes, count: int) -> list[bool]:
    if len(raw) * 8 < count:
        raise _bad(f"bitmap of {len(raw)} bytes is too short for {count} columns")
    return [bool(raw[i >> 3] & (0x80 >> (i & 7))) for i in range(count)]


def _packed_list(raw: bytes, count: int | None) -> list[int]:
    out = []
    pos = 0
    while pos < len(raw):
        value, pos = read_packed_int(raw, pos)
        out.append(value)
    if pos != len(raw) or (count is not None and len(out) != count):
        raise _bad(f"optional metadata lists {len(out)} values for {count} columns")
    return out


def _default_charsets(raw: bytes, count: int) -> tuple[int, list[int]]:
    ints = _packed_list(raw, None)
    if not ints or len(ints) % 2 != 1:
        raise _bad("DEFAULT_CHARSET field is not a default followed by (index, collation) pairs")
    default = ints[0]
    per_column = [default] * count
    for index, collation in zip(ints[1::2], ints[2::2], strict=True):
        if index >= count:
            raise _bad(f"charset exception for character column {index} of {count}")
        per_column[index] = collation
    return default, per_column


def _string_list(raw: bytes, count: int | None) -> list[bytes]:
    out: list[bytes] = []
    pos = 0
    while pos < len(raw) and (count is None or len(out) < count):
        length, pos = read_packed_int(raw, pos)
        if pos + length > len(raw):
            raise _bad("a string in the optional metadata runs past its field")
        out.append(raw[pos : pos + length])
        pos += length
    if pos != len(raw) or (count is not None and len(out) != count):
        raise _bad(f"optional metadata holds {len(out)} strings for {count} columns")
    return out


def _label_lists(raw: bytes, count: int) -> list[tuple[bytes, ...]]:
    out = []
    pos = 0
    for _ in range(count):
        labels, pos = read_packed_int(raw, pos)
        items = []
        for _ in range(labels):
            length, pos = read_packed_int(raw, pos)
            if pos + length > len(raw):
                raise _bad("an ENUM or SET label runs past its field")
            items.append(raw[pos : pos + length])
            pos += length
        out.append(tuple(items))
    if pos != len(raw):
        raise _bad("ENUM or SET label field has bytes after its last column")
    return out


# ---- encoding -------------------------------------------------------------------------------


def encode_table_map(tm: TableMap, ctx: FormatContext) -> bytes:
    """The TABLE_MAP body for ``tm`` (no common header, no CRC): the inverse of decode."""
    id_len = 4 if ctx.post_header_len(EventType.TABLE_MAP) == 6 else 6
    out = bytearray(tm.table_id.to_bytes(id_len, "little"))
    out += struct.pack("<H", tm.flags)
    for name in (tm.schema, tm.table):
        raw = name.encode("utf-8")
        out += bytes((len(raw),)) + raw + b"\0"
    out += packed_int(tm.column_count) + bytes(tm.column_types)
    block = b"".join(
        _meta_bytes(t, m) for t, m in zip(tm.column_types, tm.column_metadata, strict=True)
    )
    out += packed_int(len(block)) + block
    null_bits = sum(1 << i for i, flag in enumerate(tm.nullable) if flag)
    out += null_bits.to_bytes((tm.column_count + 7) // 8, "little")
    for field_type, raw in _optional_fields(tm, ctx.flavor):
        out += bytes((field_type,)) + packed_int(len(raw)) + raw
    return bytes(out)


def _meta_bytes(type_code: int, value: int) -> bytes:
    width = _METADATA_WIDTH.get(type_code, 0)
    if width == 2 and type_code not in _BIG_ENDIAN_META:
        return value.to_bytes(2, "little")
    return value.to_bytes(width, "big")


def _optional_fields(tm: TableMap, flavor: Flavor) -> list[tuple[int, bytes]]:
    numeric, character, enum_set = _covered(tm, flavor)
    fields: dict[int, bytes] = dict(tm.unknown_metadata)
    if tm.unsigned is not None:
        fields[SIGNEDNESS] = _msb_bytes([tm.unsigned[c] for c in numeric])
    _charset_field(fields, tm.default_charset, tm.column_charsets, character, DEFAULT_CHARSET)
    _charset_field(
        fields,
        tm.enum_set_default_charset,
        tm.enum_set_charsets,
        enum_set,
        ENUM_AND_SET_DEFAULT_CHARSET,
    )
    if tm.column_names is not None:
        fields[COLUMN_NAME] = _strings([name.encode("utf-8") for name in tm.column_names])
    for key, labels in ((SET_STR_VALUE, tm.set_labels), (ENUM_STR_VALUE, tm.enum_labels)):
        if labels is not None:
            lists = [item for item in labels if item is not None]
            fields[key] = b"".join(packed_int(len(items)) + _strings(items) for items in lists)
    if tm.geometry_types is not None:
        fields[GEOMETRY_TYPE] = _packed([g for g in tm.geometry_types if g is not None])
    if tm.primary_key is not None:
        if tm.primary_key_prefixes is None:
            fields[SIMPLE_PRIMARY_KEY] = _packed(tm.primary_key)
        else:
            pairs = zip(tm.primary_key, tm.primary_key_prefixes, strict=True)
            fields[PRIMARY_KEY_WITH_PREFIX] = _packed([v for pair in pairs for v in pair])
    if tm.visibility is not None:
        fields[COLUMN_VISIBILITY] = _msb_bytes(list(tm.visibility))
    order = tm.metadata_order or _CANONICAL_ORDER[flavor]
    ordered = [(t, fields.pop(t)) for t in order if t in fields]
    return ordered + sorted(fields.items())


def _charset_field(
    fields: dict[int, bytes],
    default: int | None,
    per_column: tuple[int | None, ...] | None,
    columns: list[int],
    default_type: int,
) -> None:
    if per_column is None:
        return
    collations = [per_column[c] or 0 for c in columns]
    if default is None:
        fields[default_type + 1] = _packed(collations)
        return
    exceptions = [v for i, c in enumerate(collations) if c != default for v in (i, c)]
    fields[default_type] = _packed([default, *exceptions])


def _msb_bytes(bits: list[bool]) -> bytes:
    out = bytearray((len(bits) + 7) // 8)
    for i, bit in enumerate(bits):
        if bit:
            out[i >> 3] |= 0x80 >> (i & 7)
    return bytes(out)


def _packed(values: list[int] | tuple[int, ...]) -> bytes:
    return b"".join(packed_int(v) for v in values)


def _strings(items: list[bytes] | tuple[bytes, ...]) -> bytes:
    return b"".join(packed_int(len(item)) + item for item in items)
