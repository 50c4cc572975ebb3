"""The value an ALTER TABLE ... ADD COLUMN gave the rows a table already had (pure, but for
``SourceClock``).

MariaDB writes no row events for them: the lake must give them the same value itself. From the
column's definition in the statement, the Iceberg column it became and what the QUERY event
says of the session (``StatementContext``), ``existing_rows_value`` is that value as the lake
holds it (``binlake.typemap``), or None when it is NULL (or a zero date: null in the lake):

* ``DEFAULT NULL``, no DEFAULT on a nullable column: nothing to do;
* a literal (``binlake.ddl.literals``) converted as MariaDB converts it to the column's
  type: integers and decimals rounded half away from zero, range-checked; ``FLOAT`` to single
  precision; dates and times (``binlake.ddl.temporal``); strings with their charset and
  escapes, ``CHAR`` without trailing spaces, ``BINARY(n)`` padded with zero bytes, ENUM and SET
  by label (SET members in definition order), UUID/INET in MariaDB's canonical text; ``''``
  under ``EMPTY_STRING_IS_NULL`` is NULL;
* NOT NULL without DEFAULT: MariaDB's implicit default: 0, ``''``, the first ENUM label, zero
  bytes for ``BINARY(n)``, the zero date (null in the lake), the nil UUID, ``0.0.0.0``, ``::``;
* a TIMESTAMP column without DEFAULT and without ``NULL`` when the session had
  ``explicit_defaults_for_timestamp=OFF`` (``flags2`` bit 24 clear): NOT NULL, and the table's
  first TIMESTAMP column gets ``DEFAULT CURRENT_TIMESTAMP``;
* the statement's time (``CURRENT_TIMESTAMP``...): see ``binlake.ddl.temporal``.

Anything binlake cannot reproduce exactly raises ``UnsupportedDefaultError`` naming the table,
the column and the statement: an expression (``(1 + 2)``, ``uuid()``), a generated or
AUTO_INCREMENT column, a literal MariaDB's conversion of which is not followed here (a number
with more digits than a FLOAT(m,d) keeps, a hex string into a text column of unknown charset),
a time the event does not carry. Nothing is ever guessed.
"""

from __future__ import annotations

import datetime as dt
import re
import struct
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from enum import Enum

from binlake.binlog.encodings.charsets import charset_of, decode_text
from binlake.binlog.encodings.mariadb_types import (
    format_inet4,
    format_inet6,
    format_uuid,
    parse_hinted,
)
from binlake.binlog.errors import BinlakeError
from binlake.binlog.events import QueryEvent
from binlake.binlog.source_facts import ZoneTimes
from binlake.ddl.literals import (
    BytesLiteral,
    CurrentTime,
    Expression,
    Literal,
    NullLiteral,
    NumberLiteral,
    StringLiteral,
    TemporalLiteral,
    parse_default,
    string_value,
)
from binlake.ddl.statements import ColumnDefinition
from binlake.ddl.temporal import (
    ZERO,
    RecordedClock,
    SourceClock,
    StatementTime,
    TemporalError,
    parse_date,
    parse_datetime,
    parse_time,
)
from binlake.ddl.tokens import tokenize
from binlake.ddl.types import TypeText, declared_length
from binlake.errors import UnsupportedDefaultError
from binlake.typemap import IcebergType, LakeColumn

__all__ = ["StatementContext", "TimestampRank", "existing_rows_value", "is_timestamp"]

MODE_EMPTY_STRING_IS_NULL = 1 << 32
#: ``flags2`` bit of MariaDB's ``OPTION_EXPLICIT_DEF_TIMESTAMP``.
EXPLICIT_DEFAULTS_FLAG = 1 << 24
_INTEGER_BITS = {"TINYINT": 8, "SMALLINT": 16, "MEDIUMINT": 24, "INT": 32, "BIGINT": 64}
_NUMBER = re.compile(r"^\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*$")
_ZERO_TEXT = {
    "UUID": "00000000-0000-0000-0000-000000000000",
    "INET4": "0.0.0.0",
    "INET6": "::",
}
_FORMATS = {"UUID": format_uuid, "INET4": format_inet4, "INET6": format_inet6}
#: Charsets in which ASCII bytes are not the ASCII characters.
_WIDE = frozenset({"ucs2", "utf16", "utf16le", "utf32"})
_TIMESTAMP_RANGE = (
    dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC),
    dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=dt.UTC),
)


class _RefusedError(ValueError):
    """Why a value cannot be reproduced (becomes ``UnsupportedDefaultError``)."""


@dataclass(frozen=True, slots=True)
class StatementContext:
    """What the QUERY event of a DDL says about the session that ran it."""

    time: StatementTime
    sql_mode: int = 0
    #: The charset of the statement's text (``character_set_client``).
    charset: str = "utf8mb4"
    #: ``explicit_defaults_for_timestamp`` (ON by default since MariaDB 10.10).
    explicit_timestamps: bool = True
    #: The source's conversions in the statement's time zone, as the receiver recorded them
    #: beside the statement (None: none recorded; binlog/source_facts.py).
    recorded: ZoneTimes | None = None

    def clock(self, fallback: SourceClock | None) -> SourceClock | None:
        """The clock the statement's times are converted with: the recorded conversions, and
        ``fallback`` (the source) for what they lack."""
        if self.recorded is None:
            return fallback
        return RecordedClock(self.recorded, fallback)

    @classmethod
    def of_event(
        cls, timestamp: int, event: QueryEvent, recorded: ZoneTimes | None = None
    ) -> StatementContext:
        """From the event (``timestamp``: its header's seconds) and the facts recorded with
        it."""
        status = event.status
        micro = status.get("hrnow")
        if micro is None:
            micro = status.get("microseconds")
        zone = status.get("time_zone")
        charsets = status.get("charset")
        explicit = status.get("explicit_defaults_for_timestamp")
        if explicit is None:
            explicit = _integer_status(status.get("flags2")) & EXPLICIT_DEFAULTS_FLAG
        return cls(
            StatementTime(
                timestamp,
                micro if isinstance(micro, int) else None,
                zone if isinstance(zone, str) else None,
            ),
            sql_mode=_integer_status(status.get("sql_mode")),
            charset=_client_charset(charsets),
            explicit_timestamps=bool(explicit),
            recorded=recorded,
        )


def _integer_status(value: object) -> int:
    return value if isinstance(value, int) else 0


def _client_charset(charsets: object) -> str:
    if isinstance(charsets, tuple) and charsets and isinstance(charsets[0], int):
        try:
            return charset_of(charsets[0])
        except BinlakeError:
            return "utf8mb4"  # refused where a string needs it (its bytes cannot be read)
    return "utf8mb4"


def is_timestamp(column: LakeColumn) -> bool:
    return column.source_type.split("(")[0] == "TIMESTAMP"


class TimestampRank(Enum):
    """Whether an added TIMESTAMP column is its table's first one: with
    ``explicit_defaults_for_timestamp=OFF`` MariaDB gives the first ``DEFAULT
    CURRENT_TIMESTAMP`` and the others the zero date."""

    FIRST = "first"
    LATER = "later"
    #: Cannot be told (the column placed with FIRST or AFTER among other TIMESTAMP columns):
    #: refused where it matters.
    UNKNOWN = "unknown"


def existing_rows_value(
    definition: ColumnDefinition,
    column: LakeColumn,
    context: StatementContext,
    clock: SourceClock | None = None,
    *,
    timestamp_rank: TimestampRank = TimestampRank.UNKNOWN,
    table: str,
    statement: str,
) -> object | None:
    """The value the rows ``table`` had got in the column ``definition`` added (``column``: the
    Iceberg column it is), None for NULL. ``timestamp_rank``: whether it is the table's first
    TIMESTAMP column; matters only with explicit defaults OFF."""
    try:
        literal = _default_literal(definition, column, context, timestamp_rank)
        if literal is None:
            return None
        value = _convert(literal, definition, column, context, clock)
    except (_RefusedError, TemporalError) as error:
        raise UnsupportedDefaultError(
            f"{table}: binlake cannot give the rows the table had the value ALTER TABLE gave "
            f"them in column {definition.name}: {error}",
            table=table,
            statement=statement,
            column=definition.name,
        ) from None
    return None if value is ZERO else value


class _Implicit:
    """NOT NULL without a DEFAULT: MariaDB's implicit default for the type."""


def _default_literal(
    definition: ColumnDefinition,
    column: LakeColumn,
    context: StatementContext,
    timestamp_rank: TimestampRank,
) -> Literal | _Implicit | None:
    if definition.generated:
        raise _RefusedError("a generated column: the source computed each row's value")
    if definition.auto_increment:
        raise _RefusedError("AUTO_INCREMENT numbered the rows in an order the binlog does not show")
    if definition.default is not None:
        literal = parse_default(
            definition.default, sql_mode=context.sql_mode, charset=context.charset
        )
        if isinstance(literal, Expression):
            raise _RefusedError(
                f"DEFAULT {literal.text} is an expression binlake does not evaluate"
            )
        return None if isinstance(literal, NullLiteral) else literal
    if is_timestamp(column) and not context.explicit_timestamps and not definition.explicit_null:
        if timestamp_rank is TimestampRank.UNKNOWN:
            raise _RefusedError(
                "with explicit_defaults_for_timestamp=OFF the table's first TIMESTAMP column "
                "gets DEFAULT CURRENT_TIMESTAMP, and binlake cannot tell whether this one is"
            )
        first = timestamp_rank is TimestampRank.FIRST
        return CurrentTime("DATETIME") if first else None  # else the zero date
    return None if definition.nullable else _Implicit()


def _convert(
    literal: Literal | _Implicit,
    definition: ColumnDefinition,
    column: LakeColumn,
    context: StatementContext,
    clock: SourceClock | None,
) -> object:
    kind = column.source_type.split("(")[0].split()[0]
    if isinstance(literal, _Implicit):
        return _implicit(kind, definition, column)
    if kind in _INTEGER_BITS:
        return _integer(literal, column)
    if kind in ("YEAR", "BIT"):
        return _year(literal) if kind == "YEAR" else _bit(literal, column)
    if kind == "DECIMAL":
        return _decimal(literal, column)
    if kind in ("FLOAT", "DOUBLE"):
        return _float(literal, definition, single=kind == "FLOAT")
    if kind in ("DATE", "DATETIME", "TIMESTAMP", "TIME"):
        return _temporal(kind, literal, _fsp(column), context, clock)
    if column.type is IcebergType.STRING:
        return _text(kind, literal, definition, context)
    if column.type is IcebergType.BINARY and kind != "GEOMETRY":
        return _binary(kind, literal, definition)
    raise _RefusedError(f"binlake does not convert defaults for {column.source_type} columns")


def _implicit(kind: str, definition: ColumnDefinition, column: LakeColumn) -> object:
    if kind in ("DATE", "DATETIME", "TIMESTAMP"):
        return ZERO
    if column.type is IcebergType.STRING and kind == "DECIMAL":
        return format(Decimal(0).scaleb(-_decimal_scale(column.source_type)), "f")
    if column.type is IcebergType.DECIMAL:
        return Decimal(0).scaleb(-column.scale)
    if column.type in (IcebergType.INT, IcebergType.LONG):
        return 0
    if column.type in (IcebergType.FLOAT, IcebergType.DOUBLE):
        return 0.0
    if kind == "ENUM":
        return _labels(definition)[0]
    if column.type is IcebergType.STRING:
        return _ZERO_TEXT.get(kind, "")
    if kind == "BINARY":
        return b"\0" * _length(definition)
    if kind == "GEOMETRY":
        raise _RefusedError("a NOT NULL GEOMETRY column without a value")
    return b""


# ---- numbers ----------------------------------------------------------------------------------


def _number(literal: Literal) -> Decimal | float:
    """The number a literal is in a numeric column: exact (Decimal) or approximate (float)."""
    text: str | None = None
    if isinstance(literal, NumberLiteral):
        text = literal.text
    elif isinstance(literal, BytesLiteral):
        return Decimal(literal.number)
    elif isinstance(literal, StringLiteral) and _NUMBER.match(literal.text):
        text = literal.text.strip()
    if text is None:
        raise _RefusedError(f"{_shown(literal)} is not a number binlake converts")
    if "e" in text.lower():
        return float(text)
    return Decimal(text)


def _whole(value: Decimal | float) -> int:
    if isinstance(value, float):
        if not value.is_integer():
            raise _RefusedError(f"{value!r} is not a whole number (MariaDB rounds doubles itself)")
        return int(value)
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _integer(literal: Literal, column: LakeColumn) -> int | Decimal:
    words = column.source_type.split()
    bits, unsigned = _INTEGER_BITS[words[0]], "UNSIGNED" in words
    value = _whole(_number(literal))
    low, high = (0, 2**bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if not low <= value <= high:
        raise _RefusedError(f"{value} is outside the range of {column.source_type}")
    return Decimal(value) if column.type is IcebergType.DECIMAL else value


def _year(literal: Literal) -> int:
    value = _whole(_number(literal))
    if isinstance(literal, StringLiteral) and 0 <= value <= 99:
        return value + (2000 if value < 70 else 1900)
    if 1 <= value <= 99:
        return value + (2000 if value < 70 else 1900)
    if value == 0 or 1901 <= value <= 2155:
        return value
    raise _RefusedError(f"{value} is not a YEAR")


def _bit(literal: Literal, column: LakeColumn) -> int | Decimal:
    if isinstance(literal, StringLiteral):
        raise _RefusedError("a string into a BIT column")
    value = _whole(_number(literal))
    bits = int(column.source_type[4:-1])
    if not 0 <= value < 2**bits:
        raise _RefusedError(f"{value} does not fit {column.source_type}")
    return Decimal(value) if column.type is IcebergType.DECIMAL else value


def _decimal_scale(source_type: str) -> int:
    return int(source_type.split(",")[1].split(")")[0])


def _decimal(literal: Literal, column: LakeColumn) -> Decimal | str:
    number = _number(literal)
    exact = Decimal(repr(number)) if isinstance(number, float) else number
    precision = int(column.source_type.split("(")[1].split(",")[0])
    scale = _decimal_scale(column.source_type)
    try:
        value = exact.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
    except InvalidOperation:
        raise _RefusedError(f"{exact} does not fit {column.source_type}") from None
    if value.is_zero():
        value = abs(value)  # MariaDB has no negative zero
    if len(value.as_tuple().digits) - scale > precision - scale and not value.is_zero():
        raise _RefusedError(f"{exact} does not fit {column.source_type}")
    if value < 0 and "UNSIGNED" in column.source_type:
        raise _RefusedError(f"{exact} is negative for {column.source_type}")
    return format(value, "f") if column.type is IcebergType.STRING else value


def _float(literal: Literal, definition: ColumnDefinition, *, single: bool) -> float:
    number = _number(literal)
    kind = TypeText.parse(definition.type_text)
    if len(kind.arguments) == 2:  # FLOAT(m,d) / DOUBLE(m,d) round to d digits
        digits = kind.number(1, 0)
        exact = number if isinstance(number, Decimal) else Decimal(repr(number))
        exponent = exact.as_tuple().exponent
        if digits is None or not isinstance(exponent, int) or -exponent > digits:
            raise _RefusedError(f"{number} has more digits than {definition.type_text} keeps")
    value = float(number)
    if single:
        (value,) = struct.unpack("<f", struct.pack("<f", value))
    return value


# ---- dates and times --------------------------------------------------------------------------


def _fsp(column: LakeColumn) -> int:
    source_type = column.source_type
    return int(source_type.split("(")[1][:-1]) if "(" in source_type else 0


def _temporal(
    kind: str, literal: Literal, fsp: int, context: StatementContext, clock: SourceClock | None
) -> object:
    time = context.time
    if isinstance(literal, CurrentTime):
        if kind == "TIMESTAMP":
            return time.utc(fsp)
        local = time.local(fsp, clock)
        if kind == "TIME":
            return (local - local.replace(hour=0, minute=0, second=0, microsecond=0)) // (
                dt.timedelta(microseconds=1)
            )
        return local.date() if kind == "DATE" else local
    text = _temporal_text(literal)
    mode = context.sql_mode
    if kind == "DATE":
        return parse_date(text)
    if kind == "TIME":
        return parse_time(text, fsp, mode)
    value = parse_datetime(text, fsp, mode)
    if kind == "DATETIME" or value is ZERO:
        return value
    assert isinstance(value, dt.datetime)
    instant = time.to_utc(value, clock)
    if not _TIMESTAMP_RANGE[0] <= instant <= _TIMESTAMP_RANGE[1]:
        raise _RefusedError(f"{text!r} is outside TIMESTAMP's range")
    return instant


def _temporal_text(literal: Literal) -> str:
    if isinstance(literal, TemporalLiteral | StringLiteral):
        return literal.text
    if isinstance(literal, NumberLiteral) and not literal.approximate:
        return literal.text
    raise _RefusedError(f"{_shown(literal)} is not a date or time binlake converts")


# ---- text and bytes ---------------------------------------------------------------------------


def _text(
    kind: str, literal: Literal, definition: ColumnDefinition, context: StatementContext
) -> str | None:
    text = _characters(literal, definition)
    if text == "" and context.sql_mode & MODE_EMPTY_STRING_IS_NULL:
        return None
    if kind in ("ENUM", "SET"):
        if not isinstance(literal, StringLiteral):
            raise _RefusedError(f"{_shown(literal)} into an {kind} (a number is an index)")
        return _enum(text, definition) if kind == "ENUM" else _set(text, definition)
    if kind in _FORMATS:
        try:
            return _FORMATS[kind](parse_hinted(kind.lower(), text))
        except ValueError:
            raise _RefusedError(f"{text!r} is not an {kind}") from None
    return text.rstrip(" ") if kind == "CHAR" else text


def _characters(literal: Literal, definition: ColumnDefinition) -> str:
    """The characters a literal gives a text column."""
    if isinstance(literal, StringLiteral) and literal.charset != "binary":
        return literal.text
    if isinstance(literal, NumberLiteral) and not literal.approximate:
        value = Decimal(literal.text)
        return format(abs(value) if value.is_zero() else value, "f")
    data = literal.data if isinstance(literal, StringLiteral | BytesLiteral) else None
    if data is None:
        raise _RefusedError(f"{_shown(literal)} into a text column")
    charset = definition.charset
    if data.isascii() and charset not in _WIDE:
        return data.decode("ascii")
    if charset is None or charset == "binary":
        raise _RefusedError("bytes into a text column whose charset the statement does not name")
    try:
        return decode_text(data, charset)
    except BinlakeError as error:
        raise _RefusedError(str(error)) from None


def _binary(kind: str, literal: Literal, definition: ColumnDefinition) -> bytes:
    if isinstance(literal, StringLiteral | BytesLiteral):
        data = literal.data
    elif isinstance(literal, NumberLiteral) and not literal.approximate:
        data = _characters(literal, definition).encode("ascii")
    else:
        raise _RefusedError(f"{_shown(literal)} into a binary column")
    if kind == "BINARY":
        length = _length(definition)
        if len(data) > length:
            raise _RefusedError(f"{len(data)} bytes into {definition.type_text}")
        return data.ljust(length, b"\0")
    return data


def _length(definition: ColumnDefinition) -> int:
    length = declared_length(definition)
    if length is None:
        raise _RefusedError(f"the length of {definition.type_text}")
    return length


def _labels(definition: ColumnDefinition) -> list[str]:
    labels = [
        string_value(token.value)
        for token in tokenize(definition.type_text)
        if token.kind == "string"
    ]
    if not labels or any(label is None for label in labels):
        raise _RefusedError(f"the labels of {definition.type_text}")
    return [label.rstrip(" ") for label in labels if label is not None]


def _label(value: str, labels: list[str], type_text: str) -> str:
    """The label ``value`` names: exactly, else the one equal without case."""
    wanted = value.rstrip(" ")
    if wanted in labels:
        return wanted
    folded = [label for label in labels if label.casefold() == wanted.casefold()]
    if len(folded) != 1:
        raise _RefusedError(f"{value!r} is not one label of {type_text}")
    return folded[0]


def _enum(value: str, definition: ColumnDefinition) -> str:
    return _label(value, _labels(definition), definition.type_text)


def _set(value: str, definition: ColumnDefinition) -> str:
    labels = _labels(definition)
    members = {_label(part, labels, definition.type_text) for part in value.split(",") if part}
    return ",".join(label for label in labels if label in members)


def _shown(literal: Literal) -> str:
    if isinstance(literal, NumberLiteral | TemporalLiteral | StringLiteral):
        return repr(literal.text)
    if isinstance(literal, BytesLiteral):
        return f"0x{literal.data.hex()}"
    return type(literal).__name__
