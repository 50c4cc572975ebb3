"""The tokenizer of ``binlake.ddl.parse``: SQL text as MariaDB reads it, in tokens.

What it understands: case-insensitive keywords; backtick identifiers (doubled backticks inside)
and, for ``ANSI_QUOTES``, double-quoted identifiers where a name is expected; strings in single
or double quotes with backslash or doubled-quote escapes and ``_charset`` / ``N`` / ``X`` /
``B`` prefixes (a string token's value is its source text, prefix and quotes included);
comments ``/* */``, ``-- `` and ``#``; MariaDB's executable comments ``/*!NNNNN ...*/`` and
``/*M!NNNNNN ...*/``, whose contents are read as part of the statement (the binlog holds what
the source server executed; a version newer than the source's would not have run, but binlake
reads binlogs of current servers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Token", "Tokenizer", "line_comment", "tokenize"]


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "word", "ident" (quoted), "string", "number", "punct", "bad" (unterminated)
    value: str
    start: int
    end: int

    def is_word(self, *words: str) -> bool:
        return self.kind == "word" and self.value.upper() in words


_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[A-Za-z0-9_$\u0080-\uffff]+")
_NUMBER = re.compile(
    r"(?:0x[0-9A-Fa-f]+|0b[01]+|\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)"
)
_EXECUTABLE = re.compile(r"/\*M?!\d*")
#: String prefixes: ``_utf8mb4'x'``, ``N'x'``, ``X'0a'``, ``B'01'``.
_INTRODUCER = re.compile(r"(?:_[A-Za-z0-9]+|[NnXxBb])(?=')")


class Tokenizer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.in_executable = False
        self.tokens: list[Token] = []

    def run(self) -> list[Token]:
        while self._skip_blanks():
            self.tokens.append(self._token())
        return self.tokens

    def _skip_blanks(self) -> bool:
        """Skip spaces and comments; False at the end of the text."""
        text = self.text
        while self.pos < len(text):
            match = _SPACE.match(text, self.pos)
            if match:
                self.pos = match.end()
            elif text.startswith("*/", self.pos) and self.in_executable:
                self.in_executable = False
                self.pos += 2
            elif executable := _EXECUTABLE.match(text, self.pos):
                self.in_executable = True
                self.pos = executable.end()
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                self.pos = len(text) if end < 0 else end + 2
            elif text.startswith("#", self.pos) or line_comment(text, self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            else:
                return True
        return False

    def _token(self) -> Token:
        text, start = self.text, self.pos
        char = text[start]
        introducer = _INTRODUCER.match(text, start)
        if introducer:
            return self._quoted(introducer.end(), "'", "string", start)
        if char in "'\"":
            return self._quoted(start, char, "string", start)
        if char == "`":
            return self._quoted(start, "`", "ident", start)
        after_name = bool(self.tokens) and self.tokens[-1].kind in ("word", "ident")
        number = None if char == "." and after_name else _NUMBER.match(text, start)
        word = _WORD.match(text, start)
        if number and (word is None or number.end() >= word.end()):
            return self._emit("number", number.group(), start, number.end())
        if word:
            return self._emit("word", word.group(), start, word.end())
        return self._emit("punct", char, start, start + 1)

    def _quoted(self, quote_at: int, quote: str, kind: str, start: int) -> Token:
        text = self.text
        pos, out = quote_at + 1, []
        while pos < len(text):
            char = text[pos]
            if char == "\\" and quote != "`" and pos + 1 < len(text):
                out.append(text[pos : pos + 2])
                pos += 2
            elif char == quote and text.startswith(quote * 2, pos):
                out.append(quote)
                pos += 2
            elif char == quote:
                value = "".join(out) if kind == "ident" else text[start : pos + 1]
                return self._emit(kind, value, start, pos + 1)
            else:
                out.append(char)
                pos += 1
        return self._emit("bad", f"unterminated {quote} quote at offset {quote_at}", start, pos)

    def _emit(self, kind: str, value: str, start: int, end: int) -> Token:
        self.pos = end
        return Token(kind, value, start, end)


def line_comment(text: str, pos: int) -> bool:
    """``--`` starts a comment only when a space, control character or the end follows."""
    return text.startswith("--", pos) and (pos + 2 == len(text) or text[pos + 2] <= " ")


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text`` (a ``bad`` token for an unterminated quote)."""
    return Tokenizer(text).run()
