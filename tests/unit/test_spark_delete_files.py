"""A delete file Spark's read, or binlake's own checked read, cannot read: a typed
``DeletionVectorError`` (exit 73) whose line names the file and the table once each."""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from py4j.protocol import Py4JJavaError

from binlake.errors import DeletionVectorError, SparkStatementError
from binlake.lake.spark.errors import classify_spark_failure
from binlake.lake.write.deletion_vectors import Positions, decode_vector, encode_vector
from binlake.lake.write.vector_files import named_data_files

DATA = "/w/db/t/data/binlake-1-data.parquet"
DELETES = "/w/db/t/data/binlake-2-deletes.parquet"
HINT = DeletionVectorError.default_hint


def failed_read(cause: str, *frames: str) -> str:
    """The text of a Spark job that failed reading a table (as Py4J gives it, trimmed): the
    task's exception and its frames in the stage failure, then the cause again."""
    at = "".join(f"\n\tat {frame}" for frame in frames)
    return (
        "An error occurred while calling o202.getResult.\n"
        ": org.apache.spark.SparkException: Exception thrown in awaitResult: \n"
        "\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:56)\n"
        "Caused by: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 "
        "in stage 1.0 failed 4 times, most recent failure: Lost task 0.3 in stage 1.0 (TID 4) "
        f"(localhost executor driver): {cause}{at}\n"
        f"Caused by: {cause}{at}\n"
    )


LOADING_V2 = (
    "org.apache.iceberg.data.BaseDeleteLoader.readPosDeletes(BaseDeleteLoader.java:169)",
    "org.apache.iceberg.data.DeleteFilter.deletedRowPositions(DeleteFilter.java:244)",
)
LOADING_DV = (
    "org.apache.iceberg.deletes.BitmapPositionDeleteIndex.deserialize(BitmapPositionDeleteIndex"
    ".java:153)",
    "org.apache.iceberg.data.BaseDeleteLoader.readDV(BaseDeleteLoader.java:188)",
)
READING_DATA = (
    "org.apache.iceberg.parquet.VectorizedParquetReader$FileIterator.next(VectorizedParquetReader"
    ".java:145)",
    "org.apache.iceberg.spark.source.BaseReader.next(BaseReader.java:136)",
)


@pytest.mark.parametrize(
    ("cause", "frames", "line", "check"),
    [
        (
            f"org.apache.iceberg.exceptions.NotFoundException: File does not exist: {DELETES}",
            LOADING_V2,
            f"{DELETES}, table db.t: the delete file is missing",
            "missing",
        ),
        (
            "org.apache.iceberg.exceptions.NotFoundException: Failed to open input stream for "
            f"file: s3://w{DELETES}",
            LOADING_V2,
            f"s3://w{DELETES}, table db.t: the delete file is missing",
            "missing",
        ),
        (
            f"java.lang.RuntimeException: file:{DELETES} is not a Parquet file. Expected magic "
            "number at tail, but found [105, 108, 101, 10]",
            LOADING_V2,
            f"file:{DELETES}, table db.t: the delete file is damaged: RuntimeException: not a "
            "Parquet file. Expected magic number at tail, but found [105, 108, 101, 10]",
            "RuntimeException: not a Parquet file. Expected magic number at tail, but found "
            "[105, 108, 101, 10]",
        ),
        (
            "java.lang.IllegalArgumentException: Invalid CRC",
            LOADING_DV,
            "table db.t: a delete file of the table is damaged: IllegalArgumentException: "
            "Invalid CRC",
            "IllegalArgumentException: Invalid CRC",
        ),
        (
            "java.io.UncheckedIOException: java.io.EOFException: Reached the end of stream with "
            "71 bytes left to read\nCaused by: java.io.EOFException: Reached the end of stream "
            "with 71 bytes left to read",
            LOADING_DV,
            "table db.t: a delete file of the table is damaged: EOFException: Reached the end of "
            "stream with 71 bytes left to read",
            "EOFException: Reached the end of stream with 71 bytes left to read",
        ),
    ],
    ids=["missing", "missing-s3", "not-parquet", "dv-crc", "dv-cut-short"],
)
def test_a_delete_file_a_spark_read_cannot_read_is_a_deletion_vector_error(
    cause: str, frames: tuple[str, ...], line: str, check: str
) -> None:
    error = classify_spark_failure(failed_read(cause, *frames), "read the keys of t", "db.t")
    assert isinstance(error, DeletionVectorError) and error.exit_code == 73
    assert str(error) == line
    assert error.table == "db.t" and error.check == check and error.hint == HINT


def test_a_data_file_a_spark_read_cannot_find_stays_a_statement_error() -> None:
    cause = f"org.apache.iceberg.exceptions.NotFoundException: File does not exist: {DATA}"
    error = classify_spark_failure(failed_read(cause, *READING_DATA), "SELECT 1", "db.t")
    assert type(error) is SparkStatementError


class Throwable:
    """A Java throwable as Py4J hands it over (its object id, its ``toString``)."""

    _target_id = "o1"

    def __init__(self, text: str) -> None:
        self.text = text

    def toString(self) -> str:  # noqa: N802 (Java's name)
        return self.text


class FileIO:
    """A table's ``FileIO`` over a dict of files (a missing one: Iceberg's NotFoundException)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.location = ""

    def newInputFile(self, location: str) -> FileIO:  # noqa: N802 (Java's name)
        self.location = location
        return self

    def newStream(self) -> Any:  # noqa: N802 (Java's name)
        if self.location not in self.files:
            found = f"org.apache.iceberg.exceptions.NotFoundException: {self.location}"
            raise Py4JJavaError("newStream", Throwable(found))
        return Stream(self.files[self.location])


class Stream(io.BytesIO):
    def readAllBytes(self) -> bytes:  # noqa: N802 (Java's name)
        return self.read()


def position_deletes(*paths: str) -> bytes:
    out = io.BytesIO()
    rows = {"file_path": list(paths), "pos": list(range(len(paths)))}
    pq.write_table(pa.table(rows), out, write_page_checksum=True)
    return out.getvalue()


@pytest.mark.parametrize(
    ("held", "line"),
    [
        (None, f"{DELETES}, table db.t: the delete file is missing"),
        (b"not parquet", f"{DELETES}, table db.t: the delete file is damaged: "),
        (position_deletes(DATA, "b")[:-20], f"{DELETES}, table db.t: the delete file is damaged: "),
    ],
    ids=["missing", "not-parquet", "truncated"],
)
def test_the_data_files_a_position_delete_file_names_cannot_be_read_from_a_bad_one(
    held: bytes | None, line: str
) -> None:
    """``named_data_files`` (the catch-up's and maintenance's read of a position-delete file
    naming several data files): missing or damaged, a typed error, never a statement error."""
    files = {} if held is None else {DELETES: held}
    with pytest.raises(DeletionVectorError) as caught:
        named_data_files(FileIO(files), DELETES, "db.t")
    assert str(caught.value).startswith(line), str(caught.value)
    assert caught.value.table == "db.t" and caught.value.file == DELETES


def test_the_data_files_a_position_delete_file_names_are_read_once_each() -> None:
    held = {DELETES: position_deletes(DATA, "b", DATA)}
    assert named_data_files(FileIO(held), DELETES, "db.t") == {DATA, "b"}


def test_a_dv_failing_its_crc_says_its_file_and_table_once_each() -> None:
    blob = bytearray(encode_vector(Positions([1, 5, 9])))
    blob[-1] ^= 1
    with pytest.raises(DeletionVectorError) as caught:
        decode_vector(bytes(blob), "/w/d.puffin", DATA, "db.t")
    line = str(caught.value)
    assert line.startswith(f"/w/d.puffin, table db.t: the deletion vector (deletes of {DATA}) ")
    assert line.count("/w/d.puffin") == line.count("db.t") == 1
