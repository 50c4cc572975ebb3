"""Schema evolution and table DDL on real Iceberg tables through Spark: planned changes run as
Spark SQL, the schema read back, rows kept; TRUNCATE, DROP (keep / drop), re-create, RENAME."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import SparkSession

from binlake.binlog.constants import ColumnType as T
from binlake.binlog.names import TableName
from binlake.binlog.tablemap import TableMap
from binlake.ddl.parse import DdlStatement, parse_ddl
from binlake.lake.schema.evolution import changelog_schema, plan_evolution, target_schema
from binlake.lake.schema.sql import create_table_statements, table_name
from binlake.lake.spark.lineage import latest_binlake_summary
from binlake.lake.spark.lookup import catalog_can_rename, read_lake_schema, table_exists
from binlake.lake.tables.actions import (
    DROPPED_AT_PROPERTY,
    ClaimTableName,
    DeleteAllRows,
    DropLakeTable,
    KeepDroppedTable,
    RenameLakeTable,
    dropped_table_name,
    run_table_action,
)
from binlake.lake.write.commit import execute_with_commit_properties

UTF8MB4 = 45
Spec = tuple[str, int, int, bool]  # name, type code, metadata, NOT NULL


N = TableName.parse


def table_map(table: str, *columns: Spec, key: tuple[str, ...] = ("id",)) -> TableMap:
    names = tuple(c[0] for c in columns)
    return TableMap(
        table_id=9,
        flags=1,
        schema="shop",
        table=table,
        column_types=tuple(c[1] for c in columns),
        column_metadata=tuple(c[2] for c in columns),
        nullable=tuple(not c[3] for c in columns),
        unsigned=(False,) * len(columns),
        column_charsets=tuple(UTF8MB4 if c[1] in (T.VARCHAR, T.BLOB) else None for c in columns),
        column_names=names,
        primary_key=tuple(names.index(k) for k in key) or None,
    )


def ddl(*queries: str) -> list[DdlStatement]:
    parsed = [parse_ddl("shop", query) for query in queries]
    assert all(p is not None for p in parsed)
    return [p for p in parsed if p is not None]


def namespace() -> str:
    return f"n_{uuid.uuid4().hex[:10]}"


def create(spark: SparkSession, tm: TableMap, ns: str) -> str:
    name = table_name("lake", [ns], tm.table)
    for statement in create_table_statements(name, target_schema(tm)):
        spark.sql(statement)
    return name


def rows(spark: SparkSession, table: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in spark.sql(f"SELECT * FROM {table} ORDER BY 1").collect()]


def described(spark: SparkSession, table: str) -> list[tuple[str, str, str, bool]]:
    schema = read_lake_schema(spark, table, N("shop.t"))
    return [(c.name, c.iceberg_type, c.source_type, c.nullable) for c in schema.columns]


def position(n: int) -> dict[str, str]:
    return {
        "binlake.position": f"mariadb-bin.000002:{n}",
        "binlake.gtid": f"0-1-{n}",
        "binlake.relay": f"relay-bin.000001:{n}",
        "binlake.batch": str(n),
    }


ORDERS = table_map(
    "orders",
    ("id", T.LONG, 0, True),
    ("name", T.VARCHAR, 40, False),
    ("qty", T.LONG, 0, False),
    ("price", T.NEWDECIMAL, 10 << 8 | 2, False),
    ("flag", T.LONG, 0, True),
)


def test_planned_changes_evolve_the_table_keep_its_rows_and_replay_as_nothing(
    spark: SparkSession,
) -> None:
    table = create(spark, ORDERS, namespace())
    spark.sql(f"INSERT INTO {table} VALUES (1, 'apple', 3, 1.50, 1), (2, 'pear', 5, 2.25, 0)")
    evolved = table_map(
        "orders",
        ("id", T.LONGLONG, 0, True),
        ("title", T.VARCHAR, 400, False),
        ("price", T.NEWDECIMAL, 12 << 8 | 2, False),
        ("flag", T.LONG, 0, False),
        ("note", T.BLOB, 2, True),
    )
    statements = ddl(
        "ALTER TABLE orders MODIFY id BIGINT NOT NULL, DROP COLUMN qty",
        "ALTER TABLE orders CHANGE name title VARCHAR(100), MODIFY price DECIMAL(12,2), "
        "MODIFY flag INT NULL, ADD note TEXT NOT NULL",
    )
    changes = plan_evolution(read_lake_schema(spark, table, N("shop.orders")), evolved, statements)
    for change in changes:
        for statement in change.statements(table):
            spark.sql(statement)

    assert described(spark, table) == [
        ("id", "long", "BIGINT", False),
        ("title", "string", "VARCHAR", True),
        ("price", "decimal(12,2)", "DECIMAL(12,2)", True),
        ("flag", "int", "INT", True),
        ("note", "string", "TEXT", True),
    ]
    assert read_lake_schema(spark, table, N("shop.orders")).key == ("id",)
    assert rows(spark, table) == [
        (1, "apple", Decimal("1.50"), 1, None),
        (2, "pear", Decimal("2.25"), 0, None),
    ]
    spark.sql(f"INSERT INTO {table} VALUES (3, 'fig', 9.99, NULL, 'new')")
    assert rows(spark, table)[-1] == (3, "fig", Decimal("9.99"), None, "new")
    replayed = plan_evolution(read_lake_schema(spark, table, N("shop.orders")), evolved, statements)
    assert replayed == []


def test_primary_key_moves_to_a_required_column_and_the_old_key_column_is_dropped(
    spark: SparkSession,
) -> None:
    old = table_map("items", ("id", T.LONG, 0, True), ("sku", T.VARCHAR, 40, True))
    table = create(spark, old, namespace())
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a-1'), (2, 'b-2')")
    new = table_map("items", ("code", T.VARCHAR, 40, True), key=("code",))
    statements = ddl("ALTER TABLE items DROP PRIMARY KEY, DROP id, CHANGE sku code VARCHAR(10)")
    current = read_lake_schema(spark, table, N("shop.items"))
    for change in plan_evolution(current, new, statements):
        for statement in change.statements(table):
            spark.sql(statement)
    after = read_lake_schema(spark, table, N("shop.items"))
    assert (after.key, [c.name for c in after.columns]) == (("code",), ["code"])
    assert rows(spark, table) == [("a-1",), ("b-2",)]
    assert plan_evolution(after, new, statements) == []


def test_change_log_table_reads_back_with_its_columns(spark: SparkSession) -> None:
    keyless = table_map("events", ("a", T.LONG, 0, False), key=())
    table = create(spark, keyless, namespace())
    schema = read_lake_schema(spark, table, N("shop.events"))
    assert [(c.name, c.iceberg_type, c.nullable) for c in schema.columns] == [
        (c.name, c.iceberg_type, c.nullable) for c in changelog_schema(keyless).columns
    ]
    assert schema.key == ()
    grown = table_map("events", ("a", T.LONG, 0, False), ("b", T.LONG, 0, False), key=())
    changes = plan_evolution(schema, grown, ddl("ALTER TABLE events ADD b INT"))
    assert [c.statements(table) for c in changes] == [
        [f"ALTER TABLE {table} ADD COLUMN `b` INT COMMENT 'INT'"]
    ]


def test_truncate_deletes_all_rows_in_a_positioned_commit(spark: SparkSession) -> None:
    ns = namespace()
    table = create(spark, ORDERS, ns)
    spark.sql(f"INSERT INTO {table} VALUES (1, 'apple', 3, 1.50, 1)")
    lake = {N("shop.orders"): table}.__getitem__
    run_table_action(
        spark,
        DeleteAllRows(N("shop.orders")),
        lake_table=lake,
        position="mariadb-bin.000002:700",
        commit_properties=position(700),
    )
    assert rows(spark, table) == []
    summary = latest_binlake_summary(spark, table)
    assert summary is not None and summary["binlake.position"] == "mariadb-bin.000002:700"


#: How a table is moved: renamed by the catalog (JDBC catalogs, the embedded SQLite one), or
#: copied where the catalog cannot rename (Hadoop catalogs).
MOVES = pytest.mark.parametrize("can_rename", [True, False], ids=["rename", "copy"])


@MOVES
def test_kept_dropped_table_stays_until_the_source_recreates_it_then_moves_aside(
    spark: SparkSession, can_rename: bool
) -> None:
    ns = namespace()
    table = create(spark, ORDERS, ns)
    spark.sql(f"INSERT INTO {table} VALUES (1, 'apple', 3, 1.50, 1)")
    lake = {N("shop.orders"): table}.__getitem__
    drop_at = "mariadb-bin.000002:800"
    for _ in range(2):  # a replay after a crash finds it done
        run_table_action(
            spark,
            KeepDroppedTable(N("shop.orders")),
            lake_table=lake,
            position=drop_at,
            commit_properties=position(800),
        )
    assert rows(spark, table) == [(1, "apple", 3, Decimal("1.50"), 1)]
    marker = spark.sql(f"SHOW TBLPROPERTIES {table} ('{DROPPED_AT_PROPERTY}')").collect()
    assert marker[0][1] == drop_at

    assert catalog_can_rename(spark, table)  # the embedded catalog (SQLite, JDBC) renames
    for _ in range(2):
        run_table_action(
            spark,
            ClaimTableName(N("shop.orders")),
            lake_table=lake,
            position="mariadb-bin.000002:900",
            commit_properties=position(900),
            can_rename=can_rename,
        )
    aside = dropped_table_name(table, drop_at)
    assert aside.endswith("`orders__dropped_000002_800`")
    assert not table_exists(spark, table)
    assert rows(spark, aside) == [(1, "apple", 3, Decimal("1.50"), 1)]
    assert read_lake_schema(spark, aside, N("shop.orders")).key == ("id",)

    recreated = create(spark, ORDERS, ns)  # the new source table's first TABLE_MAP
    run_table_action(
        spark,
        ClaimTableName(N("shop.orders")),
        lake_table=lake,
        position="mariadb-bin.000002:900",
        commit_properties=position(900),
        can_rename=can_rename,
    )
    assert table_exists(spark, recreated) and rows(spark, recreated) == []


@MOVES
def test_rename_moves_rows_key_and_position_and_drop_removes_the_table(
    spark: SparkSession, can_rename: bool
) -> None:
    ns = namespace()
    table = create(spark, ORDERS, ns)
    spark.sql(f"INSERT INTO {table} VALUES (1, 'apple', 3, 1.50, 1)")
    target = table_name("lake", [ns], "orders_v2")
    lake = {N("shop.orders"): table, N("shop.orders_v2"): target}.__getitem__
    spark.sql(f"INSERT INTO {table} VALUES (2, 'pear', 1, 0.50, 1)")
    execute_with_commit_properties(
        spark, f"DELETE FROM {table} WHERE id = 2", position(900), "shop.orders", lake_table=table
    )
    for _ in range(2):  # replayed: the old table is gone, nothing more to do
        run_table_action(
            spark,
            RenameLakeTable(N("shop.orders"), N("shop.orders_v2")),
            lake_table=lake,
            position="mariadb-bin.000002:1000",
            commit_properties=position(1000),
            can_rename=can_rename,
        )
    assert not table_exists(spark, table)
    assert rows(spark, target) == [(1, "apple", 3, Decimal("1.50"), 1)]
    assert read_lake_schema(spark, target, N("shop.orders_v2")).key == ("id",)
    summary = latest_binlake_summary(spark, target)
    # A rename keeps the table's snapshots (its position: no transaction of the table lies
    # between it and the RENAME, or it would have been applied first); a copy commits at the
    # RENAME's position.
    moved_at = "mariadb-bin.000002:900" if can_rename else "mariadb-bin.000002:1000"
    assert summary is not None and summary["binlake.position"] == moved_at

    run_table_action(
        spark,
        DropLakeTable(N("shop.orders_v2")),
        lake_table=lake,
        position="mariadb-bin.000002:1100",
        commit_properties=position(1100),
    )
    assert not table_exists(spark, target)
