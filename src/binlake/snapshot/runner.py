"""Which tables get snapshot, and when: the plan (``storage.snapshot_plan``) carried out.

* A new state folder (the relay log was empty when the receiver started) with
  ``[snapshot] initial = true``: every included base table on the source that holds no
  position in the lake is planned ("initial"), then copied before streaming applies anything.
* ``binlake snapshot --tables``: planned ("requested") directly when no replicator runs, or by a
  request file a running replicator takes between batches.
* At every start, tables still in the plan are copied (resumed from their last chunk).

A table leaves the plan only after its last chunk is committed (crash point
``snapshot_before_done`` sits between the two).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping

from binlake.binlog.names import TableName
from binlake.config import Config
from binlake.console import Console, reconnect_notice
from binlake.crashpoints import crash_point
from binlake.errors import SnapshotError
from binlake.lake.session import SparkSession
from binlake.lake.tables import Lake
from binlake.position import SourcePosition
from binlake.snapshot.chunks import ChunkReader
from binlake.snapshot.copier import TableCopier, TableCopy
from binlake.source.reconnect import ReconnectPolicy, retrying
from binlake.source.settings import connection_settings
from binlake.source.table_shape import read_collations
from binlake.storage.snapshot_plan import SnapshotPlan, take_requests
from binlake.verify.source_session import SnapshotSession


class SnapshotRunner:
    def __init__(
        self,
        config: Config,
        spark: SparkSession,
        lake: Lake,
        console: Console,
        stop: threading.Event | None = None,
    ) -> None:
        self.config, self.spark, self.lake, self.console = config, spark, lake, console
        self.stop = stop
        self.plan = SnapshotPlan(config.state.snapshot_plan_path)
        self.copies: list[TableCopy] = []

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
                if self.lake.target.selected(t) and t not in positions and t not in planned
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
                connection_settings(source), policy, notify=notify, stop=self.stop
            ),
            policy,
            reset=lambda: None,
            notify=notify,
            stop=self.stop,
        )

    def take_requests(self) -> list[TableName]:
        folder = self.config.state.snapshot_requests_dir
        if not folder.is_dir():
            return []
        return take_requests(folder, self.plan)

    def pending(self) -> bool:
        return bool(self.plan.read())

    def run(self) -> list[TableCopy]:
        """Copy every table in the plan; each leaves the plan once its copy is committed."""
        entries = self.plan.read()
        if not entries:
            return []
        with self._session() as session:
            reader = ChunkReader(session)
            copier = TableCopier(
                self.spark,
                self.lake,
                reader,
                read_collations(session.query),
                chunk_rows=self.config.snapshot.chunk_rows,
                console=self.console,
            )
            for entry in sorted(entries.values(), key=lambda e: e.table):
                self.console.message("snapshot", f"copying {entry.table} ({entry.reason})")
                copy = copier.copy(entry)
                self.copies.append(copy)
                crash_point("snapshot_before_done")
                self.plan.done(entry)
        return self.copies


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
