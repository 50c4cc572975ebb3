"""Spark and Java failures as typed binlake errors.

``spark_errors`` (the context manager) turns any exception Spark raises inside a block into
``SparkStatementError``, ``SparkSetupError`` (a missing Iceberg runtime or its shaded Jackson
classes), ``DiskFullError`` (the Java cause chain says ENOSPC, EDQUOT or an HDFS quota), a
``CatalogError`` (the catalog's database is down, refuses the login, ...: see
``binlake.lake.catalog.failures``), a ``SparkMasterError`` (the cluster went away), or
``CommitConflictError`` when another writer committed to the table first (``commit_conflict``;
the applier's retry, ``binlake.retry``, is for those and for a failing catalog), or a
``DeletionVectorError`` when Iceberg's reader of a task's delete files failed (a DV or a
position-delete file missing, truncated, not Parquet, a DV failing its CRC:
``delete_file_failure``; ``delete_file_error`` shapes every such error the lake raises), naming
the statement and the table. ``classify_spark_failure`` is the pure part, on the error's text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from binlake.errors import (
    BinlakeError,
    CommitConflictError,
    DeletionVectorError,
    DiskFullError,
    SparkSetupError,
    SparkStatementError,
)
from binlake.lake.catalog.failures import classify_catalog_failure, classify_master_failure
from binlake.lake.spark.conf import configured_catalog_uri, configured_warehouse, running_conf

_SHADED_JACKSON_MARK = "org/apache/iceberg/shaded/com/fasterxml/jackson"
_STATEMENT_CHARS = 300
#: What a Java error chain says when a write found its disk (or quota) full: ENOSPC, EDQUOT, and
#: HDFS's space quota. Hadoop wraps the first in FSError, Spark in SparkException, Iceberg in
#: RuntimeIOException or CommitFailedException: the text is matched anywhere in the chain.
DISK_FULL_MARKS = ("No space left on device", "Disk quota exceeded", "DSQuotaExceededException")
DISK_FULL_HINT = (
    "free space on the warehouse's disk (or on Spark's spark.local.dir), then run the command "
    "again: nothing is lost, a table's position moves only with its Iceberg commit"
)
#: Longest Java cause chain walked (a guard against cycles the JVM should not have).
_MAX_CAUSES = 16
#: Iceberg's exceptions for a commit another writer beat: the metadata moved on
#: (``CommitFailedException``: "Version N already exists", "stale table metadata"), or the
#: outcome is unknown (``CommitStateUnknownException``: the table's newest snapshot tells).
CONFLICT_EXCEPTIONS = (
    "org.apache.iceberg.exceptions.CommitFailedException",
    "org.apache.iceberg.exceptions.CommitStateUnknownException",
)
VALIDATION_EXCEPTION = "org.apache.iceberg.exceptions.ValidationException"
#: What Iceberg's ``ValidationException`` says when a concurrent commit conflicts with this one
#: (a DELETE or a compaction removed or rewrote files this commit's deletes refer to, or added
#: rows it must see; or, for a manifest rewrite, another commit merged or replaced a manifest it
#: replaces: seen with a scheduled round beside the applier's commits); any other validation
#: failure is not a conflict.
CONFLICT_VALIDATIONS = (
    "found conflicting",
    "found new conflicting",
    "missing data files",
    "missing required files",
    "found new delete for replaced data file",
    "found new position delete for replaced data file",
    "could not be found in the latest snapshot",
    "found concurrently added dv",
)
_EXCEPTION_LINE = re.compile(r"(org\.apache\.iceberg\.exceptions\.\w+):\s*(.*)")
#: A row delta staged with a position-delete file on a format-v2 table that another writer
#: upgraded to v3 meanwhile (Iceberg then takes deletion vectors only): planned again, the batch
#: writes DVs.
_UPGRADED = re.compile(r"IllegalArgumentException:\s*(Must use DVs for position deletes in V\d+)")
#: A commit planned on a snapshot another writer's expiry removed meanwhile (a maintenance round
#: beside the batches): the commit's validation cannot walk back to it. A conflict: the retry
#: plans the batch again on the table's current snapshot.
_EXPIRED_BASE = re.compile(
    r"java\.lang\.IllegalArgumentException:\s*(Snapshot -?\d+ is not an ancestor of -?\d+)"
)

#: Iceberg's loader of the delete files a scan task applies: a Spark failure whose Java stack
#: passes through it happened while a delete file was read.
DELETE_LOADER = "org.apache.iceberg.data.BaseDeleteLoader"
#: The delete file a loader's failure names, when it names one: missing (Iceberg's
#: ``NotFoundException`` from Hadoop's or another ``FileIO``), or not Parquet (Parquet's reader).
#: A DV cut short or failing its CRC ("Invalid CRC") names none.
_NAMED_FILE = re.compile(
    r"(?P<missing>NotFoundException): (?:File does not exist|Failed to open input stream for "
    r"file): (?P<path>\S+)|RuntimeException: (?P<parquet>\S+) is not a Parquet file"
)
#: A Java exception's line (``Caused by: `` aside): its class and its message.
_JAVA_LINE = re.compile(r"^(?:Caused by: )?(?:[\w$]+\.)+(\w+(?:Exception|Error)): (.+)$", re.M)


def missing_class_error(name: str, component: str) -> SparkSetupError:
    """The error for an Iceberg runtime (or its shaded Jackson) missing from the classpath."""
    if component == "iceberg-jackson":
        return SparkSetupError(
            f"the Iceberg runtime on the classpath lacks its shaded Jackson classes ({name})",
            hint="use the repaired runtime: remove the jar from spark.jars and run "
            "`make spark-deps`, or add the jar `python -m binlake.lake.spark.runtime` builds",
            component=component,
        )
    return SparkSetupError(
        f"no Iceberg runtime on the classpath ({name} not found)",
        hint="run `make spark-deps`, or set spark.jars.packages / spark.jars in [spark]",
        component=component,
    )


def spark_error(
    error: Exception, statement: str | None = None, table: str | None = None
) -> BinlakeError:
    """The typed error for an exception from Spark, with setup problems and a full disk
    recognised (the Java cause chain is read when the Python text does not tell)."""
    text = str(error)
    if disk_full_reason(text) is None and commit_conflict(text) is None:
        text = f"{text}\n{java_causes(error)}"
    conf = running_conf()
    warehouse = None if disk_full_reason(text) is None else configured_warehouse(conf)
    catalog, uri = configured_catalog_uri(conf)
    return classify_spark_failure(
        text,
        statement,
        table,
        warehouse,
        catalog=catalog,
        uri=uri,
        master=conf.get("spark.master"),
    )


def classify_spark_failure(
    text: str,
    statement: str | None = None,
    table: str | None = None,
    warehouse: str | None = None,
    *,
    catalog: str | None = None,
    uri: str | None = None,
    master: str | None = None,
) -> BinlakeError:
    """The typed error for the text of a Spark/Java failure (its cause chain included); pure.
    ``warehouse`` is the catalog's warehouse, named by a ``DiskFullError``; ``catalog`` and
    ``uri`` name the catalog a ``CatalogError`` is about, ``master`` the Spark master."""
    typed: BinlakeError | None = classify_catalog_failure(
        text, catalog=catalog, uri=uri, table=table
    )
    if typed is None and master is not None:
        typed = classify_master_failure(text, master=master)
    if typed is not None:
        return typed
    if _SHADED_JACKSON_MARK in text or _SHADED_JACKSON_MARK.replace("/", ".") in text:
        return missing_class_error(_SHADED_JACKSON_MARK.replace("/", "."), "iceberg-jackson")
    if "org.apache.iceberg.spark.SparkCatalog" in text and "ClassNotFound" in text:
        return missing_class_error("org.apache.iceberg.spark.SparkCatalog", "iceberg-runtime")
    reason = disk_full_reason(text)
    if reason is not None:
        return DiskFullError(
            f"disk full while Spark was writing: {reason}",
            file=warehouse,
            table=table,
            hint=DISK_FULL_HINT,
        )
    shown = None if statement is None else " ".join(statement.split())[:_STATEMENT_CHARS]
    conflict = commit_conflict(text)
    if conflict is not None:
        return CommitConflictError(
            f"another writer committed first: {conflict}",
            table=table,
            statement=shown,
            reason=conflict,
        )
    deletes = delete_file_failure(text, table)
    if deletes is not None:
        return deletes
    return SparkStatementError(first_line(text), table=table, statement=shown)


def delete_file_failure(text: str, table: str | None) -> DeletionVectorError | None:
    """The ``DeletionVectorError`` for the text of a Spark failure (its cause chain and the
    failed task's stack included) that happened while Iceberg read a delete file: the file
    named when the text names it (None: not such a failure)."""
    if DELETE_LOADER not in text:
        return None
    causes = _JAVA_LINE.findall(text)
    reason = ": ".join(causes[-1]) if causes else first_line(text)
    named = _NAMED_FILE.search(text)
    if named is not None and named.group("missing"):
        return delete_file_error(named.group("path"), table, "missing", "is missing")
    location = None if named is None else named.group("parquet")
    if location is not None:  # the file once: in the error's line, not in its reason too
        reason = reason.replace(f"{location} is ", "", 1)
    return delete_file_error(location, table, reason, f"is damaged: {reason}")


def delete_file_error(
    location: str | None, table: str | None, check: str, what: str, data_file: str | None = None
) -> DeletionVectorError:
    """A delete file (``location``; None: not known) the lake must read is missing or damaged:
    the error says each of file, table and data file once (the file and the table are its
    fields, which the error's line shows first)."""
    of = f" (deletes of {data_file})" if data_file else ""
    subject = "the delete file" if location is not None else "a delete file of the table"
    return DeletionVectorError(f"{subject}{of} {what}", table=table, file=location, check=check)


def commit_conflict(text: str) -> str | None:
    """Iceberg's own line (``Exception: message``) when ``text`` (an error and its Java cause
    chain) says another writer committed first; None otherwise."""
    for match in _EXCEPTION_LINE.finditer(text):
        name, message = match.group(1), match.group(2).strip()
        if name in CONFLICT_EXCEPTIONS:
            return f"{name.rsplit('.', 1)[-1]}: {message}"
        if name == VALIDATION_EXCEPTION and any(m in message.lower() for m in CONFLICT_VALIDATIONS):
            return f"ValidationException: {message}"
    upgraded = _UPGRADED.search(text)
    if upgraded is not None:
        return f"the table's format version changed meanwhile: {upgraded.group(1)}"
    expired = _EXPIRED_BASE.search(text)
    if expired is not None:
        return f"the snapshot the commit was planned on was expired meanwhile: {expired.group(1)}"
    return None


def disk_full_reason(text: str) -> str | None:
    """Which disk-full mark ``text`` holds (the first in ``DISK_FULL_MARKS``), or None."""
    return next((mark for mark in DISK_FULL_MARKS if mark in text), None)


def java_causes(error: Exception) -> str:
    """``toString()`` of each Java throwable in the cause chain of a Py4J or pyspark error, one
    a line ("" for a Python error, or when the JVM cannot be asked)."""
    throwable = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
    lines: list[str] = []
    try:
        while throwable is not None and len(lines) < _MAX_CAUSES:
            lines.append(str(throwable.toString()))
            throwable = throwable.getCause()
    except Exception:  # a dead gateway: what was read so far still counts
        pass
    return "\n".join(lines)


def first_line(text: str) -> str:
    """The first meaningful line of a Spark/Java error (Py4J adds a header line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if not line.startswith("An error occurred while calling"):
            return line.removeprefix(": ")[:1000]
    return lines[0][:1000] if lines else "Spark failed without a message"


@contextmanager
def spark_errors(statement: str | None = None, table: str | None = None) -> Iterator[None]:
    """Turn any exception Spark raises inside the block into a typed binlake error."""
    try:
        yield
    except BinlakeError:
        raise
    except Exception as error:
        raise spark_error(error, statement, table) from error
