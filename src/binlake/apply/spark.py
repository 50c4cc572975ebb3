"""Spark sessions for the applier: the embedded default, or any cluster and catalog by config.

The embedded default is ``local[2]`` Spark with a Hadoop catalog (named ``lake``) in a local
warehouse folder, Iceberg's SQL extensions, and the Iceberg runtime from
``binlake.apply.runtime``. Anything else is plain passthrough: ``SparkSettings.conf`` goes to
the session as given, so a ``spark.sql.catalog.<name>`` there (REST, Hive, Hadoop on S3/HDFS,
Glue...) replaces the embedded catalog, ``spark.jars.packages`` / ``spark.jars`` naming an
Iceberg runtime replace the cached jars, and any master works.

What binlake sets on every session, unless the configuration sets it: UTC session time zone,
no UI, no console progress bars, quiet Java logs (``log4j2.properties`` beside this module),
few shuffle partitions. ``PYSPARK_PYTHON`` is the running interpreter and ``SPARK_LOCAL_IP``
127.0.0.1 for local masters. Py4J's pinned threads (pyspark's default) are required: snapshot
properties ride in a Java thread-local (``binlake.apply.commit``).

One session per process: ``build_session`` refuses to start a second while one runs (pyspark
would silently hand back the first with its old settings). ``stop_session`` stops it and the
Py4J callback server ``binlake.apply.commit`` started for it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark import SparkContext
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from binlake.apply.runtime import ensure_iceberg_jars, find_java
from binlake.errors import BinlakeError, DiskFullError, SparkSetupError, SparkStatementError

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
ICEBERG_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
#: Classes a working Iceberg runtime must provide (the second is what the PyPI jar lacks).
PROBE_CLASSES = (
    ("org.apache.iceberg.spark.SparkCatalog", "iceberg-runtime"),
    ("org.apache.iceberg.shaded.com.fasterxml.jackson.databind.ObjectMapper", "iceberg-jackson"),
)
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
_WAREHOUSE_KEY = re.compile(r"spark\.sql\.catalog\.[^.]+\.warehouse")
#: Longest Java cause chain walked (a guard against cycles the JVM should not have).
_MAX_CAUSES = 16


@dataclass(frozen=True)
class SparkSettings:
    """Everything ``build_session`` needs; ``conf`` is passed through untouched."""

    master: str = "local[2]"
    app_name: str = "binlake"
    #: Folder of the embedded Hadoop catalog (unused when ``conf`` defines the catalog).
    warehouse: Path = Path("warehouse")
    #: The Spark catalog binlake writes to.
    catalog: str = "lake"
    #: Any Spark or Iceberg configuration; wins over every default binlake sets.
    conf: Mapping[str, str] = field(default_factory=dict)
    #: Extra jars for ``spark.jars`` (JDBC drivers, an Iceberg runtime of your own...).
    jars: tuple[str, ...] = ()
    #: Maven coordinates for ``spark.jars.packages`` (needs a reachable Maven repository).
    packages: tuple[str, ...] = ()
    #: Level of Spark's root logger once started (Spark's ``setLogLevel``).
    log_level: str = "ERROR"
    shuffle_partitions: int = 2

    @property
    def is_local(self) -> bool:
        return self.master == "local" or self.master.startswith("local[")

    @property
    def embedded_catalog(self) -> bool:
        """True when binlake defines the catalog (a Hadoop catalog in ``warehouse``)."""
        return f"spark.sql.catalog.{self.catalog}" not in self.conf


def _user_jars(settings: SparkSettings) -> list[str]:
    out = list(settings.jars)
    out += [j for j in settings.conf.get("spark.jars", "").split(",") if j.strip()]
    return out


def _user_packages(settings: SparkSettings) -> list[str]:
    out = list(settings.packages)
    out += [p for p in settings.conf.get("spark.jars.packages", "").split(",") if p.strip()]
    return out


def brings_own_iceberg(settings: SparkSettings) -> bool:
    """True when the configured jars or packages include an Iceberg Spark runtime."""
    return any("iceberg-spark-runtime" in item for item in _user_jars(settings)) or any(
        "iceberg-spark-runtime" in item for item in _user_packages(settings)
    )


def session_conf(settings: SparkSettings, iceberg_jars: tuple[Path, ...] = ()) -> dict[str, str]:
    """The full Spark configuration of a session (pure: computes, starts nothing)."""
    conf: dict[str, str] = {
        "spark.app.name": settings.app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG_CONFIG}",
    }
    if settings.embedded_catalog:
        prefix = f"spark.sql.catalog.{settings.catalog}"
        conf[prefix] = ICEBERG_CATALOG
        conf[f"{prefix}.type"] = "hadoop"
        conf[f"{prefix}.warehouse"] = str(settings.warehouse.resolve())
        # Other processes write these tables too (`binlake snapshot`, maintenance jobs, the
        # run before a crash): every statement loads the table's current metadata, so a MERGE
        # never starts from a cached, stale snapshot (a needless commit conflict).
        conf[f"{prefix}.cache-enabled"] = "false"
    jars = [*(str(p) for p in iceberg_jars), *_user_jars(settings)]
    if jars:
        conf["spark.jars"] = ",".join(jars)
    if _user_packages(settings):
        conf["spark.jars.packages"] = ",".join(_user_packages(settings))
    for key, value in settings.conf.items():
        if key in ("spark.jars", "spark.jars.packages"):
            continue
        conf[key] = _merged(key, conf.get(key), value)
    return conf


def _merged(key: str, ours: str | None, theirs: str) -> str:
    """The user's value, keeping Iceberg's extensions and our log config beside theirs."""
    if ours is None or ours == theirs:
        return theirs
    if key == "spark.sql.extensions" and ICEBERG_EXTENSIONS not in theirs:
        return f"{ICEBERG_EXTENSIONS},{theirs}"
    if key == "spark.driver.extraJavaOptions" and "log4j2.configurationFile" not in theirs:
        return f"{ours} {theirs}"
    return theirs


def build_session(settings: SparkSettings) -> SparkSession:
    """Start the Spark session ``settings`` describe, with a working Iceberg runtime.

    Raises ``SparkSetupError`` when Java, the Iceberg runtime or its shaded Jackson classes are
    missing, when a session already runs in this process, or when Spark cannot start."""
    find_java()
    _require_pinned_threads()
    if SparkContext._active_spark_context is not None:
        raise SparkSetupError(
            "a Spark session is already running in this process",
            hint="stop it first (binlake.apply.spark.stop_session)",
            component="session",
        )
    jars = () if brings_own_iceberg(settings) else ensure_iceberg_jars().paths
    _prepare_environment(settings)
    builder = SparkSession.builder.master(settings.master)
    for key, value in session_conf(settings, jars).items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except PySparkException as error:
        raise SparkSetupError(
            f"Spark did not start: {error}",
            hint="check the [spark] settings and that Java 17 runs (`java -version`)",
            component="session",
        ) from None
    spark.sparkContext.setLogLevel(settings.log_level)
    try:
        probe_iceberg(spark)
    except SparkSetupError:
        spark.stop()
        raise
    return spark


def _require_pinned_threads() -> None:
    if os.environ.get("PYSPARK_PIN_THREAD", "true").lower() != "true":
        raise SparkSetupError(
            "PYSPARK_PIN_THREAD is off: snapshot properties would not reach Iceberg's commits",
            hint="unset PYSPARK_PIN_THREAD (pyspark pins threads by default)",
            component="py4j",
        )


def _prepare_environment(settings: SparkSettings) -> None:
    if settings.is_local:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    else:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def probe_iceberg(spark: SparkSession) -> None:
    """Check that the session can load Iceberg's catalog and its shaded Jackson classes."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    for name, component in PROBE_CLASSES:
        try:
            jvm.java.lang.Class.forName(name, False, loader)
        except Exception:
            raise _missing_class_error(name, component) from None


def _missing_class_error(name: str, component: str) -> SparkSetupError:
    if component == "iceberg-jackson":
        return SparkSetupError(
            f"the Iceberg runtime on the classpath lacks its shaded Jackson classes ({name})",
            hint="use the repaired runtime: remove the jar from spark.jars and run "
            "`make spark-deps`, or add the jar `python -m binlake.apply.runtime` builds",
            component=component,
        )
    return SparkSetupError(
        f"no Iceberg runtime on the classpath ({name} not found)",
        hint="run `make spark-deps`, or set spark.jars.packages / spark.jars in [spark]",
        component=component,
    )


def stop_session(spark: SparkSession) -> None:
    """Stop the session and the Py4J callback server started for it (idempotent)."""
    from binlake.apply.commit import close_callbacks

    close_callbacks(spark)
    spark.stop()


def spark_error(
    error: Exception, statement: str | None = None, table: str | None = None
) -> BinlakeError:
    """The typed error for an exception from Spark, with setup problems and a full disk
    recognised (the Java cause chain is read when the Python text does not tell)."""
    text = str(error)
    if disk_full_reason(text) is None:
        text = f"{text}\n{_java_causes(error)}"
    warehouse = None if disk_full_reason(text) is None else session_warehouse()
    return classify_spark_failure(text, statement, table, warehouse)


def classify_spark_failure(
    text: str, statement: str | None = None, table: str | None = None, warehouse: str | None = None
) -> BinlakeError:
    """The typed error for the text of a Spark/Java failure (its cause chain included); pure.
    ``warehouse`` is the catalog's warehouse, named by a ``DiskFullError``."""
    if _SHADED_JACKSON_MARK in text or _SHADED_JACKSON_MARK.replace("/", ".") in text:
        return _missing_class_error(_SHADED_JACKSON_MARK.replace("/", "."), "iceberg-jackson")
    if "org.apache.iceberg.spark.SparkCatalog" in text and "ClassNotFound" in text:
        return _missing_class_error("org.apache.iceberg.spark.SparkCatalog", "iceberg-runtime")
    reason = disk_full_reason(text)
    if reason is not None:
        return DiskFullError(
            f"disk full while Spark was writing: {reason}",
            file=warehouse,
            table=table,
            hint=DISK_FULL_HINT,
        )
    shown = None if statement is None else " ".join(statement.split())[:_STATEMENT_CHARS]
    return SparkStatementError(_first_line(text), table=table, statement=shown)


def disk_full_reason(text: str) -> str | None:
    """Which disk-full mark ``text`` holds (the first in ``DISK_FULL_MARKS``), or None."""
    return next((mark for mark in DISK_FULL_MARKS if mark in text), None)


def configured_warehouse(conf: Mapping[str, str]) -> str | None:
    """The catalog warehouse a Spark configuration names, if it names exactly one."""
    found = {value for key, value in conf.items() if _WAREHOUSE_KEY.fullmatch(key)}
    return found.pop() if len(found) == 1 else None


def session_warehouse() -> str | None:
    """The warehouse of the running session's catalog, when known."""
    context = SparkContext._active_spark_context
    if context is None:
        return None
    try:
        return configured_warehouse(dict(context.getConf().getAll()))
    except Exception:  # the JVM may already be gone; the error is still typed without it
        return None


def _java_causes(error: Exception) -> str:
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


def _first_line(text: str) -> str:
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
