"""MySQL 8 binary JSON (column type 245 in row images) to JSON text, and back for tests.

The format (MySQL ``sql-common/json_binary.h``). A document is one type byte and a value::

    0x00 small object   0x01 large object   0x02 small array   0x03 large array
    0x04 literal (value byte 0x00 null, 0x01 true, 0x02 false)
    0x05 int16  0x06 uint16  0x07 int32  0x08 uint32  0x09 int64  0x0a uint64
    0x0b double (8-byte IEEE little-endian)
    0x0c utf8mb4 string: variable length, then the bytes
    0x0f opaque: MySQL field type byte, variable length, then the bytes

Integers are little-endian. A variable length is 1-5 bytes, 7 bits each, least significant
first, the high bit set on every byte but the last. An array is ``count size value-entry*
value*``; an object is ``count size key-entry* value-entry* key* value*``. ``count``,
``size`` and offsets are uint16 in the small formats and uint32 in the large ones; ``size``
covers the whole container from ``count`` on, and every offset is relative to ``count``. A
key entry is ``offset uint16-length``. A value entry is a type byte and an offset, except that
literals, int16 and uint16 (and int32/uint32 in large containers) are stored in the entry in
place of the offset. MySQL writes object keys sorted by length, then bytewise; they are printed
in stored order. The opaque field types printed specially are NEWDECIMAL (246: precision byte,
scale byte, MySQL's packed binary decimal), DATE (10), TIME (11), DATETIME (12) and TIMESTAMP
(7) (an 8-byte little-endian signed "packed" temporal); VAR_STRING (253) is printed as a plain
string, as current MySQL 8 does; any other type prints as ``"base64:typeNN:<base64>"``.

The text is what MySQL's ``Json_wrapper::to_string`` produces (``JSON_EXTRACT``, ``CAST(... AS
CHAR)``; ``mysqlbinlog -v`` is believed to print through the same code, not checked): ``", "``
and ``": "`` separators; strings escape ``"``, ``\\`` and bytes below 0x20 (``\\b \\t \\n
\\f \\r``, otherwise ``\\u00xx``) and keep everything else as is; doubles as MySQL's
``my_gcvt`` prints them (see ``format_mysql_double``); decimals with exactly their scale's
digits (``3.10``); DATETIME/TIMESTAMP as ``"2015-01-15 23:24:25.000000"``, TIME as
``"-838:59:59.000000"``, DATE as ``"2015-01-15"``; base64 wrapped every 76 characters with
``\\n``, as MySQL's ``base64_encode`` does.

An empty value (zero bytes) decodes as ``null``: MySQL's ``parse_binary`` reads it as the JSON
null literal. It is what an empty string inserted into a NOT NULL JSON column under INSERT
IGNORE or a non-strict sql_mode leaves behind; an SQL NULL never gets here (it is a bit in the
row image's null bitmap).

Like MySQL, the decoder ignores bytes after the top-level value and free space inside
containers (which in-place partial updates leave), and does not check key order. It is
stricter than MySQL where MySQL would print garbage or fail later: invalid UTF-8, NaN or
infinite doubles, decimal digit groups out of range, temporal fields out of MySQL's ranges,
nesting deeper than MySQL's limit of 100, and values sharing bytes (which MySQL never writes;
refusing them bounds the output to a constant times the input) raise ``ValueDecodeError``.

Out of scope: the partial JSON updates of ``binlog_row_value_options=PARTIAL_JSON`` (a
JSON diff list in the after image of an UPDATE); callers must not pass those bytes here.
"""

from __future__ import annotations

import base64
import math
import struct
from dataclasses import dataclass

from binlake.binlog.errors import ValueDecodeError

SMALL_OBJECT = 0x00
LARGE_OBJECT = 0x01
SMALL_ARRAY = 0x02
LARGE_ARRAY = 0x03
LITERAL = 0x04
INT16 = 0x05
UINT16 = 0x06
INT32 = 0x07
UINT32 = 0x08
INT64 = 0x09
UINT64 = 0x0A
DOUBLE = 0x0B
STRING = 0x0C
OPAQUE = 0x0F

LITERAL_NULL = 0x00
LITERAL_TRUE = 0x01
LITERAL_FALSE = 0x02

#: MySQL ``enum_field_types`` codes that the JSON printer treats specially in opaque values.
FIELD_TIMESTAMP = 7
FIELD_DATE = 10
FIELD_TIME = 11
FIELD_DATETIME = 12
FIELD_NEWDECIMAL = 246
FIELD_VAR_STRING = 253

#: MySQL's JSON_DOCUMENT_MAX_DEPTH: nesting of arrays and objects beyond this is an error.
MAX_DEPTH = 100

_CONTAINERS = frozenset((SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY))
_LITERAL_TEXT = {LITERAL_NULL: "null", LITERAL_TRUE: "true", LITERAL_FALSE: "false"}
#: ``bytes.translate`` table turning each byte into its complement (``b ^ 0xFF``): a negative
#: DECIMAL's digits are stored inverted.
_INVERTED = bytes(range(255, -1, -1))
_NUMBERS: dict[int, struct.Struct] = {
    INT16: struct.Struct("<h"),
    UINT16: struct.Struct("<H"),
    INT32: struct.Struct("<i"),
    UINT32: struct.Struct("<I"),
    INT64: struct.Struct("<q"),
    UINT64: struct.Struct("<Q"),
    DOUBLE: struct.Struct("<d"),
}
_UINT32_MAX = 0xFFFFFFFF

# MySQL's double_quote(): the two-character escapes, then \u00xx for the other bytes < 0x20.
_ESCAPES: dict[int, str] = {c: f"\\u{c:04x}" for c in range(0x20)}
_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"})
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def _error(message: str) -> ValueDecodeError:
    return ValueDecodeError(f"invalid MySQL binary JSON: {message}")


def quote_json_string(text: str) -> str:
    """``text`` as a JSON string literal, escaped exactly as MySQL's ``double_quote()``."""
    return '"' + text.translate(_ESCAPES) + '"'


def _utf8(raw: bytes, what: str, pos: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _error(f"{what} at byte {pos} is not valid utf8mb4 ({exc.reason})") from None


# --------------------------------------------------------------------------- scalars


def format_mysql_double(value: float) -> str:
    """A double as MySQL's JSON printer writes it: ``my_gcvt`` at field width 34, plus ``.0``.

    ``my_gcvt`` takes the shortest digits that round-trip (dtoa mode 4 with more digits than a
    double has), then uses plain notation when the decimal exponent ``decpt`` (value =
    0.DIGITS x 10**decpt) satisfies ``-14 <= decpt`` and (``decpt <= 15`` or a fractional
    digit remains), otherwise ``d.ddde[-]x`` with no ``+`` and no exponent padding. The JSON
    printer appends ``.0`` when the result has neither ``.`` nor ``e``: 1.0 -> ``1.0``,
    1e15 -> ``1e15``, 1e14 -> ``100000000000000.0``, 1e-15 -> ``0.000000000000001``,
    1e-16 -> ``1e-16``, -0.0 -> ``-0.0``.
    """
    if not math.isfinite(value):
        raise _error(f"double {value!r} is not a JSON number")
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0.0"
    digits, decpt = _shortest_digits(value)
    count = len(digits)
    if decpt >= -14 and (decpt <= 15 or count > decpt):
        if decpt <= 0:
            return f"{sign}0.{'0' * -decpt}{digits}"
        if decpt < count:
            return f"{sign}{digits[:decpt]}.{digits[decpt:]}"
        return f"{sign}{digits}{'0' * (decpt - count)}.0"
    mantissa = digits[0] + ("." + digits[1:] if count > 1 else "")
    return f"{sign}{mantissa}e{decpt - 1}"


def _shortest_digits(value: float) -> tuple[str, int]:
    """The shortest round-trip digits of ``|value|`` (not 0) and ``decpt``."""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    significant = digits.lstrip("0")
    decpt = len(whole) + int(exponent or "0") - (len(digits) - len(significant))
    return significant.rstrip("0"), decpt


_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def _decimal_groups(precision: int, scale: int) -> list[tuple[int, int]]:
    """(bytes, digits) of each group of MySQL's binary decimal, most significant first."""
    intg = precision - scale
    lead = [(_DIG2BYTES[intg % 9], intg % 9)] if intg % 9 else []
    trail = [(_DIG2BYTES[scale % 9], scale % 9)] if scale % 9 else []
    return lead + [(4, 9)] * (intg // 9) + [(4, 9)] * (scale // 9) + trail


def decode_json_decimal(payload: bytes) -> str:
    """The text of a JSON DECIMAL opaque value: precision, scale, then ``decimal2bin`` bytes.

    Binary decimal: the integer digits then the fraction digits in groups of nine stored as
    4-byte big-endian words, a leading/trailing group of fewer digits in 1-4 bytes; a negative
    number has every byte inverted, and then the top bit of the first byte is flipped.
    """
    if len(payload) < 2:
        raise _error("a DECIMAL needs precision and scale bytes")
    precision, scale = payload[0], payload[1]
    # 81 is the digit capacity of MySQL's decimal buffer; column DECIMALs stop at (65, 30).
    if not 0 < precision <= 81 or scale > precision:
        raise _error(f"DECIMAL precision {precision}, scale {scale} is impossible")
    groups = _decimal_groups(precision, scale)
    body = bytearray(payload[2:])
    if len(body) != sum(size for size, _ in groups):
        raise _error(f"DECIMAL({precision},{scale}) has {len(body)} bytes of digits")
    negative = not body[0] & 0x80
    body[0] ^= 0x80
    if negative:
        body = body.translate(_INVERTED)  # not a generator over a bytearray: mypyc refuses it
    parts: list[str] = []
    pos = 0
    for size, digits in groups:
        group = int.from_bytes(body[pos : pos + size], "big")
        if group >= 10**digits:
            raise _error(f"DECIMAL digit group {group} has more than {digits} digits")
        parts.append(str(group).zfill(digits))
        pos += size
    text = "".join(parts)
    whole, fraction = text[: precision - scale].lstrip("0") or "0", text[precision - scale :]
    # MySQL's bin2decimal keeps the sign of a negative zero unless it has no digits at all.
    sign = "-" if negative and (scale or whole != "0") else ""
    return f"{sign}{whole}.{fraction}" if scale else f"{sign}{whole}"


def _datetime_fields(packed: int) -> tuple[int, int, int, int, int, int, int]:
    """Year..microsecond of a packed DATETIME: ``((year*13+month)<<5|day)<<17|hms, <<24|us``."""
    if packed < 0:
        raise _error(f"packed datetime {packed} is negative")
    micro, ymdhms = packed & 0xFFFFFF, packed >> 24
    ymd, hms = ymdhms >> 17, ymdhms & 0x1FFFF
    year, month, day = (ymd >> 5) // 13, (ymd >> 5) % 13, ymd & 0x1F
    hour, minute, second = hms >> 12, (hms >> 6) & 0x3F, hms & 0x3F
    if year > 9999 or hour > 23 or minute > 59 or second > 59 or micro > 999_999:
        raise _error(f"packed datetime {packed:#x} is out of range")
    return year, month, day, hour, minute, second, micro


def _time_text(packed: int) -> str:
    """A packed TIME: sign, then ``hour<<12 | minute<<6 | second`` shifted left 24, plus us."""
    sign, magnitude = ("-", -packed) if packed < 0 else ("", packed)
    micro, hms = magnitude & 0xFFFFFF, magnitude >> 24
    hour, minute, second = hms >> 12, (hms >> 6) & 0x3F, hms & 0x3F
    if hour > 838 or minute > 59 or second > 59 or micro > 999_999:
        raise _error(f"packed time {packed:#x} is out of range")
    return f"{sign}{hour:02d}:{minute:02d}:{second:02d}.{micro:06d}"


def decode_json_temporal(field_type: int, payload: bytes) -> str:
    """The (unquoted) text of a DATE, TIME, DATETIME or TIMESTAMP opaque value."""
    if len(payload) != 8:
        raise _error(f"a packed temporal value has 8 bytes, not {len(payload)}")
    packed = int.from_bytes(payload, "little", signed=True)
    if field_type == FIELD_TIME:
        return _time_text(packed)
    year, month, day, hour, minute, second, micro = _datetime_fields(packed)
    date = f"{year:04d}-{month:02d}-{day:02d}"
    if field_type == FIELD_DATE:
        return date
    return f"{date} {hour:02d}:{minute:02d}:{second:02d}.{micro:06d}"


def _mysql_base64(payload: bytes) -> str:
    """Base64 as MySQL's ``base64_encode``: standard alphabet, ``=`` padding, 76-char lines."""
    text = base64.b64encode(payload).decode("ascii")
    return "\n".join(text[i : i + 76] for i in range(0, len(text), 76))


def _opaque_text(field_type: int, payload: bytes, pos: int) -> str:
    if field_type == FIELD_NEWDECIMAL:
        return decode_json_decimal(payload)
    if field_type in (FIELD_DATE, FIELD_TIME, FIELD_DATETIME, FIELD_TIMESTAMP):
        return '"' + decode_json_temporal(field_type, payload) + '"'
    if field_type == FIELD_VAR_STRING:
        return quote_json_string(_utf8(payload, "an opaque VAR_STRING", pos))
    return quote_json_string(f"base64:type{field_type}:{_mysql_base64(payload)}")


# --------------------------------------------------------------------------- decoding


def _need(pos: int, size: int, end: int, what: str) -> None:
    if size > end - pos:
        left = max(end - pos, 0)
        raise _error(f"{what} at byte {pos} needs {size} bytes, {left} left (truncated?)")


def _read_varlen(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """A variable length at ``pos``: (value, bytes it took)."""
    value = 0
    for i in range(min(5, end - pos)):
        byte = data[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if value > _UINT32_MAX:
                raise _error(f"length at byte {pos} exceeds 32 bits")
            return value, i + 1
    raise _error(f"length at byte {pos} is unterminated or truncated")


@dataclass(frozen=True, slots=True)
class _Container:
    start: int  # absolute position of the element count
    size: int
    count: int
    large: bool
    is_object: bool

    @property
    def offset_size(self) -> int:
        return 4 if self.large else 2

    @property
    def value_entries(self) -> int:
        """Offset (from ``start``) of the first value entry."""
        key_entries = self.count * (self.offset_size + 2) if self.is_object else 0
        return 2 * self.offset_size + key_entries

    @property
    def header_size(self) -> int:
        return self.value_entries + self.count * (1 + self.offset_size)


def _inlined(type_: int, large: bool) -> bool:
    return type_ in (LITERAL, INT16, UINT16) or (large and type_ in (INT32, UINT32))


class _Decoder:
    """One pass over one document, appending JSON text to ``out``."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.out: list[str] = []
        self._unclaimed = len(data)

    def claim(self, size: int) -> None:
        """Account for ``size`` bytes owned by one value; no two values may own the same."""
        self._unclaimed -= size
        if self._unclaimed < 0:
            raise _error("values overlap (more bytes are referenced than the document has)")

    def value(self, type_: int, start: int, end: int, depth: int) -> None:
        """The value of type ``type_`` at ``start``, which must end by ``end``."""
        if type_ in _CONTAINERS:
            self.container(type_, start, end, depth + 1)
            return
        text, size = self.scalar(type_, start, end)
        self.claim(size)
        self.out.append(text)

    def scalar(self, type_: int, start: int, end: int) -> tuple[str, int]:
        """(text, bytes used) of the scalar of type ``type_`` at ``start``."""
        data = self.data
        if type_ == LITERAL:
            _need(start, 1, end, "a literal")
            text = _LITERAL_TEXT.get(data[start])
            if text is None:
                raise _error(f"literal byte {data[start]:#04x} at byte {start} is unknown")
            return text, 1
        number = _NUMBERS.get(type_)
        if number is not None:
            _need(start, number.size, end, "a number")
            (value,) = number.unpack_from(data, start)
            text = format_mysql_double(value) if type_ == DOUBLE else str(value)
            return text, number.size
        if type_ == STRING:
            length, used = _read_varlen(data, start, end)
            _need(start + used, length, end, "a string")
            raw = data[start + used : start + used + length]
            return quote_json_string(_utf8(raw, "a string", start)), used + length
        if type_ == OPAQUE:
            _need(start, 1, end, "an opaque value")
            length, used = _read_varlen(data, start + 1, end)
            _need(start + 1 + used, length, end, "an opaque value")
            raw = data[start + 1 + used : start + 1 + used + length]
            return _opaque_text(data[start], raw, start), 1 + used + length
        raise _error(f"value type {type_:#04x} at byte {start} is unknown")

    def container(self, type_: int, start: int, end: int, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise _error(f"arrays and objects nest deeper than {MAX_DEPTH} at byte {start}")
        large = type_ in (LARGE_OBJECT, LARGE_ARRAY)
        width = 4 if large else 2
        _need(start, 2 * width, end, "a container header")
        count, size = struct.unpack_from("<II" if large else "<HH", self.data, start)
        box = _Container(start, size, count, large, type_ in (SMALL_OBJECT, LARGE_OBJECT))
        if size > end - start:
            raise _error(f"container at byte {start} has size {size}, {end - start} available")
        if box.header_size > size:
            raise _error(f"container at byte {start}: {count} entries do not fit in {size}")
        self.claim(box.header_size)
        self.out.append("{" if box.is_object else "[")
        for index in range(count):
            if index:
                self.out.append(", ")
            if box.is_object:
                self.out.append(self.key(box, index))
                self.out.append(": ")
            self.element(box, index, depth)
        self.out.append("}" if box.is_object else "]")

    def key(self, box: _Container, index: int) -> str:
        width = box.offset_size
        entry = box.start + 2 * width + index * (width + 2)
        offset = int.from_bytes(self.data[entry : entry + width], "little")
        length = int.from_bytes(self.data[entry + width : entry + width + 2], "little")
        if offset < box.header_size or offset + length > box.size:
            raise _error(f"key {index} of the object at byte {box.start} lies outside it")
        self.claim(length)
        raw = self.data[box.start + offset : box.start + offset + length]
        return quote_json_string(_utf8(raw, "an object key", box.start + offset))

    def element(self, box: _Container, index: int, depth: int) -> None:
        entry_size = 1 + box.offset_size
        entry = box.value_entries + index * entry_size
        at = box.start + entry
        type_ = self.data[at]
        if _inlined(type_, box.large):
            text, _ = self.scalar(type_, at + 1, at + entry_size)
            self.out.append(text)
            return
        offset = int.from_bytes(self.data[at + 1 : at + entry_size], "little")
        if offset < entry + entry_size or offset > box.size:
            raise _error(f"value {index} of the container at byte {box.start} lies outside it")
        self.value(type_, box.start + offset, box.start + box.size, depth)


def decode_mysql_json(data: bytes | memoryview) -> str:
    """The JSON text of one MySQL binary JSON value, as MySQL prints it.

    Raises ``ValueDecodeError`` for bytes that are not a valid document (and never returns
    part of one). Zero bytes decode as ``null`` (see the module docstring).
    """
    raw = bytes(data)
    if not raw:
        return "null"
    decoder = _Decoder(raw)
    decoder.claim(1)
    decoder.value(raw[0], 1, len(raw), 0)
    return "".join(decoder.out)


# --------------------------------------------------------------------------- encoding


def _int_type(value: int) -> tuple[int, int]:
    """(type, byte size) MySQL's JSON parser gives an integer.

    RapidJSON hands MySQL non-negative numbers above UINT32_MAX as Uint64, which MySQL stores
    as uint64; everything else becomes a signed int of the smallest of 16/32/64 bits.
    """
    if value > _UINT32_MAX:
        if value >= 1 << 64:
            raise ValueError(f"{value} does not fit in a MySQL JSON integer")
        return UINT64, 8
    if -(1 << 15) <= value < 1 << 15:
        return INT16, 2
    if -(1 << 31) <= value < 1 << 31:
        return INT32, 4
    if value < -(1 << 63):
        raise ValueError(f"{value} does not fit in a MySQL JSON integer")
    return INT64, 8


def _varlen(length: int) -> bytes:
    out = bytearray()
    while True:
        byte, length = length & 0x7F, length >> 7
        out.append(byte | (0x80 if length else 0))
        if not length:
            return bytes(out)


def _encode_scalar(value: object) -> tuple[int, bytes]:
    if value is None or isinstance(value, bool):
        literal = LITERAL_NULL if value is None else LITERAL_TRUE if value else LITERAL_FALSE
        return LITERAL, bytes([literal])
    if isinstance(value, int):
        type_, size = _int_type(value)
        return type_, value.to_bytes(size, "little", signed=type_ != UINT64)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} cannot be stored in MySQL JSON")
        return DOUBLE, struct.pack("<d", value)
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return STRING, _varlen(len(raw)) + raw
    raise TypeError(f"cannot encode {type(value).__name__} as MySQL JSON")


def _inline_entry(value: object, large: bool) -> bytes | None:
    """The value entry holding ``value`` itself, if MySQL inlines it at this width."""
    width = 4 if large else 2
    if value is None or isinstance(value, bool):
        return bytes([LITERAL]) + _encode_scalar(value)[1] + bytes(width - 1)
    if isinstance(value, int):
        type_, size = _int_type(value)
        if size == 2 or (large and size == 4):
            return bytes([type_]) + value.to_bytes(width, "little", signed=True)
    return None


def _encode_value(value: object, small_parent: bool, depth: int) -> tuple[int, bytes] | None:
    """(type, bytes) of ``value``; None if it only fits large but its parent is small."""
    if not isinstance(value, (dict, list, tuple)):
        return _encode_scalar(value)
    if depth + 1 > MAX_DEPTH:
        raise ValueError(f"MySQL JSON nests at most {MAX_DEPTH} arrays and objects")
    is_object = isinstance(value, dict)
    body = _encode_container(value, False, depth + 1)
    if body is not None:
        return (SMALL_OBJECT if is_object else SMALL_ARRAY), body
    if small_parent:
        return None
    body = _encode_container(value, True, depth + 1)
    if body is None:  # pragma: no cover - a large container raises instead
        raise ValueError("MySQL JSON document is too large")
    return (LARGE_OBJECT if is_object else LARGE_ARRAY), body


def _object_members(value: dict[object, object]) -> tuple[list[bytes], list[object]]:
    """Keys (utf-8) and values in MySQL's order: by key length, then bytewise."""
    members = []
    for key, member in value.items():
        if not isinstance(key, str):
            raise TypeError(f"MySQL JSON object keys are strings, not {type(key).__name__}")
        raw = key.encode("utf-8")
        if len(raw) > 0xFFFF:
            raise ValueError("MySQL JSON object keys are at most 65535 bytes")
        members.append((raw, member))
    members.sort(key=lambda item: (len(item[0]), item[0]))
    return [raw for raw, _ in members], [member for _, member in members]


def _encode_container(
    value: dict[object, object] | list[object] | tuple[object, ...], large: bool, depth: int
) -> bytes | None:
    """The body of an array or object, or None if it does not fit the small format."""
    keys, values = _object_members(value) if isinstance(value, dict) else ([], list(value))
    width, limit = (4, _UINT32_MAX) if large else (2, 0xFFFF)
    # Every offset is below the final size, which is checked at the end; min() only keeps an
    # oversized small container packable until then.
    pack = struct.Struct("<I" if large else "<H").pack
    data_start = 2 * width + len(keys) * (width + 2) + len(values) * (1 + width)
    key_entries, offset = bytearray(), data_start
    for key in keys:
        key_entries += pack(min(offset, limit)) + struct.pack("<H", len(key))
        offset += len(key)
    value_entries, tail = bytearray(), bytearray()
    for member in values:
        entry = _inline_entry(member, large)
        if entry is None:
            child = _encode_value(member, not large, depth)
            if child is None:
                return None
            entry = bytes([child[0]]) + pack(min(offset + len(tail), limit))
            tail += child[1]
        value_entries += entry
    size = offset + len(tail)
    if size > limit:
        if large:
            raise ValueError("MySQL JSON documents are at most 4 GiB")
        return None
    return pack(len(values)) + pack(size) + key_entries + value_entries + b"".join(keys) + tail


def encode_mysql_json(value: object) -> bytes:
    """``value`` (dict with str keys, list, str, int, float, bool, None) as MySQL binary JSON.

    Chooses formats as MySQL's serializer does: each array or object is small unless its size
    or an offset needs more than 16 bits, in which case it is large, and so is every ancestor
    (a small container cannot hold a large one). Integers take the types MySQL's JSON parser
    gives them. For tests: raises ``ValueError``/``TypeError`` for what MySQL cannot store.
    """
    encoded = _encode_value(value, small_parent=False, depth=0)
    if encoded is None:  # pragma: no cover - the top level has no small parent
        raise ValueError("MySQL JSON document is too large")
    return bytes([encoded[0]]) + encoded[1]
