"""``binlake check-target``: can binlake write its lake as configured? Each check says what it
found, or the typed error for what is wrong (its hint is the fix). ``binlake replicate`` runs
the same checks when it starts (``require_target``), so a wrong target stops it at once with
the fix instead of after the receiver fetched the source's binlog.

The checks, in order (a failed one ends the list: the next needs it):

1. ``master``: a ``spark://`` master accepts TCP connections (milliseconds, no JVM);
2. ``session``: Spark starts, the Iceberg runtime loads, on a cluster an executor registers
   (``[spark] executor_wait_s``): ``binlake.lake.spark.session.build_session``;
3. ``catalog``: the catalog answers (``SHOW NAMESPACES``: a JDBC catalog connects only then, so
   a wrong password or a stopped database shows here);
4. ``namespace``: every namespace binlake will write (``[target] namespace_map`` and the
   databases ``[tables] include`` names) exists or can be created, and a probe table can be
   created there, written and dropped (the catalog's database and the warehouse both take
   writes). A namespace binlake created only for the probe is dropped again;
5. ``warehouse``: a warehouse on a local folder has at least ``MIN_FREE_BYTES`` free (object
   stores report no free space: not checked).
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from binlake.errors import BinlakeError, CatalogError, DiskFullError, TargetError
from binlake.lake.catalog.target import SYSTEM_DATABASES, LakeTarget, redact_url
from binlake.lake.schema.sql import quote
from binlake.lake.spark.cluster import check_master_address
from binlake.lake.spark.errors import spark_errors
from binlake.lake.spark.session import SparkSession, build_session, spark_settings, stop_session
from binlake.storage.warehouse_sync import local_folder

__all__ = [
    "MIN_FREE_BYTES",
    "TargetCheck",
    "TargetReport",
    "check_target",
    "probe_catalog",
    "require_target",
    "target_namespaces",
    "warehouse_folder",
]

#: Below this much free space on a local warehouse's disk, the target is not ready.
MIN_FREE_BYTES = 256 * 1024 * 1024
#: The namespace probed when the config names none (``include = ["*.*"]``).
PROBE_NAMESPACE = "binlake_check"
PROBE_TABLE_PREFIX = "_binlake_check_"
APP_NAME = "binlake-check-target"


@dataclass(frozen=True)
class TargetCheck:
    """One check: what it found (``ok``), or the error saying what is wrong and the fix."""

    name: str
    detail: str
    seconds: float
    error: BinlakeError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class TargetReport:
    checks: list[TargetCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def problems(self) -> list[TargetCheck]:
        return [c for c in self.checks if not c.ok]


def target_namespaces(target: LakeTarget) -> list[str]:
    """The namespaces binlake will write that the config names: ``namespace_map``'s, and those
    of the databases in ``include`` globs without wildcards in the database part."""
    names = set(target.namespace_map.values())
    for glob in target.include:
        database = glob.database
        wildcard = any(c in database for c in "*?[]")
        if database and not wildcard and database.lower() not in SYSTEM_DATABASES:
            names.add(target.namespace(database))
    return sorted(names)


def warehouse_folder(target: LakeTarget) -> Path | None:
    """The local folder the target's tables are written to, when it is one."""
    if target.embedded:
        return target.warehouse
    location = target.spark_conf.get(f"spark.sql.catalog.{target.catalog}.warehouse")
    return None if location is None else local_folder(location)


class _Checks:
    """Runs the checks in order, each timed, stopping at the first failure."""

    def __init__(self) -> None:
        self.report = TargetReport()

    def run(self, name: str, check: Callable[[], str]) -> bool:
        started = time.monotonic()
        try:
            detail = check()
        except BinlakeError as error:
            self.report.checks.append(
                TargetCheck(name, str(error), time.monotonic() - started, error)
            )
            return False
        self.report.checks.append(TargetCheck(name, detail, time.monotonic() - started))
        return True


def check_target(
    target: LakeTarget,
    *,
    spark: SparkSession | None = None,
    probe_namespaces: bool = True,
    write_rows: bool = True,
) -> TargetReport:
    """Every check against ``target``; a session is started for it unless ``spark`` is given
    (checks 1 and 2 are then what starting it already proved). ``write_rows``: the probe
    table gets a row (a job on the executors, which write to the warehouse) before it is
    dropped."""
    checks = _Checks()
    sessions: list[SparkSession] = [] if spark is None else [spark]
    own = spark is None

    def start() -> str:
        sessions.append(build_session(spark_settings(target, APP_NAME)))
        return _session_detail(sessions[0])

    try:
        if own and not (
            checks.run("master", lambda: _master(target)) and checks.run("session", start)
        ):
            return checks.report
        session = sessions[0]
        if not checks.run("catalog", lambda: probe_catalog(session, target)):
            return checks.report
        if probe_namespaces:
            for namespace in target_namespaces(target) or [PROBE_NAMESPACE]:
                probe = partial(_probe, session, target, namespace, write_rows)
                checks.run(f"namespace {namespace}", probe)
        checks.run("warehouse", lambda: _warehouse(target))
        return checks.report
    finally:
        if own and sessions:
            stop_session(sessions[0])


def require_target(spark: SparkSession, target: LakeTarget) -> None:
    """The checks ``binlake replicate`` runs on its session at start: the first problem is
    raised (its hint is the fix). The namespace probe writes no row (its first batch will),
    and the embedded catalog's namespaces are folders the warehouse check covers."""
    report = check_target(
        target, spark=spark, probe_namespaces=not target.embedded, write_rows=False
    )
    for problem in report.problems:
        assert problem.error is not None
        raise problem.error


def _master(target: LakeTarget) -> str:
    check_master_address(target.master)
    if target.master.startswith("spark:"):
        return f"{target.master} accepts connections"
    return f"{target.master}: nothing to check before Spark starts"


def _session_detail(spark: SparkSession) -> str:
    context = spark.sparkContext
    executors = int(context._jsc.sc().getExecutorIds().size())
    where = f", {executors} executor(s)" if executors else ""
    return f"Spark {spark.version} on {context.master}{where}; Iceberg runtime loaded"


def probe_catalog(spark: SparkSession, target: LakeTarget) -> str:
    """One round trip to the catalog (``SHOW NAMESPACES``): what it answered, or its typed
    error."""
    statement = f"SHOW NAMESPACES IN {quote(target.catalog)}"
    folder = warehouse_folder(target)
    if folder is not None:  # a Hadoop catalog lists a warehouse folder that must exist
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise TargetError(
                f"the warehouse folder {folder} cannot be created: {error.strerror}",
                check="warehouse",
                file=str(folder),
                hint="create it, or give binlake's user the right to write its parent",
            ) from None
    try:
        with spark_errors(statement):
            count = len(spark.sql(statement).collect())
    except CatalogError as error:
        # The statement names this catalog: the error is its (Spark's own guess, the one
        # catalog with a uri in the session's start-up conf, may be another one, e.g. the
        # embedded catalog's SQLite file).
        error.catalog = target.catalog
        uri = target.spark_conf.get(f"spark.sql.catalog.{target.catalog}.uri")
        error.uri = None if uri is None else redact_url(uri)
        raise
    return f"catalog {target.catalog} answers ({count} namespace(s)) at {target.location}"


def _probe(spark: SparkSession, target: LakeTarget, namespace: str, write_rows: bool) -> str:
    """Create ``namespace`` if needed, then a probe table in it: created, one row written
    (``write_rows``), dropped (with its files)."""
    catalog = quote(target.catalog)
    space = f"{catalog}.{quote(namespace)}"
    table = f"{space}.{quote(PROBE_TABLE_PREFIX + uuid.uuid4().hex[:12])}"
    with _written(spark, f"namespace {namespace}") as step:
        existed = _namespace_exists(spark, target, namespace)
        step(f"CREATE NAMESPACE IF NOT EXISTS {space}")
        try:
            step(f"CREATE TABLE {table} (id bigint) USING iceberg")
            try:
                if write_rows:
                    step(f"INSERT INTO {table} VALUES (1)")
            finally:
                step(f"DROP TABLE IF EXISTS {table} PURGE")
        finally:
            if not existed:
                step(f"DROP NAMESPACE IF EXISTS {space}")
    state = "exists" if existed else "can be created"
    done = "created, written and dropped" if write_rows else "created and dropped"
    return f"namespace {namespace} {state}; a table was {done} there"


@contextmanager
def _written(spark: SparkSession, what: str) -> Iterator[Callable[[str], None]]:
    """Statements run by ``step``; a failure that is not the catalog's being unreachable or
    refusing the login, nor a full disk, is a ``TargetError`` (no right to write there)."""

    def step(statement: str) -> None:
        with spark_errors(statement):
            spark.sql(statement)

    try:
        yield step
    except (CatalogError, DiskFullError):
        raise
    except BinlakeError as error:
        raise TargetError(
            f"{what} cannot be written: {error}",
            check="namespace",
            hint="grant binlake's catalog user the right to create namespaces and tables "
            "there (or create the namespace yourself), and its Spark user write access to "
            "the warehouse",
        ) from None


def _namespace_exists(spark: SparkSession, target: LakeTarget, namespace: str) -> bool:
    statement = f"SHOW NAMESPACES IN {quote(target.catalog)}"
    with spark_errors(statement):
        rows = spark.sql(statement).collect()
    return namespace in {str(row[0]) for row in rows}


def _warehouse(target: LakeTarget) -> str:
    folder = warehouse_folder(target)
    if folder is None:
        return f"{target.location}: not a local folder, free space not checked"
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    if free < MIN_FREE_BYTES:
        raise DiskFullError(
            f"the warehouse's disk has {free // (1024 * 1024)} MiB free, less than "
            f"{MIN_FREE_BYTES // (1024 * 1024)} MiB",
            file=str(folder),
            hint="free space on the warehouse's disk, or move [target] warehouse / [catalog] "
            "warehouse to a disk with room",
        )
    return f"{folder}: {free / 1024**3:.1f} GiB free"
