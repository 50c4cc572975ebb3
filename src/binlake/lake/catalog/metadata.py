"""Iceberg table metadata of the embedded catalogs, read straight from the warehouse folder.

Why not through Spark: ``binlake status`` needs only each table's snapshot list (the applied
position is in the newest binlake snapshot's summary), and a Spark session costs 3-4 s to start;
``binlake verify`` polls the lists while it waits for the applier.

The embedded catalog (``binlake.lake.catalog.embedded``) is Iceberg's JDBC catalog on the SQLite
file ``catalog.sqlite`` in the warehouse: its ``iceberg_tables`` rows name each table's current
metadata file (``metadata_location``), read here with Python's ``sqlite3``, read-only (a reader
of a WAL database neither waits for nor blocks the writers).

A warehouse without that file is a Hadoop catalog's (``[catalog] type = "hadoop"``, or a
warehouse the Hadoop default of older binlake wrote, not yet adopted): its metadata is plain
files with a specified format:

* a table is a folder ``<warehouse>/<namespace...>/<table>`` holding ``metadata/``;
* ``metadata/v<N>.metadata.json`` (``v<N>.gz.metadata.json`` when compressed) is version N of
  the table metadata (Iceberg table spec); a commit writes version N+1 under a temporary name
  and renames it into place (atomic), then rewrites ``version-hint.text``;
* the current version is the hint, or the highest version listed when the hint is missing or
  unreadable, followed forward while version N+1 exists (the hint is written after the rename,
  so it may lag by one): exactly what Iceberg's own ``HadoopTableOperations`` does.

The snapshot lineage is the main branch's snapshot (``refs.main``, else ``current-snapshot-id``)
and its parents, as in ``binlake.lake.spark.lineage.current_lineage``; where snapshot expiry cut it,
it goes on with the snapshots binlake's tags keep (``tagged_tail``). Other catalogs (REST, Hive,
Glue...) go through Spark (``binlake.lake.spark.lineage``).
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from binlake.errors import BinlakeError, FileAccessError
from binlake.lake.catalog.snapshot_progress import progress_of
from binlake.lake.catalog.target import LakeTarget
from binlake.position import SourcePosition, at_or_before, parse_position

METADATA_DIR = "metadata"
#: The embedded catalog's SQLite database, in the warehouse folder.
CATALOG_FILE = "catalog.sqlite"
VERSION_HINT = "version-hint.text"
POSITION_KEY = "binlake.position"
#: The tags binlake keeps on its newest snapshot and its newest copy's last chunk
#: (``binlake.lake.write.applied_tag``).
APPLIED_TAG = "binlake-applied"
COPY_TAG = "binlake-copy"
#: How many times the applier's retry (``binlake.retry``) tried a commit's work again
#: before it went through (absent: the first try).
RETRIES = "binlake.retries"
_VERSION_FILE = re.compile(r"^v(\d+)(\.gz)?\.metadata\.json$")


#: The consistency bound of snapshots taken while a table's copy was still running.
NEVER = SourcePosition("~never", 0)
#: The bound of a table whose lineage was cut by snapshot expiry before any copy was seen.
UNKNOWN = SourcePosition("~unknown", 0)


def copy_bound(summaries: Iterable[Mapping[str, str]], *, cut: bool) -> SourcePosition | None:
    """Where a table starts to equal the source, from its lineage's summaries (newest first):
    its newest copy's consistent position (``NEVER`` while that copy runs), None when no copy
    is in the lineage (the table was streamed from its start), ``UNKNOWN`` when the lineage
    was cut before a copy could be seen."""
    for summary in summaries:
        progress = progress_of(summary)
        if progress is not None:
            return progress.consistent if progress.done else NEVER
    return UNKNOWN if cut else None


def exact_at(bound: SourcePosition | None, applied: SourcePosition | None) -> bool:
    """True when a table with copy bound ``bound`` (``copy_bound``) equals the source at its
    applied position ``applied``: it was streamed from its start, or it is at or past its
    copy's consistent position."""
    if bound is None:
        return True
    if bound in (NEVER, UNKNOWN) or applied is None:
        return False
    return at_or_before(bound, applied)


@dataclass(frozen=True, slots=True)
class LakeSnapshot:
    """One snapshot of a table: what binlake needs of it."""

    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    summary: Mapping[str, str]

    @property
    def binlake(self) -> dict[str, str]:
        return {k: v for k, v in self.summary.items() if k.startswith("binlake.")}

    @property
    def position(self) -> SourcePosition | None:
        """The source position this snapshot holds the table at (binlake snapshots only)."""
        text = self.summary.get(POSITION_KEY)
        if text is None:
            return None
        try:
            return parse_position(text)
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class LakeLineage:
    """A table's current snapshot lineage, newest first."""

    #: Catalog-relative identifier parts: namespace parts then the table name.
    identifier: tuple[str, ...]
    lineage: tuple[LakeSnapshot, ...]
    #: The oldest snapshot of ``lineage`` has a parent that was expired.
    lineage_cut: bool = False

    @property
    def binlake_snapshots(self) -> tuple[LakeSnapshot, ...]:
        """Snapshots binlake made (with a position), newest first."""
        return tuple(s for s in self.lineage if s.position is not None)

    def consistent_from(self) -> dict[int, SourcePosition | None]:
        """Per binlake snapshot id: the first source position its data can equal the source
        at (None: any position at or after its own). A snapshot copy (``binlake.snapshot``)
        holds chunks read at different positions: it and the batches after it equal the
        source only from its newest chunk's position on; while the copy runs, never
        (``NEVER``)."""
        out: dict[int, SourcePosition | None] = {}
        bound: SourcePosition | None = None
        for snapshot in reversed(self.lineage):
            progress = progress_of(snapshot.summary)
            if progress is not None:
                bound = progress.consistent if progress.done else NEVER
            if snapshot.position is not None:
                out[snapshot.snapshot_id] = bound
        return out

    @property
    def latest_binlake(self) -> LakeSnapshot | None:
        snapshots = self.binlake_snapshots
        return snapshots[0] if snapshots else None


def lake_tables(
    target: LakeTarget, spark_tables: Callable[[LakeTarget], list[LakeLineage]] | None = None
) -> list[LakeLineage]:
    """Every table of the target catalog: from the metadata files for the embedded catalog,
    else through ``spark_tables`` (which starts Spark)."""
    if target.embedded:
        warehouse = target.warehouse
        if (warehouse / CATALOG_FILE).is_file():
            rows = catalog_rows(warehouse, target.catalog, None)
            return [_lake_table(i, load_metadata(location_path(where))) for i, where in rows]
        tables = (read_table(warehouse, i) for i in hadoop_tables(warehouse))
        return [t for t in tables if t is not None]
    if spark_tables is None:
        raise BinlakeError(
            f"the catalog {target.catalog} is not the embedded one: reading it needs Spark",
            hint="install binlake with the spark extra",
        )
    return spark_tables(target)


def find_tables(warehouse: Path, catalog: str | None = None) -> list[tuple[str, ...]]:
    """Identifiers (namespace parts + table) of every table of an embedded catalog's warehouse:
    the rows of its ``catalog.sqlite`` named ``catalog`` (None: any), else the Hadoop catalog's
    table folders."""
    if (warehouse / CATALOG_FILE).is_file():
        return sorted(i for i, _ in catalog_rows(warehouse, catalog, None))
    return hadoop_tables(warehouse)


def hadoop_tables(warehouse: Path) -> list[tuple[str, ...]]:
    """Identifiers (namespace parts + table) of every table in a Hadoop catalog folder."""
    out: list[tuple[str, ...]] = []
    if not warehouse.is_dir():
        return out
    _walk(warehouse, (), out)
    return sorted(out)


def catalog_rows(
    warehouse: Path, catalog: str | None, identifier: tuple[str, ...] | None
) -> list[tuple[tuple[str, ...], str]]:
    """(identifier, metadata location) of the tables in the warehouse's ``catalog.sqlite``
    (rows of the catalog named ``catalog``, None: any; of ``identifier`` only, when given),
    read-only; the catalog keeps a namespace's levels joined by dots."""
    path = warehouse / CATALOG_FILE
    where, args = "metadata_location IS NOT NULL", []
    if catalog is not None:
        where, args = where + " AND catalog_name = ?", [catalog]
    if identifier is not None:
        where += " AND table_namespace = ? AND table_name = ?"
        args += [".".join(identifier[:-1]), identifier[-1]]
    try:
        with sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=30) as db:
            rows = db.execute(
                "SELECT table_namespace, table_name, metadata_location FROM iceberg_tables "
                f"WHERE {where} ORDER BY table_namespace, table_name",
                args,
            ).fetchall()
    except sqlite3.Error as exc:
        raise FileAccessError(
            f"cannot read the embedded catalog: {exc}",
            file=str(path),
            hint="the warehouse's catalog.sqlite is written by Iceberg's JDBC catalog; "
            "check that it is readable and not damaged",
        ) from exc
    # A namespace is one level: binlake writes no nested ones, and the catalog keeps a
    # database name with a dot (`we.ird db`) as it is.
    return [((str(ns), str(name)), str(location)) for ns, name, location in rows]


def _walk(folder: Path, parts: tuple[str, ...], out: list[tuple[str, ...]]) -> None:
    for child in sorted(folder.iterdir()):
        if not child.is_dir() or child.name.startswith((".", "_")):
            continue
        if _is_table(child):
            out.append((*parts, child.name))
        else:
            _walk(child, (*parts, child.name), out)


def _is_table(folder: Path) -> bool:
    meta = folder / METADATA_DIR
    if not meta.is_dir():
        return False
    return (meta / VERSION_HINT).exists() or any(_version(p.name) for p in meta.iterdir())


def _version(name: str) -> int | None:
    match = _VERSION_FILE.match(name)
    return int(match.group(1)) if match else None


def read_table(
    warehouse: Path, identifier: tuple[str, ...], catalog: str | None = None
) -> LakeLineage | None:
    """The table's lineage in an embedded catalog's warehouse (``find_tables``); None when it
    has no such table."""
    if (warehouse / CATALOG_FILE).is_file():
        rows = catalog_rows(warehouse, catalog, identifier)
        if not rows:
            return None
        metadata: dict[str, Any] | None = load_metadata(location_path(rows[0][1]))
    else:
        metadata = current_metadata(warehouse.joinpath(*identifier) / METADATA_DIR)
    return None if metadata is None else _lake_table(identifier, metadata)


def _lake_table(identifier: tuple[str, ...], metadata: Mapping[str, Any]) -> LakeLineage:
    lineage, cut = lineage_of(metadata)
    return LakeLineage(identifier, lineage, cut)


def location_path(location: str) -> Path:
    """A metadata location the embedded catalog wrote: a path, or a ``file:`` URI."""
    if location.startswith("file:"):
        return Path(unquote(urlsplit(location).path))
    return Path(location)


def current_metadata(meta_dir: Path) -> dict[str, Any] | None:
    """The current table metadata (parsed JSON) in a Hadoop table's ``metadata`` folder."""
    path = current_metadata_file(meta_dir)
    return None if path is None else load_metadata(path)


def current_metadata_file(meta_dir: Path) -> Path | None:
    """The current ``v<N>.metadata.json`` of a Hadoop table's ``metadata`` folder."""
    if not meta_dir.is_dir():
        return None
    version = _hint(meta_dir)
    if version is None or _version_file(meta_dir, version) is None:
        versions = [v for v in (_version(p.name) for p in meta_dir.iterdir()) if v is not None]
        if not versions:
            return None
        version = max(versions)
    while _version_file(meta_dir, version + 1) is not None:
        version += 1
    return _version_file(meta_dir, version)


def load_metadata(path: Path) -> dict[str, Any]:
    """A table metadata file (``*.metadata.json``, gzip-compressed ones too), parsed."""
    try:
        raw = path.read_bytes()
        if path.name.endswith(".gz.metadata.json") or raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        data = json.loads(raw)
    except (OSError, ValueError) as exc:
        raise FileAccessError(
            f"cannot read Iceberg metadata: {exc}",
            file=str(path),
            hint="check the warehouse folder; a table's metadata files are written by Iceberg",
        ) from exc
    if not isinstance(data, dict):
        raise FileAccessError("Iceberg metadata is not a JSON object", file=str(path))
    return data


def _hint(meta_dir: Path) -> int | None:
    try:
        text = (meta_dir / VERSION_HINT).read_text("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def _version_file(meta_dir: Path, version: int) -> Path | None:
    for name in (f"v{version}.metadata.json", f"v{version}.gz.metadata.json"):
        path = meta_dir / name
        if path.exists():
            return path
    return None


def lineage_of(metadata: Mapping[str, Any]) -> tuple[tuple[LakeSnapshot, ...], bool]:
    """(the main branch's snapshot and its ancestors newest first, then ``tagged_tail``;
    whether expiry cut it above what binlake needs)."""
    by_id = {s.snapshot_id: s for s in (_snapshot(raw) for raw in metadata.get("snapshots", []))}
    current = _main_snapshot_id(metadata)
    out: list[LakeSnapshot] = []
    while current is not None and current in by_id:
        snapshot = by_id[current]
        out.append(snapshot)
        current = snapshot.parent_id
    if current is None:
        return tuple(out), False
    tags = {
        name: int(ref["snapshot-id"])
        for name, ref in metadata.get("refs", {}).items()
        if isinstance(ref, dict) and ref.get("type") == "tag" and "snapshot-id" in ref
    }
    tail = tagged_tail([s.snapshot_id for s in out], tags)
    out += [by_id[i] for i in tail or () if i in by_id]
    return tuple(out), tail is None


def tagged_tail(lineage: Sequence[int], tags: Mapping[str, int]) -> list[int] | None:
    """What a lineage cut by snapshot expiry (snapshot ids, newest first) continues with: the
    snapshots ``binlake-applied`` then ``binlake-copy`` reference, those not in it already
    (``binlake.lake.write.applied_tag``: the applied tag always references the newest binlake
    snapshot ever committed to main, so the commits above it inherit its position; no copy tag
    beside it: no copy since). None without the applied tag (a commit's tag move was cut
    short, or the table was written before binlake tagged): the cut stays a cut."""
    if APPLIED_TAG not in tags:
        return None
    tail = [tags[APPLIED_TAG]]
    if COPY_TAG in tags and tags[COPY_TAG] != tags[APPLIED_TAG]:
        tail.append(tags[COPY_TAG])
    return [i for i in tail if i not in lineage]


def _main_snapshot_id(metadata: Mapping[str, Any]) -> int | None:
    main = metadata.get("refs", {}).get("main")
    if isinstance(main, dict) and "snapshot-id" in main:
        return int(main["snapshot-id"])
    current = metadata.get("current-snapshot-id")
    return None if current is None or int(current) < 0 else int(current)


def _snapshot(raw: Mapping[str, Any]) -> LakeSnapshot:
    parent = raw.get("parent-snapshot-id")
    summary = {str(k): str(v) for k, v in (raw.get("summary") or {}).items()}
    return LakeSnapshot(
        snapshot_id=int(raw["snapshot-id"]),
        parent_id=None if parent is None else int(parent),
        timestamp_ms=int(raw.get("timestamp-ms", 0)),
        summary=summary,
    )


def with_retries(properties: Mapping[str, str], retries: int) -> dict[str, str]:
    """A commit's ``binlake.*`` properties, with ``binlake.retries`` when it was retried."""
    out = dict(properties)
    if retries:
        out[RETRIES] = str(retries)
    return out
