"""Commits that carry binlake's position: the primitive the exactly-once design rests on.

Each applier commit writes the source position of its batch into the Iceberg snapshot it creates
(``binlake.position``, ``binlake.gtid``, ``binlake.relay``, ``binlake.batch``), so the data and
the position become durable in one atomic commit with zero extra fsyncs (seed 004, WL#5125).
On restart ``binlake.lake.spark.lineage.latest_binlake_summary`` reads them back from the table
itself.

* SQL statements (MERGE INTO, INSERT, DELETE, UPDATE, ALTER) run inside Iceberg's
  ``org.apache.iceberg.spark.CommitMetadata.withCommitProperties(map, callable, exceptionClass)``.
  The callable is a Python object (a ``java.util.concurrent.Callable`` through Py4J) that runs
  the statement. The properties live in a Java thread-local, so the statement must run on the
  very Java thread that set them: pyspark's pinned threads give that, and the callable checks it
  (``CommitMetadata.commitProperties()`` must show the properties) before running anything.
* DataFrame writes take ``.option("snapshot-property.KEY", value)``.

A statement that fails commits nothing of its own: Iceberg commits only after every task
succeeded (the tests check this with a MERGE that fails mid-write). Whether an error came before
or after the commit is never guessed: the table's newest binlake summary says what it holds.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession

from binlake.errors import SparkSetupError, SparkStatementError
from binlake.lake.catalog.summary import checked_properties
from binlake.lake.spark.callbacks import ensure_callbacks
from binlake.lake.spark.errors import spark_errors
from binlake.lake.write.applied_tag import tag_follows

COMMIT_METADATA = "org.apache.iceberg.spark.CommitMetadata"


# ---- the Py4J callback server -----------------------------------------------------------------


class _Statement:
    """A ``java.util.concurrent.Callable`` that runs one SQL statement (called from Java).

    Exceptions are kept and re-raised in Python after Java returns, so the caller gets
    pyspark's own exception rather than a Py4J wrapper of it."""

    def __init__(self, spark: SparkSession, statement: str, properties: dict[str, str]) -> None:
        self.spark = spark
        self.statement = statement
        self.properties = properties
        self.error: BaseException | None = None
        self.ran = False

    def call(self) -> None:
        try:
            self._check_thread_local()
            self.spark.sql(self.statement)
            self.ran = True
        except BaseException as error:  # handed back to the Python caller, never lost
            self.error = error

    def _check_thread_local(self) -> None:
        jvm = self.spark.sparkContext._jvm
        assert jvm is not None
        visible = dict(jvm.org.apache.iceberg.spark.CommitMetadata.commitProperties().items())
        if visible != self.properties:
            raise SparkSetupError(
                "the statement would run on a Java thread that does not see the commit "
                f"properties (it sees {visible})",
                hint="py4j must pin threads (PYSPARK_PIN_THREAD unset or true)",
                component="py4j",
            )

    class Java:
        implements = ["java.util.concurrent.Callable"]


def execute_with_commit_properties(
    spark: SparkSession,
    statement: str,
    properties: Mapping[str, str],
    table: str | None = None,
    *,
    lake_table: str | None = None,
) -> None:
    """Run ``statement`` so that the snapshot it commits to ``lake_table`` (default:
    ``table``) carries ``properties`` in its summary (``table``: for messages); the table's
    ``binlake-applied`` tag follows it (``applied_tag.tag_follows``).

    Raises ``SparkStatementError`` (or ``SparkSetupError``) when the statement fails."""
    props = checked_properties(properties)
    name = lake_table or table
    if name is None:
        raise ValueError("a commit with properties needs the table it commits to")
    with tag_follows(spark, name, table):
        _execute(spark, statement, props, table)


def _execute(spark: SparkSession, statement: str, props: dict[str, str], table: str | None) -> None:
    ensure_callbacks(spark)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    java_map = jvm.java.util.HashMap()
    for key, value in props.items():
        java_map.put(key, value)
    exception_class = jvm.java.lang.Class.forName("java.lang.RuntimeException")
    callable_ = _Statement(spark, statement, props)
    with spark_errors(statement, table):
        jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(
            java_map, callable_, exception_class
        )
        if callable_.error is not None:
            raise callable_.error
    if not callable_.ran:
        raise SparkStatementError("the statement was not run", table=table, statement=statement)


def append_with_commit_properties(
    frame: DataFrame, table: str, properties: Mapping[str, str]
) -> None:
    """Append ``frame`` to ``table`` in one snapshot whose summary carries ``properties``; the
    table's ``binlake-applied`` tag follows it (``applied_tag.tag_follows``)."""
    writer = frame.writeTo(table)
    for key, value in checked_properties(properties).items():
        writer = writer.option(f"snapshot-property.{key}", value)
    with tag_follows(spark_of(frame), table, table), spark_errors(f"append to {table}", table):
        writer.append()


def spark_of(frame: DataFrame) -> SparkSession:
    session = frame.sparkSession
    assert isinstance(session, SparkSession)
    return session


# ---- reading positions back --------------------------------------------------------------------
