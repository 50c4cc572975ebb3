"""A row delta's deletes on a format-v3 table: deletion vectors (DVs), one Puffin file a batch.

Iceberg format v3 takes no new position-delete *files*: a row deleted by position is a bit in the
DV of its data file, and a snapshot holds at most one DV per data file (spec, "Deletion
Vectors"). The batch's position deletes (``PositionLookup.deletes``: data file, position, from
the key index) become, per data file they touch, a DV holding them and every position the table
already deletes in that file at the base snapshot B:

1. ``previous``: B's deletes of the touched data files, from B's *delete* manifests only
   (``Snapshot.deleteManifests``, ``ManifestFiles.readDeleteManifest``: live entries): each
   touched file's DV, and the position-delete files of format v2 that may name it (a table
   upgraded to v3 keeps them; the spec wants a new DV to hold their deletes too, as readers then
   ignore them; one whose ``file_path`` bounds exclude every touched file is not read). The cost
   is one read of B's delete manifests (one manifest entry per delete file of the table, no data
   file's entry, no data), and of the touched files' old deletes; not of the table's rows.
2. ``merged``: the old DVs read through the table's ``FileIO`` (the blob alone, at its offset),
   each CRC-checked (``deletion_vectors.decode_vector``), its cardinality checked against its
   manifest entry; the v2 files read whole (every Parquet page's CRC checked), their rows of the
   touched files kept. A DV missing or damaged is a ``DeletionVectorError``: nothing is written.
3. ``store``: one Puffin file (``deletion_vectors.puffin_file``) in the table's data folder,
   written through the ``FileIO``, and one ``DeleteFile`` per DV
   (``FileMetadata.deleteFileBuilder(spec).ofPositionDeletes().withFormat(PUFFIN)``, in the
   spec and partition of its data file (the key index's, ``PositionDeletes.partition``), with the
   referenced data file, the blob's offset and size, its cardinality as record count);
   the old DVs and the file-scoped v2 files of the touched files are the delta's
   ``removeDeletes`` (Iceberg's ``BaseDVFileWriter`` does the same).

A commit whose DV loses to another writer's DV for the same data file fails Iceberg's validation
("Found concurrently added DV"), one whose old DV another writer removed fails with "Missing
required files to delete": both are commit conflicts, and the batch is planned again.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from py4j.protocol import Py4JJavaError

import binlake
from binlake.errors import DeletionVectorError
from binlake.lake.spark.errors import delete_file_error, spark_errors
from binlake.lake.spark.lookup import java_items
from binlake.lake.write.deletion_vectors import Positions, decode_vector, puffin_file
from binlake.lake.write.delta_files import FILE_PATH_FIELD_ID, PositionDeletes
from binlake.lake.write.partitions import FilePartition

JavaObject = Any
#: A partition's Java spec and values (None: its spec is unpartitioned).
Partition = Callable[[FilePartition], tuple[JavaObject, JavaObject | None]]
_NOT_FOUND = ("NotFoundException", "FileNotFoundException", "NoSuchFileException")


@dataclass
class Previous:
    """A base snapshot's deletes of some data files."""

    #: data file -> its DV (an Iceberg ``DeleteFile``).
    vectors: dict[str, JavaObject] = field(default_factory=dict)
    #: v2 position-delete files that name one data file (file-scoped: removed when merged).
    scoped: dict[str, list[JavaObject]] = field(default_factory=dict)
    #: v2 position-delete files that may name several (read, kept).
    shared: list[JavaObject] = field(default_factory=list)

    def removed(self) -> list[JavaObject]:
        """The delete files the new DVs replace."""
        return [*self.vectors.values(), *(f for files in self.scoped.values() for f in files)]


@dataclass(frozen=True)
class StagedVectors:
    """A batch's DVs, stored in one Puffin file, not yet committed."""

    location: str
    delete_files: tuple[JavaObject, ...]
    #: The delete files they replace (``RowDelta.removeDeletes``).
    removed: tuple[JavaObject, ...]
    #: The positions the batch itself deletes.
    rows: int


class VectorWriter:
    """Deletion vectors for the row deltas of one Spark session (driver side)."""

    def __init__(self, jvm: JavaObject) -> None:
        iceberg = jvm.org.apache.iceberg
        self._util = iceberg.util.ContentFileUtil
        self._manifests = iceberg.ManifestFiles
        self._file_metadata = iceberg.FileMetadata
        self._puffin = iceberg.FileFormat.PUFFIN
        self._conversions = iceberg.types.Conversions
        self._string = iceberg.types.Types.StringType.get()

    def stage(
        self, target: Any, deletes: Sequence[PositionDeletes], table: str, partition: Partition
    ) -> StagedVectors | None:
        """Store the DVs of the position deletes ``deletes`` (``file_path``, ``pos``, by the
        partition of their data files) merged with the table's older deletes of those data
        files; None when there are none. ``partition``: a partition's Java spec and values."""
        batch: dict[str, Positions] = {}
        partitions: dict[str, FilePartition] = {}
        for group in deletes:
            for data_file, positions in _by_file(group.rows).items():
                batch[data_file] = positions
                partitions[data_file] = group.partition
        if not batch:
            return None
        rows = sum(group.rows.num_rows for group in deletes)
        with spark_errors(f"read the deletion vectors of {target.name}", table):
            previous = self.previous(target, batch.keys())
            for data_file, positions in self.merged(target, previous, batch.keys(), table):
                batch[data_file].union(positions)
            placed = {path: partition(part) for path, part in partitions.items()}
            return self._store(target, batch, previous.removed(), rows, placed)

    def previous(self, target: Any, data_files: Collection[str]) -> Previous:
        """The base snapshot's live position deletes that may reach ``data_files``."""
        out = Previous()
        if target.base_snapshot is None:
            return out
        java = target.java
        io_, specs = java.io(), java.specs()
        base = java.snapshot(target.base_snapshot)
        if str(base.summary().get("total-delete-files")) == "0":  # none to read
            return out
        for manifest in java_items(base.deleteManifests(io_)):
            if not (manifest.hasAddedFiles() or manifest.hasExistingFiles()):
                continue
            reader = self._manifests.readDeleteManifest(manifest, io_, specs)
            try:
                for delete_file in java_items(reader):
                    self._sort(delete_file, data_files, out)
            finally:
                reader.close()
        return out

    def _sort(self, delete_file: JavaObject, data_files: Collection[str], out: Previous) -> None:
        referenced = self._util.referencedDataFileLocation(delete_file)
        if referenced is not None:
            if str(referenced) not in data_files:
                return
            if self._util.isDV(delete_file):
                out.vectors[str(referenced)] = delete_file
            else:
                out.scoped.setdefault(str(referenced), []).append(delete_file)
        elif str(delete_file.content().toString()) == "POSITION_DELETES" and self._may_name(
            delete_file, data_files
        ):
            out.shared.append(delete_file)

    def _may_name(self, delete_file: JavaObject, data_files: Collection[str]) -> bool:
        """Whether a v2 position-delete file's ``file_path`` bounds (whole for position deletes;
        a truncated lower bound is below every value, a truncated upper one above) may hold one
        of ``data_files``: a file that cannot is not read. ASCII only (orders agree there)."""
        lower, upper = delete_file.lowerBounds(), delete_file.upperBounds()
        low = None if lower is None else lower.get(FILE_PATH_FIELD_ID)
        high = None if upper is None else upper.get(FILE_PATH_FIELD_ID)
        if low is None or high is None:
            return True
        first = str(self._conversions.fromByteBuffer(self._string, low))
        last = str(self._conversions.fromByteBuffer(self._string, high))
        if not all(text.isascii() for text in (first, last, *data_files)):
            return True
        return any(first <= path <= last for path in data_files)

    def merged(
        self, target: Any, previous: Previous, data_files: Collection[str], table: str
    ) -> Iterator[tuple[str, Positions]]:
        """(data file, positions) of every older delete of ``data_files`` in ``previous``."""
        io_ = target.java.io()
        for data_file, dv in previous.vectors.items():
            yield data_file, _read_vector(io_, dv, data_file, table)
        v2 = [f for files in previous.scoped.values() for f in files] + previous.shared
        for delete_file in v2:
            yield from _read_v2(io_, str(delete_file.location()), data_files, table)

    def _store(
        self,
        target: Any,
        vectors: Mapping[str, Positions],
        removed: list[JavaObject],
        rows: int,
        placed: Mapping[str, tuple[JavaObject, JavaObject | None]],
    ) -> StagedVectors:
        """One Puffin file of ``vectors`` and a ``DeleteFile`` per DV, in its data file's spec
        and partition (``placed``: the Java spec and values, None when unpartitioned)."""
        java = target.java
        name = f"binlake-{uuid.uuid4()}-dv.puffin"
        location = str(java.locationProvider().newDataLocation(name))
        data, blobs = puffin_file(vectors, f"binlake {binlake.__version__}")
        stream = java.io().newOutputFile(location).create()
        try:
            stream.write(data)
        finally:
            stream.close()
        files = []
        for blob in blobs:
            spec, values = placed[blob.data_file]
            builder = self._file_metadata.deleteFileBuilder(spec).ofPositionDeletes()
            if values is not None:
                builder = builder.withPartition(values)
            files.append(
                builder.withFormat(self._puffin)
                .withPath(location)
                .withFileSizeInBytes(len(data))
                .withRecordCount(blob.cardinality)
                .withReferencedDataFile(blob.data_file)
                .withContentOffset(blob.offset)
                .withContentSizeInBytes(blob.length)
                .build()
            )
        return StagedVectors(location, tuple(files), tuple(removed), rows)


def delete_positions(
    util: JavaObject,
    io_: JavaObject,
    delete_file: JavaObject,
    data_files: Collection[str] | None,
    table: str,
) -> Iterator[tuple[str, Positions]]:
    """(data file, positions) of the rows the position delete ``delete_file`` (a DV, or a
    Parquet position-delete file) deletes in ``data_files`` (None: in every data file it
    names), checked as ``merged`` checks them. ``util``: Iceberg's ``ContentFileUtil``."""
    if util.isDV(delete_file):
        data_file = str(util.referencedDataFileLocation(delete_file))
        if data_files is None or data_file in data_files:
            yield data_file, _read_vector(io_, delete_file, data_file, table)
        return
    yield from _read_v2(io_, str(delete_file.location()), data_files, table)


def _by_file(deletes: pa.Table) -> dict[str, Positions]:
    paths = deletes.column("file_path")
    out = {}
    for path in pc.unique(paths).to_pylist():
        picked = deletes.filter(pc.equal(paths, path)).column("pos")
        out[str(path)] = Positions(picked.to_pylist())
    return out


def _read_vector(io_: JavaObject, dv: JavaObject, data_file: str, table: str) -> Positions:
    """A DV's positions, its blob alone read through the ``FileIO`` and checked."""
    location = str(dv.location())
    offset, length = int(dv.contentOffset()), int(dv.contentSizeInBytes())
    try:
        stream = io_.newInputFile(location).newStream()
    except Py4JJavaError as error:  # missing or unreadable
        raise _unreadable(location, data_file, table, error) from None
    try:
        stream.seek(offset)
        blob = bytes(stream.readNBytes(length))
    except Py4JJavaError as error:
        raise _unreadable(location, data_file, table, error) from None
    finally:
        stream.close()
    if len(blob) != length:
        raise _damaged(location, data_file, table, f"{len(blob)} of its {length} bytes")
    positions = decode_vector(blob, location, data_file, table)
    if len(positions) != int(dv.recordCount()):
        reason = f"it holds {len(positions)} positions, its manifest says {dv.recordCount()}"
        raise _damaged(location, data_file, table, reason)
    return positions


def _read_v2(
    io_: JavaObject, location: str, data_files: Collection[str] | None, table: str
) -> Iterator[tuple[str, Positions]]:
    """(data file, positions) of the rows of a Parquet position-delete file naming
    ``data_files`` (None: every row; every page's CRC checked)."""
    rows = _position_rows(io_, location, ["file_path", "pos"], table)
    if data_files is not None:
        rows = rows.filter(pc.is_in(rows.column("file_path"), pa.array(list(data_files))))
    yield from _by_file(rows).items()


def named_data_files(io_: JavaObject, location: str, table: str) -> set[str]:
    """The distinct ``file_path`` values of the Parquet position-delete file at ``location``,
    read through the table's ``FileIO`` (``io_``), every page's CRC checked; missing or damaged:
    a ``DeletionVectorError``."""
    column = _position_rows(io_, location, ["file_path"], table).column(0)
    return {str(p) for p in pc.unique(column).to_pylist()}


def _position_rows(io_: JavaObject, location: str, columns: list[str], table: str) -> pa.Table:
    """``columns`` of a Parquet position-delete file, read whole through the ``FileIO``, every
    page's CRC checked; missing or damaged: a ``DeletionVectorError``."""
    try:
        stream = io_.newInputFile(location).newStream()
        try:
            data = bytes(stream.readAllBytes())
        finally:
            stream.close()
    except Py4JJavaError as error:
        raise _unreadable(location, None, table, error) from None
    try:
        return pq.read_table(io.BytesIO(data), columns=columns, page_checksum_verification=True)
    except (OSError, pa.ArrowException) as error:
        raise _damaged(location, None, table, str(error)) from None


def _unreadable(
    location: str, data_file: str | None, table: str, error: Py4JJavaError
) -> DeletionVectorError:
    text = str(error.java_exception.toString()) if error.java_exception is not None else ""
    missing = any(mark in text for mark in _NOT_FOUND)
    reason = "missing" if missing else f"unreadable: {text or error}"
    return delete_file_error(location, table, reason, f"is {reason}", data_file)


def _damaged(location: str, data_file: str | None, table: str, reason: str) -> DeletionVectorError:
    return delete_file_error(location, table, reason, f"is damaged: {reason}", data_file)
