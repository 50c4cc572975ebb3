"""Source facts in the relay log (binlog/source_facts.py): the bytes, their place in a group,
how the applier reads them (hints with the TABLE_MAP, time zone conversions with the ALTER),
and bad input."""

from __future__ import annotations

import datetime as dt

import pytest

from apply_testing import RelayLog, relay_group
from binlake.apply.plan import UnitKind, classify
from binlake.binlog.codec import decode_event, encode_event
from binlake.binlog.constants import ColumnType as T
from binlake.binlog.constants import EventFlag, EventType
from binlake.binlog.errors import InvalidEventError
from binlake.binlog.events import FL_DDL, FL_STANDALONE, MariaGtidEvent, UnknownEvent, XidEvent
from binlake.binlog.names import TableName
from binlake.binlog.rows import make_rows_event
from binlake.binlog.source_facts import (
    FACTS_MAGIC,
    ColumnHints,
    SourceFactsEvent,
    ZoneTimes,
    encode_source_facts,
)
from binlake.binlog.stream import EventStream
from binlake.binlog.tablemap import TableMap
from binlake.binlog.transactions import GroupKind, TransactionGrouper, iter_groups
from binlake.ddl.temporal import RecordedClock, StatementTime, TemporalError
from binlake.source.hints import hint_candidates
from binlog_builder import MARIADB_CTX, LogBuilder, query

BINARY = 63
FLAGS = int(EventFlag.ARTIFICIAL | EventFlag.IGNORABLE)
HINTS = ColumnHints("we.ird db", "tâble x", {"u": "uuid", "a": "inet6"})
TIMES = ZoneTimes(
    "Europe/Paris",
    {1_700_000_000: dt.datetime(2023, 11, 14, 23, 13, 20)},
    {dt.datetime(2021, 3, 28, 2, 30, 0, 500_000): (1_616_893_200, 0)},
)


def devices_map() -> TableMap:
    """``we.ird db``.``tâble x`` (id INT, u BINARY(16) or UUID, a BINARY(16), b BINARY(4),
    c CHAR(16) latin1)."""
    names = ("id", "u", "a", "b", "c")
    return TableMap(
        table_id=9,
        flags=1,
        schema="we.ird db",
        table="tâble x",
        column_types=(T.LONG, T.STRING, T.STRING, T.STRING, T.STRING),
        column_metadata=(
            0,
            T.STRING << 8 | 16,
            T.STRING << 8 | 16,
            T.STRING << 8 | 4,
            0xFE << 8 | 20,
        ),
        nullable=(False, True, True, True, True),
        unsigned=(False,) * 5,
        column_charsets=(None, BINARY, BINARY, BINARY, 8),
        column_names=names,
        primary_key=(0,),
    )


@pytest.mark.parametrize("fact", [HINTS, TIMES, ColumnHints("d", "t", {})])
def test_source_facts_round_trip_through_a_crc_checked_event(fact: object) -> None:
    raw = encode_event(SourceFactsEvent(fact), MARIADB_CTX, server_id=0, flags=FLAGS)  # type: ignore[arg-type]
    event = decode_event(raw, MARIADB_CTX)
    assert event.header.type_code == EventType.IGNORABLE
    assert isinstance(event.payload, SourceFactsEvent) and event.payload.fact == fact
    damaged = raw[:-6] + bytes([raw[-6] ^ 1]) + raw[-5:]
    with pytest.raises(Exception, match="CRC32"):
        decode_event(damaged, MARIADB_CTX)


@pytest.mark.parametrize(
    "body",
    [
        FACTS_MAGIC + b"\x02\x01{}",  # unknown version
        FACTS_MAGIC + b"\x01\x09{}",  # unknown kind
        FACTS_MAGIC + b"\x01\x01not json",
        FACTS_MAGIC + b'\x01\x01{"database": "d", "table": "t", "hints": {"c": "blob"}}',
        FACTS_MAGIC + b'\x01\x02{"zone": "UTC", "local_times": {"x": "y"}, "instants": {}}',
        FACTS_MAGIC + b"\x01\x01[]",
    ],
)
def test_unreadable_source_facts_are_an_invalid_event_never_skipped(body: bytes) -> None:
    raw = encode_event(UnknownEvent(EventType.IGNORABLE, body), MARIADB_CTX, flags=FLAGS)
    with pytest.raises(InvalidEventError) as caught:
        decode_event(raw, MARIADB_CTX, offset=120)
    assert caught.value.offset == 120 and caught.value.event_type == "Ignorable"


def test_an_ignorable_event_that_is_not_binlakes_stays_unknown() -> None:
    raw = encode_event(UnknownEvent(EventType.IGNORABLE, b"someone else"), MARIADB_CTX, flags=FLAGS)
    payload = decode_event(raw, MARIADB_CTX).payload
    assert payload == UnknownEvent(EventType.IGNORABLE, b"someone else")


def test_the_encoding_is_canonical() -> None:
    again = ColumnHints(HINTS.database, HINTS.table, dict(reversed(list(HINTS.hints.items()))))
    assert encode_source_facts(SourceFactsEvent(HINTS)) == encode_source_facts(
        SourceFactsEvent(again)
    )


def test_a_hints_fact_after_a_table_map_stays_inside_its_transaction() -> None:
    log = LogBuilder().header()
    tm = devices_map()
    log.seq_no += 1
    start = log.add(MariaGtidEvent(log.seq_no, 0, 0, None, None, b""))
    log.add(tm)
    log.add(SourceFactsEvent(HINTS), flags=FLAGS)
    log.add(make_rows_event("write", tm, [(None, (1, b"u" * 16, b"a" * 16, b"b" * 4, "c"))]))
    log.add(XidEvent(log.seq_no))
    groups = list(iter_groups(EventStream(log.bytes()), TransactionGrouper()))
    (transaction,) = [g for g in groups if g.kind is GroupKind.TRANSACTION]
    assert transaction.start_offset == start
    assert [e.header.type_code for e in transaction.events][:3] == [
        EventType.MARIADB_GTID,
        EventType.TABLE_MAP,
        EventType.IGNORABLE,
    ]


def test_a_zone_fact_before_a_ddl_is_part_of_the_statement_group() -> None:
    log = LogBuilder().header()
    log.seq_no += 1
    flags = FL_STANDALONE | FL_DDL
    start = log.add(MariaGtidEvent(log.seq_no, 0, flags, None, None, b""))
    log.add(SourceFactsEvent(TIMES), flags=FLAGS)
    log.add(query("ALTER TABLE t ADD c DATETIME DEFAULT CURRENT_TIMESTAMP"))
    torn = log.bytes()
    groups = list(iter_groups(EventStream(torn), TransactionGrouper()))
    assert groups[-1].kind is GroupKind.STATEMENT and groups[-1].start_offset == start
    # Without the QUERY, the fact is an open group: a torn tail takes it away with the DDL.
    cut = log.offsets[-1]
    grouper = TransactionGrouper()
    list(iter_groups(EventStream(torn[:cut]), grouper))
    assert grouper.in_group and grouper.boundary == start


def test_a_zone_fact_with_no_gtid_before_it_opens_the_statement_group() -> None:
    log = LogBuilder().header()
    start = log.add(SourceFactsEvent(TIMES), flags=FLAGS)
    log.add(query("ALTER TABLE t ADD c DATETIME DEFAULT CURRENT_TIMESTAMP"))
    groups = list(iter_groups(EventStream(log.bytes()), TransactionGrouper()))
    assert groups[-1].kind is GroupKind.STATEMENT and groups[-1].start_offset == start


def test_the_planner_gives_each_rows_event_the_hints_recorded_with_its_table_map() -> None:
    log = RelayLog()
    tm = devices_map()
    log.log.seq_no += 1
    log.log.add(MariaGtidEvent(log.log.seq_no, 0, 0, None, None, b""))
    log.log.add(tm)
    log.log.add(SourceFactsEvent(HINTS), flags=FLAGS)
    log.log.add(make_rows_event("write", tm, [(None, (1, b"u" * 16, b"a" * 16, b"b" * 4, "c"))]))
    log.log.add(XidEvent(log.log.seq_no))
    log.rows((tm, "write", [(None, (2, b"u" * 16, b"a" * 16, b"b" * 4, "c"))]))  # no facts
    first, second = log.transactions()
    unit = classify(first, lambda _table: True)
    assert unit.kind is UnitKind.ROWS
    assert unit.rows[0].recorded_hints == {"u": "uuid", "a": "inet6"}
    assert classify(second, lambda _table: True).rows[0].recorded_hints is None


def test_only_binary_strings_of_length_4_or_16_may_be_uuid_or_inet() -> None:
    assert hint_candidates(devices_map()) == {1: "u", 2: "a", 3: "b"}


def test_the_recorded_clock_answers_from_the_facts_and_asks_the_fallback_the_rest() -> None:
    class Source:
        asked: list[object] = []

        def local_time(self, zone: str, seconds: int, microseconds: int) -> dt.datetime:
            self.asked.append((zone, seconds))
            return dt.datetime(2000, 1, 1)

        def utc_instant(self, zone: str, local: dt.datetime) -> tuple[int, int]:
            self.asked.append((zone, local))
            return (1, 2)

    source = Source()
    clock = RecordedClock(TIMES, source)
    time = StatementTime(1_700_000_000, 123_456, "Europe/Paris")
    assert time.local(3, clock) == dt.datetime(2023, 11, 14, 23, 13, 20, 123_000)
    local = dt.datetime(2021, 3, 28, 2, 30, 0, 500_000)
    assert time.to_utc(local, clock) == dt.datetime.fromtimestamp(1_616_893_200, dt.UTC)
    assert source.asked == []
    assert clock.local_time("Europe/Paris", 5, 0) == dt.datetime(2000, 1, 1)
    assert clock.utc_instant("Asia/Tokyo", local) == (1, 2)
    assert source.asked == [("Europe/Paris", 5), ("Asia/Tokyo", local)]
    with pytest.raises(TemporalError, match="recorded no such conversion"):
        RecordedClock(TIMES).local_time("Europe/Paris", 5, 0)


def test_a_ddl_unit_with_a_zone_fact_is_still_a_ddl_unit() -> None:
    log = LogBuilder().header()
    log.seq_no += 1
    flags = FL_STANDALONE | FL_DDL
    log.add(MariaGtidEvent(log.seq_no, 0, flags, None, None, b""))
    log.add(SourceFactsEvent(TIMES), flags=FLAGS)
    log.add(query("ALTER TABLE orders ADD c DATETIME DEFAULT CURRENT_TIMESTAMP"))
    groups = list(iter_groups(EventStream(log.bytes()), TransactionGrouper()))
    unit = classify(relay_group(groups[-1], "relay-bin.000001", 0), lambda _table: True)
    assert unit.kind is UnitKind.DDL and unit.tables == {TableName("shop", "orders")}


def test_binlog_dump_describes_source_facts() -> None:
    from binlake.cli.render import describe

    raw = encode_event(SourceFactsEvent(HINTS), MARIADB_CTX, server_id=0, flags=FLAGS)
    event = decode_event(raw, MARIADB_CTX)
    assert describe(event, None) == ("source facts: `we.ird db`.`tâble x` hints [a inet6, u uuid]")
    raw = encode_event(SourceFactsEvent(TIMES), MARIADB_CTX, server_id=0, flags=FLAGS)
    text = describe(decode_event(raw, MARIADB_CTX), None)
    assert text == "source facts: time zone Europe/Paris, 1 local times, 1 instants"
