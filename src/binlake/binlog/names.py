"""A source table's name: a (database, table) pair, joined only for display.

MySQL and MariaDB allow any character in a quoted database or table name (a dot, a space, a
backtick, any Unicode), so ``db.table`` text cannot be split back into its parts. binlake carries
``TableName`` pairs everywhere (keys, filters, plans, requests, hints) and writes text only for
people and for names given by people:

* ``str(name)`` / ``display``: ``db.table`` when both parts are plain identifiers (letters,
  digits, ``_``, ``$``, non-ASCII letters), else each unusual part in backticks, a backtick
  doubled: ``we.ird db``.``tâble x`` displays as ```we.ird db`.`tâble x```;
* ``TableName.parse``: that text back (``--tables``, ``[tables] key_columns`` keys), with
  ``UsageError``-ready messages; ``parse_table_list``: comma-separated names;
* ``TableGlob``: ``[tables] include`` / ``exclude`` patterns, the same text with an fnmatch glob
  on each side (``shop.*``, ```we.ird db`.t_*``, ``*.*`` for every table).

Names compare exactly as the source spells them (case included: MariaDB on Linux keeps
``Orders`` and ``orders`` apart).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase

__all__ = ["TableGlob", "TableName", "parse_table_list", "quote_part"]

_PLAIN = re.compile(r"[A-Za-z0-9_$\u0080-\uffff]+")
#: What a glob side may hold unquoted (a plain identifier with fnmatch's wildcards).
_PLAIN_GLOB = re.compile(r"[A-Za-z0-9_$*?\[\]!\u0080-\uffff]+")


def quote_part(part: str, plain: re.Pattern[str] = _PLAIN) -> str:
    """``part`` as it is when plain, else in backticks (a backtick doubled)."""
    if plain.fullmatch(part) and part.strip() == part:
        return part
    return "`" + part.replace("`", "``") + "`"


def _split(text: str) -> list[str]:
    """The dot-separated parts of ``text``, backtick quoting respected; ValueError when a quote
    is not closed, a quoted part has text beside it, or a part is empty."""
    parts: list[str] = []
    current: list[str] = []
    state = "start"  # start | plain | quoted | closed
    i = 0
    while i < len(text):
        char = text[i]
        if state == "quoted":
            if char == "`" and text[i + 1 : i + 2] == "`":
                current.append("`")
                i += 1
            elif char == "`":
                state = "closed"
            else:
                current.append(char)
        elif char == ".":
            parts.append("".join(current))
            current, state = [], "start"
        elif char == "`" and state == "start":
            state = "quoted"
        elif state in ("closed",) or char == "`":
            raise ValueError(f"text beside a backtick-quoted part: {text!r}")
        else:
            current.append(char)
            state = "plain"
        i += 1
    if state == "quoted":
        raise ValueError(f"a backtick is not closed: {text!r}")
    parts.append("".join(current))
    if any(part == "" for part in parts):
        raise ValueError(f"an empty name part: {text!r}")
    return parts


@dataclass(frozen=True, slots=True, order=True)
class TableName:
    """A source table: its database and its name, exactly as the source spells them."""

    database: str
    table: str

    @property
    def display(self) -> str:
        return f"{quote_part(self.database)}.{quote_part(self.table)}"

    def __str__(self) -> str:
        return self.display

    @classmethod
    def parse(cls, text: str) -> TableName:
        """``db.table`` or ```we.ird db`.`tâble x``` (what ``display`` writes); ValueError
        when it is not exactly two parts."""
        parts = _split(text.strip())
        if len(parts) != 2:
            raise ValueError(
                f"{text!r} is not db.table (quote a name holding a dot in backticks: "
                "`we.ird db`.`t`)"
            )
        return cls(parts[0], parts[1])


def parse_table_list(text: str) -> list[TableName]:
    """Comma-separated table names (a comma inside backticks belongs to the name)."""
    names: list[str] = []
    current: list[str] = []
    quoted = False
    for char in text:
        if char == "`":
            quoted = not quoted  # a doubled backtick toggles twice: still inside
        if char == "," and not quoted:
            names.append("".join(current))
            current = []
        else:
            current.append(char)
    names.append("".join(current))
    return [TableName.parse(name) for name in names if name.strip()]


@dataclass(frozen=True, slots=True)
class TableGlob:
    """An include/exclude pattern: an fnmatch glob for the database and one for the table."""

    database: str
    table: str

    @classmethod
    def parse(cls, text: str) -> TableGlob:
        parts = _split(text.strip())
        if len(parts) != 2:
            raise ValueError(
                f"{text!r} is not a db.table glob (quote a part holding a dot in backticks: "
                "`we.ird db`.*)"
            )
        return cls(parts[0], parts[1])

    def matches(self, name: TableName) -> bool:
        return fnmatchcase(name.database, self.database) and fnmatchcase(name.table, self.table)

    def __str__(self) -> str:
        return f"{quote_part(self.database, _PLAIN_GLOB)}.{quote_part(self.table, _PLAIN_GLOB)}"
