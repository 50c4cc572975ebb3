"""`binlake verify`: each replicated table in the source equals its Iceberg table at the same
source position (docs/recovery.md, "Verify").

1. Open a consistent snapshot on the source; its binlog position is P (``source_session``).
2. Until ``--timeout``: find, per table, the Iceberg snapshot holding the table as it was at P
   (``plan.decide``: exact at P, or at Q < P with nothing in (Q, P] touching the table per
   the relay log), waiting for the applier while it has not got there.
3. Read the source table in the snapshot and the Iceberg table at that snapshot, normalise every
   value of both through ``canonical`` and compare counts, checksums and keys
   (``compare``).
4. Tables whose state at P no Iceberg snapshot holds (a batch stepped over P) are tried again
   with a new snapshot and a new P, at most ``attempts`` times.

A connection to the source lost during an attempt is opened again with the receiver's backoff
(``[receiver] reconnect_*``, for at most ``--timeout`` seconds of outage), and the attempt runs
again in a new snapshot for the tables it had not finished (it does not count as an attempt).
The first connection is not retried: a source that cannot be reached at all is said at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from binlake.binlog.names import TableName
from binlake.config import Config
from binlake.errors import BinlakeError, SourceError
from binlake.lake.catalog.jdbc import JdbcCatalogReader
from binlake.lake.catalog.metadata import LakeLineage, read_table
from binlake.lake.catalog.target import LakeTarget, lake_target
from binlake.lake.schema.evolution import CHANGELOG_COLUMNS, CHANGELOG_OP
from binlake.lake.spark.errors import spark_errors
from binlake.lake.spark.session import SparkSession, build_session, spark_settings, stop_session
from binlake.lake.spark.types import lake_type_of
from binlake.position import SourcePosition, earliest
from binlake.relay.scan import RelayFollower
from binlake.source.reconnect import ReconnectPolicy
from binlake.source.settings import ConnectionSettings, connection_settings
from binlake.verify.canonical import (
    VerifyColumn,
    key_text,
    lake_expression,
    lake_value,
    mapping_problem,
    quote_sql,
    row_hash,
    source_values,
)
from binlake.verify.compare import Differences, KeyedComparison, MultisetComparison
from binlake.verify.errors import (
    CatchUpTimeoutError,
    TableMissingInLakeError,
    TableNotInSourceError,
    VerifyError,
    VerifyRetriesExhaustedError,
)
from binlake.verify.plan import Decision, Exact, ReadAgain, Unknown, Wait, decide, scan_start
from binlake.verify.source_session import SnapshotSession, SourceTable

#: Change-log operations that add a row image, and those that take one away.
CHANGELOG_ADDS = frozenset({"insert", "update_after"})
CHANGELOG_REMOVES = frozenset({"delete", "update_before"})
#: MariaDB: "Table definition has changed, please retry transaction" (DDL after the snapshot).
ER_TABLE_DEF_CHANGED = 1412
Lineage = Callable[[tuple[str, ...]], LakeLineage | None]
Progress = Callable[[str], None]


@dataclass(frozen=True)
class VerifyOptions:
    #: The tables to verify; None: every replicated table of the source.
    tables: tuple[TableName, ...] | None = None
    max_differences: int = 10
    timeout_s: float = 300.0
    attempts: int = 5
    poll_s: float = 0.5
    #: ``--cut AT``: compare each table at the snapshot of the cut at or before AT
    #: (``binlake.verify.at_cut``); None: at the newest snapshot holding the source position.
    cut: str | None = None


@dataclass
class TableResult:
    table: TableName
    lake_table: str
    #: ok | different | schema | error
    status: str
    position: SourcePosition | None = None
    lake_position: SourcePosition | None = None
    snapshot_id: int | None = None
    keyless: bool = False
    source_rows: int = 0
    lake_rows: int = 0
    source_checksum: str = ""
    lake_checksum: str = ""
    differences: Differences = field(default_factory=Differences)
    schema_problems: tuple[str, ...] = ()
    error: BinlakeError | None = None
    attempts: int = 1
    note: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class VerifyReport:
    results: list[TableResult]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)


class Verifier:
    """One verify run; ``spark`` starts (or returns) the session when a table is compared."""

    def __init__(
        self,
        *,
        spark: Callable[[], SparkSession],
        target: LakeTarget,
        settings: ConnectionSettings,
        relay_dir: Path,
        lineage: Lineage,
        options: VerifyOptions,
        progress: Progress | None = None,
        policy: ReconnectPolicy | None = None,
    ) -> None:
        self.policy = policy
        self.spark = spark
        self.target = target
        self.settings = settings
        self.relay_dir = relay_dir
        self.lineage = lineage
        self.options = options
        self.progress = progress or (lambda _message: None)
        #: Tables with no Iceberg table (as last looked up).
        self._missing: set[TableName] = set()

    def run(self) -> VerifyReport:
        notify = None
        if self.policy is not None:
            address = self.settings.address
            notify = _reconnect_notice(self.progress, address)
        with SnapshotSession(self.settings, self.policy, notify=notify) as session:
            tables = self._tables(session)
            results = self._attempts(session, tables)
        return VerifyReport([results[t] for t in tables])

    # ---- which tables ------------------------------------------------------------------------

    def _tables(self, session: SnapshotSession) -> list[TableName]:
        existing = session.base_tables()
        if self.options.tables is None:
            return [t for t in existing if self.target.selected(t)]
        tables = list(dict.fromkeys(self.options.tables))
        for name in tables:
            if name not in existing:
                raise TableNotInSourceError("is not a table of the source", table=str(name))
        return tables

    # ---- attempts, waiting -------------------------------------------------------------------

    def _attempts(
        self, session: SnapshotSession, tables: list[TableName]
    ) -> dict[TableName, TableResult]:
        deadline = time.monotonic() + self.options.timeout_s
        results: dict[TableName, TableResult] = {}
        reasons: dict[TableName, str] = {}
        pending = list(tables)
        for attempt in range(1, self.options.attempts + 1):
            session.retrying(
                partial(self._in_snapshot, session, attempt, pending, deadline, results, reasons)
            )
            for name in pending:
                if name in results:
                    results[name].attempts = attempt
            pending = [t for t in pending if t not in results]
            if not pending:
                break
        for name in pending:
            error = VerifyRetriesExhaustedError(
                f"after {self.options.attempts} attempts its state at the snapshot position was "
                f"never in an Iceberg snapshot ({reasons.get(name, '?')})",
                table=str(name),
                attempts=self.options.attempts,
            )
            results[name] = self._error(name, error, self.options.attempts)
        return results

    def _in_snapshot(
        self,
        session: SnapshotSession,
        attempt: int,
        pending: list[TableName],
        deadline: float,
        results: dict[TableName, TableResult],
        reasons: dict[TableName, str],
    ) -> None:
        """One attempt in one source snapshot, for the tables it has not finished (run again
        after a lost connection)."""
        position = session.begin()
        try:
            self.progress(f"attempt {attempt}: source snapshot at {position}")
            unfinished = [t for t in pending if t not in results]
            self._attempt(session, unfinished, position, deadline, results, reasons)
        finally:
            session.end()

    def _attempt(
        self,
        session: SnapshotSession,
        pending: list[TableName],
        position: SourcePosition,
        deadline: float,
        results: dict[TableName, TableResult],
        reasons: dict[TableName, str],
    ) -> None:
        """One snapshot at ``position``: decide, wait, compare; tables to retry get a reason."""
        decisions, follower = self._wait(pending, position, deadline)
        for name in pending:
            decision = decisions[name]
            if isinstance(decision, ReadAgain):
                reasons[name] = decision.reason
                self.progress(f"{name}: retrying: {decision.reason}")
                continue
            try:
                results[name] = self._finish(session, name, position, decision, follower)
            except SourceError as error:
                if error.code != ER_TABLE_DEF_CHANGED:
                    raise
                reasons[name] = "its definition changed after the source snapshot (DDL)"
                self.progress(f"{name}: retrying: {reasons[name]}")

    def _wait(
        self, tables: Sequence[TableName], position: SourcePosition, deadline: float
    ) -> tuple[dict[TableName, Decision], RelayFollower]:
        lineages = {name: self._lineage(name) for name in tables}
        follower = RelayFollower(
            self.relay_dir,
            after=_scan_start(lineages.values(), position),
            keep=lambda txn: any(txn.touches(name) for name in tables),
        )
        said: dict[TableName, str] = {}
        while True:
            follower.refresh()
            decisions = {n: decide(lineages[n], n, position, follower) for n in tables}
            waiting = [n for n, d in decisions.items() if isinstance(d, Wait)]
            if not waiting or time.monotonic() >= deadline:
                return decisions, follower
            for name in waiting:
                decision = decisions[name]
                assert isinstance(decision, Wait)
                if said.get(name) != decision.reason:
                    said[name] = decision.reason
                    self.progress(f"{name}: waiting: {decision.reason}")
            time.sleep(self.options.poll_s)
            lineages.update({name: self._lineage(name) for name in waiting})

    def _lineage(self, name: TableName) -> LakeLineage:
        """The table's lineage; a table without an Iceberg table is an empty lineage (the
        applier creates tables at their first rows) and is remembered as missing."""
        identifier = self.target.identifier(name)
        table = self.lineage(identifier)
        if table is None:
            self._missing.add(name)
            return LakeLineage(identifier, ())
        self._missing.discard(name)
        return table

    def _finish(
        self,
        session: SnapshotSession,
        name: TableName,
        position: SourcePosition,
        decision: Decision,
        follower: RelayFollower,
    ) -> TableResult:
        if isinstance(decision, Wait):
            applied = self._lineage(name).latest_binlake
            error = CatchUpTimeoutError(
                f"not at {position} after {self.options.timeout_s:g} s: {decision.reason}",
                table=str(name),
                target=str(position),
                applied=None if applied is None else str(applied.position),
                relay_end=None if follower.end is None else str(follower.end),
            )
            return self._error(name, error, 1)
        if isinstance(decision, Unknown):
            hint = "keep the newest binlake snapshot when expiring snapshots; re-snapshot the table"
            return self._error(name, VerifyError(decision.reason, table=str(name), hint=hint), 1)
        assert isinstance(decision, Exact)
        if name in self._missing:
            return self._without_lake_table(session, name, position)
        self.progress(f"{name}: comparing at {position}")
        return self._compare(session, name, position, decision)

    def _without_lake_table(
        self, session: SnapshotSession, name: TableName, position: SourcePosition
    ) -> TableResult:
        """No Iceberg table and nothing to apply: right only if the source table is empty."""
        lake = self.target.lake_table(name)
        rows = session.count(name)
        if rows == 0:
            note = "no Iceberg table yet, and the source table is empty"
            return TableResult(name, lake, "ok", position=position, keyless=False, note=note)
        error = TableMissingInLakeError(
            f"has no Iceberg table ({lake}) but {rows} rows in the source at {position}",
            table=str(name),
            lake_table=lake,
        )
        return self._error(name, error, 1)

    def _error(self, name: TableName, error: BinlakeError, attempts: int) -> TableResult:
        lake = self.target.lake_table(name)
        return TableResult(name, lake, "error", error=error, attempts=attempts)

    # ---- comparing ---------------------------------------------------------------------------

    def _compare(
        self, session: SnapshotSession, name: TableName, position: SourcePosition, decision: Exact
    ) -> TableResult:
        lake_name = self.target.lake_table(name)
        snapshot = decision.snapshot
        result = TableResult(
            name,
            lake_name,
            "ok",
            position=position,
            lake_position=decision.position,
            snapshot_id=None if snapshot is None else snapshot.snapshot_id,
        )
        source = session.describe(name)
        if source is None:
            raise TableNotInSourceError("disappeared from the source", table=str(name))
        frame = self._lake_frame(lake_name, result.snapshot_id)
        changelog = CHANGELOG_OP in frame.schema.fieldNames()
        columns, problems = _columns(source, frame.schema, changelog)
        if problems:
            result.status, result.schema_problems = "schema", tuple(problems)
            return result
        key = () if changelog else source.key or self.target.key_columns.get(name, ())
        result.keyless = not key
        limit = self.options.max_differences
        if key:
            keyed = KeyedComparison(limit)
            self._feed_keyed(keyed, session, source.name, columns, key, frame)
            result.differences = keyed.finish()
            digests = keyed.source, keyed.lake
        else:
            multiset = MultisetComparison(limit)
            self._feed_multiset(multiset, session, source.name, columns, frame, changelog)
            result.differences = multiset.finish()
            digests = multiset.source, multiset.lake
        result.source_rows, result.lake_rows = digests[0].rows, digests[1].rows
        result.source_checksum, result.lake_checksum = (d.checksum_hex for d in digests)
        if result.differences.total or result.source_checksum != result.lake_checksum:
            result.status = "different"
        return result

    def _lake_frame(self, lake_name: str, snapshot_id: int | None) -> Any:
        """The table at ``snapshot_id`` with that snapshot's schema (``VERSION AS OF``; the
        reader option ``snapshot-id`` would apply today's schema); None: no rows."""
        spark = self.spark()
        statement = f"SELECT * FROM {lake_name} VERSION AS OF {snapshot_id}"
        with spark_errors(statement, lake_name):
            if snapshot_id is None:
                return spark.table(lake_name).limit(0)
            return spark.sql(statement)

    def _feed_keyed(
        self,
        comparison: KeyedComparison,
        session: SnapshotSession,
        table: TableName,
        columns: list[VerifyColumn],
        key: Sequence[str],
        frame: Any,
    ) -> None:
        folded = [c.name.casefold() for c in columns]
        key_index = [folded.index(k.casefold()) for k in key]
        key_columns = [columns[i] for i in key_index]
        for row in session.rows(table, columns):
            values = source_values(columns, row)
            text = key_text(key_columns, [values[i] for i in key_index])
            comparison.add_source(text, row_hash(columns, values))
        for values, _op in _lake_rows(frame, columns, changelog=False):
            text = key_text(key_columns, [values[i] for i in key_index])
            comparison.add_lake(text, row_hash(columns, values))

    def _feed_multiset(
        self,
        comparison: MultisetComparison,
        session: SnapshotSession,
        table: TableName,
        columns: list[VerifyColumn],
        frame: Any,
        changelog: bool,
    ) -> None:
        for row in session.rows(table, columns):
            comparison.add_source(row_hash(columns, source_values(columns, row)))
        for values, op in _lake_rows(frame, columns, changelog=changelog):
            hashed = row_hash(columns, values)
            if op is None or op in CHANGELOG_ADDS:
                comparison.add_lake(hashed)
            elif op in CHANGELOG_REMOVES:
                comparison.remove_lake(hashed)
            else:
                raise VerifyError(f"unknown change-log operation {op!r} in {CHANGELOG_OP}")


def _scan_start(lineages: Iterable[LakeLineage], position: SourcePosition) -> SourcePosition | None:
    starts = [scan_start(table, position) for table in lineages]
    known = [s for s in starts if s is not None]
    if not known or len(known) < len(starts):
        return None
    return earliest(known)


def _columns(
    source: SourceTable, schema: Any, changelog: bool
) -> tuple[list[VerifyColumn], list[str]]:
    """The columns in source order with their lake types, or the reasons they do not match.
    Names match as MariaDB's do (case-insensitively); a change log's own columns are not data."""
    lake_fields = {f.name.casefold(): f for f in schema.fields}
    if changelog:
        for name, _type, _comment in CHANGELOG_COLUMNS:
            lake_fields.pop(name.casefold(), None)
    problems: list[str] = []
    columns: list[VerifyColumn] = []
    for column in source.columns:
        lake_field = lake_fields.pop(column.name.casefold(), None)
        if lake_field is None:
            problems.append(f"column {column.name} is missing in the lake")
            continue
        lake = lake_type_of(lake_field.dataType)
        if lake is None:
            problems.append(f"column {column.name}: lake type {lake_field.dataType.simpleString()}")
            continue
        verify_column = VerifyColumn(column.name, lake[0], lake[1], column.data_type)
        problem = mapping_problem(verify_column)
        if problem is not None:
            problems.append(problem)
        columns.append(verify_column)
    problems += [
        f"column {f.name} is in the lake but not in the source" for f in lake_fields.values()
    ]
    return columns, problems


def _lake_rows(
    frame: Any, columns: Sequence[VerifyColumn], *, changelog: bool
) -> Iterable[tuple[list[Any], str | None]]:
    """(values, change-log operation or None) of every lake row."""
    expressions = [lake_expression(c) for c in columns]
    if changelog:
        expressions.append(quote_sql(CHANGELOG_OP))
    selected = frame.selectExpr(*expressions)
    width = len(columns)
    with spark_errors("read the lake table"):
        for row in selected.toLocalIterator(prefetchPartitions=True):
            values = [lake_value(c, v) for c, v in zip(columns, row[:width], strict=True)]
            yield values, (str(row[width]) if changelog else None)


class LakeReads:
    """What ``verify_config`` reads of the lake: the Spark session (``spark``: the one given,
    else one started at the first call and stopped by ``close``) and the tables' lineages
    (``lineage``: from the embedded warehouse's metadata files, the JDBC catalog's tables, or
    else through Spark)."""

    def __init__(self, target: LakeTarget, given: SparkSession | None = None) -> None:
        self.target = target
        self.given = given
        self.started: SparkSession | None = None
        self.catalog = JdbcCatalogReader.for_target(target)

    def spark(self) -> SparkSession:
        if self.given is not None:
            return self.given
        if self.started is None:
            self.started = build_session(spark_settings(self.target, "binlake-verify"))
        return self.started

    def lineage(self, identifier: tuple[str, ...]) -> LakeLineage | None:
        target = self.target
        if target.embedded:
            return read_table(target.warehouse, identifier, target.catalog)
        if self.catalog is not None:
            return self.catalog.table(identifier)
        from binlake.lake.spark.lineage import spark_table_lineage, target_table_exists

        if not target_table_exists(self.spark(), target, identifier):
            return None
        return spark_table_lineage(self.spark(), target, identifier)

    def lineage_at_cut(self, config: Config, at: str, progress: Progress | None) -> Lineage:
        """``--cut AT``: each table's lineage up to the snapshot the cut names."""
        from binlake.lake.cuts.read import cut_at
        from binlake.verify.at_cut import lineage_at_cut

        cut = cut_at(self.spark(), config, at)
        if progress is not None:
            progress(f"cut {cut.cut_id} at {cut.position}")
        return lineage_at_cut(self.lineage, self.target, cut)

    def close(self) -> None:
        if self.catalog is not None:
            self.catalog.close()
        if self.started is not None:
            stop_session(self.started)


def verify_config(
    config: Config,
    options: VerifyOptions,
    progress: Progress | None = None,
    *,
    target: LakeTarget | None = None,
    spark_session: SparkSession | None = None,
) -> VerifyReport:
    """Verify the tables ``config`` replicates. Spark starts only when a table is read, unless
    a running ``spark_session`` is given (it is then left running)."""
    target = target if target is not None else lake_target(config)
    lake = LakeReads(target, spark_session)
    read: Lineage = lake.lineage
    if options.cut is not None:
        read = lake.lineage_at_cut(config, options.cut, progress)
    verifier = Verifier(
        spark=lake.spark,
        target=target,
        settings=connection_settings(config.source),
        relay_dir=config.state.relay_dir,
        lineage=read,
        options=options,
        progress=progress,
        policy=ReconnectPolicy.from_config(config.receiver, give_up_s=options.timeout_s),
    )
    try:
        return verifier.run()
    finally:
        lake.close()


def _reconnect_notice(progress: Progress, address: str) -> Callable[[SourceError, float], None]:
    def notify(error: SourceError, wait_s: float) -> None:
        progress(f"{error.message}; reconnecting to {address} in {wait_s:.1f}s")

    return notify
