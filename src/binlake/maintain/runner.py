"""``binlake maintain``: read each selected table's health, plan its steps
(``binlake.maintain.plan``), run them (or, ``dry_run``, only report them).

Safe beside a running ``binlake replicate``:

* no step changes a row, and each is one Iceberg commit (orphan removal: file deletions only),
  so the applied position never moves and nothing is applied twice; a compaction keeps the
  sequence number it started from, so a row delta's equality deletes committed meanwhile still
  delete the rows they replaced in the rewritten files (position deletes of a replaced file fail
  the compaction: inside ``replicate`` the table's batches wait for it, ``turns``);
* the applied position's snapshot is kept by binlake's tags through any expiry
  (``binlake.lake.write.applied_tag``), and so is every snapshot a retained consistent cut names
  (tagged ``binlake-cut-<id>`` just before the table's expiry, in one commit of its own:
  ``binlake.lake.cuts.table``; every expiry, a retry's too, tags again first);
* files a running replicate stored and has not committed yet are younger than
  ``orphan_min_age_s`` (at least a day): orphan removal never takes them;
* a commit another writer beat (``CommitConflictError``) or a failing catalog is retried by
  the applier's own policy (``binlake.retry``: ``[applier] commit_retries``, the ``[receiver]
  reconnect_*`` backoff); each try plans again from the table's current metadata.

Iceberg never fsyncs a local warehouse: after each step the files it wrote (data files,
manifests, metadata) are fsynced (``binlake.storage.warehouse_sync``, as the applier does before
its checkpoint moves), then the step passes its crash point (``maintain_after_<step>``); the
expiry's tag commit has its own, before the expiry starts (``maintain_after_protect``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from binlake.binlog.names import TableName
from binlake.config import Config, MaintenanceConfig
from binlake.console import Console
from binlake.crashpoints import crash_point
from binlake.cuts import protected_snapshots
from binlake.lake.catalog.metadata import lake_tables
from binlake.lake.catalog.target import LakeTarget, lake_target
from binlake.lake.cuts.table import CutsTable, protect
from binlake.lake.spark.errors import spark_errors
from binlake.lake.spark.lineage import spark_lake_tables
from binlake.lake.spark.session import SparkSession
from binlake.lake.spark.target_check import probe_catalog
from binlake.lake.tables.maintenance import (
    SMALL_ONLY,
    FoldPolicy,
    TableHealth,
    compact,
    expire_snapshots,
    merge_position_deletes,
    remove_dangling_deletes,
    remove_orphan_files,
    rewrite_manifests,
    table_health,
)
from binlake.lake.tables.turns import CompactionTurns
from binlake.maintain.plan import Planned, Step, plan_table
from binlake.retry import Retry
from binlake.source.policy import Backoff
from binlake.storage.expiry_lock import ExpiryLock
from binlake.storage.warehouse_sync import WarehouseSync, warehouse_sync_for


@dataclass
class StepRun:
    planned: Planned
    #: Iceberg's counts (files rewritten, snapshots expired...); empty in a dry run.
    counts: dict[str, int]
    seconds: float


@dataclass
class TableReport:
    table: TableName
    lake_table: str
    health: TableHealth
    planned: list[Planned]
    runs: list[StepRun] = field(default_factory=list)


class Maintainer:
    def __init__(
        self,
        config: Config,
        spark: SparkSession,
        console: Console,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        stop: threading.Event | None = None,
        expiry: ExpiryLock | None = None,
        turns: CompactionTurns | None = None,
    ) -> None:
        self.config = config
        #: Held from the expiry's cut tags to its end; the applier's cut recording yields to
        #: it (``binlake.apply.cuts.CutRecorder.expiry``), in this process or, through the
        #: state folder, in another on this host (``binlake.storage.expiry_lock``).
        self.expiry = expiry
        #: A compaction's turn on its table: the batches of this process's ``replicate`` wait
        #: for it (``binlake.lake.tables.turns``); None: ``binlake maintain``, no batches here.
        self.turns = turns
        self.spark = spark
        self.console = console
        self.clock = clock
        self.target: LakeTarget = lake_target(config)
        #: Set to abandon a retry's wait (``binlake replicate`` stopping).
        self.stop = stop if stop is not None else threading.Event()
        self._retry = Retry(
            lambda: probe_catalog(spark, self.target),
            Backoff.from_config(config.receiver),
            config.applier.catalog_give_up_s,
            console,
            self.stop,
            conflicts=config.applier.commit_retries,
        )

    def tables(self, only: Sequence[TableName] | None = None) -> list[TableName]:
        """The replicated tables the lake holds (those ``[tables]`` selects; ``only``: of
        those, these)."""
        found = lake_tables(self.target, lambda t: spark_lake_tables(self.spark, t))
        sources = {self.target.source_table(t.identifier) for t in found}
        selected = sorted(s for s in sources if s is not None and self.target.selected(s))
        if only is None:
            return selected
        return [t for t in selected if t in set(only)]

    def run(self, tables: Sequence[TableName], *, dry_run: bool = False) -> list[TableReport]:
        return [self.maintain(table, dry_run=dry_run) for table in tables]

    def maintain(
        self, table: TableName, *, dry_run: bool = False, orphans_due: bool = True
    ) -> TableReport:
        """``orphans_due``: whether the plan includes the orphan listing
        (``binlake.maintain.plan``); only the scheduled rounds leave it out."""
        name = self.target.lake_table(table)
        config = self.config.maintenance
        health = table_health(self.spark, name, config.small_file_bytes, config.delete_ratio)
        steps = plan_table(health, config, self.clock(), orphans_due=orphans_due)
        report = TableReport(table, name, health, steps)
        for planned in steps:
            started = time.monotonic()
            counts = {} if dry_run else self._step(table, planned)
            report.runs.append(StepRun(planned, counts, time.monotonic() - started))
        return report

    def _step(self, table: TableName, planned: Planned) -> dict[str, int]:
        """Run ``planned``'s step on ``table``, then make its files durable and pass its crash
        point."""
        identifier = self.target.identifier(table)
        catalog = self.target.catalog
        config = self.config.maintenance
        sync = warehouse_sync_for(self.target, unsynced_since=time.time_ns())
        step = planned.step

        def work() -> dict[str, int]:
            now = self.clock()
            if step in (Step.COMPACT, Step.PURGE):
                return compact(self.spark, catalog, identifier, fold_policy(planned, config))
            if step is Step.PRUNE:
                return remove_dangling_deletes(self.spark, self.target.lake_table(table))
            if step is Step.DELETES:
                return merge_position_deletes(self.spark, catalog, identifier)
            if step is Step.MANIFESTS:
                return rewrite_manifests(self.spark, catalog, identifier)
            if step is Step.EXPIRE:
                self._protect_cut_snapshots(table, sync)
                older = now - timedelta(seconds=config.snapshot_max_age_s)
                return expire_snapshots(
                    self.spark, catalog, identifier, older, config.keep_snapshots
                )
            older = now - timedelta(seconds=config.orphan_min_age_s)
            return remove_orphan_files(self.spark, catalog, identifier, older)

        with sync.committing(), self._holding(table, step):
            counts = self._retry.run(work, self._refresh(table))
        sync.sync()  # Iceberg never fsyncs: the step's files are durable before the next one
        crash_point(f"maintain_after_{step.value}")
        return counts or {}

    @contextmanager
    def _holding(self, table: TableName, step: Step) -> Iterator[None]:
        """``expiry`` held around the expiry step (its tags, then the expiry itself); the
        table's turn (``turns``) around a compaction or a purge, its retries included."""
        if step is Step.EXPIRE and self.expiry is not None:
            with self.expiry:
                yield
        elif step in (Step.COMPACT, Step.PURGE) and self.turns is not None:
            with self.turns.compacting(table):
                yield
        else:
            yield

    def _protect_cut_snapshots(self, table: TableName, sync: WarehouseSync) -> None:
        """Tag the table's snapshots that retained consistent cuts name (``binlake-cut-<id>``,
        other cut tags removed; one commit), durably: the expiry that follows keeps them
        (docs/recovery.md, "Snapshot expiry"). Killed after it, the expiry has not started; the
        next run tags again (the cuts recorded or pruned since) before it expires."""
        cuts = CutsTable(self.spark, self.target, self.config.cuts.identifier).read()  # all origins
        identifier = self.target.identifier(table)
        protect(self.spark, self.target.lake_table(table), protected_snapshots(cuts, identifier))
        sync.sync()  # inside the step's committing() window: the expiry's files are synced after
        crash_point("maintain_after_protect")

    def _refresh(self, table: TableName) -> Callable[[], None]:
        """Before a retry: forget what Spark cached of the table (another writer committed)."""
        name = self.target.lake_table(table)

        def refresh() -> None:
            with spark_errors(f"REFRESH TABLE {name}", name):
                self.spark.sql(f"REFRESH TABLE {name}")

        return refresh


def fold_policy(planned: Planned, config: MaintenanceConfig) -> FoldPolicy | None:
    """The files a compaction or a purge rewrites: None (a ``whole`` compaction), every small
    and mostly deleted file, the small ones only (``small_only``: ``SMALL_ONLY``), or (a purge)
    at most ``files`` mostly deleted files, none for its size."""
    if planned.whole:
        return None
    if planned.step is Step.PURGE:
        return FoldPolicy(0, config.delete_ratio, max_files=planned.files)
    ratio = SMALL_ONLY if planned.small_only else config.delete_ratio
    return FoldPolicy(config.small_file_bytes, ratio)
