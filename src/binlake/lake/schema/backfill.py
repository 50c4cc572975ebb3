"""The rows a table had when an ALTER TABLE added columns: the values they got, and the
positioned commit that gives them those values in the lake.

MariaDB writes no row events for the rows a table already has when ``ADD COLUMN`` gives them a
value (a DEFAULT, the implicit default of a NOT NULL column, the statement's time). The applier
gives them that value with one statement, ``UPDATE t SET c = <value>, ...`` over every row,
committed with the ALTER's ``binlake.*`` properties (``binlake.position`` = the ALTER's source
position), right after the Iceberg schema got the columns:

* every row of the Iceberg table then predates the ALTER: a DDL is a batch alone, every batch
  before it is committed first, and the table's rows after the ALTER come in later batches (for
  an ALTER whose evolution waits for the next TABLE_MAP, the UPDATE runs before that batch's
  MERGE);
* the values come from the statement itself (its text and its QUERY event), not from the
  evolution plan: after a crash between the schema change and the UPDATE the plan finds the
  columns already there, but the table's position is still before the ALTER, so the relay log
  gives the ALTER again and the UPDATE runs then; once it committed, the ALTER is skipped by
  position like any change.

``backfill_values`` says what each added column gets (``binlake.ddl.defaults``);
``backfill_statement`` is the UPDATE. An ``ADD COLUMN IF NOT EXISTS`` of a column the lake
already has is ambiguous (the source's no-op, or a column added before a crash): refused when
its rows would need a value, never guessed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal

from binlake.ddl.defaults import (
    StatementContext,
    TimestampRank,
    existing_rows_value,
    is_timestamp,
)
from binlake.ddl.statements import (
    AddColumnClause,
    AlterTable,
    ChangeColumnClause,
    DropColumnClause,
    RenameColumnClause,
)
from binlake.ddl.temporal import SourceClock
from binlake.errors import UnsupportedDefaultError
from binlake.lake.schema.alterations import sql_string
from binlake.lake.schema.sql import quote
from binlake.position import SourcePosition
from binlake.typemap import IcebergType, LakeColumn, LakeSchema

__all__ = [
    "AlterColumns",
    "Assignment",
    "PendingAlter",
    "backfill_statement",
    "backfill_values",
    "columns_after",
    "final_names",
    "sql_literal",
]

#: A column and the value every existing row gets in it.
Assignment = tuple[LakeColumn, object]


@dataclass(frozen=True, slots=True)
class PendingAlter:
    """An ALTER whose evolution waits for the table's next TABLE_MAP, with what its backfill
    needs then: its position and batch properties (the backfill commits with them)."""

    statement: AlterTable
    position: SourcePosition
    properties: dict[str, str]
    context: StatementContext


def _fold(name: str) -> str:
    return name.casefold()


def _same_name(name: str) -> str | None:
    return name


@dataclass(frozen=True, slots=True)
class AlterColumns:
    """A table's columns around one ALTER, as its backfill reads them."""

    #: The columns the table had before the statement (as far as the lake tells).
    before: Sequence[LakeColumn]
    #: The Iceberg schema with the columns the statement adds.
    after: LakeSchema
    #: A column's name in ``after``; None: dropped since, by a later statement evolved together
    #: with this one (``final_names``).
    final_name: Callable[[str], str | None] = _same_name


def backfill_values(
    statement: AlterTable,
    context: StatementContext,
    columns: AlterColumns,
    clock: SourceClock | None = None,
) -> list[Assignment]:
    """What the rows the table had get in the columns ``statement`` adds; ``clock``: the
    source's time zone conversions (``StatementContext.clock``), for ``SYSTEM`` and named
    zones."""
    table = str(statement.table)
    dropped = {_fold(c.name) for c in statement.clauses if isinstance(c, DropColumnClause)}
    existing = {_fold(c.name): c for c in columns.before if _fold(c.name) not in dropped}
    timestamps = sum(1 for c in existing.values() if is_timestamp(c))
    out: list[Assignment] = []
    for clause in statement.clauses:
        if not isinstance(clause, AddColumnClause):
            continue
        definition = clause.column
        name = columns.final_name(definition.name)
        column = _column(columns.after, name) if name is not None else None
        if column is None:
            continue  # dropped by a later statement: nothing of it is left to fill
        known = _fold(definition.name) in existing
        others = timestamps - (1 if known else 0)
        value = existing_rows_value(
            definition,
            column,
            context,
            clock,
            timestamp_rank=_timestamp_rank(placed=bool(definition.position), others=others),
            table=table,
            statement=statement.text,
        )
        timestamps += 1 if is_timestamp(column) and not known else 0
        if clause.if_not_exists and known:
            _ambiguous(value, definition.name, statement)
            continue
        if value is not None:
            out.append((column, value))
    return out


def _timestamp_rank(*, placed: bool, others: int) -> TimestampRank:
    """An added column's rank among the table's TIMESTAMP columns (``others``: how many the
    table has besides it): first when there is none; not told when the statement placed it
    (FIRST, AFTER) among them."""
    if placed and others:
        return TimestampRank.UNKNOWN
    return TimestampRank.FIRST if others == 0 else TimestampRank.LATER


def _ambiguous(value: object, name: str, statement: AlterTable) -> None:
    if value is not None:
        table = str(statement.table)
        raise UnsupportedDefaultError(
            f"{table}: ADD COLUMN IF NOT EXISTS {name} finds the column in the lake: binlake "
            "cannot tell whether the source had it already (nothing to do) or a crash came "
            "between adding it and giving the table's rows its value",
            table=table,
            statement=statement.text,
            column=name,
        )


def _column(schema: LakeSchema, name: str) -> LakeColumn | None:
    return next((c for c in schema.columns if _fold(c.name) == _fold(name)), None)


def final_names(later: Sequence[AlterTable]) -> Callable[[str], str | None]:
    """A column's name after the ``later`` ALTERs of its table (under whichever name the table
    had then): renamed, or None once dropped (a column added again after that is another)."""

    def follow(name: str) -> str | None:
        current: str | None = name
        for statement in later:
            for clause in statement.clauses:
                if current is None:
                    return None
                if isinstance(clause, DropColumnClause) and _fold(clause.name) == _fold(current):
                    current = None
                elif isinstance(clause, RenameColumnClause) and _fold(clause.old) == _fold(current):
                    current = clause.new
                elif isinstance(clause, ChangeColumnClause) and _fold(clause.old) == _fold(current):
                    current = clause.column.name
        return current

    return follow


def columns_after(
    columns: Iterable[LakeColumn], statement: AlterTable, after: LakeSchema
) -> list[LakeColumn]:
    """The columns a table has after ``statement``, from those before it (a column it adds or
    redefines as ``after`` has it, or as its type text says when ``after`` no longer has it)."""
    out = {_fold(c.name): c for c in columns}
    for clause in statement.clauses:
        if isinstance(clause, DropColumnClause):
            out.pop(_fold(clause.name), None)
        elif isinstance(clause, RenameColumnClause) and _fold(clause.old) in out:
            out[_fold(clause.new)] = replace(out.pop(_fold(clause.old)), name=clause.new)
        elif isinstance(clause, AddColumnClause | ChangeColumnClause):
            if isinstance(clause, ChangeColumnClause):
                out.pop(_fold(clause.old), None)
            definition = clause.column
            column = _column(after, definition.name) or LakeColumn(
                definition.name, 0, definition.type_text.upper(), IcebergType.STRING
            )
            out.setdefault(_fold(definition.name), column)
    return list(out.values())


# ---- the UPDATE ----------------------------------------------------------------------------------


def backfill_statement(table: str, assignments: Sequence[Assignment]) -> str:
    """``UPDATE table SET c = <value>, ...``: every row (see the module docstring)."""
    sets = ", ".join(f"{quote(c.name)} = {sql_literal(c, v)}" for c, v in assignments)
    return f"UPDATE {table} SET {sets}"


def sql_literal(column: LakeColumn, value: object) -> str:
    """A Spark SQL literal of ``column``'s Iceberg type holding ``value`` exactly."""
    kind = column.type
    if kind is IcebergType.INT and isinstance(value, int):
        return str(value)
    if kind is IcebergType.LONG and isinstance(value, int):
        return f"{value}L"
    if kind is IcebergType.DECIMAL and isinstance(value, Decimal):
        return f"CAST('{format(value, 'f')}' AS {column.sql_type})"
    if kind in (IcebergType.FLOAT, IcebergType.DOUBLE) and isinstance(value, float):
        return f"CAST('{value!r}' AS {column.sql_type})"  # repr: the shortest exact text
    if kind is IcebergType.DATE and isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if kind is IcebergType.TIMESTAMP and isinstance(value, dt.datetime):
        return f"TIMESTAMP_NTZ '{value.isoformat(sep=' ', timespec='microseconds')}'"
    if kind is IcebergType.TIMESTAMPTZ and isinstance(value, dt.datetime):
        utc = value.astimezone(dt.UTC).replace(tzinfo=None)
        return f"TIMESTAMP '{utc.isoformat(sep=' ', timespec='microseconds')} UTC'"
    if kind is IcebergType.STRING and isinstance(value, str):
        if value.isascii() and value.isprintable():
            return sql_string(value)
        return f"decode(X'{value.encode('utf-8').hex()}', 'UTF-8')"
    if kind is IcebergType.BINARY and isinstance(value, bytes):
        return f"X'{value.hex()}'"
    raise TypeError(f"no {column.iceberg_type} literal for {value!r}")
