"""The applier: relay log -> batches -> Iceberg, exactly once per table, whatever crashes.

One thread does everything that touches Spark (py4j pins Python threads to Java threads, and
Iceberg's commit properties live in a Java thread-local). At start (design "Recovery routine"):

1. the receiver has recovered the relay log (``RelayProgress.wait_recovered``);
2. each table's applied position and the newest batch number are read from the lake;
3. a table whose applied position is beyond the relay log's restart point means the relay log
   lost a tail the applier had applied (WL#4621): the receiver fetches from the relay end
   anyway, and the table skips, by position, what it has. This is logged;
4. tables owed a snapshot (a new state folder, a crash mid-snapshot, ``binlake snapshot``)
   are copied in a thread of their own (``binlake.snapshot.runner``), one after the other,
   while this thread streams the other tables; each copied table then holds the position
   streaming replays it from;
5. reading starts at the recorded checkpoint (MDEV-181), and each table applies only the
   transactions after its applied position.

Copies and streaming (``binlake.apply.holds``): while a table is planned or copied, its changes
are held back: not committed to it, and kept counted in the checkpoint, so the relay log keeps
them. When a copy is done, the open batch is committed and the applier starts reading again from
the recorded checkpoint, exactly as a restart would (the session below is built again, the
lake's tables are read again): the copied table applies every change after its copy's
position, the other tables skip what they have by position.

Checkpoint counts (MDEV-181) are the applier's: it is the one that reads the relay log, so it
counts each transaction of a relay file when it reads it (``on_transaction_appended``), adds a
relay file to the tracker when it reaches it (``on_file_added``), and reports them durable once
the batch holding them has committed to every table (``on_transactions_durable``). Files the
applier has not reached are not tracked, so the checkpoint is never past them. Once the
recorded checkpoint moves, files strictly older are purged under the receiver's index lock. At
a restart the counts are rebuilt by reading again from the recorded checkpoint: a transaction
counts until the batch holding it has committed (or found every table it touches already
holding it).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Generator
from contextlib import closing
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from binlake.apply.accounting import RelayAccounting
from binlake.apply.batch_apply import BatchApplier, BatchResult
from binlake.apply.cuts import BatchEnd, CutRecorder
from binlake.apply.plan import (
    Batch,
    BatchBuilder,
    Bounds,
    GroupEvents,
    Selected,
    Unit,
    classify,
)
from binlake.apply.prefetch import ahead
from binlake.binlog.names import TableName
from binlake.config import Config
from binlake.console import MB, Console, reconnect_notice
from binlake.crashpoints import crash_point
from binlake.errors import BinlakeError, CommitConflictError, SourcePositionLostError
from binlake.lake.catalog.target import LakeTarget
from binlake.lake.spark.session import SparkSession
from binlake.lake.spark.target_check import probe_catalog
from binlake.lake.tables.lake import Lake
from binlake.maintain.schedule import ScheduledMaintenance
from binlake.metrics import (
    COMMIT_RETRIES,
    COMMITS,
    LAG_BYTES,
    LAG_SECONDS,
    ROWS_APPLIED,
    TRANSACTIONS_APPLIED,
    Metrics,
)
from binlake.position import RelayPosition, SourcePosition, at_or_before, before, earliest
from binlake.relay import INDEX_NAME
from binlake.relay.handoff import RelayProgress, RelayState
from binlake.relay.reader import RelayGroup, RelayReader, group_events
from binlake.retry import Retry
from binlake.snapshot.copier import TableCopy
from binlake.snapshot.runner import SnapshotRunner
from binlake.source.hints import source_hints
from binlake.source.policy import Backoff
from binlake.source.reconnect import SourceWaitAbandoned
from binlake.storage.checkpoint import CheckpointRecord, CheckpointTracker, scan_start
from binlake.storage.index import LogIndex
from binlake.storage.warehouse_sync import WarehouseSync, warehouse_sync_for

T = TypeVar("T")
#: Longest wait for the relay log before the loop looks at the stop flag and the clocks.
POLL_S = 0.25
#: Seconds between looks for ``binlake snapshot`` requests while streaming.
REQUEST_CHECK_S = 1.0


@dataclass
class ApplyResult:
    batches: int = 0
    transactions: int = 0
    row_changes: int = 0
    #: Commits per table.
    commits: Counter[TableName] | None = None
    #: Zero dates written as null, per ``db.table.column``.
    zero_dates: Counter[str] | None = None
    #: Relay files purged.
    purged: int = 0


@dataclass
class _Session:
    """What the applier builds once the relay log is recovered (``Applier._start``)."""

    #: The relay-log checkpoint counts (MDEV-181) and the DDL holds.
    accounting: RelayAccounting
    batches: BatchApplier
    reader: RelayReader
    #: fsyncs the local warehouse before each checkpoint record.
    warehouse_sync: WarehouseSync


class Applier:
    def __init__(
        self,
        config: Config,
        spark: SparkSession,
        relay: RelayProgress,
        target: LakeTarget,
        *,
        console: Console,
        metrics: Metrics,
    ) -> None:
        self.config = config
        self.relay = relay
        self.target = target
        self.console = console
        self.metrics = metrics
        self._stop = threading.Event()
        self.result = ApplyResult(commits=Counter(), zero_dates=Counter())
        address = f"{config.source.host}:{config.source.port}"
        self._hints = source_hints(
            config, notify=reconnect_notice(console, "apply", address), stop=self._stop
        )
        self.lake = Lake(
            spark,
            target,
            key_columns=config.tables.key_columns,
            hints=self._hints,
            on_evolved=self._release_holds,
        )
        applier = config.applier
        self._builder = BatchBuilder(
            Bounds(applier.max_transactions, applier.max_bytes, applier.max_seconds)
        )
        self._session: _Session | None = None
        self._next_batch = 1
        self._applied_relay: RelayPosition | None = None
        self._last_timestamp: int | None = None
        self._status_at = time.monotonic()
        self._status_rows = 0
        #: (table, applied position): the relay log was empty at start, so the first source
        #: position it gets must not be past what that table (the furthest behind) holds.
        self._gap_check: tuple[TableName, SourcePosition] | None = None
        self._snapshots = SnapshotRunner(config, spark, target, console)
        self._requests_checked = 0.0
        self.maintenance = ScheduledMaintenance(config, spark, console, self._stop)
        self.cuts = CutRecorder(config, spark, target, console, expiry=self.maintenance.expiry)
        self._retry = Retry(
            lambda: probe_catalog(spark, target),
            Backoff.from_config(config.receiver),
            config.applier.catalog_give_up_s,
            console,
            self._stop,
            conflicts=config.applier.commit_retries,
            on_conflict=self._commit_retried,
        )
        self._state: RelayState | None = None

    def request_stop(self) -> None:
        """Stop after the batch being committed (an open batch is abandoned, never half
        committed; its transactions are read again at the next start)."""
        self._stop.set()

    # ---- the run -----------------------------------------------------------------------------

    def run(self) -> ApplyResult:
        try:
            try:
                state = self._start()
                if state is not None:
                    self._loop()
            except BaseException:
                self.maintenance.close(cancel=True, raise_failure=False)
                raise
            self.maintenance.close(cancel=self._stop.is_set())  # caught up: the round ends
        except SourceWaitAbandoned:
            pass  # stopped while waiting for the source: the open batch is read again next time
        finally:
            self._snapshots.close()
            self._hints.close()
            if self._session is not None:
                self._session.batches.close()
        return self.result

    def _start(self) -> RelayState | None:
        state = self.relay.wait_recovered(timeout=3600.0)
        while state.durable is None and not state.finished and not self._stop.is_set():
            state = self.relay.wait_past(None, POLL_S)  # the first relay file is being made
        if state.durable is None:
            if state.error is not None:
                raise state.error
            return None
        self._plan_snapshots(state)
        self._open(state, first=True)
        self._snapshots.start()
        return state

    def _open(self, state: RelayState, *, first: bool) -> None:
        """Read the lake's positions and start reading the relay log at the recorded
        checkpoint (at start, and again after a copy is done)."""
        self.lake.forget_all()
        applied = self.lake.read_applied()
        self._next_batch = max(self._next_batch, applied.max_batch + 1)
        restart = state.restart.position if state.restart is not None else None
        if first:
            self._check_restart(restart, applied.positions)
        record = CheckpointRecord(self.config.state.checkpoint_path)
        start = scan_start(record, self._index().names())
        # The checkpoint moves only once the lake's files it moves past are fsynced.
        warehouse_sync = warehouse_sync_for(self.target, unsynced_since=record.written_ns())
        accounting = RelayAccounting(
            CheckpointTracker(record, [start], before_record=warehouse_sync.sync)
        )
        batches = BatchApplier(
            self.lake,
            selected=self.target.selected,
            on_drop=self.config.tables.on_drop,
            holds=accounting.holds,
            zero_dates=self.result.zero_dates if self.result.zero_dates is not None else Counter(),
        )
        batches.copy_holds.add(self._snapshots.held())
        if self._session is not None:
            self._session.batches.close()
        reader = RelayReader(
            self.config.state.relay_dir, start, hold_bytes=self.config.applier.max_bytes
        )
        self._session = _Session(accounting, batches, reader, warehouse_sync)
        self.cuts.reset()
        self.console.message(
            "apply",
            f"reading the relay log from {start} (checkpoint); {len(applied.positions)} tables "
            f"hold batches up to #{applied.max_batch}",
        )
        self._purge()

    def _check_restart(
        self, restart: SourcePosition | None, positions: dict[TableName, SourcePosition]
    ) -> None:
        if restart is None and positions:
            first = earliest(positions.values())
            table = next(t for t, p in positions.items() if p == first)
            self._gap_check = (table, first)
            self.console.message(
                "apply",
                f"the relay log starts empty; {len(positions)} tables skip by position "
                "what they already hold (a snapshot, or an earlier state folder)",
            )
        for table, position in sorted(positions.items()):
            if restart is not None and before(restart, position):
                self.console.message(
                    "apply",
                    f"relay log lost a tail already applied to {table} (at {position}); "
                    f"refetching from {restart}; {table} skips "
                    "what it has by position (WL#4621)",
                )

    def _plan_snapshots(self, state: RelayState) -> None:
        """Tables owed a snapshot: all of them on a new state folder (the relay log was
        empty), else those left in the plan by a crash or asked for by ``binlake snapshot``
        (binlake.snapshot.runner). Their copies run beside streaming."""
        runner = self._snapshots
        positions = self.lake.read_applied().positions
        empty_relay = state.restart is not None and state.restart.position is None
        if empty_relay or not positions:  # no position at all: a crash may have come before
            runner.plan_initial(positions)  # the plan was written
        runner.take_requests()

    def _snapshots_step(self) -> None:
        """Between batches: copies done (their tables then catch up from their copies'
        positions: the relay log is read again from the checkpoint), and tables `binlake
        snapshot` asked for while this runs (their changes are held from now on)."""
        runner = self._snapshots
        done = runner.finished()
        if done:
            self._apply_all(self._builder.flush())
            runner.release([copy.table for copy in done])
            assert self._state is not None
            self._open(self._state, first=False)
            for copy in done:
                self._copied(copy)
        now = time.monotonic()
        if now - self._requests_checked < REQUEST_CHECK_S:
            return
        self._requests_checked = now
        if runner.take_requests():
            self._apply_all(self._builder.flush())
            self._started().batches.copy_holds.add(runner.held())
            runner.start()

    def _copied(self, copy: TableCopy) -> None:
        zero = sum(copy.zero_dates.values())
        if self.result.zero_dates is not None:
            self.result.zero_dates.update(copy.zero_dates)
        self.console.message(
            "apply",
            f"{copy.table}: copy {copy.outcome} ({copy.rows:,} rows"
            + (f", {zero:,} zero dates written as null" if zero else "")
            + "); it catches up from its copy's position",
        )

    def _started(self) -> _Session:
        session = self._session
        assert session is not None, "the applier has not started"
        return session

    def _loop(self) -> None:
        while not self._stop.is_set():
            reader = self._started().reader
            state = self._state = self.relay.wait_past(reader.position, self._wait_s())
            if state.durable is not None:
                with closing(self._read(reader, state.durable)) as units:
                    for unit in units:
                        self._batch_group(unit)
                        if self._stop.is_set():
                            return  # the open batch is abandoned: read again at the next start
                if self._gap_check is not None and reader.source_position is not None:
                    self._check_no_gap(reader.source_position)  # a preamble without transactions
            if self._builder.due(time.monotonic()):
                self._apply_all(self._builder.flush())
            self._snapshots_step()
            self._retrying(lambda: self.cuts.step(self._started().batches.copy_holds))
            self.maintenance.step(self.lake.known_tables)
            self._report(state)
            reader = self._started().reader
            caught_up = state.durable is None or at_or_before(state.durable, reader.position)
            copying = self._snapshots.running or bool(self._snapshots.held())
            if state.finished and caught_up and not copying:
                self._apply_all(self._builder.flush())
                self._record_last_cut()
                self._report(state, force=True)
                if state.error is not None:
                    raise state.error
                return

    def _record_last_cut(self) -> None:
        """The cut after the run's last batch, whatever ``[cuts] every_s`` says."""
        holds = self._started().batches.copy_holds
        self._retrying(lambda: self.cuts.step(holds, now=True))

    def _wait_s(self) -> float:
        batch = self._builder.open_batch
        if batch is None:
            return POLL_S
        left = batch.started + self._builder.bounds.max_seconds - time.monotonic()
        return max(0.0, min(POLL_S, left))

    def _read(self, reader: RelayReader, limit: RelayPosition) -> Generator[Classified, None, None]:
        """The relay log's groups up to ``limit``, classified, read ahead on a thread while
        batches commit (``binlake.apply.prefetch``)."""
        selected = self.target.selected
        events_of = partial(group_events, self.config.state.relay_dir)
        classified = (_classified(g, selected, events_of) for g in reader.read(limit))
        return ahead(classified, _classified_size)

    def _batch_group(self, classified: Classified) -> None:
        """Count the group for the checkpoint and add its unit to the open batch (applying
        the batches it completes)."""
        accounting = self._started().accounting
        group, unit = classified
        if self._gap_check is not None and group.position is not None:
            self._check_no_gap(group.position)
        if isinstance(unit, BinlakeError):
            raise unit
        accounting.on_read(group.relay_file, is_transaction=unit.is_transaction)
        if group.aside_context is not None:
            self.console.message(
                "apply",
                f"transaction {group.group.gtid or group.relay} holds "
                f"{group.size / (1 << 20):,.1f} MiB, more than [applier] max_bytes: its row "
                "images are read from the relay log as they are applied, not held in memory",
            )
        self._apply_all(self._builder.add(unit, time.monotonic()))
        if self._builder.due(time.monotonic()):
            self._apply_all(self._builder.flush())

    def _check_no_gap(self, first: SourcePosition) -> None:
        """An empty relay log is fetched from the source's oldest binlog: if that starts in a
        file after a table's applied position, the transactions between are gone (step 5)."""
        assert self._gap_check is not None
        table, applied = self._gap_check
        self._gap_check = None
        if applied.file != first.file and before(applied, first):
            raise SourcePositionLostError(
                f"the relay log was empty and the source's oldest binlog starts at {first}, "
                f"after {table}'s applied position {applied}: the transactions between are "
                "no longer on the source",
                requested=str(applied),
            )

    # ---- batches ---------------------------------------------------------------------------

    def _apply_all(self, batches: list[Batch]) -> None:
        for batch in batches:
            if not self._apply(batch):
                return  # stopped while the catalog was failing: the batch is read again

    def _apply(self, batch: Batch) -> bool:
        number = self._next_batch
        self._next_batch += 1
        session = self._started()
        result = self._apply_retrying(session, batch, number)
        if result is None:
            return False
        if batch.transactions and self._record_cut(session, batch, number, result) is None:
            return False
        session.accounting.on_batch_done(batch, result.held, result.copy_held)
        for line in result.messages:
            self.console.message("apply", line)
        self._account(batch, result.committed)
        for table, write in result.writes.items():
            labels = {"table": str(table), "write": write.path.value, "reason": write.reason or ""}
            self.metrics.inc_counter(COMMITS, labels)
        self._purge()
        self._report(self.relay.state())
        return True

    def _apply_retrying(self, session: _Session, batch: Batch, number: int) -> BatchResult | None:
        """``batch`` applied, riding out a failing catalog or another writer's commit
        (``binlake.retry``): after each failure every table's position is read from the
        catalog again, so a commit that landed before its answer was lost is not applied
        twice. None: a stop was requested while waiting (the batch is abandoned, read again at
        the next start)."""

        def apply() -> BatchResult:
            with session.warehouse_sync.committing():
                return session.batches.apply(batch, number)

        return self._retrying(apply)

    def _record_cut(
        self, session: _Session, batch: Batch, number: int, result: BatchResult
    ) -> bool | None:
        """A consistent cut after the batch, when one is due (``binlake.apply.cuts``). None: a
        stop was requested while the catalog was failing."""
        end = BatchEnd(
            number,
            batch.position,
            batch.last.gtid_state,
            batch.last.group.events[-1].header.timestamp,
        )
        holds = session.batches.copy_holds

        def record() -> bool:
            self.cuts.after_batch(end, result.committed, ddl=batch.is_ddl, holds=holds)
            return True

        return self._retrying(record)

    def _retrying(self, work: Callable[[], T]) -> T | None:
        """``work()`` under the one retry policy; ``Lake.retries`` tells its commits how many
        times it was tried again."""

        def reload() -> None:
            self.cuts.reset()
            self.lake.reload()
            self.lake.retries = self._retry.retries

        try:
            return self._retry.run(work, reload)
        finally:
            self.lake.retries = 0

    def _commit_retried(self, conflict: CommitConflictError, retry: int, wait_s: float) -> None:
        table = conflict.table or "?"
        self.metrics.inc_counter(COMMIT_RETRIES, {"table": table}, 1)
        limit = self.config.applier.commit_retries
        self.console.message(
            "apply",
            f"{table}: {conflict.reason}; re-planning and committing again in {wait_s:.1f}s "
            f"(retry {retry} of {limit})",
        )

    def _release_holds(self, table: TableName) -> None:
        if self._session is not None:
            self._session.accounting.holds.release(table)

    def _account(self, batch: Batch, committed: Counter[TableName]) -> None:
        out = self.result
        out.batches += 1
        out.transactions += batch.transactions
        rows = sum(committed.values())
        out.row_changes += rows
        assert out.commits is not None
        out.commits.update(dict.fromkeys(committed, 1))
        self.metrics.inc_counter(TRANSACTIONS_APPLIED, None, batch.transactions)
        for table, count in committed.items():
            self.metrics.inc_counter(ROWS_APPLIED, {"table": str(table)}, count)
        self._applied_relay = batch.last.relay
        self._last_timestamp = batch.last.group.events[-1].header.timestamp

    # ---- purge -----------------------------------------------------------------------------

    def _index(self) -> LogIndex:
        return LogIndex(self.config.state.relay_dir / INDEX_NAME)

    def _purge(self) -> None:
        """Remove relay files strictly older than the recorded checkpoint (MDEV-181)."""
        tracker = self._started().accounting.tracker
        recorded = tracker.recorded_checkpoint
        index = self._index()
        names = index.names()
        if recorded not in names or names.index(recorded) == 0:
            return
        crash_point("apply_during_purge")
        with self.relay.index_lock:
            removed = index.purge(recorded, keep_from=recorded)
        tracker.on_files_purged([f for f in removed if f in tracker.files])
        self.result.purged += len(removed)

    # ---- progress ----------------------------------------------------------------------------

    def _report(self, state: RelayState, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._status_at < self.console.interval_s:
            return
        elapsed = max(now - self._status_at, 1e-9)
        rate = (self.result.row_changes - self._status_rows) / elapsed
        self._status_at, self._status_rows = now, self.result.row_changes
        behind = self._behind_bytes(state.durable)
        lag_s = (
            max(0.0, time.time() - self._last_timestamp) if behind and self._last_timestamp else 0.0
        )
        self.metrics.set_gauge(LAG_BYTES, None, behind)
        self.metrics.set_gauge(LAG_SECONDS, None, lag_s)
        copy = self._snapshots.status()
        self.console.status(
            f"{rate:,.0f} rows/s  lag {lag_s:.1f} s / {behind / MB:.1f} MB  "
            f"({self.result.row_changes:,} row changes, {self.result.transactions:,} "
            f"transactions, {self.result.batches:,} batches)" + (f"  | {copy}" if copy else "")
        )

    def _behind_bytes(self, durable: RelayPosition | None) -> int:
        """Relay-log bytes durable but not yet applied."""
        session = self._session
        applied = self._applied_relay or (
            RelayPosition(session.reader.position.file, 0) if session is not None else None
        )
        if durable is None or applied is None or at_or_before(durable, applied):
            return 0
        if applied.file == durable.file:
            return durable.offset - applied.offset
        relay_dir: Path = self.config.state.relay_dir
        names = self._index().names()
        if applied.file not in names or durable.file not in names:
            return 0
        total = durable.offset - applied.offset
        for name in names[names.index(applied.file) : names.index(durable.file)]:
            try:
                total += (relay_dir / name).stat().st_size
            except OSError:
                continue
        return max(total, 0)


#: A relay group and its unit (or why it has none: raised where the group is applied).
Classified = tuple[RelayGroup, Unit | BinlakeError]


def _classified(group: RelayGroup, selected: Selected, events_of: GroupEvents) -> Classified:
    try:
        return group, classify(group, selected, events_of)
    except BinlakeError as error:
        return group, error


def _classified_size(classified: Classified) -> int:
    return classified[0].size
