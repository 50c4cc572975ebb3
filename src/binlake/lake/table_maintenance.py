"""A table's health read from its metadata tables, and Iceberg's maintenance procedures run on
it (``binlake maintain`` decides which: ``binlake.maintain``).

* ``table_health``: data files, delete files (position and equality), small data files,
  manifests of the current snapshot, snapshots and the oldest one's time;
* ``compact``: ``rewrite_data_files`` with ``delete-file-threshold`` 1 (every data file a delete
  file applies to is rewritten, its deletes applied: binlake's row deltas write equality
  deletes, MERGE position deletes) and ``remove-dangling-deletes``. Rewritten files keep the
  data sequence number the rewrite started from (Iceberg's default), so a row delta committed
  meanwhile still deletes the rows it replaced in them. Measured on Iceberg 1.10.2, unpartitioned
  tables: 2 data files and 1 equality delete file became 1 data file and the delete file stayed;
  16 data files and 12 delete files (20 binlake commits, ``bench/maintain.py``) became 1 data
  file and 10 delete files, with ``use-starting-sequence-number`` false as well. The delete
  files left apply to no data file any more (reads are correct), but scans still list them:
  removing them is an open item (docs/architecture.md, "Maintenance");
* ``rewrite_manifests``, ``expire_snapshots`` (``older_than``, ``retain_last``: the snapshots
  binlake's tags reference are kept by Iceberg itself, ``binlake.lake.applied_tag``),
  ``remove_orphan_files`` (``older_than``; Iceberg refuses a bound less than a day old).

Each procedure is one Iceberg commit (or, for orphans, file deletions only); a failure is a typed
error (``spark_errors``): another writer's commit first is ``CommitConflictError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession

from binlake.lake.spark_errors import spark_errors
from binlake.lake.sql import quote

#: ``rewrite_data_files`` options: rewrite every data file a delete applies to, even alone.
COMPACT_OPTIONS = {
    "delete-file-threshold": "1",
    "min-input-files": "2",
    "remove-dangling-deletes": "true",
}


@dataclass(frozen=True)
class TableHealth:
    """What the thresholds of ``[maintenance]`` are checked against."""

    data_files: int
    delete_files: int
    small_files: int
    manifests: int
    snapshots: int
    #: Commit time of the oldest snapshot still in the metadata (None: no snapshot).
    oldest_snapshot: datetime | None


def table_health(spark: SparkSession, name: str, small_file_bytes: int) -> TableHealth:
    """``name``'s files, manifests and snapshots, counted from its metadata tables."""
    files = (
        f"SELECT content, count(*) AS files, "
        f"sum(CASE WHEN file_size_in_bytes < {int(small_file_bytes)} THEN 1 ELSE 0 END) AS small "
        f"FROM {name}.files GROUP BY content"
    )
    snapshots = f"SELECT count(*) AS n, min(committed_at) AS oldest FROM {name}.snapshots"
    manifests = f"SELECT count(*) AS n FROM {name}.manifests"
    with spark_errors(files, name):
        by_content = {int(r["content"]): r for r in spark.sql(files).collect()}
    with spark_errors(snapshots, name):
        snapshot_row = spark.sql(snapshots).collect()[0]
    with spark_errors(manifests, name):
        manifest_count = int(spark.sql(manifests).collect()[0]["n"])
    data = by_content.get(0)
    deletes = sum(int(r["files"]) for c, r in by_content.items() if c != 0)
    oldest = snapshot_row["oldest"]
    return TableHealth(
        data_files=int(data["files"]) if data else 0,
        delete_files=deletes,
        small_files=int(data["small"] or 0) if data else 0,
        manifests=manifest_count,
        snapshots=int(snapshot_row["n"]),
        oldest_snapshot=_utc(oldest) if oldest is not None else None,
    )


def _utc(moment: datetime) -> datetime:
    """Spark hands back session-local naive datetimes: as aware UTC ones."""
    return moment.astimezone(UTC) if moment.tzinfo else moment.astimezone().astimezone(UTC)


def procedure_table(identifier: tuple[str, ...]) -> str:
    """The ``table =>`` argument of a procedure: the identifier inside the catalog, quoted."""
    return _string(".".join(quote(part) for part in identifier))


def _string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _timestamp(moment: datetime) -> str:
    return "TIMESTAMP " + _string(moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


def _call(spark: SparkSession, catalog: str, procedure: str, args: str, name: str) -> list[Any]:
    statement = f"CALL {quote(catalog)}.system.{procedure}({args})"
    with spark_errors(statement, name):
        return spark.sql(statement).collect()


def _counts(rows: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in rows:
        for key, value in row.asDict().items():
            if isinstance(value, int):
                out[key] = out.get(key, 0) + value
    return out


def compact(spark: SparkSession, catalog: str, identifier: tuple[str, ...]) -> dict[str, int]:
    """``rewrite_data_files`` with ``COMPACT_OPTIONS``; Iceberg's counts (files rewritten,
    added, delete files removed...)."""
    options = ", ".join(f"{_string(k)}, {_string(v)}" for k, v in COMPACT_OPTIONS.items())
    args = f"table => {procedure_table(identifier)}, options => map({options})"
    return _counts(_call(spark, catalog, "rewrite_data_files", args, ".".join(identifier)))


def rewrite_manifests(
    spark: SparkSession, catalog: str, identifier: tuple[str, ...]
) -> dict[str, int]:
    args = f"table => {procedure_table(identifier)}"
    return _counts(_call(spark, catalog, "rewrite_manifests", args, ".".join(identifier)))


def expire_snapshots(
    spark: SparkSession,
    catalog: str,
    identifier: tuple[str, ...],
    older_than: datetime,
    retain_last: int,
) -> dict[str, int]:
    args = (
        f"table => {procedure_table(identifier)}, older_than => {_timestamp(older_than)}, "
        f"retain_last => {int(retain_last)}"
    )
    return _counts(_call(spark, catalog, "expire_snapshots", args, ".".join(identifier)))


def remove_orphan_files(
    spark: SparkSession, catalog: str, identifier: tuple[str, ...], older_than: datetime
) -> dict[str, int]:
    args = f"table => {procedure_table(identifier)}, older_than => {_timestamp(older_than)}"
    rows = _call(spark, catalog, "remove_orphan_files", args, ".".join(identifier))
    return {"removed_orphan_files_count": len(rows)}
