"""The applier's cut recorder: after a batch's tables are committed, a consistent cut
(``binlake.cuts``) in the cuts table (``binlake.lake.cuts.table``), at most every
``[cuts] every_s`` (the last batch of a quiet spell is recorded once the interval has passed).

Why a cut is exact. The applier applies transactions in source order, batch after batch; once
batch B (ending at position P) is applied, every table holds every change of its own up to P
(committed by B or an earlier batch, or found there already). A table also holds nothing after
P when its newest binlake snapshot's position is at or before P: then that snapshot is the
table at P (no change of the table lies between its position and P: it would have been
committed, moving the position). So the cut at P names, per table, its newest binlake snapshot,
read from the table's lineage after B; it is recorded only when *every* table's position is at
or before P. After a restart that is not so until the batches replayed pass the furthest table
(a crash may have left a later batch in some tables): no cut is recorded until then. Tables
whose changes are held for a copy, and tables whose copy runs or has not caught up
(``lineage_state``), are listed as pending, without a snapshot. Cuts only move forward: a
batch replayed at or before the newest cut records nothing.

Cost: one small commit per cut; the lineages are read again only for the tables committed since
the last cut (all of them after a DDL batch, a copy's end, a retry). Crash points
``cut_before_record`` and ``cut_after_record``: the cut commit is atomic, so a crash leaves the
cut recorded or not, and the cuts before it stand.

Retention: once ``PRUNE_AFTER`` cuts are beyond what ``[cuts]`` keeps, the cuts table is
rewritten with the kept ones (``CutsTable.keep_only``; crash point ``cut_after_prune``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from binlake.apply.holds import CopyHolds
from binlake.binlog.names import TableName
from binlake.config import Config
from binlake.console import Console
from binlake.crashpoints import crash_point
from binlake.cuts import COPYING, Cut, TableAt, origin_of, retained
from binlake.lake.catalog.metadata import LakeLineage, lake_tables, read_table
from binlake.lake.catalog.target import LakeTarget
from binlake.lake.cuts.table import CutsTable, TableState, lineage_state
from binlake.lake.spark.lineage import spark_lake_tables, spark_table_lineage
from binlake.lake.spark.session import SparkSession
from binlake.position import SourcePosition, at_or_before, latest
from binlake.storage.expiry_lock import ExpiryLock

#: Cuts beyond retention before the cuts table is rewritten.
PRUNE_AFTER = 20


@dataclass(frozen=True)
class BatchEnd:
    """Where a batch applied ends: what a cut after it records."""

    batch: int
    position: SourcePosition
    gtid: str
    source_time: int


class CutRecorder:
    def __init__(
        self,
        config: Config,
        spark: SparkSession,
        target: LakeTarget,
        console: Console,
        *,
        clock: Callable[[], float] = time.monotonic,
        expiry: ExpiryLock | None = None,
    ) -> None:
        self.settings = config.cuts
        #: Held by a maintenance expiry from its cut tags to its end (a scheduled round beside
        #: the batches, ``maintain/schedule.py``, or ``binlake maintain`` on this host): a cut
        #: recorded in between would name a snapshot that expiry neither tagged nor must keep,
        #: so recording waits for the next try (at the run's end, for the expiry to end).
        self.expiry = expiry
        self.spark = spark
        self.target = target
        self.console = console
        self.clock = clock
        self.store = CutsTable(spark, target, config.cuts.identifier)
        self.origin = origin_of(config)
        #: Cuts of other replications in the same cuts table (kept by the pruning).
        self._others: set[int] = set()
        self._states: dict[TableName, tuple[tuple[str, str], TableState]] = {}
        #: Tables to read again before the next cut (None: every table, listed again).
        self._dirty: set[TableName] | None = None
        self._cuts: list[Cut] | None = None
        self._next_id = 1
        self._unrecorded: BatchEnd | None = None
        self._recorded_at: float | None = None
        #: The furthest table position the last try found past its batch (a replay after a
        #: restart): no cut can be recorded, nor any table read for one, before it.
        self._replaying_until: SourcePosition | None = None
        #: Cuts recorded by this run.
        self.recorded = 0

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def reset(self) -> None:
        """Read every table again before the next cut (the applier started reading again)."""
        self._dirty = None
        self._replaying_until = None

    def after_batch(
        self, end: BatchEnd, committed: Iterable[TableName], *, ddl: bool, holds: CopyHolds
    ) -> None:
        """A batch is applied: note the tables it changed; record a cut if one is due."""
        if not self.enabled:
            return
        if ddl:
            self._dirty = None
        elif self._dirty is not None:
            self._dirty.update(committed)
        self._unrecorded = end
        self.step(holds)

    def step(self, holds: CopyHolds, *, now: bool = False) -> None:
        """Record the cut after the last batch applied, when the interval has passed (``now``:
        whatever the interval: the run ends caught up). A batch that cannot have its cut (a
        table past it after a restart) leaves the interval running: the next batch tries."""
        end = self._unrecorded
        if end is None or not self.enabled:
            return
        clock = self.clock()
        due = self._recorded_at is None or clock - self._recorded_at >= self.settings.every_s
        if not (due or now) or self._replaying(end):
            return
        if self.expiry is not None and not self.expiry.acquire(blocking=now):
            return  # a scheduled expiry runs: the next try records the cut
        try:
            self._record(end, holds, clock)
        finally:
            if self.expiry is not None:
                self.expiry.release()

    def _record(self, end: BatchEnd, holds: CopyHolds, clock: float) -> None:
        try:
            cut = self._cut(end, holds)
            if cut is not None:
                crash_point("cut_before_record")
                self.store.append(cut)
                crash_point("cut_after_record")
        except BaseException:
            self._dirty = None  # read every table again at the next try
            raise
        self._unrecorded = None
        if cut is None:
            return
        self._recorded_at = clock
        self.recorded += 1
        assert self._cuts is not None
        self._cuts.append(cut)
        self._prune()

    def _replaying(self, end: BatchEnd) -> bool:
        """A table was found past an earlier batch's end and this one does not reach it yet:
        its cut would be refused (each table is read only once the replay has passed them
        all; a restart re-reads every DDL batch of its relay file, each marking every table to
        be read again)."""
        until = self._replaying_until
        return until is not None and not at_or_before(until, end.position)

    def _cut(self, end: BatchEnd, holds: CopyHolds) -> Cut | None:
        """The cut after ``end``, or None when a table is past it (replay after a restart) or
        the newest cut is not before it."""
        cuts = self._known_cuts()
        if cuts and at_or_before(end.position, cuts[-1].position):
            return None
        tables: dict[str, TableAt] = {}
        pending: dict[str, str] = {}
        for source, (identifier, state) in sorted(self._refreshed().items()):
            name = f"{source.database}.{source.table}"
            if holds.holds(source):
                pending[name] = COPYING
            elif state.pending is not None or state.snapshot is None:
                pending[name] = state.pending or "no snapshot"
            elif not at_or_before(state.position, end.position):
                self._replaying_until = latest(
                    s.position for _, s in self._states.values() if s.position is not None
                )
                return None
            else:
                tables[name] = TableAt(identifier, state.snapshot)
        for held in holds.tables:  # a first copy's table may have no Iceberg table yet
            pending.setdefault(f"{held.database}.{held.table}", COPYING)
        cut_id, self._next_id = self._next_id, self._next_id + 1
        return Cut(
            cut_id,
            end.position,
            end.gtid,
            end.source_time,
            int(time.time() * 1000),
            end.batch,
            tables,
            pending,
            self.origin,
        )

    def _known_cuts(self) -> list[Cut]:
        if self._cuts is None:
            every = self.store.read()
            self._others = {c.cut_id for c in every if c.origin != self.origin}
            self._cuts = [c for c in every if c.origin == self.origin]
            self._next_id = max((c.cut_id for c in every), default=0) + 1
        return self._cuts

    def _refreshed(self) -> dict[TableName, tuple[tuple[str, str], TableState]]:
        dirty, self._dirty = self._dirty, set()
        if dirty is None:
            self._states = {}
            for every in lake_tables(self.target, lambda t: spark_lake_tables(self.spark, t)):
                self._note(every)
            return self._states
        for source in dirty:
            self._states.pop(source, None)
            found = self._lineage(self.target.identifier(source))
            if found is not None:
                self._note(found)
        return self._states

    def _note(self, lineage: LakeLineage) -> None:
        source = self.target.source_table(lineage.identifier)
        if source is None or not self.target.selected(source) or len(lineage.identifier) != 2:
            return
        identifier = (lineage.identifier[0], lineage.identifier[1])
        self._states[source] = (identifier, lineage_state(lineage))

    def _lineage(self, identifier: tuple[str, ...]) -> LakeLineage | None:
        if self.target.embedded:
            return read_table(self.target.warehouse, identifier, self.target.catalog)
        return spark_table_lineage(self.spark, self.target, identifier)

    def _prune(self) -> None:
        cuts = self._known_cuts()
        s = self.settings
        keep = retained(
            cuts,
            now_s=time.time(),
            keep_last=s.keep_last,
            keep_every_s=s.keep_every_s,
            keep_for_s=s.keep_for_s,
        )
        if len(cuts) - len(keep) < min(PRUNE_AFTER, max(1, s.keep_last // 5)):
            return
        self.store.keep_only(keep | self._others, cuts[-1])
        crash_point("cut_after_prune")
        self._cuts = [c for c in cuts if c.cut_id in keep]
