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

Then the loop (``Applier._loop``), a pass per durable end the receiver publishes: **read** the
relay log's new groups into batches (``apply.reading``), **apply** each batch completed to the
lake's tables and record its cut (``apply.lake_writes``), **commit** it to the checkpoint
counts and purge the relay files the checkpoint passed (``apply.accounting``, ``apply.purge``);
between batches, copies done or asked for (``apply.copies``), cuts and maintenance rounds due,
the status line (``apply.progress``); **stop** when asked or caught up (``apply.stopping``).
``build_applier`` makes the collaborators.

Copies and streaming (``binlake.apply.holds``): while a table is planned or copied, its changes
are held back: not committed to it, and kept counted in the checkpoint, so the relay log keeps
them. When a copy is done, the open batch is committed and the applier opens a new reading from
the recorded checkpoint, exactly as a restart would (the lake's tables are read again): the
copied table applies every change after its copy's position, the other tables skip what they
have by position.

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

import time
from contextlib import closing
from dataclasses import dataclass, field

from binlake.apply.collector import BatchCollector
from binlake.apply.copies import StreamingCopies
from binlake.apply.cuts import CutRecorder
from binlake.apply.lake_writes import LakeWrites, commit_retry_notice, key_index_notice
from binlake.apply.plan import Batch
from binlake.apply.progress import ApplyProgress, ApplyResult
from binlake.apply.purge import RelayPurge
from binlake.apply.reading import POLL_S, Reading, RelayReadings
from binlake.apply.stopping import StopPolicy
from binlake.binlog.names import TableName
from binlake.config import Config
from binlake.config.applier import DeleteMode
from binlake.console import Console, reconnect_notice
from binlake.lake.catalog.target import LakeTarget
from binlake.lake.spark.session import SparkSession
from binlake.lake.spark.target_check import probe_catalog
from binlake.lake.tables.lake import Lake
from binlake.lake.tables.turns import CompactionTurns
from binlake.lake.write.key_positions import KeyPositions
from binlake.maintain.schedule import ScheduledMaintenance
from binlake.metrics import Metrics
from binlake.position import RelayPosition
from binlake.relay.handoff import RelayProgress, RelayState
from binlake.retry import Retry
from binlake.snapshot.runner import SnapshotRunner
from binlake.source.hints import source_hints
from binlake.source.policy import Backoff
from binlake.source.reconnect import SourceWaitAbandoned
from binlake.storage.open_files import index_budget, open_file_limit

__all__ = ["Applier", "ApplyResult", "build_applier"]


@dataclass(kw_only=True, eq=False)
class Applier:
    """One applier run; its collaborators are passed in (``build_applier``)."""

    relay: RelayProgress
    stop: StopPolicy
    lake: Lake
    readings: RelayReadings
    writes: LakeWrites
    purge: RelayPurge
    copies: StreamingCopies
    maintenance: ScheduledMaintenance
    progress: ApplyProgress
    #: The key indexes position deletes come from (None: equality deletes), closed at the end.
    positions: KeyPositions | None = None
    #: The reading of the relay log under way (None before the start).
    _reading: Reading | None = field(default=None, init=False)
    #: CPython's cyclic collector, run between batches (``apply.collector``).
    collector: BatchCollector = field(default_factory=BatchCollector)

    def request_stop(self) -> None:
        """Stop after the batch being committed (an open batch is abandoned, never half
        committed; its transactions are read again at the next start)."""
        self.stop.request()

    @property
    def reading(self) -> Reading:
        assert self._reading is not None, "the applier has not started"
        return self._reading

    # ---- the run -----------------------------------------------------------------------------

    def run(self) -> ApplyResult:
        with self.collector:
            return self._run()

    def _run(self) -> ApplyResult:
        try:
            try:
                if self._start():
                    self._loop()
            except BaseException:
                self.maintenance.close(cancel=True, raise_failure=False)
                raise
            self.maintenance.close(cancel=self.stop.requested)  # caught up: the round ends
        except SourceWaitAbandoned:
            pass  # stopped while waiting for the source: the open batch is read again next time
        finally:
            self.copies.close()
            self.lake.source_hints.close()
            if self.positions is not None:
                self.positions.close()
            if self._reading is not None:
                self._reading.close()
        return self.progress.result

    def _loop(self) -> None:
        """A pass per durable end the receiver publishes: read, apply and commit, then what
        runs between batches; until a stop is requested or the run is caught up."""
        while not self.stop.requested:
            state = self.relay.wait_past(self.reading.position, self.reading.wait_s())
            if state.durable is not None and not self._read(state.durable):
                return  # stopped: the open batch is abandoned, read again at the next start
            self._commit(self.reading.due())
            self.collector.collect_due()
            self._between_batches(state)
            if self.stop.caught_up(state, self.reading.position, copying=self.copies.busy):
                self._finish(state)
                return

    def _read(self, durable: RelayPosition) -> bool:
        """Read up to ``durable``, committing each batch completed; False: a stop was
        requested. While the relay log holds more than it has read, the open batch ends by its
        size bounds only (``[applier] max_transactions``, ``max_bytes``): every change read then
        is late already, and a batch costs a commit per table it changes; the loop cuts it by
        time once the reading has reached the durable end (``Reading.due``)."""
        with closing(self.reading.groups(durable)) as groups:
            for group in groups:
                self._commit(self.reading.take(group))
                self.collector.collect_due()
                if self.stop.requested:
                    return False
        self.reading.read_all()
        return True

    def _commit(self, batches: list[Batch]) -> None:
        """Each batch applied to its tables, its cut recorded, its transactions durable in the
        checkpoint counts; the relay files the checkpoint passed purged."""
        for batch in batches:
            reading = self.reading
            started = time.monotonic()
            result = self.writes.batch(reading, batch)
            if result is None:
                return  # stopped while the catalog was failing: the batch is read again
            took = time.monotonic() - started
            reading.batching.builder.pace(took)
            self.progress.on_commit_time(result, took)
            reading.accounting.on_batch_done(batch, result.held, result.copy_held)
            self.progress.on_batch(batch, result)
            self._purge()
            self.progress.report(self.relay.state(), reading.position)

    def _finish(self, state: RelayState) -> None:
        """Caught up: the open batch committed, the cut after it recorded whatever ``[cuts]
        every_s`` says, the status line; the receiver's error raised."""
        self._commit(self.reading.flush())
        self.writes.due_cut(self.reading.batches.copy_holds, now=True)
        self.progress.report(state, self.reading.position, force=True)
        if state.error is not None:
            raise state.error

    # ---- the start, and between batches ------------------------------------------------------

    def _start(self) -> bool:
        """Steps 1-4 of the module docstring; False: the receiver finished (or a stop came)
        before the relay log had a file."""
        state = self.relay.wait_recovered(timeout=3600.0)
        while state.durable is None and not state.finished and not self.stop.requested:
            state = self.relay.wait_past(None, POLL_S)  # the first relay file is being made
        if state.durable is None:
            if state.error is not None:
                raise state.error
            return False
        self.copies.plan(state, self.lake.read_applied().positions)
        self._open(state, first=True)
        self.copies.start()
        return True

    def _open(self, state: RelayState, *, first: bool) -> None:
        """Read the lake's positions and open a reading at the recorded checkpoint (at start,
        and again after a copy is done)."""
        self.lake.forget_all()
        applied = self.lake.read_applied()
        self.writes.continue_after(applied.max_batch)
        if first:
            restart = state.restart.position if state.restart is not None else None
            self.readings.check_restart(restart, applied.positions)
        if self._reading is not None:
            self._reading.close()
        self._reading = self.readings.open(applied, self.copies.held())
        self.writes.cuts.reset()
        self._purge()

    def _between_batches(self, state: RelayState) -> None:
        """Copies done or asked for, the cut and the maintenance round when due, the status."""
        self._copies_step(state)
        self.writes.due_cut(self.reading.batches.copy_holds)
        self.maintenance.step(self.lake.known_tables)
        self.progress.report(state, self.reading.position)

    def _copies_step(self, state: RelayState) -> None:
        """Copies done (their tables then catch up from their copies' positions: the relay log
        is read again from the checkpoint), and tables `binlake snapshot` asked for while this
        runs (their changes are held from now on)."""
        done = self.copies.finished()
        if done:
            self._commit(self.reading.flush())
            self.copies.release(done)
            self._open(state, first=False)
            for copy in done:
                self.progress.on_copied(copy)
        if self.copies.requested():
            self._commit(self.reading.flush())
            self.reading.batches.copy_holds.add(self.copies.held())
            self.copies.start()

    def _purge(self) -> None:
        self.progress.on_purged(self.purge(self.reading.accounting.tracker))

    def release_holds(self, table: TableName) -> None:
        """``table``'s pending DDL is in its schema (``Lake.on_evolved``): the transactions it
        kept counted are durable."""
        if self._reading is not None:
            self._reading.accounting.holds.release(table)


def build_applier(
    config: Config,
    spark: SparkSession,
    relay: RelayProgress,
    target: LakeTarget,
    *,
    console: Console,
    metrics: Metrics,
) -> Applier:
    """The applier of ``binlake replicate`` and its collaborators."""
    stop = StopPolicy()
    address = f"{config.source.host}:{config.source.port}"
    hints = source_hints(
        config, notify=reconnect_notice(console, "apply", address), stop=stop.event
    )
    positions = None
    if config.applier.deletes is DeleteMode.POSITION:
        notice = key_index_notice(console, metrics)
        budget = index_budget(open_file_limit())
        positions = KeyPositions(spark, config.state.keyindex_dir, notice, budget)
    turns = CompactionTurns()  # a table's batches wait while its scheduled round compacts it
    lake = Lake(
        spark,
        target,
        key_columns=config.tables.key_columns,
        hints=hints,
        positions=positions,
        turns=turns,
    )
    copies = StreamingCopies(SnapshotRunner(config, spark, target, console))
    progress = ApplyProgress(console, metrics, config.state.relay_dir, copy_status=copies.status)
    maintenance = ScheduledMaintenance(config, spark, console, stop.event, metrics, turns)
    cuts = CutRecorder(config, spark, target, console, expiry=maintenance.expiry)
    retry = Retry(
        lambda: probe_catalog(spark, target),
        Backoff.from_config(config.receiver),
        config.applier.catalog_give_up_s,
        console,
        stop.event,
        conflicts=config.applier.commit_retries,
        on_conflict=commit_retry_notice(console, metrics, config.applier.commit_retries),
    )
    applier = Applier(
        relay=relay,
        stop=stop,
        lake=lake,
        readings=RelayReadings.of(config, target, lake, console, progress.zero_dates),
        writes=LakeWrites(lake, cuts, retry),
        purge=RelayPurge(config.state.relay_dir, relay.index_lock),
        copies=copies,
        maintenance=maintenance,
        progress=progress,
        positions=positions,
    )
    lake.on_evolved = applier.release_holds
    return applier
