"""What the key index needs of a table: the commits since the index's snapshot, and the keys
and positions of live rows, read at the snapshot a batch starts from.

``plan_catch_up(target, since)``: the snapshots from ``since`` (exclusive) to the table's base
snapshot B (inclusive), walked back from B through the parent ids (``Table.snapshot``; no Spark
job: the manifests each snapshot added are read, so the cost is what those commits changed).
Each one's data files removed and added, and its delete files added or removed:

* a data file removed: its entries go;
* a data file added, or one a position delete (or deletion vector) added or removed refers to:
  its entries go and its live rows are read again at B; a file a delete names that is not live
  at B (a dangling delete removed, or merged, by maintenance: its data file went before
  ``since``, so the index holds nothing of it) is only dropped;
* a ``replace`` snapshot (a compaction, a merge of delete files, dangling deletes removed:
  Iceberg's ``DataOperations.REPLACE``, files replaced without changing the table's rows): only
  its data files count (removed: dropped; added: read); the delete files it added or removed
  change no live row, so the data files they name are not read again;
* an equality delete added or removed, a position delete whose data files cannot be named, a
  lineage that does not lead back to ``since`` (expired snapshots, a rollback, another table)
  or runs longer than ``MAX_CATCH_UP``: the index is rebuilt instead (``CatchUp.rebuild``).

``CatchUp.moved_rows`` counts the rows of the data files the commits added that are still live
at B (a compaction's output, a batch's new rows): its caller rebuilds instead when that is most
of the index (``key_positions``), which costs less than dropping and putting each entry.

The data files a position-delete file refers to: its ``referenced_data_file`` (or equal bounds
of its ``file_path`` column: Iceberg's ``ContentFileUtil.referencedDataFileLocation``), else
the distinct values of that column, read from the file itself (Parquet, through the table's
``FileIO``; every page's CRC checked).

``read_entries(spark, target, files)``: (data file, keys, positions) of the live rows (deletes
applied) of ``files`` at B, or of the whole table (``files=None``: a rebuild); each data file with
its partition spec id and values (``task.file().specId()``, ``SingleValueParser.toJson`` of
``task.file().partition()``, from the table's scan tasks at B: a position delete must be in its data
file's partition). A rebuild of a table that no delete file reaches, of at most ``READ_HERE_BYTES``
(a small table's first batch after its copy), reads the key columns of its Parquet files on the
driver, through the table's ``FileIO``: every row is live, at its row number. Otherwise the rows are
Iceberg's own read: ``SELECT <key>, _file, _pos`` of the table's scan tasks at B for those files
(``ScanTaskSetManager``: the tasks Iceberg's own rewrite reads, delete files included), or of the
table ``VERSION AS OF`` B. Keys are encoded on the executors (``binlake.keyindex.encode``) and come
back to the driver as one Arrow IPC stream per Arrow batch, a partition at a time
(``toLocalIterator``): the driver holds one partition's results, whatever the table's size.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from binlake.errors import KeyIndexUntrustedError
from binlake.keyindex.encode import encode_keys
from binlake.keyindex.store import IndexedFile
from binlake.lake.schema.sql import quote
from binlake.lake.spark.errors import spark_errors
from binlake.lake.write.delta_files import FIELD_ID
from binlake.lake.write.row_delta import DeltaTable

JavaObject = Any
#: Snapshots a catch-up walks at most; a longer lineage is rebuilt (a read of the table).
MAX_CATCH_UP = 2000
#: Iceberg's ``DataOperations.REPLACE``: a commit that replaced files, not rows.
REPLACE = "replace"
#: A rebuild reads a table no delete reaches on the driver, without a Spark job, up to this many
#: bytes of data files (a small table's first batch after its copy: hundreds of tables in a
#: wide database, each a Spark job otherwise).
READ_HERE_BYTES = 32 << 20
#: The key reads' Spark tasks read at most this much of a data file each (Iceberg splits a file
#: at its row groups: one of binlake's 16 MiB ones per task). The driver takes a task's entries
#: whole (``toLocalIterator``, one task at a time): with Iceberg's 128 MiB splits a rebuild of a
#: 10 M-row table ran the driver's default 1 GB heap out of memory (``bench/keyindex.py``).
SPLIT_BYTES = 8 << 20
_SPLIT = str(SPLIT_BYTES)
#: The entries travel from the executors as Arrow IPC streams compressed with zstd.
_IPC = pa.ipc.IpcWriteOptions(compression="zstd")
_BLOB = "blob binary"


@dataclass
class CatchUp:
    """What the commits since the index's snapshot did to the table's data files."""

    #: Data files whose entries go (removed, or to be read again).
    dropped: set[str] = field(default_factory=set)
    #: Data files live at B whose rows are read again.
    read: set[str] = field(default_factory=set)
    #: Of ``read``, the files only a delete file names: read if live at B, else only dropped.
    optional: set[str] = field(default_factory=set)
    #: Why the index cannot follow the commits (None: it can).
    rebuild: str | None = None
    #: Rows of the data files added since ``since`` and live at B (their record counts).
    moved_rows: int = 0


def plan_catch_up(
    spark: SparkSession, target: DeltaTable, since: int | None, table: str
) -> CatchUp:
    """The catch-up from snapshot ``since`` to ``target``'s base snapshot (see the module
    docstring)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    util = jvm.org.apache.iceberg.util.ContentFileUtil
    with spark_errors(f"read the commits of {target.name}", table):
        chain = _lineage(target.java, since, target.base_snapshot)
        if isinstance(chain, str):
            return CatchUp(rebuild=chain)
        io_ = target.java.io()
        removed: set[str] = set()
        added: dict[str, int] = {}
        named: set[str] = set()
        for snapshot in reversed(chain):  # oldest first
            removed |= _locations(snapshot.removedDataFiles(io_))
            added.update(_record_counts(snapshot.addedDataFiles(io_)))
            if str(snapshot.operation()) == REPLACE:
                continue
            for files in (snapshot.addedDeleteFiles(io_), snapshot.removedDeleteFiles(io_)):
                referenced = _referenced(util, target, files)
                if isinstance(referenced, str):
                    return CatchUp(rebuild=referenced)
                named |= referenced
    touched = set(added) | named
    moved = sum(rows for path, rows in added.items() if path not in removed)
    return CatchUp(
        dropped=removed | touched,
        read=touched - removed,
        optional=named - set(added) - removed,
        moved_rows=moved,
    )


def rows_unmoved(java: JavaObject, since: int, upto: int | None) -> bool:
    """Whether every commit after ``since`` up to ``upto`` (of Iceberg's ``Table`` ``java``)
    replaced delete files and nothing else: a ``replace`` that added and removed no data file
    (maintenance merging position deletes or removing dangling ones). Every live row is then
    where it was at ``since``, so an index exact at ``since`` is exact at ``upto``."""
    chain = _lineage(java, since, upto)
    if isinstance(chain, str):
        return False
    io_ = java.io()
    return all(
        str(snapshot.operation()) == REPLACE
        and not _locations(snapshot.addedDataFiles(io_))
        and not _locations(snapshot.removedDataFiles(io_))
        for snapshot in chain
    )


def _lineage(java: JavaObject, since: int | None, base: int | None) -> list[JavaObject] | str:
    """The snapshots after ``since`` up to ``base``, newest first, or why there is none."""
    if since is None:
        return "the index was made before the table's first commit"
    chain = []
    at = base
    while at != since:
        snapshot = None if at is None else java.snapshot(at)
        if snapshot is None:
            return (
                f"the index's snapshot {since} is not an ancestor of the table's snapshot "
                f"{base} (expired, rolled back, or another table's)"
            )
        chain.append(snapshot)
        if len(chain) > MAX_CATCH_UP:
            return f"more than {MAX_CATCH_UP} commits since the index's snapshot"
        parent = snapshot.parentId()
        at = None if parent is None else int(parent)
    return chain


def _iterate(iterable: JavaObject) -> Iterator[JavaObject]:
    iterator = iterable.iterator()
    while iterator.hasNext():
        yield iterator.next()


def _locations(files: JavaObject) -> set[str]:
    return {str(f.location()) for f in _iterate(files)}


def _record_counts(files: JavaObject) -> dict[str, int]:
    return {str(f.location()): int(f.recordCount()) for f in _iterate(files)}


def _referenced(util: JavaObject, target: DeltaTable, delete_files: JavaObject) -> set[str] | str:
    """The data files ``delete_files`` (position deletes, DVs) refer to, or why they cannot be
    followed (an equality delete; a position delete file binlake cannot read). ``util``:
    Iceberg's ``ContentFileUtil``."""
    out: set[str] = set()
    for delete_file in _iterate(delete_files):
        if str(delete_file.content().toString()) != "POSITION_DELETES":
            return "a commit added or removed equality deletes"
        single = util.referencedDataFileLocation(delete_file)
        if single is not None:
            out.add(str(single))
        elif str(delete_file.format().toString()) == "PARQUET":
            out |= named_data_files(target.java.io(), str(delete_file.location()))
        else:
            return f"a position delete file in {delete_file.format()} names several data files"
    return out


def named_data_files(io_: JavaObject, location: str) -> set[str]:
    """The distinct ``file_path`` values of the Parquet position-delete file at ``location``,
    read through the table's ``FileIO`` (``io_``), every page's CRC checked."""
    stream = io_.newInputFile(location).newStream()
    try:
        data = bytes(stream.readAllBytes())
    finally:
        stream.close()
    column = pq.read_table(
        io.BytesIO(data), columns=["file_path"], page_checksum_verification=True
    ).column(0)
    return {str(p) for p in pc.unique(column).to_pylist()}


# ---- live rows, read at the base snapshot ---------------------------------------------------


def read_entries(
    spark: SparkSession,
    target: DeltaTable,
    files: Collection[str] | None,
    table: str,
    optional: Collection[str] = (),
) -> Iterator[tuple[IndexedFile, list[bytes], list[int]]]:
    """(data file, keys, positions) of the live rows at ``target``'s base snapshot: of the data
    files ``files`` (each must be live there, but those in ``optional``), or of the whole table
    (``None``)."""
    base = target.base_snapshot
    if base is None or (files is not None and not files):
        return
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    if files is None:
        with spark_errors(f"plan a read of the keys of {target.name}", table):
            whole = _unchanged_small_files(target)
        if whole is not None:  # a small table no delete reaches (a copy's): read here
            yield from _read_here(target, file_partitions(jvm, target, whole).values(), table)
            return
    set_id = f"binlake-keys-{uuid.uuid4()}"
    cache = _table_cache(spark)
    manager = jvm.org.apache.iceberg.spark.ScanTaskSetManager.get()
    with spark_errors(f"read the keys of {target.name}", table):
        # Iceberg's source finds its cache catalog in the session active on this thread (a
        # commit thread has none: "Catalog 'default_cache_iceberg' plugin class not found").
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        cache.add(set_id, target.java)
        try:
            tasks = _tasks(jvm, target, files, table, optional)
            if files is None:
                loaded = spark.read.format("iceberg").option("snapshot-id", str(base))
                frame = loaded.option("split-size", _SPLIT).load(set_id)
            else:
                if tasks.isEmpty():
                    return
                manager.stageTasks(target.java, set_id, tasks)
                frame = _staged_frame(spark, set_id)
            indexed = file_partitions(jvm, target, _iterate(tasks))
            frame = _keys_frame(frame, target.layout.key)
            for row in frame.toLocalIterator():
                entries = pa.ipc.open_stream(pa.py_buffer(row[0])).read_all()
                for path, keys, positions in _by_file(entries):
                    yield indexed[path], keys, positions
        finally:
            cache.remove(set_id)
            manager.removeTasks(target.java, set_id)


def file_partitions(
    jvm: JavaObject, target: DeltaTable, tasks: Iterable[JavaObject]
) -> dict[str, IndexedFile]:
    """Each scan task's data file, by location, with its spec id and partition values."""
    parser = jvm.org.apache.iceberg.SingleValueParser
    specs = target.java.specs()
    unpartitioned: dict[int, bool] = {}
    out = {}
    for task in tasks:
        data = task.file()
        spec_id = int(data.specId())
        if spec_id not in unpartitioned:
            unpartitioned[spec_id] = bool(specs.get(spec_id).isUnpartitioned())
        values = "{}"
        if not unpartitioned[spec_id]:
            values = str(parser.toJson(specs.get(spec_id).partitionType(), data.partition()))
        location = str(data.location())
        out[location] = IndexedFile(location, spec_id, values)
    return out


#: Iceberg's catalog of the tables in ``SparkTableCache`` (its source declares it on first use).
CACHE_CATALOG = "default_cache_iceberg"


def _staged_frame(spark: SparkSession, set_id: str) -> DataFrame:
    """The rows of the scan tasks staged as ``set_id``, read through the cache catalog: Iceberg's
    source would load them as a rewrite, whose schema on a format-v3 table holds the row-lineage
    columns and leaves ``_file`` and ``_pos`` unresolved."""
    key = f"spark.sql.catalog.{CACHE_CATALOG}"
    if spark.conf.get(key, None) is None:
        spark.conf.set(key, "org.apache.iceberg.spark.SparkCachedTableCatalog")
    reader = spark.read.option("scan-task-set-id", set_id).option("split-size", _SPLIT)
    return reader.table(f"{CACHE_CATALOG}.`{set_id}`")


def _unchanged_small_files(target: DeltaTable) -> list[JavaObject] | None:
    """The table's data files at the base snapshot, when no delete file reaches any, all are
    Parquet and they hold at most ``READ_HERE_BYTES``: every row of each is live, at the
    position it has in its file. None otherwise (a Spark read applies the deletes)."""
    out: list[JavaObject] = []
    size = 0
    planned = target.java.newScan().useSnapshot(target.base_snapshot).planFiles()
    try:
        for task in _iterate(planned):
            data = task.file()
            size += int(data.fileSizeInBytes())
            if task.deletes().size() or str(data.format()) != "PARQUET" or size > READ_HERE_BYTES:
                return None
            out.append(task)
    finally:
        planned.close()
    return out


def _read_here(
    target: DeltaTable, files: Iterable[IndexedFile], table: str
) -> Iterator[tuple[IndexedFile, list[bytes], list[int]]]:
    """(data file, keys, positions) of every row of the Parquet files ``locations``, read on the
    driver through the table's ``FileIO`` (every page's CRC checked), the key columns found by
    their field ids (a renamed column keeps its id)."""
    ids = dict(zip(target.layout.key_field_ids, target.layout.key, strict=True))
    io_ = target.java.io()
    for indexed in files:
        location = indexed.path
        with spark_errors(f"read the keys of {target.name}", table):
            stream = io_.newInputFile(location).newStream()
            try:
                data = bytes(stream.readAllBytes())
            finally:
                stream.close()
        parquet = pq.ParquetFile(io.BytesIO(data), page_checksum_verification=True)
        by_id = {
            int(f.metadata[FIELD_ID]): f.name
            for f in parquet.schema_arrow
            if f.metadata and FIELD_ID in f.metadata
        }
        if not set(ids) <= set(by_id):
            raise KeyIndexUntrustedError(
                f"table {table}: data file {location} lacks a key column's field id",
                table=table,
                reason="lineage",
            )
        rows = parquet.read(columns=[by_id[i] for i in ids])
        keys = encode_keys([rows.column(by_id[i]) for i in ids])
        yield indexed, keys, list(range(rows.num_rows))


def _table_cache(spark: SparkSession) -> JavaObject:
    """Iceberg's ``SparkTableCache.get()``, by reflection: Py4J cannot call a static method
    whose name an instance method shares (``get(String)``). The catalog Iceberg reads a cached
    table through is declared by Iceberg in the session active on the calling thread."""
    jvm, gateway = spark.sparkContext._jvm, spark.sparkContext._gateway
    assert jvm is not None and gateway is not None
    loader = jvm.Thread.currentThread().getContextClassLoader()
    name = "org.apache.iceberg.spark.SparkTableCache"
    cls = jvm.java.lang.Class.forName(name, True, loader)
    method = cls.getMethod("get", gateway.new_array(jvm.java.lang.Class, 0))
    return method.invoke(None, gateway.new_array(jvm.java.lang.Object, 0))


def _tasks(
    jvm: JavaObject,
    target: DeltaTable,
    files: Collection[str] | None,
    table: str,
    optional: Collection[str] = (),
) -> JavaObject:
    """The scan tasks (data file and the deletes that apply to it) of ``files`` (None: every
    data file) at the base snapshot, as a Java list; a file of ``optional`` may be missing
    there."""
    every = files is None
    wanted = set(files or ())
    tasks = jvm.java.util.ArrayList()
    scan = target.java.newScan().useSnapshot(target.base_snapshot)
    planned = scan.planFiles()
    try:
        for task in _iterate(planned):
            location = str(task.file().location())
            if every or location in wanted:
                tasks.add(task)
                wanted.discard(location)
    finally:
        planned.close()
    wanted -= set(optional)
    if wanted:
        raise KeyIndexUntrustedError(
            f"table {table}: {len(wanted)} data file(s) its commits name are not in snapshot "
            f"{target.base_snapshot} (e.g. {sorted(wanted)[0]})",
            table=table,
            reason="lineage",
        )
    return tasks


def _keys_frame(frame: DataFrame, key: Iterable[str]) -> DataFrame:
    names = [quote(name) for name in key]
    selected = frame.select(*names, "_file", "_pos")
    return selected.mapInArrow(partial(pack_entries, len(names)), _BLOB)


def pack_entries(width: int, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """On an executor: each batch of (key columns..., _file, _pos) as one Arrow IPC stream of
    (key bytes, file, pos)."""
    for batch in batches:
        if not batch.num_rows:
            continue
        keys = encode_keys([batch.column(i) for i in range(width)])
        out = pa.table(
            {
                "key": pa.array(keys, pa.binary()),
                "file": pc.dictionary_encode(batch.column(width)),
                "pos": batch.column(width + 1).cast(pa.int64()),
            }
        )
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, out.schema, options=_IPC) as writer:
            writer.write_table(out)
        yield pa.record_batch([pa.array([sink.getvalue().to_pybytes()], pa.binary())], ["blob"])


def _by_file(entries: pa.Table) -> Iterator[tuple[str, list[bytes], list[int]]]:
    files = pc.cast(entries.column("file"), pa.string())
    for path in pc.unique(files).to_pylist():
        picked = entries.filter(pc.equal(files, path))
        yield str(path), picked.column("key").to_pylist(), picked.column("pos").to_pylist()
