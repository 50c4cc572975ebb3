"""The DDL statements binlake follows, as ``binlake.ddl.parse`` gives them: source table
names, ALTER TABLE clauses, column definitions. Pure data, no parsing."""

from __future__ import annotations

from dataclasses import dataclass

from binlake.binlog.names import TableName

__all__ = [
    "AddColumnClause",
    "AlterClause",
    "AlterTable",
    "ChangeColumnClause",
    "ColumnDefinition",
    "CreateTable",
    "DdlStatement",
    "DropColumnClause",
    "DropDatabase",
    "DropTables",
    "IgnoredClause",
    "ModifyColumnClause",
    "RenameColumnClause",
    "RenameTableClause",
    "RenameTables",
    "TableName",
    "TruncateTable",
]


@dataclass(frozen=True, slots=True)
class ColumnDefinition:
    """A column as ADD, CHANGE or MODIFY define it (types are informative: see the module doc)."""

    name: str
    #: The type as written, normalised to single spaces: ``VARCHAR(20) UNSIGNED``...
    type_text: str
    #: False when the definition says NOT NULL (or PRIMARY KEY).
    nullable: bool = True
    #: The DEFAULT expression exactly as written (``'x,y'``, ``0``, ``current_timestamp()``),
    #: if any.
    default: str | None = None
    #: ``FIRST``, ``AFTER <column>`` or None (at the end).
    position: str | None = None
    #: The definition says ``NULL`` (for a TIMESTAMP this differs from saying nothing).
    explicit_null: bool = False
    #: ``CHARACTER SET x``, or the character set of ``COLLATE x``, lower case; None if not given.
    charset: str | None = None
    #: ``AUTO_INCREMENT`` (or the ``SERIAL`` type): existing rows are numbered.
    auto_increment: bool = False
    #: A generated column (``[GENERATED ALWAYS] AS (expr)``): computed for existing rows.
    generated: bool = False


@dataclass(frozen=True, slots=True)
class AddColumnClause:
    column: ColumnDefinition
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True)
class DropColumnClause:
    name: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True)
class RenameColumnClause:
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class ChangeColumnClause:
    """``CHANGE old new type ...``: a rename when the names differ, and a new definition."""

    old: str
    column: ColumnDefinition


@dataclass(frozen=True, slots=True)
class ModifyColumnClause:
    column: ColumnDefinition


@dataclass(frozen=True, slots=True)
class RenameTableClause:
    """``ALTER TABLE t RENAME [TO|AS] t2``."""

    target: TableName


@dataclass(frozen=True, slots=True)
class IgnoredClause:
    """A clause with no effect on the lake (index, constraint, default, table option...)."""

    text: str


AlterClause = (
    AddColumnClause
    | DropColumnClause
    | RenameColumnClause
    | ChangeColumnClause
    | ModifyColumnClause
    | RenameTableClause
    | IgnoredClause
)


@dataclass(frozen=True, slots=True)
class CreateTable:
    """``CREATE [OR REPLACE] TABLE [IF NOT EXISTS] t ...``: only the name matters (tables are
    created from the TABLE_MAP on first sight). ``or_replace`` drops an existing table first."""

    table: TableName
    text: str
    if_not_exists: bool = False
    or_replace: bool = False

    @property
    def tables(self) -> tuple[TableName, ...]:
        return (self.table,)


@dataclass(frozen=True, slots=True)
class AlterTable:
    table: TableName
    clauses: tuple[AlterClause, ...]
    text: str

    @property
    def tables(self) -> tuple[TableName, ...]:
        renamed = tuple(c.target for c in self.clauses if isinstance(c, RenameTableClause))
        return (self.table, *renamed)


@dataclass(frozen=True, slots=True)
class TruncateTable:
    table: TableName
    text: str

    @property
    def tables(self) -> tuple[TableName, ...]:
        return (self.table,)


@dataclass(frozen=True, slots=True)
class DropTables:
    names: tuple[TableName, ...]
    text: str
    if_exists: bool = False

    @property
    def tables(self) -> tuple[TableName, ...]:
        return self.names


@dataclass(frozen=True, slots=True)
class RenameTables:
    """``RENAME TABLE a TO b, c TO d``: applied in order (``a TO tmp, b TO a, tmp TO b``
    swaps two tables)."""

    pairs: tuple[tuple[TableName, TableName], ...]
    text: str

    @property
    def tables(self) -> tuple[TableName, ...]:
        return tuple(name for pair in self.pairs for name in pair)


@dataclass(frozen=True, slots=True)
class DropDatabase:
    """``DROP {DATABASE|SCHEMA} db``: every table of ``db`` is dropped."""

    database: str
    text: str

    @property
    def tables(self) -> tuple[TableName, ...]:
        return ()


DdlStatement = CreateTable | AlterTable | TruncateTable | DropTables | RenameTables | DropDatabase
