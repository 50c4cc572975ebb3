"""The Iceberg side of the applier: one ``LakeTable`` per replicated source table.

What the applier knows of a table comes from the table itself (one source of truth per fact):
its schema (column comments hold the source types, identifier fields the key), and its applied
position and batch number (the newest binlake snapshot's summary). Nothing is cached across runs.

* ``alter``: an ALTER TABLE is applied when its batch (a DDL is a batch alone) is: the schema
  is evolved from the statement (``evolution.plan_from_statement``), then one commit carries the
  ALTER's position: the backfill of the rows the table had (``binlake.lake.schema.backfill``: the
  values MariaDB gave them, which no row event carries), or an empty append. So the table's
  applied position reaches the ALTER even when nothing else happens to it. Crash safety: the
  schema changes are metadata commits without a position; a crash before the positioned commit
  (crash points ``apply_during_ddl``, ``apply_before_backfill``) leaves the table's position
  before the ALTER, so the restart reads it again, plans nothing more (the columns are there)
  and makes the positioned commit then; after it, the ALTER is skipped by position.
* ``prepare``: before a batch writes rows of a table, the Iceberg table must have the shape of
  the TABLE_MAP in force: it is created on first sight (``evolution.target_schema``: the primary
  key, configured key columns, or a change log), or evolved with ``evolution.plan_evolution`` from
  the DDL seen since the two were last in sync: an ALTER ``alter`` could not plan from its text
  (a type it cannot place, or DDL already waiting) is *pending* until then, and its positioned
  commit (backfill or empty append) follows that evolution, before the batch's rows, at the
  ALTER's position and batch properties. Schema changes are metadata commits without a position:
  after a crash they are planned again against what is already there.
* ``commit``: a keyed table's row delta or MERGE (after this process's compaction of it:
  ``turns``), a change log's append; data and position in one commit (``binlake.*`` properties).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import pyarrow as pa
from pyspark.sql import SparkSession

from binlake.binlog.names import TableName
from binlake.binlog.tablemap import TableMap
from binlake.crashpoints import crash_point
from binlake.ddl.defaults import StatementContext
from binlake.ddl.statements import AlterTable, ColumnDefinition, DdlStatement
from binlake.ddl.types import charset_unsure, lake_column_of
from binlake.errors import SparkStatementError, UnsupportedDefaultError
from binlake.lake.catalog.metadata import LakeLineage, copy_bound, exact_at, lake_tables
from binlake.lake.catalog.summary import BATCH, POSITION
from binlake.lake.catalog.target import LakeTarget
from binlake.lake.catalog.write_path import Write, WritePath
from binlake.lake.schema.backfill import (
    AlterColumns,
    Assignment,
    PendingAlter,
    backfill_statement,
    backfill_values,
    columns_after,
    final_names,
)
from binlake.lake.schema.evolution import (
    SchemaChange,
    is_changelog,
    plan_evolution,
    plan_from_statement,
    shape,
    target_schema,
)
from binlake.lake.spark.errors import spark_errors
from binlake.lake.spark.frames import dataframe_from_arrow
from binlake.lake.spark.lineage import (
    current_lineage,
    lineage_cut,
    newest_binlake_summary,
    spark_lake_tables,
)
from binlake.lake.spark.lookup import lake_schema_if_exists, read_lake_schema
from binlake.lake.spark.types import spark_schema
from binlake.lake.tables.actions import drop_table
from binlake.lake.tables.create import TableMaker
from binlake.lake.tables.turns import CompactionTurns
from binlake.lake.write.changes import ChangeLog, KeyedChanges
from binlake.lake.write.commit import append_with_commit_properties, execute_with_commit_properties
from binlake.lake.write.key_positions import KeyPositions
from binlake.lake.write.keyed import KeyedWriter
from binlake.position import SourcePosition, is_new_for, parse_position
from binlake.source.hints import (
    HintNames,
    SourceHints,
    hint_candidates,
    hints_for_map,
    hints_from_comments,
)
from binlake.typemap import LakeColumn, LakeSchema

T = TypeVar("T")


@dataclass
class LakeTable:
    """What the applier holds about one replicated table while it runs."""

    source: TableName
    #: The Iceberg table's Spark SQL name (quoted).
    name: str
    #: None: there is no Iceberg table yet (created at the first rows).
    schema: LakeSchema | None = None
    #: The source position of the newest batch committed to it (None: none yet).
    applied: SourcePosition | None = None
    hint_names: HintNames = field(default_factory=dict)
    #: DDL statements seen since the schema was last in sync with a TABLE_MAP.
    pending_ddl: list[DdlStatement] = field(default_factory=list)
    #: The pending ALTERs, with what their backfills need once the schema has them.
    pending_alters: list[PendingAlter] = field(default_factory=list)
    #: The TABLE_MAP shape the schema is known to match.
    in_sync: TableMap | None = None
    #: Where the table starts to equal the source (``metadata.copy_bound``): None when it
    #: was streamed from its start.
    exact_from: SourcePosition | None = None

    @property
    def changelog(self) -> bool:
        return self.schema is not None and is_changelog(self.schema)

    def hints(self, table_map: TableMap) -> dict[int, str]:
        return hints_for_map(table_map, self.hint_names)

    def new_changes(self, table_map: TableMap) -> KeyedChanges | ChangeLog:
        assert self.schema is not None
        names = table_map.column_names or ()
        if self.changelog:
            return ChangeLog(str(self.source), names)
        return KeyedChanges(
            str(self.source), names, self.schema.key, lake_exact=self.lake_exact(table_map)
        )

    def lake_exact(self, table_map: TableMap) -> bool:
        """True when a key whose first change in a batch is an insert cannot be in the lake:
        the table equals the source at its applied position (``metadata.exact_at``) and
        its key is the source's primary key (the source refused a duplicate of it). Not while
        a copy catches up: streaming then re-applies inserts of rows a later chunk may hold."""
        assert self.schema is not None
        if not exact_at(self.exact_from, self.applied):
            return False
        names, primary = table_map.column_names, table_map.primary_key
        if names is None or not primary:
            return False
        key = tuple(names[i].casefold() for i in primary)
        return key == tuple(name.casefold() for name in self.schema.key)


@dataclass(frozen=True)
class AppliedState:
    """What the lake holds at start: each table's applied position, the newest batch."""

    positions: dict[TableName, SourcePosition]
    max_batch: int


class Lake:
    """The replicated tables of one target (see the module docstring)."""

    def __init__(
        self,
        spark: SparkSession,
        target: LakeTarget,
        *,
        key_columns: Mapping[TableName, Sequence[str]],
        hints: SourceHints,
        on_evolved: Callable[[TableName], None] = lambda _table: None,
        positions: KeyPositions | None = None,
        turns: CompactionTurns | None = None,
    ) -> None:
        self.spark = spark
        self.target = target
        self.key_columns = key_columns
        self.source_hints = hints
        #: Times the applier's retry (``binlake.retry``) tried the current work again:
        #: every commit to a table carries it (``committing``, ``binlake.retries``).
        self.retries = 0
        #: Called with the source table once its pending DDL is in its Iceberg schema.
        self.on_evolved = on_evolved
        self._tables: dict[TableName, LakeTable] = {}
        self._applied: dict[TableName, SourcePosition] = {}
        #: Each table's ``exact_from``, read with the applied positions.
        self._bounds: dict[TableName, SourcePosition | None] = {}
        self._keyed = KeyedWriter(spark, positions)  # positions: None, equality deletes
        self._turns = turns or CompactionTurns()  # a keyed table's commits wait for compactions
        self._maker = TableMaker(spark, target)

    # ---- what the lake holds -------------------------------------------------------------

    def read_applied(self) -> AppliedState:
        """Every selected table's applied position, and the highest batch number of any table
        (a table the filters no longer select keeps its numbers), from the catalog."""
        tables = lake_tables(self.target, lambda t: spark_lake_tables(self.spark, t))
        positions: dict[TableName, SourcePosition] = {}
        max_batch = 0
        for lineage in tables:
            source = self.target.source_table(lineage.identifier)
            if source is None:
                continue  # not a replicated table's (the cuts table, another tool's)
            summary = _newest_binlake(lineage)
            if summary is None:
                continue
            max_batch = max(max_batch, int(summary.get(BATCH, "0") or 0))
            if self.target.selected(source):
                positions[source] = parse_position(summary[POSITION])
                self._bounds[source] = copy_bound(
                    (s.summary for s in lineage.lineage), cut=lineage.lineage_cut
                )
        self._applied = dict(positions)
        return AppliedState(positions, max_batch)

    def reload(self) -> None:
        """Read again, from the catalog, what each table holds: its applied position and its
        schema (after a catalog failure mid-batch, a commit may or may not have landed, and a
        schema change may have). Pending DDL is kept: it is the relay log's, not the lake's."""
        self._maker.forget()
        self.read_applied()
        for source, table in self._tables.items():
            fresh = self._load(source)
            table.schema, table.applied = fresh.schema, fresh.applied
            table.hint_names = fresh.hint_names
            table.in_sync = None

    def known_position(self, source: TableName) -> SourcePosition | None:
        """``source``'s applied position as far as it is known without reading the catalog:
        its loaded table's, else the one ``read_applied`` read (None: not known)."""
        table = self._tables.get(source)
        if table is not None:
            return table.applied
        return self._applied.get(source)

    def known_tables(self) -> list[TableName]:
        """Replicated source tables with an Iceberg table (for DROP DATABASE)."""
        return sorted({*self._applied, *(s for s, t in self._tables.items() if t.schema)})

    def load(self, sources: Iterable[TableName], threads: int) -> None:
        """Read the tables of ``sources`` not read yet, on ``threads`` threads side by side (a
        batch's first use of hundreds of tables)."""
        missing = [s for s in dict.fromkeys(sources) if s not in self._tables]
        if len(missing) < 2 or threads < 2:
            return
        with ThreadPoolExecutor(threads, thread_name_prefix="binlake-load") as pool:
            loaded = list(pool.map(self._load, missing))
        for source, table in zip(missing, loaded, strict=True):
            self._tables.setdefault(source, table)

    def new_table(self, source: TableName) -> LakeTable:
        """The table of ``source``, known to have no Iceberg table (a copy found none): not
        read from the catalog; ``prepare`` creates it."""
        table = self._tables[source] = LakeTable(source, self.target.lake_table(source))
        return table

    def table(self, source: TableName) -> LakeTable:
        """The table of ``source`` (its Iceberg schema read on first use)."""
        table = self._tables.get(source)
        if table is None:
            table = self._tables[source] = self._load(source)
        return table

    def _load(self, source: TableName) -> LakeTable:
        name = self.target.lake_table(source)
        table = LakeTable(source, name)
        schema = lake_schema_if_exists(self.spark, name, source)
        if schema is not None:
            table.schema = schema
            table.hint_names = _comment_hints(table.schema)
            if source in self._applied:
                table.applied = self._applied[source]
                table.exact_from = self._bounds.get(source)
            else:
                lineage = current_lineage(self.spark, name)
                summary = newest_binlake_summary(lineage, name)
                if summary is not None and POSITION in summary:
                    table.applied = parse_position(summary[POSITION])
                cut = lineage_cut(lineage)
                table.exact_from = copy_bound((s.summary for s in lineage), cut=cut)
        return table

    def committing(self, source: TableName, attempt: Callable[[int], T]) -> T:
        """``attempt(retries)``: every commit to ``source``'s table goes through here, told how
        many times its work was tried again (a retried attempt checks first whether the table
        already holds it). A conflict with another writer propagates: the applier's retry
        (``binlake.retry``) reloads every table and does the work again."""
        return attempt(self.retries)

    def drop(self, source: TableName) -> None:
        """Drop ``source``'s Iceberg table if there is one, and forget what was known of it."""
        drop_table(self.spark, self.target.lake_table(source), source)
        self.forget(source)

    def forget(self, source: TableName) -> None:
        """The Iceberg table may have been dropped, moved aside or replaced: read it (schema and
        applied position) from the catalog again when it is next needed."""
        self._tables.pop(source, None)
        self._applied.pop(source, None)
        self._bounds.pop(source, None)

    def forget_all(self) -> None:
        """Read every table from the catalog again when it is next needed (as at a start)."""
        self._tables.clear()
        self._applied.clear()
        self._maker.forget()

    def renamed(self, old: TableName, new: TableName) -> None:
        """``old``'s Iceberg table is now ``new``'s (renamed with its snapshots, or copied);
        its applied position and pending DDL follow it."""
        before = self._tables.pop(old, None)
        self._tables.pop(new, None)
        applied = before.applied if before is not None else self._applied.get(old)
        bound = before.exact_from if before is not None else self._bounds.get(old)
        self._applied.pop(old, None)
        self._applied.pop(new, None)
        self._bounds.pop(old, None)
        if applied is not None:
            self._applied[new] = applied
            self._bounds[new] = bound
        table = self.table(new)
        if before is not None and before.pending_ddl and table.schema is not None:
            table.pending_ddl = before.pending_ddl  # planned against the same columns
            table.pending_alters = before.pending_alters
            table.schema = before.schema

    # ---- schema ------------------------------------------------------------------------------

    def in_sync(self, table: LakeTable, table_map: TableMap) -> bool:
        """``prepare`` has nothing to do: the Iceberg table matches ``table_map`` already."""
        return table.schema is not None and table.in_sync == shape(table_map)

    def prepare(
        self,
        table: LakeTable,
        table_map: TableMap,
        recorded_hints: Mapping[str, str] | None = None,
    ) -> LakeSchema:
        """Make the Iceberg table match ``table_map`` (create or evolve); its schema then.
        ``recorded_hints``: the UUID/INET hints the relay log recorded with the TABLE_MAP."""
        if self.in_sync(table, table_map):
            assert table.schema is not None
            return table.schema
        wanted = shape(table_map)
        self._learn_hints(table, table_map, recorded_hints)
        key = self.key_columns.get(table.source)
        before = table.schema
        changed = before is None
        made: LakeSchema | None = None
        if before is None:
            schema = target_schema(table_map, hints=table.hints(table_map), key_columns=key)
            made = self._maker.make(table.name, table.source, schema)
        else:
            changes = plan_evolution(
                before,
                table_map,
                table.pending_ddl,
                hints=table.hints(table_map),
                key_columns=key,
            )
            changed = self._evolve(table, changes)
        if changed:
            self._reread(table, made)  # else the table is as it was last read
        had_ddl = bool(table.pending_ddl)
        if before is not None:
            self._pending_backfills(table, before)
        table.pending_ddl, table.pending_alters = [], []
        table.in_sync = wanted
        if had_ddl:
            self.on_evolved(table.source)
        assert table.schema is not None
        return table.schema

    def _evolve(self, table: LakeTable, changes: list[SchemaChange]) -> bool:
        """Run ``changes``' statements; whether there was any."""
        statements = [s for change in changes for s in change.statements(table.name)]
        for i, statement in enumerate(statements):
            if i:
                crash_point("apply_during_ddl")
            self._sql(statement, str(table.source))
        return bool(statements)

    def _reread(self, table: LakeTable, made: LakeSchema | None = None) -> None:
        """The table's schema read again (``made``: as the catalog just made it)."""
        table.schema = made or read_lake_schema(self.spark, table.name, table.source)
        table.hint_names = {**table.hint_names, **_comment_hints(table.schema)}

    # ---- ALTER TABLE when it is applied -------------------------------------------------------

    def alter(
        self,
        table: LakeTable,
        statement: AlterTable,
        context: StatementContext,
        position: SourcePosition,
        properties: Mapping[str, str],
    ) -> bool:
        """Apply an ALTER of ``table`` (which has an Iceberg table and not yet this ALTER):
        evolve its schema from the statement, then commit at the ALTER's position: the
        backfill of the rows it had, or an empty append. False when the evolution must wait for
        the table's next TABLE_MAP (the statement's types cannot be placed, or earlier DDL
        waits already): the ALTER is then pending (``prepare``)."""
        before = table.schema
        assert before is not None
        changes = None
        if not table.pending_ddl:
            changes = plan_from_statement(before, statement, _column_mapper(context, before))
        if changes is None:
            pending = PendingAlter(statement, position, dict(properties), context)
            table.pending_ddl.append(statement)
            table.pending_alters.append(pending)
            table.in_sync = None
            return False
        self._evolve(table, changes)
        self._reread(table)
        table.in_sync = None  # the next TABLE_MAP is checked against the schema all the same
        assert table.schema is not None
        values = self._values_or_empty(
            table,
            partial(
                backfill_values,
                statement,
                context,
                AlterColumns(before.columns, table.schema),
                context.clock(self.source_hints),
            ),
        )
        crash_point("apply_before_backfill")
        self._commit_alter(table, values, properties, position)
        return True

    def _pending_backfills(self, table: LakeTable, before: LakeSchema) -> None:
        """After a lazy evolution: each pending ALTER's positioned commit (its backfill, or an
        empty append), at its own position and batch properties, in order; skipped when the
        table is past it (a TRUNCATE since emptied the table)."""
        assert table.schema is not None
        columns = list(before.columns)
        alters = table.pending_alters
        for i, pending in enumerate(alters):
            later = [p.statement for p in alters[i + 1 :]]
            values = self._values_or_empty(
                table,
                partial(
                    backfill_values,
                    pending.statement,
                    pending.context,
                    AlterColumns(columns, table.schema, final_names(later)),
                    pending.context.clock(self.source_hints),
                ),
            )
            columns = columns_after(columns, pending.statement, table.schema)
            if is_new_for(pending.position, table.applied):
                crash_point("apply_before_backfill")
                self._commit_alter(table, values, pending.properties, pending.position)

    def _commit_alter(
        self,
        table: LakeTable,
        values: list[Assignment],
        properties: Mapping[str, str],
        position: SourcePosition,
    ) -> None:
        """The ALTER's positioned commit: the backfill UPDATE, or an empty append."""
        if values:
            statement = backfill_statement(table.name, values)
            execute_with_commit_properties(
                self.spark, statement, properties, str(table.source), lake_table=table.name
            )
        else:
            self._empty_append(table, properties)
        self._positioned(table, position)

    def _values_or_empty(
        self, table: LakeTable, values: Callable[[], list[Assignment]]
    ) -> list[Assignment]:
        """``values()``; a value binlake cannot reproduce matters only for a table with rows
        (MariaDB computed nothing for an empty table): there it is no error."""
        try:
            return values()
        except UnsupportedDefaultError:
            query = f"SELECT 1 FROM {table.name} LIMIT 1"
            with spark_errors(query, str(table.source)):
                if self.spark.sql(query).collect():
                    raise
            return []

    def _empty_append(self, table: LakeTable, properties: Mapping[str, str]) -> None:
        """A snapshot without rows carrying ``properties``: the table's position moves."""
        assert table.schema is not None
        frame = self.spark.createDataFrame([], spark_schema(table.schema))
        append_with_commit_properties(frame, table.name, properties)

    def _positioned(self, table: LakeTable, position: SourcePosition) -> None:
        table.applied = position
        self._applied[table.source] = position

    def _learn_hints(
        self, table: LakeTable, table_map: TableMap, recorded: Mapping[str, str] | None
    ) -> None:
        """Which of the TABLE_MAP's columns the lake does not know yet are UUID/INET: as the
        relay log recorded (``recorded``), else (a relay log written before binlake recorded
        source facts, a snapshot) as the source says now."""
        known = {c.name.casefold() for c in table.schema.columns} if table.schema else set()
        unknown = [n for n in hint_candidates(table_map).values() if n.casefold() not in known]
        if not unknown:
            return
        if recorded is not None:
            learned = {name.casefold(): hint for name, hint in recorded.items()}
        else:
            learned = self.source_hints.for_table(table_map.schema, table_map.table)
        table.hint_names = {**learned, **table.hint_names}

    def _sql(self, statement: str, table: str) -> None:
        with spark_errors(statement, table):
            self.spark.sql(statement)

    # ---- data ------------------------------------------------------------------------------

    def commit(
        self,
        table: LakeTable,
        changes: KeyedChanges | ChangeLog,
        properties: Mapping[str, str],
        position: SourcePosition,
    ) -> Write:
        """Commit ``changes`` to ``table`` in one Iceberg snapshot carrying ``properties`` and
        the write it took (``binlake.lake.catalog.write_path``): a row delta or a MERGE for a keyed
        table (``KeyedWriter``), an append for a change log."""
        schema = table.schema
        assert schema is not None
        if isinstance(changes, ChangeLog):
            write = self._append_log(table, schema, changes, properties)
        else:
            with self._turns.committing(table.source):
                source = str(table.source)
                write = self._keyed.commit(table.name, schema, changes, properties, source)
        self._positioned(table, position)
        return write

    def _append_log(
        self,
        table: LakeTable,
        schema: LakeSchema,
        changes: ChangeLog,
        properties: Mapping[str, str],
    ) -> Write:
        """Append a change log's rows in one snapshot: a data file staged here and committed
        through Iceberg's API with the position and the tags (``binlake.lake.write.row_delta``: no
        Spark job) where the table can take it, else a DataFrame append (a partitioned table,
        whose batches only keyed tables split here; or one ``DeltaLayout.refusal`` names)."""
        write = Write(WritePath.APPEND)
        merged = {**properties, **write.properties()}
        rows = changes.to_arrow(schema.columns)
        deltas, source = self._keyed.deltas, str(table.source)
        target = deltas.open(table.name, (), source)
        if not target.layout.partitioned and target.layout.refusal() is None:
            staged = deltas.stage(target, [(rows, pa.table({}))], source)
            crash_point("apply_before_delta_commit")
            deltas.commit(staged, merged, source)
            return write
        frame = dataframe_from_arrow(self.spark, rows, spark_schema(schema))
        append_with_commit_properties(frame, table.name, merged)
        return write


def _column_mapper(
    context: StatementContext, table: LakeSchema
) -> Callable[[ColumnDefinition, int], LakeColumn | None]:
    """``ddl_types.lake_column_of`` under the session's settings (None where the table's
    default charset may make a text column binary)."""

    def column_of(definition: ColumnDefinition, index: int) -> LakeColumn | None:
        column = lake_column_of(
            definition,
            index,
            sql_mode=context.sql_mode,
            explicit_timestamps=context.explicit_timestamps,
        )
        if column is None or charset_unsure(definition, column, table.columns):
            return None
        return column

    return column_of


def _comment_hints(schema: LakeSchema) -> HintNames:
    return hints_from_comments({c.name: c.source_type for c in schema.columns})


def _newest_binlake(lineage: LakeLineage) -> dict[str, str] | None:
    for snapshot in lineage.lineage:
        if POSITION in snapshot.summary:
            return dict(snapshot.summary)
    if lineage.lineage_cut:
        name = ".".join(lineage.identifier)
        raise SparkStatementError(
            f"{name}: no binlake snapshot among the {len(lineage.lineage)} newest, and older "
            "snapshots were expired; the applied position is unknown",
            hint="the binlake-applied tag keeps the position through any expiry; it was absent "
            "(a commit's tag move cut short, or an older binlake): re-snapshot the table",
            table=name,
        )
    return None
