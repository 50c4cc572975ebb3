"""The keys and positions of a table's live rows, read at the snapshot a batch starts from: what
the key index is built from, and what its catch-up reads again (``catch_up``: which files).

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
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from binlake.errors import BinlakeError, DeletionVectorError, KeyIndexUntrustedError
from binlake.keyindex.encode import encode_keys
from binlake.keyindex.store import IndexedFile
from binlake.lake.schema.sql import quote
from binlake.lake.spark.errors import spark_errors
from binlake.lake.spark.lookup import java_items
from binlake.lake.write.delta_files import FIELD_ID
from binlake.lake.write.row_delta import DeltaTable
from binlake.lake.write.vector_files import delete_positions

JavaObject = Any
#: A data file of the index, the keys of its live rows and their positions.
Entry = tuple[IndexedFile, list[bytes], list[int]]
#: Data files to read (None: every one).
Files = Collection[str] | None
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


# ---- live rows, read at the base snapshot ---------------------------------------------------


def read_entries(
    spark: SparkSession,
    target: DeltaTable,
    files: Collection[str] | None,
    table: str,
    optional: Collection[str] = (),
) -> Iterator[Entry]:
    """(data file, keys, positions) of the live rows at ``target``'s base snapshot: of the data
    files ``files`` (each must be live there, but those in ``optional``), or of the whole table
    (``None``). A delete file Iceberg's read cannot read is a ``DeletionVectorError`` naming
    it (``unreadable_delete``)."""
    try:
        yield from _live_entries(spark, target, files, table, optional)
    except DeletionVectorError as error:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        util, io_ = jvm.org.apache.iceberg.util.ContentFileUtil, target.java.io()
        try:
            with spark_errors(f"check the delete files of {target.name}", table):
                tasks = _tasks(jvm, target, files, table, optional)
                found = unreadable_delete(util, io_, java_items(tasks), table)
        except BinlakeError:  # the check itself failed: the read's own error stands
            found = None
        if found is None:
            raise
        raise found from error


def _live_entries(
    spark: SparkSession, target: DeltaTable, files: Files, table: str, optional: Collection[str]
) -> Iterator[Entry]:
    """``read_entries``, Iceberg's failures typed as any Spark failure is (``spark_errors``)."""
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
            indexed = file_partitions(jvm, target, java_items(tasks))
            frame = _keys_frame(frame, target.layout.key)
            for row in frame.toLocalIterator():
                entries = pa.ipc.open_stream(pa.py_buffer(row[0])).read_all()
                for path, keys, positions in _by_file(entries):
                    yield indexed[path], keys, positions
        finally:
            cache.remove(set_id)
            manager.removeTasks(target.java, set_id)


def unreadable_delete(
    util: JavaObject, io_: JavaObject, tasks: Iterable[JavaObject], table: str
) -> DeletionVectorError | None:
    """The error of the first delete file (a DV or a Parquet position-delete file) of the scan
    ``tasks`` that binlake's own checks cannot read (missing, truncated, not Parquet, a DV
    failing its CRC), or None. Iceberg's failure in a Spark task names no file for a damaged
    DV: this names it, in the words the catch-up uses. Run only after a read failed.
    ``util``: Iceberg's ``ContentFileUtil``; ``io_``: the table's ``FileIO``."""
    seen: set[tuple[str, int | None]] = set()
    for task in tasks:
        for delete_file in java_items(task.deletes()):
            offset = delete_file.contentOffset()
            at = (str(delete_file.location()), None if offset is None else int(offset))
            dv = bool(util.isDV(delete_file))
            if at in seen or not (dv or str(delete_file.format()) == "PARQUET"):
                continue
            seen.add(at)
            try:
                for _ in delete_positions(util, io_, delete_file, None, table):
                    pass
            except DeletionVectorError as error:
                return error
    return None


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
        for task in java_items(planned):
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
        for task in java_items(planned):
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
