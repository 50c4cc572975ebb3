"""Column values: what each column type's bytes in a row image mean, as exact Python values.

======================  ============================================================
column type             Python value
======================  ============================================================
TINY..LONGLONG          ``int`` (UNSIGNED from the SIGNEDNESS metadata; signed without it)
FLOAT, DOUBLE           ``float`` (a FLOAT is the exact value of its 4-byte float)
NEWDECIMAL              ``decimal.Decimal`` with exactly the column's scale
BIT, YEAR               ``int`` (YEAR 0 is 0000)
DATE                    ``datetime.date`` or ``ZeroDate``
DATETIME(fsp)           naive ``datetime.datetime`` or ``ZeroDate``
TIMESTAMP(fsp)          ``datetime.datetime`` in UTC or ``ZeroDate`` (the zero timestamp)
TIME(fsp)               ``datetime.timedelta``
CHAR/VARCHAR/TEXT       ``str`` decoded with the column's charset (never replaced)
BINARY/VARBINARY/BLOB   ``bytes`` (BINARY(n) padded back to n bytes with NUL, as stored)
ENUM, SET               ``str``: the label; SET members comma-joined in declared order
JSON (MySQL)            ``str``: the document as text (``binlake.binlog.encodings.mysql_json``)
GEOMETRY                ``Geometry(srid, wkb)``
======================  ============================================================

MariaDB's UUID, INET4 and INET6 columns cannot be told from BINARY(16)/BINARY(4) in the binlog
(see ``binlake.binlog.encodings.mariadb_types``): they decode to ``bytes`` unless the caller passes
a hint (``"uuid"``, ``"inet4"``, ``"inet6"``) for the column, which yields MariaDB's canonical text.

Each decodable type has a *source snippet*: Python statements that read one value at ``b[p:]``
into a variable and advance ``p``. ``binlake.binlog.rowcodec`` pastes the snippets of a row's
columns into one generated function; ``decode_value`` runs a single snippet. Encoders
(``encode_value``) are plain functions, used by tests and relay-log tooling.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, ClassVar, Final

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.encodings import temporal
from binlake.binlog.encodings.charsets import codec_for_collation
from binlake.binlog.encodings.decimals import (
    DECIMAL_NAMESPACE,
    decimal_size,
    decimal_source,
    encode_decimal,
)
from binlake.binlog.encodings.mariadb_types import (
    HINT_LENGTHS,
    HINTS,
    format_inet4,
    format_inet6,
    format_uuid,
    parse_hinted,
)
from binlake.binlog.encodings.temporal import ZeroDate
from binlake.binlog.errors import InvalidEventError, UnsupportedTypeError, ValueDecodeError
from binlake.binlog.tablemap import (
    BLOB_COMPRESSED,
    VARCHAR_COMPRESSED,
    TableMap,
    real_type_and_length,
)

__all__ = [
    "ABSENT",
    "ColumnSpec",
    "Geometry",
    "ZeroDate",
    "column_spec",
    "decode_value",
    "encode_value",
    "format_inet4",
    "format_inet6",
    "format_uuid",
]

_BLOB_TYPES = frozenset({T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB})
_TEXT_TYPES = frozenset({T.VARCHAR, T.VAR_STRING, T.STRING}) | _BLOB_TYPES
_INT_FORMATS: dict[int, str] = {T.TINY: "b", T.SHORT: "h", T.LONG: "i", T.LONGLONG: "q"}
_WIDTH: dict[int, int] = {T.TINY: 1, T.SHORT: 2, T.INT24: 3, T.LONG: 4, T.LONGLONG: 8}


class _Absent:
    """The value of a column a row image does not include (MINIMAL/NOBLOB row images)."""

    _instance: ClassVar[_Absent | None] = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "ABSENT"


#: The singleton in a ``Row`` for columns outside the event's column bitmap.
ABSENT: Final = _Absent()


@dataclass(frozen=True, slots=True)
class Geometry:
    """A GEOMETRY value: the SRID and the well-known-binary shape, as MariaDB stores them."""

    srid: int
    wkb: bytes


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """Everything needed to decode or encode one column's values."""

    index: int
    name: str
    table: str
    #: The real type (ENUM/SET/STRING resolved from a STRING column's metadata).
    type: int
    metadata: int
    #: Max byte length (CHAR, VARCHAR), length-prefix bytes (BLOB, JSON, GEOMETRY), value bytes
    #: (ENUM, SET), fractional digits (TIME2, DATETIME2, TIMESTAMP2) or bits (BIT).
    length: int
    unsigned: bool = False
    #: Python codec of a character column; None for binary columns and non-string types.
    codec: str | None = None
    labels: tuple[str, ...] = ()
    #: "uuid", "inet4" or "inet6" for MariaDB columns the caller knows to be of those types.
    hint: str | None = None


def column_spec(tm: TableMap, column: int, hint: str | None = None) -> ColumnSpec:
    """The spec of one column; raises UnsupportedTypeError for what cannot be decoded exactly."""
    type_code, metadata = tm.column_types[column], tm.column_metadata[column]
    real, length = real_type_and_length(type_code, metadata)
    name = tm.column_name(column)
    unsigned = bool(tm.unsigned and tm.unsigned[column])
    if real == T.BIT:
        length = (metadata >> 8) * 8 + (metadata & 0xFF)
    spec = ColumnSpec(column, name, tm.qualified_name, real, metadata, length, unsigned, hint=hint)
    try:
        return _complete(spec, tm)
    except UnsupportedTypeError as error:
        if error.table is None:
            error.table = tm.qualified_name
        raise


_UNSUPPORTED: dict[int, tuple[str, str | None]] = {
    BLOB_COMPRESSED: (
        "MariaDB compressed columns (COMPRESSED attribute) are not supported",
        "ALTER TABLE ... MODIFY the column without COMPRESSED",
    ),
    VARCHAR_COMPRESSED: (
        "MariaDB compressed columns (COMPRESSED attribute) are not supported",
        "ALTER TABLE ... MODIFY the column without COMPRESSED",
    ),
    T.DECIMAL: (
        "pre-5.0 DECIMAL columns carry no metadata to size their values",
        "ALTER TABLE ... FORCE rebuilds them as NEWDECIMAL",
    ),
    T.VECTOR: ("VECTOR columns are not supported", None),
    T.TYPED_ARRAY: ("typed arrays are not supported", None),
    T.NULL: ("columns of type NULL are not supported", None),
}


def _unsupported(spec: ColumnSpec, message: str, hint: str | None = None) -> UnsupportedTypeError:
    return UnsupportedTypeError(
        f"column {spec.name} (#{spec.index + 1}): {message}", hint=hint, table=spec.table
    )


def _complete(spec: ColumnSpec, tm: TableMap) -> ColumnSpec:
    if spec.type not in _SNIPPETS:
        raise _unsupported(spec, *_UNSUPPORTED.get(spec.type, (f"type code {spec.type}", None)))
    if spec.type in (T.TIME2, T.DATETIME2, T.TIMESTAMP2) and spec.metadata > 6:
        raise InvalidEventError(f"column {spec.name} declares {spec.metadata} fractional digits")
    if spec.type == T.NEWDECIMAL:
        decimal_size(spec.metadata >> 8, spec.metadata & 0xFF)  # raises for impossible p, s
    if spec.hint is not None and (
        spec.hint not in HINTS or spec.type != T.STRING or spec.length != HINT_LENGTHS[spec.hint]
    ):
        raise _unsupported(spec, f"hint {spec.hint!r} does not fit a {spec.length}-byte column")
    full = "set binlog_row_metadata=FULL on the source (MariaDB 10.5+, MySQL 8.0.1+)"
    if spec.type in _TEXT_TYPES:
        collation = tm.collation(spec.index)
        if collation is None:
            raise _unsupported(spec, "the binlog does not say whether it is text or binary", full)
        return replace(spec, codec=codec_for_collation(collation))
    if spec.type in (T.ENUM, T.SET):
        raw = (tm.enum_labels if spec.type == T.ENUM else tm.set_labels) or ()
        labels = raw[spec.index] if raw else None
        collation = tm.collation(spec.index)
        if labels is None or collation is None:
            raise _unsupported(spec, "ENUM/SET labels are not in the binlog", full)
        codec = codec_for_collation(collation) or "latin-1"  # binary labels: byte -> char
        try:
            return replace(spec, labels=tuple(label.decode(codec) for label in labels))
        except UnicodeDecodeError:
            raise _value_error(spec, f"a label is not valid {codec} text") from None
    return spec


# ---- decoding: one source snippet per type ---------------------------------------------------

Snippet = Callable[[ColumnSpec, str, dict[str, Any]], list[str]]


def _int_snippet(spec: ColumnSpec, v: str, ns: dict[str, Any]) -> list[str]:
    width = _WIDTH[spec.type]
    if spec.type == T.TINY:
        read = "b[p]" if spec.unsigned else "(b[p] ^ 0x80) - 0x80"
        return [f"{v} = {read}; p += 1"]
    if spec.type == T.INT24:
        flag = "False" if spec.unsigned else "True"
        return [f"{v} = _from_bytes(b[p:p + 3], 'little', signed={flag}); p += 3"]
    fmt = _INT_FORMATS[spec.type]
    name = f"_unpack_{fmt.upper() if spec.unsigned else fmt}"
    ns[name] = struct.Struct("<" + (fmt.upper() if spec.unsigned else fmt)).unpack_from
    return [f"{v}, = {name}(b, p); p += {width}"]


def _float_snippet(spec: ColumnSpec, v: str, ns: dict[str, Any]) -> list[str]:
    fmt, width = ("f", 4) if spec.type == T.FLOAT else ("d", 8)
    ns[f"_unpack_{fmt}"] = struct.Struct("<" + fmt).unpack_from
    return [f"{v}, = _unpack_{fmt}(b, p); p += {width}"]


def _length_prefixed(v: str, prefix: int, ns: dict[str, Any]) -> list[str]:
    """Statements leaving the value's bytes' end in ``_e`` and its start in ``p``."""
    if prefix == 1:
        return ["_e = p + 1 + b[p]; p += 1"]
    if prefix == 2:
        ns["_unpack_H"] = struct.Struct("<H").unpack_from
        return ["_e, = _unpack_H(b, p); p += 2; _e += p"]
    if prefix == 4:
        ns["_unpack_I"] = struct.Struct("<I").unpack_from
        return ["_e, = _unpack_I(b, p); p += 4; _e += p"]
    return [f"_e = _from_bytes(b[p:p + {prefix}], 'little'); p += {prefix}; _e += p"]


def _bytes_value(spec: ColumnSpec, v: str, ns: dict[str, Any], text: str) -> list[str]:
    """Statements setting ``v`` from the slice ``b[p:_e]`` (``text``) and moving ``p`` on."""
    if spec.codec is not None:
        return [f"{v} = {text}.decode({spec.codec!r}); p = _e"]
    if spec.type == T.STRING:
        ns["_format_hinted"] = _FORMAT_HINTED
        padded = f"{text}.ljust({spec.length}, b'\\x00')"
        if spec.hint is not None:
            return [f"{v} = _format_hinted[{spec.hint!r}]({padded}); p = _e"]
        return [f"{v} = {padded}; p = _e"]
    return [f"{v} = {text}; p = _e"]


def _string_snippet(spec: ColumnSpec, v: str, ns: dict[str, Any]) -> list[str]:
    prefix = 1 if spec.length < 256 else 2
    return _length_prefixed(v, prefix, ns) + _bytes_value(spec, v, ns, "b[p:_e]")


def _blob_snippet(spec: ColumnSpec, v: str, ns: dict[str, Any]) -> list[str]:
    lines = _length_prefixed(v, spec.length, ns)
    if spec.type == T.JSON:
        ns["_json"] = _decode_json
        return [*lines, f"{v} = _json(b[p:_e]); p = _e"]
    if spec.type == T.GEOMETRY:
        ns["_geometry"] = _geometry
        return [*lines, f"{v} = _geometry(b[p:_e]); p = _e"]
    return lines + _bytes_value(spec, v, ns, "b[p:_e]")


def _decimal_snippet(spec: ColumnSpec, v: str, ns: dict[str, Any]) -> list[str]:
    ns.update(DECIMAL_NAMESPACE)
    return decimal_source(spec.metadata >> 8, spec.metadata & 0xFF, v)


def _temporal_snippet(source: Callable[[int, str, dict[str, Any]], list[str]]) -> Snippet:
    """A snippet from one of ``temporal``'s source generators, given the column's fsp."""
    return lambda spec, v, ns: source(spec.metadata, v, ns)


def _call_snippet(func: Callable[..., Any], size: Callable[[int], int] | int) -> Snippet:
    """A snippet calling ``func(b, p[, fsp])`` and advancing by a fixed size."""

    def snippet(spec: ColumnSpec, v: str, ns: dict[str, Any]) -> list[str]:
        name = f"_{func.__name__}"
        ns[name] = func
        if callable(size):
            return [f"{v} = {name}(b, p, {spec.metadata}); p += {size(spec.metadata)}"]
        return [f"{v} = {name}(b, p); p += {size}"]

    return snippet


def _year_snippet(spec: ColumnSpec, v: str, ns: dict[str, Any]) -> list[str]:
    return [f"{v} = b[p] + 1900 if b[p] else 0; p += 1"]


def _bit_snippet(spec: ColumnSpec, v: str, ns: dict[str, Any]) -> list[str]:
    size = (spec.length + 7) // 8
    ns["_bad_bits"] = _bad_bits
    return [
        f"{v} = _from_bytes(b[p:p + {size}], 'big'); p += {size}",
        f"if {v} >> {spec.length}: _bad_bits({v}, {spec.length})",
    ]


def _bad_bits(value: int, bits: int) -> None:
    raise ValueDecodeError(f"BIT({bits}) value {value:#x} has bits beyond its width")


def _enum_snippet(spec: ColumnSpec, v: str, ns: dict[str, Any]) -> list[str]:
    ns[f"_labels{spec.index}"] = ("", *spec.labels)
    read = "b[p]" if spec.length == 1 else "b[p] | b[p + 1] << 8"
    return [f"{v} = _labels{spec.index}[{read}]; p += {spec.length}"]


def _set_snippet(spec: ColumnSpec, v: str, ns: dict[str, Any]) -> list[str]:
    ns[f"_set{spec.index}"] = _set_text(spec.labels)
    size = spec.length
    return [f"{v} = _set{spec.index}(_from_bytes(b[p:p + {size}], 'little')); p += {size}"]


@lru_cache(maxsize=1024)
def _set_text(labels: tuple[str, ...]) -> Callable[[int], str]:
    limit = 1 << len(labels)

    def text(bits: int) -> str:
        if bits >= limit:
            raise ValueDecodeError(f"SET value {bits:#x} has members beyond its {len(labels)}")
        return ",".join(label for i, label in enumerate(labels) if bits >> i & 1)

    return text


def _decode_json(data: bytes) -> str:
    from binlake.binlog.encodings.mysql_json import decode_mysql_json

    return decode_mysql_json(bytes(data))


def _encode_json(text: str) -> bytes:
    """MySQL binary JSON for a document given as text (pass bytes to keep a binary form)."""
    import json

    from binlake.binlog.encodings.mysql_json import encode_mysql_json

    return encode_mysql_json(json.loads(text))


def _geometry(data: bytes) -> Geometry:
    if len(data) < 4:
        raise ValueDecodeError(f"a GEOMETRY value of {len(data)} bytes has no SRID")
    return Geometry(int.from_bytes(data[:4], "little"), bytes(data[4:]))


_FORMAT_HINTED = {"uuid": format_uuid, "inet4": format_inet4, "inet6": format_inet6}
_SNIPPETS: dict[int, Snippet] = {
    T.TINY: _int_snippet,
    T.SHORT: _int_snippet,
    T.INT24: _int_snippet,
    T.LONG: _int_snippet,
    T.LONGLONG: _int_snippet,
    T.FLOAT: _float_snippet,
    T.DOUBLE: _float_snippet,
    T.NEWDECIMAL: _decimal_snippet,
    T.YEAR: _year_snippet,
    T.BIT: _bit_snippet,
    T.DATE: _temporal_snippet(temporal.date_source),
    T.NEWDATE: _temporal_snippet(temporal.date_source),
    T.DATETIME: _call_snippet(temporal.decode_datetime_old, 8),
    T.TIME: _call_snippet(temporal.decode_time_old, 3),
    T.TIMESTAMP: _call_snippet(temporal.decode_timestamp_old, 4),
    T.DATETIME2: _temporal_snippet(temporal.datetime2_source),
    T.TIMESTAMP2: _temporal_snippet(temporal.timestamp2_source),
    T.TIME2: _call_snippet(temporal.decode_time2, temporal.time2_size),
    T.VARCHAR: _string_snippet,
    T.VAR_STRING: _string_snippet,
    T.STRING: _string_snippet,
    T.ENUM: _enum_snippet,
    T.SET: _set_snippet,
    T.BLOB: _blob_snippet,
    T.TINY_BLOB: _blob_snippet,
    T.MEDIUM_BLOB: _blob_snippet,
    T.LONG_BLOB: _blob_snippet,
    T.JSON: _blob_snippet,
    T.GEOMETRY: _blob_snippet,
}


def value_source(spec: ColumnSpec, target: str, namespace: dict[str, Any]) -> list[str]:
    """Statements that decode one value of ``spec`` at ``b[p:]`` into ``target``, advancing
    ``p``; names they use are added to ``namespace``."""
    namespace["_from_bytes"] = int.from_bytes
    return _SNIPPETS[spec.type](spec, target, namespace)


@lru_cache(maxsize=4096)
def value_decoder(spec: ColumnSpec) -> Callable[[bytes, int], tuple[Any, int]]:
    """A function ``(buf, pos) -> (value, end)`` for one column (not bounds-checked)."""
    namespace: dict[str, Any] = {}
    body = "\n    ".join(value_source(spec, "v", namespace))
    exec(f"def decode(b, p):\n    {body}\n    return v, p\n", namespace)
    return namespace["decode"]  # type: ignore[no-any-return]


def decode_value(spec: ColumnSpec, buf: bytes, pos: int) -> tuple[Any, int]:
    """The value at ``buf[pos:]`` and the position after it; ValueDecodeError naming the column
    when it is malformed or runs past the buffer."""
    try:
        value, end = value_decoder(spec)(buf, pos)
    except ValueDecodeError as error:
        raise _value_error(spec, error.message) from None
    except UnicodeDecodeError as error:
        bad = bytes(error.object[error.start : error.end]).hex(" ")
        raise _value_error(spec, f"bytes {bad} are not valid {spec.codec} text") from None
    except (IndexError, ValueError, OverflowError, struct.error) as error:
        raise _value_error(spec, str(error)) from None
    if end > len(buf):
        raise _value_error(spec, f"the value runs {end - len(buf)} bytes past the row data")
    return value, end


def _value_error(spec: ColumnSpec, message: str) -> ValueDecodeError:
    return ValueDecodeError(f"column {spec.name} (#{spec.index + 1}): {message}", table=spec.table)


_FIXED_SIZE: dict[int, Callable[[ColumnSpec], int]] = {
    **{t: (lambda s: _WIDTH[s.type]) for t in _WIDTH},
    T.FLOAT: lambda s: 4,
    T.DOUBLE: lambda s: 8,
    T.NEWDECIMAL: lambda s: decimal_size(s.metadata >> 8, s.metadata & 0xFF),
    T.YEAR: lambda s: 1,
    T.BIT: lambda s: (s.length + 7) // 8,
    T.DATE: lambda s: 3,
    T.NEWDATE: lambda s: 3,
    T.DATETIME: lambda s: 8,
    T.TIME: lambda s: 3,
    T.TIMESTAMP: lambda s: 4,
    T.DATETIME2: lambda s: temporal.datetime2_size(s.metadata),
    T.TIMESTAMP2: lambda s: temporal.timestamp2_size(s.metadata),
    T.TIME2: lambda s: temporal.time2_size(s.metadata),
    T.ENUM: lambda s: s.length,
    T.SET: lambda s: s.length,
}


def value_end(spec: ColumnSpec, buf: bytes, pos: int) -> int:
    """Where the value at ``pos`` ends, from its type or its length prefix (not checked
    against ``len(buf)``; a prefix cut short by the buffer's end gives a position past it)."""
    fixed = _FIXED_SIZE.get(spec.type)
    if fixed is not None:
        return pos + fixed(spec)
    if spec.type in (T.VARCHAR, T.VAR_STRING, T.STRING):
        prefix = 1 if spec.length < 256 else 2
    else:
        prefix = spec.length
    if pos + prefix > len(buf):
        return pos + prefix
    return pos + prefix + int.from_bytes(buf[pos : pos + prefix], "little")


# ---- encoding ---------------------------------------------------------------------------------


def encode_value(spec: ColumnSpec, value: Any) -> bytes:
    """The row-image bytes of a non-NULL ``value`` (inverse of ``decode_value``)."""
    kind = spec.type
    if kind in _WIDTH:
        signed = not spec.unsigned
        return int(value).to_bytes(_WIDTH[kind], "little", signed=signed)
    if kind in (T.FLOAT, T.DOUBLE):
        return struct.pack("<f" if kind == T.FLOAT else "<d", value)
    if kind == T.NEWDECIMAL:
        return encode_decimal(value, spec.metadata >> 8, spec.metadata & 0xFF)
    if kind == T.YEAR:
        return bytes((value - 1900 if value else 0,))
    if kind == T.BIT:
        return int(value).to_bytes((spec.length + 7) // 8, "big")
    if kind in _TEMPORAL_ENCODERS:
        return _TEMPORAL_ENCODERS[kind](value, spec.metadata)
    if kind == T.ENUM:
        return ((("", *spec.labels)).index(value)).to_bytes(spec.length, "little")
    if kind == T.SET:
        members = set(value.split(",")) if value else set()
        bits = sum(1 << i for i, label in enumerate(spec.labels) if label in members)
        return bits.to_bytes(spec.length, "little")
    return _encode_bytes(spec, value)


def _encode_bytes(spec: ColumnSpec, value: Any) -> bytes:
    if spec.type == T.GEOMETRY:
        data = value.srid.to_bytes(4, "little") + value.wkb
    elif spec.type == T.JSON and isinstance(value, str):
        data = _encode_json(value)
    elif spec.codec is not None:
        data = value.encode(spec.codec)
    elif spec.hint is not None:
        data = parse_hinted(spec.hint, value)
    else:
        data = bytes(value)
    assert isinstance(data, bytes)
    if spec.type == T.STRING and spec.codec is None:
        data = data.rstrip(b"\x00")
    if spec.type in (T.VARCHAR, T.VAR_STRING, T.STRING):
        prefix = 1 if spec.length < 256 else 2
    else:
        prefix = spec.length
    return len(data).to_bytes(prefix, "little") + data


_TEMPORAL_ENCODERS: dict[int, Callable[[Any, int], bytes]] = {
    T.DATE: lambda v, _m: temporal.encode_date(v),
    T.NEWDATE: lambda v, _m: temporal.encode_date(v),
    T.DATETIME: lambda v, _m: temporal.encode_datetime_old(v),
    T.TIME: lambda v, _m: temporal.encode_time_old(v),
    T.TIMESTAMP: lambda v, _m: temporal.encode_timestamp_old(v),
    T.DATETIME2: temporal.encode_datetime2,
    T.TIMESTAMP2: temporal.encode_timestamp2,
    T.TIME2: temporal.encode_time2,
}
