"""Batch planning (pure): which relay-log groups change which tables, and where batches end.

``classify`` turns one complete relay-log group into a ``Unit``:

* ``ROWS``: a transaction (or a row statement of a non-transactional engine) with rows events
  for replicated tables: each rows event with the TABLE_MAP in force for it (the one logged in
  the same transaction, never the source's current schema); of a group the relay reader set
  aside (past ``[applier] max_bytes``, holding no rows event), the rows are ``AsideRows``: read
  again from the relay file each time they are gone through;
* ``DDL``: a standalone statement ``parse_ddl`` recognises that names a replicated table (or
  drops a database);
* ``NONE``: nothing for the lake (other tables, a rollback, GRANT, a control event...).

Statement-format changes are refused (``StatementFormatError``): a DML QUERY inside a
transaction or standing alone, when it may touch a replicated table; so are rows events without
their TABLE_MAP and XA transactions on replicated tables (``ApplyError``).

``BatchBuilder`` groups units into batches bounded by transactions, bytes and seconds; a DDL
unit ends the batch before it and is a batch alone, and so does a table whose TABLE_MAP
changes inside a batch (the rows before and after it have different shapes).

A transaction T is applied to table X iff T touches X and T's source position is after X's
applied position (``binlake.position.is_new_for``): positions are the source's (file, end
offset), stable across refetches; each table's applied position is the one its newest binlake
snapshot carries.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum

from binlake.binlog.codec import BinlogEvent
from binlake.binlog.events import QueryEvent
from binlake.binlog.names import TableName
from binlake.binlog.rows import RowsEvent
from binlake.binlog.source_facts import ColumnHints, SourceFactsEvent
from binlake.binlog.tablemap import TableMap
from binlake.binlog.transactions import GroupKind
from binlake.ddl.parse import parse_ddl
from binlake.ddl.statements import DdlStatement, DropDatabase
from binlake.errors import ApplyError, LogCorruptionError, StatementFormatError
from binlake.lake.schema.evolution import shape
from binlake.position import SourcePosition
from binlake.relay.reader import RelayGroup

Selected = Callable[[TableName], bool]

#: QUERY keywords that change rows: in a ROW-format binlog they never carry data.
DML_KEYWORDS = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD"})
_NAME = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"
_TARGET = re.compile(
    rf"^\s*(?:INSERT|REPLACE)\s+(?:(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE)\s+)*"
    rf"(?:INTO\s+)?(?P<a>{_NAME}(?:\s*\.\s*{_NAME})?)"
    rf"|^\s*UPDATE\s+(?:(?:LOW_PRIORITY|IGNORE)\s+)*(?P<b>{_NAME}(?:\s*\.\s*{_NAME})?)\s+SET\b"
    rf"|^\s*DELETE\s+(?:(?:LOW_PRIORITY|QUICK|IGNORE)\s+)*FROM\s+"
    rf"(?P<c>{_NAME}(?:\s*\.\s*{_NAME})?)\s*(?:WHERE\b|ORDER\b|LIMIT\b|RETURNING\b|;|$)",
    re.IGNORECASE,
)


_PART = re.compile(r"`((?:[^`]|``)+)`|([A-Za-z0-9_$]+)")


class UnitKind(Enum):
    ROWS = "rows"
    DDL = "ddl"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class TableRows:
    """One rows event of a replicated table with the TABLE_MAP in force for it."""

    table_map: TableMap
    event: RowsEvent
    #: Offset of the event in its relay file (for messages).
    offset: int
    #: The UUID/INET column hints the receiver recorded with the TABLE_MAP (column name ->
    #: hint); None when the relay log recorded none (binlog/source_facts.py).
    recorded_hints: Mapping[str, str] | None = None


#: Reads a set-aside group's events again from the relay file (``relay.reader.group_events``).
GroupEvents = Callable[[RelayGroup], Iterator[BinlogEvent]]


@dataclass(frozen=True, slots=True)
class AsideRows:
    """The rows events of a group the relay reader set aside (``RelayGroup.aside_context``):
    read again from the relay file, images included, each time they are iterated, and held
    only one at a time."""

    group: RelayGroup
    selected: Selected
    events_of: GroupEvents

    def __iter__(self) -> Iterator[TableRows]:
        return _table_rows(self.group, self.selected, self.events_of(self.group))


@dataclass(frozen=True, slots=True)
class Unit:
    """One relay-log group as the applier sees it."""

    group: RelayGroup
    kind: UnitKind
    rows: tuple[TableRows, ...] | AsideRows = ()
    ddl: DdlStatement | None = None
    #: Replicated tables it touches.
    tables: frozenset[TableName] = frozenset()
    #: Per replicated table it changes, in the order they first appear, the TABLE_MAP of its
    #: last rows event.
    table_maps: tuple[TableMap, ...] = ()

    @property
    def position(self) -> SourcePosition:
        position = self.group.position
        if position is None:
            raise LogCorruptionError(
                "a transaction in the relay log has no source position (no ROTATE or context "
                "preamble before it)",
                file=self.group.relay_file,
                offset=self.group.group.start_offset,
            )
        return position

    @property
    def is_transaction(self) -> bool:
        """Counts for the relay-log checkpoint (MDEV-181): every group but a control event."""
        return self.group.group.is_transaction


# ---- classifying groups -------------------------------------------------------------------------


def classify(group: RelayGroup, selected: Selected, events_of: GroupEvents | None = None) -> Unit:
    """The ``Unit`` of one relay-log group; ``selected`` says whether a table is
    replicated; ``events_of`` reads a set-aside group's events again (once here, for its
    tables, then each time its rows are iterated)."""
    kind = group.group.kind
    if kind in (GroupKind.CONTROL, GroupKind.ROLLBACK):
        return Unit(group, UnitKind.NONE)
    if kind is GroupKind.STATEMENT and _is_query_statement(group):
        return _statement(group, selected)
    rows: tuple[TableRows, ...] | AsideRows
    if group.aside_context is None:
        rows = tuple(_table_rows(group, selected, group.group.events))
    elif events_of is None:
        raise ApplyError(
            "a set-aside group needs its relay log to be read again",
            file=group.relay_file,
            offset=group.group.start_offset,
            hint="a caller of classify passed no events_of (a bug: report it)",
        )
    else:
        rows = AsideRows(group, selected, events_of)
    last_maps = {r.table_map.name: r.table_map for r in rows}
    tables = frozenset(last_maps)
    if kind is GroupKind.XA_PREPARE and tables:
        names = ", ".join(str(t) for t in sorted(tables))
        raise ApplyError(
            f"an XA transaction changes {names}; binlake does not apply XA "
            "transactions (their commit is a separate event)",
            file=group.relay_file,
            offset=group.group.start_offset,
            table=str(min(tables)),
        )
    kind_of = UnitKind.ROWS if tables else UnitKind.NONE
    return Unit(group, kind_of, rows, tables=tables, table_maps=tuple(last_maps.values()))


def _is_query_statement(group: RelayGroup) -> bool:
    return any(isinstance(e.payload, QueryEvent) for e in group.group.events)


def _table_rows(
    group: RelayGroup, selected: Selected, events: Iterable[BinlogEvent]
) -> Iterator[TableRows]:
    """The rows events of replicated tables in ``events`` (``group``'s), each with the
    TABLE_MAP in force for it."""
    maps: dict[int, TableMap] = {}
    recorded: dict[tuple[str, str], Mapping[str, str]] = {}
    for event in events:
        payload = event.payload
        if isinstance(payload, TableMap):
            maps[payload.table_id] = payload
        elif isinstance(payload, SourceFactsEvent) and isinstance(payload.fact, ColumnHints):
            recorded[(payload.fact.database, payload.fact.table)] = payload.fact.hints
        elif isinstance(payload, RowsEvent):
            table_map = maps.get(payload.table_id)
            if table_map is None:
                raise ApplyError(
                    f"{payload.type_name} for table id {payload.table_id} has no TABLE_MAP "
                    "before it in its transaction",
                    file=group.relay_file,
                    offset=event.offset,
                    hint="the relay log is not a row-based binlog binlake can apply; check "
                    "binlog_format=ROW on the source",
                )
            if selected(table_map.name):
                hints = recorded.get((table_map.schema, table_map.table))
                yield TableRows(table_map, payload, event.offset, hints)
        elif isinstance(payload, QueryEvent) and payload.keyword in DML_KEYWORDS:
            _refuse_statement(payload, group, event.offset, selected)


def _statement(group: RelayGroup, selected: Selected) -> Unit:
    query = next(e for e in group.group.events if isinstance(e.payload, QueryEvent))
    payload = query.payload
    assert isinstance(payload, QueryEvent)
    if payload.keyword in DML_KEYWORDS:
        _refuse_statement(payload, group, query.offset, selected)
        return Unit(group, UnitKind.NONE)
    ddl = parse_ddl(payload.database, payload.text, replicated=selected)
    if ddl is None:
        return Unit(group, UnitKind.NONE)
    tables = frozenset(t for t in ddl.tables if selected(t))
    if not tables and not isinstance(ddl, DropDatabase):
        return Unit(group, UnitKind.NONE)
    return Unit(group, UnitKind.DDL, ddl=ddl, tables=tables)


def statement_target(database: str, query: str) -> TableName | None:
    """The table a single-table INSERT/REPLACE/UPDATE/DELETE writes; None when it cannot be
    told (multi-table statements, unusual syntax)."""
    match = _TARGET.match(query)
    if match is None:
        return None
    name = match.group("a") or match.group("b") or match.group("c")
    parts = [q.replace("``", "`") if q else p for q, p in _PART.findall(name)]
    return TableName(parts[0], parts[1]) if len(parts) == 2 else TableName(database, parts[0])


def _refuse_statement(
    payload: QueryEvent, group: RelayGroup, offset: int, selected: Selected
) -> None:
    target = statement_target(payload.database, payload.text)
    if target is not None and not selected(target):
        return
    shown = " ".join(payload.text.split())[:120]
    raise StatementFormatError(
        f"binlog_format must be ROW: the relay log holds a statement-format change "
        f"({shown!r}) at source position {group.position}",
        file=group.relay_file,
        offset=offset,
        table=None if target is None else str(target),
    )


# ---- batches ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bounds:
    max_transactions: int = 100_000
    max_bytes: int = 64 * 1024 * 1024
    max_seconds: float = 2.0
    #: The longest a batch stays open when the batch before it took long to commit (``pace``).
    max_lag_s: float = 10.0


@dataclass
class Batch:
    """Whole units, in relay-log order, applied together (a DDL unit is a batch alone)."""

    units: list[Unit]
    started: float
    bytes: int = 0
    #: Per table, the shape (TABLE_MAP without its table id) its rows have in this batch.
    shapes: dict[TableName, TableMap] = field(default_factory=dict)

    @property
    def source_time(self) -> int:
        """When its newest transaction was committed on the source (seconds since the epoch,
        the last event's header)."""
        return self.last.group.events[-1].header.timestamp

    @property
    def is_ddl(self) -> bool:
        return len(self.units) == 1 and self.units[0].kind is UnitKind.DDL

    @property
    def last(self) -> RelayGroup:
        return self.units[-1].group

    @property
    def position(self) -> SourcePosition:
        """The source position of the batch's end (the last unit with one)."""
        for unit in reversed(self.units):
            if unit.group.position is not None:
                return unit.group.position
        return self.units[-1].position  # raises: no unit has a position

    def transactions_per_file(self) -> Counter[str]:
        """Transactions per relay file, for the checkpoint counts."""
        return Counter(u.group.relay_file for u in self.units if u.is_transaction)

    @property
    def transactions(self) -> int:
        return sum(1 for u in self.units if u.is_transaction)


class BatchBuilder:
    """Groups units into batches (see the module docstring); ``add`` and ``flush`` return the
    batches that are complete, in order."""

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self._open: Batch | None = None
        #: How long the last batch took to commit (``pace``).
        self._pace_s = 0.0

    @property
    def open_batch(self) -> Batch | None:
        return self._open

    def add(self, unit: Unit, now: float) -> list[Batch]:
        done: list[Batch] = []
        if unit.kind is UnitKind.DDL:
            done += self.flush()
            done.append(Batch([unit], now, unit.group.size))
            return done
        shapes = {m.name: shape(m) for m in unit.table_maps}
        batch = self._open
        if batch is not None and any(
            (kept := batch.shapes.get(table, s)) is not s and kept != s
            for table, s in shapes.items()
        ):
            done += self.flush()
            batch = None
        if batch is None:
            batch = self._open = Batch([], now)
        batch.units.append(unit)
        batch.bytes += unit.group.size
        batch.shapes.update(shapes)
        if len(batch.units) >= self.bounds.max_transactions or batch.bytes >= self.bounds.max_bytes:
            done += self.flush()
        return done

    def pace(self, seconds: float) -> None:
        """The batch before took ``seconds`` to commit: the next stays open at least as long
        (``open_s``), so that a batch over many tables, each a commit of its own, gathers
        more transactions per commit instead of falling behind (a commit's cost is mostly
        fixed: docs/benchmarks.md, "Wide and busy")."""
        self._pace_s = seconds

    @property
    def open_s(self) -> float:
        """How long a batch stays open: ``max_seconds``, or the last batch's commit time up to
        ``max_lag_s`` when that is longer."""
        return max(self.bounds.max_seconds, min(self._pace_s, self.bounds.max_lag_s))

    def due(self, now: float, wall: float | None = None) -> bool:
        """The open batch has been open for ``open_s``; but while it holds a backlog (its
        newest transaction was committed on the source more than ``max_lag_s`` before the
        wall clock ``wall``: binlake is catching up), only once it is ``overdue``: every
        change in it is late already, and fewer, larger batches catch up sooner."""
        batch = self._open
        if batch is None or now - batch.started < self.open_s:
            return False
        behind = wall is not None and wall - batch.source_time > self.bounds.max_lag_s
        return not behind or self.overdue(now)

    def overdue(self, now: float) -> bool:
        """The open batch has been open for ``max_lag_s`` (or ``max_seconds``, if longer)."""
        batch = self._open
        limit = max(self.bounds.max_seconds, self.bounds.max_lag_s)
        return batch is not None and now - batch.started >= limit

    def flush(self) -> list[Batch]:
        batch, self._open = self._open, None
        return [batch] if batch is not None and batch.units else []
