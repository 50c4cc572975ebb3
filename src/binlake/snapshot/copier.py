"""Snapshots: a table's existing rows copied into its Iceberg table, consistent with streaming.

**Algorithm** (chosen over one long transaction so that a crash resumes instead of restarting,
and over DBLog's watermark table so that binlake never writes to the source). A table is read
in chunks of ``chunk_rows`` rows in primary-key order; each chunk is read in its own
``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and is exactly the table's rows, in its key range,
at that snapshot's binlog position P_k (``snapshot.chunks``). Each chunk is one Iceberg append
carrying ``binlake.position`` = P_1 (the first chunk's position) and ``binlake.snapshot`` (id,
last key, newest P_k, rows, done: ``lake.snapshot_progress``): the rows and the progress are
one atomic commit, so a crash loses at most the chunk being read and never doubles one.

**Why streaming from P_1 makes it exact.** Row events carry whole images (binlog_row_image=FULL)
and the applier's MERGE is an upsert per key (an insert of an existing key updates it; a delete
of a missing key does nothing). A key first copied at P_k holds its value at P_k; streaming then
re-applies, in order, every change after P_1, so each key ends with the image of its last change
at or before any position past P_k, or as copied when it had none: the table equals the source
at every position at or after max(P_k). ``binlake verify`` compares only there
(``SnapshotProgress.consistent``). Chunks are disjoint key ranges, so appending them needs no
MERGE. A table without a key (a change log) cannot be re-applied idempotently: it is copied in
one chunk and its position is that chunk's P itself.

**Schema.** The Iceberg table is created from the TABLE_MAP MariaDB would log for the table
(``source.table_shape``), i.e. exactly what streaming expects. A snapshot never spans a schema
change: if a chunk's shape would need the Iceberg schema to evolve (the table was altered since
P_1), the table's copy starts over (events older than the new P_1 must not be replayed onto the
newer shape). A table dropped during its snapshot ends it: streaming replays the DROP.

**Re-snapshot** (``binlake snapshot``, a new plan id): the old Iceberg table is dropped first,
then copied like a new one; a crash between finds no table and copies it from the start.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from binlake.binlog.names import TableName
from binlake.console import Console
from binlake.crashpoints import crash_point
from binlake.lake.changes import ChangeLog, column_array
from binlake.lake.commit import POSITION, append_with_commit_properties, latest_binlake_summary
from binlake.lake.frames import dataframe_from_arrow
from binlake.lake.iceberg_meta import with_retries
from binlake.lake.schema import plan_evolution
from binlake.lake.session import SparkSession
from binlake.lake.snapshot_progress import SNAPSHOT, SnapshotProgress, progress_of
from binlake.lake.spark_types import spark_schema
from binlake.lake.table_actions import table_exists_now
from binlake.lake.tables import Lake, LakeTable
from binlake.position import SourcePosition, before, parse_position
from binlake.snapshot.chunks import Chunk, ChunkReader
from binlake.source.table_shape import table_map_from_columns
from binlake.storage.snapshot_plan import PlanEntry
from binlake.typemap import IcebergType, LakeColumn, LakeSchema


@dataclass
class TableCopy:
    """What one table's snapshot did in this run."""

    table: TableName
    rows: int = 0
    chunks: int = 0
    seconds: float = 0.0
    #: "done", "already done" (by an earlier run) or "gone" (dropped on the source).
    outcome: str = "done"


@dataclass
class _State:
    progress: SnapshotProgress | None
    position: SourcePosition | None


class TableCopier:
    """Copies tables chunk by chunk (see the module docstring)."""

    def __init__(
        self,
        spark: SparkSession,
        lake: Lake,
        reader: ChunkReader,
        collations: Mapping[str, int],
        *,
        chunk_rows: int,
        console: Console,
    ) -> None:
        self.spark, self.lake, self.reader = spark, lake, reader
        self.collations = collations
        self.chunk_rows = chunk_rows
        self.console = console

    def copy(self, entry: PlanEntry) -> TableCopy:
        result = TableCopy(entry.table)
        started = time.monotonic()
        state = self._resume(entry)
        if state.progress is not None and state.progress.done:
            result.outcome = "already done"
            return result
        bar = _ProgressBar(self.console, entry.table, self.reader.estimated_rows(entry.table))
        while True:
            _, primary = self.reader.shape(entry.table)
            key = tuple(self.lake.key_columns.get(entry.table, ())) or tuple(primary)
            after = state.progress.after if state.progress is not None else None
            chunk = self.reader.read(entry.table, key, after, self.chunk_rows if key else None)
            if chunk is None:
                result.outcome = "gone"
                self._end_gone(entry, state)
                break
            table = self._lake_table(entry, chunk, state)
            if table is None:
                continue  # the shape changed since the copy began: it started over
            done = not key or len(chunk.rows) < self.chunk_rows
            state = self._commit(entry, table, chunk, state, done)
            result.chunks += 1
            result.rows += len(chunk.rows)
            bar.update(state.progress.rows if state.progress else result.rows)
            if done:
                break
        bar.close()
        result.seconds = time.monotonic() - started
        self.lake.forget(entry.table)  # streaming reads its position and schema again
        return result

    # ---- progress ------------------------------------------------------------------------------

    def _resume(self, entry: PlanEntry) -> _State:
        """Where the snapshot ``entry`` stands in the lake; an older snapshot's table is
        dropped (a re-snapshot starts from nothing)."""
        name = self.lake.target.lake_table(entry.table)
        if not table_exists_now(self.spark, name):
            return _State(None, None)
        summary = latest_binlake_summary(self.spark, name)
        progress = progress_of(summary)
        if progress is not None and progress.id == entry.id and summary is not None:
            return _State(progress, parse_position(summary[POSITION]))
        self._drop(entry.table)
        return _State(None, None)

    def _drop(self, table: TableName) -> None:
        self.lake.drop(table)
        crash_point("snapshot_after_replace")

    def _lake_table(self, entry: PlanEntry, chunk: Chunk, state: _State) -> LakeTable | None:
        """The Iceberg table for ``chunk``: created on the first chunk; None (after dropping
        it) when the chunk's shape would need the schema to evolve."""
        name = entry.table
        tm = table_map_from_columns(
            name.database, name.table, chunk.columns, chunk.key, self.collations
        )
        table = self.lake.table(entry.table)
        if table.schema is None:
            self.lake.prepare(table, tm)
            return table
        key = self.lake.key_columns.get(entry.table)
        if plan_evolution(table.schema, tm, [], hints=table.hints(tm), key_columns=key):
            self.console.message(
                "snapshot",
                f"{entry.table} changed shape during its snapshot: copying it again",
            )
            self._drop(entry.table)
            state.progress, state.position = None, None
            return None
        return table

    def _commit(
        self, entry: PlanEntry, table: LakeTable, chunk: Chunk, state: _State, done: bool
    ) -> _State:
        earlier = state.progress
        changelog = table.changelog
        position = chunk.position if changelog or state.position is None else state.position
        consistent = chunk.position
        if earlier is not None and before(consistent, earlier.consistent):
            consistent = earlier.consistent
        after = chunk.last_key
        if after is None and earlier is not None:
            after = earlier.after
        progress = SnapshotProgress(
            id=entry.id,
            after=after,
            consistent=consistent,
            rows=(earlier.rows if earlier else 0) + len(chunk.rows),
            done=done,
        )
        assert table.schema is not None
        arrow = _arrow(table.schema, chunk, changelog, entry.table)
        frame = dataframe_from_arrow(self.spark, arrow, spark_schema(table.schema))
        crash_point("snapshot_before_chunk")
        properties = {POSITION: str(position), SNAPSHOT: progress.to_json()}
        self._append(entry, table, frame, properties)
        crash_point("snapshot_after_chunk")
        return _State(progress, position)

    def _append(
        self,
        entry: PlanEntry,
        table: LakeTable,
        frame: Any,
        properties: dict[str, str],
    ) -> None:
        """One chunk's commit, tried again when another writer committed first, unless the
        table's newest binlake snapshot shows it went through after all."""

        def attempt(retries: int) -> None:
            newest = latest_binlake_summary(self.spark, table.name) if retries else None
            if newest is not None and newest.get(SNAPSHOT) == properties[SNAPSHOT]:
                return
            append_with_commit_properties(frame, table.name, with_retries(properties, retries))

        self.lake.committing(entry.table, attempt)

    def _end_gone(self, entry: PlanEntry, state: _State) -> None:
        """The table was dropped on the source: streaming replays the DROP after P_1; a
        partly copied table is marked done so that nothing resumes it."""
        if state.progress is None or state.position is None:
            return
        table = self.lake.table(entry.table)
        if table.schema is None:
            return
        progress = SnapshotProgress(
            entry.id, state.progress.after, state.progress.consistent, state.progress.rows, True
        )
        empty = dataframe_from_arrow(
            self.spark, table.schema.arrow_schema().empty_table(), spark_schema(table.schema)
        )
        properties = {POSITION: str(state.position), SNAPSHOT: progress.to_json()}
        self._append(entry, table, empty, properties)


def _arrow(schema: LakeSchema, chunk: Chunk, changelog: bool, table: TableName) -> Any:
    import pyarrow as pa

    names = [c.name for c in chunk.columns]
    decimals = [
        i for i, c in enumerate(schema.columns) if c.type is IcebergType.DECIMAL and i < len(names)
    ]
    rows = [_decimals(row, decimals) for row in chunk.rows] if decimals else chunk.rows
    if changelog:
        log = ChangeLog(str(table), names)
        for row in rows:
            log.insert(tuple(row), str(chunk.position))
        return log.to_arrow(schema.columns)
    index = {name.casefold(): i for i, name in enumerate(names)}
    arrays = [
        _column_array([row[index[c.name.casefold()]] for row in rows], c, str(table))
        for c in schema.columns
    ]
    fields = [pa.field(c.name, c.arrow_type(), nullable=c.nullable) for c in schema.columns]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _decimals(row: list[Any], indexes: Sequence[int]) -> list[Any]:
    out = list(row)
    for i in indexes:
        if isinstance(out[i], int):
            out[i] = Decimal(out[i])
    return out


def _column_array(values: list[Any], column: LakeColumn, table: str) -> Any:
    return column_array(values, column, table)


class _ProgressBar:
    """Per table: a live bar on a terminal (rows, rows/s, ETA from the estimated row count),
    a log line per chunk elsewhere."""

    WIDTH = 24

    def __init__(self, console: Console, table: TableName, estimated: int) -> None:
        self.console, self.table, self.estimated = console, table, estimated
        self.started = time.monotonic()
        self.rows = 0

    def update(self, rows: int) -> None:
        self.rows = rows
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = rows / elapsed
        total = max(self.estimated, rows)
        left = (total - rows) / rate if rate > 0 else 0.0
        if self.console.live:
            filled = int(self.WIDTH * rows / total) if total else self.WIDTH
            bar = "#" * filled + "." * (self.WIDTH - filled)
            self.console.status(
                f"snapshot {self.table} [{bar}] {rows:,}/~{total:,} rows, "
                f"{rate:,.0f} rows/s, ETA {left:,.0f} s"
            )
        else:
            self.console.message(
                "snapshot",
                f"{self.table}: {rows:,} of ~{total:,} rows, {rate:,.0f} rows/s, ETA {left:,.0f} s",
            )

    def close(self) -> None:
        elapsed = time.monotonic() - self.started
        self.console.message(
            "snapshot", f"{self.table}: {self.rows:,} rows copied in {elapsed:,.1f} s"
        )
