"""The Iceberg schema changes ``binlake.lake.schema.evolution`` plans, each with its Spark SQL.

Each change is a metadata commit of its own, without a snapshot and so without a position: the
planner makes every one of them safe to plan again after a crash (see
``binlake.lake.schema.evolution``).
"""

from __future__ import annotations

from dataclasses import dataclass

from binlake.lake.schema.sql import quote
from binlake.typemap import LakeColumn

__all__ = [
    "AddColumn",
    "DropColumn",
    "MakeColumnOptional",
    "RenameColumn",
    "SchemaChange",
    "SetIdentifierFields",
    "SetSourceType",
    "WidenColumnType",
    "sql_string",
]


def sql_string(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# ---- the changes ------------------------------------------------------------------------------


class _AlterTable:
    """A change made by one ``ALTER TABLE`` of the Iceberg table: ``clause()`` is what follows
    the table's name."""

    __slots__ = ()

    def clause(self) -> str:
        raise NotImplementedError

    def statements(self, table: str) -> list[str]:
        return [f"ALTER TABLE {table} {self.clause()}"]


@dataclass(frozen=True, slots=True)
class SetIdentifierFields(_AlterTable):
    """The primary key changed: Iceberg's identifier fields, by the columns' current names."""

    names: tuple[str, ...]

    def clause(self) -> str:
        return "SET IDENTIFIER FIELDS " + ", ".join(quote(name) for name in self.names)


@dataclass(frozen=True, slots=True)
class DropColumn(_AlterTable):
    name: str

    def clause(self) -> str:
        return f"DROP COLUMN {quote(self.name)}"


@dataclass(frozen=True, slots=True)
class RenameColumn(_AlterTable):
    old: str
    new: str

    def clause(self) -> str:
        return f"RENAME COLUMN {quote(self.old)} TO {quote(self.new)}"


@dataclass(frozen=True, slots=True)
class WidenColumnType(_AlterTable):
    """int -> long, float -> double, decimal(p,s) -> decimal(p',s) with p' > p."""

    name: str
    old_type: str
    column: LakeColumn

    def clause(self) -> str:
        return f"ALTER COLUMN {quote(self.name)} TYPE {self.column.sql_type}"


@dataclass(frozen=True, slots=True)
class MakeColumnOptional(_AlterTable):
    name: str

    def clause(self) -> str:
        return f"ALTER COLUMN {quote(self.name)} DROP NOT NULL"


@dataclass(frozen=True, slots=True)
class SetSourceType(_AlterTable):
    """The source type changed without changing the Iceberg type: the column comment follows."""

    name: str
    source_type: str

    def clause(self) -> str:
        return f"ALTER COLUMN {quote(self.name)} COMMENT {sql_string(self.source_type)}"


@dataclass(frozen=True, slots=True)
class AddColumn(_AlterTable):
    """A new column, always nullable, appended; ``column.index`` is its source position."""

    column: LakeColumn

    def clause(self) -> str:
        column = self.column
        comment = sql_string(column.source_type)
        return f"ADD COLUMN {quote(column.name)} {column.sql_type} COMMENT {comment}"


SchemaChange = (
    SetIdentifierFields
    | DropColumn
    | RenameColumn
    | WidenColumnType
    | MakeColumnOptional
    | SetSourceType
    | AddColumn
)
