"""TransactionGrouper: the boundaries a position may point at."""

from __future__ import annotations

import uuid

import pytest

from binlake.binlog.codec import BinlogEvent, decode_event, encode_event
from binlake.binlog.errors import OrphanEventError
from binlake.binlog.events import (
    FL_COMPLETED_XA,
    FL_PREPARED_XA,
    IntvarEvent,
    MariaGtidEvent,
    MysqlGtidEvent,
    XaPrepareEvent,
    XidEvent,
)
from binlake.binlog.stream import EventStream
from binlake.binlog.transactions import EventGroup, GroupKind, TransactionGrouper, iter_groups
from binlog_builder import MARIADB_CTX, LogBuilder, query


def groups_of(data: bytes) -> tuple[list[EventGroup], TransactionGrouper]:
    grouper = TransactionGrouper()
    return list(iter_groups(EventStream(data), grouper)), grouper


def test_mariadb_gtid_opens_a_transaction_closed_by_xid() -> None:
    log = LogBuilder().header()
    start, end = log.transaction(statements=3, xid=77)
    groups, grouper = groups_of(log.bytes())
    tx = groups[-1]
    assert tx.kind is GroupKind.TRANSACTION
    assert (tx.start_offset, tx.end_offset) == (start, end)
    assert tx.gtid == "0-1-1"
    assert tx.xid == 77
    assert not grouper.in_group
    assert grouper.boundary == end


def test_ends_only_groups_keep_a_groups_first_and_last_event_and_the_same_bounds() -> None:
    log = LogBuilder().header()
    log.transaction(statements=30, xid=5)
    log.ddl()
    log.transaction(statements=1)
    log.seq_no += 1
    log.add(MariaGtidEvent(log.seq_no, 0, 0, None, None, b""))
    for n in range(5):
        log.add(query(f"INSERT INTO t VALUES ({n}, {n})"))
    whole, whole_grouper = groups_of(log.bytes())
    ends_grouper = TransactionGrouper(ends_only=True)
    ends = list(iter_groups(EventStream(log.bytes()), ends_grouper))
    assert [(g.kind, g.gtid, g.start_offset, g.end_offset, g.xid) for g in ends] == [
        (g.kind, g.gtid, g.start_offset, g.end_offset, g.xid) for g in whole
    ]
    assert max(len(g.events) for g in whole) > 30
    assert [g.events for g in ends] == [g.events[:1] + g.events[1:][-1:] for g in whole]
    assert ends_grouper.in_group and len(ends_grouper.open_events) == 2  # the open tail's ends
    assert ends_grouper.open_events == [whole_grouper.open_events[0], whole_grouper.open_events[-1]]
    assert ends_grouper.boundary == whole_grouper.boundary


def test_control_events_outside_transactions_are_their_own_groups() -> None:
    groups, _ = groups_of(LogBuilder().header().bytes())
    assert [g.kind for g in groups] == [GroupKind.CONTROL, GroupKind.CONTROL]
    assert not any(g.is_transaction for g in groups)


def test_standalone_gtid_groups_one_ddl_statement() -> None:
    log = LogBuilder().header()
    start, end = log.ddl()
    log.transaction()
    groups, _ = groups_of(log.bytes())
    ddl = groups[2]
    assert ddl.kind is GroupKind.STATEMENT
    assert (ddl.start_offset, ddl.end_offset) == (start, end)


def test_incomplete_transaction_at_tail_stays_open() -> None:
    log = LogBuilder().header()
    _, end = log.transaction()
    log.seq_no += 1
    log.add(MariaGtidEvent(log.seq_no, 0, 0, None, None, b""))
    log.add(query("INSERT INTO t VALUES (9, 9)"))
    groups, grouper = groups_of(log.bytes())
    assert grouper.in_group
    assert grouper.open_events[0].offset == end
    assert grouper.boundary == end
    assert groups[-1].end_offset == end


def test_commit_query_closes_a_transaction_and_rollback_is_marked() -> None:
    log = LogBuilder().header()
    log.add(MariaGtidEvent(1, 0, 0, None, None, b""))
    log.add(query("INSERT INTO m VALUES (1)"))
    log.add(query("COMMIT"))
    log.add(MariaGtidEvent(2, 0, 0, None, None, b""))
    log.add(query("INSERT INTO m VALUES (2)"))
    log.add(query("ROLLBACK"))
    groups, _ = groups_of(log.bytes())
    assert [g.kind for g in groups[2:]] == [GroupKind.TRANSACTION, GroupKind.ROLLBACK]


def test_mariadb_xa_prepare_closes_the_group_and_xa_commit_is_its_own_group() -> None:
    log = LogBuilder().header()
    xa = FL_PREPARED_XA
    log.add(MariaGtidEvent(1, 0, xa, None, b"\x01\0\0\0\x02\0x1", b""))
    log.add(query("INSERT INTO t VALUES (1)"))
    log.add(query("XA END X'7831',X'',1"))
    log.add(XaPrepareEvent(False, 1, b"x1", b""))
    done = FL_COMPLETED_XA
    log.add(MariaGtidEvent(2, 0, done, None, b"\x01\0\0\0\x02\0x1", b""))
    log.add(query("XA COMMIT X'7831',X'',1"))
    groups, grouper = groups_of(log.bytes())
    assert [g.kind for g in groups[2:]] == [GroupKind.XA_PREPARE, GroupKind.STATEMENT]
    assert not grouper.in_group


def _mysql_event(payload: MysqlGtidEvent | object, offset: int) -> BinlogEvent:
    raw = encode_event(payload, MARIADB_CTX, log_pos=0)  # type: ignore[arg-type]
    return decode_event(raw, MARIADB_CTX, offset)


def test_mysql_gtid_then_begin_is_a_transaction_and_then_ddl_a_statement() -> None:
    sid = uuid.UUID("3e11fa47-71ca-11e1-9e33-c80aa9429562")
    payloads = [
        MysqlGtidEvent(1, sid, 5, 4, 5, b""),
        query("BEGIN"),
        query("INSERT INTO t VALUES (1)"),
        XidEvent(9),
        MysqlGtidEvent(1, sid, 6, 5, 6, b""),
        query("CREATE TABLE u (id INT)"),
    ]
    grouper = TransactionGrouper()
    events, offset = [], 0
    for payload in payloads:
        event = _mysql_event(payload, offset)
        offset = event.end_offset
        events.append(event)
    groups = list(iter_groups(events, grouper))
    assert [(g.kind, g.gtid) for g in groups] == [
        (GroupKind.TRANSACTION, f"{sid}:5"),
        (GroupKind.STATEMENT, f"{sid}:6"),
    ]


def test_intvar_prefix_belongs_to_the_statement_after_it() -> None:
    log = LogBuilder().header()
    log.add(IntvarEvent(2, 10))
    log.add(query("INSERT INTO t VALUES (NULL)"))
    groups, _ = groups_of(log.bytes())
    assert groups[-1].kind is GroupKind.STATEMENT
    assert len(groups[-1].events) == 2


def test_xid_with_no_open_transaction_is_an_orphan_error() -> None:
    log = LogBuilder().header()
    log.transaction()
    orphan_at = log.add(XidEvent(5))
    grouper = TransactionGrouper()
    with pytest.raises(OrphanEventError) as info:
        list(iter_groups(EventStream(log.bytes()), grouper))
    assert info.value.offset == orphan_at
    assert info.value.event_type == "Xid"
