"""An ALTER applied when it is read: its column types mapped from their text as the TABLE_MAP
would map them (ddl_types), the schema plan made from the statement alone
(plan_from_statement, the same plan plan_evolution makes from the TABLE_MAP that follows), and
the backfill of the rows the table had (backfill)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from apply_testing import Spec, orders_map
from binlake.binlog.constants import ColumnType as T
from binlake.ddl.defaults import StatementContext
from binlake.ddl.parse import AlterTable, ColumnDefinition, parse_ddl
from binlake.ddl.temporal import StatementTime
from binlake.ddl.types import MODE_ORACLE, MODE_REAL_AS_FLOAT, charset_unsure, lake_column_of
from binlake.errors import UnsupportedDefaultError
from binlake.lake.schema.alterations import (
    AddColumn,
    DropColumn,
    RenameColumn,
    SetSourceType,
    WidenColumnType,
)
from binlake.lake.schema.backfill import (
    AlterColumns,
    backfill_statement,
    backfill_values,
    columns_after,
    final_names,
    sql_literal,
)
from binlake.lake.schema.evolution import plan_evolution, plan_from_statement
from binlake.typemap import IcebergType, LakeColumn, LakeSchema, lake_column, lake_schema

UTF8MB4, BINARY = 45, 63
CONTEXT = StatementContext(StatementTime(1795296318, 233733, "+00:00"))


def alter(text: str) -> AlterTable:
    statement = parse_ddl("shop", text)
    assert isinstance(statement, AlterTable)
    return statement


def definition(text: str) -> ColumnDefinition:
    (clause,) = alter(f"ALTER TABLE orders ADD {text}").clauses
    return clause.column  # type: ignore[union-attr]


def mapped(text: str, index: int = 0) -> LakeColumn | None:
    return lake_column_of(definition(text), index)


ID: tuple[str, Spec] = ("id", (T.LONG, 0, False, None))


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("c INT(11)", (T.LONG, 0, False, None)),
        ("c INTEGER UNSIGNED", (T.LONG, 0, True, None)),
        ("c INT ZEROFILL", (T.LONG, 0, True, None)),
        ("c BOOL", (T.TINY, 0, False, None)),
        ("c MEDIUMINT UNSIGNED", (T.INT24, 0, True, None)),
        ("c BIGINT", (T.LONGLONG, 0, False, None)),
        ("c BIGINT UNSIGNED", (T.LONGLONG, 0, True, None)),
        ("c DECIMAL(10,2)", (T.NEWDECIMAL, 10 << 8 | 2, False, None)),
        ("c NUMERIC(8)", (T.NEWDECIMAL, 8 << 8, False, None)),
        ("c DEC", (T.NEWDECIMAL, 10 << 8, False, None)),
        ("c DECIMAL(40,2)", (T.NEWDECIMAL, 40 << 8 | 2, False, None)),
        ("c FLOAT", (T.FLOAT, 4, False, None)),
        ("c FLOAT(30)", (T.DOUBLE, 8, False, None)),
        ("c DOUBLE PRECISION", (T.DOUBLE, 8, False, None)),
        ("c REAL", (T.DOUBLE, 8, False, None)),
        ("c BIT", (T.BIT, 1, False, None)),
        ("c BIT(64)", (T.BIT, 8 << 8, False, None)),
        ("c YEAR(4)", (T.YEAR, 0, False, None)),
        ("c DATE", (T.DATE, 0, False, None)),
        ("c DATETIME(6)", (T.DATETIME2, 6, False, None)),
        ("c TIMESTAMP(3)", (T.TIMESTAMP2, 3, False, None)),
        ("c TIME", (T.TIME2, 0, False, None)),
        ("c VARCHAR(20)", (T.VARCHAR, 80, False, UTF8MB4)),
        ("c NATIONAL VARCHAR(20)", (T.VARCHAR, 60, False, 33)),
        ("c VARCHAR(3) CHARACTER SET binary", (T.VARCHAR, 3, False, BINARY)),
        ("c VARBINARY(8)", (T.VARCHAR, 8, False, BINARY)),
        ("c TEXT", (T.BLOB, 2, False, UTF8MB4)),
        ("c LONG VARCHAR", (T.BLOB, 3, False, UTF8MB4)),
        ("c LONGBLOB", (T.BLOB, 4, False, BINARY)),
        ("c JSON", (T.BLOB, 4, False, UTF8MB4)),
    ],
)
def test_a_type_text_maps_to_the_iceberg_column_its_table_map_column_gives(
    text: str, spec: Spec
) -> None:
    from_map = lake_column(orders_map(ID, ("c", spec)), 1)
    assert mapped(text, 1) == from_map


def test_types_the_table_map_shows_as_strings_map_by_name() -> None:
    assert mapped("c CHAR(3)") == LakeColumn("c", 0, "CHAR", IcebergType.STRING)
    assert mapped("c BINARY(16)") == LakeColumn("c", 0, "BINARY", IcebergType.BINARY)
    assert mapped("c ENUM('a','b') NOT NULL") == LakeColumn(
        "c", 0, "ENUM", IcebergType.STRING, nullable=False
    )
    assert mapped("c UUID") == LakeColumn("c", 0, "UUID", IcebergType.STRING)
    assert mapped("c POINT") == LakeColumn("c", 0, "GEOMETRY", IcebergType.BINARY)
    real = lake_column_of(definition("c REAL"), 0, sql_mode=MODE_REAL_AS_FLOAT)
    assert real is not None and real.type is IcebergType.FLOAT


def test_type_texts_only_the_table_map_can_settle_are_not_placed() -> None:
    assert mapped("c TEXT(100)") is None  # the size in bytes of the charset picks the type
    assert mapped("c BLOB(10)") is None
    assert mapped("c SOMETYPE") is None
    assert lake_column_of(definition("c DATE"), 0, sql_mode=MODE_ORACLE) is None


def test_a_text_column_naming_no_charset_in_an_all_binary_table_is_left_to_the_table_map() -> None:
    binary_table = [
        LakeColumn("id", 0, "INT", IcebergType.INT),
        LakeColumn("b", 1, "VARBINARY", IcebergType.BINARY),
    ]
    mixed_table = [*binary_table, LakeColumn("t", 2, "TEXT", IcebergType.STRING)]
    column = mapped("c VARCHAR(5)")
    assert column is not None
    assert charset_unsure(definition("c VARCHAR(5)"), column, binary_table)
    assert not charset_unsure(definition("c VARCHAR(5) CHARSET utf8mb4"), column, binary_table)
    assert not charset_unsure(definition("c VARCHAR(5)"), column, mixed_table)
    assert not charset_unsure(definition("c VARCHAR(5)"), column, binary_table[:1])


def test_a_timestamp_is_not_null_unless_said_when_explicit_defaults_are_off() -> None:
    legacy = lake_column_of(definition("c TIMESTAMP"), 0, explicit_timestamps=False)
    nullable = lake_column_of(definition("c TIMESTAMP NULL"), 0, explicit_timestamps=False)
    assert legacy is not None and not legacy.nullable
    assert nullable is not None and nullable.nullable


# ---- plan_from_statement ----------------------------------------------------------------------

VARCHAR: Spec = (T.VARCHAR, 40, False, UTF8MB4)
INT: Spec = (T.LONG, 0, False, None)
BIGINT: Spec = (T.LONGLONG, 0, False, None)
BEFORE = orders_map(ID, ("name", VARCHAR), ("qty", INT))


def plan_text(current: LakeSchema, statement: str) -> list[object] | None:
    return plan_from_statement(current, alter(statement), lake_column_of)  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("statement", "after"),
    [
        (
            "ALTER TABLE orders ADD note VARCHAR(10)",
            (ID, ("name", VARCHAR), ("qty", INT), ("note", (T.VARCHAR, 40, False, UTF8MB4))),
        ),
        ("ALTER TABLE orders DROP COLUMN qty", (ID, ("name", VARCHAR))),
        ("ALTER TABLE orders RENAME COLUMN name TO title", (ID, ("title", VARCHAR), ("qty", INT))),
        (
            "ALTER TABLE orders CHANGE qty amount BIGINT",
            (ID, ("name", VARCHAR), ("amount", BIGINT)),
        ),
        (
            "ALTER TABLE orders MODIFY qty BIGINT, ADD c INT",
            (ID, ("name", VARCHAR), ("qty", BIGINT), ("c", INT)),
        ),
        ("ALTER TABLE orders DROP name, ADD name INT", (ID, ("qty", INT), ("name", INT))),
        ("ALTER TABLE orders ADD INDEX ix (qty)", (ID, ("name", VARCHAR), ("qty", INT))),
    ],
)
def test_the_plan_from_the_statement_equals_the_plan_from_the_table_map_that_follows(
    statement: str, after: tuple[tuple[str, Spec], ...]
) -> None:
    current = lake_schema(BEFORE)
    expected = plan_evolution(current, orders_map(*after), [alter(statement)])
    assert plan_text(current, statement) == expected


def test_a_statement_planned_again_after_a_crash_plans_nothing_more() -> None:
    current = lake_schema(BEFORE)
    after = lake_schema(orders_map(ID, ("title", VARCHAR), ("c", INT)))
    statement = "ALTER TABLE orders RENAME COLUMN name TO title, DROP qty, ADD c INT"
    assert plan_text(current, statement) == [
        DropColumn("qty"),
        RenameColumn("name", "title"),
        AddColumn(LakeColumn("c", 2, "INT", IcebergType.INT)),
    ]
    assert plan_text(after, statement) == []


def test_a_retyped_column_widens_and_a_key_column_stays_required() -> None:
    current = lake_schema(BEFORE)
    widened = LakeColumn("id", 0, "BIGINT", IcebergType.LONG, nullable=False)
    assert plan_text(current, "ALTER TABLE orders MODIFY id BIGINT") == [
        WidenColumnType("id", "int", widened),
        SetSourceType("id", "BIGINT"),
    ]


def test_what_the_statement_alone_cannot_place_waits_for_the_table_map() -> None:
    current = lake_schema(BEFORE)
    assert plan_text(current, "ALTER TABLE orders ADD big TEXT(70000)") is None
    assert plan_text(current, "ALTER TABLE orders DROP COLUMN id") is None  # the key


# ---- backfill ---------------------------------------------------------------------------------


def test_backfill_values_are_the_added_columns_defaults_in_the_evolved_schema() -> None:
    before = lake_schema(BEFORE)
    statement = alter(
        "ALTER TABLE orders ADD a INT DEFAULT 7, ADD b VARCHAR(5), ADD c DATE NOT NULL, "
        "ADD d TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6)"
    )
    after = lake_schema(
        orders_map(
            ID,
            ("name", VARCHAR),
            ("qty", INT),
            ("a", INT),
            ("b", VARCHAR),
            ("c", (T.DATE, 0, False, None)),
            ("d", (T.TIMESTAMP2, 6, False, None)),
        )
    )
    values = backfill_values(statement, CONTEXT, AlterColumns(before.columns, after))
    assert [(c.name, v) for c, v in values] == [
        ("a", 7),
        ("d", dt.datetime(2026, 11, 21, 21, 25, 18, 233733, tzinfo=dt.UTC)),
    ]
    assert backfill_statement("`lake`.`shop`.`orders`", values) == (
        "UPDATE `lake`.`shop`.`orders` SET `a` = 7, "
        "`d` = TIMESTAMP '2026-11-21 21:25:18.233733 UTC'"
    )


def test_add_if_not_exists_of_a_column_the_lake_has_is_refused_when_rows_would_need_a_value() -> (
    None
):
    before = lake_schema(BEFORE)
    quiet = alter("ALTER TABLE orders ADD COLUMN IF NOT EXISTS qty INT")
    assert backfill_values(quiet, CONTEXT, AlterColumns(before.columns, before)) == []
    valued = alter("ALTER TABLE orders ADD COLUMN IF NOT EXISTS qty INT DEFAULT 3")
    with pytest.raises(UnsupportedDefaultError, match="cannot tell") as caught:
        backfill_values(valued, CONTEXT, AlterColumns(before.columns, before))
    assert caught.value.column == "qty"


def test_with_explicit_defaults_off_only_the_tables_first_timestamp_gets_the_statement_time() -> (
    None
):
    legacy = StatementContext(
        StatementTime(1795296318, 233733, "+00:00"), explicit_timestamps=False
    )
    stamp: Spec = (T.TIMESTAMP2, 0, False, None)
    before = lake_schema(BEFORE)
    with_a = lake_schema(orders_map(ID, ("name", VARCHAR), ("qty", INT), ("a", stamp)))
    after = lake_schema(orders_map(ID, ("name", VARCHAR), ("qty", INT), ("a", stamp), ("b", stamp)))
    both = alter("ALTER TABLE orders ADD a TIMESTAMP, ADD b TIMESTAMP")
    values = backfill_values(both, legacy, AlterColumns(before.columns, after))
    assert [c.name for c, _value in values] == ["a"]  # b: the zero date, null in the lake
    later = alter("ALTER TABLE orders ADD b TIMESTAMP")
    assert backfill_values(later, legacy, AlterColumns(with_a.columns, after)) == []
    placed = alter("ALTER TABLE orders ADD b TIMESTAMP FIRST")  # first in the table, not in time
    with pytest.raises(UnsupportedDefaultError, match="first TIMESTAMP"):
        backfill_values(placed, legacy, AlterColumns(with_a.columns, after))


def test_a_backfill_evolved_with_later_alters_follows_their_renames_and_drops() -> None:
    later = [
        alter("ALTER TABLE orders RENAME COLUMN a TO b"),
        alter("ALTER TABLE renamed CHANGE b c INT, DROP z"),  # after RENAME TABLE orders ...
    ]
    follow = final_names(later)
    assert (follow("a"), follow("z"), follow("qty")) == ("c", None, "qty")
    before = lake_schema(BEFORE)
    columns = columns_after(
        before.columns, alter("ALTER TABLE orders DROP qty, ADD t TIMESTAMP"), before
    )
    assert [(c.name, c.source_type) for c in columns] == [
        ("id", "INT"),
        ("name", "VARCHAR"),
        ("t", "TIMESTAMP"),
    ]


@pytest.mark.parametrize(
    ("column", "value", "literal"),
    [
        (LakeColumn("c", 0, "INT", IcebergType.INT), -3, "-3"),
        (LakeColumn("c", 0, "TIME", IcebergType.LONG), 5, "5L"),
        (
            LakeColumn("c", 0, "DECIMAL(8,2)", IcebergType.DECIMAL, precision=8, scale=2),
            Decimal("1.50"),
            "CAST('1.50' AS DECIMAL(8,2))",
        ),
        (
            LakeColumn("c", 0, "FLOAT", IcebergType.FLOAT),
            0.10000000149011612,
            "CAST('0.10000000149011612' AS FLOAT)",
        ),
        (LakeColumn("c", 0, "DOUBLE", IcebergType.DOUBLE), 1e300, "CAST('1e+300' AS DOUBLE)"),
        (LakeColumn("c", 0, "DATE", IcebergType.DATE), dt.date(1, 2, 3), "DATE '0001-02-03'"),
        (
            LakeColumn("c", 0, "DATETIME", IcebergType.TIMESTAMP),
            dt.datetime(2020, 1, 2, 3, 4, 5),
            "TIMESTAMP_NTZ '2020-01-02 03:04:05.000000'",
        ),
        (LakeColumn("c", 0, "VARCHAR", IcebergType.STRING), "it's \\", "'it\\'s \\\\'"),
        (LakeColumn("c", 0, "VARCHAR", IcebergType.STRING), "é\n", "decode(X'c3a90a', 'UTF-8')"),
        (LakeColumn("c", 0, "BINARY", IcebergType.BINARY), b"a\0", "X'6100'"),
    ],
)
def test_sql_literals_hold_each_iceberg_types_value_exactly(
    column: LakeColumn, value: object, literal: str
) -> None:
    assert sql_literal(column, value) == literal
