"""The relay log's transactions, their source positions and the tables they touch, read beside a
live receiver: `status` and `verify` rely on this instead of any separately stored position."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.events import MariaGtidEvent, XidEvent
from binlake.binlog.names import TableName
from binlake.binlog.tablemap import TableMap
from binlake.errors import LogCorruptionError
from binlake.position import SourcePosition, parse_position
from binlake.relay.scan import RelayFollower, relay_files
from binlog_builder import LogBuilder
from binlog_fixtures import table_map
from source_stream import Source, file_name, receive_into

N = TableName.parse


def named_map(name: str) -> TableMap:
    database, _, table = name.partition(".")
    return replace(table_map((T.LONG,)), schema=database, table=table)


def transaction(source: Source, *tables: str) -> SourcePosition:
    """A row transaction touching ``tables``; returns the source position after it."""
    log = source.files[-1] if source.files else source.new_file()
    log.seq_no += 1
    log.add(MariaGtidEvent(log.seq_no, 0, 0, None, None, b""))
    for name in tables:
        log.add(named_map(name))
    log.add(XidEvent(log.seq_no))
    source.seq = log.seq_no
    return SourcePosition(*source.end())


def ddl(source: Source, text: str) -> SourcePosition:
    log: LogBuilder = source.files[-1]
    log.ddl(text)
    source.seq = log.seq_no
    return SourcePosition(*source.end())


def test_positions_and_tables_across_source_and_relay_rotations(tmp_path: Path) -> None:
    source = Source()
    ends = [transaction(source, "shop.a"), transaction(source, "shop.b", "shop.a")]
    source.rotate()
    ends += [transaction(source, "shop.c") for _ in range(6)]
    receive_into(tmp_path, source.dump_events(), max_file_size=900)
    assert len(relay_files(tmp_path)) >= 3
    follower = RelayFollower(tmp_path)
    follower.refresh()
    assert [t.end for t in follower.transactions] == ends
    assert follower.transactions[1].tables == {N("shop.a"), N("shop.b")}
    assert follower.end == SourcePosition(*source.end())
    assert follower.end_timestamp == 1_700_000_000
    assert follower.transactions[0].touches(N("shop.a"))
    assert not follower.transactions[0].touches(N("shop.b"))


def test_each_relay_file_knows_the_source_position_it_starts_at(tmp_path: Path) -> None:
    source = Source()
    ends = [transaction(source, "shop.a") for _ in range(8)]
    receive_into(tmp_path, source.dump_events(), max_file_size=900)
    starts = [f.start for f in relay_files(tmp_path)]
    assert starts[0] is not None and starts[0].file == file_name(1)
    assert starts[0].key() < ends[0].key(), "the first file starts before its first transaction"
    assert all(s in ends for s in starts[1:]), "later files start at a transaction boundary"


def test_a_follower_reads_from_a_position_and_then_only_what_was_appended(
    tmp_path: Path,
) -> None:
    source = Source()
    ends = [transaction(source, "shop.a") for _ in range(6)]
    receive_into(tmp_path, source.dump_events(), max_file_size=900)
    follower = RelayFollower(tmp_path, after=ends[3])
    follower.refresh()
    assert [t.end for t in follower.transactions] == ends[4:]
    start = len(source.files[-1].buf)
    more = [transaction(source, "shop.b"), transaction(source, "shop.a")]
    events = zip(source.file_events(1), source.files[0].offsets, strict=True)
    receive_into(tmp_path, [event for event, at in events if at >= start])
    follower.refresh()
    assert [t.end for t in follower.transactions] == ends[4:] + more
    follower.refresh()
    assert len(follower.transactions) == 4, "a refresh with nothing new adds nothing"


def test_an_open_transaction_or_torn_tail_in_the_newest_file_ends_what_is_known(
    tmp_path: Path,
) -> None:
    source = Source()
    ends = [transaction(source, "shop.a") for _ in range(2)]
    writer = receive_into(tmp_path, source.dump_events(), close=False)
    log = source.files[-1]
    log.seq_no += 1
    opened = [
        log.add(MariaGtidEvent(log.seq_no, 0, 0, None, None, b"")),
        log.add(named_map("shop.b")),
    ]
    for offset in opened:
        writer.append(bytes(log.buf[offset : offset + _size(log, offset)]))
    writer.sync()
    follower = RelayFollower(tmp_path)
    follower.refresh()
    assert [t.end for t in follower.transactions] == ends, "the open transaction is not listed"
    xid = log.add(XidEvent(log.seq_no))
    event = bytes(log.buf[xid:])
    relay = tmp_path / relay_files(tmp_path)[-1].name
    with relay.open("ab") as f:
        f.write(event[:10])  # a torn write: part of the XID
    follower.refresh()
    assert len(follower.transactions) == 2
    with relay.open("ab") as f:
        f.write(event[10:])
    follower.refresh()
    assert [t.tables for t in follower.transactions][-1] == {N("shop.b")}
    assert follower.end == SourcePosition(*source.end())
    writer.close()


def _size(log: LogBuilder, offset: int) -> int:
    index = log.offsets.index(offset)
    following = log.offsets[index + 1] if index + 1 < len(log.offsets) else len(log.buf)
    return following - offset


def test_damage_in_an_older_relay_file_is_a_typed_error(tmp_path: Path) -> None:
    source = Source()
    for _ in range(8):
        transaction(source, "shop.a")
    receive_into(tmp_path, source.dump_events(), max_file_size=900)
    first = tmp_path / relay_files(tmp_path)[0].name
    data = bytearray(first.read_bytes())
    data[-3] ^= 0xFF
    first.write_bytes(bytes(data))
    with pytest.raises(LogCorruptionError) as caught:
        RelayFollower(tmp_path).refresh()
    assert caught.value.file == first.name


def test_a_ddl_statement_touches_the_tables_it_names_and_a_dropped_database_all_its_tables(
    tmp_path: Path,
) -> None:
    source = Source()
    transaction(source, "shop.a")
    ddl(source, "ALTER TABLE `shop`.`orders` ADD COLUMN x INT")
    ddl(source, "DROP DATABASE shop")
    ddl(source, "/* made by a tool */ CREATE TABLE shop.items (id INT PRIMARY KEY)")
    ddl(source, "CREATE TABLE shop.items2 SELECT * FROM shop.items")
    receive_into(tmp_path, source.dump_events())
    follower = RelayFollower(tmp_path)
    follower.refresh()
    alter, drop, create, create_select = follower.transactions[1:]
    assert alter.touches(N("shop.orders")) and not alter.touches(N("shop.orders2"))
    assert drop.touches(N("shop.items")) and not drop.touches(N("other.items"))
    assert not create.touches(N("shop.items")), "a plain CREATE TABLE changes no rows"
    assert create_select.touches(N("shop.items2"))


def test_touching_is_unknown_until_the_relay_log_reaches_the_target(tmp_path: Path) -> None:
    source = Source()
    first = transaction(source, "shop.a")
    second = transaction(source, "shop.b")
    receive_into(tmp_path, source.dump_events())
    follower = RelayFollower(tmp_path)
    follower.refresh()
    assert follower.touching(N("shop.a"), first, second) is False
    assert follower.touching(N("shop.b"), first, second) is True
    later = SourcePosition(second.file, second.offset + 100)
    assert follower.touching(N("shop.a"), first, later) is None
    assert follower.touching(N("shop.a"), None, second, clean_before_coverage=True) is True


def test_positions_parse_from_snapshot_summaries() -> None:
    assert parse_position("mariadb-bin.000003:4567") == SourcePosition("mariadb-bin.000003", 4567)
    for bad in ("mariadb-bin.000003", ":12", "f:x"):
        with pytest.raises(ValueError):
            parse_position(bad)


def test_an_empty_state_folder_has_no_relay_end(tmp_path: Path) -> None:
    follower = RelayFollower(tmp_path / "relay")
    follower.refresh()
    assert follower.end is None and follower.transactions == []
