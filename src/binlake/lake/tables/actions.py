"""What table-level DDL does to the lake: TRUNCATE, DROP TABLE, RENAME TABLE, CREATE TABLE.

``table_actions(statement, on_drop)`` turns a parsed statement into actions on source table
names (pure); ``run_table_action`` carries one out on the Iceberg tables. Every action can be
run again after a crash and finds what is already done:

* TRUNCATE -> ``DeleteAllRows``: ``DELETE FROM t``, run with the batch's commit properties so
  that the truncate is positioned like any other change.
* DROP TABLE with ``on_drop = "drop"`` -> ``DropLakeTable``: ``DROP TABLE IF EXISTS``.
* DROP TABLE with ``on_drop = "keep"`` -> ``KeepDroppedTable``: the Iceberg table stays, under
  its name, with the table property ``binlake.dropped-at`` = the DROP's position (a metadata
  commit; setting it twice is harmless). No rows come for it while the source has no table.
* CREATE TABLE (and a rename into the name) -> ``ClaimTableName``: if an Iceberg table of that
  name carries ``binlake.dropped-at``, it is the kept copy of a dropped table: it is moved to
  ``<table>__dropped_<file number>_<offset>`` (the DROP's position), so the re-created source
  table starts a new Iceberg table (created from its first TABLE_MAP). Moving it aside only
  then, not at the DROP, keeps the data readable under its name and costs nothing for tables
  that are never re-created; the marker makes it repeatable (a table without it is the new
  one). ``CREATE OR REPLACE`` is a drop (per ``on_drop``) followed by a claim.
* RENAME TABLE a TO b -> ``RenameLakeTable`` when both are replicated; out of the replicated
  set it is a drop (per ``on_drop``); into the set a claim with ``needs_snapshot``: the table
  arrives with rows binlake never saw, which only a snapshot brings.
* DROP DATABASE -> a drop of each replicated table of that database (``known_tables``).

Renaming an Iceberg table needs a catalog that can (the embedded default and JDBC catalogs can,
Hadoop catalogs cannot): there the table is copied (CREATE, ``INSERT OVERWRITE ... SELECT *``
with the commit properties, DROP the old one), which is repeatable too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Literal

from binlake.binlog.names import TableName
from binlake.ddl.statements import (
    CreateTable,
    DdlStatement,
    DropDatabase,
    DropTables,
    RenameTableClause,
    RenameTables,
    TruncateTable,
)
from binlake.lake.schema.alterations import sql_string
from binlake.lake.schema.sql import create_table_statements, quote
from binlake.lake.spark.errors import spark_errors
from binlake.lake.spark.lookup import (
    catalog_can_rename,
    read_lake_schema,
    split_name,
    table_exists,
    table_property,
)
from binlake.lake.spark.session import SparkSession
from binlake.lake.write.commit import execute_with_commit_properties

__all__ = [
    "DROPPED_AT_PROPERTY",
    "ClaimTableName",
    "DeleteAllRows",
    "DropLakeTable",
    "KeepDroppedTable",
    "OnDrop",
    "RenameLakeTable",
    "TableAction",
    "drop_table",
    "dropped_table_name",
    "is_kept_dropped",
    "run_table_action",
    "table_actions",
]

OnDrop = Literal["keep", "drop"]
#: Table property of a kept Iceberg table whose source table was dropped: the DROP's position.
DROPPED_AT_PROPERTY = "binlake.dropped-at"


@dataclass(frozen=True, slots=True)
class DeleteAllRows:
    """TRUNCATE: delete every row, positioned (run with the commit properties)."""

    table: TableName


@dataclass(frozen=True, slots=True)
class DropLakeTable:
    table: TableName


@dataclass(frozen=True, slots=True)
class KeepDroppedTable:
    """The source table was dropped; the Iceberg table stays, marked ``binlake.dropped-at``."""

    table: TableName


@dataclass(frozen=True, slots=True)
class ClaimTableName:
    """A source table is (re-)created as ``table``; a kept dropped table there moves aside.
    ``needs_snapshot``: it arrived with rows binlake never saw (renamed into the set)."""

    table: TableName
    needs_snapshot: bool = False


@dataclass(frozen=True, slots=True)
class RenameLakeTable:
    old: TableName
    new: TableName


TableAction = DeleteAllRows | DropLakeTable | KeepDroppedTable | ClaimTableName | RenameLakeTable


def _everything(_table: TableName) -> bool:
    return True


def table_actions(
    statement: DdlStatement,
    on_drop: OnDrop,
    *,
    replicated: Callable[[TableName], bool] = _everything,
    known_tables: Collection[TableName] = (),
) -> list[TableAction]:
    """The actions ``statement`` asks of the lake, in order, on source table names.

    ``replicated`` says whether a source table is replicated (the [tables] filters; default:
    all); ``known_tables`` are the replicated tables that exist, for DROP DATABASE. ALTER TABLE
    column changes are ``binlake.lake.schema.evolution.plan_evolution``'s; only its RENAME is
    here."""
    if isinstance(statement, TruncateTable):
        table = statement.table
        return [DeleteAllRows(table)] if replicated(table) else []
    if isinstance(statement, DropTables):
        return [_drop(name, on_drop) for name in statement.names if replicated(name)]
    if isinstance(statement, DropDatabase):
        database = statement.database
        return [_drop(t, on_drop) for t in sorted(known_tables) if t.database == database]
    if isinstance(statement, CreateTable):
        table = statement.table
        if not replicated(table):
            return []
        replaced = [_drop(table, on_drop)] if statement.or_replace else []
        return [*replaced, ClaimTableName(table)]
    if isinstance(statement, RenameTables):
        return _renames(statement.pairs, on_drop, replicated)
    pairs = tuple(
        (statement.table, clause.target)
        for clause in statement.clauses
        if isinstance(clause, RenameTableClause)
    )
    return _renames(pairs, on_drop, replicated)


def _drop(table: TableName, on_drop: OnDrop) -> TableAction:
    return KeepDroppedTable(table) if on_drop == "keep" else DropLakeTable(table)


def _renames(
    pairs: tuple[tuple[TableName, TableName], ...],
    on_drop: OnDrop,
    replicated: Callable[[TableName], bool],
) -> list[TableAction]:
    actions: list[TableAction] = []
    for old, new in pairs:
        if old == new:
            continue
        if replicated(old) and replicated(new):
            actions.append(RenameLakeTable(old, new))
        elif replicated(old):
            actions.append(_drop(old, on_drop))
        elif replicated(new):
            actions.append(ClaimTableName(new, needs_snapshot=True))
    return actions


# ---- running them -----------------------------------------------------------------------------


def run_table_action(
    spark: SparkSession,
    action: TableAction,
    *,
    lake_table: Callable[[TableName], str],
    position: str,
    commit_properties: Mapping[str, str],
    can_rename: bool | None = None,
) -> None:
    """Carry out ``action``. ``lake_table`` maps a source table to its Iceberg table's Spark
    SQL name; ``position`` is the DDL's source position; ``commit_properties``
    are the ``binlake.*`` snapshot properties for statements that write rows (DELETE, copies).
    ``can_rename``: whether the catalog renames tables (None: ``catalog_can_rename``)."""
    if isinstance(action, DeleteAllRows):
        table = lake_table(action.table)
        if table_exists(spark, table):
            execute_with_commit_properties(
                spark,
                f"DELETE FROM {table}",
                commit_properties,
                str(action.table),
                lake_table=table,
            )
    elif isinstance(action, DropLakeTable):
        drop_table(spark, lake_table(action.table), action.table)
    elif isinstance(action, KeepDroppedTable):
        _mark_dropped(spark, lake_table(action.table), position, action.table)
    elif isinstance(action, ClaimTableName):
        _claim(spark, lake_table(action.table), commit_properties, can_rename, action.table)
    else:
        old, new = lake_table(action.old), lake_table(action.new)
        _claim(spark, new, commit_properties, can_rename, action.new)
        if table_exists(spark, old):
            _move(spark, old, new, commit_properties, can_rename, action.old)


def drop_table(spark: SparkSession, table: str, source: TableName) -> None:
    """``DROP TABLE IF EXISTS`` the Iceberg table ``table`` (``source``: for messages)."""
    _sql(spark, f"DROP TABLE IF EXISTS {table}", str(source))


def is_kept_dropped(spark: SparkSession, table: str) -> bool:
    """Whether the Iceberg table ``table`` is a kept copy of a dropped table."""
    statement = f"SHOW TBLPROPERTIES {table} ('{DROPPED_AT_PROPERTY}')"
    with spark_errors(statement, table):
        rows = spark.sql(statement).collect()
    return any(
        row["key"] == DROPPED_AT_PROPERTY and "does not have" not in row["value"] for row in rows
    )


def _mark_dropped(spark: SparkSession, table: str, position: str, source: TableName) -> None:
    if table_exists(spark, table) and table_property(spark, table, DROPPED_AT_PROPERTY) is None:
        value = sql_string(position)
        statement = f"ALTER TABLE {table} SET TBLPROPERTIES ('{DROPPED_AT_PROPERTY}'={value})"
        _sql(spark, statement, str(source))


def _claim(
    spark: SparkSession,
    table: str,
    properties: Mapping[str, str],
    can_rename: bool | None,
    source: TableName,
) -> None:
    if not table_exists(spark, table):
        return
    dropped_at = table_property(spark, table, DROPPED_AT_PROPERTY)
    if dropped_at is not None:
        moved = dropped_table_name(table, dropped_at)
        _move(spark, table, moved, properties, can_rename, source)


def _move(
    spark: SparkSession,
    old: str,
    new: str,
    properties: Mapping[str, str],
    can_rename: bool | None,
    source: TableName,
) -> None:
    """Rename ``old`` to ``new``, or copy it where the catalog cannot rename (or where a crash
    left a copy half made: ``new`` exists already); ``source``: the source table ``old``
    replicated."""
    renames = catalog_can_rename(spark, old) if can_rename is None else can_rename
    if renames and not table_exists(spark, new):
        # RENAME TO names the new table inside the old one's catalog: without the catalog part
        # (Spark passes every part to the catalog, which would take it for a namespace).
        within = ".".join(quote(part) for part in split_name(new)[1:])
        _sql(spark, f"ALTER TABLE {old} RENAME TO {within}", old)
        return
    schema = read_lake_schema(spark, old, source)
    for statement in create_table_statements(new, schema):
        _sql(spark, statement, new)
    copy = f"INSERT OVERWRITE {new} SELECT * FROM {old}"
    execute_with_commit_properties(spark, copy, properties, new, lake_table=new)
    _sql(spark, f"DROP TABLE {old}", old)


def _sql(spark: SparkSession, statement: str, table: str) -> None:
    with spark_errors(statement, table):
        spark.sql(statement)


# ---- names and catalog facts ------------------------------------------------------------------

_POSITION = re.compile(r"\.(\d+):(\d+)$")


def dropped_table_name(table: str, position: str) -> str:
    """Where a kept dropped table moves: ``<table>__dropped_<file number>_<offset>`` beside it
    (``mariadb-bin.000003:1234`` -> ``__dropped_000003_1234``; other positions: their letters
    and digits)."""
    parts = split_name(table)
    match = _POSITION.search(position)
    suffix = f"{match.group(1)}_{match.group(2)}" if match else re.sub(r"\W+", "_", position)
    parts[-1] = f"{parts[-1]}__dropped_{suffix}"
    return ".".join(quote(part) for part in parts)
