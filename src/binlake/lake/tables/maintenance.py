"""A table's health read from its metadata tables, and Iceberg's maintenance procedures run on
it (``binlake maintain`` decides which: ``binlake.maintain``).

* ``table_health``: data files, delete files (position and equality), small data files,
  manifests of the current snapshot, snapshots and the oldest one's time;
* ``compact``: Iceberg's ``RewriteDataFiles`` action (``rewrite_data_files``'s) with its
  delete-file cache on (``CACHED_DELETES``), in one of two policies. ``EVERY_DELETED_FILE``
  (``delete-file-threshold`` 1): every data file a delete file applies to is rewritten, its
  deletes applied; the only way to rid a table of equality deletes, which apply to every older
  data file (``policy=None``). ``FoldPolicy``: only the small data files (under
  ``small_file_bytes``: the batches' files, folded into larger ones) and the files whose
  deleted rows are at least ``delete_ratio`` of their rows; a large file with a few position
  deletes stays as it is, so a round rewrites what changed, not the table. When the mostly
  deleted files' live rows (``mostly_deleted_rows``) exceed a round's bound, the round runs
  two rewrites instead (``binlake.maintain.plan``): the small files only (``SMALL_ONLY``), then
  at most ``max_files`` of the mostly deleted ones (Iceberg's ``max-files-to-rewrite``, its
  ``min-file-size-bytes`` 0: no file for its size). Rewritten files
  keep the data sequence number the rewrite started from (Iceberg's default), so a row delta's
  equality deletes committed meanwhile still delete the rows they replaced in them (its
  position deletes name files: one of the two commits fails as a conflict);
* ``merge_position_deletes``: Iceberg's ``RewritePositionDeleteFiles`` action over every
  position-delete file (``rewrite-all``): one file per partition instead of one per batch, and
  the positions of data files no longer live dropped;
* ``remove_dangling_deletes``: one ``RewriteFiles`` commit removing the live delete files that
  apply to no live data file (``DANGLING``: Iceberg's own rule, and a position delete file of
  one data file that is gone; and a row delta's position delete file naming several data files,
  none of them live, ``dangling_deletes``). Measured on Iceberg 1.10.2: the compaction alone
  left 10 of 12 equality delete files of an unpartitioned table (``bench/maintain.py``) in its
  current snapshot (their sequence numbers are at or below the one the rewritten file keeps, and
  an equality delete applies only to a *smaller* one). Iceberg's ``remove-dangling-deletes``
  option does nothing on a table with one unpartitioned spec (it leaves that to the commit-time
  drop of ``MergingSnapshotProducer``, which drops only deletes *older* than every data file,
  and only in the delete manifests the commit rewrites); this step applies the rule on every
  table;
* ``rewrite_manifests``, ``expire_snapshots`` (``older_than``, ``retain_last``: the snapshots
  binlake's tags reference are kept by Iceberg itself, ``binlake.lake.write.applied_tag``),
  ``remove_orphan_files`` (``older_than``; Iceberg refuses a bound less than a day old).

Each procedure is one Iceberg commit (or, for orphans, file deletions only); a failure is a typed
error (``binlake.lake.spark.errors``): another writer's commit first is ``CommitConflictError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession

from binlake.lake.schema.sql import quote
from binlake.lake.spark.errors import spark_errors
from binlake.lake.spark.lookup import load_table
from binlake.lake.write.vector_files import named_data_files

#: ``rewrite_data_files`` options: rewrite every data file a delete applies to, even alone.
EVERY_DELETED_FILE = {
    "delete-file-threshold": "1",
    "min-input-files": "2",
    "remove-dangling-deletes": "true",
}
#: Iceberg's rewrite turns its executors' delete-file cache off (``RewriteDataFilesSparkAction``
#: sets it false in its session). Without it every data file of a group reads again every
#: equality-delete file that applies to it: after 2,000 row-delta commits, about 2 million
#: Parquet files opened, a compaction of a 100,000-row table still running after 10 minutes
#: (``bench/maintain.py``, 2026-11-27). With it each delete file is read once per executor
#: (Iceberg's executor cache: entries up to 64 MB, 128 MB in all, by default), the rest are
#: lookups. binlake turns it on again in the action's session.
CACHED_DELETES = "spark.sql.iceberg.executor-cache.delete-files.enabled"
#: Field id of a position delete file's ``file_path`` column (Iceberg's ``DELETE_FILE_PATH``).
PATH_FIELD_ID = 2147483546
#: When a live delete file applies to no live data file (Iceberg's ``RemoveDanglingDeletes``
#: rule, over ``_live_files`` rows): a position delete applies to data files of a data sequence
#: number at or below its own, an equality delete to those strictly below. ``min_seq`` is the
#: smallest data sequence number of the live data files it can apply to: those of its partition
#: in its spec, or, for a delete without partition values (an unpartitioned spec's, which
#: applies to the whole table), all of them; NULL when there are none. Besides, a position
#: delete of one data file (``ref``) applies only to that file: dangling once it is not live
#: (``ref_live`` NULL).
DANGLING = (
    "min_seq IS NULL OR (content = 1 AND seq < min_seq) OR (content = 2 AND seq <= min_seq) "
    "OR (content = 1 AND ref IS NOT NULL AND ref_live IS NULL)"
)


@dataclass(frozen=True)
class FoldPolicy:
    """A compaction that rewrites only the small data files and the mostly deleted ones."""

    #: Data files under this size are folded into larger ones (Iceberg's
    #: ``min-file-size-bytes``).
    small_file_bytes: int
    #: A data file whose deleted rows are at least this share of its rows is rewritten
    #: (Iceberg's ``delete-ratio-threshold``).
    delete_ratio: float
    #: At most this many files are rewritten (Iceberg's ``max-files-to-rewrite``: the first
    #: ones its plan meets, whole file groups cut short; not the largest nor the most deleted,
    #: so a bound on rows takes as many files as the largest candidates allow); None: all.
    max_files: int | None = None

    def options(self) -> dict[str, str]:
        options = {
            "min-file-size-bytes": str(int(self.small_file_bytes)),
            "delete-ratio-threshold": repr(float(self.delete_ratio)),
            "min-input-files": "2",
            "remove-dangling-deletes": "true",
        }
        if self.max_files is not None:
            options["max-files-to-rewrite"] = str(int(self.max_files))
        return options


#: A fold's ``delete_ratio`` that rewrites no file for its deletes but one every row of which is
#: deleted (Iceberg refuses 0; such a file moves no row): the small files only.
SMALL_ONLY = 1.0


@dataclass(frozen=True)
class TableHealth:
    """What the thresholds of ``[maintenance]`` are checked against."""

    data_files: int
    #: Live delete files that still apply to a data file (dangling ones are not counted).
    delete_files: int
    #: Live delete files that apply to no data file any more (``DANGLING``).
    dangling_deletes: int
    small_files: int
    manifests: int
    snapshots: int
    #: Commit time of the oldest snapshot still in the metadata (None: no snapshot).
    oldest_snapshot: datetime | None
    #: Of ``delete_files``, the equality deletes (every other one is a position delete).
    equality_deletes: int = 0
    #: The live rows of each data file of at least ``small_file_bytes`` whose deleted rows are
    #: at least ``delete_ratio`` of its rows (``mostly_deleted``): what a fold would move.
    mostly_deleted_rows: tuple[int, ...] = ()


def table_health(
    spark: SparkSession, name: str, small_file_bytes: int, delete_ratio: float | None = None
) -> TableHealth:
    """``name``'s files, manifests and snapshots, counted from its metadata tables; with
    ``delete_ratio``, its mostly deleted files' live rows too (``mostly_deleted``)."""
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
    dangling = _dangling(spark, name) if deletes else []
    equality = int(by_content[2]["files"]) if 2 in by_content else 0
    oldest = snapshot_row["oldest"]
    mostly: tuple[int, ...] = ()
    if deletes and delete_ratio is not None:
        mostly = mostly_deleted(spark, name, small_file_bytes, delete_ratio)
    return TableHealth(
        data_files=int(data["files"]) if data else 0,
        delete_files=deletes - len(dangling),
        equality_deletes=equality - sum(1 for _, content in dangling if content == 2),
        dangling_deletes=len(dangling),
        small_files=int(data["small"] or 0) if data else 0,
        manifests=manifest_count,
        snapshots=int(snapshot_row["n"]),
        oldest_snapshot=_utc(oldest) if oldest is not None else None,
        mostly_deleted_rows=mostly,
    )


def mostly_deleted(
    spark: SparkSession, name: str, small_file_bytes: int, delete_ratio: float
) -> tuple[int, ...]:
    """The live rows of each of ``name``'s data files of at least ``small_file_bytes`` whose
    deleted rows are at least ``delete_ratio`` of its rows, largest first. Counted as Iceberg's
    bin-pack planner does (``tooHighDeleteRatio``): the rows of the live delete files scoped to
    that one file (a DV, a position delete file of one data file: ``ref``), at most the file's
    own; a row delta's position delete file naming several data files counts for none."""
    query = (
        f"WITH live AS ({_live_files(spark, name)}), "
        "scoped AS (SELECT ref, sum(records) AS deleted FROM live "
        "WHERE content = 1 AND ref IS NOT NULL GROUP BY ref), "
        "data AS (SELECT d.records, least(coalesce(s.deleted, 0), d.records) AS deleted "
        "FROM live d LEFT JOIN scoped s ON d.path = s.ref "
        f"WHERE d.content = 0 AND d.bytes >= {int(small_file_bytes)} AND d.records > 0) "
        "SELECT records - deleted AS rows FROM data "
        f"WHERE deleted >= {float(delete_ratio)!r} * records ORDER BY rows DESC"
    )
    with spark_errors(query, name):
        return tuple(int(r["rows"]) for r in spark.sql(query).collect())


def _live_files(spark: SparkSession, name: str) -> str:
    """A query of ``name``'s live files in its current snapshot: content, data sequence number,
    location, (``part``) spec and partition values as text ('' for none), the one data file
    a position delete names (``ref``, NULL for none or several), rows and bytes."""
    entries = f"{name}.entries"
    with spark_errors(f"DESCRIBE {entries}", name):
        fields = spark.table(entries).schema["data_file"].dataType.fieldNames()  # type: ignore[attr-defined]
    # Iceberg leaves the partition out of the metadata tables of a table never partitioned.
    values = "to_json(data_file.partition)" if "partition" in fields else "NULL"
    # The one data file a position delete names, as Iceberg's ContentFileUtil.referencedDataFile
    # reads it: its referenced_data_file, or its file_path column's bounds when they are equal
    # (a MERGE's delete file of one data file).
    bound = f"data_file.%s_bounds[{PATH_FIELD_ID}]"
    named = "data_file.referenced_data_file" if "referenced_data_file" in fields else "NULL"
    ref = (
        f"CASE WHEN data_file.content != 1 THEN NULL WHEN {named} IS NOT NULL THEN {named} "
        f"WHEN {bound % 'lower'} = {bound % 'upper'} THEN decode({bound % 'lower'}, 'UTF-8') END"
    )
    return (
        f"SELECT data_file.content AS content, sequence_number AS seq, "
        f"data_file.file_path AS path, {ref} AS ref, data_file.record_count AS records, "
        "data_file.file_size_in_bytes AS bytes, "
        f"CASE WHEN coalesce({values}, '{{}}') = '{{}}' THEN '' "
        f"ELSE concat(data_file.spec_id, ':', {values}) END AS part "
        f"FROM {entries} WHERE status < 2"
    )


def dangling_deletes(spark: SparkSession, name: str) -> list[str]:
    """The locations of ``name``'s live delete files that apply to no live data file.

    Besides ``DANGLING``: a position delete naming several data files (a row delta's) whose
    sequence number is the smallest of the live data files' (committed in the snapshot a
    compaction started from, whose files keep that number) is read (``named_data_files``): it
    is dangling when none of the files it names is live. One committed later names files live
    when it was committed, which a compaction could not have removed (it would have failed on
    the new deletes), so only those are read."""
    return [path for path, _ in _dangling(spark, name)]


def _dangling(spark: SparkSession, name: str) -> list[tuple[str, int]]:
    """``dangling_deletes`` with each file's content (1 position, 2 equality deletes)."""
    query = (
        f"WITH live AS ({_live_files(spark, name)}), "
        "data AS (SELECT seq, part, path FROM live WHERE content = 0), "
        "per_part AS (SELECT part, min(seq) AS min_seq FROM data GROUP BY part), "
        "deletes AS (SELECT d.content, d.seq, d.path, d.ref, r.path AS ref_live, "
        "CASE WHEN d.part = '' THEN (SELECT min(seq) FROM data) ELSE p.min_seq END AS min_seq "
        "FROM live d LEFT JOIN per_part p ON d.part = p.part "
        "LEFT JOIN data r ON d.ref = r.path WHERE d.content != 0) "
        f"SELECT path, content, {DANGLING} AS gone, content = 1 AND ref IS NULL AND "
        "seq = min_seq AS unsure FROM deletes"
    )
    with spark_errors(query, name):
        rows = spark.sql(query).collect()
        unsure = [str(r["path"]) for r in rows if r["unsure"] and not r["gone"]]
        gone = [(str(r["path"]), int(r["content"])) for r in rows if r["gone"]]
        if unsure:
            live = f"SELECT file_path FROM {name}.files WHERE content = 0"
            data = {str(r[0]) for r in spark.sql(live).collect()}
            io_ = load_table(spark, name).io()
            gone += [(p, 1) for p in unsure if not named_data_files(io_, p, name) & data]
    return gone


def remove_dangling_deletes(spark: SparkSession, name: str) -> dict[str, int]:
    """One ``RewriteFiles`` commit removing ``name``'s dangling delete files (none: no commit).

    The table is loaded before the files are found: a file dangling then stays dangling in
    every later state (a data file added later has a larger sequence number, and a rewrite that
    keeps an older one replaces live files, which bound the minimum), so the commit is right on
    whatever state Iceberg applies it to; a file another writer removed meanwhile fails it as
    a conflict (the caller retries)."""
    with spark_errors(f"remove dangling deletes of {name}", name):
        table = load_table(spark, name)
        snapshot = table.currentSnapshot()
        dangling = set(dangling_deletes(spark, name)) if snapshot is not None else set()
        if not dangling:
            return {"removed_dangling_delete_files_count": 0}
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        rewrite = table.newRewrite().validateFromSnapshot(snapshot.snapshotId())
        removed = 0
        for manifest in snapshot.deleteManifests(table.io()):
            reader = jvm.org.apache.iceberg.ManifestFiles.readDeleteManifest(
                manifest, table.io(), table.specs()
            )
            try:
                files = reader.iterator()
                while files.hasNext():
                    delete = files.next()
                    if str(delete.location()) in dangling:
                        rewrite.deleteFile(delete.copy())
                        removed += 1
            finally:
                reader.close()
        if removed:
            rewrite.commit()
    return {"removed_dangling_delete_files_count": removed}


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


def compact(
    spark: SparkSession,
    catalog: str,
    identifier: tuple[str, ...],
    policy: FoldPolicy | None = None,
) -> dict[str, int]:
    """Iceberg's ``RewriteDataFiles`` action (what the ``rewrite_data_files`` procedure runs)
    with the delete-file cache on (``CACHED_DELETES``): ``policy``'s files, or (None) every data
    file a delete applies to (``EVERY_DELETED_FILE``); Iceberg's counts under the procedure's
    names (files rewritten, added, bytes rewritten, delete files removed...)."""
    name = ".".join(quote(part) for part in (catalog, *identifier))
    options = EVERY_DELETED_FILE if policy is None else policy.options()
    with spark_errors(f"rewrite_data_files on {name}", ".".join(identifier)):
        result = rewrite_action(spark, name, options).execute()
        return {
            "rewritten_data_files_count": int(result.rewrittenDataFilesCount()),
            "added_data_files_count": int(result.addedDataFilesCount()),
            "rewritten_bytes_count": int(result.rewrittenBytesCount()),
            "failed_data_files_count": int(result.failedDataFilesCount()),
            "removed_delete_files_count": int(result.removedDeleteFilesCount()),
        }


def rewrite_action(
    spark: SparkSession, name: str, options: Mapping[str, str] = EVERY_DELETED_FILE
) -> Any:
    """The ``RewriteDataFiles`` action on table ``name`` with ``options``, its session's
    delete-file cache on (``CACHED_DELETES``) when it has one to reach (else, another Iceberg
    layout, the rewrite runs uncached)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    # The action's threads take their SQL conf from the session active where they start
    # (``SQLConf.get``): on a thread with none (a scheduled round's, maintain/schedule.py) a
    # compaction's file groups could not find Iceberg's table-cache catalog
    # (``CatalogNotFoundException: default_cache_iceberg``).
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    action = jvm.org.apache.iceberg.spark.actions.SparkActions.get(
        spark._jsparkSession
    ).rewriteDataFiles(load_table(spark, name))
    session = action_session(spark, action)
    if session is not None:
        session.conf().set(CACHED_DELETES, "true")
    for key, value in options.items():
        action = action.option(key, value)
    return action


def merge_position_deletes(
    spark: SparkSession, catalog: str, identifier: tuple[str, ...]
) -> dict[str, int]:
    """Iceberg's ``RewritePositionDeleteFiles`` action over every position-delete file of the
    table (``rewrite-all``): its counts (files rewritten and added, bytes)."""
    name = ".".join(quote(part) for part in (catalog, *identifier))
    with spark_errors(f"rewrite_position_delete_files on {name}", ".".join(identifier)):
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        actions = jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
        action = actions.rewritePositionDeletes(load_table(spark, name))
        result = action.option("rewrite-all", "true").execute()
        return {
            "rewritten_delete_files_count": int(result.rewrittenDeleteFilesCount()),
            "added_delete_files_count": int(result.addedDeleteFilesCount()),
            "rewritten_bytes_count": int(result.rewrittenBytesCount()),
        }


def action_session(spark: SparkSession, action: Any) -> Any:
    """The Spark session an Iceberg action runs its jobs in (its own clone of the caller's:
    ``BaseSparkAction.spark()``, not public, so reached by reflection); None if the action has
    no such base class."""
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    jvm = gateway.jvm
    base = action.getClass()  # Iceberg's classes are in Spark's loader, not the system one
    while base is not None and base.getName() != "org.apache.iceberg.spark.actions.BaseSparkAction":
        base = base.getSuperclass()
    if base is None:
        return None
    method = base.getDeclaredMethod("spark", gateway.new_array(jvm.java.lang.Class, 0))
    method.setAccessible(True)
    return method.invoke(action, gateway.new_array(jvm.java.lang.Object, 0))


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
