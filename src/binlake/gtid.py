"""GTID states as the receiver tracks them: where a replication stream stands, per flavor.

MariaDB (``MariaGtidState``): per replication domain, the last GTID ``domain-server-seq``; this is
what ``@slave_connect_state`` takes and what ``@@gtid_binlog_pos`` shows. MySQL (``MysqlGtidSet``):
the executed set, ``uuid:1-5:7,...``, as COM_BINLOG_DUMP_GTID and ``@@gtid_executed`` use it.

Both are immutable; updates return a new value. ``contains(other)`` answers "has a server whose
state is ``self`` seen everything up to ``other``?", the test of a source's GTID history against
the receiver's position.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

_MARIA_GTID = re.compile(r"^\s*(\d+)-(\d+)-(\d+)\s*$")
_U32 = (1 << 32) - 1
_U64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True, order=True)
class MariaGtid:
    domain: int
    server_id: int
    seq: int

    def __str__(self) -> str:
        return f"{self.domain}-{self.server_id}-{self.seq}"

    @classmethod
    def parse(cls, text: str) -> MariaGtid:
        match = _MARIA_GTID.match(text)
        if match is None:
            raise ValueError(f"{text!r} is not a MariaDB GTID (domain-server-seq)")
        domain, server, seq = (int(part) for part in match.groups())
        if domain > _U32 or server > _U32 or seq > _U64:
            raise ValueError(f"{text!r} has a field out of range")
        return cls(domain, server, seq)


@dataclass(frozen=True, slots=True)
class MariaGtidState:
    """Per domain, the last GTID seen (the most recent one, whatever its server id)."""

    last: Mapping[int, MariaGtid] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> MariaGtidState:
        """``"0-1-5,1-2-9"`` (``@@gtid_binlog_pos``); empty text is the empty state."""
        state: dict[int, MariaGtid] = {}
        for part in text.replace("\n", ",").split(","):
            if part.strip():
                gtid = MariaGtid.parse(part)
                state[gtid.domain] = gtid
        return cls(state)

    def with_gtid(self, gtid: MariaGtid) -> MariaGtidState:
        return MariaGtidState({**self.last, gtid.domain: gtid})

    def with_gtids(self, gtids: Iterable[MariaGtid]) -> MariaGtidState:
        """``with_gtid`` for each of ``gtids`` in turn."""
        return MariaGtidState({**self.last, **{gtid.domain: gtid for gtid in gtids}})

    def with_list(self, gtids: Iterable[MariaGtid]) -> MariaGtidState:
        """Apply a GTID_LIST (within a domain the list ends with the most recent GTID).

        A list never moves a domain back: a dump started by GTID sends the GTID_LIST of the top
        of the file again, which is behind what the stream already delivered.
        """
        listed: dict[int, MariaGtid] = {}
        for gtid in gtids:
            listed[gtid.domain] = gtid
        state = dict(self.last)
        for domain, gtid in listed.items():
            mine = state.get(domain)
            if mine is None or mine.seq < gtid.seq:
                state[domain] = gtid
        return MariaGtidState(state)

    def contains(self, other: MariaGtidState) -> bool:
        """Whether every domain of ``other`` is in ``self`` at the same or a later seq_no."""
        for domain, gtid in other.last.items():
            mine = self.last.get(domain)
            if mine is None or mine.seq < gtid.seq:
                return False
        return True

    def gtids(self) -> list[MariaGtid]:
        return [self.last[d] for d in sorted(self.last)]

    def text(self) -> str:
        return ",".join(str(g) for g in self.gtids())

    def __str__(self) -> str:
        return self.text() or "(empty)"

    def __bool__(self) -> bool:
        return bool(self.last)


@dataclass(frozen=True, slots=True)
class MysqlGtidSet:
    """Per server UUID, the executed GNOs as sorted disjoint half-open intervals [start, end)."""

    intervals: Mapping[uuid.UUID, tuple[tuple[int, int], ...]] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> MysqlGtidSet:
        """``"uuid:1-5:7,uuid2:1-3"`` (``@@gtid_executed``; white space and newlines ignored);
        empty text is the empty set. A UUID given twice is merged. Tagged GTIDs (MySQL 8.3+
        ``uuid:tag:1-5``) are refused: their encoding is a different format. ValueError names
        what is wrong."""
        result = MysqlGtidSet()
        for part in filter(None, "".join(text.split()).split(",")):
            sid_text, *spans = part.split(":")
            try:
                sid = uuid.UUID(sid_text)
            except ValueError:
                raise ValueError(f"not a GTID set: {sid_text!r} is not a UUID") from None
            if not spans:
                raise ValueError(f"not a GTID set: {part!r} has no interval")
            for span in spans:
                result = result.with_interval(sid, *_interval(span, part))
        return result

    @classmethod
    def from_sets(cls, sets: Iterable[tuple[uuid.UUID, Iterable[tuple[int, int]]]]) -> MysqlGtidSet:
        """From PREVIOUS_GTIDS intervals (half-open)."""
        result = cls()
        for sid, spans in sets:
            for start, end in spans:
                result = result.with_interval(sid, start, end)
        return result

    def with_interval(self, sid: uuid.UUID, start: int, end: int) -> MysqlGtidSet:
        spans = sorted([*self.intervals.get(sid, ()), (start, end)])
        merged: list[tuple[int, int]] = []
        for low, high in spans:
            if merged and low <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], high))
            else:
                merged.append((low, high))
        return MysqlGtidSet({**self.intervals, sid: tuple(merged)})

    def with_gtid(self, text: str) -> MysqlGtidSet:
        """Add ``uuid:gno``."""
        sid_text, _, gno = text.rpartition(":")
        number = int(gno)
        return self.with_interval(uuid.UUID(sid_text), number, number + 1)

    def union(self, other: MysqlGtidSet) -> MysqlGtidSet:
        result = self
        for sid, spans in other.intervals.items():
            for start, end in spans:
                result = result.with_interval(sid, start, end)
        return result

    def contains(self, other: MysqlGtidSet) -> bool:
        for sid, spans in other.intervals.items():
            mine = self.intervals.get(sid, ())
            for start, end in spans:
                if not any(low <= start and end <= high for low, high in mine):
                    return False
        return True

    def sets(self) -> tuple[tuple[uuid.UUID, tuple[tuple[int, int], ...]], ...]:
        return tuple((sid, self.intervals[sid]) for sid in sorted(self.intervals, key=str))

    def text(self) -> str:
        parts = []
        for sid, spans in self.sets():
            ranges = ":".join(f"{a}" if b == a + 1 else f"{a}-{b - 1}" for a, b in spans)
            parts.append(f"{sid}:{ranges}")
        return ",".join(parts)

    def __str__(self) -> str:
        return self.text() or "(empty)"

    def __bool__(self) -> bool:
        return bool(self.intervals)


_INTERVAL = re.compile(r"^(\d+)(?:-(\d+))?$")


def _interval(span: str, part: str) -> tuple[int, int]:
    """``a-b`` or ``a`` of a MySQL GTID set as the half-open interval ``[a, b + 1)``."""
    match = _INTERVAL.match(span)
    if match is None:
        raise ValueError(
            f"not a GTID interval: {span!r} in {part!r} (tagged GTIDs are not supported)"
        )
    start = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else start
    if start < 1 or last < start or last >= (1 << 63) - 1:
        raise ValueError(f"impossible GTID interval {span!r} in {part!r}")
    return start, last + 1


GtidState = MariaGtidState | MysqlGtidSet


def parse_server_gtid_state(text: str | None, *, mariadb: bool) -> GtidState:
    """A server's ``gtid_binlog_pos`` (MariaDB) or ``gtid_executed`` (MySQL); ValueError if the
    text is not one."""
    if mariadb:
        return MariaGtidState.parse(text or "")
    return MysqlGtidSet.parse(text or "")
