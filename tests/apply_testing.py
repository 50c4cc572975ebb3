"""Helpers for applier unit tests: TABLE_MAPs, row transactions built as MariaDB logs them, and
the relay-log groups the applier's planner takes in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.events import FL_DDL, FL_STANDALONE, MariaGtidEvent, XidEvent
from binlake.binlog.rows import RowChange, make_rows_event
from binlake.binlog.stream import EventStream
from binlake.binlog.tablemap import TableMap
from binlake.binlog.transactions import EventGroup, GroupKind, TransactionGrouper
from binlake.position import SourcePosition
from binlake.relay.reader import RelayGroup
from binlog_builder import LogBuilder, query

UTF8MB4 = 45
#: A source column's type as a TABLE_MAP gives it: (type code, metadata, unsigned, charset).
Spec = tuple[int, int, bool, int | None]


def orders_map(
    *columns: tuple[str, Spec], key: Sequence[str] = ("id",), not_null: Sequence[str] = ()
) -> TableMap:
    """``shop.orders`` with ``columns``; key columns and ``not_null`` ones are NOT NULL."""
    names = tuple(name for name, _ in columns)
    return TableMap(
        table_id=7,
        flags=1,
        schema="shop",
        table="orders",
        column_types=tuple(spec[0] for _, spec in columns),
        column_metadata=tuple(spec[1] for _, spec in columns),
        nullable=tuple(name not in key and name not in not_null for name in names),
        unsigned=tuple(spec[2] for _, spec in columns),
        column_charsets=tuple(spec[3] for _, spec in columns),
        column_names=names,
        primary_key=tuple(names.index(k) for k in key) or None,
    )


def shop_map(
    table: str = "orders",
    *,
    key: bool = True,
    table_id: int = 70,
    extra: Sequence[str] = (),
    database: str = "shop",
) -> TableMap:
    """``shop.<table> (id INT NOT NULL, note VARCHAR(20), <extra> INT...)``; ``id`` the key."""
    names = ("id", "note", *extra)
    n = len(names)
    return TableMap(
        table_id=table_id,
        flags=1,
        schema=database,
        table=table,
        column_types=(T.LONG, T.VARCHAR, *([T.LONG] * len(extra))),
        column_metadata=(0, 80, *([0] * len(extra))),
        nullable=(False, True, *([True] * len(extra))),
        unsigned=(False,) * n,
        column_charsets=(None, UTF8MB4, *([None] * len(extra))),
        column_names=names,
        primary_key=(0,) if key else None,
    )


class RelayLog:
    """A source binlog built event by event; ``groups()`` gives its groups as the applier's
    reader would, each with its source position (the binlog offset after it)."""

    def __init__(self, relay_file: str = "relay-bin.000001") -> None:
        self.log = LogBuilder().header()
        self.relay_file = relay_file

    def rows(self, *changes: tuple[TableMap, str, Sequence[RowChange]]) -> None:
        """One transaction: for each (table map, kind, rows) a TABLE_MAP and a rows event."""
        self.log.seq_no += 1
        self.log.add(MariaGtidEvent(self.log.seq_no, 0, 0, None, None, b""))
        for table_map, kind, rows in changes:
            self.log.add(table_map)
            self.log.add(make_rows_event(kind, table_map, rows))  # type: ignore[arg-type]
        self.log.add(XidEvent(self.log.seq_no))

    def statement(self, text: str, database: str = "shop") -> None:
        """A standalone statement (DDL) as MariaDB logs it."""
        self.log.ddl(text) if database == "shop" else self._ddl(text, database)

    def _ddl(self, text: str, database: str) -> None:
        self.log.seq_no += 1
        flags = FL_STANDALONE | FL_DDL
        self.log.add(MariaGtidEvent(self.log.seq_no, 0, flags, None, None, b""))
        self.log.add(query(text, database))

    def dml_in_transaction(self, text: str) -> None:
        """A statement-format transaction: GTID, a DML QUERY, XID."""
        self.log.seq_no += 1
        self.log.add(MariaGtidEvent(self.log.seq_no, 0, 0, None, None, b""))
        self.log.add(query(text))
        self.log.add(XidEvent(self.log.seq_no))

    def groups(self) -> list[RelayGroup]:
        grouper = TransactionGrouper()
        out: list[RelayGroup] = []
        last = 0
        for event in EventStream(self.log.bytes()):
            group = grouper.feed(event)
            if group is not None:
                out.append(relay_group(group, self.relay_file, last))
                last = group.end_offset
        return out

    def transactions(self) -> list[RelayGroup]:
        return [g for g in self.groups() if g.group.kind is not GroupKind.CONTROL]


def relay_group(group: EventGroup, relay_file: str, start: int) -> RelayGroup:
    end = group.end_offset
    return RelayGroup(
        group, relay_file, end, SourcePosition("mariadb-bin.000001", end), "0-1-1", end - start
    )


def fake_transaction(relay_file: str, offset: int, kind: GroupKind = GroupKind.TRANSACTION) -> Any:
    """A relay group standing for one transaction (no events), for checkpoint accounting."""
    group = EventGroup(kind, (), None)
    position = SourcePosition("mariadb-bin.000001", offset)
    return RelayGroup(group, relay_file, offset, position, "", 100)
