"""Which tables get snapshot, and when: the plan (``storage.snapshot_plan``) carried out.

* A new state folder (the relay log was empty when the receiver started) with
  ``[snapshot] initial = true``: every included base table on the source that holds no
  position in the lake is planned ("initial").
* ``binlake snapshot --tables``: planned ("requested") directly when no replicator runs, or by a
  request file a running replicator takes between batches.
* At every start, tables still in the plan are copied (resumed after their committed chunks).

``run`` copies every planned table in the calling thread (``binlake snapshot``). Inside
``binlake replicate`` the copies run in a thread of their own (``start``) while the applier's
thread streams the other tables: the two share the Spark session (Spark runs jobs from several
threads; pyspark pins each Python thread to a JVM thread, so Iceberg's thread-local commit
properties stay apart), and the copies have their own ``Lake`` and source connections. The
applier holds back every change of a table that is planned, or copied but not yet ``released``
(``held``): it replays them from the copy's position once the copy is done
(``binlake.apply.applier``).

A table leaves the plan only after its copy is marked done in the lake (crash point
``snapshot_before_done`` sits between the two) and, on a local warehouse, fsynced.
A copy that meets a source that went away (a restart, a lost connection) waits with the
receiver's backoff and resumes after its committed chunks; any other error stops it, typed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager

from binlake.binlog.names import TableName
from binlake.config import Config
from binlake.console import Console, reconnect_notice
from binlake.crashpoints import crash_point
from binlake.errors import (
    BinlakeError,
    SnapshotError,
    SourceConnectionLostError,
    SourceUnreachableError,
)
from binlake.lake.catalog.target import LakeTarget
from binlake.lake.spark.session import SparkSession
from binlake.lake.tables.lake import Lake
from binlake.position import SourcePosition
from binlake.retry import retryable
from binlake.snapshot.chunk_task import chunk_source
from binlake.snapshot.copier import CopyProgressSink, TableCopier, TableCopy
from binlake.snapshot.group_copy import GroupCopier
from binlake.snapshot.source_reads import SourceReads
from binlake.source.hints import source_hints
from binlake.source.policy import Backoff
from binlake.source.reconnect import ReconnectPolicy, retrying
from binlake.source.settings import connection_settings
from binlake.source.table_shape import read_collations
from binlake.storage.snapshot_plan import PlanEntry, SnapshotPlan, take_requests
from binlake.storage.warehouse_sync import WarehouseSync, warehouse_sync_for
from binlake.verify.source_session import SnapshotSession

#: Most small tables copied by one Spark job (``group_copy``).
GROUP_MAX = 500
#: Errors a copy waits out (the source restarting, a lost connection): it resumes after them.
RETRYABLE = (SourceConnectionLostError, SourceUnreachableError)


def waits_out(error: BinlakeError, *, lake: bool) -> bool:
    """Whether a copy resumes after ``error``, after a backoff wait: the source went away; and,
    inside ``binlake replicate`` (``lake``), the catalog failed (a commit whose answer was lost:
    the resumed copy reads from its table what went through) or another writer committed to the
    table first, as ``binlake.retry`` does for batches. A one-off ``binlake snapshot``
    exits with those (its plan makes the next run resume)."""
    if isinstance(error, RETRYABLE):
        return True
    return lake and retryable(error)


class SnapshotRunner:
    def __init__(
        self,
        config: Config,
        spark: SparkSession,
        target: LakeTarget,
        console: Console,
        *,
        cores: int | None = None,
    ) -> None:
        self.config, self.spark, self.target, self.console = config, spark, target, console
        self.plan = SnapshotPlan(config.state.snapshot_plan_path)
        self.cores = cores or max(1, int(spark.sparkContext.defaultParallelism))
        self.copies: list[TableCopy] = []
        self.progress = CopyProgressSink()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Copies run inside ``binlake replicate`` (``start``): they wait out catalog failures.
        self._in_replicate = False
        self._copier: TableCopier | None = None
        #: The background copy's error (any: a bug must stop ``replicate``, not hang it).
        self._error: Exception | None = None
        #: Copies done in the background, not yet taken by ``finished``.
        self._done: list[TableCopy] = []
        #: Tables copied whose changes the applier holds until it ``release``s them.
        self._unreleased: set[TableName] = set()

    # ---- planning ----------------------------------------------------------------------------

    def plan_initial(self, positions: Mapping[TableName, SourcePosition]) -> list[TableName]:
        """Plan every included source table the lake holds no position for (and the plan
        does not hold already: a copy in progress keeps its id)."""
        if not self.config.snapshot.initial:
            return []
        planned = self.plan.read()
        with self._session() as session:
            tables = [
                t
                for t in session.base_tables()
                if self.target.selected(t) and t not in positions and t not in planned
            ]
        if tables:
            self.plan.add(tables, "initial")
        return tables

    def _session(self) -> SnapshotSession:
        """A session on the source that connects and reconnects with the receiver's backoff
        (it runs inside `binlake replicate`, which waits for the source); a stop requested
        while it waits ends the run (``SourceWaitAbandoned``)."""
        source = self.config.source
        policy = ReconnectPolicy.from_config(self.config.receiver)
        notify = reconnect_notice(self.console, "snapshot", f"{source.host}:{source.port}")
        return retrying(
            lambda: SnapshotSession(
                connection_settings(source), policy, notify=notify, stop=self._stop
            ),
            policy,
            reset=lambda: None,
            notify=notify,
            stop=self._stop,
        )

    def take_requests(self) -> list[TableName]:
        folder = self.config.state.snapshot_requests_dir
        if not folder.is_dir():
            return []
        return take_requests(folder, self.plan)

    def pending(self) -> bool:
        return bool(self.plan.read())

    def held(self) -> frozenset[TableName]:
        """Tables whose changes streaming must hold: planned, or copied and not released."""
        with self._lock:
            return frozenset(self.plan.read()) | frozenset(self._unreleased)

    # ---- in the calling thread ---------------------------------------------------------------

    def run(self) -> list[TableCopy]:
        """Copy every table in the plan; each leaves the plan once its copy is committed."""
        self._copy_planned()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        with self._lock:
            self._done.clear()
            self._unreleased.clear()
        return self.copies

    # ---- in the background -------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Copy the planned tables in a thread of their own (if any, and none runs)."""
        if self.running or not self.plan.read():
            return
        self._stop.clear()
        self._in_replicate = True
        self._thread = threading.Thread(
            target=self._copy_planned, name="binlake-snapshot", daemon=True
        )
        self._thread.start()

    def finished(self) -> list[TableCopy]:
        """Copies done since the last call (their tables stay ``held`` until released); the
        background copy's error, raised once it stopped."""
        with self._lock:
            done, self._done = self._done, []
        if self._error is not None and not self.running:
            error, self._error = self._error, None
            raise error
        return done

    def release(self, tables: Collection[TableName]) -> None:
        """The applier replays these tables from their copies' positions from now on."""
        with self._lock:
            self._unreleased.difference_update(tables)

    def close(self) -> None:
        """Stop the background copy (its committed chunks stay: the next start resumes)."""
        self._stop.set()
        copier = self._copier
        if copier is not None:
            copier.cancel()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def status(self) -> str | None:
        """The running copy's progress line."""
        return self.progress.line if self.running else None

    # ---- the copies --------------------------------------------------------------------------

    def _copy_planned(self) -> None:
        """Copy the planned tables, taking new ones as they are planned: the small ones
        together (``group_copy``), the others one by one."""
        try:
            done: set[TableName] = set()
            grouped: set[TableName] = set()
            while not self._stop.is_set():
                entries = [e for e in self.plan.read().values() if e.table not in done]
                if not entries:
                    return
                group = [e for e in entries if e.table not in grouped]
                if len(group) > 1:
                    grouped.update(e.table for e in group)
                    done.update(self._copy_small(group))
                    continue
                entry = min(entries, key=lambda e: (e.table.database, e.table.table))
                self._copy_waiting_out_the_source(entry)
                done.add(entry.table)
        except Exception as error:  # raised in the applier's thread by ``finished``
            self._error = error

    def _copy_waiting_out_the_source(self, entry: PlanEntry) -> None:
        backoff = Backoff.from_config(self.config.receiver)
        while not self._stop.is_set():
            try:
                self._copy(entry)
                return
            except BinlakeError as error:
                if not waits_out(error, lake=self._in_replicate) or backoff.exhausted:
                    raise
                wait = backoff.next_wait()
                self.console.message(
                    "snapshot",
                    f"{entry.table}: {error}; resuming after its committed chunks in {wait:.1f} s",
                )
                self._stop.wait(wait)

    def _copy(self, entry: PlanEntry) -> None:
        with self._copying() as (copier, sync):
            self.console.message("snapshot", f"copying {entry.table} ({entry.reason})")
            with sync.committing():
                copy = copier.copy(entry)
        if copy.outcome != "stopped":
            self._done_with([(entry, copy)], sync)

    def _copy_small(self, entries: list[PlanEntry]) -> set[TableName]:
        """The entries the source estimates at ``[snapshot] chunk_rows`` rows or fewer,
        copied as groups of at most ``GROUP_MAX`` (``group_copy``); the tables done. An error
        leaves the group's tables to the table path (which waits out the source, or stops
        with the error), its committed members done."""
        done: set[TableName] = set()
        with self._copying() as (copier, sync):
            small = copier.reads.small_tables(
                [e.table for e in entries], self.config.snapshot.chunk_rows
            )
            members = [e for e in entries if e.table in small]
            for start in range(0, len(members), GROUP_MAX):
                if self._stop.is_set():
                    break
                group = members[start : start + GROUP_MAX]
                try:
                    with sync.committing():
                        outcome = GroupCopier(copier, self.config.snapshot.group_threads).copy(
                            group
                        )
                except BinlakeError as error:
                    self.console.message(
                        "snapshot", f"a group of {len(group)} small tables: {error}; copying "
                        "them one by one"
                    )  # fmt: skip
                    continue
                by_table = {e.table: e for e in group}
                finished = [(by_table[c.table], c) for c in outcome.copies]
                self._done_with(finished, sync)
                done.update(c.table for c in outcome.copies)
        return done

    @contextmanager
    def _copying(self) -> Iterator[tuple[TableCopier, WarehouseSync]]:
        """A copier on a source session of its own (with its lake, source reads and hints),
        and the warehouse sync of what it commits."""
        source = chunk_source(self.config.source)
        source_address = f"{self.config.source.host}:{self.config.source.port}"
        notify = reconnect_notice(self.console, "snapshot", source_address)
        hints = source_hints(self.config, notify=notify, stop=self._stop)
        sync = warehouse_sync_for(self.target, unsynced_since=time.time_ns())
        try:
            with self._session() as session:
                lake = Lake(
                    self.spark,
                    self.target,
                    key_columns=self.config.tables.key_columns,
                    hints=hints,
                )
                reads = SourceReads(session, source, read_collations(session.query))
                copier = TableCopier(
                    self.spark,
                    lake,
                    reads,
                    source,
                    chunk_rows=self.config.snapshot.chunk_rows,
                    commit_every_s=self.config.snapshot.commit_every_s,
                    cores=self.cores,
                    console=self.console,
                    stop=self._stop,
                    on_progress=self.progress,
                )
                self._copier = copier
                yield copier, sync
        finally:
            self._copier = None
            hints.close()

    def _done_with(self, finished: list[tuple[PlanEntry, TableCopy]], sync: WarehouseSync) -> None:
        """Copies done: durable (the warehouse synced) before the plan forgets them."""
        if not finished:
            return
        sync.sync()
        crash_point("snapshot_before_done")
        with self._lock:
            self.plan.done(*(entry for entry, _ in finished))
            for entry, copy in finished:
                self.copies.append(copy)
                self._done.append(copy)
                self._unreleased.add(entry.table)


def check_tables(
    tables: Collection[TableName],
    existing: Collection[TableName],
    selected: Callable[[TableName], bool],
) -> None:
    """Every table must exist on the source and be selected by [tables]."""
    missing = sorted(t for t in tables if t not in set(existing))
    if missing:
        raise SnapshotError(
            f"not a base table on the source: {', '.join(map(str, missing))}",
            hint="name tables as db.table, as the source spells them (case included); a name "
            "holding a dot or a space goes in backticks: `we.ird db`.`t 1`",
        )
    left_out = sorted(t for t in tables if not selected(t))
    if left_out:
        raise SnapshotError(
            f"not replicated by [tables] include/exclude: {', '.join(map(str, left_out))}",
            hint="add the tables to [tables] include (and out of exclude) first",
        )
