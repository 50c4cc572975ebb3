"""ALTER TABLE on tables with rows, end to end (real MariaDB, real Spark, real Iceberg): the rows
a table already has get the values the ALTER gave them at the source, although no row event
carries them, and a table whose last change is an ALTER is at the ALTER's position.

Each test has its own database, state folder and namespace, runs `binlake replicate` in this
process until caught up, and ends with `binlake verify` (every value compared exactly at one
source position) and the exactly-once check of every table's snapshot history.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest

from binlake.config import load_config
from binlake.errors import UnsupportedDefaultError
from binlake.lake.catalog.target import lake_target
from binlake.lake.spark.lineage import current_lineage
from binlake_dev.sandbox import MariaDBSandbox
from lake_builder import as_table
from replicate_testing import (
    assert_history_is_exactly_once,
    assert_verify_passes,
    config_for,
    module_source,
    replicate_in_process,
)

source = module_source("alter-defaults-source")


def run_statements(source: MariaDBSandbox, database: str | None, statements: list[str]) -> None:
    """In one session (session settings such as time_zone hold for the statements after)."""
    with source.connect(database) as conn, conn.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def create_database(source: MariaDBSandbox, database: str, statements: list[str]) -> None:
    """``CREATE DATABASE``, then ``statements`` (names qualified), in a session without a
    current database."""
    run_statements(source, None, [f"CREATE DATABASE {database}", *statements])


def table_with_ids(database: str) -> list[str]:
    """``t``: a key column only, and the rows 1 and 2."""
    return [
        f"CREATE TABLE {database}.t (id INT PRIMARY KEY)",
        f"INSERT INTO {database}.t VALUES (1), (2)",
    ]


def replicate_and_check(
    tmp_path: Path, source: MariaDBSandbox, spark: object, database: str
) -> Path:
    """`binlake replicate` in this process until caught up, `verify` and the exactly-once
    check of every table's history; returns the config."""
    config = config_for(tmp_path, source, spark, database)
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
    return config


def lake_rows(spark: object, config: Path, table: str, columns: str) -> list[tuple[object, ...]]:
    name = lake_target(load_config(config)).lake_table(as_table(table))
    query = f"SELECT {columns} FROM {name} ORDER BY id"
    return [tuple(row) for row in spark.sql(query).collect()]  # type: ignore[attr-defined]


def positions(spark: object, config: Path, table: str) -> list[str]:
    """``binlake.position`` of the table's binlake snapshots, oldest first."""
    name = lake_target(load_config(config)).lake_table(as_table(table))
    lineage = current_lineage(spark, name)  # type: ignore[arg-type]
    return [s.binlake["binlake.position"] for s in reversed(lineage) if s.binlake]


def test_existing_rows_get_the_added_columns_default_in_the_lake(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    database = "alt_literals"
    create_database(
        source,
        database,
        [
            f"CREATE TABLE {database}.t (id INT PRIMARY KEY, name VARCHAR(10))",
            f"INSERT INTO {database}.t VALUES (1, 'a'), (2, 'b'), (3, NULL)",
        ],
    )
    run_statements(
        source,
        database,
        [
            "ALTER TABLE t ADD i INT DEFAULT 7, ADD u BIGINT UNSIGNED DEFAULT 18446744073709551615,"
            " ADD d DECIMAL(8,2) DEFAULT 1.555, ADD ds DECIMAL(8,2) DEFAULT '-0.5',"
            " ADD f FLOAT DEFAULT 0.1, ADD g DOUBLE DEFAULT 1e300, ADD y YEAR DEFAULT 69,"
            " ADD b BIT(5) DEFAULT b'101', ADD flag TINYINT DEFAULT TRUE",
            "ALTER TABLE t ADD s VARCHAR(10) DEFAULT 'x  y' 'z', ADD c CHAR(5) DEFAULT 'ab  ',"
            " ADD l VARCHAR(10) CHARACTER SET latin1 DEFAULT 'déjà', ADD n VARCHAR(10) DEFAULT"
            " _latin1 'é', ADD e ENUM('small','Big') DEFAULT 'big', ADD st SET('x','y','z')"
            " DEFAULT 'z,x', ADD bin BINARY(4) DEFAULT 'ab', ADD vb VARBINARY(4) DEFAULT X'00FF',"
            " ADD esc VARCHAR(10) DEFAULT 'a\\tb''c', ADD uid UUID DEFAULT"
            " '123E4567-E89B-12D3-A456-426655440000', ADD ip INET6 DEFAULT '::ffff:1.2.3.4'",
            "ALTER TABLE t ADD dt DATE DEFAULT '2020-02-29', ADD dtm DATETIME(6) DEFAULT"
            " '2020-01-02 03:04:05.123456', ADD cut DATETIME DEFAULT '2020-01-02 03:04:05.9',"
            " ADD tm TIME(3) DEFAULT '-838:59:59.5', ADD zero DATE DEFAULT '0000-00-00',"
            " ADD nul INT DEFAULT NULL, ADD plain INT",
            "INSERT INTO t (id, name) VALUES (4, 'd')",
            "UPDATE t SET i = 8, s = 'changed' WHERE id = 2",
            "ALTER TABLE t ADD n1 INT NOT NULL, ADD n2 DECIMAL(6,3) NOT NULL, ADD n3 VARCHAR(3)"
            " NOT NULL, ADD n4 BINARY(3) NOT NULL, ADD n5 ENUM('p','q') NOT NULL, ADD n6 DATE"
            " NOT NULL, ADD n7 TIME(2) NOT NULL, ADD n8 INET4 NOT NULL, ADD n9 TEXT NOT NULL",
            "UPDATE t SET n1 = 5 WHERE id = 3",
        ],
    )
    with source.connect(database) as conn:  # a latin1 client: its statement's bytes are latin1
        conn.query("SET NAMES latin1")
        conn.query("ALTER TABLE t ADD lat VARCHAR(5) DEFAULT 'é'".encode("latin1"))
    config = replicate_and_check(tmp_path, source, spark, database)
    assert lake_rows(spark, config, f"{database}.t", "lat")[0] == ("é",)
    rows = lake_rows(spark, config, f"{database}.t", "id, i, d, s, c, l, n, e, st, bin, n5, zero")
    assert rows[0] == (
        1,
        7,
        Decimal("1.56"),
        "x  yz",
        "ab",
        "déjà",
        "Ã©",
        "Big",
        "x,z",
        b"ab\0\0",
        "p",
        None,
    )
    assert rows[1][1] == 8 and rows[1][3] == "changed"


def test_current_timestamp_defaults_give_existing_rows_the_alters_statement_time(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    database = "alt_now"
    create_database(source, database, table_with_ids(database))
    run_statements(
        source,
        database,
        [
            "SET time_zone = '+05:00'",
            "ALTER TABLE t ADD ts TIMESTAMP DEFAULT CURRENT_TIMESTAMP, ADD ts6 TIMESTAMP(6)"
            " DEFAULT CURRENT_TIMESTAMP(6), ADD dt6 DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6),"
            " ADD dt3 DATETIME(3) DEFAULT NOW(6), ADD d DATE DEFAULT CURDATE()",
            "SET time_zone = 'SYSTEM'",  # converted by the source server itself
            "ALTER TABLE t ADD sys6 DATETIME(6) DEFAULT NOW(6), ADD sysf TIMESTAMP(2) DEFAULT"
            " CURRENT_TIMESTAMP(2) NOT NULL",
            "SET explicit_defaults_for_timestamp = 0",
            "CREATE TABLE legacy (id INT PRIMARY KEY)",
            "INSERT INTO legacy VALUES (1)",
            "ALTER TABLE legacy ADD first_ts TIMESTAMP, ADD second_ts TIMESTAMP",
        ],
    )
    source_ts6 = source.execute(f"SELECT ts6 FROM {database}.t WHERE id = 1")[0][0]
    assert source_ts6.microsecond != 0 or source_ts6.second != 0
    config = replicate_and_check(tmp_path, source, spark, database)
    ((ts6, dt6),) = lake_rows(spark, config, f"{database}.t", "ts6, dt6")[:1]
    assert isinstance(ts6, dt.datetime) and isinstance(dt6, dt.datetime)
    assert dt6 - ts6.replace(tzinfo=None) == dt.timedelta(hours=5)  # one instant, two zones
    (legacy,) = lake_rows(spark, config, f"{database}.legacy", "first_ts, second_ts")
    assert legacy[0] is not None and legacy[1] is None  # CURRENT_TIMESTAMP; the zero date


def test_a_table_whose_last_change_is_an_alter_verifies_without_waiting(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    database = "alt_last"
    create_database(
        source,
        database,
        [
            f"CREATE TABLE {database}.added (id INT PRIMARY KEY, a INT)",
            f"CREATE TABLE {database}.dropped (id INT PRIMARY KEY, a INT, b INT)",
            f"CREATE TABLE {database}.indexed (id INT PRIMARY KEY, a INT)",
            f"INSERT INTO {database}.added VALUES (1, 1)",
            f"INSERT INTO {database}.dropped VALUES (1, 1, 1)",
            f"INSERT INTO {database}.indexed VALUES (1, 1)",
        ],
    )
    alters = {
        "added": "ALTER TABLE {db}.added ADD COLUMN c VARCHAR(5)",
        "dropped": "ALTER TABLE {db}.dropped DROP COLUMN b, RENAME COLUMN a TO z",
        "indexed": "ALTER TABLE {db}.indexed ADD INDEX ix (a)",
    }
    at = {}
    for table, statement in alters.items():
        source.execute(statement.format(db=database))
        file, offset = source.execute("SHOW MASTER STATUS")[0][:2]
        at[table] = f"{file}:{offset}"
    config = config_for(tmp_path, source, spark, database)
    replicate_in_process(config, spark)
    checked = assert_verify_passes(config, spark)
    assert len(checked) == 3
    assert_history_is_exactly_once(config, spark)
    for table, position in at.items():
        assert positions(spark, config, f"{database}.{table}")[-1] == position, table


def test_several_alters_in_a_row_keep_their_order_and_a_backfill_runs_once(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    database = "alt_order"
    create_database(source, database, table_with_ids(database))
    run_statements(
        source,
        database,
        [
            "ALTER TABLE t ADD c INT DEFAULT 7",
            "ALTER TABLE t DROP COLUMN c",
            "ALTER TABLE t ADD c INT DEFAULT 9",
            "ALTER TABLE t ADD d INT DEFAULT 1, ADD e VARCHAR(3) DEFAULT 'e'",
            "UPDATE t SET d = 5 WHERE id = 1",
            "INSERT INTO t (id) VALUES (3)",
            "ALTER TABLE t RENAME COLUMN e TO f, ADD g INT DEFAULT 4",
        ],
    )
    config = config_for(tmp_path, source, spark, database)
    replicate_in_process(config, spark)
    assert_verify_passes(config, spark)
    assert lake_rows(spark, config, f"{database}.t", "id, c, d, f, g") == [
        (1, 9, 5, "e", 4),
        (2, 9, 1, "e", 4),
        (3, 9, 1, "e", 4),
    ]
    first = positions(spark, config, f"{database}.t")
    run_statements(source, database, ["UPDATE t SET g = 0 WHERE id = 2"])
    replicate_in_process(config, spark)  # a second run: the ALTERs are skipped by position
    assert_verify_passes(config, spark)
    assert_history_is_exactly_once(config, spark)
    assert positions(spark, config, f"{database}.t")[: len(first)] == first
    assert len(positions(spark, config, f"{database}.t")) == len(first) + 1


def test_an_alter_whose_types_wait_for_the_next_table_map_is_backfilled_before_its_rows(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """TEXT(n) picks its type by the charset's bytes: the statement alone cannot place it, so
    the evolution waits for the TABLE_MAP; the backfill still runs, at the ALTER's position."""
    database = "alt_lazy"
    create_database(
        source,
        database,
        [
            *table_with_ids(database),
            f"ALTER TABLE {database}.t ADD note TEXT(100) NOT NULL, ADD k INT DEFAULT 3",
            f"ALTER TABLE {database}.t ADD m INT DEFAULT 11",
            f"INSERT INTO {database}.t (id, note) VALUES (3, 'x')",
        ],
    )
    config = replicate_and_check(tmp_path, source, spark, database)
    assert lake_rows(spark, config, f"{database}.t", "id, note, k, m") == [
        (1, "", 3, 11),
        (2, "", 3, 11),
        (3, "x", 3, 11),
    ]


def test_an_expression_default_on_a_table_with_rows_stops_with_the_unsupported_default_error(
    tmp_path: Path, source: MariaDBSandbox, spark: object
) -> None:
    """An empty table got no values: the same ALTER on it is applied (and positioned)."""
    database = "alt_expression"
    create_database(
        source,
        database,
        [
            f"CREATE TABLE {database}.emptied (id INT PRIMARY KEY)",
            f"INSERT INTO {database}.emptied VALUES (1)",
            f"DELETE FROM {database}.emptied",
            f"ALTER TABLE {database}.emptied ADD c INT DEFAULT (1 + 2), ADD n INT AUTO_INCREMENT"
            " UNIQUE",
        ],
    )
    file, offset = source.execute("SHOW MASTER STATUS")[0][:2]
    run_statements(
        source,
        None,
        [
            f"CREATE TABLE {database}.t (id INT PRIMARY KEY)",
            f"INSERT INTO {database}.t VALUES (1)",
            f"ALTER TABLE {database}.t ADD c INT DEFAULT (1 + 2)",
        ],
    )
    config = config_for(tmp_path, source, spark, database)
    with pytest.raises(UnsupportedDefaultError, match="expression") as caught:
        replicate_in_process(config, spark)
    assert caught.value.table == f"{database}.t"
    assert caught.value.column == "c"
    assert "DEFAULT (1 + 2)" in (caught.value.statement or "")
    assert "snapshot" in caught.value.hint
    assert positions(spark, config, f"{database}.emptied")[-1] == f"{file}:{offset}"
