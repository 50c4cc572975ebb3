"""Parquet files written outside Spark (snapshot chunk tasks) committed to an Iceberg table
through Iceberg's Java API on the driver (Py4J; no Spark job), with binlake's properties.

* ``table_files``: what a writer needs of the table: its data folder (``write.data.path``, else
  ``<location>/data``), its Parquet schema (each column with its Iceberg field id and
  nullability, from the table's current schema) and its ``write.parquet.*`` options.
* ``FileAppender.append``: one snapshot adding the files, whose summary carries the given
  ``binlake.*`` properties (the files and the progress they stand for are one atomic commit).
  Each file becomes a ``DataFile`` with the metrics Iceberg's own writer records (value, null
  and NaN counts, lower and upper bounds per column, read from the file's footer by
  ``ParquetUtil.fileMetrics`` under the table's ``MetricsConfig``), so scans prune on them.
  ``newFastAppend`` adds one manifest per commit and rewrites none. The append and the
  ``binlake-applied`` / ``binlake-copy`` tags' move (``applied_tag.move_tags``) are one
  ``Transaction``: one metadata swap.
* ``FileAppender.unreferenced`` / ``delete``: files under the data folder whose names start with
  a prefix that no snapshot of the table's current state references (orphans an uncommitted
  attempt left), listed through Hadoop's ``FileSystem`` and deleted through the table's
  ``FileIO``: any warehouse Iceberg reads (local, HDFS, S3...).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from binlake.lake.applied_tag import move_tags
from binlake.lake.commit import checked_properties
from binlake.lake.delta_files import FIELD_ID, arrow_type_of, parquet_options
from binlake.lake.spark_errors import spark_errors


@dataclass(frozen=True)
class TableFiles:
    """Where and how files of one Iceberg table are written."""

    name: str
    #: The table's data folder (a URI or a path).
    data_dir: str
    #: The Parquet schema: every column with its field id, in the table's order.
    schema: pa.Schema
    #: ``pyarrow.parquet.ParquetWriter`` options for the table's properties.
    options: dict[str, Any] = field(default_factory=dict)


def parquet_schema(schema_json: str) -> pa.Schema:
    """The Parquet schema of an Iceberg schema (``SchemaParser.toJson``)."""
    fields = []
    for item in json.loads(schema_json)["fields"]:
        arrow = arrow_type_of(item["type"])
        if arrow is None:
            raise ValueError(f"column {item['name']}: Iceberg type {item['type']} not written here")
        metadata = {FIELD_ID: str(item["id"])}
        fields.append(pa.field(item["name"], arrow, not item["required"], metadata))
    return pa.schema(fields)


class FileAppender:
    """Commits files to the Iceberg tables of one Spark session (driver side; one thread per
    table at a time)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        iceberg = jvm.org.apache.iceberg
        self._spark3_util = iceberg.spark.Spark3Util
        self._schema_parser = iceberg.SchemaParser
        self._parquet_util = iceberg.parquet.ParquetUtil
        self._metrics_config = iceberg.MetricsConfig
        self._data_files = iceberg.DataFiles
        self._parquet = iceberg.FileFormat.PARQUET

    def _load(self, name: str) -> Any:
        return self._spark3_util.loadIcebergTable(self.spark._jsparkSession, name)

    def table_files(self, name: str, table: str) -> TableFiles:
        """What writers of ``name`` need (``table``: the source table, for messages)."""
        with spark_errors(f"load Iceberg table {name}", table):
            java = self._load(name)
            properties = {str(k): str(v) for k, v in dict(java.properties()).items()}
            schema_json = str(self._schema_parser.toJson(java.schema()))
            location = str(java.location()).rstrip("/")
        data_dir = properties.get("write.data.path") or f"{location}/data"
        return TableFiles(
            name, data_dir, parquet_schema(schema_json), parquet_options(properties, deletes=False)
        )

    def append(
        self, name: str, paths: Sequence[str], properties: Mapping[str, str], table: str
    ) -> int:
        """One snapshot adding ``paths`` (maybe none: the summary alone) with ``properties``;
        its snapshot id."""
        props = checked_properties(properties)
        with spark_errors(f"append files to {name}", table):
            java = self._load(name)
            io, spec = java.io(), java.spec()
            metrics_config = self._metrics_config.forTable(java)
            transaction = java.newTransaction()
            append = transaction.newFastAppend()
            for path in paths:
                source = io.newInputFile(path)
                metrics = self._parquet_util.fileMetrics(source, metrics_config)
                data_file = (
                    self._data_files.builder(spec)
                    .withInputFile(source)
                    .withFormat(self._parquet)
                    .withMetrics(metrics)
                    .build()
                )
                append = append.appendFile(data_file)
            for key, value in props.items():
                append = append.set(key, value)
            append.commit()
            seen = transaction.table()
            snapshot_id = int(seen.currentSnapshot().snapshotId())
            move_tags(transaction, seen, snapshot_id, props)
            transaction.commitTransaction()
            return snapshot_id

    def unreferenced(self, files: TableFiles, prefix: str, table: str) -> list[str]:
        """Files in the data folder whose names start with ``prefix`` that the table's current
        snapshot does not reference."""
        with spark_errors(f"list the data files of {files.name}", table):
            listed = self._list(files.data_dir, prefix)
            if not listed:
                return []
            query = f"SELECT file_path FROM {files.name}.files"
            referenced = {_base(str(row[0])) for row in self.spark.sql(query).collect()}
        return [path for path in listed if _base(path) not in referenced]

    def _list(self, folder: str, prefix: str) -> list[str]:
        hadoop = self._jvm.org.apache.hadoop.fs
        path = hadoop.Path(folder)
        conf = self.spark.sparkContext._jsc.hadoopConfiguration()
        filesystem = path.getFileSystem(conf)
        if not filesystem.exists(path):
            return []
        out = []
        for status in filesystem.listStatus(path):
            entry = status.getPath()
            if status.isFile() and str(entry.getName()).startswith(prefix):
                out.append(str(entry.toString()))
        return out

    def delete(self, name: str, paths: Sequence[str], table: str) -> None:
        """Delete ``paths`` through the table's ``FileIO``."""
        if not paths:
            return
        with spark_errors(f"delete orphan files of {name}", table):
            io = self._load(name).io()
            for path in paths:
                io.deleteFile(path)


def _base(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]
