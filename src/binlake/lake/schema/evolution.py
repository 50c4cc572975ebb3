"""Schema evolution: from the Iceberg table's schema, the TABLE_MAP now in force and the DDL seen
since the two were last in sync, the ordered Iceberg schema changes (Spark SQL).

The TABLE_MAP is the ground truth for columns, types and the primary key; the DDL text
(``binlake.ddl.parse``) only tells a rename from a drop and an add. The applier evolves a
table when its ALTER is applied, before any TABLE_MAP shows the new shape: ``plan_from_statement``
makes the same plan from the statement alone, with the Iceberg column each defined column's
type text maps to (``binlake.ddl.types``, the same mapping as a TABLE_MAP column's), and
gives None when a type or the key cannot be placed so; the next TABLE_MAP is checked against
the result all the same (``plan_evolution``, normally an empty plan). Rules:

* a column only in the TABLE_MAP is added, nullable (Iceberg v2 cannot add a required column),
  at the end (Iceberg adds by name; ``AddColumn.column.index`` records the source position);
* a column only in Iceberg is dropped; a column the DDL renamed (``RENAME COLUMN``, ``CHANGE``)
  is renamed, keeping its data; a rename that only changes letter case is not made (Spark
  resolves names without case; MariaDB column names are case-insensitive);
* types may widen as Iceberg allows: int -> long, float -> double, decimal(p,s) -> decimal(p',s)
  with p' > p, within one kind of source type (an INT becoming a TIME is not a widening);
  a change that keeps the Iceberg type (VARCHAR(10) -> TEXT, TINYINT -> INT) only updates the
  column comment, which holds the source type. Anything else (narrowing, int -> string, a
  decimal scale change, a lower fractional-second precision, which rounds the source's values)
  raises ``IncompatibleSchemaChangeError``;
* NOT NULL -> NULL drops Iceberg's NOT NULL; NULL -> NOT NULL leaves the column optional;
* the primary key is the Iceberg identifier fields. A new key is set when every key column
  already exists in Iceberg as a required column (the table equals the source at that point,
  so the source has checked the new key's uniqueness); otherwise, and when a table gains or
  loses its key (change log <-> keyed), ``IncompatibleSchemaChangeError``.

Order of the changes: identifier fields (under the columns' current names, so that an old key
column can be dropped after), drops, renames (a chain ``b->c, a->b`` in dependency order; a
swap is refused), type, nullability and comment updates, adds.

Idempotence: a schema change is an Iceberg metadata commit without a snapshot, so it carries no
position and the applier may replay the same DDL after a crash, against a schema that already
has all or part of it. The DDL is replayed tolerantly: a rename whose source is gone and whose
target exists, an ADD of an existing column, a DROP of a missing one are taken as done. Against
a schema that already has the changes the plan is empty, with one exception: ``DROP c, ADD c``
(a column re-created under its own name) cannot be told apart from its result, so a replay
drops and re-adds ``c``; nothing is lost, as a replay only happens before any row was written
after the DDL, when ``c`` holds only nulls.

Tables without a primary key are change logs (``changelog_schema``) unless the configuration
names key columns (``target_schema(..., key_columns=...)``). ``read_lake_schema``
(``binlake.lake.tables.actions``) reads an Iceberg table's schema back as a ``LakeSchema``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from binlake.binlog.names import TableName
from binlake.binlog.tablemap import TableMap
from binlake.ddl.statements import (
    AddColumnClause,
    AlterClause,
    AlterTable,
    ChangeColumnClause,
    ColumnDefinition,
    DdlStatement,
    DropColumnClause,
    ModifyColumnClause,
    RenameColumnClause,
    RenameTableClause,
    RenameTables,
)
from binlake.errors import (
    ConfigError,
    IncompatibleSchemaChangeError,
    UnsupportedTypeError,
)
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
from binlake.typemap import IcebergType, LakeColumn, LakeSchema, lake_schema

__all__ = [
    "CHANGELOG_COLUMNS",
    "SchemaChange",  # the type of what the planners return; its members: schema_changes
    "changelog_schema",
    "is_changelog",
    "keyed_schema",
    "plan_evolution",
    "plan_from_statement",
    "target_schema",
]


# ---- change logs and configured keys ----------------------------------------------------------

CHANGELOG_OP = "_binlake_op"
CHANGELOG_POSITION = "_binlake_position"
CHANGELOG_SEQ = "_binlake_seq"
#: The columns a change-log table has after the source's: (name, type, comment).
CHANGELOG_COLUMNS: tuple[tuple[str, IcebergType, str], ...] = (
    (CHANGELOG_OP, IcebergType.STRING, "binlake: insert, update_before, update_after or delete"),
    (CHANGELOG_POSITION, IcebergType.STRING, "binlake: source position file:pos"),
    (CHANGELOG_SEQ, IcebergType.LONG, "binlake: order within the position"),
)
_CHANGELOG_NAMES = frozenset(name for name, _, _ in CHANGELOG_COLUMNS)


#: ``shape`` of recent TABLE_MAPs (every rows event has one; ``replace`` is slow for as many).
_SHAPES: dict[TableMap, TableMap] = {}
_SHAPES_KEPT = 1024


def shape(table_map: TableMap) -> TableMap:
    """A TABLE_MAP without what changes while the table does not (its id, its flags); equal
    TABLE_MAPs give the same object."""
    shaped = _SHAPES.get(table_map)
    if shaped is None:
        if len(_SHAPES) >= _SHAPES_KEPT:
            _SHAPES.clear()
        shaped = _SHAPES[table_map] = replace(table_map, table_id=0, flags=0)
    return shaped


def changelog_schema(tm: TableMap, hints: Mapping[int, str] | None = None) -> LakeSchema:
    """The schema of a table without a primary key, replicated as a change log: the source
    columns, then ``_binlake_op`` ('insert' | 'update_before' | 'update_after' | 'delete'),
    ``_binlake_position`` (source ``file:pos``) and ``_binlake_seq`` (order within the
    position), all three NOT NULL. No identifier fields: rows are appended, never merged."""
    base = lake_schema(tm, hints)
    for column in base.columns:
        if column.name.lower() in _CHANGELOG_NAMES:
            raise UnsupportedTypeError(
                f"column {column.name} has a name binlake reserves for change-log tables",
                table=str(base.source_table),
                hint="rename the column in the source, or name key columns for the table",
            )
    extra = tuple(
        LakeColumn(name, tm.column_count + i, comment, lake_type, nullable=False)
        for i, (name, lake_type, comment) in enumerate(CHANGELOG_COLUMNS)
    )
    return LakeSchema(base.source_table, base.columns + extra, ())


def is_changelog(schema: LakeSchema) -> bool:
    """Whether ``schema`` (read from Iceberg) is a change-log table's."""
    return any(column.name == CHANGELOG_OP for column in schema.columns)


def keyed_schema(
    tm: TableMap, key_columns: Sequence[str], hints: Mapping[int, str] | None = None
) -> LakeSchema:
    """The schema of a table merged on configured ``key_columns`` (the source may have no
    primary key). Each must exist and be NOT NULL in the source: Iceberg identifier fields are
    required columns, and a nullable column is no key."""
    base = lake_schema(tm, hints)
    by_name = {column.name.lower(): column for column in base.columns}
    key: list[str] = []
    for name in key_columns:
        column = by_name.get(name.lower())
        if column is None:
            raise ConfigError(
                f"key column {name} of table {base.source_table} is not a column of the table "
                f"(it has {', '.join(c.name for c in base.columns)})",
                field="tables.key_columns",
            )
        if column.nullable:
            raise ConfigError(
                f"key column {column.name} of table {base.source_table} is nullable in the "
                "source; a key column must be NOT NULL",
                field="tables.key_columns",
            )
        key.append(column.name)
    if not key:
        raise ConfigError(
            f"no key columns named for {base.source_table}", field="tables.key_columns"
        )
    return replace(base, key=tuple(key))


def target_schema(
    tm: TableMap,
    *,
    hints: Mapping[int, str] | None = None,
    key_columns: Sequence[str] | None = None,
) -> LakeSchema:
    """The Iceberg schema for a source table: merged on configured ``key_columns`` if given,
    else on its primary key, else a change log (``changelog_schema``)."""
    if key_columns:
        return keyed_schema(tm, key_columns, hints)
    if tm.primary_key:
        return lake_schema(tm, hints)
    return changelog_schema(tm, hints)


# ---- replaying the DDL on column names --------------------------------------------------------

#: Final column (case-folded name) -> (its name, the current Iceberg column it was, or None).
_Columns = dict[str, tuple[str, str | None]]


def _fold(name: str) -> str:
    return name.casefold()


class _DdlReplay:
    """The DDL since the last sync, replayed on the current Iceberg column names, tolerating
    what is already done (see the module docstring)."""

    def __init__(self, current: Iterable[str]) -> None:
        self.current = {_fold(name): name for name in current}
        self.columns: _Columns = {key: (name, name) for key, name in self.current.items()}
        self.texts: list[str] = []

    def run(self, aliases: set[TableName], ddl: Sequence[DdlStatement]) -> None:
        for statement in ddl:
            if isinstance(statement, AlterTable) and statement.table in aliases:
                self.texts.append(statement.text)
                self._alter(statement.clauses)
                aliases.update(
                    c.target for c in statement.clauses if isinstance(c, RenameTableClause)
                )
            elif isinstance(statement, RenameTables):
                aliases.update(new for old, new in statement.pairs if old in aliases)

    def _alter(self, clauses: Sequence[AlterClause]) -> None:
        """One ALTER: drops and renames name the columns before it, adds the columns after."""
        before = self.columns
        after = dict(before)
        for clause in clauses:
            if isinstance(clause, DropColumnClause):
                after.pop(_fold(clause.name), None)
        renames = [(old, new) for old, new in _renames(clauses) if _fold(old) != _fold(new)]
        moving = [(old, new, after.pop(_fold(old))) for old, new in renames if _fold(old) in after]
        for old, new, entry in moving:
            if _fold(new) in after:  # the target exists: done before, the source was re-added
                after[_fold(old)] = entry
            else:
                after[_fold(new)] = (new, entry[1])
        for old, new in renames:
            key = _fold(new)
            if _fold(old) not in before and key not in after and key in self.current:
                after[key] = (new, self.current[key])  # done before: the target is the column
        for clause in clauses:
            if isinstance(clause, AddColumnClause) and _fold(clause.column.name) not in after:
                after[_fold(clause.column.name)] = (clause.column.name, None)
        self.columns = after


def _renames(clauses: Sequence[AlterClause]) -> list[tuple[str, str]]:
    out = []
    for clause in clauses:
        if isinstance(clause, RenameColumnClause):
            out.append((clause.old, clause.new))
        elif isinstance(clause, ChangeColumnClause):
            out.append((clause.old, clause.column.name))
    return out


# ---- planning ---------------------------------------------------------------------------------


@dataclass
class _Plan:
    table: str
    statement: str | None
    current: dict[str, LakeColumn]  # by case-folded name
    target: LakeSchema
    #: Target column name -> the current column it comes from (None: new).
    origins: dict[str, str | None]

    def incompatible(
        self,
        message: str,
        column: str | None = None,
        old: str | None = None,
        new: str | None = None,
    ) -> IncompatibleSchemaChangeError:
        ddl = f" (DDL: {self.statement})" if self.statement else " (no DDL for it was seen)"
        return IncompatibleSchemaChangeError(
            f"{message}{ddl}",
            table=self.table,
            statement=self.statement,
            column=column,
            old_type=old,
            new_type=new,
        )


def plan_evolution(
    current: LakeSchema,
    new_map: TableMap,
    ddl: Sequence[DdlStatement],
    *,
    hints: Mapping[int, str] | None = None,
    key_columns: Sequence[str] | None = None,
) -> list[SchemaChange]:
    """The ordered changes that bring the Iceberg table with schema ``current`` (as
    ``read_lake_schema`` gives it) to the TABLE_MAP ``new_map``; ``ddl``: the statements since
    the two were last in sync (others than this table's ALTERs and renames are ignored).

    ``hints`` and ``key_columns`` as for ``target_schema``. Empty when nothing changed, also
    when the changes were already made. Raises ``IncompatibleSchemaChangeError``."""
    changelog = is_changelog(current)
    keyed_target = target_schema(new_map, hints=hints, key_columns=key_columns)
    target = changelog_schema(new_map, hints) if changelog else keyed_target
    replay = _DdlReplay(c.name for c in _data_columns(current))
    replay.run({current.source_table, new_map.name}, ddl)
    plan = _new_plan(current, target, replay, str(new_map.name))
    if changelog and keyed_target.key:
        raise plan.incompatible(
            "the table is replicated as a change log (it had no primary key); the source now "
            f"has the key ({', '.join(keyed_target.key)})"
        )
    return _changes(plan, current)


def plan_from_statement(
    current: LakeSchema,
    statement: AlterTable,
    column_of: Callable[[ColumnDefinition, int], LakeColumn | None],
) -> list[SchemaChange] | None:
    """The changes of one ALTER of the table, planned from its text alone, before any TABLE_MAP
    shows the new shape: the same plan as ``plan_evolution`` against the TABLE_MAP that follows,
    as long as ``column_of`` maps every column the statement defines (ADD, CHANGE, MODIFY) to
    the Iceberg column that TABLE_MAP column would give (``binlake.ddl.types``).

    None when it cannot be planned so (a type ``column_of`` cannot place, a key column
    dropped): the TABLE_MAP decides then. Replays tolerantly like ``plan_evolution``."""
    replay = _DdlReplay(c.name for c in _data_columns(current))
    replay.run({current.source_table}, [statement])
    defined = _definitions(statement)
    keys = {_fold(k) for k in current.key}
    columns: list[LakeColumn] = []
    for index, (folded, (name, origin)) in enumerate(replay.columns.items()):
        definition, retyped = defined.get(folded, (None, False))
        if definition is not None and (origin is None or retyped):
            column = column_of(definition, index)
            if column is None:
                return None
            if origin is not None and _fold(origin) in keys:
                column = replace(column, nullable=False)  # a key column is NOT NULL
        else:
            assert origin is not None
            column = replace(current_column(current, origin), name=name, index=index)
        columns.append(column)
    origins = {_fold(origin): name for name, origin in replay.columns.values() if origin}
    if any(_fold(k) not in origins for k in current.key):
        return None
    extra = tuple(c for c in current.columns if c.name in _CHANGELOG_NAMES)
    key = tuple(origins[_fold(k)] for k in current.key)
    target = LakeSchema(current.source_table, (*columns, *extra), key)
    return _changes(_new_plan(current, target, replay, str(current.source_table)), current)


def _definitions(statement: AlterTable) -> dict[str, tuple[ColumnDefinition, bool]]:
    """Columns the statement defines, by final name: (definition, whether it may retype an
    existing column: CHANGE and MODIFY do, ADD does not)."""
    out: dict[str, tuple[ColumnDefinition, bool]] = {}
    for clause in statement.clauses:
        if isinstance(clause, AddColumnClause):
            out[_fold(clause.column.name)] = (clause.column, False)
        elif isinstance(clause, ChangeColumnClause | ModifyColumnClause):
            out[_fold(clause.column.name)] = (clause.column, True)
    return out


def current_column(schema: LakeSchema, name: str) -> LakeColumn:
    """The column ``name`` of ``schema`` (names compared without case)."""
    return next(c for c in schema.columns if _fold(c.name) == _fold(name))


def _changes(plan: _Plan, current: LakeSchema) -> list[SchemaChange]:
    changes: list[SchemaChange] = []
    changes.extend(_key_change(plan, current))
    used = {_fold(origin) for origin in plan.origins.values() if origin is not None}
    changes.extend(
        DropColumn(column.name) for key, column in plan.current.items() if key not in used
    )
    changes.extend(_ordered_renames(plan))
    for column in _data_columns(plan.target):
        origin = plan.origins[column.name]
        if origin is None:
            changes.append(AddColumn(replace(column, nullable=True)))
        else:
            changes.extend(_column_updates(plan, plan.current[_fold(origin)], column))
    adds = [c for c in changes if isinstance(c, AddColumn)]
    return [c for c in changes if not isinstance(c, AddColumn)] + adds


def _new_plan(current: LakeSchema, target: LakeSchema, replay: _DdlReplay, table: str) -> _Plan:
    plan = _Plan(
        table=table,
        statement="; ".join(replay.texts) or None,
        current={_fold(c.name): c for c in _data_columns(current)},
        target=target,
        origins={},
    )
    plan.origins = _origins(plan, replay.columns)
    return plan


def _data_columns(schema: LakeSchema) -> tuple[LakeColumn, ...]:
    return tuple(c for c in schema.columns if c.name not in _CHANGELOG_NAMES)


def _origins(plan: _Plan, replayed: _Columns) -> dict[str, str | None]:
    """For each target column, the current column it comes from (None: new)."""
    origins: dict[str, str | None] = {}
    for column in _data_columns(plan.target):
        entry = replayed.get(_fold(column.name))
        origins[column.name] = entry[1] if entry is not None else None
    taken = {_fold(o) for o in origins.values() if o is not None}
    for name, origin in origins.items():
        # A TABLE_MAP column the DDL did not account for keeps a current column of its name.
        key = _fold(name)
        if origin is None and key in plan.current and key not in taken and key not in replayed:
            origins[name] = plan.current[key].name
            taken.add(key)
    return origins


def _key_change(plan: _Plan, current: LakeSchema) -> list[SchemaChange]:
    new_key = plan.target.key
    if not new_key and not current.key:
        return []
    if not new_key:
        raise plan.incompatible(
            f"the source table no longer has a primary key (it was {', '.join(current.key)}); "
            "binlake merges this table on its key"
        )
    origins = [plan.origins.get(name) for name in new_key]
    if {_fold(o) for o in origins if o is not None} == {_fold(k) for k in current.key} and all(
        origins
    ):
        return []
    for name, origin in zip(new_key, origins, strict=True):
        column = plan.current.get(_fold(origin)) if origin is not None else None
        if column is None or column.nullable:
            raise plan.incompatible(
                f"the primary key changed from ({', '.join(current.key) or 'none'}) to "
                f"({', '.join(new_key)}), and {name} is not a required column in Iceberg "
                "(identifier fields must be)",
                column=name,
            )
    return [SetIdentifierFields(tuple(o for o in origins if o is not None))]


def _ordered_renames(plan: _Plan) -> list[SchemaChange]:
    """The renames, each one after the renames that free its target name."""
    pending = {
        _fold(origin): (origin, name)
        for name, origin in plan.origins.items()
        if origin is not None and _fold(origin) != _fold(name)
    }
    occupied = {
        key for key in plan.current if key in {_fold(o) for o in plan.origins.values() if o}
    }
    ordered: list[SchemaChange] = []
    while pending:
        ready = [key for key, (_, new) in pending.items() if _fold(new) not in occupied]
        if not ready:
            names = ", ".join(f"{old} -> {new}" for old, new in pending.values())
            raise plan.incompatible(f"columns swap names ({names}); Iceberg renames one by one")
        for key in ready:
            old, new = pending.pop(key)
            occupied.discard(key)
            occupied.add(_fold(new))
            ordered.append(RenameColumn(old, new))
    return ordered


# ---- column types -----------------------------------------------------------------------------

#: Kinds of source types: a change of kind converts values in ways binlake's mapping does not.
_KINDS: dict[str, str] = {
    **dict.fromkeys(("TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT"), "integer"),
    **dict.fromkeys(("FLOAT", "DOUBLE"), "float"),
    **dict.fromkeys(("BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"), "bytes"),
    **{name: name.lower() for name in ("YEAR", "BIT", "DECIMAL", "DATE", "DATETIME", "TIMESTAMP")},
    **{"TIME": "time", "GEOMETRY": "geometry"},
}
_TEXT_KIND = "text"  # CHAR, VARCHAR, TEXT, ENUM, SET, JSON, UUID, INET: all labels as text
_FSP_KINDS = frozenset({"datetime", "timestamp", "time"})
_PARAMETERS = re.compile(r"\(([^)]*)\)")


def _kind(source_type: str) -> str | None:
    """The kind of a source type text (``lake_column``'s spelling); None when unknown."""
    words = source_type.split("(")[0].split()
    if not words:
        return None
    if words[0] in _KINDS:
        return _KINDS[words[0]]
    text_types = ("CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "ENUM", "SET")
    if words[0] in (*text_types, "JSON", "UUID", "INET4", "INET6"):
        return _TEXT_KIND
    return None


def _parameters(source_type: str) -> tuple[int, ...]:
    match = _PARAMETERS.search(source_type)
    if match is None:
        return ()
    return tuple(int(part) for part in match.group(1).split(",") if part.strip().isdigit())


def _widens(old: LakeColumn, new: LakeColumn) -> bool:
    if (old.type, new.type) in (
        (IcebergType.INT, IcebergType.LONG),
        (IcebergType.FLOAT, IcebergType.DOUBLE),
    ):
        return True
    return (
        old.type is IcebergType.DECIMAL
        and new.type is IcebergType.DECIMAL
        and new.scale == old.scale
        and new.precision > old.precision
    )


def _column_updates(plan: _Plan, old: LakeColumn, new: LakeColumn) -> list[SchemaChange]:
    """Type, nullability and comment updates of one kept column (named ``new.name`` by now)."""
    changes: list[SchemaChange] = []
    old_text, new_text = (
        f"{old.source_type} ({old.iceberg_type})",
        f"{new.source_type} ({new.iceberg_type})",
    )
    problem = _conversion_problem(old, new)
    if problem is None and old.iceberg_type != new.iceberg_type:
        if not _widens(old, new):
            problem = f"Iceberg cannot change {old.iceberg_type} to {new.iceberg_type}"
        else:
            changes.append(WidenColumnType(new.name, old.iceberg_type, new))
    if problem is not None:
        raise plan.incompatible(
            f"column {new.name} changed from {old_text} to {new_text}: {problem}",
            column=new.name,
            old=old_text,
            new=new_text,
        )
    if not old.nullable and new.nullable:
        changes.append(MakeColumnOptional(new.name))
    if old.source_type != new.source_type:
        changes.append(SetSourceType(new.name, new.source_type))
    return changes


def _conversion_problem(old: LakeColumn, new: LakeColumn) -> str | None:
    """Why the source's conversion of existing values cannot be followed by the lake (None: it
    keeps them, as far as the source types tell)."""
    old_kind, new_kind = _kind(old.source_type), _kind(new.source_type)
    if old_kind is None or new_kind is None:
        return None
    if old_kind != new_kind:
        return f"the source converted its values from {old_kind} to {new_kind}"
    old_params, new_params = _parameters(old.source_type), _parameters(new.source_type)
    if old_kind in _FSP_KINDS and (new_params or (0,))[0] < (old_params or (0,))[0]:
        return "a lower fractional-second precision rounds the source's values"
    if old_kind == "decimal" and old_params[1:] != new_params[1:]:
        return "a decimal scale change rewrites the source's values"
    return None
