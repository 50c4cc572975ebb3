"""Positions: where a transaction is in the source's binlog and in the relay log, and their order.

A transaction's identity is its ``SourcePosition``: the source binlog file and the end offset of
its last event. It is the same whichever relay file holds the transaction and however often it
is fetched, so each table's applied position (``binlake.position`` in its newest binlake
snapshot) says exactly which transactions the table has: T is new for a table at A iff T's
position is after A (``is_new_for``). A ``RelayPosition`` is a place in binlake's own relay log
(file and byte offset), used between the receiver and the applier.

Both kinds have one order, by (file sequence number, offset): ``mariadb-bin.1000000`` comes after
``mariadb-bin.999999`` whatever the width of the number, which the names' text order gets wrong.
Every comparison of positions in binlake goes through ``key``, ``before``, ``at_or_before``,
``is_new_for`` or ``earliest`` here. Both print as ``file:offset`` and parse back from it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Self, TypeVar

__all__ = [
    "SEQUENCE_NAME",
    "PositionKey",
    "RelayPosition",
    "SourcePosition",
    "at_or_before",
    "before",
    "earliest",
    "is_new_for",
    "parse_position",
    "sequence_number",
]

#: ``<basename>.<sequence number>``: the names servers and binlake give log files.
SEQUENCE_NAME = re.compile(r"^(?P<base>.+)\.(?P<seq>\d{6,})$")
#: (file sequence number, offset, file name): the name only orders names with one number.
PositionKey = tuple[int, int, str]


@functools.lru_cache(maxsize=1024)
def sequence_number(name: str) -> int | None:
    """The sequence number of a log file name (``mariadb-bin.000042`` -> 42); None without.
    Cached: every position comparison asks it, of a few file names."""
    match = SEQUENCE_NAME.match(name)
    return int(match["seq"]) if match else None


@dataclass(frozen=True, slots=True)
class _Position:
    file: str
    offset: int

    def __str__(self) -> str:
        return f"{self.file}:{self.offset}"

    def key(self) -> PositionKey:
        """The order of positions: by the file's sequence number, then the offset (a name
        without a number counts as 0; the name itself only separates equal numbers)."""
        return (sequence_number(self.file) or 0, self.offset, self.file)

    @classmethod
    def parse(cls, text: str) -> Self:
        """``mariadb-bin.000003:4567`` -> a position; ValueError if ``text`` is not one."""
        file, sep, offset = text.rpartition(":")
        if not sep or not file or not (offset.isascii() and offset.isdigit()):
            raise ValueError(f"{text!r} is not a position (file:offset)")
        return cls(file, int(offset))


@dataclass(frozen=True, slots=True)
class SourcePosition(_Position):
    """A place in the source's binlog: the file name and the offset of the next event."""


@dataclass(frozen=True, slots=True)
class RelayPosition(_Position):
    """A place in the relay log: a relay file name and a byte offset in it."""


P = TypeVar("P", SourcePosition, RelayPosition)


def parse_position(text: str) -> SourcePosition:
    """``mariadb-bin.000003:4567`` -> ``SourcePosition``; ValueError if it is not one."""
    return SourcePosition.parse(text)


def before(a: P | None, b: P | None) -> bool:
    """``a < b``; None is the very beginning (before every position)."""
    if b is None:
        return False
    return a is None or a.key() < b.key()


def at_or_before(a: P | None, b: P | None) -> bool:
    """``a <= b``; None is the very beginning."""
    return not before(b, a)


def is_new_for(position: SourcePosition, applied: SourcePosition | None) -> bool:
    """Whether a transaction ending at ``position`` is not yet in a table at ``applied``."""
    return before(applied, position)


def earliest(positions: Iterable[P]) -> P:
    """The first of ``positions`` in position order (ValueError when there is none)."""
    return min(positions, key=_key)


def latest(positions: Iterable[P]) -> P:
    """The last of ``positions`` in position order (ValueError when there is none)."""
    return max(positions, key=_key)


def _key(position: SourcePosition | RelayPosition) -> PositionKey:
    return position.key()
