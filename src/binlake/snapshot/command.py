"""``binlake snapshot --tables``: copy tables again, with or without a replicator running.

* A ``binlake replicate`` holds the state folder's lock: the tables are handed to it as a
  request file (``storage.snapshot_plan.write_request``); it copies them between two batches
  while streaming goes on for the others, and this command returns at once.
* Nothing holds the lock: this command takes it, plans the tables, copies them with its own
  Spark session and returns; the next ``binlake replicate`` streams them from the positions
  their copies hold.

Either way the plan makes it crash-safe: a table stays planned until its last chunk is
committed, and any later start finishes it. That is also why this command does not retry a
chunk commit another writer beat (``CommitConflictError``) or a failing catalog: it exits with
the error, and running it again (or the next ``binlake replicate``, whose retry,
``binlake.retry``, covers its copies) resumes from the plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from binlake.binlog.names import TableName
from binlake.config import Config
from binlake.console import Console
from binlake.errors import StateLockedError
from binlake.lake.catalog.target import lake_target
from binlake.lake.spark.session import build_session, spark_settings, stop_session
from binlake.snapshot.copier import TableCopy
from binlake.snapshot.runner import SnapshotRunner, check_tables
from binlake.source.settings import connection_settings
from binlake.storage.lock import lock_state_folder
from binlake.storage.snapshot_plan import write_request
from binlake.verify.source_session import SnapshotSession


@dataclass
class SnapshotOutcome:
    #: The request file handed to a running replicator (None: copied here).
    requested: Path | None = None
    holder: str | None = None
    copies: list[TableCopy] = field(default_factory=list)


def snapshot_tables(
    config: Config, tables: Sequence[TableName], console: Console
) -> SnapshotOutcome:
    target = lake_target(config)
    with SnapshotSession(connection_settings(config.source)) as session:
        check_tables(tables, session.base_tables(), target.selected)
    try:
        lock = lock_state_folder(config.state.dir)
    except StateLockedError as error:
        path = write_request(config.state.snapshot_requests_dir, tables)
        return SnapshotOutcome(requested=path, holder=str(error))
    with lock:
        spark = build_session(spark_settings(target, "binlake-snapshot"))
        try:
            runner = SnapshotRunner(config, spark, target, console)
            runner.plan.add(tables, "requested")
            return SnapshotOutcome(copies=runner.run())
        finally:
            stop_session(spark)
