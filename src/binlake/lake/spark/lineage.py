"""A table's snapshots and lineage as the session's catalog gives them (REST, Hive, Glue, and
any catalog binlake cannot read as files), and where its applied position is read back.

``table_metadata`` is the table's current metadata as Iceberg writes it to
``v<N>.metadata.json``, loaded on the driver through the session's catalog: no Spark job runs.
From it: ``snapshots``, ``refs``, ``current_lineage`` (main's snapshot and its ancestors, going
on with binlake's tags where an expiry cut the chain) and ``latest_binlake_summary``, the
``binlake.*`` properties of the newest binlake snapshot: the table's applied position.
``spark_table_lineage`` and ``spark_lake_tables`` give the same ``LakeLineage`` as
``binlake.lake.catalog.metadata`` gives for the embedded catalog, parsed the same way
(``lineage_of``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from pyspark.sql import SparkSession

from binlake.errors import BinlakeError, SparkStatementError
from binlake.lake.catalog.metadata import LakeLineage, lineage_of, tagged_tail
from binlake.lake.catalog.summary import PREFIX
from binlake.lake.catalog.target import LakeTarget
from binlake.lake.schema.sql import quote
from binlake.lake.spark.errors import spark_errors
from binlake.lake.spark.lookup import load_table, split_name, table_exists, table_exists_now


@dataclass(frozen=True)
class Snapshot:
    """One row of an Iceberg table's ``snapshots`` metadata table."""

    snapshot_id: int
    parent_id: int | None
    committed_at: datetime
    operation: str | None
    summary: dict[str, str]
    #: In a lineage: kept by one of binlake's tags past a cut (``metadata.tagged_tail``).
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
    snapshots binlake's tags keep (``metadata.tagged_tail``)."""
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


#: Reads of a table's lineage while it is being replaced, before its failure is raised.
_REPLACED_READS = 3


def spark_table_lineage(
    spark: SparkSession, target: LakeTarget, identifier: tuple[str, ...]
) -> LakeLineage:
    """The table's current lineage, newest first: its metadata as the catalog gives it
    (``table_metadata``, no Spark job), read as the embedded catalog's files are."""
    name = ".".join(quote(p) for p in (target.catalog, *identifier))
    lineage, cut = lineage_of(table_metadata(spark, name))
    return LakeLineage(identifier, lineage, cut)


def spark_lake_tables(spark: SparkSession, target: LakeTarget) -> list[LakeLineage]:
    """Every table in the catalog's top-level namespaces, with its lineage."""
    catalog = quote(target.catalog)
    with spark_errors(f"SHOW NAMESPACES IN {catalog}"):
        namespaces = [row[0] for row in spark.sql(f"SHOW NAMESPACES IN {catalog}").collect()]
    out = []
    for shown in sorted(namespaces):
        parts = split_name(shown)  # Spark shows `we.ird db` quoted
        if len(parts) != 1:
            continue  # a nested namespace: binlake writes one level only
        namespace = parts[0]
        statement = f"SHOW TABLES IN {catalog}.{quote(namespace)}"
        with spark_errors(statement):
            names = [row["tableName"] for row in spark.sql(statement).collect()]
        out += _lineages(spark, target, namespace, sorted(names))
    return out


def _lineages(
    spark: SparkSession, target: LakeTarget, namespace: str, names: list[str]
) -> list[LakeLineage]:
    """The lineages of the tables ``names`` of ``namespace``. A snapshot copy may replace a
    table in its own thread (or another process may) while they are read: a table dropped
    since the listing is left out, as a listing made after the drop would have; a table
    replaced since is read again."""
    out = []
    for name in names:
        identifier = (namespace, name)
        qualified = ".".join(quote(p) for p in (target.catalog, *identifier))
        for attempt in range(_REPLACED_READS):
            try:
                out.append(spark_table_lineage(spark, target, identifier))
                break
            except BinlakeError:
                if not table_exists_now(spark, qualified):
                    break
                if attempt == _REPLACED_READS - 1:
                    raise
    return out


def target_table_exists(
    spark: SparkSession, target: LakeTarget, identifier: tuple[str, ...]
) -> bool:
    """Whether the target's catalog has the table ``identifier`` (namespace, name)."""
    return table_exists(spark, ".".join(quote(p) for p in (target.catalog, *identifier)))
