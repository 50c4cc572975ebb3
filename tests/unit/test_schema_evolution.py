"""plan_evolution: the Iceberg schema changes for a new TABLE_MAP and the DDL seen since the last
sync; change logs and configured keys; replays after a crash plan nothing more."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from apply_testing import orders_map
from binlake.binlog.constants import ColumnType as T
from binlake.binlog.tablemap import TableMap
from binlake.ddl.parse import DdlStatement, parse_ddl
from binlake.errors import ConfigError, IncompatibleSchemaChangeError, UnsupportedTypeError
from binlake.lake.schema.alterations import (
    AddColumn,
    DropColumn,
    MakeColumnOptional,
    RenameColumn,
    SchemaChange,
    SetIdentifierFields,
    SetSourceType,
    WidenColumnType,
)
from binlake.lake.schema.evolution import (
    CHANGELOG_COLUMNS,
    changelog_schema,
    is_changelog,
    plan_evolution,
    target_schema,
)
from binlake.typemap import LakeSchema, lake_column, lake_schema

UTF8MB4 = 45
TABLE = "`lake`.`shop`.`orders`"

#: Source types as (type code, metadata, unsigned, charset).
INT = (T.LONG, 0, False, None)
INT_UNSIGNED = (T.LONG, 0, True, None)
TINYINT = (T.TINY, 0, False, None)
BIGINT = (T.LONGLONG, 0, False, None)
BIGINT_UNSIGNED = (T.LONGLONG, 0, True, None)
FLOAT = (T.FLOAT, 4, False, None)
DOUBLE = (T.DOUBLE, 8, False, None)
VARCHAR = (T.VARCHAR, 40, False, UTF8MB4)
VARCHAR_LONGER = (T.VARCHAR, 400, False, UTF8MB4)
TEXT = (T.BLOB, 2, False, UTF8MB4)
BLOB = (T.BLOB, 2, False, 63)
TIME = (T.TIME2, 0, False, None)
DATETIME6 = (T.DATETIME2, 6, False, None)
DATETIME3 = (T.DATETIME2, 3, False, None)
DATETIME = (T.DATETIME2, 0, False, None)


def decimal(precision: int, scale: int) -> tuple[int, int, bool, None]:
    return (T.NEWDECIMAL, precision << 8 | scale, False, None)


def ddl(*queries: str) -> list[DdlStatement]:
    out = []
    for query in queries:
        statement = parse_ddl("shop", query)
        assert statement is not None, query
        out.append(statement)
    return out


def plan(old: TableMap, new: TableMap, *queries: str) -> list[SchemaChange]:
    return plan_evolution(lake_schema(old), new, ddl(*queries))


def applied(schema: LakeSchema, changes: Sequence[SchemaChange]) -> LakeSchema:
    """What Iceberg does with ``changes``, in memory (names resolved without case)."""
    columns = list(schema.columns)
    key = list(schema.key)

    def at(name: str) -> int:
        return next(i for i, c in enumerate(columns) if c.name.lower() == name.lower())

    for change in changes:
        if isinstance(change, SetIdentifierFields):
            key = list(change.names)
        elif isinstance(change, DropColumn):
            assert change.name not in key, "Iceberg refuses to drop an identifier field"
            del columns[at(change.name)]
        elif isinstance(change, RenameColumn):
            i = at(change.old)
            key = [change.new if k == change.old else k for k in key]
            columns[i] = replace(columns[i], name=change.new)
        elif isinstance(change, WidenColumnType):
            i = at(change.name)
            new = change.column
            columns[i] = replace(
                columns[i], type=new.type, precision=new.precision, scale=new.scale
            )
        elif isinstance(change, MakeColumnOptional):
            columns[at(change.name)] = replace(columns[at(change.name)], nullable=True)
        elif isinstance(change, SetSourceType):
            i = at(change.name)
            columns[i] = replace(columns[i], source_type=change.source_type)
        else:
            assert not any(c.name.lower() == change.column.name.lower() for c in columns)
            columns.append(replace(change.column, nullable=True))
    return LakeSchema(schema.source_table, tuple(columns), tuple(key))


def shape(schema: LakeSchema) -> tuple[object, ...]:
    """What matters of a schema, in a comparable form (Iceberg column order aside)."""
    columns = sorted((c.name, c.iceberg_type, c.source_type, c.nullable) for c in schema.columns)
    return tuple(columns), tuple(sorted(schema.key))


BASE = orders_map(("id", INT), ("name", VARCHAR), ("qty", INT), ("price", decimal(10, 2)))


# ---- nothing to do ----------------------------------------------------------------------------


def test_same_table_map_plans_nothing() -> None:
    assert plan(BASE, BASE) == []
    assert plan(BASE, BASE, "ALTER TABLE orders ADD INDEX ix (name), ENGINE=InnoDB") == []


def test_string_length_changes_plan_nothing() -> None:
    longer = orders_map(
        ("id", INT), ("name", VARCHAR_LONGER), ("qty", INT), ("price", decimal(10, 2))
    )
    assert plan(BASE, longer, "ALTER TABLE orders MODIFY name VARCHAR(100)") == []


# ---- adds and drops ---------------------------------------------------------------------------


def test_new_column_is_added_nullable_at_the_end_with_its_source_position() -> None:
    new = orders_map(
        ("id", INT),
        ("note", TEXT),
        ("name", VARCHAR),
        ("qty", INT),
        ("price", decimal(10, 2)),
        not_null=("note",),
    )
    changes = plan(BASE, new, "ALTER TABLE orders ADD note TEXT NOT NULL AFTER id")
    assert changes == [AddColumn(replace(lake_column(new, 1), nullable=True))]
    (add,) = changes
    assert isinstance(add, AddColumn) and add.column.index == 1
    assert add.statements(TABLE) == [
        "ALTER TABLE `lake`.`shop`.`orders` ADD COLUMN `note` STRING COMMENT 'TEXT'"
    ]


def test_column_gone_from_the_table_map_is_dropped() -> None:
    new = orders_map(("id", INT), ("name", VARCHAR), ("price", decimal(10, 2)))
    changes = plan(BASE, new, "ALTER TABLE orders DROP COLUMN qty")
    assert changes == [DropColumn("qty")]
    assert changes[0].statements(TABLE) == ["ALTER TABLE `lake`.`shop`.`orders` DROP COLUMN `qty`"]


def test_table_map_is_the_truth_even_without_ddl() -> None:
    new = orders_map(("id", INT), ("name", VARCHAR), ("price", decimal(10, 2)), ("extra", INT))
    assert plan(BASE, new) == [DropColumn("qty"), AddColumn(lake_column(new, 3))]


# ---- renames ----------------------------------------------------------------------------------


RENAMED = orders_map(("id", INT), ("title", VARCHAR), ("qty", INT), ("price", decimal(10, 2)))


@pytest.mark.parametrize(
    "query",
    [
        "ALTER TABLE orders RENAME COLUMN name TO title",
        "ALTER TABLE orders CHANGE name title VARCHAR(10)",
        "ALTER TABLE shop.orders CHANGE COLUMN `name` `title` VARCHAR(10) NOT NULL FIRST",
    ],
)
def test_ddl_rename_renames_the_column_keeping_its_data(query: str) -> None:
    changes = plan(BASE, RENAMED, query)
    assert changes == [RenameColumn("name", "title")]
    assert changes[0].statements(TABLE) == [
        "ALTER TABLE `lake`.`shop`.`orders` RENAME COLUMN `name` TO `title`"
    ]


def test_drop_and_add_without_a_ddl_rename_is_drop_and_add() -> None:
    changes = plan(BASE, RENAMED, "ALTER TABLE orders DROP name, ADD title VARCHAR(10) AFTER id")
    assert changes == [DropColumn("name"), AddColumn(lake_column(RENAMED, 1))]


def test_renames_across_several_statements_compose() -> None:
    changes = plan(
        BASE,
        RENAMED,
        "ALTER TABLE orders RENAME COLUMN name TO label",
        "ALTER TABLE orders RENAME COLUMN label TO title",
    )
    assert changes == [RenameColumn("name", "title")]


def test_rename_chain_in_one_alter_runs_in_dependency_order() -> None:
    new = orders_map(("id", INT), ("qty2", VARCHAR), ("qty3", INT), ("price", decimal(10, 2)))
    changes = plan(
        BASE, new, "ALTER TABLE orders CHANGE name qty2 VARCHAR(10), CHANGE qty qty3 INT"
    )
    assert changes == [RenameColumn("name", "qty2"), RenameColumn("qty", "qty3")]
    chain = orders_map(("id", INT), ("qty", VARCHAR), ("total", INT), ("price", decimal(10, 2)))
    changes = plan(
        BASE, chain, "ALTER TABLE orders CHANGE name qty VARCHAR(10), CHANGE qty total INT"
    )
    assert changes == [RenameColumn("qty", "total"), RenameColumn("name", "qty")]


def test_swapping_two_column_names_is_refused() -> None:
    swapped = orders_map(("id", INT), ("qty", INT), ("name", INT), ("price", decimal(10, 2)))
    old = orders_map(("id", INT), ("name", INT), ("qty", INT), ("price", decimal(10, 2)))
    with pytest.raises(IncompatibleSchemaChangeError, match="swap"):
        plan(old, swapped, "ALTER TABLE orders CHANGE name qty INT, CHANGE qty name INT")


def test_rename_that_only_changes_case_is_not_made() -> None:
    new = orders_map(("id", INT), ("Name", VARCHAR), ("qty", INT), ("price", decimal(10, 2)))
    assert plan(BASE, new, "ALTER TABLE orders RENAME COLUMN name TO Name") == []


def test_ddl_of_other_tables_is_ignored_and_table_renames_are_followed() -> None:
    changes = plan(
        BASE,
        RENAMED,
        "ALTER TABLE other RENAME COLUMN qty TO amount",
        "ALTER TABLE orders RENAME TO orders_v1",
        "ALTER TABLE orders_v1 RENAME COLUMN name TO title",
    )
    assert changes == [RenameColumn("name", "title")]
    after_rename = replace(RENAMED, table="orders_v2")
    changes = plan_evolution(
        lake_schema(BASE),
        after_rename,
        ddl(
            "RENAME TABLE orders TO orders_v2", "ALTER TABLE orders_v2 RENAME COLUMN name TO title"
        ),
    )
    assert changes == [RenameColumn("name", "title")]


# ---- types ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old_spec", "new_spec", "sql"),
    [
        (INT, BIGINT, "BIGINT"),
        (INT, INT_UNSIGNED, "BIGINT"),
        (FLOAT, DOUBLE, "DOUBLE"),
        (decimal(10, 2), decimal(12, 2), "DECIMAL(12,2)"),
    ],
)
def test_compatible_widenings_change_the_type_and_the_comment(
    old_spec: tuple[int, int, bool, None], new_spec: tuple[int, int, bool, None], sql: str
) -> None:
    old = orders_map(("id", INT), ("v", old_spec))
    new = orders_map(("id", INT), ("v", new_spec))
    changes = plan(old, new, "ALTER TABLE orders MODIFY v SOMETYPE")
    widen = WidenColumnType("v", lake_column(old, 1).iceberg_type, lake_column(new, 1))
    assert changes == [widen, SetSourceType("v", lake_column(new, 1).source_type)]
    assert widen.statements(TABLE) == [
        f"ALTER TABLE `lake`.`shop`.`orders` ALTER COLUMN `v` TYPE {sql}"
    ]


def test_source_type_change_with_the_same_iceberg_type_updates_the_comment_only() -> None:
    old = orders_map(("id", INT), ("v", TINYINT), ("s", VARCHAR))
    new = orders_map(("id", INT), ("v", INT), ("s", TEXT))
    changes = plan(old, new, "ALTER TABLE orders MODIFY v INT, MODIFY s TEXT")
    assert changes == [SetSourceType("v", "INT"), SetSourceType("s", "TEXT")]
    assert changes[1].statements(TABLE) == [
        "ALTER TABLE `lake`.`shop`.`orders` ALTER COLUMN `s` COMMENT 'TEXT'"
    ]


@pytest.mark.parametrize(
    ("old_spec", "new_spec", "reason"),
    [
        (BIGINT, INT, "cannot change long to int"),
        (INT, VARCHAR, "from integer to text"),
        (VARCHAR, INT, "from text to integer"),
        (decimal(10, 2), decimal(10, 3), "scale"),
        (decimal(12, 2), decimal(10, 2), "cannot change decimal\\(12,2\\) to decimal\\(10,2\\)"),
        (decimal(38, 2), decimal(40, 2), "cannot change decimal\\(38,2\\) to string"),
        (decimal(40, 2), decimal(42, 4), "scale"),
        (BIGINT, BIGINT_UNSIGNED, "cannot change long to decimal\\(20,0\\)"),
        (DOUBLE, FLOAT, "cannot change double to float"),
        (INT, TIME, "from integer to time"),
        (TEXT, BLOB, "from text to bytes"),
        (DATETIME6, DATETIME3, "fractional-second precision"),
    ],
)
def test_incompatible_type_changes_raise_naming_table_ddl_types_and_options(
    old_spec: tuple[int, int, bool, int | None],
    new_spec: tuple[int, int, bool, int | None],
    reason: str,
) -> None:
    old = orders_map(("id", INT), ("v", old_spec))
    new = orders_map(("id", INT), ("v", new_spec))
    query = "ALTER TABLE orders MODIFY v NEWTYPE"
    with pytest.raises(IncompatibleSchemaChangeError, match=reason) as caught:
        plan(old, new, query)
    error = caught.value
    assert (error.table, error.statement, error.column) == ("shop.orders", query, "v")
    assert (
        error.old_type == f"{lake_column(old, 1).source_type} ({lake_column(old, 1).iceberg_type})"
    )
    assert (
        error.new_type == f"{lake_column(new, 1).source_type} ({lake_column(new, 1).iceberg_type})"
    )
    assert "[tables] exclude" in error.hint
    assert "binlake snapshot --tables shop.orders" in error.hint
    assert query in str(error)


def test_higher_fractional_second_precision_is_a_comment_change() -> None:
    old = orders_map(("id", INT), ("at", DATETIME))
    new = orders_map(("id", INT), ("at", DATETIME6))
    assert plan(old, new, "ALTER TABLE orders MODIFY at DATETIME(6)") == [
        SetSourceType("at", "DATETIME(6)")
    ]


def test_not_null_to_null_drops_iceberg_not_null_and_the_reverse_does_nothing() -> None:
    strict = orders_map(("id", INT), ("v", INT), not_null=("v",))
    loose = orders_map(("id", INT), ("v", INT))
    changes = plan(strict, loose, "ALTER TABLE orders MODIFY v INT NULL")
    assert changes == [MakeColumnOptional("v")]
    assert changes[0].statements(TABLE) == [
        "ALTER TABLE `lake`.`shop`.`orders` ALTER COLUMN `v` DROP NOT NULL"
    ]
    assert plan(loose, strict, "ALTER TABLE orders MODIFY v INT NOT NULL") == []


# ---- primary keys -----------------------------------------------------------------------------


def test_new_key_on_required_columns_sets_identifier_fields_before_the_old_key_is_dropped() -> None:
    old = orders_map(("id", INT), ("code", VARCHAR), ("v", INT), not_null=("code",))
    new = orders_map(("code", VARCHAR), ("v", INT), key=("code",))
    changes = plan(old, new, "ALTER TABLE orders DROP PRIMARY KEY, DROP id, ADD PRIMARY KEY (code)")
    assert changes == [SetIdentifierFields(("code",)), DropColumn("id")]
    assert changes[0].statements(TABLE) == [
        "ALTER TABLE `lake`.`shop`.`orders` SET IDENTIFIER FIELDS `code`"
    ]


def test_identifier_fields_use_current_names_when_the_key_column_is_renamed_too() -> None:
    old = orders_map(("id", INT), ("code", VARCHAR), not_null=("code",))
    new = orders_map(("id", INT), ("sku", VARCHAR), key=("id", "sku"))
    changes = plan(
        old,
        new,
        "ALTER TABLE orders RENAME COLUMN code TO sku, DROP PRIMARY KEY, ADD PRIMARY KEY (id, sku)",
    )
    assert changes == [SetIdentifierFields(("id", "code")), RenameColumn("code", "sku")]
    assert shape(applied(lake_schema(old), changes)) == shape(lake_schema(new))


def test_renaming_a_key_column_keeps_the_key() -> None:
    new = orders_map(
        ("order_id", INT),
        ("name", VARCHAR),
        ("qty", INT),
        ("price", decimal(10, 2)),
        key=("order_id",),
    )
    changes = plan(BASE, new, "ALTER TABLE orders RENAME COLUMN id TO order_id")
    assert changes == [RenameColumn("id", "order_id")]


def test_new_key_on_a_nullable_or_new_column_is_refused() -> None:
    new = orders_map(
        ("id", INT), ("name", VARCHAR), ("qty", INT), ("price", decimal(10, 2)), key=("id", "qty")
    )
    with pytest.raises(IncompatibleSchemaChangeError, match="qty is not a required column"):
        plan(
            BASE,
            new,
            "ALTER TABLE orders MODIFY qty INT NOT NULL, DROP PRIMARY KEY, "
            "ADD PRIMARY KEY (id, qty)",
        )
    added = orders_map(
        ("id", INT),
        ("name", VARCHAR),
        ("qty", INT),
        ("price", decimal(10, 2)),
        ("k", INT),
        key=("id", "k"),
    )
    with pytest.raises(IncompatibleSchemaChangeError, match="k is not a required column"):
        plan(
            BASE,
            added,
            "ALTER TABLE orders ADD k INT NOT NULL, DROP PRIMARY KEY, ADD PRIMARY KEY (id, k)",
        )


def test_losing_the_primary_key_is_refused() -> None:
    keyless = orders_map(
        ("id", INT),
        ("name", VARCHAR),
        ("qty", INT),
        ("price", decimal(10, 2)),
        key=(),
        not_null=("id",),
    )
    with pytest.raises(IncompatibleSchemaChangeError, match="no longer has a primary key"):
        plan(BASE, keyless, "ALTER TABLE orders DROP PRIMARY KEY")


def test_configured_key_columns_keep_a_keyless_table_merged() -> None:
    keyless = orders_map(("id", INT), ("name", VARCHAR), key=(), not_null=("id",))
    current = target_schema(keyless, key_columns=["ID"])
    assert current.key == ("id",)
    grown = orders_map(("id", INT), ("name", VARCHAR), ("v", INT), key=(), not_null=("id",))
    changes = plan_evolution(
        current, grown, ddl("ALTER TABLE orders ADD v INT"), key_columns=["id"]
    )
    assert changes == [AddColumn(lake_column(grown, 2))]


# ---- change logs ------------------------------------------------------------------------------


KEYLESS = orders_map(("a", INT), ("b", VARCHAR), key=())


def test_keyless_table_gets_the_change_log_schema() -> None:
    schema = target_schema(KEYLESS)
    assert schema == changelog_schema(KEYLESS)
    assert is_changelog(schema) and schema.key == ()
    assert [(c.name, c.iceberg_type, c.nullable) for c in schema.columns] == [
        ("a", "int", True),
        ("b", "string", True),
        ("_binlake_op", "string", False),
        ("_binlake_position", "string", False),
        ("_binlake_seq", "long", False),
    ]
    assert [name for name, _, _ in CHANGELOG_COLUMNS] == [c.name for c in schema.columns[2:]]


def test_change_log_evolves_its_source_columns_and_keeps_its_own() -> None:
    grown = orders_map(("a", INT), ("c", BIGINT), key=())
    changes = plan_evolution(
        changelog_schema(KEYLESS), grown, ddl("ALTER TABLE orders DROP b, ADD c BIGINT")
    )
    assert changes == [DropColumn("b"), AddColumn(lake_column(grown, 1))]


def test_change_log_table_whose_source_gains_a_key_is_refused() -> None:
    keyed = orders_map(("a", INT), ("b", VARCHAR), key=("a",))
    with pytest.raises(IncompatibleSchemaChangeError, match="change log"):
        plan_evolution(
            changelog_schema(KEYLESS), keyed, ddl("ALTER TABLE orders ADD PRIMARY KEY (a)")
        )


def test_source_column_with_a_reserved_name_is_refused_for_change_logs() -> None:
    clash = orders_map(("a", INT), ("_binlake_op", VARCHAR), key=())
    with pytest.raises(UnsupportedTypeError, match="reserves"):
        changelog_schema(clash)


def test_configured_key_columns_must_exist_and_be_not_null() -> None:
    with pytest.raises(
        ConfigError, match=r"key column nope of table shop\.orders is not a"
    ) as caught:
        target_schema(KEYLESS, key_columns=["nope"])
    assert caught.value.field == "tables.key_columns"
    with pytest.raises(ConfigError, match="nullable"):
        target_schema(KEYLESS, key_columns=["a"])


# ---- replays after a crash --------------------------------------------------------------------

Scenario = tuple[str, TableMap, TableMap, tuple[str, ...]]
SCENARIOS: list[Scenario] = [
    (
        "add, drop, rename, widen",
        BASE,
        orders_map(
            ("id", BIGINT),
            ("title", TEXT),
            ("price", decimal(12, 2)),
            ("note", VARCHAR),
            key=("id",),
        ),
        (
            "ALTER TABLE orders MODIFY id BIGINT, DROP qty",
            "ALTER TABLE orders CHANGE name title TEXT, MODIFY price DECIMAL(12,2), "
            "ADD note VARCHAR(10)",
        ),
    ),
    (
        "rename then re-add the old name",
        BASE,
        orders_map(
            ("id", INT), ("title", VARCHAR), ("qty", INT), ("price", decimal(10, 2)), ("name", INT)
        ),
        ("ALTER TABLE orders RENAME COLUMN name TO title, ADD name INT",),
    ),
    (
        "drop then rename into the dropped name",
        BASE,
        orders_map(("id", INT), ("qty", VARCHAR), ("price", decimal(10, 2))),
        ("ALTER TABLE orders DROP qty", "ALTER TABLE orders CHANGE name qty VARCHAR(10)"),
    ),
    (
        "rename chain",
        BASE,
        orders_map(("id", INT), ("qty", VARCHAR), ("total", INT), ("price", decimal(10, 2))),
        ("ALTER TABLE orders CHANGE name qty VARCHAR(10), CHANGE qty total INT",),
    ),
    (
        "key moves to another column",
        orders_map(("id", INT), ("code", VARCHAR), ("v", INT), not_null=("code",)),
        orders_map(("sku", VARCHAR), ("v", BIGINT), key=("sku",)),
        (
            "ALTER TABLE orders DROP PRIMARY KEY, DROP id, CHANGE code sku VARCHAR(10), "
            "MODIFY v BIGINT",
        ),
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "queries"), [s[1:] for s in SCENARIOS], ids=[s[0] for s in SCENARIOS]
)
def test_replay_after_every_crash_point_finishes_the_plan_and_then_plans_nothing(
    old: TableMap, new: TableMap, queries: tuple[str, ...]
) -> None:
    statements = ddl(*queries)
    start = lake_schema(old)
    full = plan_evolution(start, new, statements)
    done = applied(start, full)
    assert shape(done) == shape(lake_schema(new))
    assert plan_evolution(done, new, statements) == []
    for crash_after in range(len(full)):
        partial = applied(start, full[:crash_after])
        rest = plan_evolution(partial, new, statements)
        assert shape(applied(partial, rest)) == shape(done), crash_after


def test_replay_keeps_the_data_of_a_column_renamed_into_a_dropped_name() -> None:
    _, old, new, queries = SCENARIOS[2]
    statements = ddl(*queries)
    done = applied(lake_schema(old), plan_evolution(lake_schema(old), new, statements))
    assert plan_evolution(done, new, statements) == []  # not a drop and re-add of qty


def test_a_column_recreated_under_its_own_name_is_dropped_and_added_again_on_replay() -> None:
    new = orders_map(("id", INT), ("name", VARCHAR), ("qty", INT), ("price", decimal(10, 2)))
    statements = ddl("ALTER TABLE orders DROP qty, ADD qty INT")
    recreate: list[SchemaChange] = [DropColumn("qty"), AddColumn(lake_column(new, 2))]
    assert plan_evolution(lake_schema(BASE), new, statements) == recreate
    done = applied(lake_schema(BASE), recreate)
    assert plan_evolution(done, new, statements) == recreate  # harmless: qty holds only nulls


def test_replayed_ddl_against_the_final_schema_plans_nothing() -> None:
    new = orders_map(
        ("id", INT), ("name", VARCHAR), ("qty", BIGINT), ("price", decimal(10, 2)), ("note", TEXT)
    )
    statements = ddl("ALTER TABLE orders MODIFY qty BIGINT, ADD COLUMN IF NOT EXISTS note TEXT")
    done = applied(lake_schema(BASE), plan_evolution(lake_schema(BASE), new, statements))
    assert plan_evolution(done, new, statements) == []
    assert plan_evolution(done, new, []) == []
