"""Applying one batch to the lake: rows batches (decode, net changes, one commit per table) and
DDL batches (table actions and pending schema evolution).

Rows: each rows event is decoded with the TABLE_MAP logged with it and the table's hints, its
rows converted to the values written (``types.row_converter``), and fed to the table's
``KeyedChanges`` or ``ChangeLog``, skipping every transaction the table already has (its
applied position). Then one commit per table, each carrying the batch's ``binlake.*``
properties. A crash anywhere leaves each table either with the whole batch or without it;
restart re-reads the batch and each table skips what it has (crash points
``apply_before_commit``, ``apply_between_tables``, ``apply_after_commits``).

DDL: an ALTER of a table with an Iceberg table that does not have it yet (by position) is
applied at once (``Lake.alter``): the schema evolved from the statement, then one commit at the
ALTER's position, the backfill of the values the ALTER gave the table's rows (no row event
carries them) or an empty append; so a table whose last change is an ALTER has that position,
and a restart after a crash before that commit reads the ALTER again (crash safety: see
``binlake.lake.tables.lake``). An ALTER whose types the statement alone cannot place becomes
*pending* on its table (``Lake.prepare`` evolves the schema at the table's next TABLE_MAP, the
truth about the columns, and backfills then); its relay-log transaction stays counted in the
checkpoint until then (``held``), so that a restart reads it again. TRUNCATE, DROP, RENAME and
CREATE are table actions (``binlake.lake.tables.actions``); a TRUNCATE the table already has (by
position) is not run again,
and a RENAME whose target already exists was made before a crash: a table of the old name can
only be a replay's re-creation, and is dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from binlake.apply.accounting import DdlHolds
from binlake.apply.commit_pool import BatchCommits, CommitPool
from binlake.apply.holds import CopyHolds
from binlake.apply.plan import Batch, TableRows, Unit, UnitKind
from binlake.binlog.encodings.charsets import decode_text
from binlake.binlog.errors import BinlakeError
from binlake.binlog.events import QueryEvent
from binlake.binlog.names import TableName
from binlake.binlog.rows import decode_rows
from binlake.binlog.source_facts import SourceFactsEvent, ZoneTimes
from binlake.config import OnDrop
from binlake.crashpoints import crash_point
from binlake.ddl.defaults import StatementContext
from binlake.ddl.parse import parse_ddl
from binlake.ddl.statements import AlterTable, DdlStatement, RenameTables
from binlake.lake.catalog.metadata import with_retries
from binlake.lake.catalog.summary import BATCH, GTID, POSITION, RELAY
from binlake.lake.catalog.write_path import Write
from binlake.lake.spark.lookup import table_exists
from binlake.lake.tables.actions import (
    ClaimTableName,
    DeleteAllRows,
    DropLakeTable,
    KeepDroppedTable,
    RenameLakeTable,
    TableAction,
    is_kept_dropped,
    run_table_action,
    table_actions,
)
from binlake.lake.tables.lake import Lake, LakeTable
from binlake.lake.write.changes import ChangeLog, KeyedChanges
from binlake.position import SourcePosition, is_new_for
from binlake.relay.reader import RelayGroup
from binlake.typemap import ZeroDateCounts, row_converter

Changes = KeyedChanges | ChangeLog
#: Client charsets whose statement text reads the same as UTF-8.
_UTF8_READABLE = frozenset({"utf8mb4", "utf8mb3", "ascii"})


@dataclass
class BatchResult:
    #: Tables committed, with the row changes each took in.
    committed: Counter[TableName] = field(default_factory=Counter)
    #: The table whose pending DDL keeps this (DDL) batch's transaction counted.
    held: TableName | None = None
    messages: list[str] = field(default_factory=list)
    #: How each table's rows were written (row delta, MERGE, append).
    writes: dict[TableName, Write] = field(default_factory=dict)
    #: Transactions per relay file held back for tables being copied (``apply.holds``).
    copy_held: Counter[str] = field(default_factory=Counter)


def commit_properties(batch: Batch, number: int) -> dict[str, str]:
    """The ``binlake.*`` snapshot properties of a batch: where it ends, in the source (file,
    offset and GTID state) and in the relay log, and its number."""
    last = batch.last
    return {
        POSITION: str(batch.position),
        GTID: last.gtid_state,
        RELAY: str(last.relay),
        BATCH: str(number),
    }


class BatchApplier:
    def __init__(
        self,
        lake: Lake,
        *,
        selected: Callable[[TableName], bool],
        on_drop: OnDrop,
        holds: DdlHolds,
        zero_dates: ZeroDateCounts,
        commit_threads: int = 1,
    ) -> None:
        self.lake = lake
        self.selected = selected
        self.on_drop = on_drop
        self.holds = holds
        self.zero_dates = zero_dates
        #: The write each table's last rows commit took (a change is reported once).
        self.writes: dict[TableName, Write] = {}
        #: Tables being copied: their changes wait (``apply.holds``).
        self.copy_holds = CopyHolds()
        self._commits = CommitPool(commit_threads)

    def close(self) -> None:
        """End the commit workers' threads (no commit is in flight between batches)."""
        self._commits.close()

    def apply(self, batch: Batch, number: int) -> BatchResult:
        if not batch.transactions:
            # Control events only (the relay log's opening events before the source's first
            # ROTATE have no source position): nothing to commit, no position to carry.
            return BatchResult()
        properties = commit_properties(batch, number)
        held = Counter(
            u.group.relay_file
            for u in batch.units
            if u.is_transaction and self.copy_holds.holds_unit(u)
        )
        if batch.is_ddl:
            if held:
                return BatchResult(copy_held=held)
            result = self._ddl(batch.units[0], properties)
        else:
            result = self._rows(batch, properties)
        result.copy_held = held
        return result

    # ---- rows ------------------------------------------------------------------------------

    def _rows(self, batch: Batch, properties: dict[str, str]) -> BatchResult:
        result = BatchResult()
        touched = units_by_table(batch)
        needed = (s for s, units in touched.items() if self._may_change(s, units))
        self.lake.load(needed, self._commits.workers)  # first uses read side by side
        commits: BatchCommits[tuple[TableName, int, Write]] = self._commits.batch()
        with commits:
            for source, units in touched.items():
                attempt = partial(self._table_rows, batch, source, units, properties, commits)
                self.lake.committing(source, attempt)
        changed: dict[str, list[TableName]] = {}
        for source, changes, write in commits.done:
            result.committed[source] += changes
            result.writes[source] = write
            if self.writes.get(source) != write:
                self.writes[source] = write
                changed.setdefault(write.describe(), []).append(source)
        result.messages += [_written_by(how, tables) for how, tables in changed.items()]
        if not commits.count:
            crash_point("apply_before_commit")  # a batch that brings no table anything
        crash_point("apply_after_commits")
        return result

    def _table_rows(
        self,
        batch: Batch,
        source: TableName,
        units: list[Unit],
        properties: dict[str, str],
        commits: BatchCommits[tuple[TableName, int, Write]],
        retries: int,
    ) -> None:
        """Plan ``source``'s changes in ``batch`` (``units``: the batch's rows units that
        change it) from what its table holds now (transactions it has by position skipped),
        and queue their commit (``commits``: a worker of the pool runs it while the next
        tables' changes are planned and other tables' commits run). Nothing is queued when the
        table had everything already; a table the lake's positions say has every unit is not
        even read from the catalog (a restart re-reads its relay file from the checkpoint)."""
        if not self._may_change(source, units):
            return
        table = self.lake.table(source)
        changes: Changes | None = None
        for unit in units:
            if not is_new_for(unit.position, table.applied):
                continue
            for rows in unit.rows:
                if rows.table_map.name != source:
                    continue
                if changes is None:
                    if not self.lake.in_sync(table, rows.table_map):
                        commits.wait(source)  # a schema change is a write: after its commit
                    self.lake.prepare(table, rows.table_map, rows.recorded_hints)
                    changes = table.new_changes(rows.table_map)
                self._feed(changes, table, rows, str(unit.position), unit.group)
        if changes is None or not len(changes):
            return
        done = changes
        commit_properties = with_retries(properties, retries)

        def commit() -> tuple[TableName, int, Write]:
            write = self.lake.commit(table, done, commit_properties, batch.position)
            return source, done.changes, write

        commits.submit(source, commit)

    def _holds_since(self, table: TableName, position: SourcePosition) -> bool:
        """Whether ``table``'s lake table is known (without reading the catalog) to hold a
        position at or after ``position``: it was made after a DDL there (a restart replays
        the CREATE TABLE of every table an initial copy made)."""
        known = self.lake.known_position(table)
        return known is not None and not is_new_for(position, known)

    def _may_change(self, source: TableName, units: list[Unit]) -> bool:
        """Whether ``units`` may bring ``source``'s table something: it is not held for its
        copy, and its known position (``Lake.known_position``) does not cover them all."""
        if self.copy_holds.holds(source):
            return False  # applied once its copy is done, from the copy's position
        known = self.lake.known_position(source)
        return known is None or any(is_new_for(u.position, known) for u in units)

    def _feed(
        self, changes: Changes, table: LakeTable, rows: TableRows, position: str, group: RelayGroup
    ) -> None:
        hints = table.hints(rows.table_map)
        converter = row_converter(rows.table_map, hints)
        try:  # a set-aside group's rows were just read again from the relay file (plan.AsideRows)
            decoded = decode_rows(rows.event, rows.table_map, hints, offset=rows.offset)
        except BinlakeError as error:
            raise error.with_location(file=group.relay_file) from None
        if converter.steps:
            decoded = converter.convert_changes(decoded, self.zero_dates)
        if isinstance(changes, ChangeLog):
            for old, new in decoded:
                _log(changes, old, new, position)
            return
        changes.take(rows.event.kind, decoded, whole=rows.event.whole_images)

    # ---- DDL -------------------------------------------------------------------------------

    def _ddl(self, unit: Unit, properties: dict[str, str]) -> BatchResult:
        statement = unit.ddl
        assert statement is not None
        position = unit.position
        result = BatchResult()
        if isinstance(statement, AlterTable) and self.selected(statement.table):
            self.lake.committing(
                statement.table,
                lambda retries: self._alter(
                    statement, unit, with_retries(properties, retries), result
                ),
            )
        actions = table_actions(
            statement,
            "keep" if self.on_drop is OnDrop.KEEP else "drop",
            replicated=self.selected,
            known_tables=self.lake.known_tables(),
        )
        for i, action in enumerate(actions):
            if i:
                crash_point("apply_during_ddl")
            self._action(action, statement, position, properties, result)
        return result

    def _alter(
        self, statement: AlterTable, unit: Unit, properties: dict[str, str], result: BatchResult
    ) -> None:
        """Evolve the table and commit at the ALTER's position (``Lake.alter``), or leave the
        ALTER pending on it, its transaction held in the checkpoint until the schema has it."""
        source = statement.table
        table = self.lake.table(source)
        position = unit.position
        if table.schema is None or not is_new_for(position, table.applied):
            return  # no Iceberg table yet (made from the next TABLE_MAP), or applied already
        context, statement = _statement_context(unit, statement)
        if self.lake.alter(table, statement, context, position, properties):
            result.committed[source] += 0
        else:
            result.held = source

    def _action(
        self,
        action: TableAction,
        statement: DdlStatement,
        position: SourcePosition,
        properties: dict[str, str],
        result: BatchResult,
    ) -> None:
        if isinstance(action, DeleteAllRows):
            if self.lake.committing(
                action.table, partial(self._truncate, action, position, properties)
            ):
                result.committed[action.table] += 0
        elif isinstance(action, RenameLakeTable):
            self._rename(action, statement, position, properties, result)
        elif isinstance(action, ClaimTableName) and self._holds_since(action.table, position):
            return  # the lake table of that name is the one made after this CREATE (a copy)
        else:
            self._run(action, position, properties)
            gone = action.table
            if isinstance(action, ClaimTableName) and action.needs_snapshot:
                result.messages.append(
                    f"{gone} was renamed into the replicated tables: rows it had before are "
                    "not in the binlog; snapshot it (binlake verify shows the difference)"
                )
            if isinstance(action, DropLakeTable | KeepDroppedTable | ClaimTableName):
                self.holds.release(gone)
                if result.held == gone:
                    result.held = None
                self.lake.forget(gone)

    def _rename(
        self,
        action: RenameLakeTable,
        statement: DdlStatement,
        position: SourcePosition,
        properties: dict[str, str],
        result: BatchResult,
    ) -> None:
        lake = self.lake
        new_name = lake.target.lake_table(action.new)
        if table_exists(lake.spark, new_name) and not is_kept_dropped(lake.spark, new_name):
            # Renamed before a crash; a table of the old name is a replay's re-creation.
            if table_exists(lake.spark, lake.target.lake_table(action.old)):
                lake.drop(action.old)
                result.messages.append(
                    f"{action.old} -> {action.new} was renamed before a restart; dropped "
                    f"the copy of {action.old} the restart re-created"
                )
            self._moved(action, result)
            lake.forget(action.old)
            lake.forget(action.new)
            return
        old = lake.table(action.old)
        if old.pending_ddl and isinstance(statement, RenameTables):
            old.pending_ddl.append(statement)  # the evolution's DDL replay follows the name
        self._run(action, position, properties)
        lake.renamed(action.old, action.new)
        self._moved(action, result)

    def _moved(self, action: RenameLakeTable, result: BatchResult) -> None:
        self.holds.move(action.old, action.new)
        if result.held == action.old:
            result.held = action.new

    def _truncate(
        self,
        action: DeleteAllRows,
        position: SourcePosition,
        properties: dict[str, str],
        retries: int,
    ) -> bool:
        """Empty the table at the TRUNCATE's position; False when there is nothing to empty or
        the table has the TRUNCATE already."""
        table = self.lake.table(action.table)
        if table.schema is None or not is_new_for(position, table.applied):
            return False
        self._run_once(action, position, with_retries(properties, retries))
        table.applied = position
        return True

    def _run(
        self, action: TableAction, position: SourcePosition, properties: dict[str, str]
    ) -> None:
        """A table action, tried again after a conflicting commit: each action finds what is
        done already (``binlake.lake.tables.actions``), and a DROP commits nothing that could
        conflict."""
        table = action.old if isinstance(action, RenameLakeTable) else action.table
        self.lake.committing(
            table,
            lambda retries: self._run_once(action, position, with_retries(properties, retries)),
        )

    def _run_once(
        self, action: TableAction, position: SourcePosition, properties: dict[str, str]
    ) -> None:
        run_table_action(
            self.lake.spark,
            action,
            lake_table=self.lake.target.lake_table,
            position=str(position),
            commit_properties=properties,
        )


def _log(
    changes: ChangeLog, old: tuple[object, ...] | None, new: tuple[object, ...] | None, at: str
) -> None:
    if old is not None and new is not None:
        changes.update(old, new, at)
    elif new is not None:
        changes.insert(new, at)
    elif old is not None:
        changes.delete(old, at)


def _statement_context(unit: Unit, statement: AlterTable) -> tuple[StatementContext, AlterTable]:
    """What the DDL's QUERY event says of the session that ran it (with the time zone
    conversions the receiver recorded beside it), and the statement read in the session's
    charset (the relay text is read as UTF-8: a latin1 client's DEFAULT 'é' is the byte E9,
    which only latin1 reads right)."""
    events = unit.group.group.events
    query = next(e for e in events if isinstance(e.payload, QueryEvent))
    payload = query.payload
    assert isinstance(payload, QueryEvent)
    recorded = next(
        (
            e.payload.fact
            for e in events
            if isinstance(e.payload, SourceFactsEvent) and isinstance(e.payload.fact, ZoneTimes)
        ),
        None,
    )
    context = StatementContext.of_event(query.header.timestamp, payload, recorded)
    if context.charset in _UTF8_READABLE:
        return context, statement
    try:
        reread = parse_ddl(payload.database, decode_text(payload.query, context.charset))
    except BinlakeError:
        return context, statement  # its strings cannot be read: refused where they matter
    return context, reread if isinstance(reread, AlterTable) else statement


def _written_by(how: str, tables: list[TableName]) -> str:
    """What a batch says of the tables whose rows are written in a new way: each one, or how
    many (and the first few) when there are many."""
    if len(tables) <= 3:
        return "; ".join(f"{t}: rows written by {how}" for t in sorted(tables))
    first = ", ".join(str(t) for t in sorted(tables)[:3])
    return f"{len(tables)} tables ({first}, ...): rows written by {how}"


def units_by_table(batch: Batch) -> dict[TableName, list[Unit]]:
    """The replicated tables ``batch``'s rows change, in the order they first appear, each
    with the rows units that change it (one pass over the batch: a batch of 10,000 units over
    200 tables is not gone through 200 times)."""
    out: dict[TableName, list[Unit]] = {}
    for unit in batch.units:
        if unit.kind is not UnitKind.ROWS:
            continue
        for table_map in unit.table_maps:
            out.setdefault(table_map.name, []).append(unit)
    return out
