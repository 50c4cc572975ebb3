"""A full disk under Spark becomes `DiskFullError` (exit 74), recognised from the Java failure's
text and cause chain, without starting Spark."""

from __future__ import annotations

from binlake.errors import DiskFullError, SparkStatementError
from binlake.lake.spark.conf import configured_warehouse, session_warehouse
from binlake.lake.spark.errors import DISK_FULL_MARKS, classify_spark_failure, spark_error

# The first lines of what `binlake replicate` got when the warehouse's tmpfs filled up (measured
# in tests/acceptance/test_acceptance_disk_full.py): a task's data file write.
TASK_WRITE = (
    "An error occurred while calling o123.sql.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 21.0 "
    "failed 1 times, most recent failure: Lost task 0.0 in stage 21.0 (TID 14) (localhost "
    "executor driver): org.apache.hadoop.fs.FSError: java.io.IOException: No space left on device\n"
    "\tat org.apache.hadoop.fs.RawLocalFileSystem$LocalFSFileOutputStream.write("
    "RawLocalFileSystem.java:349)\n"
    "Caused by: java.io.IOException: No space left on device\n"
)
# ... and the driver's manifest write during the Iceberg commit (measured the same way).
MANIFEST_WRITE = (
    "An error occurred while calling o45.sql.\n"
    ": org.apache.hadoop.fs.FSError: java.io.IOException: No space left on device\n"
    "\tat org.apache.iceberg.ManifestWriter.close(ManifestWriter.java:221)\n"
)


class FakeThrowable:
    """What Py4J hands back for a Java exception: ``toString()`` and ``getCause()``."""

    def __init__(self, text: str, cause: FakeThrowable | None = None) -> None:
        self.text = text
        self.cause = cause

    def toString(self) -> str:  # noqa: N802 (the Java name)
        return self.text

    def getCause(self) -> FakeThrowable | None:  # noqa: N802
        return self.cause


class CapturedError(Exception):
    """Like pyspark's captured exceptions: a short message, the Java throwable in ``_origin``."""

    def __init__(self, message: str, origin: FakeThrowable) -> None:
        super().__init__(message)
        self._origin = origin


def test_a_no_space_left_on_device_cause_becomes_disk_full() -> None:
    error = classify_spark_failure(
        TASK_WRITE, "MERGE INTO lake.db.t USING v", "db.t", warehouse="/lake/warehouse"
    )
    assert isinstance(error, DiskFullError)
    assert error.exit_code == 74
    assert (error.file, error.table) == ("/lake/warehouse", "db.t")
    assert "disk full" in str(error) and "No space left on device" in str(error)
    assert "free space on the warehouse's disk" in error.hint and "\n" not in error.hint


def test_a_full_disk_during_the_iceberg_commit_is_disk_full_too() -> None:
    error = spark_error(RuntimeError(MANIFEST_WRITE), "MERGE INTO lake.db.t USING v", "db.t")
    assert isinstance(error, DiskFullError) and error.table == "db.t"
    # The warehouse is the running session's, if any (the suite may have started one).
    assert error.file == session_warehouse()


def test_a_quota_or_hdfs_space_quota_counts_as_a_full_disk() -> None:
    for mark in DISK_FULL_MARKS:
        error = classify_spark_failure(f"java.io.IOException: {mark}")
        assert isinstance(error, DiskFullError), mark


def test_a_full_disk_deep_in_the_java_cause_chain_is_found() -> None:
    chain = FakeThrowable(
        "org.apache.iceberg.exceptions.RuntimeIOException: Failed to write json to file",
        FakeThrowable("java.io.IOException: No space left on device"),
    )
    error = spark_error(CapturedError("Failed to write json to file", chain), table="db.t")
    assert isinstance(error, DiskFullError)
    assert error.table == "db.t"


def test_other_io_failures_stay_statement_errors() -> None:
    text = "An error occurred while calling o9.sql.\n: java.io.IOException: Permission denied\n"
    error = spark_error(RuntimeError(text), "INSERT INTO lake.db.t VALUES (1)", "db.t")
    assert isinstance(error, SparkStatementError)
    assert error.message == "java.io.IOException: Permission denied"


def test_the_warehouse_is_named_only_when_the_configuration_has_exactly_one() -> None:
    one = {"spark.sql.catalog.lake.warehouse": "/wh", "spark.sql.catalog.lake.type": "hadoop"}
    assert configured_warehouse(one) == "/wh"
    two = {**one, "spark.sql.catalog.other.warehouse": "s3://bucket/wh"}
    assert configured_warehouse(two) is None
    assert configured_warehouse({"spark.app.name": "binlake"}) is None
