"""A chunk written by its task as one Parquet data file of the Iceberg table (no JVM on the data
path); the driver commits the files (``binlake.lake.write.row_delta``: ``stage_stored``,
``commit``).

Why: in Spark 3.5 a DataFrame write is row based: ``mapInArrow``'s batches would be turned back
into rows in the JVM and encoded again by Iceberg's Parquet writer, which costs more CPU than
reading them did (docs/benchmarks.md). pyarrow encodes the batches the task holds, in C++.

The file is what Iceberg's own writer makes for the table: its schema comes from the table's
current Iceberg schema (``FileTarget.schema``: each column's field id as ``PARQUET:field_id``,
NOT NULL columns REQUIRED), the table's ``write.parquet.*`` options (codec and level, page and
dictionary sizes, row-group size, decimals of precision up to 18 as INT32/INT64), a CRC on every
page. A null in a REQUIRED column (a zero date in a NOT NULL DATETIME) is an ``ApplyError``
naming the column, before the file exists.

Names: ``<prefix>-<chunk>-<attempt>.parquet`` in the table's data folder; the prefix names the
copy (``binlake-copy-<id>``), so a resumed copy finds files no commit references (an attempt
killed after writing, a crash before the commit) and deletes them. A failed attempt deletes its
own partial file. On a local warehouse the file is fsynced, and so are its folder and every
folder above it up to the warehouse's (``durable_root``: a new table's folders are the JVM's,
never fsynced; the power-cut tier found chunk files lost with them), before the task reports
it (the commit that references it comes later, from the driver); other file systems (S3, GCS,
HDFS, ABFS) are written through ``pyarrow.fs`` with the executor's own credentials, and are
durable when the stream closes.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from binlake.errors import ApplyError, FileAccessError
from binlake.storage.durable import fsync_dir, raise_os_error


@dataclass(frozen=True, slots=True)
class FileTarget:
    """Where and how the tasks of one copy write their files."""

    #: The table's data folder: a local path, ``file:/...``, or a URI ``pyarrow.fs`` reads.
    data_dir: str
    #: Names the copy (``binlake-copy-<id>``).
    prefix: str
    #: The Parquet schema: the table's columns with their field ids and nullability.
    schema: pa.Schema
    #: ``pyarrow.parquet.ParquetWriter`` options from the table's properties.
    options: Mapping[str, Any] = field(default_factory=dict)
    #: A row group is written once this many rows, or ``row_group_bytes`` of Arrow data, are
    #: buffered (pyarrow writes one row group per call: batches are gathered first).
    row_group_rows: int = 1 << 20
    row_group_bytes: int = 128 << 20
    #: The local warehouse folder holding ``data_dir`` (None: not local): the folders from
    #: ``data_dir`` up to it are fsynced with each file (the JVM makes a new table's folders
    #: without fsyncing them, and a folder whose entry a power cut drops takes its files along).
    durable_root: str | None = None

    def name(self, chunk: int, attempt: str) -> str:
        return f"{self.prefix}-{chunk:06d}-{attempt}.parquet"


def write_chunk_file(
    target: FileTarget, chunk: int, attempt: str, batches: Iterator[pa.RecordBatch]
) -> tuple[str | None, int, int]:
    """Write ``batches`` (the chunk's columns, in the table's column order) as one file;
    (its location, its size in bytes, its rows). A chunk without rows writes no file
    (location None)."""
    first = next(batches, None)
    if first is None:
        return None, 0, 0
    name = target.name(chunk, attempt)
    local = local_path(target.data_dir)
    fitted = (_fit(batch, target.schema) for batch in itertools.chain([first], batches))
    target = replace(target, options=with_dictionaries(target.options, first))
    if local is not None:
        path = local / name
        size, rows = _write_local(path, target, fitted)
        return str(path), size, rows
    location = target.data_dir.rstrip("/") + "/" + name
    size, rows = _write_remote(location, target, fitted)
    return location, size, rows


def local_path(data_dir: str) -> Path | None:
    """The local folder of a data location (None when it is not on a local file system)."""
    if data_dir.startswith("file:"):
        rest = data_dir[len("file:") :]
        return Path("/" + rest.lstrip("/"))
    if "://" not in data_dir:
        return Path(data_dir)
    return None


def with_dictionaries(options: Mapping[str, Any], first: pa.RecordBatch) -> dict[str, Any]:
    """``options`` with ``use_dictionary`` naming the columns whose first page a dictionary
    makes smaller (``dictionary_pays``), unless the options already choose."""
    if "use_dictionary" in options:
        return dict(options)
    rows = int(options.get("max_rows_per_page", 20000))
    page = first.slice(0, rows)
    names = [
        f.name
        for f, column in zip(page.schema, page.columns, strict=True)
        if dictionary_pays(column)
    ]
    return {**options, "use_dictionary": names}


def dictionary_pays(values: pa.Array) -> bool:
    """Whether dictionary encoding makes ``values`` (a column's first page) smaller than plain
    encoding: parquet-mr's test, which Iceberg's writer applies at the end of a column's first
    page (dictionary plus bit-packed indices against plain; it falls back to plain otherwise).
    pyarrow has no such test: it keeps a dictionary until it reaches its size limit, which for
    a column of distinct values costs a dictionary as large as the values plus the indices
    (measured on the snapshot benchmark's table: 2.4x the file, 2.7x the writer's CPU)."""
    present = values.drop_null()
    count = len(present)
    kind = values.type
    if count == 0 or pa.types.is_boolean(kind) or pa.types.is_dictionary(kind):
        return False
    distinct = pc.unique(present)
    width = _plain_width(kind)
    if width is None:  # strings and binaries: a 4-byte length before each value
        plain = 4 * count + int(pc.sum(pc.binary_length(present)).as_py() or 0)
        dictionary = 4 * len(distinct) + int(pc.sum(pc.binary_length(distinct)).as_py() or 0)
    else:
        plain, dictionary = width * count, width * len(distinct)
    indices = (count * max(1, (len(distinct) - 1).bit_length()) + 7) // 8
    return dictionary + indices < plain


def _plain_width(kind: pa.DataType) -> int | None:
    """Bytes per value of a fixed-width column in plain encoding (None: variable width)."""
    if pa.types.is_decimal(kind):  # INT32, INT64 (store_decimal_as_integer), else fixed bytes
        digits = int(kind.precision)
        return 4 if digits <= 9 else 8 if digits <= 18 else (digits * 3322 // 1000 + 9) // 8
    if isinstance(kind, pa.FixedSizeBinaryType) or pa.types.is_primitive(kind):
        return max(1, int(kind.bit_width) // 8)
    return None


def _fit(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` under the file schema (field ids, nullability); the types are the same."""
    for column, target in zip(batch.columns, schema, strict=True):
        if column.null_count and not target.nullable:
            raise ApplyError(
                f"column {target.name} is NOT NULL in the Iceberg table and a source row has "
                "no value for it (a zero date, read as null)",
                hint="allow NULL in the source column, or fix the zero dates in it",
            )
    return pa.RecordBatch.from_arrays(batch.columns, schema=schema)


def _writer(sink: Any, target: FileTarget) -> pq.ParquetWriter:
    return pq.ParquetWriter(sink, target.schema, **dict(target.options))


def _write_local(
    path: Path, target: FileTarget, batches: Iterator[pa.RecordBatch]
) -> tuple[int, int]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as sink:
            with _writer(sink, target) as writer:
                rows = _write_row_groups(writer, target, batches)
            sink.flush()
            os.fsync(sink.fileno())
    except BaseException as exc:
        path.unlink(missing_ok=True)  # a failed attempt leaves no partial file behind
        if isinstance(exc, OSError):
            raise_os_error(exc, path, "writing a snapshot chunk file")
        raise
    fsync_dir(path.parent, "snapshot chunk files")
    _fsync_up_to(path.parent, target.durable_root)
    return path.stat().st_size, rows


def _fsync_up_to(folder: Path, root: str | None) -> None:
    """Fsync the parents of ``folder`` up to ``root`` (included), when it is inside it."""
    if root is None:
        return
    top = Path(root)
    if top not in folder.parents:
        return
    for parent in folder.parents:
        fsync_dir(parent, "snapshot chunk files")
        if parent == top:
            return


def _write_remote(
    location: str, target: FileTarget, batches: Iterator[pa.RecordBatch]
) -> tuple[int, int]:
    import pyarrow.fs as pafs

    try:
        filesystem, path = pafs.FileSystem.from_uri(location)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as error:
        raise FileAccessError(
            f"the executor cannot open the warehouse location {location}: {error}",
            file=location,
            hint="executors write snapshot files through pyarrow.fs: give them the file "
            "system's credentials (environment) or use a local or mounted warehouse",
        ) from None
    try:
        with filesystem.open_output_stream(path) as sink, _writer(sink, target) as writer:
            rows = _write_row_groups(writer, target, batches)
    except BaseException:
        with contextlib.suppress(OSError, pa.ArrowException):
            filesystem.delete_file(path)
        raise
    return int(filesystem.get_file_info(path).size), rows


def _write_row_groups(
    writer: pq.ParquetWriter, target: FileTarget, batches: Iterator[pa.RecordBatch]
) -> int:
    """Row groups of ``row_group_rows`` rows (or ``row_group_bytes``) from smaller batches: the
    task holds at most one row group of Arrow data."""
    pending: list[pa.RecordBatch] = []
    rows = size = total = 0
    for batch in batches:
        pending.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
        if rows >= target.row_group_rows or size >= target.row_group_bytes:
            writer.write_table(pa.Table.from_batches(pending, target.schema), row_group_size=rows)
            total += rows
            pending, rows, size = [], 0, 0
    if pending:
        writer.write_table(pa.Table.from_batches(pending, target.schema), row_group_size=rows)
        total += rows
    return total
