"""A column's DEFAULT as written in a DDL statement -> the literal it is (pure).

MariaDB evaluates a DEFAULT for the rows a table already has when a column is added; binlake
must give those rows the same value (``binlake.ddl.defaults`` converts the literal to the
column's type). This module only reads what was written, as MariaDB's lexer does:

* ``NULL``; ``TRUE`` / ``FALSE`` (1 / 0); numbers with an optional sign, exact (``12``,
  ``-1.50``) or approximate (``1e3``);
* strings in single quotes (double quotes unless ``ANSI_QUOTES``), adjacent strings joined,
  backslash escapes unless ``NO_BACKSLASH_ESCAPES``, with a ``_charset`` introducer (the bytes of
  the string are read in that charset) or ``N`` (national: utf8mb3);
* hexadecimal and bit values (``X'0A'``, ``0x0A``, ``B'101'``, ``0b101``): bytes that are
  numbers in a numeric column;
* ``DATE '...'``, ``TIME '...'``, ``TIMESTAMP '...'``;
* the statement's time: ``CURRENT_TIMESTAMP[(n)]``, ``NOW([n])``, ``LOCALTIME[STAMP][(n)]``,
  ``CURDATE()``, ``CURRENT_DATE``, ``CURTIME([n])``, ``CURRENT_TIME[(n)]``;
* any of these in parentheses.

Anything else (``(1 + 2)``, ``uuid()``, ``concat(...)``) is an ``Expression``: binlake does not
evaluate expressions, and the caller refuses it when existing rows would get its value.
"""

from __future__ import annotations

from dataclasses import dataclass

from binlake.binlog.encodings.charsets import decode_text, encode_text
from binlake.binlog.errors import BinlakeError
from binlake.ddl.tokens import Token, tokenize

__all__ = [
    "MODE_ANSI_QUOTES",
    "MODE_NO_BACKSLASH_ESCAPES",
    "BytesLiteral",
    "CurrentTime",
    "Expression",
    "Literal",
    "NullLiteral",
    "NumberLiteral",
    "StringLiteral",
    "TemporalLiteral",
    "parse_default",
    "string_value",
]

MODE_ANSI_QUOTES = 1 << 2
MODE_NO_BACKSLASH_ESCAPES = 1 << 20
#: Charset names MariaDB 10.11 reads as others (``old_mode=UTF8_IS_UTF8MB3``, the default).
_ALIASES = {"utf8": "utf8mb3"}
_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
#: Functions giving the statement's time: name -> what they give.
_CLOCKS = {
    "CURRENT_TIMESTAMP": "DATETIME",
    "NOW": "DATETIME",
    "LOCALTIME": "DATETIME",
    "LOCALTIMESTAMP": "DATETIME",
    "CURDATE": "DATE",
    "CURRENT_DATE": "DATE",
    "CURTIME": "TIME",
    "CURRENT_TIME": "TIME",
}
#: Clock functions that may be written without parentheses.
_BARE_CLOCKS = frozenset(
    {"CURRENT_TIMESTAMP", "LOCALTIME", "LOCALTIMESTAMP", "CURRENT_DATE", "CURRENT_TIME"}
)


@dataclass(frozen=True, slots=True)
class NullLiteral:
    pass


@dataclass(frozen=True, slots=True)
class NumberLiteral:
    #: The number as written, sign included: ``-1.50``, ``1e3``, ``12``.
    text: str

    @property
    def approximate(self) -> bool:
        return "e" in self.text.lower()


@dataclass(frozen=True, slots=True)
class StringLiteral:
    #: The characters, escapes resolved.
    text: str
    #: The bytes written (the characters in the statement's charset, or the introducer's).
    data: bytes
    #: The charset the bytes are in.
    charset: str


@dataclass(frozen=True, slots=True)
class BytesLiteral:
    """``X'..'``, ``0x..``, ``B'..'``, ``0b..``: bytes in a string column, a number in a
    numeric one."""

    data: bytes

    @property
    def number(self) -> int:
        return int.from_bytes(self.data, "big")


@dataclass(frozen=True, slots=True)
class TemporalLiteral:
    #: ``DATE``, ``TIME`` or ``TIMESTAMP``.
    kind: str
    text: str


@dataclass(frozen=True, slots=True)
class CurrentTime:
    """The statement's time: ``kind`` ``DATETIME``, ``DATE`` or ``TIME``; ``fsp`` the digits
    asked for (None: as many as the column has)."""

    kind: str
    fsp: int | None = None


@dataclass(frozen=True, slots=True)
class Expression:
    """Anything binlake does not evaluate."""

    text: str


Literal = (
    NullLiteral
    | NumberLiteral
    | StringLiteral
    | BytesLiteral
    | TemporalLiteral
    | CurrentTime
    | Expression
)


def parse_default(text: str, *, sql_mode: int = 0, charset: str = "utf8mb4") -> Literal:
    """The literal a DEFAULT expression (``ColumnDefinition.default``) is; ``sql_mode`` and
    ``charset`` (of the statement's text) as the source session had them."""
    tokens = tokenize(text)
    while _parenthesized(tokens):
        tokens = tokens[1:-1]
    literal = _literal(tokens, sql_mode, charset)
    return Expression(text.strip()) if literal is None else literal


def _parenthesized(tokens: list[Token]) -> bool:
    if len(tokens) < 2 or tokens[0].value != "(" or tokens[-1].value != ")":
        return False
    depth = 0
    for token in tokens[:-1]:
        if token.kind == "punct":
            depth += {"(": 1, ")": -1}.get(token.value, 0)
            if depth == 0:
                return False  # (a) + (b)
    return True


def _literal(tokens: list[Token], sql_mode: int, charset: str) -> Literal | None:
    if not tokens or any(t.kind == "bad" for t in tokens):
        return None
    head = tokens[0]
    if len(tokens) == 1 and head.is_word("NULL"):
        return NullLiteral()
    if len(tokens) == 1 and head.is_word("TRUE", "FALSE"):
        return NumberLiteral("1" if head.is_word("TRUE") else "0")
    if head.kind == "punct" and head.value in "+-" and len(tokens) == 2:
        return _signed(head.value, tokens[1])
    if head.kind == "number" and len(tokens) == 1:
        return _number(head.value)
    if head.is_word("DATE", "TIME", "TIMESTAMP") and len(tokens) == 2:
        value = _strings(tokens[1:], sql_mode, charset)
        if isinstance(value, StringLiteral):
            return TemporalLiteral(head.value.upper(), value.text)
        return None
    if head.kind == "word" and head.value.upper() in _CLOCKS:
        return _clock(tokens)
    return _strings(tokens, sql_mode, charset)


def _signed(sign: str, token: Token) -> Literal | None:
    if token.kind != "number":
        return None
    number = _number(token.value)
    if isinstance(number, BytesLiteral):
        return NumberLiteral(f"{sign}{number.number}")
    return NumberLiteral(f"{sign}{number.text}".lstrip("+"))


def _number(text: str) -> NumberLiteral | BytesLiteral:
    lower = text.lower()
    if lower.startswith("0x"):
        digits = lower[2:]
        return BytesLiteral(bytes.fromhex(digits.rjust(len(digits) + len(digits) % 2, "0")))
    if lower.startswith("0b"):
        return _bits(lower[2:])
    return NumberLiteral(text)


def _bits(digits: str) -> BytesLiteral:
    value = int(digits or "0", 2)
    return BytesLiteral(value.to_bytes(max(1, (len(digits) + 7) // 8), "big"))


def _clock(tokens: list[Token]) -> CurrentTime | None:
    name = tokens[0].value.upper()
    rest = [t.value for t in tokens[1:]]
    if not rest and name in _BARE_CLOCKS:
        return CurrentTime(_CLOCKS[name])
    if rest == ["(", ")"]:
        return CurrentTime(_CLOCKS[name])
    if len(rest) == 3 and rest[0] == "(" and rest[2] == ")" and rest[1].isdigit():
        return CurrentTime(_CLOCKS[name], int(rest[1]))
    return None


def _strings(tokens: list[Token], sql_mode: int, charset: str) -> Literal | None:
    """One string, or adjacent strings joined (the first one's introducer applies)."""
    if not tokens:
        return None
    introducer = None
    if tokens[0].kind == "word" and tokens[0].value.startswith("_") and len(tokens) > 1:
        introducer, tokens = tokens[0].value[1:].lower(), tokens[1:]
    if any(t.kind != "string" for t in tokens):
        return None
    if len(tokens) == 1 and tokens[0].value[:1] in "xXbB" and tokens[0].value[1:2] == "'":
        return _prefixed_bytes(tokens[0].value) if introducer is None else None
    parts = [string_value(t.value, sql_mode) for t in tokens]
    if any(part is None for part in parts):
        return None
    text = "".join(part for part in parts if part is not None)
    first = tokens[0].value
    if first[:1] in "nN":
        introducer = "utf8mb3"  # a national string: its characters, in utf8mb3
        charset = introducer
    elif first.startswith("_"):
        introducer = first[1 : first.index("'")].lower()
    try:
        data = encode_text(text, charset)  # the bytes as sent
        if introducer is None or _ALIASES.get(introducer, introducer) == charset:
            return StringLiteral(text, data, charset)
        introducer = _ALIASES.get(introducer, introducer)  # the bytes, read in that charset
        return StringLiteral(_decode_in(data, introducer), data, introducer)
    except (UnicodeError, BinlakeError):
        return None  # not text binlake can read: an expression to refuse


def _decode_in(data: bytes, charset: str) -> str:
    return data.decode("latin-1") if charset == "binary" else decode_text(data, charset)


def _prefixed_bytes(value: str) -> BytesLiteral | None:
    digits = value[2:-1]
    if value[0] in "xX":
        if len(digits) % 2:
            return None  # MariaDB refuses an odd number of hex digits
        return BytesLiteral(bytes.fromhex(digits))
    return _bits(digits)


def string_value(token: str, sql_mode: int = 0) -> str | None:
    """The characters of a string token (prefix and quotes as written); None for a
    double-quoted name under ``ANSI_QUOTES``."""
    start = token.index("'") if token[:1] not in "'\"" else 0
    quote = token[start]
    if quote == '"' and sql_mode & MODE_ANSI_QUOTES:
        return None
    body = token[start + 1 : -1]
    backslash = not sql_mode & MODE_NO_BACKSLASH_ESCAPES
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\" and backslash and i + 1 < len(body):
            following = body[i + 1]
            kept = "\\" + following if following in "%_" else None  # LIKE's \% and \_ stay
            out.append(kept or _ESCAPES.get(following, following))
            i += 2
        elif char == quote and body[i + 1 : i + 2] == quote:
            out.append(quote)
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)
