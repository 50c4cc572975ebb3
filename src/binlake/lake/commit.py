"""Commits that carry binlake's position: the primitive the exactly-once design rests on.

Each applier commit writes the source position of its batch into the Iceberg snapshot it creates
(``binlake.position``, ``binlake.gtid``, ``binlake.relay``, ``binlake.batch``), so the data and
the position become durable in one atomic commit with zero extra fsyncs (seed 004, WL#5125).
On restart ``latest_binlake_summary`` reads them back from the table itself.

* SQL statements (MERGE INTO, INSERT, DELETE, UPDATE, ALTER) run inside Iceberg's
  ``org.apache.iceberg.spark.CommitMetadata.withCommitProperties(map, callable, exceptionClass)``.
  The callable is a Python object (a ``java.util.concurrent.Callable`` through Py4J) that runs
  the statement. The properties live in a Java thread-local, so the statement must run on the
  very Java thread that set them: pyspark's pinned threads give that, and the callable checks it
  (``CommitMetadata.commitProperties()`` must show the properties) before running anything.
* DataFrame writes take ``.option("snapshot-property.KEY", value)``.

A statement that fails commits nothing of its own: Iceberg commits only after every task
succeeded (the tests check this with a MERGE that fails mid-write). Whether an error came before
or after the commit is never guessed: the table's newest binlake summary says what it holds.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from py4j.java_gateway import JavaGateway
from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import DataFrame, SparkSession

from binlake.errors import SparkSetupError, SparkStatementError
from binlake.lake.applied_tag import load_table, tag_follows
from binlake.lake.iceberg_meta import tagged_tail
from binlake.lake.spark_errors import spark_errors

PREFIX = "binlake."
POSITION = "binlake.position"
GTID = "binlake.gtid"
RELAY = "binlake.relay"
BATCH = "binlake.batch"
BINLAKE_KEYS = (POSITION, GTID, RELAY, BATCH)
COMMIT_METADATA = "org.apache.iceberg.spark.CommitMetadata"

_lock = threading.Lock()
#: Gateways whose callback server binlake started (closed by ``close_callbacks``).
_started: weakref.WeakSet[JavaGateway] = weakref.WeakSet()


def checked_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """``properties`` as a plain dict, refusing keys outside ``binlake.`` and non-text values."""
    out = {}
    for key, value in properties.items():
        if not key.startswith(PREFIX) or len(key) == len(PREFIX):
            raise ValueError(f"snapshot property {key!r} is not a binlake.* key")
        if not isinstance(value, str):
            raise TypeError(f"snapshot property {key} must be text, not {type(value).__name__}")
        out[key] = value
    if not out:
        raise ValueError("a binlake commit needs at least one binlake.* property")
    return out


# ---- the Py4J callback server -----------------------------------------------------------------


def _gateway(spark: SparkSession) -> JavaGateway:
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    return gateway


def ensure_callbacks(spark: SparkSession) -> None:
    """Start the Py4J callback server for this session's gateway, once."""
    gateway = _gateway(spark)
    with _lock:
        server = gateway.get_callback_server()
        if server is not None and getattr(server, "is_shutdown", False):
            gateway._callback_server = None  # stopped with an earlier session: start anew
        if gateway not in _started or gateway.get_callback_server() is None:
            ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
            _started.add(gateway)


def close_callbacks(spark: SparkSession) -> None:
    """Shut down the callback server ``ensure_callbacks`` started (no-op otherwise)."""
    gateway = spark.sparkContext._gateway
    if gateway is None:
        return
    with _lock:
        if gateway in _started:
            _started.discard(gateway)
            server = gateway.get_callback_server()
            if server is not None:
                _unblock_connections(server)
            gateway.shutdown_callback_server()
            gateway._callback_server = None


def _unblock_connections(server: Any) -> None:
    """Shut down the sockets of the server's live connections first: py4j 0.10.9.9 closes a
    connection's stream while its reader thread is blocked reading it, which never returns."""
    for connection in list(getattr(server, "connections", ())):
        sock = getattr(connection, "socket", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Statement:
    """A ``java.util.concurrent.Callable`` that runs one SQL statement (called from Java).

    Exceptions are kept and re-raised in Python after Java returns, so the caller gets
    pyspark's own exception rather than a Py4J wrapper of it."""

    def __init__(self, spark: SparkSession, statement: str, properties: dict[str, str]) -> None:
        self.spark = spark
        self.statement = statement
        self.properties = properties
        self.error: BaseException | None = None
        self.ran = False

    def call(self) -> None:
        try:
            self._check_thread_local()
            self.spark.sql(self.statement)
            self.ran = True
        except BaseException as error:  # handed back to the Python caller, never lost
            self.error = error

    def _check_thread_local(self) -> None:
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        visible = dict(jvm.org.apache.iceberg.spark.CommitMetadata.commitProperties().items())
        if visible != self.properties:
            raise SparkSetupError(
                "the statement would run on a Java thread that does not see the commit "
                f"properties (it sees {visible})",
                hint="py4j must pin threads (PYSPARK_PIN_THREAD unset or true)",
                component="py4j",
            )

    class Java:
        implements = ["java.util.concurrent.Callable"]


def execute_with_commit_properties(
    spark: SparkSession,
    statement: str,
    properties: Mapping[str, str],
    table: str | None = None,
    *,
    lake_table: str | None = None,
) -> None:
    """Run ``statement`` so that the snapshot it commits to ``lake_table`` (default:
    ``table``) carries ``properties`` in its summary (``table``: for messages); the table's
    ``binlake-applied`` tag follows it (``applied_tag.tag_follows``).

    Raises ``SparkStatementError`` (or ``SparkSetupError``) when the statement fails."""
    props = checked_properties(properties)
    name = lake_table or table
    if name is None:
        raise ValueError("a commit with properties needs the table it commits to")
    with tag_follows(spark, name, table):
        _execute(spark, statement, props, table)


def _execute(spark: SparkSession, statement: str, props: dict[str, str], table: str | None) -> None:
    ensure_callbacks(spark)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    java_map = jvm.java.util.HashMap()
    for key, value in props.items():
        java_map.put(key, value)
    exception_class = jvm.java.lang.Class.forName("java.lang.RuntimeException")
    callable_ = _Statement(spark, statement, props)
    with spark_errors(statement, table):
        jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(
            java_map, callable_, exception_class
        )
        if callable_.error is not None:
            raise callable_.error
    if not callable_.ran:
        raise SparkStatementError("the statement was not run", table=table, statement=statement)


def append_with_commit_properties(
    frame: DataFrame, table: str, properties: Mapping[str, str]
) -> None:
    """Append ``frame`` to ``table`` in one snapshot whose summary carries ``properties``; the
    table's ``binlake-applied`` tag follows it (``applied_tag.tag_follows``)."""
    writer = frame.writeTo(table)
    for key, value in checked_properties(properties).items():
        writer = writer.option(f"snapshot-property.{key}", value)
    with tag_follows(spark_of(frame), table, table), spark_errors(f"append to {table}", table):
        writer.append()


def spark_of(frame: DataFrame) -> SparkSession:
    session = frame.sparkSession
    assert isinstance(session, SparkSession)
    return session


# ---- reading positions back --------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """One row of an Iceberg table's ``snapshots`` metadata table."""

    snapshot_id: int
    parent_id: int | None
    committed_at: datetime
    operation: str | None
    summary: dict[str, str]
    #: In a lineage: kept by one of binlake's tags past a cut (``iceberg_meta.tagged_tail``).
    tagged: bool = False

    @property
    def binlake(self) -> dict[str, str]:
        """The binlake.* properties of the summary (empty for snapshots binlake did not make)."""
        return {k: v for k, v in self.summary.items() if k.startswith(PREFIX)}


def table_metadata(spark: SparkSession, table: str) -> dict[str, Any]:
    """The table's current metadata, as Iceberg writes it to ``v<N>.metadata.json``, read on
    the driver through the session's catalog (and its cache, as Spark's metadata tables are):
    no Spark job runs, so a lineage read on a cluster never waits for an executor."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    with spark_errors(f"read the metadata of {table}", table):
        current = load_table(spark, table).operations().current()
        text = jvm.org.apache.iceberg.TableMetadataParser.toJson(current)
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def snapshots(spark: SparkSession, table: str) -> dict[int, Snapshot]:
    """Every snapshot of ``table`` still in its metadata, by id."""
    return snapshots_of(table_metadata(spark, table))


def snapshots_of(metadata: Mapping[str, Any]) -> dict[int, Snapshot]:
    """The snapshots of a table's metadata (``table_metadata``), by id, as the ``snapshots``
    metadata table shows them (the operation apart from the summary; the commit time a naive
    local datetime, as Spark returns timestamps)."""
    out = {}
    for raw in metadata.get("snapshots", []):
        summary = {str(k): str(v) for k, v in (raw.get("summary") or {}).items()}
        operation = summary.pop("operation", None)
        parent = raw.get("parent-snapshot-id")
        millis = int(raw["timestamp-ms"])
        committed_at = datetime.fromtimestamp(millis // 1000).replace(
            microsecond=millis % 1000 * 1000
        )
        snapshot_id = int(raw["snapshot-id"])
        out[snapshot_id] = Snapshot(
            snapshot_id, None if parent is None else int(parent), committed_at, operation, summary
        )
    return out


def refs(spark: SparkSession, table: str) -> dict[str, tuple[str, int]]:
    """The table's branches and tags: name -> (type, snapshot id)."""
    return refs_of(table_metadata(spark, table))


def refs_of(metadata: Mapping[str, Any]) -> dict[str, tuple[str, int]]:
    """The branches and tags of a table's metadata (``table_metadata``), as the ``refs``
    metadata table shows them: ``main`` is the current snapshot when no ref names it."""
    out = {
        str(name): (str(ref["type"]).lower(), int(ref["snapshot-id"]))
        for name, ref in (metadata.get("refs") or {}).items()
    }
    current = metadata.get("current-snapshot-id")
    if "main" not in out and current is not None and int(current) >= 0:
        out["main"] = ("branch", int(current))
    return out


def current_snapshot_id(spark: SparkSession, table: str) -> int | None:
    """The snapshot the table's main branch points at; None for a table without data commits."""
    main = refs(spark, table).get("main")
    return None if main is None else main[1]


def current_lineage(spark: SparkSession, table: str) -> list[Snapshot]:
    """The current snapshot and its ancestors, newest first (snapshots rolled back or on other
    branches are not in it). Where expired snapshots cut the chain, it goes on with the
    snapshots binlake's tags keep (``iceberg_meta.tagged_tail``)."""
    metadata = table_metadata(spark, table)
    by_id = snapshots_of(metadata)
    table_refs = refs_of(metadata)
    out: list[Snapshot] = []
    main = table_refs.get("main")
    snapshot_id = None if main is None else main[1]
    while snapshot_id is not None and snapshot_id in by_id:
        snapshot = by_id[snapshot_id]
        out.append(snapshot)
        snapshot_id = snapshot.parent_id
    if snapshot_id is not None:
        tags = {name: ref[1] for name, ref in table_refs.items() if ref[0] == "tag"}
        tail = tagged_tail([s.snapshot_id for s in out], tags)
        if tail is not None and out:
            out[-1] = replace(out[-1], tagged=True)  # the tags keep what the cut took
            out += [replace(by_id[i], tagged=True) for i in tail if i in by_id]
    return out


def latest_binlake_summary(spark: SparkSession, table: str) -> dict[str, str] | None:
    """The binlake.* properties of the newest binlake snapshot in the table's current lineage.

    Snapshots binlake did not make (compaction, maintenance, manual writes) are skipped. None
    when the table has no binlake snapshot at all. Raises ``SparkStatementError`` when the
    lineage was cut by snapshot expiry before any binlake snapshot was found: the applied
    position is then unknown, never assumed to be nothing."""
    return newest_binlake_summary(current_lineage(spark, table), table)


def lineage_cut(lineage: list[Snapshot]) -> bool:
    """True when snapshot expiry removed the parent of the lineage's oldest snapshot, and no
    tag of binlake's kept what it needs (``current_lineage``)."""
    return bool(lineage) and lineage[-1].parent_id is not None and not lineage[-1].tagged


def newest_binlake_summary(lineage: list[Snapshot], table: str) -> dict[str, str] | None:
    """``latest_binlake_summary`` of a lineage already read (``current_lineage``)."""
    for snapshot in lineage:
        if snapshot.binlake:
            return snapshot.binlake
    if lineage_cut(lineage):
        raise SparkStatementError(
            f"{table}: no binlake snapshot among the {len(lineage)} newest, and older snapshots "
            "were expired; the applied position is unknown",
            hint="the binlake-applied tag keeps the position through any expiry; it was absent "
            "(a commit's tag move cut short, or an older binlake): re-snapshot the table",
            table=table,
        )
    return None
