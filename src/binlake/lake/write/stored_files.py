"""The data folder of a table: where a snapshot's chunk tasks store data files for
``RowDeltaWriter.stage_stored``, and the files there no snapshot references (stored by an
attempt never committed), found and deleted (``RowDeltaWriter.data_folder``, ``unreferenced``,
``delete`` call these)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Protocol

from pyspark.sql import SparkSession

from binlake.lake.spark.errors import spark_errors
from binlake.lake.write.delta_files import DeltaLayout


class FolderTable(Protocol):
    """What is used here of a ``row_delta.DeltaTable``."""

    @property
    def name(self) -> str: ...
    @property
    def java(self) -> Any: ...
    @property
    def layout(self) -> DeltaLayout: ...


def data_folder(target: FolderTable, table: str) -> str:
    """Where other writers store the table's data files (``stage_stored``):
    ``write.data.path``, else ``<location>/data`` (Iceberg's default)."""
    configured = target.layout.properties.get("write.data.path")
    if configured:
        return configured
    with spark_errors(f"read the location of {target.name}", table):
        return f"{str(target.java.location()).rstrip('/')}/data"


def unreferenced(
    spark: SparkSession, target: FolderTable, prefix: str, table: str, keep: Collection[str] = ()
) -> list[str]:
    """Files in the table's data folder whose names start with ``prefix`` that its current
    snapshot does not reference (stored by an attempt never committed), listed through
    Hadoop's ``FileSystem``: any warehouse Iceberg reads. ``keep``: locations the caller
    committed, or is about to commit: never in the answer; when the folder holds no
    other, the table's file list (a Spark job) is not read."""
    folder = data_folder(target, table)
    kept = {_base(location) for location in keep}
    with spark_errors(f"list the data files of {target.name}", table):
        listed = [path for path in _list(spark, folder, prefix) if _base(path) not in kept]
        if not listed:
            return []
        query = f"SELECT file_path FROM {target.name}.files"
        referenced = {_base(str(row[0])) for row in spark.sql(query).collect()}
    return [path for path in listed if _base(path) not in referenced]


def _list(spark: SparkSession, folder: str, prefix: str) -> list[str]:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(folder)
    filesystem = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not filesystem.exists(path):
        return []
    out = []
    for status in filesystem.listStatus(path):
        entry = status.getPath()
        if status.isFile() and str(entry.getName()).startswith(prefix):
            out.append(str(entry.toString()))
    return out


def delete_files(target: FolderTable, locations: Sequence[str], table: str) -> None:
    """Delete files no snapshot references, through the table's ``FileIO``."""
    if not locations:
        return
    with spark_errors(f"delete orphan files of {target.name}", table):
        io = target.java.io()
        for location in locations:
            io.deleteFile(location)


def _base(location: str) -> str:
    return location.rstrip("/").rsplit("/", 1)[-1]
