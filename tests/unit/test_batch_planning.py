"""Batch planning: what each relay-log group is to the applier, where batches end, which
transactions a table skips by position, and the refusals (statement format, XA, no TABLE_MAP)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from apply_testing import RelayLog, relay_group, shop_map
from binlake.apply.plan import BatchBuilder, Bounds, UnitKind, classify, statement_target
from binlake.binlog.codec import BinlogEvent
from binlake.binlog.format import FormatContext
from binlake.binlog.names import TableName
from binlake.binlog.rows import RowsEvent
from binlake.binlog.transactions import EventGroup, GroupKind
from binlake.ddl.statements import AlterTable, TruncateTable
from binlake.errors import ApplyError, LogCorruptionError, StatementFormatError
from binlake.position import SourcePosition, is_new_for
from binlake.relay.reader import RelayGroup

ORDERS = shop_map("orders")
ITEMS = shop_map("items", table_id=71)


N = TableName.parse


def everything(_table: TableName) -> bool:
    return True


def only_orders(table: TableName) -> bool:
    return table == N("shop.orders")


def insert(table_map: object, n: int = 1) -> tuple[object, str, list[tuple[None, tuple[int, str]]]]:
    return (table_map, "write", [(None, (i, f"row {i}")) for i in range(n)])


def test_a_row_transaction_is_a_rows_unit_with_its_table_maps() -> None:
    log = RelayLog()
    log.rows(insert(ORDERS, 2), insert(ITEMS))  # type: ignore[arg-type]
    (group,) = log.transactions()
    unit = classify(group, everything)
    assert unit.kind is UnitKind.ROWS
    assert unit.tables == {N("shop.orders"), N("shop.items")}
    assert [r.table_map.table for r in unit.rows] == ["orders", "items"]
    assert unit.is_transaction


def test_rows_of_tables_not_replicated_are_left_out() -> None:
    log = RelayLog()
    log.rows(insert(ITEMS))  # type: ignore[arg-type]
    (group,) = log.transactions()
    unit = classify(group, only_orders)
    assert unit.kind is UnitKind.NONE and unit.rows == ()
    assert unit.is_transaction  # still counted for the checkpoint


def test_control_events_are_nothing_and_not_transactions() -> None:
    log = RelayLog()
    control = [g for g in log.groups() if g.group.kind is GroupKind.CONTROL]
    assert control
    for group in control:
        unit = classify(group, everything)
        assert unit.kind is UnitKind.NONE and not unit.is_transaction


def test_ddl_on_a_replicated_table_is_a_ddl_unit() -> None:
    log = RelayLog()
    log.statement("ALTER TABLE orders ADD COLUMN qty INT")
    log.statement("TRUNCATE TABLE items")
    alter, truncate = (classify(g, only_orders) for g in log.transactions())
    assert alter.kind is UnitKind.DDL and isinstance(alter.ddl, AlterTable)
    assert alter.tables == {N("shop.orders")}
    assert truncate.kind is UnitKind.NONE  # items is not replicated
    assert isinstance(classify(log.transactions()[1], everything).ddl, TruncateTable)


def test_statements_that_do_not_concern_the_lake_are_nothing() -> None:
    log = RelayLog()
    log.statement("CREATE USER bob")
    log.statement("CREATE DATABASE other")
    assert [classify(g, everything).kind for g in log.transactions()] == [UnitKind.NONE] * 2


@pytest.mark.parametrize(
    "text",
    [
        "INSERT INTO orders VALUES (1, 'x')",
        "UPDATE shop.orders SET note = 'y'",
        "DELETE FROM orders",
    ],
)
def test_a_statement_format_change_to_a_replicated_table_is_refused(text: str) -> None:
    log = RelayLog()
    log.dml_in_transaction(text)
    (group,) = log.transactions()
    with pytest.raises(StatementFormatError, match="binlog_format must be ROW") as caught:
        classify(group, everything)
    assert caught.value.table == "shop.orders"
    assert caught.value.setting == "binlog_format"
    assert caught.value.file == "relay-bin.000001"
    assert "binlog_format=ROW" in caught.value.hint
    assert caught.value.exit_code == 78


def test_a_standalone_statement_format_change_is_refused_too() -> None:
    log = RelayLog()
    log.statement("INSERT INTO orders VALUES (1, 'x')")
    (group,) = log.transactions()
    with pytest.raises(StatementFormatError):
        classify(group, everything)


def test_a_statement_format_change_to_another_table_is_ignored() -> None:
    log = RelayLog()
    log.dml_in_transaction("INSERT INTO items VALUES (1, 'x')")
    (group,) = log.transactions()
    assert classify(group, only_orders).kind is UnitKind.NONE


def test_a_statement_whose_table_cannot_be_told_is_refused() -> None:
    log = RelayLog()
    log.dml_in_transaction("UPDATE items, orders SET orders.note = items.note")
    (group,) = log.transactions()
    with pytest.raises(StatementFormatError):
        classify(group, only_orders)


def test_statement_targets_are_read_from_common_shapes() -> None:
    target = statement_target("shop", "INSERT IGNORE INTO `a b`.`t``1` VALUES (1)")
    assert target == TableName("a b", "t`1")
    assert statement_target("shop", "replace low_priority t2 (a) values (1)") == N("shop.t2")
    assert statement_target("shop", "DELETE FROM x.y WHERE id = 1") == N("x.y")
    dotted = statement_target("shop", "UPDATE `we.ird db`.`tâble x` SET a = 1")
    assert dotted == TableName("we.ird db", "tâble x")
    assert statement_target("shop", "DELETE a FROM a JOIN b") is None


def test_a_rows_event_without_its_table_map_is_refused() -> None:
    log = RelayLog()
    log.rows(insert(ORDERS))  # type: ignore[arg-type]
    (group,) = log.transactions()
    events = tuple(e for e in group.group.events if type(e.payload).__name__ != "TableMap")
    broken = relay_group(EventGroup(group.group.kind, events, None), "relay-bin.000001", 0)
    with pytest.raises(ApplyError, match="has no TABLE_MAP"):
        classify(broken, everything)


def test_an_xa_transaction_on_a_replicated_table_is_refused() -> None:
    log = RelayLog()
    log.rows(insert(ORDERS))  # type: ignore[arg-type]
    (group,) = log.transactions()
    xa = relay_group(EventGroup(GroupKind.XA_PREPARE, group.group.events, None), "r.000001", 0)
    with pytest.raises(ApplyError, match="XA transaction"):
        classify(xa, everything)


# ---- batches ------------------------------------------------------------------------------------


def units(log: RelayLog) -> list[object]:
    return [classify(g, everything) for g in log.transactions()]


def test_a_batch_ends_after_max_transactions() -> None:
    log = RelayLog()
    for _ in range(5):
        log.rows(insert(ORDERS))  # type: ignore[arg-type]
    builder = BatchBuilder(Bounds(max_transactions=2, max_bytes=1 << 30, max_seconds=60))
    done = [b for u in units(log) for b in builder.add(u, 0.0)]  # type: ignore[arg-type]
    done += builder.flush()
    assert [len(b.units) for b in done] == [2, 2, 1]


def test_a_batch_ends_once_it_holds_max_bytes() -> None:
    log = RelayLog()
    for _ in range(4):
        log.rows(insert(ORDERS, 3))  # type: ignore[arg-type]
    size = log.transactions()[0].size
    builder = BatchBuilder(Bounds(max_transactions=100, max_bytes=2 * size, max_seconds=60))
    done = [b for u in units(log) for b in builder.add(u, 0.0)]  # type: ignore[arg-type]
    assert [len(b.units) for b in done] == [2, 2]
    assert done[0].bytes == 2 * size


def test_a_batch_is_due_max_seconds_after_its_first_transaction() -> None:
    log = RelayLog()
    log.rows(insert(ORDERS))  # type: ignore[arg-type]
    builder = BatchBuilder(Bounds(max_transactions=100, max_bytes=1 << 30, max_seconds=2.0))
    assert builder.add(units(log)[0], 10.0) == []  # type: ignore[arg-type]
    assert not builder.due(11.9)
    assert builder.due(12.0)
    assert len(builder.flush()) == 1 and not builder.due(20.0)


def test_a_ddl_ends_the_batch_before_it_and_is_applied_alone() -> None:
    log = RelayLog()
    log.rows(insert(ORDERS))  # type: ignore[arg-type]
    log.rows(insert(ORDERS))  # type: ignore[arg-type]
    log.statement("ALTER TABLE orders ADD COLUMN qty INT")
    log.rows(insert(ORDERS))  # type: ignore[arg-type]
    builder = BatchBuilder(Bounds())
    done = [b for u in units(log) for b in builder.add(u, 0.0)]  # type: ignore[arg-type]
    done += builder.flush()
    assert [len(b.units) for b in done] == [2, 1, 1]
    assert [b.is_ddl for b in done] == [False, True, False]
    assert done[1].position == done[1].units[0].position


def test_a_table_map_that_changes_shape_ends_the_batch() -> None:
    log = RelayLog()
    log.rows(insert(ORDERS))  # type: ignore[arg-type]
    wider = shop_map("orders", table_id=99, extra=("qty",))
    log.rows((wider, "write", [(None, (5, "x", 1))]))
    same_shape_new_id = shop_map("orders", table_id=100, extra=("qty",))
    log.rows((same_shape_new_id, "write", [(None, (6, "y", 2))]))
    builder = BatchBuilder(Bounds())
    done = [b for u in units(log) for b in builder.add(u, 0.0)]  # type: ignore[arg-type]
    done += builder.flush()
    assert [len(b.units) for b in done] == [1, 2]


def test_a_batch_counts_its_transactions_per_relay_file_and_ends_at_the_last_position() -> None:
    log = RelayLog()
    log.rows(insert(ORDERS))  # type: ignore[arg-type]
    log.rows(insert(ITEMS))  # type: ignore[arg-type]
    builder = BatchBuilder(Bounds())
    for group in log.groups():
        builder.add(classify(group, everything), 0.0)
    (batch,) = builder.flush()
    assert batch.transactions_per_file() == {"relay-bin.000001": 2}
    assert batch.position == log.groups()[-1].position


# ---- positions ----------------------------------------------------------------------------------


def test_a_table_takes_only_transactions_after_its_applied_position() -> None:
    applied = SourcePosition("mariadb-bin.000002", 500)
    assert is_new_for(SourcePosition("mariadb-bin.000002", 501), applied)
    assert not is_new_for(SourcePosition("mariadb-bin.000002", 500), applied)
    assert not is_new_for(SourcePosition("mariadb-bin.000001", 9000), applied)
    assert is_new_for(SourcePosition("mariadb-bin.000010", 4), applied)  # numbers, not text
    assert is_new_for(SourcePosition("mariadb-bin.000001", 4), None)


def test_two_tables_of_one_batch_skip_independently_after_a_crash_between_their_commits() -> None:
    """Crash after orders committed the batch ending at P, before items: on restart, the same
    transactions are new for items and not for orders, whatever the new batch bounds."""
    log = RelayLog()
    for _ in range(3):
        log.rows(insert(ORDERS), insert(ITEMS))  # type: ignore[arg-type]
    transactions = [classify(g, everything) for g in log.transactions()]
    batch_end = transactions[-1].position
    applied = {"shop.orders": batch_end, "shop.items": None}
    todo = {
        table: [u.position for u in transactions if is_new_for(u.position, applied[table])]
        for table in applied
    }
    assert todo == {"shop.orders": [], "shop.items": [u.position for u in transactions]}


def test_a_transaction_before_any_source_context_has_no_position() -> None:
    log = RelayLog()
    log.rows(insert(ORDERS))  # type: ignore[arg-type]
    (group,) = log.transactions()
    unknown = type(group)(group.group, group.relay_file, group.relay_end, None, "", group.size)
    with pytest.raises(LogCorruptionError, match="no source position"):
        classify(unknown, everything).position  # noqa: B018


def test_unused_builders_keep_nothing_open() -> None:
    builder = BatchBuilder(Bounds())
    assert builder.flush() == [] and builder.open_batch is None
    assert not builder.due(1e9)


def set_aside(group: RelayGroup) -> RelayGroup:
    """``group`` as the relay reader gives a group past ``hold_bytes``: no rows event kept."""
    kept = tuple(e for e in group.group.events if not isinstance(e.payload, RowsEvent))
    events = EventGroup(group.group.kind, kept, group.group.gtid)
    return replace(group, group=events, aside_context=FormatContext.default())


def test_a_set_aside_group_reads_its_rows_again_at_each_pass_and_holds_none() -> None:
    log = RelayLog()
    log.rows(insert(ORDERS, 3), insert(ITEMS), insert(ORDERS))  # type: ignore[arg-type]
    (whole,) = log.transactions()
    reads: list[int] = []

    def events_of(group: RelayGroup) -> Iterator[BinlogEvent]:
        reads.append(group.relay_end)
        return iter(whole.group.events)  # what the relay file holds

    unit = classify(set_aside(whole), everything, events_of)
    assert unit.kind is UnitKind.ROWS and len(reads) == 1  # one pass, for its tables
    assert unit.tables == {N("shop.orders"), N("shop.items")}
    assert [m.table for m in unit.table_maps] == ["orders", "items"]
    assert [r.table_map.table for r in unit.rows] == ["orders", "items", "orders"]
    assert [len(r.event.rows) > 0 for r in unit.rows] == [True] * 3  # images read back
    assert len(reads) == 3  # every pass reads again: nothing was kept between them


def test_a_set_aside_group_without_a_way_to_read_it_again_is_refused() -> None:
    log = RelayLog()
    log.rows(insert(ORDERS))  # type: ignore[arg-type]
    (whole,) = log.transactions()
    with pytest.raises(ApplyError, match="read again") as caught:
        classify(set_aside(whole), everything)
    assert caught.value.file == whole.relay_file and caught.value.hint


def test_a_batch_stays_open_as_long_as_the_last_batch_took_to_commit_up_to_max_lag() -> None:
    log = RelayLog()
    for _ in range(3):
        log.rows(insert(ORDERS))  # type: ignore[arg-type]
    first, second, third = units(log)
    builder = BatchBuilder(Bounds(max_transactions=100, max_seconds=2.0, max_lag_s=10.0))
    builder.add(first, 100.0)  # type: ignore[arg-type]
    assert builder.due(102.0)  # max_seconds, as long as commits are quick
    builder.flush()
    builder.pace(6.5)  # a batch over many tables took 6.5 s to commit
    builder.add(second, 200.0)  # type: ignore[arg-type]
    assert not builder.due(206.4) and builder.due(206.5)
    builder.flush()
    builder.pace(60.0)  # never longer than max_lag_s
    builder.add(third, 300.0)  # type: ignore[arg-type]
    assert not builder.due(309.9) and builder.due(310.0)


def test_a_batch_of_old_transactions_stays_open_until_max_lag_while_binlake_catches_up() -> None:
    """A batch whose newest transaction was committed on the source more than max_lag_s ago
    (a backlog) is due only once it has been open max_lag_s; a fresh one after max_seconds."""
    log = RelayLog()
    log.rows(insert(ORDERS))  # type: ignore[arg-type]
    (unit,) = units(log)
    builder = BatchBuilder(Bounds(max_transactions=100, max_seconds=2.0, max_lag_s=10.0))
    builder.add(unit, 100.0)  # type: ignore[arg-type]
    committed = unit.group.group.events[-1].header.timestamp  # type: ignore[attr-defined]
    assert builder.due(102.0, wall=committed + 1.0)  # live: max_seconds
    assert not builder.due(102.0, wall=committed + 3600.0)  # an hour behind: keep reading
    assert not builder.due(109.9, wall=committed + 3600.0)
    assert builder.due(110.0, wall=committed + 3600.0)  # but never longer than max_lag_s
