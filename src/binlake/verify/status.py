"""`binlake status`: where the source, the relay log and every lake table stand, and the lag.

Each fact is read from its one source of truth (design invariant 5):

* the source's binlog end: ``SHOW MASTER STATUS`` (file sizes from ``SHOW BINARY LOGS``); an
  unreachable source is reported, never fatal;
* the relay end: the end of the last complete group in the relay log (``RelayFollower``), the
  way the receiver derives its restart point; never a separate file;
* the checkpoint: the recorded relay file (``<state>/relay.checkpoint``);
* each table's applied position: its newest binlake snapshot's ``binlake.position``, read from
  the Iceberg metadata files for the embedded catalog (no Spark: binlake.lake.catalog.metadata),
  from the catalog database for a JDBC catalog on PostgreSQL with a local warehouse (no Spark:
  ``lake/catalog/jdbc.py``), or through Spark for other catalogs (a session only then).

Lag. The applier commits a table only when a batch changes it, so a quiet table's applied
position stays where its last change was. A table counts as applied up to the relay end when no
relay transaction after its applied position touches it (``pending_transactions`` = 0); else up
to its applied position. ``lag_bytes``: bytes of source binlog between that and the source's
end, across files with ``SHOW BINARY LOGS`` sizes (null when the source is unreachable or a
file is no longer listed). ``lag_seconds``: now minus the source timestamp of the oldest relay
transaction not yet in the table (0 when nothing is pending; the receiver's own lag shows as
the relay's ``behind_source_bytes``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from binlake.binlog.names import TableName
from binlake.config import Config
from binlake.errors import BinlakeError, CheckpointRecordError, SourceError
from binlake.lake.catalog.jdbc import JdbcCatalogReader
from binlake.lake.catalog.metadata import RETRIES, LakeLineage, lake_tables
from binlake.lake.catalog.target import LakeTarget
from binlake.lake.catalog.write_path import Write, write_of
from binlake.position import SourcePosition, before, earliest
from binlake.relay.scan import RelayFollower, relay_files
from binlake.source.client import SourceConnection
from binlake.source.reconnect import ReconnectPolicy, retrying
from binlake.source.settings import ConnectionSettings, connection_settings
from binlake.storage.checkpoint import CheckpointRecord

JSON_VERSION = 1
#: Attempts to reach the source before status reports it unreachable.
STATUS_ATTEMPTS = 3


@dataclass(frozen=True)
class SourceStatus:
    address: str
    reachable: bool
    position: SourcePosition | None = None
    binlog_files: tuple[tuple[str, int], ...] = ()
    gtid_position: str | None = None
    error: BinlakeError | None = None


@dataclass(frozen=True)
class RelayStatus:
    dir: Path
    files: int
    bytes: int
    end: SourcePosition | None
    end_timestamp: int | None
    checkpoint: str | None
    checkpoint_error: str | None
    behind_source_bytes: int | None


@dataclass(frozen=True)
class TableStatus:
    lake_table: str
    source_table: TableName | None
    applied_position: SourcePosition | None
    snapshot_id: int | None
    committed_at_ms: int | None
    batch: str | None
    pending_transactions: int | None
    lag_bytes: int | None
    lag_seconds: float | None
    #: Why the applied position is unknown (None when it is known or nothing was applied).
    problem: str | None = None
    #: Commits tried again because another writer committed first, over the binlake snapshots
    #: the table keeps (each carries its own count, ``binlake.retries``).
    commit_retries: int = 0
    #: How the newest rows commit was written (``binlake.lake.catalog.write_path``).
    write: Write | None = None
    #: Delete files and equality-delete rows the current snapshot holds (Iceberg's totals):
    #: reads merge them in until compaction folds them away.
    delete_files: int | None = None
    equality_deletes: int | None = None


@dataclass(frozen=True)
class StatusReport:
    source: SourceStatus
    relay: RelayStatus
    tables: tuple[TableStatus, ...]
    catalog: str
    warehouse: Path
    generated_at: float
    #: Where the catalog keeps the tables, for people (``LakeTarget.location``).
    location: str = ""


def bytes_between(
    a: SourcePosition, b: SourcePosition, files: Sequence[tuple[str, int]]
) -> int | None:
    """Bytes of source binlog from ``a`` to ``b`` (0 when ``a`` is not before ``b``), across
    files with the sizes ``SHOW BINARY LOGS`` gave; None when a file is not listed."""
    if not before(a, b):
        return 0
    if a.file == b.file:
        return b.offset - a.offset
    names = [name for name, _ in files]
    if a.file not in names or b.file not in names:
        return None
    sizes = dict(files)
    first, last = names.index(a.file), names.index(b.file)
    middle = sum(sizes[name] for name in names[first + 1 : last])
    return max(sizes[a.file] - a.offset, 0) + middle + b.offset


def source_status(config: Config) -> SourceStatus:
    """The source's binlog end; an unreachable source (or any source error) is reported. A
    lost or refused connection is tried again with the receiver's backoff, at most
    ``STATUS_ATTEMPTS`` times (fewer when ``reconnect_max_attempts`` says so)."""
    settings = connection_settings(config.source)
    policy = ReconnectPolicy.from_config(config.receiver)
    limit = policy.max_attempts or STATUS_ATTEMPTS
    policy = replace(policy, max_attempts=min(limit, STATUS_ATTEMPTS))
    try:
        return retrying(lambda: _source_status(settings), policy, reset=lambda: None)
    except SourceError as error:
        return SourceStatus(settings.address, False, error=error)


def _source_status(settings: ConnectionSettings) -> SourceStatus:
    with SourceConnection.open(settings) as conn:
        files = conn.server.binlog_files
        position = _master_position(conn)
        if position is None and files:
            position = SourcePosition(files[-1][0], files[-1][1])
        return SourceStatus(settings.address, True, position, files, conn.server.gtid_binlog_pos)


def _master_position(conn: SourceConnection) -> SourcePosition | None:
    try:
        rows = conn.query("SHOW MASTER STATUS")
    except SourceError as error:
        if error.retryable:
            raise  # the connection was lost: asked again on a new one
        return None  # no BINLOG MONITOR / REPLICATION CLIENT: fall back to the file sizes
    if not rows:
        return None
    return SourcePosition(str(rows[0][0]), int(rows[0][1]))


def relay_status(config: Config, follower: RelayFollower, source: SourceStatus) -> RelayStatus:
    relay_dir = config.state.relay_dir
    files = relay_files(relay_dir)
    checkpoint, checkpoint_error = None, None
    try:
        checkpoint = CheckpointRecord(config.state.checkpoint_path).read()
    except CheckpointRecordError as error:
        checkpoint_error = str(error)
    behind = None
    if source.position is not None and follower.end is not None:
        behind = bytes_between(follower.end, source.position, source.binlog_files)
    return RelayStatus(
        dir=relay_dir,
        files=len(files),
        bytes=sum(f.size for f in files),
        end=follower.end,
        end_timestamp=follower.end_timestamp,
        checkpoint=checkpoint,
        checkpoint_error=checkpoint_error,
        behind_source_bytes=behind,
    )


def table_status(
    table: LakeLineage,
    target: LakeTarget,
    follower: RelayFollower,
    source: SourceStatus,
    now: float,
) -> TableStatus:
    snapshot = table.latest_binlake
    applied = snapshot.position if snapshot is not None else None
    src = target.source_table(table.identifier)
    problem = None
    if snapshot is None and table.lineage_cut:
        problem = "snapshot expiry cut the lineage before any binlake snapshot: position unknown"
    pending: list[Any] | None = None
    if src is not None and follower.end is not None and problem is None:
        pending = [t for t in follower.transactions if before(applied, t.end) and t.touches(src)]
    effective = applied
    if pending == [] and follower.end is not None and before(applied, follower.end):
        effective = follower.end
    lag_bytes = None
    if effective is not None and source.position is not None:
        lag_bytes = bytes_between(effective, source.position, source.binlog_files)
    lag_seconds = None
    if pending is not None:
        lag_seconds = max(now - pending[0].timestamp, 0.0) if pending else 0.0
    current = table.lineage[0].summary if table.lineage else {}
    return TableStatus(
        lake_table=".".join((target.catalog, *table.identifier)),
        source_table=src,
        applied_position=applied,
        snapshot_id=snapshot.snapshot_id if snapshot is not None else None,
        committed_at_ms=snapshot.timestamp_ms if snapshot is not None else None,
        batch=snapshot.summary.get("binlake.batch") if snapshot is not None else None,
        pending_transactions=None if pending is None else len(pending),
        lag_bytes=None if problem else lag_bytes,
        lag_seconds=lag_seconds,
        problem=problem,
        commit_retries=commit_retries(table),
        write=next((w for s in table.lineage if (w := write_of(s.summary))), None),
        delete_files=_count(current, "total-delete-files"),
        equality_deletes=_count(current, "total-equality-deletes"),
    )


def commit_retries(table: LakeLineage) -> int:
    """The ``binlake.retries`` of the table's binlake snapshots, added up."""
    total = 0
    for snapshot in table.lineage:
        text = snapshot.summary.get(RETRIES, "0")
        total += int(text) if text.isdigit() else 0
    return total


def _count(summary: Mapping[str, str], key: str) -> int | None:
    try:
        return int(summary[key])
    except (KeyError, ValueError):
        return None


def collect_status(
    config: Config,
    target: LakeTarget,
    spark_tables: Callable[[LakeTarget], list[LakeLineage]] | None = None,
) -> StatusReport:
    """Everything `binlake status` prints."""
    source = source_status(config)
    tables = [
        t for t in catalog_tables(target, spark_tables) if tuple(t.identifier) != target.cuts_table
    ]  # the cuts table is binlake's own, no replicated table
    sources = {target.source_table(t.identifier) for t in tables} - {None}
    applied = [s.position if (s := t.latest_binlake) else None for t in tables]
    known = [p for p in applied if p is not None]
    start = earliest(known) if applied and len(known) == len(applied) else None
    follower = RelayFollower(
        config.state.relay_dir,
        after=start,
        keep=lambda txn: any(txn.touches(name) for name in sources if name is not None),
    )
    follower.refresh()
    now = time.time()
    return StatusReport(
        source=source,
        relay=relay_status(config, follower, source),
        tables=tuple(table_status(t, target, follower, source, now) for t in tables),
        catalog=target.catalog,
        warehouse=target.warehouse,
        generated_at=now,
        location=target.location,
    )


def catalog_tables(
    target: LakeTarget, spark_tables: Callable[[LakeTarget], list[LakeLineage]] | None = None
) -> list[LakeLineage]:
    """Every table of the target's catalog with its lineage: without Spark for the embedded
    catalog and a JDBC catalog on PostgreSQL, else through ``spark_tables``."""
    reader = JdbcCatalogReader.for_target(target)
    if reader is None:
        return lake_tables(target, spark_tables)
    try:
        return reader.tables()
    finally:
        reader.close()


def _text(position: SourcePosition | None) -> str | None:
    return None if position is None else str(position)


def status_json(report: StatusReport) -> dict[str, Any]:
    """The stable JSON object of `binlake status --json` (``version`` 1)."""
    source = report.source
    relay = report.relay
    return {
        "version": JSON_VERSION,
        "generated_at": round(report.generated_at, 3),
        "source": {
            "address": source.address,
            "reachable": source.reachable,
            "position": _text(source.position),
            "gtid_position": source.gtid_position,
            "binlog_files": [{"name": n, "size": s} for n, s in source.binlog_files],
            "error": None if source.error is None else str(source.error),
            "hint": None if source.error is None else source.error.hint,
        },
        "relay": {
            "dir": str(relay.dir),
            "files": relay.files,
            "bytes": relay.bytes,
            "end": _text(relay.end),
            "end_timestamp": relay.end_timestamp,
            "checkpoint": relay.checkpoint,
            "checkpoint_error": relay.checkpoint_error,
            "behind_source_bytes": relay.behind_source_bytes,
        },
        "catalog": report.catalog,
        "warehouse": str(report.warehouse),
        "location": report.location,
        "tables": [_table_json(t) for t in report.tables],
    }


def _table_json(table: TableStatus) -> dict[str, Any]:
    return {
        "table": table.lake_table,
        "source_table": None if table.source_table is None else str(table.source_table),
        "source": None
        if table.source_table is None
        else {"database": table.source_table.database, "table": table.source_table.table},
        "applied_position": _text(table.applied_position),
        "snapshot_id": table.snapshot_id,
        "committed_at_ms": table.committed_at_ms,
        "batch": table.batch,
        "pending_transactions": table.pending_transactions,
        "lag_bytes": table.lag_bytes,
        "lag_seconds": None if table.lag_seconds is None else round(table.lag_seconds, 3),
        "problem": table.problem,
        "commit_retries": table.commit_retries,
        "write": None if table.write is None else table.write.path.value,
        "write_reason": None if table.write is None else table.write.reason,
        "delete_files": table.delete_files,
        "equality_deletes": table.equality_deletes,
    }
