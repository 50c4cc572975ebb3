"""A table's chunks: key ranges of about ``chunk_rows`` rows each, planned in a few queries,
never a scan.

Chunks are ranges ``lower <= k < upper`` of the key's first column ``k`` (the first range open
below, the last open above: keys inserted outside the range seen at planning are still read).
Every row falls in exactly one range whatever the other key columns hold, because the ranges'
bounds come in the order the server's own comparisons give them:

* an integer ``k``: ``MIN`` and ``MAX`` (two index dives), then equal-width ranges. Sparse or
  skewed keys give uneven chunks, never wrong ones.
* a text or binary ``k`` (CHAR, VARCHAR, BINARY, VARBINARY): bounds sampled with index dives.
  The range the optimizer estimates to hold the most rows (``EXPLAIN`` with the index forced,
  the "rows" of a range scan) is split at an actual key near the middle of its values: a
  candidate interpolated between its bounds becomes a key by ``SELECT k ... WHERE k >=
  candidate AND lower < k < upper ORDER BY k LIMIT 1``, so the column's collation decides the
  order (candidates use only the characters the bounds use: one the keys do not use could sort
  anywhere); failing that, the key half way through the range (a walk of at most
  ``WALK_LIMIT`` index entries). Uniform keys (UUIDs, hashes) give even chunks.
* any other ``k`` (dates, decimals, ENUM: their comparison with a literal and their index order
  may differ), a ``k`` no index starts with, or a table without a key: one chunk.

A resumed copy plans again from its first uncommitted bound (``start``): only keys at or after
it are read, also when they make one range (``KeyRange(start, None)``: its chunk's SELECT keeps
the bound; the copier names the key column in every keyed table's plan).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from binlake.snapshot.chunk_task import KeyRange
from binlake.snapshot.columns import quote
from binlake.snapshot.positions import Flavor

Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
#: Most index entries a planning query may walk when no candidate splits a range.
WALK_LIMIT: Final = 100_000
INTEGER_KINDS: Final = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
SAMPLED_KINDS: Final = frozenset({"char", "varchar", "binary", "varbinary"})
#: A table this many rows per core or more is split into at least one chunk per core.
ROWS_PER_CORE: Final = 10_000
_DIGITS: Final = 8


@dataclass(frozen=True)
class KeyColumn:
    """The column chunks are split on, and the index that starts with it."""

    name: str
    #: information_schema DATA_TYPE, lower case.
    kind: str
    #: The index whose first column it is (None: no index starts with it).
    index: str | None

    @property
    def splittable(self) -> bool:
        return self.index is not None and (self.kind in INTEGER_KINDS or self.kind in SAMPLED_KINDS)


def first_index(query: Query, database: str, table: str, column: str) -> str | None:
    """The name of an index whose first column is ``column`` (PRIMARY first), or None."""
    rows = query(
        "SELECT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND "
        "TABLE_NAME = %s AND COLUMN_NAME = %s AND SEQ_IN_INDEX = 1 "
        "ORDER BY INDEX_NAME <> 'PRIMARY', INDEX_NAME",
        (database, table, column),
    )
    return str(rows[0][0]) if rows else None


@dataclass(frozen=True)
class RangePlanner:
    """Plans the chunks of one table (see the module docstring)."""

    query: Query
    database: str
    table: str
    key: KeyColumn
    flavor: Flavor = "mariadb"

    @property
    def source(self) -> str:
        return f"{quote(self.database)}.{quote(self.table)}"

    def plan(
        self, *, chunk_rows: int, estimate: int, cores: int, start: Any = None
    ) -> tuple[KeyRange, ...]:
        """Ranges of about ``chunk_rows`` rows each, at least ``cores`` of them for a table of
        ``ROWS_PER_CORE`` rows per core; keys from ``start`` on (None: all). ``estimate`` is
        InnoDB's TABLE_ROWS: a sampled statistic, stale after a bulk load; for an integer key
        the key range bounds the row count from above and is used when larger."""
        if not self.key.splittable:
            return (KeyRange(start, None),)
        k = quote(self.key.name)
        where, args = (f" WHERE {k} >= %s", [start]) if start is not None else ("", [])
        low, high = self.query(f"SELECT MIN({k}), MAX({k}) FROM {self.source}{where}", args)[0]
        if low is None:
            return (KeyRange(start, None),)
        rows = estimate
        integer = self.key.kind in INTEGER_KINDS
        if integer:
            ceiling = 4 * max(estimate, chunk_rows * cores)
            rows = max(rows, min(int(high) - int(low) + 1, ceiling))
        chunks = math.ceil(rows / max(chunk_rows, 1))
        if chunks < cores and rows >= cores * ROWS_PER_CORE:
            chunks = cores
        if chunks <= 1:
            return (KeyRange(start, None),)
        if integer:
            bounds = integer_bounds(int(low), int(high), chunks)
        else:
            bounds = self._sampled_bounds(low, high, chunks)
        return ranges_between(start, bounds)

    def estimated_rows(self, lower: Any, upper: Any) -> int:
        """The optimizer's row estimate for ``lower <= k < upper`` (index dives)."""
        k = quote(self.key.name)
        index = quote(self.key.index or "PRIMARY")
        sql = f"EXPLAIN SELECT {k} FROM {self.source} FORCE INDEX ({index}) WHERE {k} >= %s"
        args: list[Any] = [lower]
        if upper is not None:
            sql += f" AND {k} < %s"
            args.append(upper)
        rows = self.query(sql, args)
        column = 8 if self.flavor == "mariadb" else 9  # MySQL 8 has "partitions" before it
        return int(rows[0][column] or 0) if rows else 0

    def _sampled_bounds(self, low: Any, high: Any, chunks: int) -> list[Any]:
        """Bounds splitting, each time, the range estimated to hold the most rows at an actual
        key near the middle of its values, until there are ``chunks`` ranges or none splits.
        Every comparison of key values is the server's (its collation), never Python's."""
        # in key order: (lower, upper, estimated rows, can still be split)
        ranges: list[tuple[Any, Any, int, bool]] = [
            (low, None, self.estimated_rows(low, None), True)
        ]
        while len(ranges) < chunks:
            open_ones = [i for i, item in enumerate(ranges) if item[3]]
            if not open_ones:
                break
            at = max(open_ones, key=lambda i: ranges[i][2])
            lower, upper, rows, _ = ranges[at]
            middle = self._inside(lower, upper, high, rows)
            if middle is None:
                ranges[at] = (lower, upper, rows, False)
                continue
            ranges[at : at + 1] = [
                (lower, middle, self.estimated_rows(lower, middle), True),
                (middle, upper, self.estimated_rows(middle, upper), True),
            ]
        return [item[0] for item in ranges[1:]]

    def _inside(self, lower: Any, upper: Any, high: Any, rows: int) -> Any:
        """An actual key strictly inside ``(lower, upper)``, near the middle of their values;
        failing that, the key ``rows / 2`` keys after ``lower`` (at most ``WALK_LIMIT``)."""
        k = quote(self.key.name)
        top = upper if upper is not None else high
        inside = f" AND {k} < %s" if upper is not None else ""
        tail = [upper] if upper is not None else []
        for fraction in (0.5, 0.25, 0.75):
            candidate = between(lower, top, fraction)
            found = self.query(
                f"SELECT {k} FROM {self.source} WHERE {k} >= %s AND {k} > %s{inside} "
                f"ORDER BY {k} LIMIT 1",
                [candidate, lower, *tail],
            )
            if found:
                return found[0][0]
        offset = max(0, min(rows // 2, WALK_LIMIT))
        found = self.query(
            f"SELECT {k} FROM {self.source} WHERE {k} > %s{inside} ORDER BY {k} "
            f"LIMIT 1 OFFSET {offset}",
            [lower, *tail],
        )
        return found[0][0] if found else None


def integer_bounds(low: int, high: int, chunks: int) -> list[int]:
    """Bounds splitting ``[low, high]`` into ``chunks`` ranges of equal width."""
    width = max(1, math.ceil((high - low + 1) / chunks))
    return [low + width * i for i in range(1, chunks) if low + width * i <= high]


def ranges_between(start: Any, bounds: Sequence[Any]) -> tuple[KeyRange, ...]:
    """The ranges from ``start`` (None: open below) split at ``bounds``, the last open above."""
    edges: list[Any] = [start, *bounds, None]
    return tuple(KeyRange(edges[i], edges[i + 1]) for i in range(len(edges) - 1))


def between(low: Any, high: Any, fraction: float) -> Any:
    """A value ``fraction`` of the way from ``low`` to ``high`` (text or bytes)."""
    if isinstance(low, str) and isinstance(high, str):
        return _between_text(low, high, fraction)
    return _between_bytes(_as_bytes(low), _as_bytes(high), fraction)


def _as_bytes(value: Any) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _between_text(low: str, high: str, fraction: float) -> str:
    """The 8 characters after the common prefix read as digits over the characters the two
    tails use (hex keys give hex candidates)."""
    common = 0
    while common < min(len(low), len(high)) and low[common] == high[common]:
        common += 1
    alphabet = sorted(set(low[common : common + _DIGITS] + high[common : common + _DIGITS]))
    if len(alphabet) < 2:
        return low[: common + 1]
    digit_of = {ch: i for i, ch in enumerate(alphabet)}
    base = len(alphabet)

    def number(text: str) -> int:
        digits = [digit_of[ch] for ch in text[common : common + _DIGITS]]
        value = 0
        for digit in digits + [0] * (_DIGITS - len(digits)):
            value = value * base + digit
        return value

    value = number(low) + int((number(high) - number(low)) * fraction)
    chars = []
    for _ in range(_DIGITS):
        value, digit = divmod(value, base)
        chars.append(alphabet[digit])
    return low[:common] + "".join(reversed(chars))


def _between_bytes(low: bytes, high: bytes, fraction: float) -> bytes:
    """After the common prefix, 8 bytes read as a big-endian number."""
    common = 0
    while common < min(len(low), len(high)) and low[common] == high[common]:
        common += 1
    a = int.from_bytes(low[common : common + 8].ljust(8, b"\0"), "big")
    b = int.from_bytes(high[common : common + 8].ljust(8, b"\0"), "big")
    middle = a + int((b - a) * fraction)
    return low[:common] + middle.to_bytes(8, "big").rstrip(b"\0")
