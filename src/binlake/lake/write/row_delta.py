"""Row deltas: a keyed table's batch committed in O(changes), never reading the table.

A batch's net change to a keyed table (``KeyedChanges.delta``) becomes two Parquet files
(``binlake.lake.write.delta_files``: the upserted rows, and the rows they replace) and one
Iceberg ``RowDelta`` commit adding them, whose snapshot summary carries the batch's
``binlake.*`` properties: data and position in one atomic commit. The rows the batch replaces
are named by position (data file, row number, from the key index: ``positions``, ``key_positions``;
a position-delete file, or on format v3 deletion vectors: ``vector_files``) or by key (an
equality-delete file: ``[applier] deletes = "equality"``).

Why it is exact. By position: the index holds the one live row of each key at the base snapshot
B, the batch deletes exactly those of the keys it changes, and its own rows are in a file no
delete names; the commit checks that B's files it deletes from are still live
(``validateDataFilesExist``, ``validateDeletedFiles``): a compaction or a DELETE that removed one
meanwhile fails it as a conflict, and the batch is planned again. By key: an equality delete
removes the rows of its key in data files of a *smaller* data sequence number; the files of one
commit share its sequence number. So the batch's delete of key k removes every older row of k
and never the row the same commit adds for k. Either way an insert, an update, a delete then a
re-insert (one upsert), an update of a row inserted in the same batch (one upsert), a key
change (a delete of the old key, an upsert of the new one) all come out as the source has them,
whatever the table's size. A key in one commit twice would keep both rows: refused
(``delta_files.require_unique_keys``).

How, through the Py4J gateway (``jvm``), on the driver:

1. ``Spark3Util.loadIcebergTable(session, name)``: the table's current metadata (the embedded
   catalog caches nothing); its schema, spec, sort order, properties and format version as
   Iceberg's own JSON (``DeltaLayout``, cached by those texts, so an ALTER is seen at the next
   commit);
2. per file: pyarrow writes a local staging file (``tempfile``); ``table.locationProvider()
   .newDataLocation(name)`` places it as Iceberg would place its own; ``Files.copy`` streams it
   into ``table.io().newOutputFile(location).create()``: the table's ``FileIO``, so any
   warehouse Iceberg can write (local, HDFS, S3...) takes it; the column metrics are Iceberg's
   own (``ParquetUtil.footerMetrics``, ``MetricsConfig.forTable``) on the staging copy's footer,
   read with the session's Hadoop configuration: ``ParquetUtil.fileMetrics`` makes a new Hadoop
   ``Configuration`` for each file, whose XML defaults took 60% of the JVM's time of a small
   commit (measured with JFR: docs/benchmarks.md, "Wide and busy");
3. ``DataFiles.builder(spec)`` / ``FileMetadata.deleteFileBuilder(spec).ofPositionDeletes()``
   (``withReferencedDataFile`` when it names one data file; its metrics keep the whole
   ``file_path`` bounds, ``MetricsConfig.forPositionDelete``) or ``.ofEqualityDeletes(ids)``;
4. in one ``table.newTransaction()``: ``newRowDelta().addRows(..).addDeletes(..).set(k, v)...
   validateFromSnapshot(base)`` (and, for position deletes, ``validateDataFilesExist(files)
   .validateDeletedFiles()``) ``.commit()``, then the ``binlake-applied`` tag moved to the new
   snapshot (``applied_tag.move_tags``), then ``commitTransaction()``: data, position and tag
   in one metadata swap. When another writer committed first the transaction fails with
   ``CommitFailedException`` (the tag update was planned on the older metadata) and the
   applier's retry (``binlake.retry``) does the batch again. A delta with no tag to move
   is put on top of the other commit by Iceberg's own retry (its validations checked against
   it): ``commit`` returns the snapshot and the one it went on top of (``Committed``), and the
   key index takes the snapshot only when that is the base it was staged on.

The API (the lake's file-commit machinery, which a snapshot's chunks use too), three steps so
that a caller can put its own crash point between storing and committing:

* ``open(name, key, table) -> DeltaTable``: the table loaded; ``layout.refusal()`` says why it
  cannot take a row delta (encrypted, format v1, a column type not written, a partition
  transform not computed; ``equality_refusal()``: partitioned too), None when it can;
* ``stage(delta_table, chunks, table, positions=None) -> StagedDelta``: ``chunks`` of (rows,
  deleted keys) Arrow tables, columns named as the Iceberg table's, values cast and checked
  (``delta_files.fit``); a key in one chunk's rows only (checked per chunk where there is a
  key). The rows go to one data file per partition (``delta_files.DataStaging``: each built with
  its spec and partition values); ``positions`` (``delta_files.PositionLookup``) turns the
  deleted keys into position-delete files, one per partition of the data files they name.
  Stored, not committed. Or ``stage_stored(delta_table, locations, table)``: data files a
  snapshot's chunk tasks stored in ``data_folder(delta_table)`` (``layout.data_file_refusal()``
  says why a table cannot take those: a partitioned one cannot);
* ``commit(staged, properties, table) -> Committed``: one snapshot adding them, its summary
  carrying ``properties`` (``binlake.*`` keys only), made even with no file, on the driver
  (docs/spark.md). A commit that loses to another writer's raises ``CommitConflictError``: the
  caller's retry (``binlake.retry``) reads the table again and goes on from what it holds;
* ``unreferenced(delta_table, prefix, table)`` / ``delete(...)``: files under the data folder
  named ``prefix...`` that the table's current state does not reference (an attempt never
  committed), and their deletion through the table's ``FileIO``.

Durability: neither the ``FileIO`` stream nor Iceberg fsyncs; for a local warehouse binlake's
``WarehouseSync`` fsyncs the files of every table whose metadata changed (these included) before
the relay-log checkpoint moves past them. A crash after the files are stored and before the
commit (crash point ``apply_before_delta_commit``) leaves them as orphans: no snapshot names
them, so no read sees them, and the restart writes the batch again under new names (Iceberg's
``remove_orphan_files`` procedure reclaims the space).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from binlake.errors import KeyIndexUntrustedError
from binlake.lake.catalog.summary import checked_properties
from binlake.lake.spark.errors import spark_errors
from binlake.lake.write.applied_tag import move_tags
from binlake.lake.write.delta_files import (
    DataStaging,
    DeltaLayout,
    ParquetStaging,
    PositionDeletes,
    PositionLookup,
    fit,
    parse_layout,
    require_unique_keys,
    write_parquet,
)
from binlake.lake.write.partitions import FilePartition
from binlake.lake.write.stored_files import data_folder, delete_files, unreferenced
from binlake.lake.write.vector_files import StagedVectors, VectorWriter
from binlake.storage.durable import raise_os_error

JavaObject = Any
#: The ``FileIO`` whose files the session's Hadoop configuration reads as they are.
HADOOP_FILE_IO = "org.apache.iceberg.hadoop.HadoopFileIO"


@dataclass(frozen=True)
class _Classes:
    """The Java classes and constants a row delta calls (Py4J handles)."""

    spark3_util: JavaObject
    schema_parser: JavaObject
    spec_parser: JavaObject
    order_parser: JavaObject
    json_util: JavaObject
    table_util: JavaObject
    parquet_util: JavaObject
    files: JavaObject
    metrics_config: JavaObject
    footer_reader: JavaObject
    hadoop_path: JavaObject
    empty_stream: JavaObject
    data_files: JavaObject
    file_metadata: JavaObject
    parquet: JavaObject
    java_files: JavaObject
    java_file: JavaObject
    java_int: JavaObject


@dataclass(frozen=True)
class DeltaTable:
    """One Iceberg table loaded for a row delta: the Java table and its layout."""

    name: str
    java: JavaObject
    layout: DeltaLayout
    #: The snapshot the table was at when loaded (None: no snapshot yet).
    base_snapshot: int | None


@dataclass(frozen=True)
class Committed:
    """A row delta's snapshot and the snapshot it went on top of: the base it was staged on,
    or, when another writer committed meanwhile and Iceberg's commit retry put the delta on top
    of that commit (its validations passed), that commit."""

    snapshot: int
    parent: int | None
    #: The table as the commit left it (Iceberg's ``Table``): the commits between the base and
    #: ``parent`` can be read from it.
    table: JavaObject = field(default=None, compare=False, repr=False)

    def follows(self, base: int | None) -> bool:
        """Whether nothing was committed between ``base`` and this snapshot."""
        return self.parent == base


@dataclass(frozen=True)
class StagedDelta:
    """A row delta's files, stored in the warehouse, not yet committed."""

    table: DeltaTable
    data_files: tuple[JavaObject, ...]
    #: The position-delete files (v2: one per partition) or the batch's DVs (v3: one per data
    #: file), or an equality-delete file.
    delete_files: tuple[JavaObject, ...]
    rows: int
    deleted_keys: int
    #: Warehouse locations of the files written (orphans until the commit names them).
    locations: tuple[str, ...]
    #: The data files the position deletes name (the commit checks they are still live).
    referenced: tuple[str, ...] = ()
    #: The delete files the batch's DVs replace (their data files' older DVs, v2 files).
    removed_deletes: tuple[JavaObject, ...] = ()


class RowDeltaWriter:
    """Row deltas to the Iceberg tables of one Spark session (driver side, one thread)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        jvm = spark.sparkContext._jvm
        gateway = spark.sparkContext._gateway
        assert jvm is not None and gateway is not None
        self._jvm = jvm
        self._gateway = gateway
        self._layouts: dict[tuple[str, ...], DeltaLayout] = {}
        self._vectors = VectorWriter(jvm)
        #: The session's Hadoop configuration, parsed once (footers are read with it).
        self._hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
        #: Java classes, looked up once (each ``jvm.a.b.C`` is a round trip per name part).
        iceberg = jvm.org.apache.iceberg
        self._iceberg = _Classes(
            spark3_util=iceberg.spark.Spark3Util,
            schema_parser=iceberg.SchemaParser,
            spec_parser=iceberg.PartitionSpecParser,
            order_parser=iceberg.SortOrderParser,
            json_util=iceberg.util.JsonUtil,
            table_util=iceberg.TableUtil,
            parquet_util=iceberg.parquet.ParquetUtil,
            files=iceberg.Files,
            metrics_config=iceberg.MetricsConfig,
            footer_reader=iceberg.shaded.org.apache.parquet.hadoop.ParquetFileReader,
            hadoop_path=jvm.org.apache.hadoop.fs.Path,
            empty_stream=jvm.java.util.stream.Stream,
            data_files=iceberg.DataFiles,
            file_metadata=iceberg.FileMetadata,
            parquet=iceberg.FileFormat.PARQUET,
            java_files=jvm.java.nio.file.Files,
            java_file=jvm.java.io.File,
            java_int=jvm.int,
        )

    # ---- loading ---------------------------------------------------------------------------

    def open(self, name: str, key: tuple[str, ...], table: str) -> DeltaTable:
        """Load ``name`` (a Spark SQL table name) and its layout; ``key``: its key columns."""
        with spark_errors(f"load Iceberg table {name}", table):
            c = self._iceberg
            java = c.spark3_util.loadIcebergTable(self.spark._jsparkSession, name)
            texts = (
                str(c.schema_parser.toJson(java.schema())),
                str(c.spec_parser.toJson(java.spec())),
                str(c.order_parser.toJson(java.sortOrder())),
                str(c.json_util.mapper().writeValueAsString(java.properties())),
                str(c.table_util.formatVersion(java)),
                *key,
            )
            snapshot = java.currentSnapshot()
            base = None if snapshot is None else int(snapshot.snapshotId())
        layout = self._layouts.get(texts)
        if layout is None:
            layout = self._layouts[texts] = parse_layout(
                texts[0],
                texts[1],
                texts[2],
                json.loads(texts[3]),
                format_version=int(texts[4]),
                key=key,
            )
        return DeltaTable(name, java, layout, base)

    # ---- files -----------------------------------------------------------------------------

    def stage(
        self,
        target: DeltaTable,
        chunks: Iterable[tuple[pa.Table, pa.Table]],
        table: str,
        positions: PositionLookup | None = None,
    ) -> StagedDelta:
        """Store the upserted rows and the deleted keys (``chunks`` of both, each key in one
        chunk only: ``KeyedChanges.delta_chunks``) as the table's new files: the rows as one
        data file per partition, the keys as an equality-delete file, or, with ``positions``,
        the rows they replace as position-delete files (one per partition they are in)."""
        layout = target.layout
        folder = self._staging_folder()
        try:
            data = DataStaging(folder, layout, lambda: self.new_location(target, "data"))
            deleted = ParquetStaging(
                os.path.join(folder, "eq-deletes.parquet"), layout.arrow_schema(layout.key),
                layout.properties, deletes=True,
            )  # fmt: skip
            for rows, keys in chunks:
                fitted = fit(rows, layout, table, whole=True) if rows.num_rows else None
                gone = fit(keys, layout, table, whole=False) if keys.num_rows else None
                if fitted is not None:
                    require_unique_keys(fitted.select(list(layout.key)), table)
                new = data.split(fitted)
                if positions is not None:
                    positions.chunk(new, gone)
                elif gone is not None:
                    deleted.write(gone)
                data.write(new)
            by_position = positions.deletes() if positions is not None else []
            vectors = None
            if by_position and layout.format_version >= 3:  # DVs, no position-delete file
                vectors = self._vectors.stage(
                    target, by_position, table, lambda part: self._partition(target, part)
                )
            return self._store_staged(target, data, deleted, by_position, folder, table, vectors)
        except OSError as exc:
            raise_os_error(exc, folder, "writing row-delta staging files")
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _staging_folder(self) -> str:
        try:
            return tempfile.mkdtemp(prefix="binlake-delta-")
        except OSError as exc:
            raise_os_error(exc, tempfile.gettempdir(), "creating a row-delta staging folder")

    def _store_staged(
        self,
        target: DeltaTable,
        data: DataStaging,
        deleted: ParquetStaging,
        by_position: Sequence[PositionDeletes],
        folder: str,
        table: str,
        vectors: StagedVectors | None = None,
    ) -> StagedDelta:
        """The staged files stored in the warehouse: the data files, and the position deletes
        ``by_position`` as one Parquet file per partition (v2) unless ``vectors`` (v3: the
        batch's DVs, stored already) hold them."""
        deleted_size = deleted.close()
        data_files: list[JavaObject] = []
        delete_files: list[JavaObject] = list(vectors.delete_files) if vectors else []
        locations: list[str] = [vectors.location] if vectors else []
        with spark_errors(f"write row-delta files of {target.name}", table):
            for file in data.files():
                size = file.staging.close()
                location, metrics = self._store(target, file.staging.path, "data", at=file.location)
                locations.append(location)
                sorted_ = bool(target.layout.sort) and file.staging.chunks == 1
                data_files.append(
                    self._data_file(target, file.partition, location, size, metrics, sorted_)
                )
            files_of = () if target.layout.format_version >= 3 else by_position  # v3: DVs
            for i, group in enumerate(files_of):
                path = os.path.join(folder, f"deletes-{i}.parquet")
                size = write_parquet(group.rows, path, target.layout.properties, deletes=True)
                location, metrics = self._store(target, path, "deletes", by_position=True)
                locations.append(location)
                delete_files.append(
                    self._position_delete_file(target, group, location, size, metrics)
                )
            if deleted.rows:
                location, metrics = self._store(target, deleted.path, "eq-deletes")
                locations.append(location)
                delete_files.append(
                    self._delete_file(target, location, deleted_size, metrics, target.layout)
                )
        return StagedDelta(
            target,
            tuple(data_files),
            tuple(delete_files),
            sum(file.staging.rows for file in data.files()),
            deleted.rows + sum(group.rows.num_rows for group in by_position),
            tuple(locations),
            tuple(sorted({path for group in by_position for path in group.referenced})),
            vectors.removed if vectors else (),
        )

    def stage_stored(self, target: DeltaTable, locations: Sequence[str], table: str) -> StagedDelta:
        """Data files other writers already stored in the table's data folder (a snapshot's
        chunk tasks, on the executors), staged for ``commit`` as ``stage``'s are: each a
        ``DataFile`` with the metrics Iceberg's own writer records, read from its footer:
        with the session's Hadoop configuration where the table's ``FileIO`` is Hadoop's (the
        embedded and JDBC catalogs' default), else through the ``FileIO``."""
        c = self._iceberg
        rows = 0
        with spark_errors(f"read the data files to add to {target.name}", table):
            io, spec = target.java.io(), target.java.spec()
            metrics_config = c.metrics_config.forTable(target.java)
            hadoop_io = str(io.getClass().getName()) == HADOOP_FILE_IO
            files = []
            for location in locations:
                source = io.newInputFile(location)
                if hadoop_io:
                    footer = c.footer_reader.readFooter(self._hadoop_conf, c.hadoop_path(location))
                    metrics = c.parquet_util.footerMetrics(
                        footer, c.empty_stream.empty(), metrics_config
                    )
                else:
                    metrics = c.parquet_util.fileMetrics(source, metrics_config)
                rows += int(metrics.recordCount())
                files.append(
                    c.data_files.builder(spec)
                    .withInputFile(source)
                    .withFormat(c.parquet)
                    .withMetrics(metrics)
                    .build()
                )
        return StagedDelta(target, tuple(files), (), rows, 0, tuple(locations))

    def new_location(self, target: DeltaTable, kind: str) -> str:
        """A new file's location in the table's data folder, as Iceberg would place its own."""
        with spark_errors(f"name a new file of {target.name}"):
            name = f"binlake-{uuid.uuid4()}-{kind}.parquet"
            return str(target.java.locationProvider().newDataLocation(name))

    def _store(
        self,
        target: DeltaTable,
        staging: str,
        kind: str,
        *,
        at: str | None = None,
        by_position: bool = False,
    ) -> tuple[str, Any]:
        """Stream the staging file into the table's FileIO (at ``at``, else a new location);
        (location, Iceberg metrics: a position-delete file's keep whole path bounds)."""
        c = self._iceberg
        location = at if at is not None else self.new_location(target, kind)
        stream = target.java.io().newOutputFile(location).create()
        try:
            c.java_files.copy(c.java_file(staging).toPath(), stream)
        finally:
            stream.close()
        config = c.metrics_config
        metrics = config.forPositionDelete(target.java) if by_position else None
        return location, self.local_metrics(staging, metrics or config.forTable(target.java))

    def local_metrics(self, path: str, metrics_config: JavaObject) -> JavaObject:
        """Iceberg's metrics of the local Parquet file ``path``, from its footer."""
        c = self._iceberg
        local = c.hadoop_path(f"file://{os.path.abspath(path)}")
        footer = c.footer_reader.readFooter(self._hadoop_conf, local)
        return c.parquet_util.footerMetrics(footer, c.empty_stream.empty(), metrics_config)

    def _data_file(
        self,
        target: DeltaTable,
        partition: FilePartition,
        location: str,
        size: int,
        metrics: JavaObject,
        sorted_: bool,
    ) -> JavaObject:
        c = self._iceberg
        spec, values = self._partition(target, partition)
        builder = c.data_files.builder(spec)
        if values is not None:
            builder = builder.withPartition(values)
        builder = (
            builder.withPath(location)
            .withFileSizeInBytes(size)
            .withFormat(c.parquet)
            .withMetrics(metrics)
        )
        if sorted_:  # one chunk, sorted by ``fit``: the file is in the table's sort order
            builder = builder.withSortOrder(target.java.sortOrder())
        return builder.build()

    def _partition(
        self, target: DeltaTable, partition: FilePartition
    ) -> tuple[JavaObject, JavaObject | None]:
        """The Java spec of ``partition`` and its values (a ``StructLike``; None: the spec is
        unpartitioned), parsed by Iceberg from their single-value JSON."""
        spec = target.java.specs().get(partition.spec_id)
        if spec is None:
            raise KeyIndexUntrustedError(
                f"table {target.name}: no partition spec {partition.spec_id}",
                reason="lineage",
            )
        if spec.isUnpartitioned():
            return spec, None
        parser = self._jvm.org.apache.iceberg.SingleValueParser
        return spec, parser.fromJson(spec.partitionType(), partition.values)

    def _delete_file(
        self,
        target: DeltaTable,
        location: str,
        size: int,
        metrics: JavaObject,
        layout: DeltaLayout,
    ) -> JavaObject:
        c = self._iceberg
        spec = target.java.spec()  # unpartitioned (``DeltaLayout.equality_refusal``)
        ids = self._gateway.new_array(c.java_int, len(layout.key))
        for i, field_id in enumerate(layout.key_field_ids):
            ids[i] = field_id
        return (
            c.file_metadata.deleteFileBuilder(spec)
            .ofEqualityDeletes(ids)
            .withPath(location)
            .withFileSizeInBytes(size)
            .withFormat(c.parquet)
            .withMetrics(metrics)
            .build()
        )

    def _position_delete_file(
        self,
        target: DeltaTable,
        group: PositionDeletes,
        location: str,
        size: int,
        metrics: JavaObject,
    ) -> JavaObject:
        """A position-delete file in the spec and partition of the data files it names."""
        spec, values = self._partition(target, group.partition)
        return self._position_delete(spec, values, location, size, metrics, group.referenced)

    def _position_delete(
        self,
        spec: JavaObject,
        values: JavaObject | None,
        location: str,
        size: int,
        metrics: JavaObject,
        referenced: Sequence[str],
    ) -> JavaObject:
        c = self._iceberg
        builder = c.file_metadata.deleteFileBuilder(spec)
        if values is not None:
            builder = builder.withPartition(values)
        builder = (
            builder.ofPositionDeletes()
            .withPath(location)
            .withFileSizeInBytes(size)
            .withFormat(c.parquet)
            .withMetrics(metrics)
        )
        if len(referenced) == 1:  # file-scoped: a reader applies it to that data file only
            builder = builder.withReferencedDataFile(referenced[0])
        return builder.build()

    # ---- the data folder: files stored by others, orphans ---------------------------------

    def data_folder(self, target: DeltaTable, table: str) -> str:
        return data_folder(target, table)

    def unreferenced(
        self, target: DeltaTable, prefix: str, table: str, keep: Collection[str] = ()
    ) -> list[str]:
        return unreferenced(self.spark, target, prefix, table, keep)

    def delete(self, target: DeltaTable, locations: Sequence[str], table: str) -> None:
        delete_files(target, locations, table)

    # ---- warming up ------------------------------------------------------------------------

    def warm(self) -> None:
        """Run the Python and Java code of ``stage`` once on a one-row file in a temporary
        folder (no table, no warehouse, nothing committed): a new JVM loads the classes and a
        new process imports pyarrow's writer before the first batch needs them."""
        c = self._iceberg
        id_field = pa.field("id", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"1"})
        rows = pa.Table.from_arrays([pa.array([1], pa.int64())], schema=pa.schema([id_field]))
        with tempfile.TemporaryDirectory(prefix="binlake-warm-") as folder:
            path = os.path.join(folder, "warm.parquet")
            size = write_parquet(rows, path, {}, deletes=False)
            with spark_errors("warm up the row-delta writer"):
                metrics = self.local_metrics(path, c.metrics_config.getDefault())
                spec = self._jvm.org.apache.iceberg.PartitionSpec.unpartitioned()
                c.data_files.builder(spec).withPath(path).withFileSizeInBytes(size).withFormat(
                    c.parquet
                ).withMetrics(metrics).build()
                ids = self._gateway.new_array(c.java_int, 1)
                ids[0] = 1
                c.file_metadata.deleteFileBuilder(spec).ofEqualityDeletes(ids).withPath(
                    path
                ).withFileSizeInBytes(size).withFormat(c.parquet).withMetrics(metrics).build()
                self._position_delete(spec, None, path, size, metrics, [path])

    # ---- the commit ------------------------------------------------------------------------

    def commit(self, staged: StagedDelta, properties: Mapping[str, str], table: str) -> Committed:
        """Commit the staged files in one snapshot whose summary carries ``properties`` (it is
        made even with no file: the table's position moves); its snapshot and parent."""
        props = checked_properties(properties)
        target = staged.table
        with spark_errors(f"row-delta commit to {target.name}", table):
            transaction = target.java.newTransaction()
            delta = transaction.newRowDelta()
            for data_file in staged.data_files:
                delta = delta.addRows(data_file)
            for delete_file in staged.delete_files:
                delta = delta.addDeletes(delete_file)
            for replaced in staged.removed_deletes:  # DVs merged into the batch's
                delta = delta.removeDeletes(replaced)
            for key, value in props.items():
                delta = delta.set(key, value)
            if target.base_snapshot is not None:
                delta = delta.validateFromSnapshot(target.base_snapshot)
            if staged.referenced:  # a compaction or DELETE that removed one fails the commit
                files = self._jvm.java.util.ArrayList()
                for path in staged.referenced:
                    files.add(path)
                delta = delta.validateDataFilesExist(files).validateDeletedFiles()
            delta.commit()
            seen = transaction.table()
            snapshot_id = int(seen.currentSnapshot().snapshotId())
            move_tags(transaction, seen, snapshot_id, props)
            transaction.commitTransaction()
            # After a retry the transaction's view is the metadata it committed: the parent is
            # the commit the delta went on top of.
            parent = transaction.table().snapshot(snapshot_id).parentId()
            parent_id = None if parent is None else int(parent)
            return Committed(snapshot_id, parent_id, transaction.table())
