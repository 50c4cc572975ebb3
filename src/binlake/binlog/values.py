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
JSON (MySQL)            ``str``: the document as text (``binlake.binlog.mysql_json``)
GEOMETRY                ``Geometry(srid, wkb)``
======================  ============================================================

MariaDB's UUID, INET4 and INET6 columns are indistinguishable from BINARY(16), BINARY(4) and
BINARY(16) in the binlog: MariaDB 10.11 logs them as type STRING (254) with real type STRING,
length 16/4/16 and the binary collation (63), even with ``binlog_row_metadata=FULL``; nothing in
the TABLE_MAP marks them. Their row-image bytes are the value in network order (a UUID's 16 bytes
in the order of its text form), with trailing zero bytes stripped like every BINARY(n). Decoding
therefore returns padded ``bytes``; a caller that knows the column's type from the source schema
(``information_schema.COLUMNS.DATA_TYPE``) passes a hint (``"uuid"``, ``"inet4"``, ``"inet6"``)
and gets MariaDB's canonical text instead (``format_uuid``, ``format_inet4``, ``format_inet6``).

Each decodable type has a *source snippet*: Python statements that read one value at ``b[p:]``
into a variable and advance ``p``. ``binlake.binlog.rowcodec`` pastes the snippets of a row's
columns into one generated function; ``decode_value`` runs a single snippet. Encoders
(``encode_value``) are plain functions, used by tests and relay-log tooling.
"""

from __future__ import annotations

import ipaddress
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from functools import lru_cache
from typing import Any, Final

from binlake.binlog import temporal
from binlake.binlog.charsets import codec_for_collation
from binlake.binlog.constants import ColumnType as T
from binlake.binlog.decimals import (
    DECIMAL_NAMESPACE,
    decimal_size,
    decimal_source,
    encode_decimal,
)
from binlake.binlog.errors import InvalidEventError, UnsupportedTypeError, ValueDecodeError
from binlake.binlog.tablemap import (
    BLOB_COMPRESSED,
    VARCHAR_COMPRESSED,
    TableMap,
    real_type_and_length,
)
from binlake.binlog.temporal import ZeroDate

__all__ = ["ABSENT", "ColumnSpec", "Geometry", "ZeroDate", "column_spec", "decode_value"]

HINTS = frozenset({"uuid", "inet4", "inet6"})
_HINT_LENGTH = {"uuid": 16, "inet4": 4, "inet6": 16}
_BLOB_TYPES = frozenset({T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB})
_TEXT_TYPES = frozenset({T.VARCHAR, T.VAR_STRING, T.STRING}) | _BLOB_TYPES
_INT_FORMATS: dict[int, str] = {T.TINY: "b", T.SHORT: "h", T.LONG: "i", T.LONGLONG: "q"}
_WIDTH: dict[int, int] = {T.TINY: 1, T.SHORT: 2, T.INT24: 3, T.LONG: 4, T.LONGLONG: 8}


class _Absent:
    """The value of a column a row image does not include (MINIMAL/NOBLOB row images)."""

    _instance: _Absent | None = None

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
    from dataclasses import replace

    if spec.type not in _SNIPPETS:
        raise _unsupported(spec, *_UNSUPPORTED.get(spec.type, (f"type code {spec.type}", None)))
    if spec.type in (T.TIME2, T.DATETIME2, T.TIMESTAMP2) and spec.metadata > 6:
        raise InvalidEventError(f"column {spec.name} declares {spec.metadata} fractional digits")
    if spec.type == T.NEWDECIMAL:
        decimal_size(spec.metadata >> 8, spec.metadata & 0xFF)  # raises for impossible p, s
    if spec.hint is not None and (
        spec.hint not in HINTS or spec.type != T.STRING or spec.length != _HINT_LENGTH[spec.hint]
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
        return replace(spec, labels=tuple(label.decode(codec) for label in labels))
    return spec


# ---- formatting MariaDB's own binary types ---------------------------------------------------


def format_uuid(raw: bytes) -> str:
    """MariaDB's text of a UUID column value (16 bytes in text order)."""
    return str(uuid.UUID(bytes=bytes(raw)))


def format_inet4(raw: bytes) -> str:
    return str(ipaddress.IPv4Address(bytes(raw)))


def format_inet6(raw: bytes) -> str:
    """MariaDB's text of an INET6 value: RFC 5952 with ``::a.b.c.d`` for embedded IPv4."""
    words = struct.unpack(">8H", raw)
    best_start, best_len, start = -1, 0, -1
    for i, word in enumerate((*words, 1)):
        if word == 0 and start < 0:
            start = i
        elif word != 0 and start >= 0:
            if i - start > best_len:
                best_start, best_len = start, i - start
            start = -1
    if best_start == 0 and (best_len == 6 or (best_len == 5 and words[5] == 0xFFFF)):
        prefix = "::ffff:" if best_len == 5 else "::"
        return prefix + ".".join(str(b) for b in raw[12:])
    if best_len < 2:
        return ":".join(f"{w:x}" for w in words)
    head = ":".join(f"{w:x}" for w in words[:best_start])
    tail = ":".join(f"{w:x}" for w in words[best_start + best_len :])
    return f"{head}::{tail}"


def _parse_hinted(hint: str, text: str) -> bytes:
    if hint == "uuid":
        return uuid.UUID(text).bytes
    if hint == "inet4":
        return ipaddress.IPv4Address(text).packed
    return ipaddress.IPv6Address(text).packed


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


_DATETIME2_READ = {  # fsp -> (struct format after '>BHH', microseconds expression)
    0: ("", ""),
    1: ("B", "_f * 10000"),
    2: ("B", "_f * 10000"),
    3: ("H", "_f * 100"),
    4: ("H", "_f * 100"),
    5: ("BH", "_f << 16 | _g"),
    6: ("BH", "_f << 16 | _g"),
}


def _datetime2_snippet(spec: ColumnSpec, v: str, ns: dict[str, Any]) -> list[str]:
    """DATETIME2 read as three small big-endian integers (cheaper than one 40-bit one)."""
    fsp = spec.metadata
    if fsp not in _DATETIME2_READ:
        return [f"{v} = _dt_bad(-1, 0, {fsp})"]
    fmt, micro = _DATETIME2_READ[fsp]
    name = f"_unpack_dt{fsp}"
    ns[name] = struct.Struct(">BHH" + fmt).unpack_from
    ns.update(_datetime=datetime, _dt_bad=_datetime_bad)
    names = "_h, _m, _l" + {"": "", "B": ", _f", "H": ", _f", "BH": ", _f, _g"}[fmt]
    args = "(_h - 128) << 10 | _m >> 6"
    return [
        f"{names} = {name}(b, p); p += {temporal.datetime2_size(fsp)}",
        f"_y = {args}",
        f"try: {v} = _datetime(_y // 13, _y % 13, _m >> 1 & 31, _l >> 12 | (_m & 1) << 4,"
        f" _l >> 6 & 63, _l & 63{', ' + micro if micro else ''})",
        f"except (ValueError, OverflowError): {v} = _dt_bad((_h << 32 | _m << 16 | _l) - "
        f"{temporal.DATETIMEF_INT_OFS:#x}, {micro or '0'}, {fsp})",
    ]


_FRAC_SCALE = (1, 10000, 10000, 100, 100, 1, 1)


def _datetime_bad(packed: int, micro: int, fsp: int) -> datetime | ZeroDate:
    if packed < 0:
        raise ValueDecodeError("negative DATETIME value")
    ym = packed >> 22
    fields = (ym // 13, ym % 13, packed >> 17 & 31, packed >> 12 & 31, packed >> 6 & 63)
    if micro >= 1_000_000:
        raise ValueDecodeError(f"fractional seconds {micro} are not below one second")
    return temporal.make_datetime(*fields, packed & 63, micro, fsp)


def _timestamp2_snippet(spec: ColumnSpec, v: str, ns: dict[str, Any]) -> list[str]:
    fsp = spec.metadata
    frac = temporal.frac_size(fsp)
    ns.update(_fromts=datetime.fromtimestamp, _UTC=temporal.UTC, _ts_bad=_timestamp_bad)
    ns["_unpack_be_I"] = struct.Struct(">I").unpack_from
    lines = ["_x, = _unpack_be_I(b, p)"]
    if frac == 0:
        return [*lines, f"{v} = _fromts(_x, _UTC) if _x else _ts_bad(0, 0, 0); p += 4"]
    return [
        *lines,
        f"_f = _from_bytes(b[p + 4:p + {4 + frac}], 'big') * {_FRAC_SCALE[fsp]}; p += {4 + frac}",
        f"if _x and _f < 1000000: {v} = _fromts(_x, _UTC).replace(microsecond=_f)",
        f"else: {v} = _ts_bad(_x, _f, {fsp})",
    ]


def _timestamp_bad(seconds: int, micro: int, fsp: int) -> datetime | ZeroDate:
    if micro >= 1_000_000:
        raise ValueDecodeError(f"fractional seconds {micro} are not below one second")
    if seconds == 0 and micro == 0:
        return ZeroDate(0, 0, 0, fsp=fsp)
    return datetime.fromtimestamp(seconds, temporal.UTC).replace(microsecond=micro)


def _date_snippet(spec: ColumnSpec, v: str, ns: dict[str, Any]) -> list[str]:
    ns.update(_date=date, _date_bad=_date_bad)
    return [
        "_x = b[p] | b[p + 1] << 8 | b[p + 2] << 16; p += 3",
        f"try: {v} = _date(_x >> 9, _x >> 5 & 15, _x & 31)",
        f"except ValueError: {v} = _date_bad(_x)",
    ]


def _date_bad(value: int) -> date | ZeroDate:
    return temporal.make_date(value >> 9, value >> 5 & 15, value & 31)


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
    from binlake.binlog.mysql_json import decode_mysql_json

    return decode_mysql_json(bytes(data))


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
    T.DATE: _date_snippet,
    T.NEWDATE: _date_snippet,
    T.DATETIME: _call_snippet(temporal.decode_datetime_old, 8),
    T.TIME: _call_snippet(temporal.decode_time_old, 3),
    T.TIMESTAMP: _call_snippet(temporal.decode_timestamp_old, 4),
    T.DATETIME2: _datetime2_snippet,
    T.TIMESTAMP2: _timestamp2_snippet,
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
    elif spec.codec is not None:
        data = value.encode(spec.codec)
    elif spec.hint is not None:
        data = _parse_hinted(spec.hint, value)
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
