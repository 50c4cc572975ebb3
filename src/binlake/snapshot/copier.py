"""A table's copy: its existing rows read in parallel chunks by Spark tasks, committed to its
Iceberg table with its progress, exactly once and consistent with streaming.

**Algorithm** (chosen over per-chunk consistent snapshots and over DBLog's watermark
correction; see "Why it is exact"). The driver takes the table's ``low`` position
(``positions``: before any chunk is read), plans chunks from the key's range (``key_ranges``: a
few queries), and runs one Spark job of one task per chunk (``binlake.lake.spark.chunk_jobs``); each
task reads its key range in a plain autocommit SELECT with binlake's own result-set reader,
decodes it column by column and writes one Parquet file of the table (``chunk_task``,
``chunk_files``), and reports (path, rows, zero dates). As tasks finish, the driver commits the
files of the chunks done so far *in key order* (the longest finished prefix: a chunk finishing
early waits for those before it; chunks finished within ``[snapshot] commit_every_s`` of the
last commit wait for the next one) in one Iceberg commit through the lake's one file-commit path,
the row delta's (``binlake.lake.write.row_delta``: ``stage_stored``, then ``commit``, as streaming's
batches commit), carrying ``binlake.position`` = ``low`` and ``binlake.snapshot`` =
``{id, next, rows, done}`` (``lake.snapshot_progress``): data and progress are one atomic
commit, and ``next`` (the first key of the first chunk not committed) is all a resumed copy
needs: it plans again from ``next`` and reads nothing twice. When every chunk is committed the
driver takes ``high``, then one last commit without files marks the copy done with
``consistent`` = ``high``.

**Why it is exact.** Row events carry whole images (``binlog_row_image=FULL``) and streaming
applies them as upserts and deletes by key. Every chunk is read after ``low``, so it sees every
transaction up to ``low``; every transaction it saw is logged at or before ``high``. So each
key's copied value is its value at some moment between ``low`` and ``high`` (or the key is
absent, having been deleted or not yet inserted then), and streaming replays, in order, every
change after ``low``: each key ends with the image of its last change, or as copied when it had
none. The table equals the source at every position at or after ``high`` (``consistent``:
``binlake verify`` compares only there, and a fresh insert skips its equality delete only
there). DBLog's and Flink CDC's per-chunk correction (re-reading the binlog between a chunk's
watermarks) serves sinks that emit each change once; binlake's replay from ``low`` is that
correction for every chunk at once, so tasks need no snapshot and no position of their own. A
table without a key (a change log) cannot be re-applied idempotently: it is one chunk read in
its own consistent snapshot, and its position is that chunk's own (``low`` = ``high``).

Streaming must not commit to a table while it is copied (a delete committed before a chunk that
still holds the old row would be undone by that chunk): the applier holds the table's changes
until its copy is done, then replays them from ``low`` (``binlake.apply.applier``).

**Schema.** The Iceberg table is created from the TABLE_MAP MariaDB would log for the table
(``source.table_shape``), exactly what streaming expects. Tasks check the result's column
definitions against the plan's, and the driver compares the table's columns after the job with
those before it: a copy never spans a schema change; the table's copy starts over (events
older than the new ``low`` must not be replayed onto the newer shape). A table dropped during
its copy ends it: streaming replays the DROP.

**Files.** Each file's name starts with the copy's prefix; files of attempts that never got
committed (a task killed after writing, a crash before the commit) are deleted before the copy
goes on and before it is marked done (crash point ``snapshot_during_cleanup``).

**Re-snapshot** (``binlake snapshot``, a new plan id): the old Iceberg table is dropped first
(crash point ``snapshot_after_replace``), then copied like a new one.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from binlake.binlog.names import TableName
from binlake.console import Console
from binlake.crashpoints import crash_point
from binlake.errors import (
    BinlakeError,
    SnapshotError,
    SnapshotShapeChangedError,
    SourceError,
    SparkStatementError,
)
from binlake.lake.catalog.snapshot_progress import SNAPSHOT, VERSION, SnapshotProgress, progress_of
from binlake.lake.catalog.summary import POSITION
from binlake.lake.schema.evolution import plan_evolution
from binlake.lake.spark.chunk_jobs import ChunkJob
from binlake.lake.spark.lineage import latest_binlake_summary
from binlake.lake.spark.lookup import table_exists_now
from binlake.lake.spark.session import SparkSession
from binlake.lake.tables.lake import Lake, LakeTable
from binlake.lake.write.delta_files import DeltaLayout, parquet_options, row_group_bytes
from binlake.lake.write.row_delta import DeltaTable, RowDeltaWriter
from binlake.position import SourcePosition, parse_position
from binlake.snapshot.chunk_files import FileTarget
from binlake.snapshot.chunk_task import (
    GONE_CODES,
    ChunkPlan,
    ChunkRecord,
    ChunkSource,
    decode_error,
    error_in_text,
    run_chunk,
)
from binlake.snapshot.progress import CopyProgress
from binlake.snapshot.source_reads import SourceReads, TableShape
from binlake.storage.snapshot_plan import PlanEntry
from binlake.storage.warehouse_sync import local_warehouse

#: A chunk job's pieces are small: one task per chunk, one row group of Arrow data per task.
_COPY_ATTEMPTS = 20


@dataclass
class TableCopy:
    """What one table's snapshot did in this run."""

    table: TableName
    rows: int = 0
    chunks: int = 0
    seconds: float = 0.0
    #: "done", "already done" (by an earlier run), "gone" (dropped on the source) or
    #: "stopped" (asked to stop: resumed at the next start).
    outcome: str = "done"
    #: Zero dates written as null, per ``db.table.column``.
    zero_dates: Counter[str] = field(default_factory=Counter)


@dataclass
class _Resume:
    """Where a copy stands in the lake."""

    progress: SnapshotProgress | None = None
    low: SourcePosition | None = None


class TableCopier:
    """Copies tables (see the module docstring); one table at a time, on one thread."""

    def __init__(
        self,
        spark: SparkSession,
        lake: Lake,
        reads: SourceReads,
        source: ChunkSource,
        *,
        chunk_rows: int,
        cores: int,
        console: Console,
        commit_every_s: float = 0.0,
        stop: threading.Event | None = None,
        on_progress: CopyProgressSink | None = None,
    ) -> None:
        self.spark, self.lake, self.reads, self.source = spark, lake, reads, source
        self.chunk_rows, self.cores = chunk_rows, cores
        self.commit_every_s = commit_every_s
        self.console = console
        self.stop = stop or threading.Event()
        self.writer = RowDeltaWriter(spark)
        self.on_progress = on_progress
        self._job: ChunkJob | None = None

    def cancel(self) -> None:
        """Stop the running chunk job (from another thread); ``copy`` then returns "stopped"."""
        self.stop.set()
        self.cancel_job()

    def cancel_job(self) -> None:
        job = self._job
        if job is not None:
            job.cancel()

    def copy(self, entry: PlanEntry) -> TableCopy:
        result = TableCopy(entry.table)
        started = time.monotonic()
        resume = self.resume(entry)
        if resume.progress is not None and resume.progress.done:
            result.outcome = "already done"
            return result
        for _ in range(_COPY_ATTEMPTS):
            try:
                self._copy_once(entry, resume, result)
                break
            except SnapshotShapeChangedError:
                self.console.message(
                    "snapshot", f"{entry.table} changed shape during its copy: copying it again"
                )
                self._drop(entry.table)
                resume = _Resume()
        else:
            raise SnapshotError(
                f"{entry.table} changed shape during each of {_COPY_ATTEMPTS} attempts to copy it",
                table=str(entry.table),
                hint="run the snapshot again once the table's DDL has settled",
            )
        result.seconds = time.monotonic() - started
        self.lake.forget(entry.table)  # streaming reads its position and schema again
        return result

    # ---- where a copy stands -----------------------------------------------------------------

    def resume(self, entry: PlanEntry) -> _Resume:
        """Where the snapshot ``entry`` stands in the lake; an older snapshot's table is
        dropped (a re-snapshot starts from nothing), and so is a copy binlake's chunk-by-chunk
        copy (record version 1) left unfinished."""
        name = self.lake.target.lake_table(entry.table)
        if not table_exists_now(self.spark, name):
            return _Resume()
        summary = latest_binlake_summary(self.spark, name)
        progress = progress_of(summary)
        if progress is not None and progress.id == entry.id and summary is not None:
            if progress.done or progress.version >= VERSION:
                return _Resume(progress, parse_position(summary[POSITION]))
            self.console.message(
                "snapshot", f"{entry.table}: an unfinished copy of an older binlake: starting over"
            )
        self._drop(entry.table)
        return _Resume()

    def _drop(self, table: TableName) -> None:
        self.lake.drop(table)
        crash_point("snapshot_after_replace")

    # ---- one attempt ---------------------------------------------------------------------------

    def _copy_once(self, entry: PlanEntry, resume: _Resume, result: TableCopy) -> None:
        shape = self.reads.shape(entry.table, self.lake.key_columns.get(entry.table))
        if shape is None:
            self._end_gone(entry, resume, result)
            return
        table = self._lake_table(entry, shape, resume)
        low = resume.low
        if low is None and not table.changelog:
            low = self.reads.low_position(entry.table)
        target = self._open(table.name, entry)
        plan = self._chunk_plan(entry, shape, table, target, resume)
        self.clean_orphans(entry, target, plan.files.prefix)
        run = _Run(self, entry, table, plan, resume, low)
        if resume.progress is None or resume.progress.next is not None:
            run.chunks()
        if run.failure is not None:
            self._failed(entry, resume, result, run.failure)
            return
        if self.stop.is_set():
            result.outcome = "stopped"
            return
        if self.reads.shape(entry.table, self.lake.key_columns.get(entry.table)) != shape:
            raise _shape_changed(entry)
        self.clean_orphans(entry, target, plan.files.prefix, run.stored_paths())
        crash_point("snapshot_before_high")
        high = run.low if table.changelog else self.reads.high_position()
        run.finish(high)
        result.rows += run.rows
        result.chunks += run.committed
        result.zero_dates.update(run.zero_dates)

    def _lake_table(self, entry: PlanEntry, shape: TableShape, resume: _Resume) -> LakeTable:
        """The Iceberg table: created at the copy's start; ``SnapshotShapeChangedError`` when
        the source's shape would need its schema to evolve (altered since the copy began)."""
        table = self.lake.table(entry.table)
        if table.schema is None:
            self.lake.prepare(table, shape.table_map)
            return table
        key = self.lake.key_columns.get(entry.table)
        hints = table.hints(shape.table_map)
        if plan_evolution(table.schema, shape.table_map, [], hints=hints, key_columns=key):
            raise _shape_changed(entry)
        return table

    def _chunk_plan(
        self,
        entry: PlanEntry,
        shape: TableShape,
        table: LakeTable,
        target: DeltaTable,
        resume: _Resume,
    ) -> ChunkPlan:
        layout = target.layout
        files = chunk_file_target(
            self.writer.data_folder(target, str(entry.table)),
            copy_prefix(entry),
            layout,
            local_warehouse(self.lake.target),
        )
        start = resume.progress.next[0] if resume.progress and resume.progress.next else None
        ranges = self.reads.ranges(shape, chunk_rows=self.chunk_rows, cores=self.cores, start=start)
        return ChunkPlan(
            database=shape.database,
            table=shape.table,
            columns=shape.columns,
            key=shape.split.name if shape.split is not None else "",
            ranges=ranges,
            shape=self.reads.result_shape(shape),
            files=files,
            flavor=self.reads.flavor,
            positioned=table.changelog,
            changelog=table.changelog,
        )

    def _open(self, name: str, entry: PlanEntry) -> DeltaTable:
        """The Iceberg table loaded for file commits; a ``SnapshotError`` when binlake cannot
        add the data files its tasks write (a table changed behind binlake)."""
        target = self.writer.open(name, (), str(entry.table))
        refusal = target.layout.data_file_refusal()
        if refusal is not None:
            raise SnapshotError(
                f"{entry.table}: cannot copy into {name}: {refusal}",
                table=str(entry.table),
                hint="re-snapshot the table (binlake snapshot --tables) so that binlake "
                "creates its Iceberg table anew",
            )
        return target

    def append(
        self, name: str, locations: list[str], properties: dict[str, str], entry: PlanEntry
    ) -> None:
        """One commit adding the chunk files ``locations`` with ``properties``, through the
        row-delta writer (its ``open``, ``stage_stored``, ``commit``)."""
        table = str(entry.table)
        target = self.writer.open(name, (), table)
        self.writer.commit(self.writer.stage_stored(target, locations, table), properties, table)

    def clean_orphans(
        self, entry: PlanEntry, target: DeltaTable, prefix: str, keep: Collection[str] = ()
    ) -> None:
        """Delete the copy's files no commit references (attempts never committed); ``keep``:
        the files this run committed (the table's file list is read only for others)."""
        orphans = self.writer.unreferenced(target, prefix, str(entry.table), keep)
        for i, path in enumerate(orphans):
            self.writer.delete(target, [path], str(entry.table))
            if i == 0:
                crash_point("snapshot_during_cleanup")
        if orphans:
            self.console.message(
                "snapshot", f"{entry.table}: removed {len(orphans)} uncommitted chunk file(s)"
            )

    def _failed(
        self, entry: PlanEntry, resume: _Resume, result: TableCopy, error: BinlakeError
    ) -> None:
        """A chunk failed: the table changed shape (start over), is gone (end), or the error
        stops the copy (its committed chunks stay; a later run resumes after them)."""
        if isinstance(error, SnapshotShapeChangedError):
            raise _shape_changed(entry)
        if isinstance(error, SourceError) and error.code in GONE_CODES:
            self._end_gone(entry, self.resume(entry), result)
            return
        if self.stop.is_set():
            result.outcome = "stopped"
            return
        raise error

    def _end_gone(self, entry: PlanEntry, resume: _Resume, result: TableCopy) -> None:
        """The table was dropped on the source: streaming replays the DROP after ``low``; a
        partly copied table is marked done so that nothing resumes it."""
        result.outcome = "gone"
        progress, low = resume.progress, resume.low
        if progress is None or low is None:
            return
        name = self.lake.target.lake_table(entry.table)
        done = SnapshotProgress(entry.id, None, progress.consistent, progress.rows, True)
        self.append(name, [], {POSITION: str(low), SNAPSHOT: done.to_json()}, entry)


class CopyProgressSink:
    """Receives the progress line of the copy running (the applier's status line shows it)."""

    def __init__(self) -> None:
        self.line: str | None = None


def chunk_file_target(
    data_dir: str, prefix: str, layout: DeltaLayout, warehouse: Path | None = None
) -> FileTarget:
    """How a copy's tasks write the table's files: its schema with field ids, its
    ``write.parquet.*`` options and its row-group size (``write.parquet.row-group-size-bytes``);
    ``warehouse``: the local warehouse folder, fsynced up to with each file."""
    return FileTarget(
        data_dir,
        prefix,
        layout.arrow_schema(),
        parquet_options(layout.properties, deletes=False),
        row_group_bytes=row_group_bytes(layout.properties),
        durable_root=None if warehouse is None else str(warehouse),
    )


def copy_prefix(entry: PlanEntry) -> str:
    """The name prefix of a copy's files (stable across restarts: it names the snapshot id)."""
    digest = hashlib.sha256(entry.id.encode("utf-8")).hexdigest()[:16]
    return f"binlake-copy-{digest}"


class _Run:
    """One chunk job of a copy and its commits."""

    def __init__(
        self,
        copier: TableCopier,
        entry: PlanEntry,
        table: LakeTable,
        plan: ChunkPlan,
        resume: _Resume,
        low: SourcePosition | None,
    ) -> None:
        self.copier, self.entry, self.table, self.plan = copier, entry, table, plan
        self.low = low
        self.previous = resume.progress
        self.total = resume.progress.rows if resume.progress else 0
        self.rows = 0
        self.committed = 0
        #: The files this run committed.
        self.committed_paths: list[str] = []
        self.zero_dates: Counter[str] = Counter()
        self.failure: BinlakeError | None = None
        self._pending: dict[int, ChunkRecord] = {}
        self._next = 0
        self._files: list[str] = []
        self._committed_at = time.monotonic()
        self._progress = CopyProgress(
            copier.console,
            str(entry.table),
            estimated=copier.reads.estimated_rows(entry.table),
            chunks=len(plan.ranges),
            already=self.total,
        )

    def chunks(self) -> None:
        """Run the chunk job; commit the files of the chunks done, in key order, as they come."""
        copier = self.copier
        work = partial(run_chunk, copier.source, self.plan)
        job = ChunkJob(
            copier.spark, len(self.plan.ranges), work, f"binlake snapshot {self.entry.table}"
        )
        copier._job = job
        try:
            if copier.stop.is_set():
                return
            try:
                outcome = job.run(self._arrived)
                self._commit_ready(now=True)  # the finished chunks a pause held back
            except BaseException:  # a commit failed: no task may go on writing files
                job.cancel()
                raise
        finally:
            copier._job = None
        self._progress.close()
        if outcome.failure is not None and self.failure is None and not outcome.cancelled:
            self.failure = error_in_text(outcome.failure) or SparkStatementError(
                f"a chunk job of {self.entry.table} failed: {_first_line(outcome.failure)}",
                table=str(self.entry.table),
                hint="see the Spark executor logs; the copy resumes after its committed chunks",
            )

    def _arrived(self, piece: int, text: str) -> None:
        record = ChunkRecord.from_json(text)
        if record.error is not None:
            if self.failure is None:
                self.failure = decode_error(record.error)
                self.copier.cancel_job()
            return
        if piece < self._next or piece in self._pending or self.failure is not None:
            return  # a duplicate (its file is an orphan, removed later), or after a failure
        self._pending[piece] = record
        if record.position is not None and self.low is None:
            self.low = parse_position(record.position)
        self._progress.chunk_done(record.rows)
        sink = self.copier.on_progress
        if sink is not None:
            sink.line = f"snapshot {self.entry.table}: {self._progress.line()}"
        self._commit_ready()

    def _commit_ready(self, *, now: bool = False) -> None:
        """Commit the files of the chunks finished in key order since the last commit, unless
        the last one ended less than ``commit_every_s`` ago (``now``: whatever the pause)."""
        start = self._next
        while self._next in self._pending:
            record = self._pending.pop(self._next)
            if record.path is not None:
                self._files.append(record.path)
            self.rows += record.rows
            self.total += record.rows
            for column, count in record.zero_dates.items():
                self.zero_dates[f"{self.entry.table}.{column}"] += count
            self._next += 1
        if (self._next == start and not now) or not self._files:
            return  # nothing new, or only empty chunks: the next commit covers them
        if not now and time.monotonic() - self._committed_at < self.copier.commit_every_s:
            return  # committed with the chunks that finish after the pause
        ranges = self.plan.ranges
        following = ranges[self._next].lower if self._next < len(ranges) else None
        self._commit(self._files, None if following is None else (following,), done=False)
        self.committed += len(self._files)
        self.committed_paths += self._files
        self._files = []
        self._committed_at = time.monotonic()

    def stored_paths(self) -> list[str]:
        """The files of this run's chunks: committed, or to be committed by ``finish``
        (files of empty trailing chunks' predecessors)."""
        return self.committed_paths + self._files

    def _commit(
        self, paths: list[str], following: tuple[object, ...] | None, *, done: bool
    ) -> None:
        assert self.low is not None
        progress = SnapshotProgress(self.entry.id, None, self.low, self.total, done, next=following)
        properties = {POSITION: str(self.low), SNAPSHOT: progress.to_json()}
        if not done:
            crash_point("snapshot_before_chunk")
        self.copier.append(self.table.name, paths, properties, self.entry)
        if not done:
            crash_point("snapshot_after_chunk")

    def finish(self, high: SourcePosition | None) -> None:
        """The last commit: files of empty trailing chunks' predecessors, if any, and done with
        ``consistent`` = ``high``."""
        if self.low is None:  # a one-chunk copy of an empty table: its position is high's
            self.low = high if high is not None else self.copier.reads.high_position()
        consistent = high or self.low
        progress = SnapshotProgress(self.entry.id, None, consistent, self.total, True, next=None)
        properties = {POSITION: str(self.low), SNAPSHOT: progress.to_json()}
        self.copier.append(self.table.name, self._files, properties, self.entry)
        self.committed += len(self._files)
        self._files = []


def _shape_changed(entry: PlanEntry) -> SnapshotShapeChangedError:
    return SnapshotShapeChangedError(f"{entry.table} changed shape", table=str(entry.table))


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return "no message"
