"""Comparing two streams of row hashes: counts, an order-independent checksum, differing keys.

Both sides are digested the same way: the row count and the sum of the rows' 128-bit hashes
modulo 2^128 (order-independent; unlike XOR, a row present twice does not cancel out). To list
differences the source side is kept as a map primary key -> row hash (nothing else of a row is
kept in memory); each lake row is then looked up and removed: absent means extra in the lake, a
different hash means different values, what is left at the end is missing in the lake. A lake
key seen twice is reported as extra the second time.

Tables without a primary key are compared as multisets of whole rows (hash -> count): the same
rows, each the same number of times. A change-log table (the applier's form of such tables) is
replayed first: each ``insert`` / ``update_after`` row adds its row, each ``delete`` /
``update_before`` row takes one copy away. Differences are then listed as row hashes with the
count on each side.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field

_MODULUS = 1 << 128


@dataclass
class Digest:
    rows: int = 0
    checksum: int = 0

    def add(self, row_hash: bytes) -> None:
        self.rows += 1
        self.checksum = (self.checksum + int.from_bytes(row_hash, "big")) % _MODULUS

    def remove(self, row_hash: bytes) -> None:
        """Take a row out again (a change log's delete)."""
        self.rows -= 1
        self.checksum = (self.checksum - int.from_bytes(row_hash, "big")) % _MODULUS

    @property
    def checksum_hex(self) -> str:
        return f"{self.checksum:032x}"


@dataclass
class Differences:
    """Up to ``limit`` entries of each kind, and the full counts."""

    missing_in_lake: list[str] = field(default_factory=list)
    extra_in_lake: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    missing_count: int = 0
    extra_count: int = 0
    changed_count: int = 0

    @property
    def total(self) -> int:
        return self.missing_count + self.extra_count + self.changed_count


class KeyedComparison:
    """Rows identified by their primary key (``key`` is ``canonical.key_text``)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.source = Digest()
        self.lake = Digest()
        self.differences = Differences()
        self._pending: dict[str, bytes] = {}

    def add_source(self, key: str, row_hash: bytes) -> None:
        self.source.add(row_hash)
        self._pending[key] = row_hash

    def add_lake(self, key: str, row_hash: bytes) -> None:
        self.lake.add(row_hash)
        expected = self._pending.pop(key, None)
        d = self.differences
        if expected is None:
            d.extra_count += 1
            if len(d.extra_in_lake) < self.limit:
                d.extra_in_lake.append(key)
        elif expected != row_hash:
            d.changed_count += 1
            if len(d.changed) < self.limit:
                d.changed.append(key)

    def finish(self) -> Differences:
        """Call once, after every lake row: what is left is missing in the lake."""
        d = self.differences
        d.missing_count = len(self._pending)
        d.missing_in_lake = heapq.nsmallest(self.limit, self._pending)
        d.extra_in_lake.sort()
        d.changed.sort()
        self._pending = {}
        return d


class MultisetComparison:
    """Rows without a key: the same rows, each as many times, on both sides."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.source = Digest()
        self.lake = Digest()
        self._balance: Counter[bytes] = Counter()

    def add_source(self, row_hash: bytes) -> None:
        self.source.add(row_hash)
        self._balance[row_hash] += 1

    def add_lake(self, row_hash: bytes) -> None:
        self.lake.add(row_hash)
        self._balance[row_hash] -= 1

    def remove_lake(self, row_hash: bytes) -> None:
        """A change log's delete (or update's before image): one copy of the row goes away."""
        self.lake.remove(row_hash)
        self._balance[row_hash] += 1

    def finish(self) -> Differences:
        d = Differences()
        for row_hash, balance in sorted(self._balance.items()):
            if balance > 0:
                d.missing_count += balance
                if len(d.missing_in_lake) < self.limit:
                    d.missing_in_lake.append(f"row {row_hash.hex()} x{balance}")
            elif balance < 0:
                d.extra_count += -balance
                if len(d.extra_in_lake) < self.limit:
                    d.extra_in_lake.append(f"row {row_hash.hex()} x{-balance}")
        self._balance = Counter()
        return d
