"""Grouping events into transactions: the only units whose boundaries a position may point at.

A group is one of:
- a transaction: MariaDB GTID (which itself opens it), or MySQL GTID? then BEGIN / XA START;
  then events; closed by XID, COMMIT, ROLLBACK or XA_PREPARE;
- a standalone statement: a standalone MariaDB GTID (DDL) or a MariaDB GTID completing an XA
  transaction, or a MySQL GTID, then one QUERY (DDL, XA COMMIT ...); also INTVAR/RAND/USER_VAR
  prefixes followed by their QUERY;
- a control event outside any transaction (FORMAT_DESCRIPTION, ROTATE, GTID_LIST, ...).

``TransactionGrouper`` is fed events one at a time; after the last one, ``open_events`` holds
what an incomplete tail left (a crash mid-transaction). ``boundary`` is the end offset of the last
complete group: where a valid prefix of the log may end. ``ends_only``: a group's ``events`` are
only its first and its last (``open_events`` likewise): for a caller that needs a group's
boundaries and GTID but not its events (the relay log writer, which stores them verbatim), so
that a transaction of any size is not held in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum

from binlake.binlog.codec import BinlogEvent
from binlake.binlog.constants import EventType
from binlake.binlog.errors import OrphanEventError
from binlake.binlog.events import (
    FL_COMPLETED_XA,
    FL_STANDALONE,
    MariaGtidEvent,
    MysqlGtidEvent,
    QueryEvent,
)
from binlake.binlog.rows import RowsEvent, RowsFrame


class GroupKind(Enum):
    TRANSACTION = "transaction"
    ROLLBACK = "rollback"
    XA_PREPARE = "xa_prepare"
    STATEMENT = "statement"
    CONTROL = "control"


@dataclass(frozen=True, slots=True)
class EventGroup:
    kind: GroupKind
    events: tuple[BinlogEvent, ...]
    gtid: str | None

    @property
    def start_offset(self) -> int:
        return self.events[0].offset

    @property
    def end_offset(self) -> int:
        return self.events[-1].end_offset

    @property
    def is_transaction(self) -> bool:
        return self.kind is not GroupKind.CONTROL

    @property
    def xid(self) -> int | None:
        last = self.events[-1].payload
        return getattr(last, "xid", None) if self.kind is GroupKind.TRANSACTION else None


_PREFIX_TYPES = frozenset({EventType.INTVAR, EventType.RAND, EventType.USER_VAR})
#: Events that start a statement group when no GTID or BEGIN came first; IGNORABLE: binlake's
#: source facts (binlog/source_facts.py), written before the QUERY or after the TABLE_MAP they
#: belong to.
_IN_GROUP_TYPES = frozenset(
    {EventType.ANNOTATE_ROWS, EventType.ROWS_QUERY, EventType.TABLE_MAP, EventType.IGNORABLE}
)


def _opens(payload: object) -> bool:
    """BEGIN or XA START/BEGIN: a QUERY after which events belong to a transaction."""
    if not isinstance(payload, QueryEvent):
        return False
    head = payload.query[:16].lstrip().upper()
    return head.startswith((b"BEGIN", b"XA START", b"XA BEGIN"))


def _gtid_of(event: BinlogEvent) -> str | None:
    payload = event.payload
    if isinstance(payload, MariaGtidEvent):
        return payload.gtid(event.header.server_id)
    if isinstance(payload, MysqlGtidEvent):
        return payload.gtid
    return None


def _closes(event: BinlogEvent) -> GroupKind | None:
    payload = event.payload
    code = event.header.type_code
    if code == EventType.XID:
        return GroupKind.TRANSACTION
    if code == EventType.XA_PREPARE:
        return GroupKind.XA_PREPARE
    if isinstance(payload, QueryEvent):
        word = payload.keyword
        if word == "COMMIT":
            return GroupKind.TRANSACTION
        if word == "ROLLBACK":
            return GroupKind.ROLLBACK
    return None


class _State(Enum):
    IDLE = "idle"
    AFTER_GTID = "after_gtid"  # MySQL: BEGIN/XA START or a lone statement comes next
    IN_TRANSACTION = "in_transaction"  # closed by XID, COMMIT, ROLLBACK or XA_PREPARE
    STATEMENT = "statement"  # closed by the next QUERY or a rows event ending the statement


def _state_after_gtid(payload: MariaGtidEvent | MysqlGtidEvent) -> _State:
    """MariaDB's GTID says itself what follows; MySQL's leaves it to the next event."""
    if isinstance(payload, MysqlGtidEvent):
        return _State.AFTER_GTID
    lone = FL_STANDALONE | FL_COMPLETED_XA
    return _State.STATEMENT if payload.flags2 & lone else _State.IN_TRANSACTION


class TransactionGrouper:
    """A state machine turning a sequence of events into whole groups."""

    def __init__(self, *, ends_only: bool = False) -> None:
        self.open_events: list[BinlogEvent] = []
        self.ends_only = ends_only
        self._gtid: str | None = None
        self._state = _State.IDLE
        #: End offset of the last complete group, None before the first one.
        self.boundary: int | None = None

    @property
    def in_group(self) -> bool:
        return bool(self.open_events)

    @property
    def keeps_ends_inside_transaction(self) -> bool:
        """Inside a transaction (which only its closing event ends) and keeping a group's
        first and last events only: a rows event fed now neither ends the group nor stays in
        it (the closing event replaces it), so a caller may skip feeding it."""
        return self.ends_only and self._state is _State.IN_TRANSACTION

    def feed(self, event: BinlogEvent) -> EventGroup | None:
        """Add an event; return the group it completes, if any."""
        if self.ends_only and len(self.open_events) == 2:
            self.open_events[1] = event
        else:
            self.open_events.append(event)
        payload = event.payload
        match self._state:
            case _State.IDLE:
                return self._start(event)
            case _State.IN_TRANSACTION:
                closing = _closes(event)
                return self._finish(closing) if closing is not None else None
            case _State.AFTER_GTID if _opens(payload):
                self._state = _State.IN_TRANSACTION
                return None
        # AFTER_GTID or STATEMENT: a statement, possibly after INTVAR/RAND/USER_VAR prefixes.
        return self._finish_if_statement_ends(payload)

    def _start(self, event: BinlogEvent) -> EventGroup | None:
        payload = event.payload
        if isinstance(payload, MariaGtidEvent | MysqlGtidEvent):
            self._gtid = _gtid_of(event)
            self._state = _state_after_gtid(payload)
            return None
        if _opens(payload):
            self._state = _State.IN_TRANSACTION
            return None
        if _closes(event) is not None:
            self.open_events = []
            raise OrphanEventError(
                f"{event.type_name} closes a transaction but none is open",
                offset=event.offset,
                event_type=event.type_name,
            )
        code = event.header.type_code
        if (
            code in _PREFIX_TYPES
            or code in _IN_GROUP_TYPES
            or isinstance(payload, RowsEvent | RowsFrame)
        ):
            self._state = _State.STATEMENT
            return self._finish_if_statement_ends(payload)
        if isinstance(payload, QueryEvent):
            return self._finish(GroupKind.STATEMENT)
        return self._finish(GroupKind.CONTROL)

    def _finish_if_statement_ends(self, payload: object) -> EventGroup | None:
        if isinstance(payload, QueryEvent):
            return self._finish(GroupKind.STATEMENT)
        if isinstance(payload, RowsEvent | RowsFrame) and payload.is_statement_end:
            return self._finish(GroupKind.STATEMENT)
        return None

    def _finish(self, kind: GroupKind) -> EventGroup:
        group = EventGroup(kind, tuple(self.open_events), self._gtid)
        self.open_events = []
        self._gtid = None
        self._state = _State.IDLE
        self.boundary = group.end_offset
        return group


def iter_groups(events: Iterable[BinlogEvent], grouper: TransactionGrouper) -> Iterator[EventGroup]:
    """Whole groups from ``events``; an incomplete tail stays in ``grouper.open_events``."""
    for event in events:
        group = grouper.feed(event)
        if group is not None:
            yield group
