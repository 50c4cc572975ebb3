"""DDL as MariaDB 10.11 writes it into its binlog, read back with BinlogFileReader and parsed;
and the TABLE_MAPs logged after each ALTER, planned against the DDL between them."""

from __future__ import annotations

import itertools

from binlake.binlog.events import QueryEvent
from binlake.binlog.tablemap import TableMap
from binlake.ddl.parse import (
    AddColumnClause,
    AlterTable,
    ChangeColumnClause,
    CreateTable,
    DdlStatement,
    DropColumnClause,
    DropDatabase,
    DropTables,
    IgnoredClause,
    ModifyColumnClause,
    RenameColumnClause,
    RenameTableClause,
    RenameTables,
    TableName,
    TruncateTable,
    parse_ddl,
)
from binlake.lake.schema.alterations import (
    AddColumn,
    DropColumn,
    RenameColumn,
    SchemaChange,
    SetSourceType,
    WidenColumnType,
)
from binlake.lake.schema.evolution import plan_evolution
from binlake.storage.binlog_file import BinlogFileReader
from binlake.typemap import lake_schema
from binlake_dev.sandbox import MariaDBSandbox

Logged = QueryEvent | TableMap


def run(mariadb: MariaDBSandbox, database: str, statements: list[str]) -> None:
    with mariadb.connect(database) as connection, connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def logged(mariadb: MariaDBSandbox, database: str) -> list[Logged]:
    """The QUERY and TABLE_MAP events of ``database``, in binlog order."""
    out: list[Logged] = []
    for path in mariadb.binlog_files():
        with path.open("rb") as f, BinlogFileReader(f, path.name) as reader:
            for event in reader.events():
                if _of_database(event.payload, database):
                    out.append(event.payload)  # type: ignore[arg-type]
    return out


def _of_database(payload: object, database: str) -> bool:
    if isinstance(payload, TableMap):
        return payload.schema == database
    if isinstance(payload, QueryEvent):
        return payload.database == database or f"`{database}`" in payload.text
    return False


def parsed_ddl(events: list[Logged]) -> list[DdlStatement]:
    out = []
    for event in events:
        if isinstance(event, QueryEvent):
            statement = parse_ddl(event.database, event.text)
            if statement is not None:
                out.append(statement)
    return out


def test_binlogged_ddl_parses_to_what_was_run(mariadb: MariaDBSandbox, fresh_database: str) -> None:
    db = fresh_database
    run(
        mariadb,
        db,
        [
            f"CREATE TABLE `{db}`.orders (id INT PRIMARY KEY, name VARCHAR(20), qty INT)",
            "ALTER TABLE orders ADD COLUMN (a INT, b VARCHAR(10) DEFAULT 'x,y(z'), "
            "ADD c INT AFTER id",
            "ALTER TABLE orders /*!100301 ADD COLUMN IF NOT EXISTS d INT */",
            "ALTER TABLE orders RENAME COLUMN name TO title, CHANGE qty quantity BIGINT, "
            "MODIFY a BIGINT, DROP COLUMN b",
            "ALTER TABLE `orders` ADD INDEX ix (title), ALTER COLUMN c SET DEFAULT 5 -- note",
            "TRUNCATE orders",
            "CREATE TABLE `odd ``name``` (`a col` INT PRIMARY KEY)",
            "RENAME TABLE orders TO orders2, `odd ``name``` TO plain",
            "ALTER TABLE orders2 RENAME TO orders3",
            "CREATE TABLE t5 AS SELECT 1 AS a",
            "CREATE TEMPORARY TABLE tmp (a INT)",
            "DROP TABLE orders3, plain",
            "INSERT INTO t5 VALUES (2)",
            f"DROP DATABASE `{db}`",
        ],
    )
    statements = parsed_ddl(logged(mariadb, db))

    def name(table: str) -> TableName:
        return TableName(db, table)

    expected_shapes: list[tuple[type, object]] = [
        (CreateTable, name("orders")),
        (
            AlterTable,
            (
                AddColumnClause,
                "a",
                AddColumnClause,
                "b",
                AddColumnClause,
                "c",
            ),
        ),
        (AlterTable, (AddColumnClause, "d")),
        (
            AlterTable,
            (
                RenameColumnClause,
                "title",
                ChangeColumnClause,
                "quantity",
                ModifyColumnClause,
                "a",
                DropColumnClause,
                "b",
            ),
        ),
        (AlterTable, (IgnoredClause, None, IgnoredClause, None)),
        (TruncateTable, name("orders")),
        (CreateTable, name("odd `name`")),
        (RenameTables, ((name("orders"), name("orders2")), (name("odd `name`"), name("plain")))),
        (AlterTable, (RenameTableClause, None)),
        (CreateTable, name("t5")),
        (DropTables, (name("orders3"), name("plain"))),
        (DropDatabase, db),
    ]
    assert [type(s) for s in statements] == [kind for kind, _ in expected_shapes]
    for statement, (_, detail) in zip(statements, expected_shapes, strict=True):
        assert _detail(statement) == detail, statement


def _detail(statement: DdlStatement) -> object:
    if isinstance(statement, (CreateTable, TruncateTable)):
        return statement.table
    if isinstance(statement, RenameTables):
        return statement.pairs
    if isinstance(statement, DropTables):
        return statement.names
    if isinstance(statement, DropDatabase):
        return statement.database
    out: list[object] = []
    for clause in statement.clauses:
        out.append(type(clause))
        if isinstance(clause, (AddColumnClause, ChangeColumnClause, ModifyColumnClause)):
            out.append(clause.column.name)
        elif isinstance(clause, RenameColumnClause):
            out.append(clause.new)
        elif isinstance(clause, DropColumnClause):
            out.append(clause.name)
        else:
            out.append(None)
    return tuple(out)


def test_logged_table_maps_and_ddl_plan_renames_drops_adds_and_widenings(
    mariadb: MariaDBSandbox, fresh_database: str
) -> None:
    db = fresh_database
    run(
        mariadb,
        db,
        [
            "CREATE TABLE orders (id INT PRIMARY KEY, name VARCHAR(20), qty INT, price FLOAT)",
            "INSERT INTO orders VALUES (1, 'a', 2, 1.5)",
            "ALTER TABLE orders RENAME COLUMN name TO title, MODIFY qty BIGINT",
            "ALTER TABLE orders DROP COLUMN price, ADD note TEXT AFTER id",
            "INSERT INTO orders VALUES (2, 'n', 'b', 3)",
            "ALTER TABLE orders CHANGE note remark TEXT, ADD price DOUBLE",
            "UPDATE orders SET remark = 'r' WHERE id = 2",
        ],
    )
    events = logged(mariadb, db)
    maps = [i for i, e in enumerate(events) if isinstance(e, TableMap)]
    assert len(maps) == 3
    plans: list[list[SchemaChange]] = []
    for before, after in itertools.pairwise(maps):
        old, new = events[before], events[after]
        assert isinstance(old, TableMap) and isinstance(new, TableMap)
        between = parsed_ddl(events[before + 1 : after])
        plans.append(plan_evolution(lake_schema(old), new, between))
    first, second = plans
    third_map = events[maps[2]]
    assert isinstance(third_map, TableMap)
    second_map = events[maps[1]]
    assert isinstance(second_map, TableMap)
    assert first == [
        DropColumn("price"),
        RenameColumn("name", "title"),
        WidenColumnType("qty", "int", lake_schema(second_map).columns[3]),
        SetSourceType("qty", "BIGINT"),
        AddColumn(lake_schema(second_map).columns[1]),
    ]
    assert second == [
        RenameColumn("note", "remark"),
        AddColumn(lake_schema(third_map).columns[4]),
    ]
