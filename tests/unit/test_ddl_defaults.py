"""existing_rows_value: the value an ALTER TABLE ... ADD COLUMN gave the rows a table had, as
the lake holds it. Expected values are what MariaDB 10.11.19 stored for the same statements on
the sandbox (SELECT after the ALTER)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from binlake.binlog.events import QueryEvent
from binlake.binlog.query_status import QueryStatus
from binlake.ddl.defaults import StatementContext, TimestampRank, existing_rows_value
from binlake.ddl.parse import AddColumnClause, AlterTable, parse_ddl
from binlake.ddl.temporal import MODE_TIME_ROUND_FRACTIONAL, StatementTime
from binlake.ddl.types import lake_column_of
from binlake.errors import UnsupportedDefaultError

#: 2026-11-21 21:25:18.233733 UTC, the session at +05:00.
TIME = StatementTime(1795296318, 233733, "+05:00")
CONTEXT = StatementContext(TIME)
MODE_NO_BACKSLASH_ESCAPES = 1 << 20
MODE_EMPTY_STRING_IS_NULL = 1 << 32


class FakeClock:
    """The source's conversions for SYSTEM / named zones: here a fixed -03:00."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def local_time(self, zone: str, seconds: int, microseconds: int) -> dt.datetime:
        self.asked.append(zone)
        utc = dt.datetime.fromtimestamp(seconds, dt.UTC).replace(tzinfo=None)
        return utc - dt.timedelta(hours=3) + dt.timedelta(microseconds=microseconds)

    def utc_instant(self, zone: str, local: dt.datetime) -> tuple[int, int]:
        self.asked.append(zone)
        instant = (local + dt.timedelta(hours=3)).replace(tzinfo=dt.UTC)
        return int(instant.timestamp()), instant.microsecond


def added(definition_sql: str) -> AddColumnClause:
    statement = parse_ddl("db", f"ALTER TABLE t ADD {definition_sql}")
    assert isinstance(statement, AlterTable)
    (clause,) = statement.clauses
    assert isinstance(clause, AddColumnClause)
    return clause


def value(
    definition_sql: str,
    context: StatementContext = CONTEXT,
    clock: FakeClock | None = None,
    timestamp_rank: TimestampRank = TimestampRank.FIRST,
) -> object:
    """The value existing rows get from ``ADD <definition_sql>``."""
    definition = added(definition_sql).column
    column = lake_column_of(
        definition, 1, sql_mode=context.sql_mode, explicit_timestamps=context.explicit_timestamps
    )
    assert column is not None, definition_sql
    return existing_rows_value(
        definition,
        column,
        context,
        clock,
        timestamp_rank=timestamp_rank,
        table="db.t",
        statement=f"ALTER TABLE t ADD {definition_sql}",
    )


@pytest.mark.parametrize(
    ("definition", "expected"),
    [
        ("i INT DEFAULT 7", 7),
        ("i INT DEFAULT '12'", 12),
        ("i INT DEFAULT 1.6", 2),
        ("i INT DEFAULT -2.5", -3),
        ("i TINYINT DEFAULT TRUE", 1),
        ("i INT UNSIGNED DEFAULT 4294967295", 4294967295),
        ("u BIGINT UNSIGNED DEFAULT 18446744073709551615", Decimal(18446744073709551615)),
        ("d DECIMAL(8,2) DEFAULT 1.555", Decimal("1.56")),
        ("d DECIMAL(8,2) DEFAULT '1.5'", Decimal("1.50")),
        ("d DECIMAL(8,2) DEFAULT -0.001", Decimal("0.00")),
        ("d DECIMAL(40,3) DEFAULT 2.5", "2.500"),
        ("f FLOAT DEFAULT 0.1", 0.10000000149011612),
        ("g DOUBLE DEFAULT 1e300", 1e300),
        ("b BIT(5) DEFAULT b'101'", 5),
        ("b BIT(64) DEFAULT 0xFFFFFFFFFFFFFFFF", Decimal(2**64 - 1)),
        ("y YEAR DEFAULT 69", 2069),
        ("y YEAR DEFAULT 70", 1970),
        ("y YEAR DEFAULT '0'", 2000),
        ("y YEAR DEFAULT 0", 0),
    ],
)
def test_numeric_defaults_are_converted_as_mariadb_stores_them(
    definition: str, expected: object
) -> None:
    result = value(definition)
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(
    ("definition", "expected"),
    [
        ("s VARCHAR(10) DEFAULT 'ab  '", "ab  "),
        ("c CHAR(5) DEFAULT 'ab  '", "ab"),
        ("s VARCHAR(10) DEFAULT 'x  y' 'z'", "x  yz"),
        ("s VARCHAR(10) DEFAULT 'a\\nb''c'", "a\nb'c"),
        ("s VARCHAR(10) DEFAULT 'a\\%b'", "a\\%b"),
        ("s VARCHAR(10) DEFAULT _latin1 'é'", "Ã©"),
        ("s VARCHAR(10) DEFAULT N'é'", "é"),
        ("s VARCHAR(10) DEFAULT 0x41", "A"),
        ("s VARCHAR(10) CHARACTER SET latin1 DEFAULT X'E9'", "é"),
        ("s VARCHAR(10) DEFAULT 1.50", "1.50"),
        ("e ENUM('small','Big') DEFAULT 'big'", "Big"),
        ("e SET('x','y','z') DEFAULT 'z,x'", "x,z"),
        (
            "u UUID DEFAULT '123E4567-E89B-12D3-A456-426655440000'",
            "123e4567-e89b-12d3-a456-426655440000",
        ),
        ("a INET6 DEFAULT '::FFFF:1.2.3.4'", "::ffff:1.2.3.4"),
        ("a INET4 DEFAULT '10.0.0.1'", "10.0.0.1"),
        ("b BINARY(4) DEFAULT 'ab'", b"ab\0\0"),
        ("b VARBINARY(4) DEFAULT X'00FF'", b"\x00\xff"),
        ("b BLOB DEFAULT 12", b"12"),
        ("b VARCHAR(3) CHARACTER SET binary DEFAULT 'é'", "é".encode()),
    ],
)
def test_string_defaults_keep_their_characters_and_bytes_exactly(
    definition: str, expected: object
) -> None:
    assert value(definition) == expected


def test_sql_modes_of_the_session_change_how_a_string_default_reads() -> None:
    raw = StatementContext(TIME, sql_mode=MODE_NO_BACKSLASH_ESCAPES)
    assert value("s VARCHAR(10) DEFAULT 'a\\nb'", raw) == "a\\nb"
    empty_is_null = StatementContext(TIME, sql_mode=MODE_EMPTY_STRING_IS_NULL)
    assert value("s VARCHAR(10) DEFAULT ''", empty_is_null) is None


@pytest.mark.parametrize(
    ("definition", "expected"),
    [
        ("d DATE DEFAULT '2020-02-29'", dt.date(2020, 2, 29)),
        ("d DATE DEFAULT 20200102", dt.date(2020, 1, 2)),
        ("d DATE DEFAULT DATE '2020-01-02'", dt.date(2020, 1, 2)),
        (
            "d DATETIME(6) DEFAULT '2020-01-02 03:04:05.123456'",
            dt.datetime(2020, 1, 2, 3, 4, 5, 123456),
        ),
        ("d DATETIME DEFAULT '2020-02-03 4:5:6.7'", dt.datetime(2020, 2, 3, 4, 5, 6)),
        ("d DATETIME(2) DEFAULT '20-02-03 04:05:06.789'", dt.datetime(2020, 2, 3, 4, 5, 6, 780000)),
        ("t TIME(3) DEFAULT '-838:59:59.5'", -((838 * 3600 + 59 * 60 + 59) * 10**6 + 500000)),
        ("t TIME DEFAULT '1 02:03:04'", (26 * 3600 + 3 * 60 + 4) * 10**6),
        ("t TIME DEFAULT 101112", (10 * 3600 + 11 * 60 + 12) * 10**6),
        ("z DATE DEFAULT '0000-00-00'", None),
        ("z DATETIME DEFAULT '2020-00-01 00:00:00'", None),
        (
            "ts TIMESTAMP DEFAULT '2020-02-03 04:05:06'",
            dt.datetime(2020, 2, 2, 23, 5, 6, tzinfo=dt.UTC),
        ),
    ],
)
def test_date_and_time_literals_are_read_as_mariadb_reads_them(
    definition: str, expected: object
) -> None:
    assert value(definition) == expected


def test_time_round_fractional_rounds_literals_and_carries_into_the_seconds() -> None:
    rounding = StatementContext(TIME, sql_mode=MODE_TIME_ROUND_FRACTIONAL)
    assert value("d DATETIME DEFAULT '2020-01-01 00:00:00.7'", rounding) == dt.datetime(
        2020, 1, 1, 0, 0, 1
    )
    assert value("d DATETIME(3) DEFAULT NOW(6)", rounding) == dt.datetime(
        2026, 11, 22, 2, 25, 18, 233000
    )  # the statement's time is cut, never rounded


@pytest.mark.parametrize(
    ("definition", "expected"),
    [
        (
            "ts TIMESTAMP DEFAULT CURRENT_TIMESTAMP",
            dt.datetime(2026, 11, 21, 21, 25, 18, tzinfo=dt.UTC),
        ),
        (
            "ts TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP",
            dt.datetime(2026, 11, 21, 21, 25, 18, 233733, tzinfo=dt.UTC),
        ),
        (
            "ts TIMESTAMP(2) DEFAULT current_timestamp(2)",
            dt.datetime(2026, 11, 21, 21, 25, 18, 230000, tzinfo=dt.UTC),
        ),
        ("d DATETIME(6) DEFAULT NOW(6)", dt.datetime(2026, 11, 22, 2, 25, 18, 233733)),
        ("d DATETIME(3) DEFAULT (NOW(6))", dt.datetime(2026, 11, 22, 2, 25, 18, 233000)),
        ("d DATETIME DEFAULT LOCALTIMESTAMP", dt.datetime(2026, 11, 22, 2, 25, 18)),
        ("d DATE DEFAULT CURDATE()", dt.date(2026, 11, 22)),
        ("t TIME(1) DEFAULT CURTIME(1)", (2 * 3600 + 25 * 60 + 18) * 10**6 + 200000),
    ],
)
def test_current_timestamp_gives_the_statement_time_cut_to_the_columns_digits(
    definition: str, expected: object
) -> None:
    assert value(definition) == expected


def test_a_system_time_zone_is_converted_by_the_source_server() -> None:
    clock = FakeClock()
    system = StatementContext(StatementTime(1795296318, 233733, "SYSTEM"))
    assert value("d DATETIME(6) DEFAULT NOW(6)", system, clock) == dt.datetime(
        2026, 11, 21, 18, 25, 18, 233733
    )
    assert value("ts TIMESTAMP DEFAULT '2020-01-01 00:00:00'", system, clock) == dt.datetime(
        2020, 1, 1, 3, tzinfo=dt.UTC
    )
    assert clock.asked == ["SYSTEM", "SYSTEM"]


def test_fractional_digits_the_event_does_not_carry_are_refused_not_guessed() -> None:
    seconds_only = StatementContext(StatementTime(1795296318, None, "+00:00"))
    assert value("ts TIMESTAMP DEFAULT CURRENT_TIMESTAMP", seconds_only) == dt.datetime(
        2026, 11, 21, 21, 25, 18, tzinfo=dt.UTC
    )
    with pytest.raises(UnsupportedDefaultError, match="Q_HRNOW"):
        value("ts TIMESTAMP(3) DEFAULT CURRENT_TIMESTAMP(3)", seconds_only)
    no_zone = StatementContext(StatementTime(1795296318, 1, None))
    with pytest.raises(UnsupportedDefaultError, match="time zone"):
        value("d DATETIME DEFAULT NOW()", no_zone)


@pytest.mark.parametrize(
    ("definition", "expected"),
    [
        ("a INT NOT NULL", 0),
        ("a DECIMAL(8,2) NOT NULL", Decimal("0.00")),
        ("a VARCHAR(5) NOT NULL", ""),
        ("a CHAR(3) NOT NULL", ""),
        ("a BINARY(4) NOT NULL", b"\0\0\0\0"),
        ("a BLOB NOT NULL", b""),
        ("a DATE NOT NULL", None),
        ("a DATETIME(3) NOT NULL", None),
        ("a TIME NOT NULL", 0),
        ("a YEAR NOT NULL", 0),
        ("a ENUM('x','y') NOT NULL", "x"),
        ("a SET('x','y') NOT NULL", ""),
        ("a BIT(3) NOT NULL", 0),
        ("a DOUBLE NOT NULL", 0.0),
        ("a UUID NOT NULL", "00000000-0000-0000-0000-000000000000"),
        ("a INET4 NOT NULL", "0.0.0.0"),
        ("a INET6 NOT NULL", "::"),
        ("a BIGINT UNSIGNED NOT NULL", Decimal(0)),
        ("a INT", None),
        ("a INT DEFAULT NULL", None),
    ],
)
def test_not_null_without_default_gets_mariadbs_implicit_default(
    definition: str, expected: object
) -> None:
    assert value(definition) == expected


def test_with_explicit_defaults_off_the_first_timestamp_column_gets_the_statement_time() -> None:
    legacy = StatementContext(TIME, explicit_timestamps=False)
    first = value("ts TIMESTAMP", legacy, timestamp_rank=TimestampRank.FIRST)
    assert first == dt.datetime(2026, 11, 21, 21, 25, 18, tzinfo=dt.UTC)
    assert value("ts TIMESTAMP", legacy, timestamp_rank=TimestampRank.LATER) is None  # zero date
    assert value("ts TIMESTAMP NULL", legacy, timestamp_rank=TimestampRank.FIRST) is None
    with pytest.raises(UnsupportedDefaultError, match="first TIMESTAMP"):
        value("ts TIMESTAMP", legacy, timestamp_rank=TimestampRank.UNKNOWN)


@pytest.mark.parametrize(
    ("definition", "problem"),
    [
        ("c INT DEFAULT (1 + 2)", "expression"),
        ("c VARCHAR(36) DEFAULT uuid()", "expression"),
        ("c INT AS (id * 2) STORED", "generated"),
        ("c INT AUTO_INCREMENT UNIQUE", "AUTO_INCREMENT"),
        ("c TINYINT DEFAULT 300", "outside the range"),
        ("c INT UNSIGNED DEFAULT -1", "outside the range"),
        ("c DECIMAL(4,2) DEFAULT 123.4", "does not fit"),
        ("c ENUM('a','b') DEFAULT 'c'", "not one label"),
        ("c FLOAT(5,2) DEFAULT 1.234", "more digits"),
        ("c VARCHAR(5) DEFAULT X'E9'", "charset"),
        ("c DATE DEFAULT '2020-02-30'", "day is out of range"),
        ("c GEOMETRY NOT NULL", "GEOMETRY"),
    ],
)
def test_a_value_binlake_cannot_reproduce_exactly_is_refused_naming_table_column_and_ddl(
    definition: str, problem: str
) -> None:
    with pytest.raises(UnsupportedDefaultError, match=problem) as caught:
        value(definition)
    error = caught.value
    assert (error.table, error.column) == ("db.t", "c")
    assert error.statement == f"ALTER TABLE t ADD {definition}"
    assert "binlake snapshot --tables db.t" in error.hint


def test_the_statement_context_is_read_from_the_query_events_status_variables() -> None:
    status = QueryStatus(
        b"",
        (
            ("flags2", 0),
            ("sql_mode", MODE_NO_BACKSLASH_ESCAPES),
            ("charset", (8, 8, 45)),
            ("time_zone", "SYSTEM"),
            ("hrnow", 529649),
        ),
    )
    event = QueryEvent(1, 0, 0, status, "db", b"ALTER TABLE t ADD c INT")
    context = StatementContext.of_event(1795296388, event)
    assert context == StatementContext(
        StatementTime(1795296388, 529649, "SYSTEM"),
        sql_mode=MODE_NO_BACKSLASH_ESCAPES,
        charset="latin1",
        explicit_timestamps=False,
    )
    modern = QueryEvent(1, 0, 0, QueryStatus(b"", (("flags2", 1 << 24),)), "db", b"")
    assert StatementContext.of_event(5, modern).explicit_timestamps
    assert StatementContext.of_event(5, modern).time == StatementTime(5, None, None)
