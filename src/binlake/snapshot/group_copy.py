"""Small tables copied together: one Spark job for all of them, their Iceberg work side by side.

A table's copy has costs that do not depend on its rows: a Spark job, the Iceberg table's
creation, a commit for its chunks and one marking it done, the source's positions, a handful of
queries. A database of hundreds of small tables paid them hundreds of times (0.86 s a table,
docs/benchmarks.md, "Wide and busy"). A group copy pays the Spark job and the positions once
for the group, and makes, loads and commits its members' Iceberg tables on several threads:

1. each member's shape is read (one source session: one query after another), and its Iceberg
   table created (or found without a copy's commit: dropped and made again, as the table path
   does) and loaded for file commits (threads: ``[snapshot] group_threads``);
2. one ``low`` for the group, taken before any chunk is read;
3. one Spark job of a few tasks per core (``TASKS_PER_CORE``; a task costs PySpark about
   0.1 s whatever it does), each reading its members' whole tables one after another (one
   chunk each: the tables are small) into one Parquet file of each member's Iceberg table;
4. one ``high``, taken after the job; each member's shape read again;
5. each member's one commit (threads): its file, ``binlake.position`` = ``low`` and
   ``binlake.snapshot`` done with ``consistent`` = ``high``; before it, files an attempt
   stored for the member and no commit names (a task run again) are deleted, as the table path
   does (crash point ``snapshot_during_cleanup``).

Why it is exact: the argument of ``binlake.snapshot.copier`` (each chunk is read after ``low``;
every transaction a chunk saw is logged at or before ``high``) holds for a group's ``low`` and
``high`` as for one table's, and streaming replays each member from ``low``. A member's data
and its done mark are one commit: a crash before it leaves the member's Iceberg table without a
copy's commit (copied anew by the next start; its file an orphan, removed by its prefix), after
it the member is done (crash points ``snapshot_before_chunk`` before each member's commit,
``snapshot_after_chunk`` after it).

A member that cannot be copied this way (its chunk failed, it changed shape meanwhile) is left
to the table path (``TableCopier.copy``), which resumes or starts it over and reports what is
wrong, as for any table.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from binlake.binlog.names import TableName
from binlake.crashpoints import crash_point
from binlake.errors import SourceError
from binlake.lake.catalog.snapshot_progress import SNAPSHOT, SnapshotProgress
from binlake.lake.catalog.summary import POSITION
from binlake.lake.spark.chunk_jobs import ChunkJob
from binlake.lake.write.row_delta import DeltaTable, RowDeltaWriter
from binlake.position import SourcePosition
from binlake.snapshot.chunk_task import (
    GONE_CODES,
    ChunkPlan,
    ChunkRecord,
    ChunkSource,
    ColumnShape,
    KeyRange,
    decode_error,
    run_chunk,
)
from binlake.snapshot.copier import TableCopier, TableCopy, chunk_file_target, copy_prefix
from binlake.snapshot.source_reads import TableShape
from binlake.storage.snapshot_plan import PlanEntry

#: Tasks of a group's Spark job per executor core.
TASKS_PER_CORE = 2


@dataclass
class _Member:
    entry: PlanEntry
    shape: TableShape
    name: str = ""
    target: DeltaTable | None = None
    plan: ChunkPlan | None = None
    record: ChunkRecord | None = None
    #: The column definitions the chunk's SELECT returned when planned (``result_shape``).
    result: tuple[ColumnShape, ...] = ()


@dataclass
class GroupOutcome:
    """What a group copy did: the copies done (or found done, or gone), and the entries left
    to the table path."""

    copies: list[TableCopy] = field(default_factory=list)
    left: list[PlanEntry] = field(default_factory=list)


class _Done:
    """A member whose copy an earlier run committed already."""


class GroupCopier:
    """Copies a group of small tables (see the module docstring) with a ``TableCopier``'s
    lake, source reads and console."""

    def __init__(self, copier: TableCopier, threads: int) -> None:
        self.copier = copier
        self.threads = threads
        self._writers = threading.local()

    def copy(self, entries: Sequence[PlanEntry]) -> GroupOutcome:
        outcome = GroupOutcome()
        started = time.monotonic()
        members = self._shapes(entries, outcome)
        members = self._side_by_side(self._prepare, members, outcome)
        self._progress(f"{len(members)} small tables created, reading them in one job")
        if not members or self.copier.stop.is_set():
            return outcome
        reads = self.copier.reads
        low = reads.low_position(members[0].entry.table)
        made = time.monotonic()
        self._run_job(members)
        high = reads.high_position()
        read = time.monotonic()
        ready = [m for m in members if self._copied(m, outcome)]
        done = self._side_by_side(partial(self._commit, low, high), ready, outcome)
        outcome.copies += [self._result(m) for m in done]
        self.copier.console.message(
            "snapshot",
            f"{len(done)} small tables copied in {time.monotonic() - started:.1f} s (made in "
            f"{made - started:.1f} s, read in {read - made:.1f} s, committed in "
            f"{time.monotonic() - read:.1f} s)",
        )
        return outcome

    # ---- before the job ----------------------------------------------------------------------

    def _shapes(self, entries: Sequence[PlanEntry], outcome: GroupOutcome) -> list[_Member]:
        """Each entry's shape now, and the column definitions its chunk's SELECT returns (one
        connection for all); a table gone from the source ends its copy ("gone")."""
        reads = self.copier.reads
        members = []
        for entry in entries:
            shape = reads.shape(entry.table, self._key(entry.table))
            if shape is None:
                outcome.copies.append(TableCopy(entry.table, outcome="gone"))
            elif shape.split is None:
                outcome.left.append(entry)  # a change log: its own consistent read
            else:
                members.append(_Member(entry, shape))
        results = reads.result_shapes([m.shape for m in members])
        for member, result in zip(members, results, strict=True):
            member.result = result
        return members

    def _prepare(self, member: _Member) -> _Member | _Done | None:
        """The member's Iceberg table, new (an older snapshot's dropped, as the table path
        does), loaded for file commits; its one-chunk plan. ``_Done``: this snapshot is in the
        lake already; None: a copy of it was begun chunk by chunk (the table path resumes it)."""
        copier, entry = self.copier, member.entry
        lake = copier.lake
        member.name = lake.target.lake_table(entry.table)
        resume = copier.resume(entry)
        if resume.progress is not None:
            return _Done() if resume.progress.done else None
        table = lake.new_table(entry.table)  # none, or an older snapshot's dropped
        lake.prepare(table, member.shape.table_map)
        writer = self._writer()
        target = writer.open(member.name, (), str(entry.table))
        if target.layout.data_file_refusal() is not None:
            return None
        files = chunk_file_target(
            writer.data_folder(target, str(entry.table)), copy_prefix(entry), target.layout
        )
        shape = member.shape
        member.target = target
        member.plan = ChunkPlan(
            database=shape.database,
            table=shape.table,
            columns=shape.columns,
            key=shape.split.name if shape.split is not None else "",
            ranges=(KeyRange(),),
            shape=member.result,
            files=files,
            flavor=copier.reads.flavor,
        )
        return member

    # ---- the job -----------------------------------------------------------------------------

    def _run_job(self, members: list[_Member]) -> None:
        plans = tuple(m.plan for m in members if m.plan is not None)
        tasks = min(len(plans), max(1, self.copier.cores) * TASKS_PER_CORE)
        work = partial(_members_chunks, self.copier.source, plans, tasks)
        job = ChunkJob(self.copier.spark, tasks, work, f"binlake snapshot {len(plans)} tables")
        self.copier.console.message(
            "snapshot", f"copying {len(plans)} small tables in one job of {tasks} tasks"
        )
        arrived_count = 0

        def arrived(_piece: int, text: str) -> None:
            nonlocal arrived_count
            for index, record in json.loads(text):
                if members[index].record is None:
                    members[index].record = ChunkRecord.from_json(record)
                    arrived_count += 1
            self._progress(f"{arrived_count} of {len(plans)} small tables read")

        self.copier._job = job
        try:
            if not self.copier.stop.is_set():
                job.run(arrived)
        finally:
            self.copier._job = None

    def _copied(self, member: _Member, outcome: GroupOutcome) -> bool:
        """Whether the member's chunk is in its file and its shape unchanged; else it goes to
        the table path (or ends: the table is gone)."""
        record = member.record
        if record is not None and record.error is not None:
            error = decode_error(record.error)
            if isinstance(error, SourceError) and error.code in GONE_CODES:
                outcome.copies.append(TableCopy(member.entry.table, outcome="gone"))
                return False
        shape = self.copier.reads.shape(member.entry.table, self._key(member.entry.table))
        if record is None or record.error is not None or shape != member.shape:
            outcome.left.append(member.entry)
            return False
        return True

    # ---- the commits -------------------------------------------------------------------------

    def _commit(self, low: SourcePosition, high: SourcePosition, member: _Member) -> _Member:
        """The member's file and its done mark in one commit (files of attempts no commit
        names deleted first)."""
        record, target, plan = member.record, member.target, member.plan
        assert record is not None and target is not None and plan is not None
        paths = [] if record.path is None else [record.path]
        self.copier.clean_orphans(member.entry, target, plan.files.prefix, paths)
        progress = SnapshotProgress(member.entry.id, None, high, record.rows, True, next=None)
        properties = {POSITION: str(low), SNAPSHOT: progress.to_json()}
        writer, table = self._writer(), str(member.entry.table)
        crash_point("snapshot_before_chunk")
        writer.commit(writer.stage_stored(target, paths, table), properties, table)
        crash_point("snapshot_after_chunk")
        self.copier.lake.forget(member.entry.table)
        return member

    def _result(self, member: _Member) -> TableCopy:
        record = member.record
        assert record is not None
        copy = TableCopy(member.entry.table, rows=record.rows, chunks=1)
        for column, count in record.zero_dates.items():
            copy.zero_dates[f"{member.entry.table}.{column}"] += count
        return copy

    # ---- helpers -----------------------------------------------------------------------------

    def _side_by_side(
        self,
        work: Callable[[_Member], _Member | _Done | None],
        members: list[_Member],
        outcome: GroupOutcome,
    ) -> list[_Member]:
        """``work`` on each member on the group's threads: the members it returns; one it
        returns None for goes to the table path, one it finds done is reported so. The first
        error is raised once every member's work ended."""
        if not members:
            return []
        with ThreadPoolExecutor(self.threads, thread_name_prefix="binlake-group") as pool:
            futures = [pool.submit(work, m) for m in members]
        kept = []
        for member, future in zip(members, futures, strict=True):
            result = future.result()
            if isinstance(result, _Member):
                kept.append(result)
            elif isinstance(result, _Done):
                outcome.copies.append(TableCopy(member.entry.table, outcome="already done"))
            else:
                outcome.left.append(member.entry)
        return kept

    def _progress(self, line: str) -> None:
        sink = self.copier.on_progress
        if sink is not None:
            sink.line = f"snapshot: {line}"

    def _writer(self) -> RowDeltaWriter:
        """This thread's row-delta writer."""
        writer: RowDeltaWriter | None = getattr(self._writers, "writer", None)
        if writer is None:
            writer = self._writers.writer = RowDeltaWriter(self.copier.spark)
        return writer

    def _key(self, table: TableName) -> Sequence[str] | None:
        return self.copier.lake.key_columns.get(table)


def _members_chunks(
    source: ChunkSource, plans: tuple[ChunkPlan, ...], tasks: int, piece: int, attempt: str
) -> str:
    """A group job's task ``piece`` of ``tasks``: every ``tasks``-th member from ``piece`` on,
    each whole table as its one chunk, read on one connection (a connection costs more than a
    small table: TLS set-up, authentication); ``[[member, record], ...]`` as JSON."""
    out: list[list[object]] = []
    connection = source.connect()
    try:
        for i in range(piece, len(plans), tasks):
            record = run_chunk(source, plans[i], 0, attempt, connection)
            out.append([i, record])
            if ChunkRecord.from_json(record).error is not None:  # may have left a result unread
                connection.close()
                connection = source.connect()
    finally:
        connection.close()
    return json.dumps(out)
